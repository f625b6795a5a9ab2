// Counters that add up in BIGINT columns (INTEGER on SQLite). Each delta fits (the wire caps counts at
// 2^53 - 1), but a bucket adds up every batch of its minute or hour, and the 1,025th of those maxima
// passes 2^63 - 1: PostgreSQL refuses that ("bigint out of range", a 500 the agent retries for an
// hour), SQLite's SUM() fails with "integer overflow", and a JS sum past 2^63 cannot be bound to
// either. So counters saturate: a sum past the maximum stays at 9223372036854775807 (only hostile or
// broken input gets there). DOUBLE PRECISION columns (durations, metric values) need none of this.

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

// SUM() of such counters differs per store: the dialects' saturatingSum and readSum (dialect.ts).

/**
 * A counter summed in JS (a batch naming one statement or object many times), as a value the drivers
 * bind to BIGINT: past 2^63 - 1 it is that maximum, exactly (a bigint).
 */
export function int64Counter(value: number): number | bigint {
  return value >= TWO_POW_63 ? INT64_MAX : value
}
