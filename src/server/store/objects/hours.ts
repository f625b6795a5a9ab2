// Hourly buckets of tables and indexes (table_stats, index_stats) built from their minute rows: ingest
// writes minute rows only, and an hour's rows are rolled up once the hour closed, by the statements'
// rollup (rollups/rollups.ts: same lock, same moments, the same `hours_until` mark). A read of hours not
// rolled up yet computes them with the same query from the minute rows (objects/reads.ts series), so an
// hour reads the same before and after its rollup.
// An hourly row is what ingest wrote into it before rollups existed: the counters summed (NULL only
// while every minute row's is: first samples carry no delta), each gauge as of the hour's last minute
// row that measured it (a minute row's gauges are already the minute's last measured ones), and
// sampled_at the latest minute row's. A leaf module (families and window only), so rollups/rollups.ts and
// objects/reads.ts both import it without an import cycle.
import {
  type Field,
  INDEX_COUNTERS,
  INDEX_FIELDS,
  INDEX_GAUGES,
  TABLE_COUNTERS,
  TABLE_FIELDS,
  TABLE_GAUGES,
  columnType,
} from '../../../shared/families.ts'
import type { SqlDialect } from '../dialect.ts'
import type { SqlStatement } from '../sql.ts'
import { HOUR_MS } from '../window.ts'

export interface ObjectHours {
  table: 'table_stats' | 'index_stats'
  /** The column naming the object after schema_name. */
  name: 'table_name' | 'index_name'
  counters: readonly string[]
  gauges: readonly string[]
  /** Counters kept as doubles (summed plainly); the others are BIGINT and sum saturating (sums.ts). */
  doubles: ReadonlySet<string>
}

const doublesOf = (fields: readonly Field[]): ReadonlySet<string> =>
  new Set(fields.filter((f) => columnType(f) === 'double precision').map((f) => f.key))

export const TABLE_HOURS: ObjectHours = {
  table: 'table_stats',
  name: 'table_name',
  counters: TABLE_COUNTERS,
  gauges: TABLE_GAUGES,
  doubles: doublesOf(TABLE_FIELDS),
}
export const INDEX_HOURS: ObjectHours = {
  table: 'index_stats',
  name: 'index_name',
  counters: INDEX_COUNTERS,
  gauges: INDEX_GAUGES,
  doubles: doublesOf(INDEX_FIELDS),
}
export const OBJECT_HOURS = [TABLE_HOURS, INDEX_HOURS] as const

/**
 * The hourly rows of the minute rows in [$2, $3) of database $1, one per object and hour, as
 * (database_id, schema_name, <name>, resolution, bucket, sampled_at, counters..., gauges...);
 * `object` (with $4 and $5) narrows it to one object. The counters are summed; each gauge is its
 * latest non-null value. Two shapes, each the fastest one measured that its store plans reliably:
 * - with the dialect's lastNonNull aggregate (PostgreSQL): one grouped pass over the range's rows;
 * - without it (SQLite): the objects and hours present from the (database_id, resolution, bucket)
 *   index alone, each one's minute rows then one range of the primary key, summed, and each gauge a
 *   search that walks that range down from the hour's end and stops at the first row measuring it.
 * Medians for an hour of 100 tables that all moved every minute (6,000 rows), on a machine at load 13
 * to 15: SQLite (where it runs on the event loop) 7 ms the second way, 11 ms a grouped pass with these
 * searches, 36-54 ms an ordered JSON aggregate (3.44+), 70-360 ms window functions; PostgreSQL 50-80 ms
 * the first way, 0.8-2.5 s the second (its planner, with statistics lagging a fast-growing table, ran
 * a nested loop over the whole hour per object), 1.5 s window functions.
 */
export function hourlyRowsSql(dialect: SqlDialect, spec: ObjectHours, object = false): string {
  const hour = `(bucket / ${HOUR_MS}) * ${HOUR_MS}`
  const inRange = `database_id = $1${object ? ` AND schema_name = $4 AND ${spec.name} = $5` : ''} AND resolution = 60 AND bucket >= $2 AND bucket < $3`
  /** A counter's sum over the group, of the column `c` of the rows named `from` (none: unqualified). */
  const sum = (c: string, from = '') =>
    `${spec.doubles.has(c) ? `SUM(${from}${c})` : dialect.saturatingSum(`${from}${c}`)} AS ${c}`
  const lastNonNull = dialect.lastNonNull
  if (lastNonNull) {
    return `SELECT CAST($1 AS TEXT) AS database_id, schema_name, ${spec.name}, 3600 AS resolution, ${hour} AS bucket, MAX(sampled_at) AS sampled_at,
       ${[...spec.counters.map((c) => sum(c)), ...spec.gauges.map((g) => `${lastNonNull(g, 'bucket')} AS ${g}`)].join(', ')}
     FROM ${spec.table} WHERE ${inRange}
     GROUP BY schema_name, ${spec.name}, ${hour}`
  }
  const inHour = (t: string) =>
    `${t}.database_id = $1 AND ${t}.schema_name = o.schema_name AND ${t}.${spec.name} = o.${spec.name} AND ${t}.resolution = 60 AND ${t}.bucket >= o.hour AND ${t}.bucket < o.hour + ${HOUR_MS}`
  const searched = spec.gauges.map(
    (g) =>
      `(SELECT x.${g} FROM ${spec.table} x WHERE ${inHour('x')} AND x.${g} IS NOT NULL ORDER BY x.bucket DESC LIMIT 1) AS ${g}`,
  )
  return `SELECT CAST($1 AS TEXT) AS database_id, o.schema_name, o.${spec.name}, 3600 AS resolution, o.hour AS bucket, MAX(t.sampled_at) AS sampled_at,
       ${[...spec.counters.map((c) => sum(c, 't.')), ...searched].join(', ')}
     FROM (SELECT DISTINCT schema_name, ${spec.name}, ${hour} AS hour FROM ${spec.table} WHERE ${inRange}) o
     JOIN ${spec.table} t ON ${inHour('t')}
     GROUP BY o.schema_name, o.${spec.name}, o.hour`
}

/**
 * The statement replacing the database's hourly rows of `spec` in [from, until) (whole hours) by the
 * rollup of their minute rows (hourlyRowsSql). Idempotent: a rerun writes the same rows.
 */
export function rollUpObjectHours(
  dialect: SqlDialect,
  spec: ObjectHours,
  databaseId: string,
  from: number,
  until: number,
): SqlStatement {
  const values = ['sampled_at', ...spec.counters, ...spec.gauges]
  return {
    sql: `INSERT INTO ${spec.table} (database_id, schema_name, ${spec.name}, resolution, bucket, ${values.join(', ')})
     ${hourlyRowsSql(dialect, spec)}
     ON CONFLICT (database_id, schema_name, ${spec.name}, resolution, bucket) DO UPDATE SET ${values.map((c) => `${c} = excluded.${c}`).join(', ')}`,
    params: [databaseId, from, until],
  }
}
