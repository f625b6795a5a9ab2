// Statement statistics read back: the list of statements over a window (listQueryStats) and one
// statement's totals and timeseries (queryDetail). Reads over a window take whole hours from hourly
// buckets and the edges from finer ones (statRanges, rollups/rollups.ts), so a 24-hour list reads ~40 rows
// per statement instead of 1,440, and stays exact to the minute.
import { STATEMENT_COUNTERS, type StatementCounter } from '../../../shared/families.ts'
import { perDialect } from '../dialect.ts'
import type { SqlDriver } from '../driver.ts'
import { NO_MARKS, type StatRange, readMarks, statRanges } from '../rollups/rollups.ts'
import { TEXT_REFRESH_MS } from './writes.ts'
import { type Fragment, ident, join, sql } from '../sql.ts'
import { HOUR_MS, MINUTE_MS, type Window, floorTo, rangeCondition, rangesClause, seriesResolution } from '../window.ts'

/** io_time: the time spent reading and writing blocks (blk_read_time_ms + blk_write_time_ms, 0 unless track_io_timing is on). */
export type QuerySort = 'total_time' | 'calls' | 'mean_time' | 'rows' | 'io_time'

const SORT_SQL: Record<QuerySort, Fragment> = {
  total_time: sql`total_time_ms DESC`,
  calls: sql`total_calls DESC`,
  mean_time: sql`mean_time_ms DESC`,
  rows: sql`total_rows DESC`,
  io_time: sql`blk_read_time_ms + blk_write_time_ms DESC`,
}

/** A statement's sums over a window: every counter of the statement family (src/shared/families.ts), calls and rows as total_calls and total_rows. */
export type QueryStatsRow = Record<Exclude<StatementCounter, 'calls' | 'rows'>, number> & {
  query_hash: string
  query_text: string
  total_calls: number
  total_rows: number
  mean_time_ms: number
  cache_hit_ratio: number | null
  p99_ms: number | null
  /**
   * Start (epoch ms) of the statement's earliest data in the window: its earliest minute bucket where minute
   * rows are kept (firstMinutes), else the start of its earliest hourly bucket (which may be before the
   * window's start: reads before the minute floor take whole hours).
   */
  first_bucket: number | null
}

/** A counter's name in a statement's sums: calls and rows are total_calls and total_rows. */
const SUM_NAMES: readonly string[] = STATEMENT_COUNTERS.map((c) =>
  c === 'calls' ? 'total_calls' : c === 'rows' ? 'total_rows' : c,
)

/** Each statement's sums over its rows (readSum: never failing however large the counters). */
const sumsSql = perDialect((dialect): Fragment => {
  const sum = (c: StatementCounter) => dialect.readSum(ident(c, SUM_COLUMNS))
  const sums = SUM_COLUMNS.map((c, i) => sql`${sum(c)} AS ${ident(SUM_NAMES[i]!, SUM_NAMES)}`)
  return sql`${join(sums)}, CASE WHEN ${sum('calls')} > 0 THEN ${sum('total_time_ms')} / ${sum('calls')} ELSE 0 END AS mean_time_ms, MAX(p99_ms) AS p99_ms`
})

function toQueryRow(r: Record<string, unknown>): QueryStatsRow {
  const hit = Number(r.shared_blks_hit ?? 0)
  const read = Number(r.shared_blks_read ?? 0)
  return {
    query_hash: String(r.query_hash),
    query_text: String(r.query_text ?? ''),
    ...Object.fromEntries(SUM_NAMES.map((name) => [name, Number(r[name] ?? 0)])),
    mean_time_ms: Number(r.mean_time_ms ?? 0),
    cache_hit_ratio: hit + read > 0 ? hit / (hit + read) : null,
    p99_ms: r.p99_ms === null || r.p99_ms === undefined ? null : Number(r.p99_ms),
    first_bucket: r.first_bucket === null || r.first_bucket === undefined ? null : Number(r.first_bucket),
  } as QueryStatsRow
}

/** Per-statement sums in the order of SUM_COLUMNS, then the maximum p99 (NaN: none), then the first bucket. */
type StatementSums = number[]

/** The statement family's counters (src/shared/families.ts), summed. */
const SUM_COLUMNS: readonly StatementCounter[] = STATEMENT_COUNTERS
const AT: Record<'calls' | 'total_time_ms' | 'rows' | 'blk_read_time_ms' | 'blk_write_time_ms', number> = {
  calls: SUM_COLUMNS.indexOf('calls'),
  total_time_ms: SUM_COLUMNS.indexOf('total_time_ms'),
  rows: SUM_COLUMNS.indexOf('rows'),
  blk_read_time_ms: SUM_COLUMNS.indexOf('blk_read_time_ms'),
  blk_write_time_ms: SUM_COLUMNS.indexOf('blk_write_time_ms'),
}
const P99 = SUM_COLUMNS.length
const FIRST = P99 + 1

/**
 * Per-statement sums over a database's closed hours, kept between requests (SQLite store only, where
 * this process owns the file and sees every write): a dashboard asks for the same 24 hours again and
 * again, and the hourly buckets of a window change only when a rollup or a late batch writes them or
 * retention removes them, each of which calls `changed`. One entry per database, the latest range asked.
 */
export class ClosedHourSums {
  private readonly epochs = new Map<string, number>()
  private readonly entries = new Map<
    string,
    { epoch: number; from: number; to: number; sums: Map<string, StatementSums> }
  >()

  changed(databaseId: string): void {
    this.epochs.set(databaseId, (this.epochs.get(databaseId) ?? 0) + 1)
    this.entries.delete(databaseId)
  }

  /** The sums over [range.from, range.to), from the cache or `load` (whose result is kept). */
  async sums(
    databaseId: string,
    range: StatRange,
    load: () => Promise<Map<string, StatementSums>>,
  ): Promise<Map<string, StatementSums>> {
    const epoch = this.epochs.get(databaseId) ?? 0
    const entry = this.entries.get(databaseId)
    if (entry && entry.epoch === epoch && entry.from === range.from && entry.to === range.to) return entry.sums
    // The epoch is read before the load: a write that lands meanwhile bumps it, and the entry is not used.
    const sums = await load()
    if (this.entries.size >= 256) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(databaseId, { epoch, from: range.from, to: range.to, sums })
    return sums
  }
}

/**
 * Each statement's sums over the ranges. SQLite cannot use the primary key for an OR of bucket ranges
 * and would read every row of the database: one range scan per range, glued with UNION ALL, reads only
 * the window.
 */
async function sumRanges(
  driver: SqlDriver,
  databaseId: string,
  ranges: StatRange[],
): Promise<Map<string, StatementSums>> {
  const sums = new Map<string, StatementSums>()
  if (ranges.length === 0) return sums
  const source = join(
    ranges.map((r) => sql`SELECT * FROM query_stats WHERE database_id = ${databaseId} AND ${rangeCondition(r)}`),
    sql` UNION ALL `,
  )
  const columns = join(
    SUM_COLUMNS.map((c) => sql`${driver.sqlDialect.readSum(ident(c, SUM_COLUMNS))} AS ${ident(c, SUM_COLUMNS)}`),
  )
  const q = sql`SELECT query_hash, ${columns}, MAX(p99_ms) AS p99_ms, MIN(bucket) AS first_bucket
     FROM (${source}) w GROUP BY query_hash`
  const rows = await driver.all<Record<string, number | string | null>>(q.sql, q.params)
  for (const r of rows) {
    const v: StatementSums = SUM_COLUMNS.map((c) => Number(r[c] ?? 0))
    v.push(r.p99_ms === null ? Number.NaN : Number(r.p99_ms), Number(r.first_bucket))
    sums.set(String(r.query_hash), v)
  }
  return sums
}

/** Adds `more` into `into` (a fresh copy where `into` has none: cached sums are never changed). */
function addSums(into: Map<string, StatementSums>, more: Map<string, StatementSums>): void {
  for (const [hash, v] of more) {
    const have = into.get(hash)
    if (!have) {
      into.set(hash, v.slice())
      continue
    }
    for (let i = 0; i < P99; i++) have[i]! += v[i]!
    if (Number.isNaN(have[P99]!) || v[P99]! > have[P99]!) have[P99] = v[P99]!
    have[FIRST] = Math.min(have[FIRST]!, v[FIRST]!)
  }
}

const SORT_KEY: Record<QuerySort, (v: StatementSums) => number> = {
  total_time: (v) => v[AT.total_time_ms]!,
  calls: (v) => v[AT.calls]!,
  mean_time: (v) => (v[AT.calls]! > 0 ? v[AT.total_time_ms]! / v[AT.calls]! : 0),
  rows: (v) => v[AT.rows]!,
  io_time: (v) => v[AT.blk_read_time_ms]! + v[AT.blk_write_time_ms]!,
}

function sumsRow(hash: string, text: string, v: StatementSums): QueryStatsRow {
  const row: Record<string, unknown> = {
    query_hash: hash,
    query_text: text,
    first_bucket: v[FIRST],
    p99_ms: Number.isNaN(v[P99]!) ? null : v[P99],
  }
  SUM_NAMES.forEach((name, i) => {
    row[name] = v[i]
  })
  return toQueryRow({ ...row, mean_time_ms: SORT_KEY.mean_time(v) })
}

/**
 * Each row's first_bucket to the minute (rows changed in place): a first bucket that is a 10-minute or
 * hourly one starts at its boundary, before the statement may have run (first seen at 05:18, its first
 * hourly bucket starts at 05:00), so it is replaced by the statement's earliest minute row inside it.
 * Only where minute rows are kept (from window.minuteFloor on): before it, retention compacts them away,
 * and the boundary is what the store keeps, the same before and after compaction.
 */
async function firstMinutes(
  driver: SqlDriver,
  databaseId: string,
  window: Window,
  ranges: StatRange[],
  rows: QueryStatsRow[],
): Promise<void> {
  const coarse = new Map<string, { from: number; to: number; rows: QueryStatsRow[] }>()
  for (const row of rows) {
    const first = row.first_bucket
    if (first === null || (window.minuteFloor !== undefined && first < window.minuteFloor)) continue
    const range = ranges.find((r) => r.resolution !== 60 && r.from <= first && first < r.to)
    if (!range) continue
    const key = `${first}:${range.resolution}`
    const at = coarse.get(key) ?? { from: first, to: first + range.resolution * 1000, rows: [] }
    at.rows.push(row)
    coarse.set(key, at)
  }
  if (coarse.size === 0) return
  const parts = [...coarse.values()].map(
    (
      c,
    ) => sql`SELECT query_hash, MIN(bucket) AS first_minute FROM query_stats WHERE database_id = ${databaseId} AND ${rangeCondition({ resolution: 60, ...c })}
       AND query_hash IN ${[...new Set(c.rows.map((r) => r.query_hash))]} GROUP BY query_hash`,
  )
  const q = join(parts, sql` UNION ALL `)
  const found = await driver.all<{ query_hash: string; first_minute: number | string }>(q.sql, q.params)
  const firstOf = new Map<string, number>()
  for (const f of found) {
    const minute = Number(f.first_minute)
    const hash = String(f.query_hash)
    firstOf.set(hash, Math.min(firstOf.get(hash) ?? minute, minute))
  }
  for (const c of coarse.values()) {
    for (const row of c.rows) {
      const minute = firstOf.get(row.query_hash)
      if (minute !== undefined && minute >= c.from && minute < c.to) row.first_bucket = minute
    }
  }
}

export async function listQueryStats(
  driver: SqlDriver,
  databaseId: string,
  window: Window,
  sort: QuerySort,
  limit: number,
  closedHours?: ClosedHourSums,
): Promise<QueryStatsRow[]> {
  const ranges = statRanges(window, (await readMarks(driver, databaseId)) ?? NO_MARKS)
  if (driver.sqlDialect.rangesByIndex) {
    // PostgreSQL plans the OR of ranges well (a BitmapOr) and sorts and joins in one statement.
    const q = sql`SELECT t.query_text, s.* FROM (
         SELECT query_hash, MIN(bucket) AS first_bucket, ${sumsSql(driver.sqlDialect)} FROM query_stats WHERE database_id = ${databaseId} AND ${rangesClause(ranges)}
         GROUP BY query_hash
       ) s JOIN query_texts t ON t.database_id = ${databaseId} AND t.query_hash = s.query_hash
       ORDER BY ${SORT_SQL[sort]}, s.query_hash
       LIMIT ${limit}`
    const rows = (await driver.all(q.sql, q.params)).map(toQueryRow)
    await firstMinutes(driver, databaseId, window, ranges, rows)
    return rows
  }
  // SQLite: the closed hours' sums (kept between requests) plus the edges' (10-minute and minute
  // buckets), added here; the statements' texts are read for the page of rows returned only.
  const hours = ranges.filter((r) => r.resolution === 3600)
  const edges = ranges.filter((r) => r.resolution !== 3600)
  const sums = new Map<string, StatementSums>()
  for (const range of hours) {
    addSums(
      sums,
      closedHours
        ? await closedHours.sums(databaseId, range, () => sumRanges(driver, databaseId, [range]))
        : await sumRanges(driver, databaseId, [range]),
    )
  }
  addSums(sums, await sumRanges(driver, databaseId, edges))
  const key = SORT_KEY[sort]
  const ranked = [...sums].sort((a, b) => key(b[1]) - key(a[1]) || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  const page = ranked.slice(0, limit)
  if (page.length === 0) return []
  const q = sql`SELECT query_hash, query_text FROM query_texts WHERE database_id = ${databaseId} AND query_hash IN ${page.map(([hash]) => hash)}`
  const texts = new Map(
    (await driver.all<{ query_hash: string; query_text: string }>(q.sql, q.params)).map((t) => [
      t.query_hash,
      t.query_text,
    ]),
  )
  // A statement without its text (never the case for rows ingest wrote) is left out, as a join would.
  const rows = page.filter(([hash]) => texts.has(hash)).map(([hash, v]) => sumsRow(hash, texts.get(hash)!, v))
  await firstMinutes(driver, databaseId, window, ranges, rows)
  return rows
}

/** One bucket of a statement's timeseries: every counter of the statement family (ClickHouse's are 0 for PostgreSQL statements). */
export type QueryPoint = Record<StatementCounter, number> & {
  ts: number
  mean_time_ms: number
  cache_hit_ratio: number | null
  p99_ms: number | null
}

/** The columns of a statement's timeseries points. */
const POINT_COLUMNS: readonly (StatementCounter | 'p99_ms')[] = [...STATEMENT_COUNTERS, 'p99_ms']

/** One statement's detail: its totals over the window, when it was first and last seen, and its series. */
export interface QueryDetail {
  stats: QueryStatsRow
  first_seen: number
  last_seen: number
  /** The series' bucket size, in seconds (60 or 3600). */
  resolution: number
  points: QueryPoint[]
}

/** The detail of one statement: totals over the window and a timeseries at a resolution that fits it. */
export async function queryDetail(
  driver: SqlDriver,
  databaseId: string,
  hash: string,
  window: Window,
): Promise<QueryDetail | undefined> {
  const text = await driver.get<{ query_text: string; first_seen: number; last_seen: number }>(
    'SELECT query_text, first_seen, last_seen FROM query_texts WHERE database_id = $1 AND query_hash = $2',
    [databaseId, hash],
  )
  if (!text) return undefined
  const marks = (await readMarks(driver, databaseId)) ?? NO_MARKS
  const ranges = statRanges(window, marks)
  const totalsQuery = sql`SELECT MIN(bucket) AS first_bucket, ${sumsSql(driver.sqlDialect)} FROM query_stats
     WHERE database_id = ${databaseId} AND query_hash = ${hash} AND ${rangesClause(ranges)}`
  const totals = await driver.get(totalsQuery.sql, totalsQuery.params)
  const stats = toQueryRow({ ...totals, query_hash: hash, query_text: text.query_text })
  await firstMinutes(driver, databaseId, window, ranges, [stats])
  const resolution = seriesResolution(window)
  const column = (c: (typeof POINT_COLUMNS)[number]) => ident(c, POINT_COLUMNS)
  let pointsQuery: Fragment
  if (resolution === 60) {
    pointsQuery = sql`SELECT bucket, ${join(POINT_COLUMNS.map(column))} FROM query_stats
       WHERE database_id = ${databaseId} AND query_hash = ${hash} AND resolution = 60 AND bucket >= ${floorTo(window.since, MINUTE_MS)} AND bucket < ${window.until} ORDER BY bucket`
  } else {
    // Hourly points: hourly buckets where they are rolled up, the hours after from finer buckets (3600000: HOUR_MS).
    const hours = rangesClause(statRanges({ ...window, since: floorTo(window.since, HOUR_MS) }, marks))
    const sums = POINT_COLUMNS.map((c) =>
      c === 'p99_ms' ? sql`MAX(p99_ms) AS p99_ms` : sql`${driver.sqlDialect.readSum(column(c))} AS ${column(c)}`,
    )
    pointsQuery = sql`SELECT (bucket / 3600000) * 3600000 AS bucket, ${join(sums)}
       FROM query_stats WHERE database_id = ${databaseId} AND query_hash = ${hash} AND ${hours}
       GROUP BY (bucket / 3600000) * 3600000 ORDER BY 1`
  }
  const points = await driver.all(pointsQuery.sql, pointsQuery.params)
  // The text row's last_seen is refreshed every TEXT_REFRESH_MS: a later minute bucket is later news.
  const later = await driver.get<{ bucket: number | null }>(
    // Bounded: a batch skips the text write only within TEXT_REFRESH_MS of one that wrote it.
    'SELECT MAX(bucket) AS bucket FROM query_stats WHERE database_id = $1 AND resolution = 60 AND bucket > $2 AND bucket < $4 AND query_hash = $3',
    [databaseId, Number(text.last_seen), hash, Number(text.last_seen) + TEXT_REFRESH_MS],
  )
  return {
    stats,
    first_seen: Number(text.first_seen),
    last_seen: Math.max(Number(text.last_seen), Number(later?.bucket ?? 0)),
    resolution,
    points: points.map((p) => {
      const calls = Number(p.calls)
      const hit = Number(p.shared_blks_hit)
      const read = Number(p.shared_blks_read)
      return {
        ts: Number(p.bucket),
        ...Object.fromEntries(STATEMENT_COUNTERS.map((c) => [c, Number(p[c] ?? 0)])),
        mean_time_ms: calls > 0 ? Number(p.total_time_ms) / calls : 0,
        cache_hit_ratio: hit + read > 0 ? hit / (hit + read) : null,
        p99_ms: p.p99_ms === null ? null : Number(p.p99_ms),
      } as QueryPoint
    }),
  }
}
