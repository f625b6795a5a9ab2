// Row values as the stores give them made into numbers: SQLite gives integers, PostgreSQL BIGINT as
// strings (postgres.js) and NUMERIC sums as strings; every resource's row mapping uses these.

/** A number column (BIGINT, INTEGER, DOUBLE, a SUM) as a number. */
export const num = (v: unknown): number => Number(v)

/** A nullable number column as a number, or null. */
export const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))

/**
 * A row as a driver gives it, before a resource's mapper reads its columns: the one place `any` stands for
 * the drivers' untyped rows (SQLite's and postgres.js's), so each mapper states its record's type.
 */
// biome-ignore lint/suspicious/noExplicitAny: rows are untyped until a mapper gives them their record's type
export type DbRow = Record<string, any>
