// The counter families that have columns of their own in the store: a statement's counters
// (query_stats), a table's and an index's (table_stats / latest_tables, index_stats / latest_indexes).
// Each field is defined here once: its name, whether it is a counter (the agent sends deltas, buckets
// sum them) or a gauge (the bucket keeps the latest value), its unit, where the PostgreSQL agent reads it.
// Everything else is derived from these lists: the wire schema (src/shared/wire.ts), the agent's SELECT
// lists (src/agent/collectors/postgres/), the store's columns (the family step after the migrations,
// src/server/store/family-columns.ts, adds a column a field gained to existing stores), the ingest's
// writes and rollups, and the API's fields.
//
// Adding a counter is one line in a list below. A field added after the first release is optional on the
// wire (`required` only for fields every agent sent), so agents older than the server keep working and
// servers older than the agent ignore it (unknown fields are dropped, src/server/unknown-fields.ts).
// The other families (bgwriter, wal, io, database and ClickHouse server metrics) are stored as rows of
// (source, subject, metric, value) and need no column: their key lists live in src/shared/metrics.ts.

/** What a number measures; milliseconds are stored as doubles, everything else as 64-bit integers. */
export type Unit = 'calls' | 'rows' | 'blocks' | 'tuples' | 'scans' | 'bytes' | 'ms' | 'count'

/**
 * Where the PostgreSQL agent reads a field: an expression of the family's view, or alternatives by the
 * first version that has each (newest first). The version is the server's major version for tables and
 * indexes, and pg_stat_statements' extension version for statements (major × 100 + minor: 1.11 is 111),
 * since an upgraded server may keep an old extension. No alternative for the version: NULL.
 */
export type PgSource = string | readonly (readonly [since: number, expression: string])[]

export interface Field<K extends string = string> {
  readonly key: K
  /** counter: the agent sends the increase since its previous sample; gauge: the value now. */
  readonly kind: 'counter' | 'gauge'
  readonly unit: Unit
  /** Sent by every agent version (only fields of the first release); the others are optional on the wire. */
  readonly required?: true
  /** PostgreSQL's view column (or alternatives by version); absent for a field PostgreSQL has no source for. */
  readonly pg?: PgSource
}

/** pg_stat_statements' counters of a statement, and ClickHouse's (query_log) that PostgreSQL has none of. */
export const STATEMENT_FIELDS = [
  { key: 'calls', kind: 'counter', unit: 'calls', required: true, pg: 'calls' },
  { key: 'total_time_ms', kind: 'counter', unit: 'ms', required: true, pg: 'total_exec_time' },
  { key: 'rows', kind: 'counter', unit: 'rows', required: true, pg: 'rows' },
  { key: 'shared_blks_hit', kind: 'counter', unit: 'blocks', required: true, pg: 'shared_blks_hit' },
  { key: 'shared_blks_read', kind: 'counter', unit: 'blocks', required: true, pg: 'shared_blks_read' },
  { key: 'shared_blks_dirtied', kind: 'counter', unit: 'blocks', pg: 'shared_blks_dirtied' },
  { key: 'shared_blks_written', kind: 'counter', unit: 'blocks', pg: 'shared_blks_written' },
  { key: 'temp_blks_read', kind: 'counter', unit: 'blocks', pg: 'temp_blks_read' },
  { key: 'temp_blks_written', kind: 'counter', unit: 'blocks', pg: 'temp_blks_written' },
  {
    key: 'blk_read_time_ms',
    kind: 'counter',
    unit: 'ms',
    pg: [
      [111, 'shared_blk_read_time'],
      [0, 'blk_read_time'],
    ],
  },
  {
    key: 'blk_write_time_ms',
    kind: 'counter',
    unit: 'ms',
    pg: [
      [111, 'shared_blk_write_time'],
      [0, 'blk_write_time'],
    ],
  },
  // ClickHouse: bytes read and peak memory summed over the calls, and the calls that failed.
  { key: 'read_bytes', kind: 'counter', unit: 'bytes' },
  { key: 'memory_bytes', kind: 'counter', unit: 'bytes' },
  { key: 'errors', kind: 'counter', unit: 'calls' },
] as const satisfies readonly Field[]

/** pg_stat_user_tables' counters and gauges of a table, with its sizes. */
export const TABLE_FIELDS = [
  { key: 'seq_scan', kind: 'counter', unit: 'scans', required: true, pg: 'seq_scan' },
  { key: 'seq_tup_read', kind: 'counter', unit: 'tuples', required: true, pg: 'seq_tup_read' },
  { key: 'idx_scan', kind: 'counter', unit: 'scans', required: true, pg: 'idx_scan' },
  { key: 'idx_tup_fetch', kind: 'counter', unit: 'tuples', required: true, pg: 'idx_tup_fetch' },
  { key: 'n_tup_ins', kind: 'counter', unit: 'tuples', required: true, pg: 'n_tup_ins' },
  { key: 'n_tup_upd', kind: 'counter', unit: 'tuples', required: true, pg: 'n_tup_upd' },
  { key: 'n_tup_del', kind: 'counter', unit: 'tuples', required: true, pg: 'n_tup_del' },
  { key: 'n_tup_hot_upd', kind: 'counter', unit: 'tuples', required: true, pg: 'n_tup_hot_upd' },
  { key: 'n_tup_newpage_upd', kind: 'counter', unit: 'tuples', pg: [[16, 'n_tup_newpage_upd']] },
  { key: 'n_live_tup', kind: 'gauge', unit: 'tuples', required: true, pg: 'n_live_tup' },
  { key: 'n_dead_tup', kind: 'gauge', unit: 'tuples', required: true, pg: 'n_dead_tup' },
  { key: 'table_size_bytes', kind: 'gauge', unit: 'bytes', required: true, pg: 'table_size_bytes' },
  { key: 'index_size_bytes', kind: 'gauge', unit: 'bytes', required: true, pg: 'index_size_bytes' },
  // The parts of table_size_bytes a DBA asks about (issue 26): the heap's main fork (pg_relation_size)
  // and the TOAST table with its index (pg_total_relation_size of reltoastrelid; 0 without one).
  { key: 'heap_bytes', kind: 'gauge', unit: 'bytes', pg: 'heap_bytes' },
  { key: 'toast_bytes', kind: 'gauge', unit: 'bytes', pg: 'toast_bytes' },
  // Rows inserted, updated or deleted since the table was last analyzed (issue 32: stale statistics).
  { key: 'n_mod_since_analyze', kind: 'gauge', unit: 'tuples', pg: 'n_mod_since_analyze' },
] as const satisfies readonly Field[]

/** pg_stat_user_indexes' counters of an index, with its size. */
export const INDEX_FIELDS = [
  { key: 'idx_scan', kind: 'counter', unit: 'scans', required: true, pg: 'idx_scan' },
  { key: 'idx_tup_read', kind: 'counter', unit: 'tuples', required: true, pg: 'idx_tup_read' },
  { key: 'idx_tup_fetch', kind: 'counter', unit: 'tuples', required: true, pg: 'idx_tup_fetch' },
  { key: 'size_bytes', kind: 'gauge', unit: 'bytes', required: true, pg: 'size_bytes' },
] as const satisfies readonly Field[]

type Keys<F extends readonly Field[]> = F[number]['key']
type KindKeys<F extends readonly Field[], K extends Field['kind']> = Extract<F[number], { kind: K }>['key']

/** The fields of one kind (counters or gauges), typed as such. */
export const ofKind = <F extends Field, K extends Field['kind']>(fields: readonly F[], kind: K) =>
  fields.filter((f): f is Extract<F, { kind: K }> => f.kind === kind)

const keysOf = <F extends readonly Field[], K extends Field['kind']>(fields: F, kind: K) =>
  ofKind(fields, kind).map((f) => f.key) as KindKeys<F, K>[]

export type StatementCounter = Keys<typeof STATEMENT_FIELDS>
/** Every statement counter the store keeps, in the order of query_stats' columns. */
export const STATEMENT_COUNTERS: readonly StatementCounter[] = STATEMENT_FIELDS.map((f) => f.key)
/** The statement counters PostgreSQL's agent reads (the others are ClickHouse's). */
export const POSTGRES_STATEMENT_COUNTERS = STATEMENT_FIELDS.filter((f) => 'pg' in f).map((f) => f.key) as Extract<
  (typeof STATEMENT_FIELDS)[number],
  { pg: PgSource }
>['key'][]

export type TableCounter = KindKeys<typeof TABLE_FIELDS, 'counter'>
export type TableGauge = KindKeys<typeof TABLE_FIELDS, 'gauge'>
export const TABLE_COUNTERS: readonly TableCounter[] = keysOf(TABLE_FIELDS, 'counter')
export const TABLE_GAUGES: readonly TableGauge[] = keysOf(TABLE_FIELDS, 'gauge')

export type IndexCounter = KindKeys<typeof INDEX_FIELDS, 'counter'>
export type IndexGauge = KindKeys<typeof INDEX_FIELDS, 'gauge'>
export const INDEX_COUNTERS: readonly IndexCounter[] = keysOf(INDEX_FIELDS, 'counter')
export const INDEX_GAUGES: readonly IndexGauge[] = keysOf(INDEX_FIELDS, 'gauge')

/** A field's column type in the PostgreSQL store (SQLite: INTEGER or REAL): durations are doubles, the rest 64-bit integers. */
export const columnType = (field: Field): 'bigint' | 'double precision' =>
  field.unit === 'ms' ? 'double precision' : 'bigint'

/** The statement counters kept as doubles (durations); the others are 64-bit integers. */
export const STATEMENT_DURATIONS: ReadonlySet<string> = new Set(
  STATEMENT_FIELDS.filter((f) => columnType(f) === 'double precision').map((f) => f.key),
)

/**
 * The SELECT list that reads `fields` from PostgreSQL at `version` (see PgSource): `expression AS key`,
 * or `NULL AS key` where the version has none. Fields without a PostgreSQL source are left out.
 * `prefix` qualifies plain column names (`s.` for `s.idx_scan`); an expression is used as written, so
 * it qualifies its own columns (the indexes collector reads from `s`, pg_stat_user_indexes with sizes).
 */
export function pgSelectList(fields: readonly Field[], version: number, prefix = ''): string {
  const out: string[] = []
  for (const field of fields) {
    if (field.pg === undefined) continue
    const expression = typeof field.pg === 'string' ? field.pg : field.pg.find(([since]) => version >= since)?.[1]
    if (expression === undefined) {
      out.push(`NULL AS ${field.key}`)
      continue
    }
    // The prefix qualifies a plain column name only; an expression names its columns itself.
    const source = /^[a-z_][a-z0-9_]*$/.test(expression) ? `${prefix}${expression}` : expression
    out.push(source === `${prefix}${field.key}` ? source : `${source} AS ${field.key}`)
  }
  return out.join(', ')
}

/** A family's tables in the store, and the definition of a column a field gained, per store. */
export interface FamilyTable {
  table: string
  fields: readonly Field[]
  /** Statement buckets are NOT NULL DEFAULT 0 (a sum); object rows are nullable (null: not sampled yet). */
  notNullZero: boolean
}

export const FAMILY_TABLES: readonly FamilyTable[] = [
  { table: 'query_stats', fields: STATEMENT_FIELDS, notNullZero: true },
  { table: 'table_stats', fields: TABLE_FIELDS, notNullZero: false },
  { table: 'latest_tables', fields: TABLE_FIELDS, notNullZero: false },
  { table: 'index_stats', fields: INDEX_FIELDS, notNullZero: false },
  { table: 'latest_indexes', fields: INDEX_FIELDS, notNullZero: false },
]
