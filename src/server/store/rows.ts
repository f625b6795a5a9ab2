// Row values as the stores give them made into numbers: SQLite gives integers, PostgreSQL BIGINT as
// strings (postgres.js) and NUMERIC sums as strings; every resource's row mapping uses these.

/** A number column (BIGINT, INTEGER, DOUBLE, a SUM) as a number. */
export const num = (v: unknown): number => Number(v)

/** A nullable number column as a number, or null. */
export const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))
