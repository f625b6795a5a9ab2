// Hourly rows of tables and indexes are rolled up from their minute rows (objects/hours.ts, by the
// rollup of rollups/rollups.ts), not written by ingest. Ground truth is what was sent: the 48-hour (hourly)
// series of two tables and two indexes equal, hour by hour, the sums of the deltas sent in the hour
// (NULL only for an hour of first samples) and the gauges of its last sample that measured them; the
// same before an hour is rolled up (computed from the minute rows), after it (its hourly row), once its
// minute rows are compacted, and across late batches into hours rolled up and not. Both stores.
import { describe, expect, test } from 'bun:test'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import { INDEX_POINT_FIELDS, TABLE_POINT_FIELDS } from '../../src/server/store/objects/types.ts'
import { minuteFloor } from '../../src/server/store/window.ts'
import { INDEX_COUNTERS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_GAUGES } from '../../src/shared/families.ts'
import type { IndexStat, IngestBatch, TableStat } from '../../src/shared/wire.ts'
import { type StoreKind, storeKinds } from '../support/server.ts'
import { storeAccount } from '../support/store-account.ts'

const MINUTE = 60_000
const HOUR = 3_600_000
/** The first batch's hour: 30 hours back, so the batches' hours are closed and inside a 48-hour window. */
const H0 = Math.floor(Date.now() / HOUR) * HOUR - 30 * HOUR

type Kind = 'table' | 'index'
const COUNTERS: Record<Kind, readonly string[]> = { table: TABLE_COUNTERS, index: INDEX_COUNTERS }
const GAUGES: Record<Kind, readonly string[]> = { table: TABLE_GAUGES, index: INDEX_GAUGES }
const OBJECTS: { kind: Kind; name: string }[] = [
  { kind: 'table', name: 'a' },
  { kind: 'table', name: 'b' },
  { kind: 'index', name: 'a_pkey' },
  { kind: 'index', name: 'b_pkey' },
]

/** One object's sample as sent: when, its deltas (null: the first sample) and its gauges (null: not measured). */
interface Sent {
  at: number
  deltas: Record<string, number> | null
  gauges: Record<string, number | null>
}

/** A small deterministic generator, so every run sends the same batches. */
function numbers(seed: number) {
  let s = seed
  return (n: number) => {
    s = (s * 1_103_515_245 + 12_345) % 2_147_483_648
    return s % n
  }
}

describe.each(storeKinds)('hourly rows of tables and indexes (%s store)', (kind: StoreKind) => {
  const account = storeAccount(kind, 'Hourly Inc')
  let store: SqlStore
  let id = ''
  const sent = new Map<string, Sent[]>(OBJECTS.map((o) => [o.name, []]))
  const next = numbers(kind === 'sqlite' ? 7 : 11)
  /** Each object's gauges as of its latest sample: an idle sample repeats them. */
  const gaugesNow = new Map<string, Record<string, number>>()

  /** A sample of every object at `at`: the first, or deltas where some move and some are idle. */
  function sample(at: number, late = false): { tables: TableStat[]; indexes: IndexStat[] } {
    const tables: TableStat[] = []
    const indexes: IndexStat[] = []
    for (const o of OBJECTS) {
      const first = sent.get(o.name)!.length === 0
      const idle = !first && next(3) === 0
      const deltas = first ? null : Object.fromEntries(COUNTERS[o.kind].map((c) => [c, idle ? 0 : next(50)]))
      const before = gaugesNow.get(o.name)
      const gauges: Record<string, number | null> = Object.fromEntries(
        GAUGES[o.kind].map((g) => [
          g,
          idle && before ? before[g]! : 1_000 + next(1_000) * (g.endsWith('bytes') ? 8_192 : 1),
        ]),
      )
      // Table b's size is sometimes not measured (null): the hour keeps its last measured one. Never in
      // the first sample of an hour: an object's first minute row of the hour holds the gauges its later
      // idle samples repeat, which write no row (an hour whose written samples measured none reads null,
      // as it did when ingest wrote the hourly rows).
      const previous = sent.get(o.name)!.at(-1)
      if (o.name === 'b' && !late && previous && previous.at >= Math.floor(at / HOUR) * HOUR && !idle && next(4) === 0)
        gauges.table_size_bytes = null
      if (!late) gaugesNow.set(o.name, Object.fromEntries(GAUGES[o.kind].map((g) => [g, gauges[g] ?? before![g]!])))
      sent.get(o.name)!.push({ at, deltas, gauges })
      const totals = Object.fromEntries(COUNTERS[o.kind].map((c) => [c, 100_000]))
      if (o.kind === 'table') {
        tables.push({
          schema_name: 'public',
          table_name: o.name,
          ...totals,
          ...gauges,
          last_vacuum: null,
          last_autovacuum: null,
          last_analyze: null,
          last_autoanalyze: null,
          has_primary_key: true,
          autovacuum_enabled: true,
          delta: deltas,
        } as unknown as TableStat)
      } else {
        indexes.push({
          schema_name: 'public',
          table_name: o.name[0]!,
          index_name: o.name,
          ...totals,
          ...gauges,
          index_def: `CREATE UNIQUE INDEX ${o.name} ON public.${o.name[0]} USING btree (id)`,
          is_unique: true,
          is_primary: true,
          is_valid: true,
          delta: deltas,
        } as unknown as IndexStat)
      }
    }
    return { tables, indexes }
  }

  async function send(at: number, late = false) {
    const batch: IngestBatch = {
      batch_id: crypto.randomUUID(),
      collected_at: at,
      interval_seconds: 10,
      agent_version: 'test',
      database: { name: 'hourly', engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
      ...sample(at, late),
    }
    id = await account.ingest(batch, late ? Date.now() : at + 1_000)
  }

  /** What the hourly series of an object must read: per hour sent, the deltas' sums and the last measured gauges. */
  function expected(o: (typeof OBJECTS)[number]) {
    const hours = new Map<number, Sent[]>()
    for (const s of sent.get(o.name)!)
      hours.set(Math.floor(s.at / HOUR) * HOUR, [...(hours.get(Math.floor(s.at / HOUR) * HOUR) ?? []), s])
    return [...hours.keys()]
      .sort((a, b) => a - b)
      .map((hour) => {
        const samples = hours.get(hour)!.sort((a, b) => a.at - b.at)
        const point: Record<string, number | null> = { ts: hour }
        for (const c of COUNTERS[o.kind]) {
          const known = samples.filter((s) => s.deltas !== null)
          point[c] = known.length === 0 ? null : known.reduce((sum, s) => sum + s.deltas![c]!, 0)
        }
        for (const g of GAUGES[o.kind]) point[g] = samples.findLast((s) => s.gauges[g] !== null)?.gauges[g] ?? null
        return point
      })
  }

  /** The 48-hour series of every object, as the routes read it (hourly, the minute floor of now). */
  async function series48() {
    const now = Date.now()
    const window = { since: now - 48 * HOUR, until: now, minuteFloor: minuteFloor(now) }
    const out: Record<string, unknown[]> = {}
    for (const o of OBJECTS) {
      const s =
        o.kind === 'table'
          ? await store.objects.tableSeries(id, 'public', o.name, window)
          : await store.objects.indexSeries(id, 'public', o.name, window)
      expect(s.resolution).toBe(3600)
      const fields: readonly string[] = o.kind === 'table' ? TABLE_POINT_FIELDS : INDEX_POINT_FIELDS
      out[o.name] = s.points.map((p) =>
        Object.fromEntries(['ts', ...fields].map((f) => [f, (p as Record<string, number | null>)[f]])),
      )
    }
    return out
  }
  const truth = () => Object.fromEntries(OBJECTS.map((o) => [o.name, expected(o)]))

  const hourRows = async (from: number, until: number) =>
    Number(
      (await store.driver.get<{ n: unknown }>(
        `SELECT (SELECT COUNT(*) FROM table_stats WHERE database_id = $1 AND resolution = 3600 AND bucket >= $2 AND bucket < $3)
              + (SELECT COUNT(*) FROM index_stats WHERE database_id = $1 AND resolution = 3600 AND bucket >= $2 AND bucket < $3) AS n`,
        [id, from, until],
      ))!.n,
    )
  const minuteRows = async () =>
    Number(
      (await store.driver.get<{ n: unknown }>(
        'SELECT COUNT(*) AS n FROM table_stats WHERE database_id = $1 AND resolution = 60',
        [id],
      ))!.n,
    )
  const hoursMark = async () =>
    Number(
      (await store.driver.get<{ h: unknown }>('SELECT hours_until AS h FROM query_rollups WHERE database_id = $1', [
        id,
      ]))!.h,
    )
  /** A retention pass that only rolls up to `until` (nothing is old enough to go), or also compacts minute rows before `minutesBefore`. */
  const sweep = (until: number, minutesBefore = 0) =>
    store.retention.sweepDatabase(id, { before: 0, minutesBefore, rollUpTo: until }, 1000)

  test('the 48-hour series equals the sums sent, before and after the rollup, after compaction and across late batches', async () => {
    store = account.store
    // Hours 0 to 4, a batch every 7 minutes (not a divisor of 60), none in hour 2 (the agent down).
    for (let at = H0 + 5_000; at < H0 + 5 * HOUR; at += 7 * MINUTE)
      if (Math.floor((at - H0) / HOUR) !== 2) await send(at)
    // The batches of hour 4 rolled up hours 0 to 3 as they came (the mark at hour 4), and wrote no hourly row.
    expect(await hoursMark()).toBe(H0 + 4 * HOUR)
    expect(await hourRows(H0, H0 + 4 * HOUR)).toBe(4 * 3)
    expect(await hourRows(H0 + 4 * HOUR, H0 + 5 * HOUR)).toBe(0)
    const before = await series48()
    expect(before).toEqual(truth())
    expect(before.a!.map((p) => ((p as { ts: number }).ts - H0) / HOUR)).toEqual([0, 1, 3, 4])

    // Retention of the database gone quiet rolls hour 4 up: its rows are written, the series is the same.
    await sweep(H0 + 5 * HOUR)
    expect(await hoursMark()).toBe(H0 + 5 * HOUR)
    expect(await hourRows(H0 + 4 * HOUR, H0 + 5 * HOUR)).toBe(4)
    expect(await series48()).toEqual(before)

    // Late batches from an agent's buffer: into hour 1 (rolled up: its hourly rows add them) and into
    // hour 2, where no batch came (rolled up, empty: the late batch makes its rows).
    await send(H0 + HOUR + 31 * MINUTE + 2_000, true)
    await send(H0 + 2 * HOUR + 13 * MINUTE, true)
    expect(await hourRows(H0, H0 + 5 * HOUR)).toBe(4 * 3 + 4 + 4)
    const late = await series48()
    expect(late).toEqual(truth())
    expect(late.a!.map((p) => ((p as { ts: number }).ts - H0) / HOUR)).toEqual([0, 1, 2, 3, 4])

    // Hour 5: batches, then a late one into it before it closes (not rolled up: computed from minutes).
    for (let at = H0 + 5 * HOUR + 20 * MINUTE; at < H0 + 6 * HOUR; at += 9 * MINUTE) await send(at)
    await send(H0 + 5 * HOUR + 3 * MINUTE, true)
    expect(await hourRows(H0 + 5 * HOUR, H0 + 6 * HOUR)).toBe(0)
    const open = await series48()
    expect(open).toEqual(truth())
    // Rolled up by the next hour's first batch: the same.
    await send(H0 + 6 * HOUR + 4 * MINUTE)
    expect(await hourRows(H0 + 5 * HOUR, H0 + 6 * HOUR)).toBe(4)
    expect(await series48()).toEqual(truth())

    // Compaction: the minute rows of hours 0 to 5 go (after the rollup); the hourly rows answer alone.
    await sweep(H0 + 6 * HOUR, H0 + 6 * HOUR)
    const left = await minuteRows()
    expect(left).toBeGreaterThan(0)
    expect(
      Number(
        (await store.driver.get<{ n: unknown }>(
          'SELECT COUNT(*) AS n FROM table_stats WHERE database_id = $1 AND resolution = 60 AND bucket < $2',
          [id, H0 + 6 * HOUR],
        ))!.n,
      ),
    ).toBe(0)
    expect(await series48()).toEqual(truth())
  })

  test('a store written when ingest wrote the hourly rows: rows at or after the mark are not read and the rollup replaces them; a database without marks reads its hourly rows', async () => {
    // As an earlier version left it: an hourly row of the hour not rolled up yet (here a wrong one, to
    // tell it apart), written at ingest, with the minute rows of the same batches.
    const hour = Math.floor(Date.now() / HOUR) * HOUR
    await send(hour - HOUR + 2 * MINUTE)
    const mark = await hoursMark()
    expect(mark).toBe(hour - HOUR)
    const columns = [
      'database_id',
      'schema_name',
      'table_name',
      'resolution',
      'bucket',
      'sampled_at',
      ...TABLE_COUNTERS,
      ...TABLE_GAUGES,
    ]
    await store.driver.run(
      `INSERT INTO table_stats (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})
       ON CONFLICT (database_id, schema_name, table_name, resolution, bucket) DO UPDATE SET seq_scan = excluded.seq_scan`,
      [id, 'public', 'a', 3600, mark, mark, ...TABLE_COUNTERS.map(() => 999_999), ...TABLE_GAUGES.map(() => 1)],
    )
    expect(await series48()).toEqual(truth())
    // The next hour's batch rolls the hour up over it.
    await send(hour + MINUTE)
    const a = await store.driver.get<{ seq_scan: unknown }>(
      "SELECT seq_scan FROM table_stats WHERE database_id = $1 AND schema_name = 'public' AND table_name = 'a' AND resolution = 3600 AND bucket = $2",
      [id, mark],
    )
    expect(Number(a!.seq_scan)).toBe(expected(OBJECTS[0]!).find((p) => p.ts === mark)!.seq_scan!)
    expect(await series48()).toEqual(truth())

    // Without marks (a database that sent no batch since the upgrade), every hour is read from its
    // hourly rows, which ingest wrote whole: here the closed hours'.
    await sweep(hour)
    await store.driver.run('DELETE FROM query_rollups WHERE database_id = $1', [id])
    const closed = Object.fromEntries(
      Object.entries(truth()).map(([name, points]) => [name, points.filter((p) => p.ts! < hour)]),
    )
    expect(await series48()).toEqual(closed)
  })
})
