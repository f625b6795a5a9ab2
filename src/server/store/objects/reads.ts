// Reads of tables and indexes: their latest rows, sorted and filtered in SQL, and their series at the
// resolution a window asks for. How the rows are kept, and why they read exactly: buckets.ts.
import { INDEX_COUNTERS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_GAUGES } from '../../../shared/families.ts'
import type { SqlDriver } from '../driver.ts'
import { unusedIndexMinBytes } from '../../limits.ts'
import { hourlyRowsSql } from './hours.ts'
import { readMarks } from '../rollups/rollups.ts'
import { HOUR_MS, floorTo, seriesResolution, type Window } from '../window.ts'
import { type BucketTable, INDEX_BUCKETS, SAMPLED_SOURCE, TABLE_BUCKETS, TABLE_TIMES } from './buckets.ts'
import {
  INDEX_POINT_FIELDS,
  type IndexRow,
  type IndexSort,
  type ObjectReads,
  type Point,
  type Series,
  TABLE_POINT_FIELDS,
  type TableRow,
  type TableSort,
} from './types.ts'
import { numOrNull } from '../rows.ts'

/** Largest first; unknown values last; ties by name, so the order is stable. */
const TABLE_ORDER: Record<TableSort, string> = {
  size: 'table_size_bytes',
  dead_tuples: 'n_dead_tup',
  seq_scans: 'seq_scan',
  live_tuples: 'n_live_tup',
  index_size: 'index_size_bytes',
  heap_size: 'heap_bytes',
  toast_size: 'toast_bytes',
  total_size: '(table_size_bytes + index_size_bytes)',
}
const INDEX_ORDER: Record<IndexSort, string> = { size: 'size_bytes', scans: 'idx_scan', tuples_read: 'idx_tup_read' }

const orderBy = (column: string, names: string) => `ORDER BY ${column} IS NULL, ${column} DESC, ${names}`

const boolOrNull = (v: unknown): boolean | null => (v === null || v === undefined ? null : Boolean(v))

/**
 * The latest rows of a section with the time the section was last carried (`carried_at`), which is
 * every row's "as of" time: each stored row was named by that batch (the first batch of a cycle removes
 * the others), whereas its own ts says when it was last written (an unchanged object's row is not).
 * From the latest hour's sampled row (kept as long as the latest rows, see the header).
 */
function latestRowsSql(spec: BucketTable): string {
  return `${spec.latest} LEFT JOIN (
       SELECT sampled_at AS carried_at FROM metric_gauges
       WHERE database_id = $1 AND source = '${SAMPLED_SOURCE}' AND resolution = 3600 AND subject = '' AND metric = '${spec.section}'
       ORDER BY bucket DESC LIMIT 1
     ) carried ON 1 = 1`
}

/** A latest row's "as of" time (see latestRowsSql). */
const asOf = (r: Record<string, unknown>) => Math.max(Number(r.ts), numOrNull(r.carried_at) ?? Number.NEGATIVE_INFINITY)

function toTableRow(r: Record<string, unknown>): TableRow {
  const numbers = Object.fromEntries(
    [...TABLE_COUNTERS, ...TABLE_GAUGES, ...TABLE_TIMES].map((c) => [c, numOrNull(r[c])]),
  )
  return {
    schema_name: String(r.schema_name),
    table_name: String(r.table_name),
    ts: asOf(r),
    ...numbers,
    has_primary_key: boolOrNull(r.has_primary_key),
    autovacuum_enabled: boolOrNull(r.autovacuum_enabled),
  } as TableRow
}

function toIndexRow(r: Record<string, unknown>): IndexRow {
  return {
    schema_name: String(r.schema_name),
    table_name: String(r.table_name),
    index_name: String(r.index_name),
    ts: asOf(r),
    ...Object.fromEntries([...INDEX_COUNTERS, ...INDEX_GAUGES].map((c) => [c, numOrNull(r[c])])),
    index_def: String(r.index_def),
    is_unique: Boolean(r.is_unique),
    is_primary: Boolean(r.is_primary),
    is_valid: Boolean(r.is_valid),
  } as IndexRow
}

/**
 * The buckets of one object in the window: minute buckets up to 24 hours, hourly beyond. Hourly points
 * exist for every hour the object was reported: the rolled-up rows of the hours before the database's
 * hourly mark, and the hours from it on (the current one, or closed ones not rolled up yet) computed
 * from the minute rows the same way (objects/hours.ts), so an hour reads the same before and after
 * its rollup. A sampled minute without the object's row (it did not move) reads as zero deltas with the
 * gauges carried forward from its latest earlier row of that hour (see the header).
 */
async function series<C extends string>(
  driver: SqlDriver,
  spec: BucketTable,
  key: { databaseId: string; schema: string; name: string },
  values: readonly C[],
  window: Window,
): Promise<Series<C>> {
  const resolution = seriesResolution(window)
  const from = floorTo(window.since, resolution * 1000)
  const object = `database_id = $1 AND schema_name = $2 AND ${spec.keyColumns[1]} = $3`
  const pointOf = (r: Record<string, unknown>) =>
    ({ ts: Number(r.bucket), ...Object.fromEntries(values.map((v) => [v, numOrNull(r[v])])) }) as Point<C>
  const bucketRows = (until: number) =>
    driver.all(
      `SELECT bucket, ${values.join(', ')} FROM ${spec.table}
       WHERE ${object} AND resolution = $4 AND bucket >= $5 AND bucket < $6
       ORDER BY bucket`,
      [key.databaseId, key.schema, key.name, resolution, from, until],
    )
  if (resolution === 3600) {
    // A database without marks wrote no table or index rows since hourly rows are rolled up: its
    // hourly rows are all complete (rollups/rollups.ts).
    const marks = await readMarks(driver, key.databaseId)
    const rolledUntil = marks ? Math.min(Math.max(marks.hours, from), window.until) : window.until
    const rolled = rolledUntil > from ? await bucketRows(rolledUntil) : []
    if (rolledUntil >= window.until) return { resolution, points: rolled.map(pointOf) }
    // The window's last hour whole, as its hourly row would hold it.
    const computed = await driver.all(
      `SELECT bucket, ${values.join(', ')} FROM (${hourlyRowsSql(driver.sqlDialect, spec.hours, true)}) h ORDER BY bucket`,
      [key.databaseId, rolledUntil, Math.ceil(window.until / HOUR_MS) * HOUR_MS, key.schema, key.name],
    )
    return { resolution, points: [...rolled, ...computed].map(pointOf) }
  }
  const rows = await bucketRows(window.until)

  const sampled = await driver.all<{ bucket: unknown }>(
    `SELECT bucket FROM metric_gauges
     WHERE database_id = $1 AND source = $2 AND resolution = 60 AND bucket >= $3 AND bucket < $4 AND subject = '' AND metric = $5`,
    [key.databaseId, SAMPLED_SOURCE, from, window.until, spec.section],
  )
  const carried = await driver.get(
    `SELECT ${[...spec.counters, ...spec.gauges].join(', ')} FROM ${spec.table} WHERE ${object} AND resolution = 60 AND bucket >= $4 AND bucket < $5 ORDER BY bucket DESC LIMIT 1`,
    [key.databaseId, key.schema, key.name, floorTo(from, HOUR_MS), from],
  )
  // The gauges as of the bucket being read; undefined while no row of the object is known in its hour.
  let gauges: (number | null)[] | undefined = carried ? spec.gauges.map((g) => numOrNull(carried[g])) : undefined
  // Which counters the latest row knows: a null one (idx_scan of a table without indexes, a counter the
  // object's PostgreSQL lacks) stays null in an idle minute, a known one reads 0. A row of all nulls is a
  // first sample (no deltas yet) and says nothing of which are known.
  const knownIn = (r: Record<string, unknown>, before: boolean[]) => {
    const known = spec.counters.map((c) => r[c] !== null && r[c] !== undefined)
    return known.some(Boolean) ? known : before
  }
  let known: boolean[] = knownIn(
    carried ?? {},
    spec.counters.map(() => true),
  )
  const byBucket = new Map(rows.map((r) => [Number(r.bucket), r]))
  const buckets = [...new Set([...byBucket.keys(), ...sampled.map((r) => Number(r.bucket))])].sort((a, b) => a - b)
  const points: Point<C>[] = []
  let hour = floorTo(from, HOUR_MS)
  for (const bucket of buckets) {
    if (floorTo(bucket, HOUR_MS) !== hour) {
      hour = floorTo(bucket, HOUR_MS)
      gauges = undefined
    }
    const row = byBucket.get(bucket)
    if (row) {
      const point = pointOf(row)
      gauges = spec.gauges.map((g, i) => numOrNull(row[g]) ?? gauges?.[i] ?? null)
      known = knownIn(row, known)
      points.push(point)
    } else if (gauges) {
      const point: Record<string, number | null> = { ts: bucket }
      spec.counters.forEach((c, i) => {
        point[c] = known[i] ? 0 : null
      })
      spec.gauges.forEach((g, i) => {
        point[g] = gauges![i]!
      })
      points.push(point as Point<C>)
    }
  }
  return { resolution, points }
}

/** Reads for the routes of tables and indexes. */
export function objectReads(driver: SqlDriver): ObjectReads {
  return {
    async listTables(databaseId: string, sort: TableSort, limit: number): Promise<TableRow[]> {
      const rows = await driver.all(
        `SELECT * FROM ${latestRowsSql(TABLE_BUCKETS)} WHERE database_id = $1 ${orderBy(TABLE_ORDER[sort], 'schema_name, table_name')} LIMIT $2`,
        [databaseId, limit],
      )
      return rows.map(toTableRow)
    },

    async table(databaseId: string, schema: string, name: string): Promise<TableRow | undefined> {
      const row = await driver.get(
        `SELECT * FROM ${latestRowsSql(TABLE_BUCKETS)} WHERE database_id = $1 AND schema_name = $2 AND table_name = $3`,
        [databaseId, schema, name],
      )
      return row ? toTableRow(row) : undefined
    },

    tableSeries(databaseId: string, schema: string, name: string, window: Window) {
      return series(driver, TABLE_BUCKETS, { databaseId, schema, name }, TABLE_POINT_FIELDS, window)
    },

    /** Indexes by `sort`; with `unusedOnly`, only those the spec calls unused (never scanned, neither primary nor unique, over 1 MB). */
    async listIndexes(databaseId: string, sort: IndexSort, limit: number, unusedOnly = false): Promise<IndexRow[]> {
      const unused = 'AND idx_scan = 0 AND is_primary = $3 AND is_unique = $3 AND size_bytes > $4'
      const rows = await driver.all(
        `SELECT * FROM ${latestRowsSql(INDEX_BUCKETS)} WHERE database_id = $1 ${unusedOnly ? unused : ''}
         ${orderBy(INDEX_ORDER[sort], 'schema_name, index_name')} LIMIT $2`,
        unusedOnly ? [databaseId, limit, false, unusedIndexMinBytes] : [databaseId, limit],
      )
      return rows.map(toIndexRow)
    },

    async index(databaseId: string, schema: string, name: string): Promise<IndexRow | undefined> {
      const row = await driver.get(
        `SELECT * FROM ${latestRowsSql(INDEX_BUCKETS)} WHERE database_id = $1 AND schema_name = $2 AND index_name = $3`,
        [databaseId, schema, name],
      )
      return row ? toIndexRow(row) : undefined
    },

    indexSeries(databaseId: string, schema: string, name: string, window: Window) {
      return series(driver, INDEX_BUCKETS, { databaseId, schema, name }, INDEX_POINT_FIELDS, window)
    },
  }
}
