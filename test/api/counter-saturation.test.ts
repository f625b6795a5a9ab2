// Counters that add up past BIGINT, on both stores: one statement, table and wait event at the wire's
// largest count (2^53 - 1) 1,100 times in one minute sums past 2^63 - 1 (the 1,025th does). Every
// batch is acknowledged (a 500 would have the agent retry it for an hour), the buckets stay pinned at
// 9223372036854775807 through the rollups and retention's pass, and the reads answer. The API reads that
// value as the JS number nearest to it, 2^63 (JSON 9223372036854776000); a read that adds several pinned
// buckets answers their sum (two: 2^64).
import { describe, expect, test } from 'bun:test'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { HOUR, MINUTE, agentSession, at, base, pgBatch, range } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const MAX_COUNT = Number.MAX_SAFE_INTEGER
/** BIGINT's maximum, as the store's CAST(... AS TEXT) spells it. */
const INT64_MAX = '9223372036854775807'
/** The API's reading of a counter pinned at INT64_MAX (the nearest double). */
const PINNED = 2 ** 63

const statement = {
  query_hash: 'hot',
  query_text: 'SELECT 1',
  calls: MAX_COUNT,
  total_time_ms: 1,
  rows: MAX_COUNT,
  shared_blks_hit: 0,
  shared_blks_read: 0,
}
const tableCounters = {
  seq_scan: MAX_COUNT,
  seq_tup_read: 0,
  idx_scan: 0,
  idx_tup_fetch: 0,
  n_tup_ins: 0,
  n_tup_upd: 0,
  n_tup_del: 0,
  n_tup_hot_upd: 0,
}
const table = {
  schema_name: 'public',
  table_name: 'hot',
  ...tableCounters,
  n_live_tup: 1,
  n_dead_tup: 0,
  last_vacuum: null,
  last_autovacuum: null,
  last_analyze: null,
  last_autoanalyze: null,
  table_size_bytes: 8192,
  index_size_bytes: 0,
  delta: tableCounters,
}
const wait = { wait_event_type: 'IO', wait_event: 'DataFileRead', count: MAX_COUNT, total_duration_ms: 1 }

/** A batch naming the statement, the table and the wait event `times` times each. */
const hotBatch = (collectedAt: number, times = 1): IngestBatch =>
  pgBatch('hot', collectedAt, {
    query_stats: Array.from({ length: times }, () => statement),
    tables: Array.from({ length: times }, () => table),
    waits: Array.from({ length: Math.min(times, 1000) }, () => wait),
  })

for (const kind of storeKinds) {
  describe(`counters past BIGINT saturate (${kind})`, () => {
    const session = agentSession(kind)
    const post = (batch: IngestBatch) =>
      session.server.call('POST', '/api/v1/ingest', { apiKey: session.key, body: batch })
    /** The stored counters as text (an INTEGER spells its digits, a REAL would not), by resolution and bucket. */
    const stored = async (id: string, table: string, column: string) =>
      (
        await session.server.store.driver.all<{ resolution: number; bucket: number; v: string }>(
          `SELECT resolution, bucket, CAST(${column} AS TEXT) AS v FROM ${table} WHERE database_id = $1 ORDER BY resolution, bucket`,
          [id],
        )
      ).map((r) => [Number(r.resolution), Number(r.bucket) - base, r.v])
    let id = ''

    test('110 batches naming them 10 times each at the largest count into one minute are each acknowledged; the bucket stays at the maximum', async () => {
      // The 103rd batch passes 2^63 - 1 (its 1,025th count); one by one, as an agent's buffer drains.
      // (1,100 batches of one count each do the same in ~10 s on PostgreSQL: each waits for the database's rollup lock.)
      const statuses = new Map<number, number>()
      for (let i = 0; i < 110; i++) {
        const res = await post(hotBatch(at(10, i % 60), 10))
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
        id = res.body.database_id ?? id
      }
      expect([...statuses]).toEqual([[200, 110]])
      expect(await stored(id, 'query_stats', 'calls')).toEqual([[60, 10 * MINUTE, INT64_MAX]])
      // A table's hourly bucket is rolled up from its minutes once the hour closed (the retention test below).
      expect(await stored(id, 'table_stats', 'seq_scan')).toEqual([[60, 10 * MINUTE, INT64_MAX]])
      expect(await stored(id, 'wait_stats', 'count')).toEqual([
        [60, 10 * MINUTE, INT64_MAX],
        [3600, 0, INT64_MAX],
      ])
    })

    test('one batch naming them 1,100 times sums past BIGINT before the store: acknowledged, pinned at the maximum', async () => {
      // The minute after: a bucket of its own, summed in the batch (JS; the waits, at most 1,000 a batch, to
      // ~9.0e18) past BIGINT, then added to (SQL).
      for (const times of [1100, 1100]) expect((await post(hotBatch(at(11), times))).status).toBe(200)
      expect(await stored(id, 'query_stats', 'calls')).toEqual([
        [60, 10 * MINUTE, INT64_MAX],
        [60, 11 * MINUTE, INT64_MAX],
      ])
      expect((await stored(id, 'table_stats', 'seq_scan')).filter(([resolution]) => resolution === 60)).toEqual([
        [60, 10 * MINUTE, INT64_MAX],
        [60, 11 * MINUTE, INT64_MAX],
      ])
      expect((await stored(id, 'wait_stats', 'count')).filter(([resolution]) => resolution === 60)).toEqual([
        [60, 10 * MINUTE, INT64_MAX],
        [60, 11 * MINUTE, INT64_MAX],
      ])
    })

    test('reads answer: a pinned bucket reads as 2^63, two of them add up', async () => {
      const calls = async (from: number, to: number) =>
        ((await session.ok(id, `/queries?${range(from, to)}&sort_by=calls`)) as { total_calls: number }[]).map(
          (q) => q.total_calls,
        )
      expect(await calls(at(10), at(11))).toEqual([PINNED])
      expect(await calls(at(10), at(12))).toEqual([2 * PINNED])
      const detail = await session.ok(id, `/queries/hot?${range(at(10), at(12))}`)
      expect({ total: detail.total_calls, points: detail.timeseries.map((p: { calls: number }) => p.calls) }).toEqual({
        total: 2 * PINNED,
        points: [PINNED, PINNED],
      })
      const waits = async (bucket: number) =>
        ((await session.ok(id, `/waits?${range(base, base + HOUR)}&bucket=${bucket}`)) as { count: number }[]).map(
          (w) => w.count,
        )
      expect({ hourly: await waits(3600), spans: await waits(600) }).toEqual({ hourly: [PINNED], spans: [2 * PINNED] })
      const tableDetail = await session.get(id, `/tables/public/hot?${range(at(10), at(12))}`)
      expect(tableDetail.status).toBe(200)
    })

    test("retention's pass rolls the pinned minutes up to pinned 10-minute and hourly buckets, and reads answer", async () => {
      await session.server.store.retention.sweepDatabase(
        id,
        {
          before: Date.now() - 30 * 24 * HOUR,
          minutesBefore: Math.floor((Date.now() - 48 * HOUR) / HOUR) * HOUR,
          rollUpTo: Date.now() - HOUR,
        },
        1000,
      )
      expect(await stored(id, 'query_stats', 'calls')).toEqual([
        [60, 10 * MINUTE, INT64_MAX],
        [60, 11 * MINUTE, INT64_MAX],
        [600, 10 * MINUTE, INT64_MAX],
        [3600, 0, INT64_MAX],
      ])
      expect(await stored(id, 'table_stats', 'seq_scan')).toEqual([
        [60, 10 * MINUTE, INT64_MAX],
        [60, 11 * MINUTE, INT64_MAX],
        [3600, 0, INT64_MAX],
      ])
      const table = await session.ok(id, `/tables/public/hot?${range(base - 24 * HOUR, base + HOUR)}`)
      expect({
        resolution: table.resolution_seconds,
        points: table.timeseries.map((p: { seq_scan: number }) => p.seq_scan),
      }).toEqual({ resolution: 3600, points: [PINNED] })
      // The whole hour is read from its hourly bucket; a window past a day reads hourly points.
      expect(
        ((await session.ok(id, `/queries?${range(base, base + HOUR)}&sort_by=calls`)) as { total_calls: number }[]).map(
          (q) => q.total_calls,
        ),
      ).toEqual([PINNED])
      const detail = await session.ok(id, `/queries/hot?${range(base - 24 * HOUR, base + HOUR)}`)
      expect({
        resolution: detail.resolution_seconds,
        total: detail.total_calls,
        points: detail.timeseries.map((p: { calls: number }) => p.calls),
      }).toEqual({
        resolution: 3600,
        total: PINNED,
        points: [PINNED],
      })
    })
  })
}
