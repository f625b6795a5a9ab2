// Statement statistics at three resolutions, and the hourly buckets of tables and indexes. Ingest writes
// each statement's deltas to its 60-second bucket only; 10-minute and hourly buckets are rolled up from
// them once their span has closed, so a batch costs one row per statement instead of three (the ingest
// hot path), while a 24-hour list still reads ~23 hourly rows, a few 10-minute rows and at most 18
// minute rows per statement. Tables and indexes likewise: ingest writes their minute rows only (those
// of the objects that moved, objects/writes.ts), and the hourly rows are rolled up from those minute rows
// by the same rollup, against the same hourly mark (objects/hours.ts), one row per object instead
// of two per batch.
//
// Each database has two marks in query_rollups: `spans_until` (10-minute buckets) and `hours_until`
// (hourly buckets, of statements, tables and indexes alike). The invariant, per level: every bucket that
// starts before the mark holds exactly the sum of the minute rows it covers, and no bucket at or after
// the mark is read (none is written; a store written before table and index rollups existed still has
// their hourly rows there, which reads ignore and the rollup replaces). So:
// - reads take a level's buckets before its mark, and finer ones after it (statRanges; objects/reads.ts
//   computes a table's or index's hours after the mark from its minute rows);
// - a batch for a bucket before a mark (delivered late from an agent's buffer) adds to that level's
//   bucket as well as to its minute bucket, which keeps the sums exact;
// - a rollup computes the buckets from the mark up to a later closed boundary and moves the mark. It
//   runs in the ingest transaction when a batch (carrying statements, tables or indexes) opens a new
//   span (never past the server's clock), and from retention for a database gone quiet (everything
//   closed over an hour ago, and always before minute rows are compacted), both under the database's
//   rollup lock (lockRollups).
// This module is the one writer of rollups: ingest plans its rollup here (planRollup) and retention
// calls rollUpQuietDatabase; neither writes a rolled-up bucket or a mark itself.
// A database gets its marks with the first batch that carries any of those sections; a database without
// marks has written no table or index rows since rollups of them exist (every hourly row it has is
// complete).
import { STATEMENT_COUNTERS as QUERY_COUNTER_KEYS, STATEMENT_DURATIONS } from '../../../shared/families.ts'
import { type SqlDialect, lockStatement, perDialect } from '../dialect.ts'
import type { SqlDriver } from '../driver.ts'
import type { SqlStatement } from '../sql.ts'
import { OBJECT_HOURS, rollUpObjectHours } from '../objects/hours.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import { HOUR_MS, MINUTE_MS, type Window, floorTo } from '../window.ts'

export const SPAN_MS = 10 * MINUTE_MS

const ceilTo = (t: number, step: number) => Math.ceil(t / step) * step

export interface RollupMarks {
  /** 10-minute buckets that start before this are complete; none exist from it on. */
  spans: number
  /** Hourly buckets that start before this are complete; none exist from it on. */
  hours: number
}

/** The columns summed from finer buckets into coarser ones (p99_ms takes the maximum). */
const COUNTERS = QUERY_COUNTER_KEYS

const STAT_COLUMN_LIST = ['database_id', 'resolution', 'bucket', 'query_hash', ...COUNTERS, 'p99_ms'].join(', ')

/**
 * The sums of STAT_COLUMN_LIST's counters for a rollup: BIGINT ones saturating (sums.ts), so that
 * minute rows pinned at BIGINT's maximum roll up instead of failing the rollup (and the ingest or
 * retention pass running it).
 */
const rollupSums = perDialect((dialect): string => {
  const sums = COUNTERS.map((c) => (STATEMENT_DURATIONS.has(c) ? `SUM(${c})` : dialect.saturatingSum(c)))
  return [...sums, 'MAX(p99_ms)'].join(', ')
})

const READ_MARKS_SQL = 'SELECT spans_until, hours_until FROM query_rollups WHERE database_id = $1'

/** The statement that reads a database's marks (ingest sends it with its other reads, ingest/batch.ts). */
export const readMarksStatement = (databaseId: string): SqlStatement => ({ sql: READ_MARKS_SQL, params: [databaseId] })

/** The marks in the rows readMarksStatement answered; undefined for a database without any yet. */
export function marksOf(rows: Record<string, unknown>[]): RollupMarks | undefined {
  const row = rows[0]
  return row ? { spans: Number(row.spans_until), hours: Number(row.hours_until) } : undefined
}

export async function readMarks(driver: SqlDriver, databaseId: string): Promise<RollupMarks | undefined> {
  return marksOf(await driver.all(READ_MARKS_SQL, [databaseId]))
}

function writeMarks(databaseId: string, marks: RollupMarks): SqlStatement {
  return {
    sql: `INSERT INTO query_rollups (database_id, spans_until, hours_until) VALUES ($1, $2, $3)
     ON CONFLICT (database_id) DO UPDATE SET spans_until = excluded.spans_until, hours_until = excluded.hours_until`,
    params: [databaseId, marks.spans, marks.hours],
  }
}

/** Replaces the buckets of `to` resolution in [from, until) by the sums of the `of` resolution rows they cover. */
function rollUpLevel(
  dialect: SqlDialect,
  databaseId: string,
  of: 60 | 600,
  to: 600 | 3600,
  from: number,
  until: number,
): SqlStatement {
  const ms = to * 1000
  const set = [...COUNTERS, 'p99_ms'].map((c) => `${c} = excluded.${c}`).join(', ')
  // The rollup is idempotent (buckets are replaced, not added to), so a rerun never double-counts.
  return {
    sql: `INSERT INTO query_stats (${STAT_COLUMN_LIST})
     SELECT CAST($1 AS TEXT), ${to}, (bucket / ${ms}) * ${ms} AS rolled, query_hash, ${rollupSums(dialect)}
     FROM query_stats WHERE database_id = $1 AND resolution = ${of} AND bucket >= $2 AND bucket < $3
     GROUP BY (bucket / ${ms}) * ${ms}, query_hash
     ON CONFLICT (database_id, resolution, bucket, query_hash) DO UPDATE SET ${set}`,
    params: [databaseId, from, until],
  }
}

/**
 * The statements that roll the database's statistics up to `until` (10-minute buckets up to its span,
 * hourly ones, of statements, tables and indexes, up to its hour), and the marks after them (the same ones, and no statements, when nothing
 * closed); they run under the database's rollup lock (lockRollups).
 */
export function rollUpStatements(
  dialect: SqlDialect,
  databaseId: string,
  marks: RollupMarks,
  until: number,
): { marks: RollupMarks; statements: SqlStatement[] } {
  const spans = floorTo(until, SPAN_MS)
  const hours = floorTo(until, HOUR_MS)
  const next = { spans: Math.max(marks.spans, spans), hours: Math.max(marks.hours, hours) }
  if (next.spans === marks.spans && next.hours === marks.hours) return { marks, statements: [] }
  const statements: SqlStatement[] = []
  if (next.spans > marks.spans) statements.push(rollUpLevel(dialect, databaseId, 60, 600, marks.spans, next.spans))
  // Every span of these hours is before the 10-minute mark now, so the 10-minute rows are complete.
  if (next.hours > marks.hours) {
    statements.push(rollUpLevel(dialect, databaseId, 600, 3600, marks.hours, next.hours))
    for (const spec of OBJECT_HOURS)
      statements.push(rollUpObjectHours(dialect, spec, databaseId, marks.hours, next.hours))
  }
  statements.push(writeMarks(databaseId, next))
  return { marks: next, statements }
}

/** Rolls the database's statistics up to `until` (rollUpStatements) and returns the marks after it. */
export async function rollUp(
  tx: SqlDriver,
  databaseId: string,
  marks: RollupMarks,
  until: number,
): Promise<RollupMarks> {
  const rollup = rollUpStatements(tx.sqlDialect, databaseId, marks, until)
  await tx.runAll(rollup.statements)
  return rollup.marks
}

/** The marks of a database seen for the first time at `at` (nothing before them exists yet), and the statement that stores them. */
export function initialMarksStatement(databaseId: string, at: number): { marks: RollupMarks; statement: SqlStatement } {
  const marks = { spans: floorTo(at, SPAN_MS), hours: floorTo(at, HOUR_MS) }
  return { marks, statement: writeMarks(databaseId, marks) }
}

/** Stores the initial marks of a database seen for the first time at `at` (initialMarksStatement). */
export async function initialMarks(tx: SqlDriver, databaseId: string, at: number): Promise<RollupMarks> {
  const initial = initialMarksStatement(databaseId, at)
  await tx.runAll([initial.statement])
  return initial.marks
}

/** The marks a batch's writes go by: those it found, and those after the rollup it ran. */
export interface BatchRollup {
  before: RollupMarks
  marks: RollupMarks
}

/**
 * A batch's rollup, in its ingest transaction: registers the rollup lock and the marks' read on
 * `reads`; the returned function adds the statements that store a new database's marks and roll up
 * what closed before the batch (never past `now`, the server's clock: a batch from the future, agent
 * clock skew, must not close spans that batches of the present would then land in as late ones),
 * first among the batch's writes, and answers the marks.
 */
export function planRollup(
  reads: Reads,
  dialect: SqlDialect,
  databaseId: string,
  collectedAt: number,
  now: number,
  spreadMs = 0,
): (writes: Writes) => BatchRollup {
  const lock = lockRollupsStatement(dialect, databaseId)
  if (lock) reads.add(lock)
  const stored = reads.add(readMarksStatement(databaseId))
  return (writes) => {
    // A span or hour is rolled up once this database's delay has passed since it closed (rollupDelayMs).
    const rollTo = Math.min(collectedAt, now) - rollupDelayMs(databaseId, spreadMs)
    let before = marksOf(stored())
    if (!before) {
      const initial = initialMarksStatement(databaseId, rollTo)
      writes.statements.push(initial.statement)
      before = initial.marks
    }
    const rollup = rollUpStatements(dialect, databaseId, before, rollTo)
    writes.statements.push(...rollup.statements)
    return { before, marks: rollup.marks }
  }
}

/**
 * How long after a span or hour closes this database's rollup of it waits: a fixed share of `spreadMs`
 * from a hash of its id (FNV-1a), so a fleet's rollups are spread evenly over that time instead of all
 * falling in the first poll after the boundary (`dbm serve`: limits.ts rollupSpreadMs). 0 when nothing is
 * spread. Until then the closed span is read from its minute rows (the marks have not moved): reads stay
 * exact.
 */
export function rollupDelayMs(databaseId: string, spreadMs: number): number {
  if (!(spreadMs > 0)) return 0
  let hash = 0x811c9dc5
  for (let i = 0; i < databaseId.length; i++) hash = Math.imul(hash ^ databaseId.charCodeAt(i), 0x01000193)
  return (hash >>> 0) % Math.floor(spreadMs)
}

export interface StatRange {
  resolution: 60 | 600 | 3600
  from: number
  to: number
}

const LEVELS = [
  { resolution: 3600, ms: HOUR_MS, mark: (m: RollupMarks) => m.hours },
  { resolution: 600, ms: SPAN_MS, mark: (m: RollupMarks) => m.spans },
] as const

/** Covers [from, to) with the coarsest complete buckets: levels[level] and finer. */
function cover(out: StatRange[], from: number, to: number, marks: RollupMarks, level: number): void {
  if (to <= from) return
  const l = LEVELS[level]
  if (!l) {
    out.push({ resolution: 60, from, to })
    return
  }
  const start = ceilTo(from, l.ms)
  const end = Math.min(floorTo(to, l.ms), l.mark(marks))
  if (end <= start) {
    cover(out, from, to, marks, level + 1)
    return
  }
  cover(out, from, start, marks, level + 1)
  out.push({ resolution: l.resolution, from: start, to: end })
  cover(out, end, to, marks, level + 1)
}

/**
 * The bucket ranges of statement statistics that cover [since, until) exactly to the minute: whole
 * hours from hourly buckets, whole 10-minute spans from 10-minute buckets, the rest from minute
 * buckets, each level only before its mark. Before window.minuteFloor only hourly buckets are kept:
 * that part is read in whole hours. Adjacent ranges of one resolution are merged.
 */
export function statRanges(window: Window, marks: RollupMarks): StatRange[] {
  const out: StatRange[] = []
  let since = floorTo(window.since, MINUTE_MS)
  const floor = window.minuteFloor
  // Hours after the hourly mark are not rolled up yet (retention rolls up before it compacts minute
  // rows, so their minute and 10-minute rows are still there): whole hours only up to the mark.
  const hoursTo = floor === undefined ? floor : Math.min(floor, marks.hours)
  if (hoursTo !== undefined && since < hoursTo) {
    out.push({ resolution: 3600, from: floorTo(since, HOUR_MS), to: Math.min(window.until, hoursTo) })
    since = hoursTo
  }
  cover(out, since, window.until, marks, 0)
  const merged: StatRange[] = []
  for (const r of out) {
    const last = merged.at(-1)
    if (last && last.resolution === r.resolution && last.to === r.from) last.to = r.to
    else merged.push({ ...r })
  }
  return merged
}

/** Marks for reads of a database without any: every bucket from minute rows (hourly before minuteFloor). */
export const NO_MARKS: RollupMarks = { spans: Number.NEGATIVE_INFINITY, hours: Number.NEGATIVE_INFINITY }

/**
 * Takes the database's rollup lock until the end of the transaction: ingest (which reads the marks and
 * may add a late batch to rolled-up buckets) and retention's rollup (which moves them) never interleave.
 * Keyed by the database's id, which a rename does not change. PostgreSQL only: SQLite has one writer.
 */
export async function lockRollups(tx: SqlDriver, databaseId: string): Promise<void> {
  const lock = lockRollupsStatement(tx.sqlDialect, databaseId)
  if (lock) await tx.runAll([lock])
}

/** The statement of lockRollups (undefined on SQLite), for ingest to send with its other reads. */
export function lockRollupsStatement(dialect: SqlDialect, databaseId: string): SqlStatement | undefined {
  return lockStatement(dialect, `dbm:rollup:${databaseId}`)
}

/**
 * Retention's rollup of a database gone quiet: its statement statistics, tables and indexes rolled up to
 * `until`, in a transaction of its own under the database's rollup lock.
 */
export async function rollUpQuietDatabase(driver: SqlDriver, databaseId: string, until: number): Promise<void> {
  await driver.transaction(async (tx) => {
    await lockRollups(tx, databaseId)
    const marks = await readMarks(tx, databaseId)
    if (marks) await rollUp(tx, databaseId, marks, until)
  })
}
