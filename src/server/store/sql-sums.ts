// Counters that add up in BIGINT columns (INTEGER on SQLite). Each delta fits (the wire caps counts at
// 2^53 - 1), but a bucket adds up every batch of its minute or hour, and the 1,025th of those maxima
// passes 2^63 - 1: PostgreSQL refuses that ("bigint out of range", a 500 the agent retries for an
// hour), SQLite's SUM() fails with "integer overflow", and a JS sum past 2^63 cannot be bound to
// either. So counters saturate: a sum past the maximum stays at 9223372036854775807 (only hostile or
// broken input gets there). DOUBLE PRECISION columns (durations, metric values) need none of this.
import type { Dialect } from './driver.ts'

/** BIGINT's maximum as an SQL literal (an integer on both stores). */
export const INT64_MAX_SQL = '9223372036854775807'

/** BIGINT's maximum, exactly, for binding (the nearest JS number, 2^63, is past it). */
const INT64_MAX = 9223372036854775807n
/** The least JS number past BIGINT's maximum (the largest one below it is 2^63 - 1024). */
const TWO_POW_63 = 2 ** 63

/**
 * `a + b` of two BIGINT counters, pinned at the maximum instead of overflowing; NULL when either is, as
 * `a + b` is. The WHEN clauses run in order, so `MAX - b` is computed only for a positive `b` (where it
 * cannot overflow). A negative `b` never comes from the wire (counts are >= 0) and adds as before. An
 * SQLite value stored as a REAL by earlier versions (past the maximum) is pinned too.
 */
export function saturatingAdd(a: string, b: string): string {
  return `CASE WHEN ${b} <= 0 THEN ${a} + ${b} WHEN ${a} > ${INT64_MAX_SQL} - ${b} THEN ${INT64_MAX_SQL} ELSE ${a} + ${b} END`
}

/**
 * SUM(column) of a BIGINT counter to be written into a BIGINT column, pinned at the maximum; NULL when
 * every value is. PostgreSQL sums BIGINT exactly as NUMERIC. SQLite's SUM() of integers fails on
 * overflow, whatever the expression around it, so it sums doubles (exact while the sum is below 2^53,
 * within a double's precision past it) and casts back to an integer.
 */
export function saturatingSum(dialect: Dialect, column: string): string {
  if (dialect === 'postgres') return `CASE WHEN SUM(${column}) > ${INT64_MAX_SQL} THEN ${INT64_MAX_SQL} ELSE SUM(${column}) END`
  return `CAST(MIN(SUM(CAST(${column} AS REAL)), ${INT64_MAX_SQL}) AS INTEGER)`
}

/**
 * SUM(column) for a read, which JS takes as a number: never fails however large the counters.
 * PostgreSQL's SUM of BIGINT is NUMERIC (read as a string and converted); SQLite's of integers would
 * fail on overflow, so it sums doubles.
 */
export function readSum(dialect: Dialect, column: string): string {
  return dialect === 'postgres' ? `SUM(${column})` : `SUM(CAST(${column} AS REAL))`
}

/**
 * A counter summed in JS (a batch naming one statement or object many times), as a value the drivers
 * bind to BIGINT: past 2^63 - 1 it is that maximum, exactly (a bigint).
 */
export function int64Counter(value: number): number | bigint {
  return value >= TWO_POW_63 ? INT64_MAX : value
}
