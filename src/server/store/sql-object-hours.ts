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
 * `object` (with $4 and $5) narrows it to one object. Each gauge's value is the first of its hour's
 * minute rows ordered measured first, latest first (a window function: SQLite 3.25+, any PostgreSQL).
 */
export function hourlyRowsSql(dialect: SqlDialect, spec: ObjectHours, object = false): string {
  const hour = `(bucket / ${HOUR_MS}) * ${HOUR_MS}`
  const partition = `PARTITION BY schema_name, ${spec.name}, ${hour}`
  const lastOf = spec.gauges.map((g) => `FIRST_VALUE(${g}) OVER (${partition} ORDER BY ${g} IS NULL, bucket DESC) AS ${g}`)
  const sums = spec.counters.map((c) => `${spec.doubles.has(c) ? `SUM(${c})` : dialect.saturatingSum(c)} AS ${c}`)
  return `SELECT CAST($1 AS TEXT) AS database_id, schema_name, ${spec.name}, 3600 AS resolution, hour AS bucket, MAX(sampled_at) AS sampled_at,
       ${[...sums, ...spec.gauges.map((g) => `MAX(${g}) AS ${g}`)].join(', ')}
     FROM (
       SELECT schema_name, ${spec.name}, ${hour} AS hour, sampled_at, ${[...spec.counters, ...lastOf].join(', ')}
       FROM ${spec.table}
       WHERE database_id = $1 AND resolution = 60 AND bucket >= $2 AND bucket < $3${object ? ` AND schema_name = $4 AND ${spec.name} = $5` : ''}
     ) m
     GROUP BY schema_name, ${spec.name}, hour`
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
