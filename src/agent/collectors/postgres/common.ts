// Helpers shared by the PostgreSQL collectors: picking the SQL variant for a server version
// (pgwatch's rule: the highest minimum version at or below the server's), turning cumulative
// counters into deltas against the previous sample kept in the collector's state, small conversions.
// Each collector keeps its previous sample in ctx.state under its own name, since the runner may hand
// one map to every collector of a database.
import { deltaOf, num, zerosOf } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { PREPARED } from '../../own-statements.ts'

/** The variant keyed by the highest minimum major at or below `major`. */
export function forVersion<T>(variants: Readonly<Record<number, T>>, major: number): T {
  let best: number | undefined
  for (const key of Object.keys(variants).map(Number)) {
    if (key <= major && (best === undefined || key > best)) best = key
  }
  if (best === undefined) throw new Error(`no variant for PostgreSQL ${major}`)
  return variants[best] as T
}

export type Counters<K extends string = string> = Record<K, number | null>

/** One reading of a view's counters, with its stats_reset. */
export interface Sample<K extends string = string> {
  resetAt: string | null
  values: Counters<K>
}

/**
 * Deltas of `current` against `previous`; null for the first sample (no previous one). When stats_reset
 * changed, the counters restarted from zero, so the deltas are the current values.
 */
export function deltaSince<K extends string>(previous: Sample<K> | undefined, current: Sample<K>): Counters<K> | null {
  if (!previous) return null
  return deltaOf(previous.resetAt === current.resetAt ? previous.values : zerosOf(current.values), current.values)
}

/** The stats_reset column as a comparable string (null when never reset). */
export function resetStamp(value: unknown): string | null {
  if (value === null || value === undefined) return null
  return value instanceof Date ? value.toISOString() : String(value)
}

/** Durations and lags computed from two clocks can come out slightly negative; clamp them at zero. */
export function nonNegative(value: number | null): number | null {
  return value === null ? null : Math.max(0, value)
}

/**
 * Deltas of a one-row counter view (pg_stat_bgwriter, pg_stat_wal): reads the version's SQL, keeps the
 * sample under `stateKey`, and returns the deltas since the previous sample (undefined on the first).
 */
export async function singleRowDeltas<K extends string>(
  ctx: PostgresContext,
  stateKey: string,
  variants: Readonly<Record<number, string>>,
  keys: readonly K[],
): Promise<Counters<K> | undefined> {
  const [row] = await ctx.sql.unsafe<Record<string, unknown>[]>(forVersion(variants, ctx.major), [], PREPARED)
  if (!row) return undefined
  const values = Object.fromEntries(keys.map((k) => [k, num(row[k])])) as Counters<K>
  const sample: Sample<K> = { resetAt: resetStamp(row.stats_reset), values }
  const delta = deltaSince(ctx.state.get(stateKey) as Sample<K> | undefined, sample)
  ctx.state.set(stateKey, sample)
  return delta ?? undefined
}

// A fingerprint of pg_class and pg_index: the number of rows and the sum of their xmin in each. Every
// committed insert, delete or update of a row (CREATE, DROP, ALTER, TRUNCATE, REINDEX, VACUUM FULL,
// CLUSTER, a storage parameter set, a primary key added: all write new row versions) moves a count or
// the sum, since a new row version carries the newer transaction's ID; in-place updates (VACUUM and
// ANALYZE setting relpages and reltuples) do not, and change nothing a collector keeps from these
// catalogs. Rows replaced without moving the sum would need their old xmins to add up exactly to the
// new ones', which only transaction IDs wrapped around 2^32 in between can give (a freeze moving an xmin
// to 2 moves it anyway). 2.5 ms with 1,000 tables (4,400 rows of pg_class) on PostgreSQL 17.
const CATALOG_SIGNAL_SQL = `
  SELECT (SELECT count(*) || ':' || coalesce(sum(xmin::text::int8), 0) FROM pg_class) || '/' ||
         (SELECT count(*) || ':' || coalesce(sum(xmin::text::int8), 0) FROM pg_index) AS signal`

/** The catalog fingerprint (CATALOG_SIGNAL_SQL): what a collector read from pg_class and pg_index holds while it stays. */
export async function catalogSignal(ctx: PostgresContext): Promise<string> {
  const [row] = await ctx.sql.unsafe<{ signal: string }[]>(CATALOG_SIGNAL_SQL, [], PREPARED)
  return row?.signal ?? ''
}
