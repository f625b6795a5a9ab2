// The writes of one ingest batch: the apply* functions that planBatch (ingest/plan-batch.ts) calls for each
// section (statements/, objects/, internals/, clickhouse/, snapshots.ts, statements/plans.ts)
// add their statements here instead of running them, and the batch sends them all at
// once with tx.runAll, one exchange with a PostgreSQL store instead of one per statement.
// An insert or upsert of many rows is one statement on PostgreSQL, whatever the number of rows: each
// column travels as one array parameter (`INSERT ... SELECT * FROM unnest($1::text[], $2::bigint[], ...)`),
// so a table has one statement text, prepared once per connection, where multi-row VALUES needed a text
// per row count (cut into 256/64/16/4/1-row chunks: up to six statements per section, each parsed and
// planned with thousands of parameters). SQLite runs in the process, where a statement costs no round
// trip: it keeps its multi-row VALUES in those chunks, as before. Both ways are the dialects'
// insertMany (dialect.ts).
import { INDEX_FIELDS, STATEMENT_FIELDS, TABLE_FIELDS, columnType } from '../../../shared/families.ts'
import type { SqlDialect } from '../dialect.ts'
import type { RunResult, SqlDriver } from '../driver.ts'
import type { SqlStatement } from '../sql.ts'

const FAMILY_COLUMN_TYPES = Object.fromEntries(
  [...STATEMENT_FIELDS, ...TABLE_FIELDS, ...INDEX_FIELDS].map((f) => [f.key, columnType(f)]),
)

/**
 * PostgreSQL types of the columns ingest writes, by name: a name has one type in every table (the
 * casts of the unnest arrays; text also serves the `TEXT COLLATE "C"` columns). Checked against the
 * schema by test/store/ingest-round-trips.test.ts.
 */
export const INGEST_COLUMN_TYPES: Readonly<
  Record<string, 'text' | 'integer' | 'bigint' | 'double precision' | 'boolean'>
> = {
  // every counter and gauge of the statement, table and index families (src/shared/families.ts)
  ...FAMILY_COLUMN_TYPES,
  database_id: 'text',
  resolution: 'integer',
  bucket: 'bigint',
  sampled_at: 'bigint',
  ts: 'bigint',
  kind: 'text',
  payload: 'text',
  // snapshots (snapshots.ts), agent_clocks (agent-clock/writes.ts)
  received_at: 'bigint',
  offset_ms: 'bigint',
  measured_at: 'bigint',
  interval_seconds: 'double precision',
  // query_texts, explain_plans
  query_hash: 'text',
  query_text: 'text',
  first_seen: 'bigint',
  last_seen: 'bigint',
  p99_ms: 'double precision',
  plan_hash: 'text',
  source: 'text',
  total_cost: 'double precision',
  actual_time_ms: 'double precision',
  seq_scans: 'integer',
  index_scans: 'integer',
  rows_estimated: 'double precision',
  rows_actual: 'double precision',
  plan_json: 'text',
  // latest_tables, latest_indexes
  schema_name: 'text',
  table_name: 'text',
  index_name: 'text',
  last_vacuum: 'bigint',
  last_autovacuum: 'bigint',
  last_analyze: 'bigint',
  last_autoanalyze: 'bigint',
  has_primary_key: 'boolean',
  autovacuum_enabled: 'boolean',
  index_def: 'text',
  is_unique: 'boolean',
  is_primary: 'boolean',
  is_valid: 'boolean',
  // wait_stats, replication_lag, replication_slot_lag, metric_counters, metric_gauges
  wait_event_type: 'text',
  wait_event: 'text',
  count: 'bigint',
  total_duration_ms: 'double precision',
  replication_lag_bytes: 'bigint',
  replication_lag_seconds: 'double precision',
  slot_name: 'text',
  lag_bytes: 'bigint',
  subject: 'text',
  metric: 'text',
  value: 'double precision',
  // events (events/events.ts)
  object: 'text',
  severity: 'text',
  title: 'text',
  detail: 'text',
  link: 'text',
  // session_snapshots, lock_chains, lock_chain_members (sessions/writes.ts)
  blocked: 'integer',
  longest_wait_ms: 'double precision',
  longest_ms: 'double precision',
  activity: 'text',
  locks: 'text',
  root_pid: 'integer',
  root_xact_start: 'bigint',
  started_at: 'bigint',
  samples: 'integer',
  max_blocked: 'integer',
  root_user: 'text',
  root_application: 'text',
  root_state: 'text',
  root_statement: 'text',
  pid: 'integer',
  wait_started: 'bigint',
  blocked_by: 'text',
  user_name: 'text',
  application: 'text',
  statement: 'text',
  // log_entries, log_counts (logs/writes.ts)
  id: 'text',
  sqlstate: 'text',
  message: 'text',
  fingerprint: 'text',
  database_name: 'text',
  client: 'text',
  query_id: 'text',
  fields: 'text',
  // custom_metrics, custom_metric_series (custom-metrics/writes.ts)
  name: 'text',
  labels: 'text',
  value_columns: 'text',
  interval_s: 'integer',
  description: 'text',
  alert: 'text',
  updated_at: 'bigint',
  series_key: 'text',
  column_name: 'text',
  raw_value: 'double precision',
  raw_at: 'bigint',
  value_at: 'bigint',
  seen_at: 'bigint',
}

/** What an upsert does with a row whose key exists; absent: a plain INSERT. */
export interface OnConflict {
  key: readonly string[]
  /** Column → its SQL on conflict (`excluded.<col>` is the incoming value); empty: DO NOTHING. */
  update: Record<string, string>
  /** Condition for the update (e.g. only when the incoming row is newer). */
  onlyIf?: string
}

function conflictClause(conflict: OnConflict | undefined): string {
  if (!conflict) return ''
  const set = Object.entries(conflict.update)
    .map(([column, expression]) => `${column} = ${expression}`)
    .join(', ')
  return ` ON CONFLICT (${conflict.key.join(', ')}) DO ${set ? `UPDATE SET ${set}${conflict.onlyIf ? ` WHERE ${conflict.onlyIf}` : ''}` : 'NOTHING'}`
}

function pgType(column: string): string {
  const type = INGEST_COLUMN_TYPES[column]
  if (!type) throw new Error(`no PostgreSQL type known for ingest column ${column} (add it to INGEST_COLUMN_TYPES)`)
  return type
}

/**
 * What a batch's writes depend on (the rollup lock and marks, whether the stored latest tables are
 * older), sent in one exchange before them: `add` returns the way to the statement's rows once sent.
 */
export class Reads {
  private readonly statements: SqlStatement[] = []
  private results: RunResult[] | undefined

  add(statement: SqlStatement): () => Record<string, unknown>[] {
    const i = this.statements.push(statement) - 1
    return () => {
      if (!this.results) throw new Error('the reads of the batch are not sent yet')
      return this.results[i]!.rows
    }
  }

  /** Sends the reads, after `first` (statements of the caller's, in the same exchange), and gives back the results of `first`. */
  async send(tx: SqlDriver, first: readonly SqlStatement[] = []): Promise<RunResult[]> {
    const results = await tx.runAll(first.length === 0 ? this.statements : [...first, ...this.statements])
    this.results = results.slice(first.length)
    return results.slice(0, first.length)
  }
}

/** The statements of one batch, in the order they were added. */
export class Writes {
  readonly statements: SqlStatement[] = []

  constructor(readonly sqlDialect: SqlDialect) {}

  add(sql: string, params: unknown[] = []): void {
    this.statements.push({ sql, params })
  }

  /**
   * INSERT of many rows, with ON CONFLICT when `conflict` is given. A key may appear once among the
   * rows (an upsert cannot update one row twice in one statement).
   */
  upsert(table: string, columns: readonly string[], rows: readonly unknown[][], conflict?: OnConflict): void {
    if (rows.length === 0) return
    const shape = JSON.stringify([table, columns, conflict ?? null])
    this.statements.push(
      ...this.sqlDialect.insertMany(shape, table, columns, rows, () => conflictClause(conflict), pgType),
    )
  }
}
