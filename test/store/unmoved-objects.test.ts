// Tables and indexes that did not move write no bucket rows (objects/writes.ts), and their series still read
// exactly what they read when every batch wrote every object: a sampled minute without the object's row
// is zero deltas with the gauges of its latest earlier row, a minute without batches is a gap, hourly
// buckets hold the hour's sums, and a late batch changes its own minute only. Both stores.
import { beforeAll, describe, expect, test } from 'bun:test'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import type { IndexStat, IngestBatch, TableStat } from '../../src/shared/wire.ts'
import { type StoreKind, storeKinds } from '../support/server.ts'
import { storeAccount } from '../support/store-account.ts'

const MINUTE = 60_000
const HOUR = 3_600_000
/** An hour boundary 5 hours back, so every bucket written is closed and inside a 24-hour window. */
const T0 = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR

/** Table `a`'s sample: `scans` sequential scans since the previous one (null: the first sample). */
function table(scans: number | null, liveTuples: number, sizeBytes: number | null = 81_920): TableStat {
  const delta =
    scans === null
      ? null
      : {
          seq_scan: scans,
          seq_tup_read: 10 * scans,
          idx_scan: 0,
          idx_tup_fetch: 0,
          n_tup_ins: 0,
          n_tup_upd: 0,
          n_tup_del: 0,
          n_tup_hot_upd: 0,
        }
  return {
    schema_name: 'public',
    table_name: 'a',
    seq_scan: 100,
    seq_tup_read: 1_000,
    idx_scan: 0,
    idx_tup_fetch: 0,
    n_tup_ins: 0,
    n_tup_upd: 0,
    n_tup_del: 0,
    n_tup_hot_upd: 0,
    n_live_tup: liveTuples,
    n_dead_tup: 0,
    last_vacuum: null,
    last_autovacuum: null,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: sizeBytes,
    index_size_bytes: 16_384,
    has_primary_key: true,
    autovacuum_enabled: true,
    delta,
  }
}

function index(scans: number | null): IndexStat {
  return {
    schema_name: 'public',
    table_name: 'a',
    index_name: 'a_pkey',
    idx_scan: 40,
    idx_tup_read: 80,
    idx_tup_fetch: 40,
    size_bytes: 16_384,
    index_def: 'CREATE UNIQUE INDEX a_pkey ON public.a USING btree (id)',
    is_unique: true,
    is_primary: true,
    is_valid: true,
    delta: scans === null ? null : { idx_scan: scans, idx_tup_read: 2 * scans, idx_tup_fetch: scans },
  }
}

function batch(collectedAt: number, tables: TableStat[], indexes: IndexStat[] = [index(0)]): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: collectedAt,
    interval_seconds: 20,
    agent_version: 'test',
    database: { name: 'idle', engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
    tables,
    indexes,
  }
}

describe.each(storeKinds)('unmoved tables and indexes (%s store)', (kind: StoreKind) => {
  const account = storeAccount(kind, 'Idle Inc')
  let store: SqlStore
  let id = ''
  beforeAll(() => {
    store = account.store
  })

  async function ingest(b: IngestBatch, now?: number): Promise<void> {
    id = await account.ingest(b, now)
  }

  const tableRows = async () =>
    Number(
      (await store.driver.get<{ n: unknown }>('SELECT COUNT(*) AS n FROM table_stats WHERE database_id = $1', [id]))!.n,
    )
  const minutes = (points: { ts: number }[], pick: (p: never) => unknown[]) =>
    points.map((p) => [(p.ts - T0) / MINUTE, ...pick(p as never)])

  test('idle minutes read as zeros with carried gauges, a gap stays a gap, hours sum the minutes, a late batch changes its minute only', async () => {
    // Minute 0: the first sample. Minute 1: a moves (2 scans). Minutes 2-6: idle, three batches a minute
    // (one of them with the size unmeasured). Minute 7: a moves again and grows. Minutes 8-10: no batch.
    // Minutes 11-12: idle. Then the next hour: idle, and a late batch from minute 9 where a moved.
    await ingest(batch(T0 + 5_000, [table(null, 100)], [index(null)]))
    await ingest(batch(T0 + MINUTE + 5_000, [table(2, 110)], [index(3)]))
    const afterMove = await tableRows()
    for (let m = 2; m <= 6; m++) {
      for (const s of [5, 25, 45])
        await ingest(batch(T0 + m * MINUTE + s * 1_000, [table(0, 110, m === 4 && s === 25 ? null : 81_920)]))
    }
    // Fifteen idle batches wrote no table row.
    expect(await tableRows()).toBe(afterMove)
    await ingest(batch(T0 + 7 * MINUTE + 5_000, [table(3, 120, 90_112)], [index(1)]))
    await ingest(batch(T0 + 11 * MINUTE + 5_000, [table(0, 120, 90_112)]))
    await ingest(batch(T0 + 12 * MINUTE + 5_000, [table(0, 120, 90_112)]))
    // The next hour: its first batch writes the hour's rows of every object, moved or not.
    const beforeHour = await tableRows()
    await ingest(batch(T0 + HOUR + 5_000, [table(0, 120, 90_112)]))
    expect(await tableRows()).toBe(beforeHour + 2)
    await ingest(batch(T0 + HOUR + MINUTE + 5_000, [table(0, 120, 90_112)]))
    expect(await tableRows()).toBe(beforeHour + 2)

    const window = { since: T0 - 10 * MINUTE, until: T0 + 2 * HOUR }
    const a = await store.objects.tableSeries(id, 'public', 'a', window)
    expect(a.resolution).toBe(60)
    const expected = [
      [0, null, null, 100, 81_920],
      [1, 2, 20, 110, 81_920],
      [2, 0, 0, 110, 81_920],
      [3, 0, 0, 110, 81_920],
      [4, 0, 0, 110, 81_920],
      [5, 0, 0, 110, 81_920],
      [6, 0, 0, 110, 81_920],
      [7, 3, 30, 120, 90_112],
      // 8, 9, 10: no batch, no point.
      [11, 0, 0, 120, 90_112],
      [12, 0, 0, 120, 90_112],
      [60, 0, 0, 120, 90_112],
      [61, 0, 0, 120, 90_112],
    ]
    const pick = (p: {
      seq_scan: number | null
      seq_tup_read: number | null
      n_live_tup: number | null
      table_size_bytes: number | null
    }) => [p.seq_scan, p.seq_tup_read, p.n_live_tup, p.table_size_bytes]
    expect(minutes(a.points, pick)).toEqual(expected)
    // A window starting inside the idle stretch carries the gauges in from before it.
    const inside = await store.objects.tableSeries(id, 'public', 'a', {
      since: T0 + 3 * MINUTE,
      until: T0 + 6 * MINUTE,
    })
    expect(minutes(inside.points, pick)).toEqual(expected.slice(3, 6))
    // The index: it moved in minutes 1 and 7 only, its size never changed.
    const aPkey = await store.objects.indexSeries(id, 'public', 'a_pkey', window)
    expect(
      minutes(
        aPkey.points,
        (p: { idx_scan: number | null; idx_tup_read: number | null; size_bytes: number | null }) => [
          p.idx_scan,
          p.idx_tup_read,
          p.size_bytes,
        ],
      ),
    ).toEqual([
      [0, null, null, 16_384],
      [1, 3, 6, 16_384],
      [2, 0, 0, 16_384],
      [3, 0, 0, 16_384],
      [4, 0, 0, 16_384],
      [5, 0, 0, 16_384],
      [6, 0, 0, 16_384],
      [7, 1, 2, 16_384],
      [11, 0, 0, 16_384],
      [12, 0, 0, 16_384],
      [60, 0, 0, 16_384],
      [61, 0, 0, 16_384],
    ])

    // Hourly buckets: the hour's sums of the minutes and its last gauges.
    const hours = await store.objects.tableSeries(id, 'public', 'a', { since: T0 - 40 * HOUR, until: T0 + 2 * HOUR })
    expect(hours.resolution).toBe(3600)
    expect(
      hours.points.map((p) => [(p.ts - T0) / HOUR, p.seq_scan, p.seq_tup_read, p.n_live_tup, p.table_size_bytes]),
    ).toEqual([
      [0, 5, 50, 120, 90_112],
      [1, 0, 0, 120, 90_112],
    ])
    const minuteSums = a.points.filter((p) => p.ts < T0 + HOUR).reduce((sum, p) => sum + (p.seq_scan ?? 0), 0)
    expect(minuteSums).toBe(hours.points[0]!.seq_scan!)

    // Late: minute 9 (in the gap), where a moved and had 125 live tuples. Its minute reads it; minutes 11
    // and 12 still read what their batches sent (120), and the hour adds its scans.
    await ingest(batch(T0 + 9 * MINUTE + 5_000, [table(4, 125, 90_112)]), T0 + HOUR + 2 * MINUTE)
    const late = await store.objects.tableSeries(id, 'public', 'a', window)
    expect(minutes(late.points, pick)).toEqual([...expected.slice(0, 8), [9, 4, 40, 125, 90_112], ...expected.slice(8)])
    const lateHours = await store.objects.tableSeries(id, 'public', 'a', {
      since: T0 - 40 * HOUR,
      until: T0 + 2 * HOUR,
    })
    expect(lateHours.points.map((p) => [(p.ts - T0) / HOUR, p.seq_scan, p.n_live_tup])).toEqual([
      [0, 9, 120],
      [1, 0, 120],
    ])
    // The latest table is still the newest batch's.
    expect((await store.objects.table(id, 'public', 'a'))!.ts).toBe(T0 + HOUR + MINUTE + 5_000)
  })

  test('an unknown counter (a table without indexes: idx_scan null; a counter the agent does not send) is not news, and reads null in idle minutes', async () => {
    // Table `b` has no index (PostgreSQL's idx_scan and idx_tup_fetch are null) and the agent predates
    // n_tup_newpage_upd (absent). Minute 0: first sample; minute 1: b moves; minutes 2-4: idle.
    const noIndex = (scans: number | null): TableStat => {
      const { n_tup_newpage_upd: _, ...sample } = {
        ...table(scans, 50),
        table_name: 'b',
        idx_scan: null,
        idx_tup_fetch: null,
      }
      const { n_tup_newpage_upd: __, ...delta } = sample.delta
        ? { ...sample.delta, idx_scan: null, idx_tup_fetch: null }
        : { n_tup_newpage_upd: null }
      return { ...sample, delta: sample.delta ? (delta as TableStat['delta']) : null }
    }
    const b = (m: number, scans: number | null) => batch(T0 + 3 * HOUR + m * MINUTE + 5_000, [noIndex(scans)], [])
    const rowsOfB = async () =>
      Number(
        (await store.driver.get<{ n: unknown }>(
          `SELECT COUNT(*) AS n FROM table_stats WHERE database_id = $1 AND table_name = 'b'`,
          [id],
        ))!.n,
      )
    await ingest(b(0, null))
    await ingest(b(1, 2))
    const afterMove = await rowsOfB()
    for (let m = 2; m <= 4; m++) await ingest(b(m, 0))
    // Three idle batches wrote no row of b.
    expect(await rowsOfB()).toBe(afterMove)
    const series = await store.objects.tableSeries(id, 'public', 'b', { since: T0 + 3 * HOUR, until: T0 + 4 * HOUR })
    const pick = (p: { seq_scan: number | null; idx_scan: number | null; n_tup_newpage_upd: number | null }) => [
      p.seq_scan,
      p.idx_scan,
      p.n_tup_newpage_upd,
    ]
    expect(series.points.map((p) => [(p.ts - T0 - 3 * HOUR) / MINUTE, ...pick(p)])).toEqual([
      [0, null, null, null],
      [1, 2, null, null],
      [2, 0, null, null],
      [3, 0, null, null],
      [4, 0, null, null],
    ])
  })
})
