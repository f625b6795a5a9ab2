// chdb has no system.query_log and no system.asynchronous_metrics. These helpers create them in chdb's
// `system` database (a Memory database that accepts new tables) with the ClickHouse server's names and
// types for the columns the agent reads, and seed known rows, so query_stats and server_metrics can be
// tested with exact expectations. Column defaults (the server's tables have none) only fill what a
// seeded row leaves out. dropSystemLogTables() gives a server whose query_log is disabled.
import type { ClickHouseRig } from './clickhouse.ts'

type Rig = Pick<ClickHouseRig, 'command' | 'insert'>

const QUERY_LOG = `CREATE TABLE IF NOT EXISTS system.query_log
(
    hostname LowCardinality(String) DEFAULT hostName(),
    type Enum8('QueryStart' = 1, 'QueryFinish' = 2, 'ExceptionBeforeStart' = 3, 'ExceptionWhileProcessing' = 4) DEFAULT 'QueryFinish',
    event_date Date DEFAULT toDate(event_time),
    event_time DateTime DEFAULT now(),
    event_time_microseconds DateTime64(6) DEFAULT toDateTime64(event_time, 6),
    query_start_time DateTime DEFAULT event_time - intDiv(query_duration_ms, 1000),
    query_start_time_microseconds DateTime64(6) DEFAULT toDateTime64(query_start_time, 6),
    query_duration_ms UInt64,
    read_rows UInt64,
    read_bytes UInt64,
    written_rows UInt64,
    written_bytes UInt64,
    result_rows UInt64,
    result_bytes UInt64,
    memory_usage UInt64,
    current_database LowCardinality(String) DEFAULT 'default',
    query String,
    formatted_query String,
    normalized_query_hash UInt64 DEFAULT normalizedQueryHash(query),
    query_kind LowCardinality(String) DEFAULT 'Select',
    databases Array(LowCardinality(String)),
    tables Array(LowCardinality(String)),
    exception_code Int32,
    exception String,
    is_initial_query UInt8 DEFAULT 1,
    user LowCardinality(String) DEFAULT 'default',
    query_id String DEFAULT toString(generateUUIDv4()),
    initial_query_id String DEFAULT query_id,
    log_comment String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(event_date)
ORDER BY (event_date, event_time)`

const ASYNCHRONOUS_METRICS = `CREATE TABLE IF NOT EXISTS system.asynchronous_metrics
(
    metric String,
    value Float64,
    description String
)
ENGINE = Memory`

/** Creates system.query_log and system.asynchronous_metrics (empty). */
export async function createSystemLogTables(rig: Rig): Promise<void> {
  await rig.command(QUERY_LOG)
  await rig.command(ASYNCHRONOUS_METRICS)
}

/** Drops both tables again: a server with query_log disabled. */
export async function dropSystemLogTables(rig: Rig): Promise<void> {
  await rig.command('DROP TABLE IF EXISTS system.query_log SYNC')
  await rig.command('DROP TABLE IF EXISTS system.asynchronous_metrics SYNC')
}

/** One query_log row; what is left out takes the column default (a finished, initial SELECT by `default`, now). */
export interface QueryLogRow {
  type?: 'QueryStart' | 'QueryFinish' | 'ExceptionBeforeStart' | 'ExceptionWhileProcessing'
  /** When the row was logged (the query's end for QueryFinish). */
  event_time?: Date
  query_duration_ms: number
  query: string
  /** Default: normalizedQueryHash(query), as the server computes it. Strings keep 64-bit precision. */
  normalized_query_hash?: string | bigint
  query_kind?: string
  read_rows?: number
  read_bytes?: number
  written_rows?: number
  written_bytes?: number
  result_rows?: number
  result_bytes?: number
  memory_usage?: number
  exception_code?: number
  exception?: string
  is_initial_query?: 0 | 1
  user?: string
  current_database?: string
  databases?: string[]
  tables?: string[]
  query_id?: string
}

/** `<unix seconds>.<microseconds>`: DateTime64 text that means the same instant in any server timezone. */
function unixMicrosText(date: Date): string {
  const ms = date.getTime()
  return `${Math.floor(ms / 1000)}.${String((ms % 1000) * 1000).padStart(6, '0')}`
}

/** Inserts query_log rows; times go as unix timestamps, so the server's timezone does not matter. */
export async function seedQueryLog(rig: Rig, rows: QueryLogRow[]): Promise<void> {
  const values = rows.map(({ event_time, normalized_query_hash, ...row }) => {
    const value: Record<string, unknown> = { ...row }
    if (normalized_query_hash !== undefined) value.normalized_query_hash = String(normalized_query_hash)
    if (event_time) {
      value.event_time = Math.floor(event_time.getTime() / 1000)
      value.event_time_microseconds = unixMicrosText(event_time)
      const start = new Date(event_time.getTime() - row.query_duration_ms)
      value.query_start_time = Math.floor(start.getTime() / 1000)
      value.query_start_time_microseconds = unixMicrosText(start)
    }
    return value
  })
  await rig.insert('system.query_log', values)
}

/** Inserts system.asynchronous_metrics rows (the real table has one row per metric). */
export async function seedAsynchronousMetrics(
  rig: Rig,
  rows: { metric: string; value: number; description?: string }[],
): Promise<void> {
  await rig.insert(
    'system.asynchronous_metrics',
    rows.map((r) => ({ description: '', ...r })),
  )
}
