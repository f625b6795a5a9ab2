// Hourly buckets of tables and indexes (table_stats, index_stats) built from their minute rows: ingest
// writes minute rows only, and an hour's rows are rolled up once the hour closed, by the statements'
// rollup (sql-rollups.ts: same lock, same moments, the same `hours_until` mark). A read of hours not
// rolled up yet computes them with the same query from the minute rows (sql-objects.ts series), so an
// hour reads the same before and after its rollup.
// An hourly row is what ingest wrote into it before rollups existed: the counters summed (NULL only
// while every minute row's is: first samples carry no delta), each gauge as of the hour's last minute
// row that measured it (a minute row's gauges are already the minute's last measured ones), and
// sampled_at the latest minute row's. A leaf module (families and window only), so sql-rollups.ts and
// sql-objects.ts both import it without an import cycle.
import { type Field, INDEX_COUNTERS, INDEX_FIELDS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_FIELDS, TABLE_GAUGES, columnType } from '../../shared/families.ts'
import type { SqlDialect } from './dialect.ts'
import type { SqlStatement } from './driver.ts'
import { HOUR_MS } from './window.ts'

export interface ObjectHours {
  table: 'table_stats' | 'index_stats'
  /** The column naming the object after schema_name. */
  name: 'table_name' | 'index_name'
  counters: readonly string[]
  gauges: readonly string[]
  /** Counters kept as doubles (summed plainly); the others are BIGINT and sum saturating (sql-sums.ts). */
  doubles: ReadonlySet<string>
}

const doublesOf = (fields: readonly Field[]): ReadonlySet<string> => new Set(fields.filter((f) => columnType(f) === 'double precision').map((f) => f.key))

export const TABLE_HOURS: ObjectHours = { table: 'table_stats', name: 'table_name', counters: TABLE_COUNTERS, gauges: TABLE_GAUGES, doubles: doublesOf(TABLE_FIELDS) }
export const INDEX_HOURS: ObjectHours = { table: 'index_stats', name: 'index_name', counters: INDEX_COUNTERS, gauges: INDEX_GAUGES, doubles: doublesOf(INDEX_FIELDS) }
export const OBJECT_HOURS = [TABLE_HOURS, INDEX_HOURS] as const

/**
 * The hourly rows of the minute rows in [$2, $3) of database $1 (whole hours), one per object and
 * hour, as (database_id, schema_name, <name>, resolution, bucket, sampled_at, counters..., gauges...);
 * `object` (with $4 and $5) narrows it to one object. The objects and hours present come from the
 * (database_id, resolution, bucket) index alone; each one's minute rows are then one range of the
 * primary key, summed, and each gauge is its latest non-null value in that range (a descending key
 * search that stops at the first). On SQLite this is about 5 times faster than window functions over
 * the hour's rows (their sorts), which matters: SQLite runs it on the event loop.
 */
export function hourlyRowsSql(dialect: SqlDialect, spec: ObjectHours, object = false): string {
  const inHour = (t: string) =>
    `${t}.database_id = $1 AND ${t}.schema_name = o.schema_name AND ${t}.${spec.name} = o.${spec.name} AND ${t}.resolution = 60 AND ${t}.bucket >= o.hour AND ${t}.bucket < o.hour + ${HOUR_MS}`
  const sums = spec.counters.map((c) => `${spec.doubles.has(c) ? `SUM(t.${c})` : dialect.saturatingSum(`t.${c}`)} AS ${c}`)
  const gauges = spec.gauges.map((g) => `(SELECT x.${g} FROM ${spec.table} x WHERE ${inHour('x')} AND x.${g} IS NOT NULL ORDER BY x.bucket DESC LIMIT 1) AS ${g}`)
  return `SELECT CAST($1 AS TEXT) AS database_id, o.schema_name, o.${spec.name}, 3600 AS resolution, o.hour AS bucket, MAX(t.sampled_at) AS sampled_at,
       ${[...sums, ...gauges].join(', ')}
     FROM (
       SELECT DISTINCT schema_name, ${spec.name}, (bucket / ${HOUR_MS}) * ${HOUR_MS} AS hour FROM ${spec.table}
       WHERE database_id = $1${object ? ` AND schema_name = $4 AND ${spec.name} = $5` : ''} AND resolution = 60 AND bucket >= $2 AND bucket < $3
     ) o
     JOIN ${spec.table} t ON ${inHour('t')}
     GROUP BY o.schema_name, o.${spec.name}, o.hour`
}

/**
 * The statement replacing the database's hourly rows of `spec` in [from, until) (whole hours) by the
 * rollup of their minute rows (hourlyRowsSql). Idempotent: a rerun writes the same rows.
 */
export function rollUpObjectHours(dialect: SqlDialect, spec: ObjectHours, databaseId: string, from: number, until: number): SqlStatement {
  const values = ['sampled_at', ...spec.counters, ...spec.gauges]
  return {
    sql: `INSERT INTO ${spec.table} (database_id, schema_name, ${spec.name}, resolution, bucket, ${values.join(', ')})
     ${hourlyRowsSql(dialect, spec)}
     ON CONFLICT (database_id, schema_name, ${spec.name}, resolution, bucket) DO UPDATE SET ${values.map((c) => `${c} = excluded.${c}`).join(', ')}`,
    params: [databaseId, from, until],
  }
}
