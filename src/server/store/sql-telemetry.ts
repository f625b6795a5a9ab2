// Telemetry in the store: applying an ingest batch (once per batch_id) and reading it back.
// Counter deltas accumulate into buckets at ingest. Statement statistics go to 60-second buckets, rolled
// up into 10-minute and hourly ones after their span (sql-rollups.ts); the other bucketed sections go
// to 60-second and 1-hour buckets at once. Reads over a window take whole hours from hourly buckets and
// the edges from finer ones, so a 24-hour list reads ~40 rows per statement instead of 1,440, and stays
// exact to the minute.
import { QUERY_COUNTER_KEYS } from '../../shared/metrics.ts'
import type { ExplainPlan, IngestBatch, QueryStatDelta } from '../../shared/wire.ts'
import type { Dialect, SqlDriver, SqlStatement } from './driver.ts'
import { retentionLimits } from '../limits.ts'
import { applyClickHouse } from './sql-clickhouse.ts'
import { applyInternals } from './sql-internals.ts'
import { applyObjects } from './sql-objects.ts'
import {
  NO_MARKS,
  SPAN_MS,
  type StatRange,
  initialMarksStatement,
  lockRollupsStatement,
  marksOf,
  readMarks,
  readMarksStatement,
  rollUpStatements,
  statRanges,
} from './sql-rollups.ts'
import { Reads, Writes } from './sql-writes.ts'
import { int64Counter, readSum, saturatingAdd } from './sql-sums.ts'
import { applySnapshots } from './sql-snapshots.ts'
import { HOUR_MS, MINUTE_MS, type Window, floorTo, rangesClause, seriesResolution } from './window.ts'

/** The larger of two nullable values, in the store's dialect (SQLite's MAX(a, NULL) is NULL). */
function greatest(dialect: SqlDriver['dialect'], a: string, b: string): string {
  const fn = dialect === 'sqlite' ? 'MAX' : 'GREATEST'
  return `${fn}(COALESCE(${a}, ${b}), COALESCE(${b}, ${a}))`
}

const QUERY_COUNTERS = QUERY_COUNTER_KEYS

const QUERY_STAT_COLUMNS = ['database_id', 'resolution', 'bucket', 'query_hash', ...QUERY_COUNTERS, 'p99_ms']
const QUERY_STAT_KEY = ['database_id', 'resolution', 'bucket', 'query_hash']
/** The counters kept in BIGINT columns (the durations, `_ms`, are doubles): a fractional one from the wire is rounded. */
const INTEGER_COUNTER = QUERY_COUNTERS.map((key) => !key.endsWith('_ms'))
const counterOf = (delta: QueryStatDelta, i: number): number => {
  const value = delta[QUERY_COUNTERS[i]!] ?? 0
  return INTEGER_COUNTER[i] ? Math.round(value) : value
}
/** Where the counters and p99_ms sit in a row of QUERY_STAT_COLUMNS. */
const COUNTERS_AT = 4
const P99_AT = COUNTERS_AT + QUERY_COUNTERS.length

/**
 * The batch's statements as query_stats rows of the minute bucket (QUERY_STAT_COLUMNS), summed per
 * statement (a batch may carry one statement more than once), with their texts.
 */
function queryStatRows(databaseId: string, bucket: number, rows: QueryStatDelta[]): Map<string, { text: string; row: unknown[] }> {
  const merged = new Map<string, { text: string; row: unknown[] }>()
  const repeated = new Set<{ text: string; row: unknown[] }>()
  for (const delta of rows) {
    const entry = merged.get(delta.query_hash)
    if (!entry) {
      const row: unknown[] = new Array(QUERY_STAT_COLUMNS.length)
      row[0] = databaseId
      row[1] = MINUTE_MS / 1000
      row[2] = bucket
      row[3] = delta.query_hash
      for (let i = 0; i < QUERY_COUNTERS.length; i++) row[COUNTERS_AT + i] = counterOf(delta, i)
      row[P99_AT] = delta.p99_ms ?? null
      merged.set(delta.query_hash, { text: delta.query_text, row })
      continue
    }
    const row = entry.row
    for (let i = 0; i < QUERY_COUNTERS.length; i++) row[COUNTERS_AT + i] = (row[COUNTERS_AT + i] as number) + counterOf(delta, i)
    if (delta.p99_ms !== undefined) row[P99_AT] = Math.max((row[P99_AT] as number | null) ?? 0, delta.p99_ms)
    repeated.add(entry)
  }
  // A statement named ~1,000 times at the wire's maximum sums past BIGINT in JS: bound as its maximum.
  for (const { row } of repeated) {
    for (let i = 0; i < QUERY_COUNTERS.length; i++) if (INTEGER_COUNTER[i]) row[COUNTERS_AT + i] = int64Counter(row[COUNTERS_AT + i] as number)
  }
  return merged
}

/** How often a statement's text row (and its last_seen) is rewritten while the statement keeps coming. */
export const TEXT_REFRESH_MS = 10 * MINUTE_MS

/**
 * Statements whose text row this process wrote recently, per database, with the last_seen written. A
 * batch skips the text upsert of statements written for a batch less than TEXT_REFRESH_MS before its
 * own, so the same 500 statements arriving every 10 s cost text writes once in 10 minutes, not every
 * batch (rewriting the wide text rows was a third of the ingest's SQL time even once a minute). The
 * stored last_seen is then up to 10 minutes behind; queryDetail reads the later minute buckets to
 * answer it to the minute, and retention keeps a text that much past its hour. Filled only after the ingest's
 * transaction committed. Several processes sharing a PostgreSQL store each write a statement at most
 * once per refresh.
 */
export class KnownTexts {
  private readonly byDatabase = new Map<string, Map<string, number>>()

  /** Whether a statement's text row needs the upsert for the database's batch collected at `at`. */
  writerFor(databaseId: string, at: number): (hash: string) => boolean {
    const seen = this.byDatabase.get(databaseId)
    if (!seen) return () => true
    const since = at - TEXT_REFRESH_MS
    return (hash) => {
      const written = seen.get(hash)
      return written === undefined || written <= since
    }
  }

  /** After a commit: these statements' text rows have last_seen >= `atLeast`. */
  remember(databaseId: string, hashes: readonly string[], atLeast: number): void {
    let seen = this.byDatabase.get(databaseId)
    // Bounded: a database with an endless stream of new statements starts over.
    if (!seen || seen.size > 100_000) this.byDatabase.set(databaseId, (seen = new Map()))
    for (const hash of hashes) if (!(seen.get(hash)! >= atLeast)) seen.set(hash, atLeast)
  }

  forget(databaseId: string): void {
    this.byDatabase.delete(databaseId)
  }
}

/** What an applied batch changed that caches outside the transaction must learn once it commits. */
export interface IngestEffects {
  /** Hourly statement buckets were written (a late batch or a rollup): cached closed-hour sums are stale. */
  closedHoursChanged: boolean
  /** Statements whose text rows now have last_seen >= textsAt. */
  texts: string[]
  textsAt: number
}

/**
 * Adds the batch's statements to `writes` once the reads it registers on `reads` (the rollup lock and
 * marks) are sent: texts, the spans and hours that closed before this batch rolled up, then the batch's
 * minute rows (and those of the coarser buckets already rolled up past it, for a late batch).
 */
function applyQueryStats(
  reads: Reads,
  dialect: Dialect,
  databaseId: string,
  collectedAt: number,
  rows: QueryStatDelta[],
  known: KnownTexts | undefined,
  effects: IngestEffects,
  now: number,
): ((writes: Writes) => void) | undefined {
  const merged = queryStatRows(databaseId, floorTo(collectedAt, MINUTE_MS), rows)
  if (merged.size === 0) return undefined
  const lock = lockRollupsStatement(dialect, databaseId)
  if (lock) reads.add(lock)
  const storedMarks = reads.add(readMarksStatement(databaseId))
  return (writes) => {
    const textRows: unknown[][] = []
    const needsWrite = known?.writerFor(databaseId, collectedAt)
    for (const [hash, e] of merged) {
      if (!needsWrite || needsWrite(hash)) textRows.push([databaseId, hash, e.text, collectedAt, collectedAt])
    }
    if (textRows.length > 0) {
      writes.upsert('query_texts', ['database_id', 'query_hash', 'query_text', 'first_seen', 'last_seen'], textRows, {
        key: ['database_id', 'query_hash'],
        update: { query_text: 'excluded.query_text', last_seen: greatest(dialect, 'query_texts.last_seen', 'excluded.last_seen') },
      })
      effects.texts = textRows.map((r) => r[1] as string)
      effects.textsAt = collectedAt
    }

    // Spans and hours that closed before this batch are rolled up first; the batch then lands in its
    // minute bucket, and also in the coarser buckets whose level was rolled up past it (a late batch).
    // Never past the server's clock: a batch from the future (agent clock skew) must not close spans
    // that batches of the present then land in as "late" ones.
    const rollTo = Math.min(collectedAt, now)
    let before = marksOf(storedMarks())
    if (!before) {
      const initial = initialMarksStatement(databaseId, rollTo)
      writes.statements.push(initial.statement)
      before = initial.marks
    }
    const rollup = rollUpStatements(dialect, databaseId, before, rollTo)
    writes.statements.push(...rollup.statements)
    const marks = rollup.marks
    const statRows: unknown[][] = []
    for (const e of merged.values()) statRows.push(e.row)
    for (const [resolution, mark] of [[SPAN_MS, marks.spans], [HOUR_MS, marks.hours]] as const) {
      if (floorTo(collectedAt, resolution) >= mark) continue
      for (const e of merged.values()) statRows.push([databaseId, resolution / 1000, floorTo(collectedAt, resolution), ...e.row.slice(3)])
      if (resolution === HOUR_MS) effects.closedHoursChanged = true
    }
    if (marks.hours !== before.hours) effects.closedHoursChanged = true
    writes.upsert('query_stats', QUERY_STAT_COLUMNS, statRows, { key: QUERY_STAT_KEY, update: QUERY_STAT_UPDATE[dialect] })
  }
}

/** The upsert's update of query_stats: counters add up (BIGINT ones saturating, sql-sums.ts), p99_ms keeps the larger. */
const queryStatUpdate = (dialect: SqlDriver['dialect']): Record<string, string> => ({
  ...Object.fromEntries(
    QUERY_COUNTERS.map((c, i) => [c, INTEGER_COUNTER[i] ? saturatingAdd(`query_stats.${c}`, `excluded.${c}`) : `query_stats.${c} + excluded.${c}`]),
  ),
  p99_ms: greatest(dialect, 'query_stats.p99_ms', 'excluded.p99_ms'),
})
const QUERY_STAT_UPDATE: Record<SqlDriver['dialect'], Record<string, string>> = { sqlite: queryStatUpdate('sqlite'), postgres: queryStatUpdate('postgres') }


const PLAN_COLUMNS = ['database_id', 'query_hash', 'ts', 'plan_hash', 'source', 'total_cost', 'actual_time_ms', 'seq_scans', 'index_scans', 'rows_estimated', 'rows_actual', 'plan_json'] as const

function applyExplainPlans(writes: Writes, databaseId: string, plans: ExplainPlan[]) {
  writes.upsert(
    'explain_plans',
    PLAN_COLUMNS,
    plans.map((p) => [databaseId, p.query_hash, p.ts, p.plan_hash, p.source, p.total_cost, p.actual_time_ms, p.seq_scans, p.index_scans, p.rows_estimated, p.rows_actual, JSON.stringify(p.plan_json)]),
  )
}

/**
 * Applies every section of the batch that this server version stores, then `also` (statements of the
 * caller's that belong to the same transaction); returns what caches must learn after the commit.
 * Two exchanges with a PostgreSQL store whatever the batch holds (sql-writes.ts): the reads the writes
 * depend on, then every write.
 */
export async function applyBatch(
  tx: SqlDriver,
  databaseId: string,
  batch: IngestBatch,
  known?: KnownTexts,
  now = Date.now(),
  also: readonly SqlStatement[] = [],
): Promise<IngestEffects> {
  const effects: IngestEffects = { closedHoursChanged: false, texts: [], textsAt: 0 }
  const reads = new Reads()
  const writeQueryStats = batch.query_stats ? applyQueryStats(reads, tx.dialect, databaseId, batch.collected_at, batch.query_stats, known, effects, now) : undefined
  const writeObjects = applyObjects(reads, databaseId, batch)
  const writeInternals = applyInternals(reads, databaseId, batch)
  await reads.send(tx)

  const writes = new Writes(tx.dialect)
  writeQueryStats?.(writes)
  if (batch.explain_plans?.length) applyExplainPlans(writes, databaseId, batch.explain_plans)
  writeObjects(writes)
  writeInternals(writes)
  applyClickHouse(writes, databaseId, batch)
  applySnapshots(writes, databaseId, batch)
  writes.statements.push(...also)
  await tx.runAll(writes.statements)
  return effects
}

// ---- reads ----

export type QuerySort = 'total_time' | 'calls' | 'mean_time' | 'rows'

const SORT_SQL: Record<QuerySort, string> = {
  total_time: 'total_time_ms DESC',
  calls: 'total_calls DESC',
  mean_time: 'mean_time_ms DESC',
  rows: 'total_rows DESC',
}

export interface QueryStatsRow {
  query_hash: string
  query_text: string
  total_calls: number
  total_time_ms: number
  mean_time_ms: number
  total_rows: number
  shared_blks_hit: number
  shared_blks_read: number
  cache_hit_ratio: number | null
  temp_blks_read: number
  temp_blks_written: number
  blk_read_time_ms: number
  blk_write_time_ms: number
  read_bytes: number
  memory_bytes: number
  errors: number
  p99_ms: number | null
  /** Start (epoch ms) of the statement's earliest bucket in the window: how much of it the data covers. */
  first_bucket: number | null
}

/** Each statement's sums over its rows (readSum: never failing however large the counters). */
function sumsSql(dialect: SqlDriver['dialect']): string {
  const sum = (c: string) => readSum(dialect, c)
  return `${sum('calls')} AS total_calls, ${sum('total_time_ms')} AS total_time_ms,
  CASE WHEN ${sum('calls')} > 0 THEN ${sum('total_time_ms')} / ${sum('calls')} ELSE 0 END AS mean_time_ms,
  ${sum('rows')} AS total_rows, ${sum('shared_blks_hit')} AS shared_blks_hit, ${sum('shared_blks_read')} AS shared_blks_read,
  ${sum('temp_blks_read')} AS temp_blks_read, ${sum('temp_blks_written')} AS temp_blks_written,
  ${sum('blk_read_time_ms')} AS blk_read_time_ms, ${sum('blk_write_time_ms')} AS blk_write_time_ms,
  ${sum('read_bytes')} AS read_bytes, ${sum('memory_bytes')} AS memory_bytes, ${sum('errors')} AS errors, MAX(p99_ms) AS p99_ms`
}
const SUMS: Record<SqlDriver['dialect'], string> = { sqlite: sumsSql('sqlite'), postgres: sumsSql('postgres') }

function toQueryRow(r: Record<string, unknown>): QueryStatsRow {
  const hit = Number(r.shared_blks_hit ?? 0)
  const read = Number(r.shared_blks_read ?? 0)
  return {
    query_hash: String(r.query_hash),
    query_text: String(r.query_text ?? ''),
    total_calls: Number(r.total_calls ?? 0),
    total_time_ms: Number(r.total_time_ms ?? 0),
    mean_time_ms: Number(r.mean_time_ms ?? 0),
    total_rows: Number(r.total_rows ?? 0),
    shared_blks_hit: hit,
    shared_blks_read: read,
    cache_hit_ratio: hit + read > 0 ? hit / (hit + read) : null,
    temp_blks_read: Number(r.temp_blks_read ?? 0),
    temp_blks_written: Number(r.temp_blks_written ?? 0),
    blk_read_time_ms: Number(r.blk_read_time_ms ?? 0),
    blk_write_time_ms: Number(r.blk_write_time_ms ?? 0),
    read_bytes: Number(r.read_bytes ?? 0),
    memory_bytes: Number(r.memory_bytes ?? 0),
    errors: Number(r.errors ?? 0),
    p99_ms: r.p99_ms === null || r.p99_ms === undefined ? null : Number(r.p99_ms),
    first_bucket: r.first_bucket === null || r.first_bucket === undefined ? null : Number(r.first_bucket),
  }
}

/** Per-statement sums in the order of SUM_COLUMNS, then the maximum p99 (NaN: none), then the first bucket. */
type StatementSums = number[]

const SUM_COLUMNS = ['calls', 'total_time_ms', 'rows', 'shared_blks_hit', 'shared_blks_read', 'temp_blks_read', 'temp_blks_written',
  'blk_read_time_ms', 'blk_write_time_ms', 'read_bytes', 'memory_bytes', 'errors'] as const
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
  private readonly entries = new Map<string, { epoch: number; from: number; to: number; sums: Map<string, StatementSums> }>()

  changed(databaseId: string): void {
    this.epochs.set(databaseId, (this.epochs.get(databaseId) ?? 0) + 1)
    this.entries.delete(databaseId)
  }

  /** The sums over [range.from, range.to), from the cache or `load` (whose result is kept). */
  async sums(databaseId: string, range: StatRange, load: () => Promise<Map<string, StatementSums>>): Promise<Map<string, StatementSums>> {
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
async function sumRanges(driver: SqlDriver, databaseId: string, ranges: StatRange[]): Promise<Map<string, StatementSums>> {
  const sums = new Map<string, StatementSums>()
  if (ranges.length === 0) return sums
  const params: unknown[] = [databaseId]
  const source = ranges
    .map((r) => {
      params.push(r.from, r.to)
      return `SELECT * FROM query_stats WHERE database_id = $1 AND resolution = ${r.resolution} AND bucket >= $${params.length - 1} AND bucket < $${params.length}`
    })
    .join(' UNION ALL ')
  const rows = await driver.all<Record<string, number | string | null>>(
    `SELECT query_hash, ${SUM_COLUMNS.map((c) => `${readSum(driver.dialect, c)} AS ${c}`).join(', ')}, MAX(p99_ms) AS p99_ms, MIN(bucket) AS first_bucket
     FROM (${source}) w GROUP BY query_hash`,
    params,
  )
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
  total_time: (v) => v[1]!,
  calls: (v) => v[0]!,
  mean_time: (v) => (v[0]! > 0 ? v[1]! / v[0]! : 0),
  rows: (v) => v[2]!,
}

function sumsRow(hash: string, text: string, v: StatementSums): QueryStatsRow {
  const row: Record<string, unknown> = { query_hash: hash, query_text: text, first_bucket: v[FIRST], p99_ms: Number.isNaN(v[P99]!) ? null : v[P99] }
  SUM_COLUMNS.forEach((c, i) => (row[c] = v[i]))
  return toQueryRow({ ...row, total_calls: v[0], total_rows: v[2], mean_time_ms: SORT_KEY.mean_time(v) })
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
  if (driver.dialect === 'postgres') {
    // PostgreSQL plans the OR of ranges well (a BitmapOr) and sorts and joins in one statement.
    const where = rangesClause(ranges, 2)
    const params = [databaseId, ...where.params, limit]
    const rows = await driver.all(
      `SELECT t.query_text, s.* FROM (
         SELECT query_hash, MIN(bucket) AS first_bucket, ${SUMS.postgres} FROM query_stats WHERE database_id = $1 AND ${where.sql}
         GROUP BY query_hash
       ) s JOIN query_texts t ON t.database_id = $1 AND t.query_hash = s.query_hash
       ORDER BY ${SORT_SQL[sort]}, s.query_hash
       LIMIT $${params.length}`,
      params,
    )
    return rows.map(toQueryRow)
  }
  // SQLite: the closed hours' sums (kept between requests) plus the edges' (10-minute and minute
  // buckets), added here; the statements' texts are read for the page of rows returned only.
  const hours = ranges.filter((r) => r.resolution === 3600)
  const edges = ranges.filter((r) => r.resolution !== 3600)
  const sums = new Map<string, StatementSums>()
  for (const range of hours) {
    addSums(sums, closedHours ? await closedHours.sums(databaseId, range, () => sumRanges(driver, databaseId, [range])) : await sumRanges(driver, databaseId, [range]))
  }
  addSums(sums, await sumRanges(driver, databaseId, edges))
  const key = SORT_KEY[sort]
  const ranked = [...sums].sort((a, b) => key(b[1]) - key(a[1]) || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  const page = ranked.slice(0, limit)
  if (page.length === 0) return []
  const texts = new Map(
    (
      await driver.all<{ query_hash: string; query_text: string }>(
        `SELECT query_hash, query_text FROM query_texts WHERE database_id = $1 AND query_hash IN (${page.map((_, i) => `$${i + 2}`).join(', ')})`,
        [databaseId, ...page.map(([hash]) => hash)],
      )
    ).map((t) => [t.query_hash, t.query_text]),
  )
  // A statement without its text (never the case for rows ingest wrote) is left out, as a join would.
  return page.filter(([hash]) => texts.has(hash)).map(([hash, v]) => sumsRow(hash, texts.get(hash)!, v))
}

export interface QueryPoint {
  ts: number
  calls: number
  total_time_ms: number
  mean_time_ms: number
  rows: number
  shared_blks_hit: number
  shared_blks_read: number
  cache_hit_ratio: number | null
  temp_blks_read: number
  temp_blks_written: number
  p99_ms: number | null
  /** ClickHouse's counters (0 for PostgreSQL statements). */
  read_bytes: number
  memory_bytes: number
  errors: number
}

/** The detail of one statement: totals over the window and a timeseries at a resolution that fits it. */
export async function queryDetail(
  driver: SqlDriver,
  databaseId: string,
  hash: string,
  window: Window,
): Promise<{ stats: QueryStatsRow; first_seen: number; last_seen: number; resolution: number; points: QueryPoint[] } | undefined> {
  const text = await driver.get<{ query_text: string; first_seen: number; last_seen: number }>(
    'SELECT query_text, first_seen, last_seen FROM query_texts WHERE database_id = $1 AND query_hash = $2',
    [databaseId, hash],
  )
  if (!text) return undefined
  const marks = (await readMarks(driver, databaseId)) ?? NO_MARKS
  const where = rangesClause(statRanges(window, marks), 3)
  const totals = await driver.get(
    `SELECT MIN(bucket) AS first_bucket, ${SUMS[driver.dialect]} FROM query_stats WHERE database_id = $1 AND query_hash = $2 AND ${where.sql}`,
    [databaseId, hash, ...where.params],
  )
  const resolution = seriesResolution(window)
  const columns = 'calls, total_time_ms, rows, shared_blks_hit, shared_blks_read, temp_blks_read, temp_blks_written, p99_ms, read_bytes, memory_bytes, errors'
  let points: Record<string, unknown>[]
  if (resolution === 60) {
    points = await driver.all(
      `SELECT bucket, ${columns} FROM query_stats
       WHERE database_id = $1 AND query_hash = $2 AND resolution = 60 AND bucket >= $3 AND bucket < $4 ORDER BY bucket`,
      [databaseId, hash, floorTo(window.since, MINUTE_MS), window.until],
    )
  } else {
    // Hourly points: hourly buckets where they are rolled up, the hours after from finer buckets.
    const hours = rangesClause(statRanges({ ...window, since: floorTo(window.since, HOUR_MS) }, marks), 3)
    points = await driver.all(
      `SELECT (bucket / ${HOUR_MS}) * ${HOUR_MS} AS bucket, ${columns.split(', ').map((c) => (c === 'p99_ms' ? 'MAX(p99_ms) AS p99_ms' : `${readSum(driver.dialect, c)} AS ${c}`)).join(', ')}
       FROM query_stats WHERE database_id = $1 AND query_hash = $2 AND ${hours.sql}
       GROUP BY (bucket / ${HOUR_MS}) * ${HOUR_MS} ORDER BY 1`,
      [databaseId, hash, ...hours.params],
    )
  }
  // The text row's last_seen is refreshed every TEXT_REFRESH_MS: a later minute bucket is later news.
  const later = await driver.get<{ bucket: number | null }>(
    // Bounded: a batch skips the text write only within TEXT_REFRESH_MS of one that wrote it.
    'SELECT MAX(bucket) AS bucket FROM query_stats WHERE database_id = $1 AND resolution = 60 AND bucket > $2 AND bucket < $4 AND query_hash = $3',
    [databaseId, Number(text.last_seen), hash, Number(text.last_seen) + TEXT_REFRESH_MS],
  )
  return {
    stats: toQueryRow({ ...totals, query_hash: hash, query_text: text.query_text }),
    first_seen: Number(text.first_seen),
    last_seen: Math.max(Number(text.last_seen), Number(later?.bucket ?? 0)),
    resolution,
    points: points.map((p) => {
      const calls = Number(p.calls)
      const hit = Number(p.shared_blks_hit)
      const read = Number(p.shared_blks_read)
      return {
        ts: Number(p.bucket),
        calls,
        total_time_ms: Number(p.total_time_ms),
        mean_time_ms: calls > 0 ? Number(p.total_time_ms) / calls : 0,
        rows: Number(p.rows),
        shared_blks_hit: hit,
        shared_blks_read: read,
        cache_hit_ratio: hit + read > 0 ? hit / (hit + read) : null,
        temp_blks_read: Number(p.temp_blks_read),
        temp_blks_written: Number(p.temp_blks_written),
        p99_ms: p.p99_ms === null ? null : Number(p.p99_ms),
        read_bytes: Number(p.read_bytes),
        memory_bytes: Number(p.memory_bytes),
        errors: Number(p.errors),
      }
    }),
  }
}


export interface StoredPlan {
  ts: number
  plan_json: unknown
  plan_hash: string
  total_cost: number | null
  actual_time_ms: number | null
  seq_scans: number
  index_scans: number
  rows_estimated: number | null
  rows_actual: number | null
  source: string
  /** The plan differs from the one before it for this statement. */
  plan_changed: boolean
}

const nullableNumber = (v: unknown) => (v === null || v === undefined ? null : Number(v))

/** A statement's plans in the window, newest first, each marked when its shape differs from the previous plan. */
export async function listPlans(driver: SqlDriver, databaseId: string, hash: string, window: Window, limit: number): Promise<StoredPlan[]> {
  const rows = await driver.all(
    `SELECT * FROM explain_plans WHERE database_id = $1 AND query_hash = $2 AND ts >= $3 AND ts < $4 ORDER BY ts DESC LIMIT $5`,
    [databaseId, hash, window.since, window.until, limit + 1],
  )
  // The plan just before the oldest returned one decides whether that one changed.
  const before = rows.length <= limit ? await driver.get<{ plan_hash: string }>(
    'SELECT plan_hash FROM explain_plans WHERE database_id = $1 AND query_hash = $2 AND ts < $3 ORDER BY ts DESC LIMIT 1',
    [databaseId, hash, window.since],
  ) : undefined
  return rows.slice(0, limit).map((r, i) => {
    const older = rows[i + 1]?.plan_hash ?? before?.plan_hash
    return {
      ts: Number(r.ts),
      plan_json: JSON.parse(String(r.plan_json)),
      plan_hash: String(r.plan_hash),
      total_cost: nullableNumber(r.total_cost),
      actual_time_ms: nullableNumber(r.actual_time_ms),
      seq_scans: Number(r.seq_scans),
      index_scans: Number(r.index_scans),
      rows_estimated: nullableNumber(r.rows_estimated),
      rows_actual: nullableNumber(r.rows_actual),
      source: String(r.source),
      plan_changed: older !== undefined && older !== r.plan_hash,
    }
  })
}
