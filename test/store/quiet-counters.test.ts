// Counter deltas of zero add no metric_counters rows (internals/writes.ts writeMetrics) but for the first
// counter of each family and in the family's first batch of an hour, and reads stay what they were when
// every delta had its rows: a quiet counter reads 0 in every sampled minute, a counter never reported
// (null) stays absent, a minute without a batch stays a gap, hours hold the sums. Both stores.
import { beforeAll, describe, expect, test } from 'bun:test'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { type StoreKind, storeKinds } from '../support/server.ts'
import { storeAccount } from '../support/store-account.ts'

const MINUTE = 60_000
const HOUR = 3_600_000
/** An hour boundary 5 hours back: every bucket written is in the past and inside a 24-hour window. */
const T0 = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR

/** A batch with bgwriter's buffers_alloc and checkpoints_timed, and one I/O row's reads and writes. */
function batch(
  collectedAt: number,
  c: { alloc: number; checkpoints: number; reads: number; writes: number },
): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: collectedAt,
    interval_seconds: 20,
    agent_version: 'test',
    database: { name: 'quiet', engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
    // buffers_backend is not reported (null): it must not read as 0.
    bgwriter: { checkpoints_timed: c.checkpoints, buffers_clean: 0, buffers_backend: null, buffers_alloc: c.alloc },
    io_stats: [
      {
        backend_type: 'client backend',
        object: 'relation',
        context: 'normal',
        counters: { reads: c.reads, writes: c.writes, hits: 0 },
      },
    ],
  }
}

describe.each(storeKinds)('quiet counters (%s store)', (kind: StoreKind) => {
  const account = storeAccount(kind, 'Quiet Inc')
  let store: SqlStore
  let id = ''
  beforeAll(() => {
    store = account.store
  })

  async function ingest(b: IngestBatch, now?: number): Promise<void> {
    id = await account.ingest(b, now)
  }

  const counterRows = async () =>
    Number(
      (await store.driver.get<{ n: unknown }>('SELECT COUNT(*) AS n FROM metric_counters WHERE database_id = $1', [
        id,
      ]))!.n,
    )

  test('zero deltas read as 0 in sampled minutes, absent counters stay absent, gaps stay gaps, hours sum', async () => {
    // Minute 0 (the hour's first batch: every counter written). Minute 1: only buffers_alloc and reads move.
    // Minute 2: nothing moves. Minute 3: no batch. Minute 4: checkpoints_timed and writes move. Next hour:
    // a quiet first batch, then a late batch into minute 3.
    await ingest(batch(T0 + 5_000, { alloc: 10, checkpoints: 0, reads: 0, writes: 0 }))
    const first = await counterRows()
    // The hour: every counter reported (bgwriter's 3 numbers, buffers_backend being null, and 3 I/O
    // ones); the minute: each family's first counter, and buffers_alloc (moved).
    expect(first).toBe(3 + 3 + 3)
    await ingest(batch(T0 + MINUTE + 5_000, { alloc: 7, checkpoints: 0, reads: 2, writes: 0 }))
    await ingest(batch(T0 + MINUTE + 25_000, { alloc: 3, checkpoints: 0, reads: 0, writes: 0 }))
    // Minute 1's rows: each family's first counter (checkpoints_timed, reads) and buffers_alloc (moved).
    expect(await counterRows()).toBe(first + 3)
    await ingest(batch(T0 + 2 * MINUTE + 5_000, { alloc: 0, checkpoints: 0, reads: 0, writes: 0 }))
    expect(await counterRows()).toBe(first + 3 + 2)
    await ingest(batch(T0 + 4 * MINUTE + 5_000, { alloc: 0, checkpoints: 1, reads: 0, writes: 4 }))
    await ingest(batch(T0 + HOUR + 5_000, { alloc: 0, checkpoints: 0, reads: 0, writes: 0 }))

    const minutes = { since: T0, until: T0 + 2 * HOUR, bucketSeconds: 60 }
    const bgwriter = await store.internals.metricSeries(id, 'bgwriter', minutes)
    expect(bgwriter.map((p) => [(p.ts - T0) / MINUTE, p.values])).toEqual([
      [0, { checkpoints_timed: 0, buffers_clean: 0, buffers_alloc: 10 }],
      [1, { checkpoints_timed: 0, buffers_clean: 0, buffers_alloc: 10 }],
      [2, { checkpoints_timed: 0, buffers_clean: 0, buffers_alloc: 0 }],
      [4, { checkpoints_timed: 1, buffers_clean: 0, buffers_alloc: 0 }],
      [60, { checkpoints_timed: 0, buffers_clean: 0, buffers_alloc: 0 }],
    ])
    const io = await store.internals.metricSeries(id, 'io', minutes)
    expect(io.map((p) => [(p.ts - T0) / MINUTE, p.subject, p.values])).toEqual([
      [0, 'client backend/relation/normal', { reads: 0, writes: 0, hits: 0 }],
      [1, 'client backend/relation/normal', { reads: 2, writes: 0, hits: 0 }],
      [2, 'client backend/relation/normal', { reads: 0, writes: 0, hits: 0 }],
      [4, 'client backend/relation/normal', { reads: 0, writes: 4, hits: 0 }],
      [60, 'client backend/relation/normal', { reads: 0, writes: 0, hits: 0 }],
    ])
    // Five-minute intervals sum the minutes; hourly intervals read the hourly rows.
    const fives = await store.internals.metricSeries(id, 'bgwriter', { ...minutes, bucketSeconds: 300 })
    expect(fives.map((p) => [(p.ts - T0) / MINUTE, p.values])).toEqual([
      [0, { checkpoints_timed: 1, buffers_clean: 0, buffers_alloc: 20 }],
      [60, { checkpoints_timed: 0, buffers_clean: 0, buffers_alloc: 0 }],
    ])
    const hours = await store.internals.metricSeries(id, 'bgwriter', { ...minutes, bucketSeconds: 3600 })
    expect(hours.map((p) => [(p.ts - T0) / HOUR, p.values])).toEqual([
      [0, { checkpoints_timed: 1, buffers_clean: 0, buffers_alloc: 20 }],
      [1, { checkpoints_timed: 0, buffers_clean: 0, buffers_alloc: 0 }],
    ])

    // Late: minute 3, where buffers_clean moved. Its minute reads it, the hour adds it.
    await ingest(batch(T0 + 3 * MINUTE + 5_000, { alloc: 0, checkpoints: 0, reads: 0, writes: 0 }), T0 + HOUR + MINUTE)
    await ingest(
      {
        ...batch(T0 + 3 * MINUTE + 15_000, { alloc: 0, checkpoints: 0, reads: 0, writes: 0 }),
        bgwriter: { checkpoints_timed: 0, buffers_clean: 5, buffers_alloc: 0 },
      },
      T0 + HOUR + MINUTE,
    )
    const late = await store.internals.metricSeries(id, 'bgwriter', minutes)
    expect(late.map((p) => [(p.ts - T0) / MINUTE, p.values.buffers_clean])).toEqual([
      [0, 0],
      [1, 0],
      [2, 0],
      [3, 5],
      [4, 0],
      [60, 0],
    ])
    const lateHours = await store.internals.metricSeries(id, 'bgwriter', { ...minutes, bucketSeconds: 3600 })
    expect(lateHours.map((p) => [(p.ts - T0) / HOUR, p.values])).toEqual([
      [0, { checkpoints_timed: 1, buffers_clean: 5, buffers_alloc: 20 }],
      [1, { checkpoints_timed: 0, buffers_clean: 0, buffers_alloc: 0 }],
    ])

    // An interval of 11,000 years (not whole hours: read from minute rows, quiet counters filled from the
    // hourly ones) costs what the rows cost, not a step per hour of it (that was 10^8 steps here).
    const started = performance.now()
    const vast = await store.internals.metricSeries(id, 'bgwriter', {
      since: T0 - 1000 * 24 * HOUR,
      until: T0 + 2 * HOUR,
      bucketSeconds: 360_000_000_060,
    })
    expect(performance.now() - started).toBeLessThan(2_000)
    expect(vast.map((p) => p.values)).toEqual([{ checkpoints_timed: 1, buffers_clean: 5, buffers_alloc: 20 }])
  })
})
