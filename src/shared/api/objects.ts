// Responses of /api/v1/databases/{id}: active sessions (and the messages of their WebSocket stream),
// locks, tables and indexes with their details and timeseries. Tables, indexes and locks are
// PostgreSQL's; active sessions serve both engines.
import { t } from 'elysia'
import { INDEX_FIELDS, TABLE_FIELDS } from '../families.ts'
import { Nullable, Timestamp } from './common.ts'
import { nullableProperties } from './family-fields.ts'

const text = (description: string) => Nullable(t.String({ description }))

/**
 * An active session (PostgreSQL's pg_stat_activity) or running query (ClickHouse's system.processes).
 * The optional fields are those the agent sent: user to query_start from PostgreSQL agents, memory_usage
 * to read_rows from ClickHouse agents (an older agent sends fewer).
 */
export const ActiveSession = t.Object(
  {
    pid: t.Union([t.Integer(), t.String()], {
      description: "PostgreSQL: the backend's process id; ClickHouse: the query id",
    }),
    query_text: t.String(),
    state: text('PostgreSQL: active, idle in transaction...'),
    wait_event_type: text('PostgreSQL: what the session waits for (Lock, IO...), null when not waiting'),
    wait_event: text(''),
    duration_ms: Nullable(t.Number({ description: 'how long the statement has run, ms (to the microsecond)' })),
    blocking_pids: t.Array(t.Integer(), { description: 'the sessions this one waits for' }),
    user: t.Optional(text('')),
    application_name: t.Optional(text('')),
    client_addr: t.Optional(text('')),
    database: t.Optional(text('')),
    backend_type: t.Optional(text('')),
    xact_start: t.Optional(Nullable(Timestamp('when the open transaction began'))),
    backend_start: t.Optional(Nullable(Timestamp('PostgreSQL: when the session began (with the pid, what names it)'))),
    query_start: t.Optional(Nullable(Timestamp('PostgreSQL: when its present or last statement began'))),
    memory_usage: t.Optional(t.Number({ description: 'ClickHouse: memory the query uses, bytes' })),
    read_bytes: t.Optional(t.Number({ description: 'ClickHouse: bytes read so far' })),
    written_bytes: t.Optional(t.Number({ description: 'ClickHouse: bytes written so far' })),
    read_rows: t.Optional(t.Number({ description: 'ClickHouse: rows read so far' })),
    ts: Timestamp('when the agent took the snapshot'),
  },
  { title: 'ActiveSession' },
)

/**
 * A message of the WebSocket stream GET /active/ws: the latest snapshot, at once and every `interval`
 * seconds. Elysia does not check WebSocket messages against a schema; this one documents them.
 */
export const ActiveStreamMessage = t.Object(
  {
    ts: Nullable(Timestamp('when the agent took the snapshot; null before the first one')),
    active: t.Array(ActiveSession, { description: 'longest running first' }),
  },
  { title: 'ActiveStreamMessage' },
)

/** A lock held or awaited (pg_locks). */
export const Lock = t.Object(
  {
    pid: t.Integer(),
    lock_type: t.String({ description: 'relation, transactionid, advisory...' }),
    mode: t.String({ description: 'AccessShareLock, RowExclusiveLock...' }),
    relation_name: text('the locked relation, for relation locks'),
    granted: t.Boolean({ description: 'false: the session waits for it' }),
    blocked_by_pid: Nullable(t.Integer({ description: 'the session it waits for' })),
    duration_ms: Nullable(t.Number({ description: 'how long it has been held or waited for, ms' })),
    query_text: text("the session's statement"),
    ts: Timestamp('when the agent took the snapshot'),
  },
  { title: 'Lock' },
)

/** What each of a table's sizes is (one definition everywhere, issue 26), all from the same sample. */
const TABLE_SIZE_NOTES: Record<string, string> = {
  table_size_bytes:
    'pg_table_size: the heap with its free-space and visibility maps and its TOAST table with its index',
  index_size_bytes: 'pg_indexes_size: every index of the table',
  heap_bytes: "pg_relation_size: the heap's main fork alone; null from agents that do not send it",
  toast_bytes:
    'pg_total_relation_size of the TOAST table: TOAST with its index, 0 when the table has none; null from agents that do not send it',
}

const tableNumbers = nullableProperties(TABLE_FIELDS, (f) => {
  const how =
    f.kind === 'counter'
      ? 'since the statistics were last reset; null when not known'
      : 'the latest value; null when not known'
  const note = TABLE_SIZE_NOTES[f.key]
  return note === undefined ? how : `${note}; ${how}`
})

/** A table's latest entry (pg_stat_user_tables with its sizes). */
export const TableEntry = t.Object(
  {
    schema_name: t.String(),
    table_name: t.String(),
    ...tableNumbers,
    last_vacuum: Nullable(Timestamp()),
    last_autovacuum: Nullable(Timestamp()),
    last_analyze: Nullable(Timestamp()),
    last_autoanalyze: Nullable(Timestamp()),
    has_primary_key: Nullable(t.Boolean({ description: 'null from agents that do not send it' })),
    autovacuum_enabled: Nullable(
      t.Boolean({
        description:
          'false when autovacuum is off for the table or its TOAST table; null from agents that do not send it',
      }),
    ),
    dead_tuple_ratio: Nullable(
      t.Number({ description: 'n_dead_tup / (n_live_tup + n_dead_tup), 0..1; null when unknown or empty' }),
    ),
    total_bytes: Nullable(
      t.Integer({
        description:
          'bytes, pg_total_relation_size: table_size_bytes + index_size_bytes at the same sample; null when either is not known',
      }),
    ),
    ts: Timestamp('as of: the latest batch that carried the tables'),
  },
  { title: 'TableEntry' },
)

const indexNumbers = nullableProperties(INDEX_FIELDS, (f) =>
  f.kind === 'counter'
    ? 'since the statistics were last reset; null when not known'
    : 'the latest value; null when not known',
)

/** An index's latest entry (pg_stat_user_indexes with its size and definition). */
export const IndexEntry = t.Object(
  {
    schema_name: t.String(),
    table_name: t.String(),
    index_name: t.String(),
    ts: Timestamp('as of: the latest batch that carried the indexes'),
    ...indexNumbers,
    index_def: t.String({ description: 'CREATE INDEX ... as pg_get_indexdef gives it' }),
    is_unique: t.Boolean(),
    is_primary: t.Boolean(),
    is_valid: t.Boolean({ description: 'false: a failed or unfinished CREATE INDEX CONCURRENTLY' }),
  },
  { title: 'IndexEntry' },
)

const seriesProperties = {
  since: Timestamp("the window's start"),
  until: Timestamp("the window's end"),
  resolution_seconds: t.Integer({
    description: 'seconds per timeseries point: 60 up to a 24-hour window, 3600 beyond',
  }),
}

const bucketNumbers = <F extends (typeof TABLE_FIELDS)[number] | (typeof INDEX_FIELDS)[number]>(fields: readonly F[]) =>
  nullableProperties(fields, (f) =>
    f.kind === 'counter'
      ? 'the increase in the bucket; null when not known'
      : 'the latest value in the bucket; null when not known',
  )

/** A bucket of a table's timeseries. */
export const TablePoint = t.Object(
  { ts: Timestamp("the bucket's start"), ...bucketNumbers(TABLE_FIELDS) },
  { title: 'TablePoint' },
)
/** A bucket of an index's timeseries. */
export const IndexPoint = t.Object(
  { ts: Timestamp("the bucket's start"), ...bucketNumbers(INDEX_FIELDS) },
  { title: 'IndexPoint' },
)

/** GET /tables/{schema}/{name}: the table's latest entry and its timeseries over the window. */
export const TableDetail = t.Object(
  { ...TableEntry.properties, ...seriesProperties, timeseries: t.Array(TablePoint) },
  { title: 'TableDetail' },
)
/** GET /indexes/{schema}/{name}: the index's latest entry and its timeseries over the window. */
export const IndexDetail = t.Object(
  { ...IndexEntry.properties, ...seriesProperties, timeseries: t.Array(IndexPoint) },
  { title: 'IndexDetail' },
)
