// The agent ↔ server wire contract: one ingest batch per database per cycle, as TypeBox schemas
// the server validates against and the agent builds from. Counters of cumulative statistics travel
// as deltas against the agent's previous sample (reset-aware); gauges travel as they are.
// Unknown fields are ignored by the server, so a newer agent can talk to an older server.
import {
  type Static,
  type TNull,
  type TNumber,
  type TOptional,
  type TSchema,
  type TUnion,
  Type as T,
} from '@sinclair/typebox'
import { ACTION_KINDS } from './action-kinds.ts'
import { type Field, INDEX_FIELDS, STATEMENT_FIELDS, TABLE_FIELDS, columnType, ofKind } from './families.ts'
import { ingestMaxItems as max, settingsLimits, tagLimits, ingestTextLimits as text } from './ingest-limits.ts'
import { MAX_POLL_INTERVAL_SECONDS, NAME_MAX_CHARS } from './database-limits.ts'

// Every number the stores keep has a maximum that their columns hold (BIGINT, DOUBLE PRECISION, and
// INTEGER for a plan's scan counts) and that a bucket's sum of many keeps finite: past it, a 400 naming
// the field instead of a store error (a 500 the agent would retry for an hour).
/** Counts and byte sizes: up to 2^53 - 1, exact as JS numbers and within BIGINT. */
const count = T.Number({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
/** Durations in milliseconds: up to 1e15 (some 31,700 years). */
const ms = T.Number({ minimum: 0, maximum: 1e15 })
const nullableCount = T.Union([count, T.Null()])
const nullableMs = T.Union([ms, T.Null()])
const nullableNumber = T.Union([T.Number(), T.Null()])
const nullableString = T.Union([T.String(), T.Null()])
/** Epoch milliseconds, up to the last millisecond of the year 9999. */
const epochMs = T.Integer({ minimum: 0, maximum: 253_402_300_799_999 })
/** A plan's count of scan nodes (an INTEGER column). */
const planCount = T.Integer({ minimum: 0, maximum: 2_147_483_647 })
const nullableEpochMs = T.Union([epochMs, T.Null()])
/** Text a PostgreSQL store can hold (no NUL). */
const NO_NUL_PATTERN = '^[^\\u0000]*$'

// A counter family's fields as wire properties (src/shared/families.ts): a number bounded by its unit
// (milliseconds or a count), optional unless every agent sends it; nullable for table and index fields
// (null: not known this sample).
type Required<F extends Field> = Extract<F, { required: true }>['key']
type Properties<F extends Field, S extends TSchema> = { [K in Required<F>]: S } & {
  [K in Exclude<F['key'], Required<F>>]: TOptional<S>
}
/** A double column (a duration) holds up to 1e15 ms, a BIGINT one a count up to 2^53 - 1. */
const bounded = (field: Field) => (columnType(field) === 'double precision' ? ms : count)

function familyProperties<F extends Field>(fields: readonly F[]): Properties<F, TNumber> {
  return Object.fromEntries(fields.map((f) => [f.key, f.required ? bounded(f) : T.Optional(bounded(f))])) as Properties<
    F,
    TNumber
  >
}

function nullableFamilyProperties<F extends Field>(fields: readonly F[]): Properties<F, TUnion<[TNumber, TNull]>> {
  const nullable = (f: Field) => T.Union([bounded(f), T.Null()])
  return Object.fromEntries(
    fields.map((f) => [f.key, f.required ? nullable(f) : T.Optional(nullable(f))]),
  ) as Properties<F, TUnion<[TNumber, TNull]>>
}

/** One statement's activity during the cycle (pg_stat_statements / system.query_log). */
export const QueryStatDelta = T.Object({
  query_hash: T.String({ minLength: 1, maxLength: text.id }),
  query_text: T.String({ maxLength: text.queryText }),
  /** The statement family's counters (src/shared/families.ts). */
  ...familyProperties(STATEMENT_FIELDS),
  /** ClickHouse: the cycle's p99 duration. */
  p99_ms: T.Optional(ms),
})
export type QueryStatDelta = Static<typeof QueryStatDelta>

export const ExplainPlan = T.Object({
  query_hash: T.String({ minLength: 1, maxLength: text.id }),
  ts: epochMs,
  plan_json: T.Unknown(),
  plan_hash: T.String({ minLength: 1, maxLength: text.id }),
  total_cost: nullableNumber,
  actual_time_ms: nullableNumber,
  seq_scans: planCount,
  index_scans: planCount,
  rows_estimated: nullableNumber,
  rows_actual: nullableNumber,
  source: T.Union([T.Literal('sampled'), T.Literal('auto_explain')]),
})
export type ExplainPlan = Static<typeof ExplainPlan>

export const ActiveQuery = T.Object({
  pid: T.Union([T.Integer(), T.String()]),
  query_text: T.String(),
  state: nullableString,
  wait_event_type: nullableString,
  wait_event: nullableString,
  /** How long the session has been in its state (the statement or the idle transaction), up to 1e15 ms. */
  duration_ms: nullableMs,
  blocking_pids: T.Array(T.Integer()),
  user: T.Optional(nullableString),
  application_name: T.Optional(nullableString),
  client_addr: T.Optional(nullableString),
  database: T.Optional(nullableString),
  backend_type: T.Optional(nullableString),
  xact_start: T.Optional(nullableEpochMs),
  /** When the session began (pg_stat_activity.backend_start): with the pid, what names it; absent from older agents. */
  backend_start: T.Optional(nullableEpochMs),
  /** When its present (or last) statement began; absent from older agents. */
  query_start: T.Optional(nullableEpochMs),
  memory_usage: T.Optional(count),
  read_bytes: T.Optional(count),
  written_bytes: T.Optional(count),
  read_rows: T.Optional(count),
})
export type ActiveQuery = Static<typeof ActiveQuery>

export const LockEntry = T.Object({
  pid: T.Integer(),
  lock_type: T.String(),
  mode: T.String(),
  relation_name: nullableString,
  granted: T.Boolean(),
  blocked_by_pid: T.Union([T.Integer(), T.Null()]),
  /** How long the lock has been waited for or held, up to 1e15 ms (the chains' wait starts come from it). */
  duration_ms: nullableMs,
  query_text: nullableString,
})
export type LockEntry = Static<typeof LockEntry>

/** Wait events seen by the once-a-second sampler during the cycle. */
export const WaitSample = T.Object({
  wait_event_type: T.String(),
  wait_event: T.String(),
  count: count,
  total_duration_ms: ms,
  /**
   * Start of the minute the samples were taken in (a cycle's samples may straddle two minutes), so a
   * minute holds the samples of its own 60 seconds. Absent from agents that predate it: the batch's minute.
   */
  minute: T.Optional(epochMs),
})
export type WaitSample = Static<typeof WaitSample>

/** The table family's counters and gauges (src/shared/families.ts). */
const tableCounters = nullableFamilyProperties(ofKind(TABLE_FIELDS, 'counter'))

export const TableStat = T.Object({
  schema_name: T.String(),
  table_name: T.String(),
  ...tableCounters,
  ...nullableFamilyProperties(ofKind(TABLE_FIELDS, 'gauge')),
  last_vacuum: nullableEpochMs,
  last_autovacuum: nullableEpochMs,
  last_analyze: nullableEpochMs,
  last_autoanalyze: nullableEpochMs,
  has_primary_key: T.Optional(T.Boolean()),
  /**
   * False when the table's storage parameters turn autovacuum off for it or for its TOAST table
   * (autovacuum_enabled / toast.autovacuum_enabled = false); absent from agents that predate it.
   */
  autovacuum_enabled: T.Optional(T.Boolean()),
  /** Counter increases since the previous sample; null on the first sample. */
  delta: T.Union([T.Object(tableCounters), T.Null()]),
})
export type TableStat = Static<typeof TableStat>

/** The index family's counters and gauges (src/shared/families.ts). */
const indexCounters = nullableFamilyProperties(ofKind(INDEX_FIELDS, 'counter'))

export const IndexStat = T.Object({
  schema_name: T.String(),
  table_name: T.String(),
  index_name: T.String(),
  ...indexCounters,
  ...nullableFamilyProperties(ofKind(INDEX_FIELDS, 'gauge')),
  index_def: T.String(),
  is_unique: T.Boolean(),
  is_primary: T.Boolean(),
  is_valid: T.Boolean(),
  delta: T.Union([T.Object(indexCounters), T.Null()]),
})
export type IndexStat = Static<typeof IndexStat>

/** A sequence and how much of its range is used (pg_sequences, PostgreSQL 10+). */
export const SequenceStat = T.Object({
  schema_name: T.String(),
  sequence_name: T.String(),
  /** smallint, integer or bigint. */
  data_type: T.String(),
  /** null until the first nextval, or without SELECT/USAGE on the sequence. */
  last_value: nullableNumber,
  max_value: T.Number(),
  increment_by: T.Number(),
  /** Share of the range used, against the fed column's type when that is narrower; null with last_value. */
  used_ratio: nullableNumber,
  /** The column the sequence feeds (serial, identity, OWNED BY, or a DEFAULT calling nextval() of it; the narrowest when several), when there is one. */
  owned_by: T.Optional(
    T.Union([
      T.Object({ schema_name: T.String(), table_name: T.String(), column_name: T.String(), column_type: T.String() }),
      T.Null(),
    ]),
  ),
})
export type SequenceStat = Static<typeof SequenceStat>

/** A foreign key whose referencing columns lead no valid index (collected by `tables`). */
export const UnindexedForeignKey = T.Object({
  schema_name: T.String(),
  table_name: T.String(),
  constraint_name: T.String(),
  /** The referencing columns, in key order. */
  columns: T.Array(T.String()),
  /** `schema.table` it references. */
  referenced_table: T.String(),
  /** Size of the referencing table. */
  table_size_bytes: nullableCount,
  n_live_tup: nullableCount,
})
export type UnindexedForeignKey = Static<typeof UnindexedForeignKey>

/** A CHECK, FOREIGN KEY (or, 18+, NOT NULL) constraint added NOT VALID and not validated since (collected by `constraints`). */
export const InvalidConstraint = T.Object({
  schema_name: T.String(),
  table_name: T.String(),
  constraint_name: T.String(),
  /** `check`, `foreign key`, `not null` (pg_constraint.contype spelled out). */
  constraint_type: T.String(),
  /** pg_get_constraintdef(), e.g. `CHECK ((qty > 0)) NOT VALID`. */
  definition: T.String(),
})
export type InvalidConstraint = Static<typeof InvalidConstraint>

/**
 * An estimate of a table's or a btree index's bloat from planner statistics (collected by `bloat`):
 * the size the relation's live rows would take packed at its fillfactor, against its size on disk.
 * An estimate, not a measurement (pgstattuple reads every page to measure).
 */
export const BloatEstimate = T.Object({
  kind: T.Union([T.Literal('table'), T.Literal('index')]),
  schema_name: T.String(),
  table_name: T.String(),
  /** The index's name; null for a table. */
  index_name: nullableString,
  /** The main fork's size at the last VACUUM, ANALYZE or index build (pg_class.relpages), as the estimate's row count is. */
  size_bytes: count,
  /** What the live rows would take packed at the fillfactor. */
  expected_bytes: count,
  /** size_bytes - expected_bytes, never below 0. */
  bloat_bytes: count,
  fillfactor: T.Number({ minimum: 10, maximum: 100 }),
  /** pg_class.reltuples the estimate is built on. */
  live_rows: count,
})
export type BloatEstimate = Static<typeof BloatEstimate>

/**
 * Planner statistics of one column (pg_stats, collected by `column_stats`) of a table the sequential-scan
 * advice may concern, with its table's row count: what orders an index's equality columns.
 */
export const ColumnStat = T.Object({
  schema_name: T.String(),
  table_name: T.String(),
  column_name: T.String(),
  /** pg_stats.n_distinct: distinct values, or when negative minus their share of the rows (-1: all distinct). */
  n_distinct: T.Number({ minimum: -1 }),
  /** pg_stats.null_frac: the share of the rows that are null. */
  null_frac: T.Number({ minimum: 0, maximum: 1 }),
  /** pg_stats.correlation: physical against logical order, -1..1; null when not computed. */
  correlation: T.Union([T.Number({ minimum: -1, maximum: 1 }), T.Null()]),
  /** pg_class.reltuples of the table when the statistics were read (-1: never vacuumed nor analyzed). */
  reltuples: T.Number({ minimum: -1 }),
})
export type ColumnStat = Static<typeof ColumnStat>

/** Client connections with the same user, application, client address and state (collected by `connections`). */
export const ConnectionGroup = T.Object({
  /** The database connected to (pg_stat_activity.datname). */
  database: nullableString,
  user: nullableString,
  application_name: nullableString,
  client_addr: nullableString,
  /** pg_stat_activity.state: active, idle, idle in transaction, ...; null when unknown to the agent's role. */
  state: nullableString,
  count: count,
})
export type ConnectionGroup = Static<typeof ConnectionGroup>

/**
 * The session a running maintenance command waits for, as pg_stat_activity shows it: its transaction's
 * start and its last state change tell how long it has held what the command waits on.
 */
export const MaintenanceBlocker = T.Object({
  pid: T.Integer(),
  /** How it was found: pg_stat_progress_create_index.current_locker_pid, or pg_blocking_pids() of a lock wait. */
  via: T.Union([T.Literal('current_locker_pid'), T.Literal('pg_blocking_pids')]),
  user: nullableString,
  application_name: nullableString,
  client_addr: nullableString,
  backend_type: nullableString,
  state: nullableString,
  xact_start: nullableEpochMs,
  state_change: nullableEpochMs,
  /** Its current or last statement, secrets masked, at most text.holderQueryText characters. */
  query_text: T.Union([T.String({ maxLength: text.holderQueryText }), T.Null()]),
})
export type MaintenanceBlocker = Static<typeof MaintenanceBlocker>

/** A maintenance command running now, from pg_stat_progress_* (collected by `progress`). */
export const ProgressEntry = T.Object({
  pid: T.Integer(),
  /**
   * VACUUM, ANALYZE (`autovacuum: VACUUM` and `autovacuum: ANALYZE` when autovacuum runs them), VACUUM FULL, CLUSTER,
   * CREATE INDEX [CONCURRENTLY], REINDEX [CONCURRENTLY].
   */
  command: T.String(),
  phase: T.String(),
  schema_name: nullableString,
  table_name: nullableString,
  /** CREATE INDEX / REINDEX: the index built. */
  index_name: nullableString,
  /** The counter pair of the phase that the percentage comes from, e.g. `heap blocks scanned`. */
  unit: nullableString,
  done: nullableCount,
  total: nullableCount,
  /** done / total * 100, null when the phase has no counter. */
  percent: T.Union([T.Number({ minimum: 0, maximum: 100 }), T.Null()]),
  /** When the command's statement started (pg_stat_activity.query_start). */
  started_at: nullableEpochMs,
  /** What the command's backend waits on now (pg_stat_activity.wait_event_type, wait_event); null: not waiting. Absent from older agents. */
  wait_event_type: T.Optional(nullableString),
  wait_event: T.Optional(nullableString),
  /**
   * CREATE INDEX / REINDEX: pg_stat_progress_create_index's lockers_done, lockers_total and current_locker_pid
   * (0 there: none; null here). Absent for other commands and from older agents.
   */
  lockers_done: T.Optional(nullableCount),
  lockers_total: T.Optional(nullableCount),
  current_locker_pid: T.Optional(T.Union([T.Integer(), T.Null()])),
  /** The session the command waits for (current_locker_pid, else the first of pg_blocking_pids on a lock wait); null: none. */
  blocker: T.Optional(T.Union([MaintenanceBlocker, T.Null()])),
})
export type ProgressEntry = Static<typeof ProgressEntry>

export const ReplicationStatus = T.Object({
  is_replica: T.Boolean(),
  replication_lag_bytes: nullableCount,
  replication_lag_seconds: nullableNumber,
  upstream_host: nullableString,
  replicas: T.Array(
    T.Object({
      application_name: nullableString,
      client_addr: nullableString,
      state: nullableString,
      sync_state: nullableString,
      lag_bytes: nullableCount,
      write_lag_ms: nullableNumber,
      flush_lag_ms: nullableNumber,
      replay_lag_ms: nullableNumber,
    }),
  ),
  slots: T.Array(
    T.Object({
      slot_name: T.String(),
      slot_type: T.String(),
      active: T.Boolean(),
      lag_bytes: nullableCount,
      wal_status: nullableString,
    }),
  ),
})
export type ReplicationStatus = Static<typeof ReplicationStatus>

/** A WAL file's name as pg_stat_archiver gives it (24 hex digits, or a `.partial` / `.backup` name). */
const walFileName = T.Union([T.String({ maxLength: 64, pattern: '^[^\\u0000]*$' }), T.Null()])

/**
 * The WAL archiver (collected by `archiver`): pg_stat_archiver's counters and last WAL files as they
 * are (cumulative, not deltas: the server keeps the latest), archive_mode, whether an archive_command or
 * archive_library is set (never its text, which may hold a secret) and the WAL files waiting to be
 * archived (`.ready` files; null when the role may not list them or before PostgreSQL 12).
 */
export const ArchiverStatus = T.Object({
  /** off, on or always; null when the role cannot read it. */
  archive_mode: T.Union([T.String({ maxLength: 16, pattern: '^[^\\u0000]*$' }), T.Null()]),
  /** Whether archive_command or archive_library is set; null when the role cannot read them. */
  archive_command_set: T.Union([T.Boolean(), T.Null()]),
  archived_count: count,
  last_archived_wal: walFileName,
  last_archived_time: nullableEpochMs,
  failed_count: count,
  last_failed_wal: walFileName,
  last_failed_time: nullableEpochMs,
  stats_reset: nullableEpochMs,
  /** WAL files waiting to be archived and their size (count × wal_segment_size). */
  ready_count: nullableCount,
  ready_bytes: nullableCount,
  /** When the oldest waiting WAL file was ready to be archived. */
  oldest_ready_time: nullableEpochMs,
})
export type ArchiverStatus = Static<typeof ArchiverStatus>

/**
 * pg_wal and the last checkpoint (collected by `wal_dir`). Each part is null when the agent's role may not
 * read it (pg_ls_waldir() needs pg_monitor; pg_control_checkpoint() may be revoked).
 */
export const WalDirStatus = T.Object({
  /** Files in pg_wal and their total size. */
  wal_files: nullableCount,
  wal_bytes: nullableCount,
  /** When the last checkpoint started, and its redo LSN with the WAL file holding it. */
  checkpoint_time: nullableEpochMs,
  redo_lsn: T.Union([T.String({ maxLength: 32, pattern: '^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$' }), T.Null()]),
  redo_wal_file: walFileName,
  /** Since the last checkpoint started or the server started, the later, at collection (ms). */
  checkpoint_age_ms: nullableMs,
  /** WAL written (replayed, on a standby) since the last checkpoint's redo LSN. */
  wal_since_redo_bytes: nullableCount,
  in_recovery: T.Boolean(),
})
export type WalDirStatus = Static<typeof WalDirStatus>

/** A log event's kind (src/shared/log-kinds.ts): lower-case letters and underscores. */
const logKind = T.String({ minLength: 1, maxLength: 40, pattern: '^[a-z_]+$' })
/** A severity (src/shared/log-kinds.ts LOG_SEVERITIES). */
const logSeverity = T.String({ minLength: 1, maxLength: 16, pattern: '^[a-z]+$' })
const logText = T.String({ maxLength: text.logMessage, pattern: NO_NUL_PATTERN })
const nullableLogText = T.Union([T.String({ maxLength: 1_000, pattern: NO_NUL_PATTERN }), T.Null()])
/** A value of a log event's fields: a number, a flag, a text, or a short list of them. */
const logFieldValue = T.Union([
  T.Number({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }),
  T.Boolean(),
  T.Null(),
  logText,
  T.Array(T.Union([T.Number({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }), logText]), {
    maxItems: 64,
  }),
])

/**
 * One classified entry of the server's log (collected by `log_events`): PostgreSQL's log file read beside
 * the server or over SQL, ClickHouse's system.errors (one entry per error code that occurred, `count`
 * times), crash_log and text_log. Its text has passed the agent's secret masking, and its statement and
 * parameter values the operator's `log_text` (redacted by default: literals replaced).
 */
export const LogEvent = T.Object({
  /** When the server logged it (the entry's own timestamp; the cycle's when the log line has none). */
  ts: epochMs,
  kind: logKind,
  severity: logSeverity,
  /** SQLSTATE (PostgreSQL, when the log gives it: csvlog, jsonlog, or %e in the prefix) or ClickHouse's error name. */
  sqlstate: T.Union([T.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_]+$' }), T.Null()]),
  /** The primary message as logged (masked). */
  message: logText,
  /** The message with numbers, literals and quoted names replaced: what identical errors share. */
  fingerprint: T.String({ maxLength: 512, pattern: NO_NUL_PATTERN }),
  /** The backend's pid; null when the log line does not say. */
  pid: T.Union([T.Integer({ minimum: 0, maximum: 2_147_483_647 }), T.Null()]),
  user: nullableLogText,
  database: nullableLogText,
  application: nullableLogText,
  /** The client's address (and port when logged). */
  client: nullableLogText,
  /** DETAIL, HINT and CONTEXT lines as logged (masked, parameters redacted per log_text). */
  detail: T.Union([logText, T.Null()]),
  /** The STATEMENT (or the statement of a `duration:` entry), per log_text; null when none or log_text is none. */
  statement: T.Union([T.String({ maxLength: text.logStatement, pattern: NO_NUL_PATTERN }), T.Null()]),
  /** The statement's query id (%Q, jsonlog's query_id), matching pg_stat_statements' queryid. */
  query_id: T.Union([T.String({ maxLength: text.id, pattern: '^-?[0-9]+$' }), T.Null()]),
  /** The kind's own fields (src/shared/log-kinds.ts), by name. */
  fields: T.Record(T.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9_]+$' }), logFieldValue, {
    maxProperties: 32,
  }),
  /** How many occurrences this entry stands for (ClickHouse system.errors); absent: 1. */
  count: T.Optional(T.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
})
export type LogEvent = Static<typeof LogEvent>

/** How many entries of a kind and severity the log held in one minute: exact, whether or not each was sent. */
export const LogCount = T.Object({
  minute: epochMs,
  kind: logKind,
  severity: logSeverity,
  count: count,
})
export type LogCount = Static<typeof LogCount>

/**
 * The log read during the cycle (collected by `log_events`). `counts` covers every entry read; `entries`
 * the entries themselves, up to the agent's cap per batch, the most severe first when it must choose
 * (the rest counted in `dropped`). A batch is applied once (its batch_id), so nothing is counted twice.
 */
export const LogEventsSection = T.Object({
  /** Where the entries came from: log files beside the server, pg_read_file over SQL, ClickHouse system tables. */
  source: T.Union([T.Literal('files'), T.Literal('sql'), T.Literal('system_tables')]),
  entries: T.Array(LogEvent, { maxItems: max.log_events }),
  counts: T.Array(LogCount, { maxItems: max.log_counts }),
  /** Entries classified and counted but not sent whole (past the per-batch cap). */
  dropped: count,
  /** Bytes of log read this cycle, and still waiting to be read (a backlog read in bounded slices); null when unknown. */
  bytes_read: count,
  backlog_bytes: nullableCount,
})
export type LogEventsSection = Static<typeof LogEventsSection>

/** A filesystem holding something of the database's (collected by `host`). */
export const HostFilesystem = T.Object({
  /**
   * What the database keeps on it: `data`, `wal`, `log`, `tablespace:<name>` (PostgreSQL), `disk:<name>`
   * (ClickHouse system.disks); several when they share the filesystem.
   */
  roles: T.Array(T.String({ minLength: 1, maxLength: 200, pattern: NO_NUL_PATTERN }), { minItems: 1, maxItems: 32 }),
  /** The path it was measured at (the data directory, the WAL directory's target, a tablespace's location). */
  path: T.String({ maxLength: 1_000, pattern: NO_NUL_PATTERN }),
  /** Its mount point and device, when /proc/self/mountinfo tells. */
  mount: nullableLogText,
  device: nullableLogText,
  total_bytes: count,
  /** Free to unprivileged users (statfs f_bavail), what PostgreSQL can still write. */
  available_bytes: count,
  inodes_total: nullableCount,
  inodes_available: nullableCount,
})
export type HostFilesystem = Static<typeof HostFilesystem>

/** A block device behind those filesystems: its I/O during the cycle (deltas of /proc/diskstats). */
export const HostDevice = T.Object({
  device: T.String({ minLength: 1, maxLength: 200, pattern: NO_NUL_PATTERN }),
  reads: count,
  writes: count,
  read_bytes: count,
  write_bytes: count,
  /** Milliseconds the device was busy (io_ticks): over the cycle's length, its utilisation. */
  busy_ms: ms,
})
export type HostDevice = Static<typeof HostDevice>

/**
 * The database's host (collected by `host`): from /proc and statfs when the agent runs on it (decided
 * from evidence, named in `evidence`), or from ClickHouse's system.asynchronous_metrics and system.disks.
 * Shares are percentages of all CPUs' time over the cycle; null where the source does not tell.
 */
export const HostStatus = T.Object({
  source: T.Union([T.Literal('proc'), T.Literal('clickhouse')]),
  /** Why the agent believes it runs on the database's host (source proc). */
  evidence: nullableLogText,
  cpu_count: nullableCount,
  cpu: T.Union([
    T.Object({
      user: T.Number({ minimum: 0, maximum: 100 }),
      system: T.Number({ minimum: 0, maximum: 100 }),
      iowait: T.Number({ minimum: 0, maximum: 100 }),
      steal: T.Number({ minimum: 0, maximum: 100 }),
      idle: T.Number({ minimum: 0, maximum: 100 }),
    }),
    T.Null(),
  ]),
  load: T.Union([
    T.Object({ load1: T.Number({ minimum: 0 }), load5: T.Number({ minimum: 0 }), load15: T.Number({ minimum: 0 }) }),
    T.Null(),
  ]),
  /** Swap is null where the source does not tell (ClickHouse's asynchronous_metrics has no swap figures). */
  memory: T.Union([
    T.Object({
      total_bytes: count,
      available_bytes: count,
      swap_total_bytes: nullableCount,
      swap_used_bytes: nullableCount,
    }),
    T.Null(),
  ]),
  filesystems: T.Array(HostFilesystem, { maxItems: max.host_filesystems }),
  devices: T.Array(HostDevice, { maxItems: max.host_devices }),
})
export type HostStatus = Static<typeof HostStatus>

/**
 * A trigger switched off (collected by `triggers`: pg_trigger.tgenabled = 'D'). `internal`: a trigger
 * PostgreSQL made for a constraint (a foreign key's checks and actions), switched off by DISABLE TRIGGER
 * ALL; then the foreign key it enforces and that key's own (referencing) table.
 */
export const DisabledTrigger = T.Object({
  schema_name: T.String(),
  table_name: T.String(),
  trigger_name: T.String(),
  internal: T.Boolean(),
  constraint_name: nullableString,
  constraint_schema: nullableString,
  constraint_table: nullableString,
})
export type DisabledTrigger = Static<typeof DisabledTrigger>

/** A role the security advisors judge (collected by `security`): a superuser, or a login role whose password expires. */
export const SecurityRole = T.Object({
  name: T.String(),
  superuser: T.Boolean(),
  /** The role initdb made (oid 10), the one superuser every cluster has. */
  bootstrap: T.Boolean(),
  can_login: T.Boolean(),
  /** rolvaliduntil: when its password stops working; null when it never does. */
  valid_until: nullableEpochMs,
})
export type SecurityRole = Static<typeof SecurityRole>

/** A SECURITY DEFINER function without a search_path of its own (collected by `security`). */
export const DefinerFunction = T.Object({
  schema: T.String(),
  name: T.String(),
  /** pg_get_function_identity_arguments(): the argument list that tells overloads apart. */
  args: T.String(),
  owner: T.String(),
  owner_superuser: T.Boolean(),
})
export type DefinerFunction = Static<typeof DefinerFunction>

/** A pg_hba.conf line that lets a client in without a password (`trust`) or with one sent in clear text (`password`). */
export const HbaRule = T.Object({
  line_number: T.Integer({ minimum: 0, maximum: 2_147_483_647 }),
  /** local, host, hostssl, hostnossl, hostgssenc, hostnogssenc. */
  type: T.String(),
  database: T.Array(T.String(), { maxItems: max.security_items }),
  user_name: T.Array(T.String(), { maxItems: max.security_items }),
  address: nullableString,
  netmask: nullableString,
  auth_method: T.String(),
})
export type HbaRule = Static<typeof HbaRule>

/**
 * What the security and configuration advisors read (collected by `security` every few minutes: sent
 * when read, kept as the latest). A part the agent's role may not read is null, never an error.
 */
export const SecurityStatus = T.Object({
  /** Settings as pg_settings shows them to the role; null when hidden from it. */
  password_encryption: nullableString,
  ssl: nullableString,
  listen_addresses: nullableString,
  data_checksums: nullableString,
  /** Superusers, and login roles whose password has an expiry. */
  roles: T.Array(SecurityRole, { maxItems: max.security_items }),
  /** Roles whose stored password is an MD5 hash; null when pg_authid is not readable (it needs a superuser). */
  md5_roles: T.Union([T.Array(T.String(), { maxItems: max.security_items }), T.Null()]),
  definer_functions: T.Array(DefinerFunction, { maxItems: max.security_items }),
  /** Schemas of the connected database in which every role (PUBLIC) may create objects. */
  public_create_schemas: T.Array(T.String(), { maxItems: max.security_items }),
  /** The `trust` and `password` lines of pg_hba.conf; null when pg_hba_file_rules is not readable. */
  hba_rules: T.Union([T.Array(HbaRule, { maxItems: max.security_items }), T.Null()]),
})
export type SecurityStatus = Static<typeof SecurityStatus>

/** A ClickHouse user as system.users shows it (collected by ClickHouse's `security`): how it logs in and from where. */
export const ClickHouseUser = T.Object({
  name: T.String(),
  /** Where it is defined: users_xml (read-only, edited in users.xml), local_directory or replicated (ALTER USER). */
  storage: T.String({ maxLength: 200 }),
  /** auth_type: no_password, plaintext_password, sha256_password, double_sha1_password, bcrypt_password, ldap, ... (several from 24.9). */
  auth_type: T.Array(T.String({ maxLength: 64 }), { maxItems: 16 }),
  /** The hosts it may connect from: addresses and networks, names, name regexps, LIKE patterns (cut to 32 each). */
  host_ip: T.Array(T.String({ maxLength: 256 }), { maxItems: 32 }),
  host_names: T.Array(T.String({ maxLength: 256 }), { maxItems: 32 }),
  host_names_regexp: T.Array(T.String({ maxLength: 256 }), { maxItems: 32 }),
  host_names_like: T.Array(T.String({ maxLength: 256 }), { maxItems: 32 }),
})
export type ClickHouseUser = Static<typeof ClickHouseUser>

/**
 * ClickHouse's users for the security advisors (collected by `security` every few minutes: sent when
 * read, kept as the latest). users is null when the agent's user may not read system.users (SHOW USERS).
 */
export const ClickHouseUsers = T.Object({
  users: T.Union([T.Array(ClickHouseUser, { maxItems: max.clickhouse_users }), T.Null()]),
})
export type ClickHouseUsers = Static<typeof ClickHouseUsers>

/** One backup as the backup tool lists it (collected by `backups`). */
export const BackupEntry = T.Object({
  /** The tool's label or name for it (pgBackRest's label, WAL-G's backup_name). */
  label: T.String({ minLength: 1, maxLength: 200, pattern: NO_NUL_PATTERN }),
  /** full, diff, incr (pgBackRest) or full, delta (WAL-G). */
  type: T.String({ minLength: 1, maxLength: 16, pattern: '^[a-z]+$' }),
  started_at: nullableEpochMs,
  finished_at: nullableEpochMs,
  /** The database's size it backed up, and what it takes in the repository; null when not told. */
  size_bytes: nullableCount,
  stored_bytes: nullableCount,
  /** pgBackRest's stanza or WAL-G's storage; null when not told. */
  stanza: nullableLogText,
  /** False when the tool reports the backup as failed or incomplete (pgBackRest's `error`). */
  ok: T.Boolean(),
})
export type BackupEntry = Static<typeof BackupEntry>

/**
 * Backups, from the command the operator named in the agent's config (pgBackRest `info --output=json`,
 * WAL-G `backup-list --json --detail`), read every few minutes: sent when read, kept as the latest.
 */
export const BackupStatus = T.Object({
  tool: T.Union([T.Literal('pgbackrest'), T.Literal('walg')]),
  /** When the command ran. */
  checked_at: epochMs,
  /** Why the command gave no list (its exit code and the first line of its stderr, masked); null when it did. */
  error: nullableLogText,
  /** The backups, newest first. */
  backups: T.Array(BackupEntry, { maxItems: max.backups }),
})
export type BackupStatus = Static<typeof BackupStatus>

/**
 * One of the things holding back the database's xmin horizon, so that VACUUM can neither remove the rows
 * deleted or updated after it nor freeze past it (collected by database_stats, the oldest first within
 * each kind): a `backend` (a session's transaction or snapshot), a `walsender` (a standby's
 * hot_standby_feedback without a slot), a replication `slot` (xmin: a standby's feedback through it;
 * catalog_xmin: logical decoding, which holds back the system catalogs only) or a `prepared`
 * transaction. Fields that do not apply to the kind are absent. `since`: the latest time by which this
 * holder held its present xmin (a session's last state change, a prepared transaction's PREPARE, or the
 * first cycle the agent saw that xmin), so a VACUUM that finished after it could not remove what it holds.
 */
export const XminHolder = T.Object({
  kind: T.String({ minLength: 1, maxLength: 32 }),
  /** Its age in transaction IDs: a backend's greatest(age(backend_xid), age(backend_xmin)), a slot's age(xmin), a prepared transaction's age(transaction). */
  xmin_age: nullableCount,
  since: T.Optional(nullableEpochMs),
  pid: T.Optional(T.Union([T.Integer(), T.Null()])),
  backend_type: T.Optional(nullableString),
  user: T.Optional(nullableString),
  application_name: T.Optional(nullableString),
  client_addr: T.Optional(nullableString),
  state: T.Optional(nullableString),
  xact_start: T.Optional(nullableEpochMs),
  /** A backend's pg_stat_activity.backend_start; absent from older agents. */
  backend_start: T.Optional(nullableEpochMs),
  state_change: T.Optional(nullableEpochMs),
  query_text: T.Optional(T.Union([T.String({ maxLength: text.holderQueryText }), T.Null()])),
  slot_name: T.Optional(nullableString),
  slot_type: T.Optional(nullableString),
  active: T.Optional(T.Union([T.Boolean(), T.Null()])),
  /** A slot's age(catalog_xmin). */
  catalog_xmin_age: T.Optional(nullableCount),
  database: T.Optional(nullableString),
  gid: T.Optional(nullableString),
  owner: T.Optional(nullableString),
  prepared_at: T.Optional(nullableEpochMs),
  /** A prepared transaction's locks (pg_locks rows of its virtual transaction); absent from older agents. */
  locks: T.Optional(nullableCount),
})
export type XminHolder = Static<typeof XminHolder>

/** Free-form counter maps for the internals collectors (bgwriter, WAL, I/O, database). */
const counterMap = T.Record(
  T.String({ maxLength: 64 }),
  T.Union([T.Number({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }), T.Null()]),
)

export const IoStatRow = T.Object({
  backend_type: T.String(),
  object: T.String(),
  context: T.String(),
  counters: counterMap,
})
export type IoStatRow = Static<typeof IoStatRow>

/** ClickHouse: active parts of one partition (system.parts), with the table's insert thresholds when known. */
export const PartStat = T.Object({
  database: T.String(),
  table: T.String(),
  partition_id: T.String(),
  active_parts: count,
  rows: count,
  bytes_on_disk: count,
  /** The MergeTree settings that slow down / refuse inserts at this many active parts in one partition. */
  parts_to_delay_insert: T.Optional(nullableCount),
  parts_to_throw_insert: T.Optional(nullableCount),
})
export type PartStat = Static<typeof PartStat>

/** ClickHouse: one merge (or mutation rewrite) running now (system.merges). */
export const MergeEntry = T.Object({
  database: T.String(),
  table: T.String(),
  elapsed_s: T.Number({ minimum: 0 }),
  /** 0..1. */
  progress: T.Number({ minimum: 0, maximum: 1 }),
  num_parts: count,
  total_size_bytes_compressed: count,
  result_part_name: T.String(),
  is_mutation: T.Boolean(),
})
export type MergeEntry = Static<typeof MergeEntry>

/** ClickHouse: a mutation not done yet, or created within the last day (system.mutations). */
export const MutationEntry = T.Object({
  database: T.String(),
  table: T.String(),
  mutation_id: T.String(),
  command: T.String({ maxLength: text.mutationCommand }),
  create_time: epochMs,
  is_done: T.Boolean(),
  parts_to_do: count,
  latest_fail_reason: T.String(),
  latest_fail_time: nullableEpochMs,
  /** Not done and either failing or older than the agent's threshold. */
  stuck: T.Boolean(),
})
export type MutationEntry = Static<typeof MutationEntry>

/** Text a PostgreSQL store can hold (no NUL). */
const NO_NUL = '^[^\\u0000]*$'
/** A setting's or a statistics view's name: 1 to settingsLimits.name characters, no NUL (a map key's pattern). */
const NAME_PATTERN = `^[^\\u0000]{1,${settingsLimits.name}}$`

/** A detail's text: no NUL, at most the limit of a setting's value. */
const settingText = T.String({ maxLength: settingsLimits.value, pattern: NO_NUL })

/**
 * One setting beyond its value. PostgreSQL: pg_settings' unit, source, sourcefile and sourceline (null
 * without pg_read_all_settings), boot_val and reset_val (in the unit's base, as pg_settings gives them;
 * masked like the value for a setting that may hold a secret), context, vartype, short_desc and
 * pending_restart. ClickHouse: system.settings' default, type and description (every one sent is changed).
 */
export const SettingDetail = T.Object({
  /** The unit the defaults are counted in: `8kB`, `ms`, `kB`...; null: none. */
  unit: T.Optional(T.Union([T.String({ maxLength: 32, pattern: NO_NUL }), T.Null()])),
  /** default, configuration file, override, environment variable, command line, global, database, user, database user; ClickHouse: profile. */
  source: T.String({ maxLength: 64, pattern: NO_NUL }),
  file: T.Optional(T.Union([T.String({ maxLength: 4096, pattern: NO_NUL }), T.Null()])),
  line: T.Optional(T.Union([T.Integer({ minimum: 0, maximum: 2_147_483_647 }), T.Null()])),
  /** The built-in default (boot_val; ClickHouse: default). */
  boot_value: T.Optional(T.Union([settingText, T.Null()])),
  /** The value a RESET would give this session (reset_val). */
  reset_value: T.Optional(T.Union([settingText, T.Null()])),
  /** internal, postmaster (restart), sighup (reload), superuser-backend, backend, superuser, user. */
  context: T.Optional(T.Union([T.String({ maxLength: 32, pattern: NO_NUL }), T.Null()])),
  /** bool, integer, real, string, enum; ClickHouse: its type name. */
  type: T.Optional(T.Union([T.String({ maxLength: 128, pattern: NO_NUL }), T.Null()])),
  description: T.Optional(T.Union([T.String({ maxLength: 2_000, pattern: NO_NUL }), T.Null()])),
  /** Changed in the configuration but applied only at the next restart (pg_settings.pending_restart). */
  pending_restart: T.Optional(T.Boolean()),
  /** Differs from the built-in default (and is not an override PostgreSQL computed itself). */
  changed: T.Boolean(),
})
export type SettingDetail = Static<typeof SettingDetail>

/**
 * What the server compares from one batch to the next to derive events (routes: /events): the server's
 * start, the agent's start, the server's settings and the statistics' reset times. Every field is
 * optional (agents before it send none, and the server derives what it can without).
 */
export const ServerState = T.Object({
  /** When the database server started (PostgreSQL: pg_postmaster_start_time()). */
  started_at: T.Optional(epochMs),
  /** When the agent's run for this database started: a value the server has not seen is an agent (re)start. */
  agent_started_at: T.Optional(epochMs),
  /** A digest of the server's settings (every name and value), sent every cycle. */
  settings_hash: T.Optional(T.String({ maxLength: text.id })),
  /**
   * The settings themselves, name → value as SHOW prints it: sent when settings_hash differs from the one
   * the agent last sent (its first cycle included). PostgreSQL: every setting of pg_settings but those the
   * agent's own session set; ClickHouse: system.settings' changed ones.
   */
  settings: T.Optional(
    T.Record(T.String({ pattern: NAME_PATTERN }), T.String({ maxLength: settingsLimits.value, pattern: NO_NUL }), {
      maxProperties: settingsLimits.count,
      additionalProperties: false,
    }),
  ),
  /**
   * What the Configuration page shows of each setting besides its value (name → detail): sent when its
   * digest differs from the one the agent last sent, within the same only-when-changed scheme as
   * settings. The same names as settings. Optional: agents before it send none, servers before it drop it.
   */
  settings_detail: T.Optional(
    T.Record(T.String({ pattern: NAME_PATTERN }), SettingDetail, {
      maxProperties: settingsLimits.count,
      additionalProperties: false,
    }),
  ),
  /** When each statistics view was last reset (pg_stat_statements_info, pg_stat_database, ...); null: never. */
  stats_resets: T.Optional(
    T.Record(T.String({ pattern: NAME_PATTERN }), nullableEpochMs, { maxProperties: 32, additionalProperties: false }),
  ),
})
export type ServerState = Static<typeof ServerState>

/** Why a database cannot be reached, as the agent classes its driver's error (src/agent/reachability.ts). */
export const AVAILABILITY_CAUSES = [
  'refused',
  'timeout',
  'name_resolution',
  'tls',
  'authentication',
  'too_many_connections',
  'permission',
  'other',
] as const
export type AvailabilityCause = (typeof AVAILABILITY_CAUSES)[number]

/**
 * Whether the agent reaches the database, as its health pings (every 10 s) and connection attempts find
 * it. Normal batches carry it (state `up`); while the database is down the agent sends, at every ping, a
 * batch of the header and this section only, and one more when it answers again. Optional: agents
 * before it send none, servers before it drop it.
 */
export const Availability = T.Object({
  state: T.Union([T.Literal('up'), T.Literal('down')]),
  /** Since when it is in this state, by the agent's clock (the first failed ping or connection; the first answer after). */
  since: epochMs,
  /** Down only: the failure's class. */
  cause: T.Optional(T.Union(AVAILABILITY_CAUSES.map((c) => T.Literal(c)))),
  /** Down only: the driver's message, without passwords, at most 2,000 characters. */
  message: T.Optional(T.String({ maxLength: 2000, pattern: NO_NUL })),
})
export type Availability = Static<typeof Availability>

export const CollectorError = T.Object({
  collector: T.String(),
  message: T.String({ maxLength: text.collectorMessage }),
  /**
   * A collector note's level: 'info' for what the agent leaves out by design (write statements its
   * read-only role may not explain), shown on the page it concerns rather than as a warning on every
   * page; absent for a note to act on. Optional: older agents never send it, older servers drop it.
   */
  level: T.Optional(T.Literal('info')),
})

export { tagLimits }

/** Limits of the custom_metrics section (the agent keeps within them, src/agent/collectors/custom-metrics.ts). */
export const customMetricWireLimits = {
  definitions: 50,
  samples: 20_000,
  errors: 50,
  labels: 20,
  labelValue: 200,
} as const

const customName = T.String({ minLength: 1, maxLength: 100, pattern: '^[a-z_][a-z0-9_]*$' })
const customColumn = T.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })

/** A custom metric as the agent config defines it (the server keeps the latest of each name). */
export const CustomMetricDefinition = T.Object({
  name: customName,
  kind: T.Union([T.Literal('gauge'), T.Literal('counter')]),
  labels: T.Array(customColumn, { maxItems: customMetricWireLimits.labels }),
  values: T.Array(customColumn, { minItems: 1, maxItems: customMetricWireLimits.labels }),
  interval_seconds: T.Integer({ minimum: 1, maximum: 86_400 }),
  description: T.Optional(T.String({ maxLength: 500, pattern: NO_NUL_PATTERN })),
  /** custom_metric_threshold: every sample of the last for_seconds above (or below) the threshold. */
  alert: T.Optional(
    T.Object({
      op: T.Union([T.Literal('above'), T.Literal('below')]),
      threshold: T.Number({ minimum: -Number.MAX_VALUE, maximum: Number.MAX_VALUE }),
      for_seconds: T.Integer({ minimum: 0, maximum: 7 * 86_400 }),
      severity: T.Union([T.Literal('warning'), T.Literal('critical')]),
    }),
  ),
})
export type CustomMetricDefinition = Static<typeof CustomMetricDefinition>

/** One value of one row: the metric, its value column, the row's labels, and the number as the query returned it. */
export const CustomMetricSample = T.Object({
  name: customName,
  column: customColumn,
  labels: T.Record(customColumn, T.String({ maxLength: customMetricWireLimits.labelValue, pattern: NO_NUL_PATTERN }), {
    maxProperties: customMetricWireLimits.labels,
  }),
  value: T.Number({ minimum: -Number.MAX_VALUE, maximum: Number.MAX_VALUE }),
})
export type CustomMetricSample = Static<typeof CustomMetricSample>

/**
 * The operator's own SQL checks run this cycle (collected by `custom_metrics`): the definitions of the
 * database's metrics, the samples of those that were due, and why some gave none. Gauges travel as
 * read; counters as read too (the server turns them into rates per second between samples).
 */
export const CustomMetricsSection = T.Object({
  definitions: T.Array(CustomMetricDefinition, { maxItems: customMetricWireLimits.definitions }),
  samples: T.Array(CustomMetricSample, { maxItems: customMetricWireLimits.samples }),
  errors: T.Array(T.Object({ name: customName, message: T.String({ maxLength: 2000, pattern: NO_NUL_PATTERN }) }), {
    maxItems: customMetricWireLimits.errors,
  }),
})
export type CustomMetricsSection = Static<typeof CustomMetricsSection>

export const IngestBatch = T.Object({
  batch_id: T.String({ minLength: 8, maxLength: text.id }),
  /** When the cycle ran (epoch ms). */
  collected_at: epochMs,
  /** The poll interval the agent runs at, in seconds (its cadence: the server's gap and availability rules go by it). */
  interval_seconds: T.Number({ minimum: 0, maximum: MAX_POLL_INTERVAL_SECONDS }),
  /**
   * The seconds the cycle's deltas cover: the poll interval, or the time since the baseline's cycle when
   * longer (after a gap: the agent stopped, the database did not answer). Absent: interval_seconds.
   * The server spreads the counter deltas over the minutes it covers (wire version 4).
   */
  covered_seconds: T.Optional(T.Number({ minimum: 0, maximum: MAX_POLL_INTERVAL_SECONDS })),
  agent_version: T.String({ maxLength: text.id }),
  database: T.Object({
    name: T.String({ minLength: 1, maxLength: NAME_MAX_CHARS }),
    engine: T.Union([T.Literal('postgres'), T.Literal('clickhouse')]),
    engine_version: T.Optional(T.String({ maxLength: 200 })),
    host: T.String({ minLength: 1, maxLength: 255 }),
    port: T.Integer({ minimum: 1, maximum: 65535 }),
    /** The config entry's tags; the server applies them when it registers the database, never later. */
    tags: T.Optional(
      T.Record(
        T.String({ minLength: 1, maxLength: tagLimits.key }),
        T.String({ maxLength: tagLimits.value, pattern: '^[^\\u0000]*$' }),
        {
          maxProperties: tagLimits.count,
        },
      ),
    ),
  }),
  query_stats: T.Optional(T.Array(QueryStatDelta, { maxItems: max.query_stats })),
  explain_plans: T.Optional(T.Array(ExplainPlan, { maxItems: max.explain_plans })),
  activity: T.Optional(T.Array(ActiveQuery, { maxItems: max.activity })),
  locks: T.Optional(T.Array(LockEntry, { maxItems: max.locks })),
  waits: T.Optional(T.Array(WaitSample, { maxItems: max.waits })),
  tables: T.Optional(T.Array(TableStat, { maxItems: max.tables })),
  indexes: T.Optional(T.Array(IndexStat, { maxItems: max.indexes })),
  /** Sequences, the most used first (collected by `tables`). */
  sequences: T.Optional(T.Array(SequenceStat, { maxItems: max.sequences })),
  /** Foreign keys without an index on their referencing columns (collected by `tables`). */
  unindexed_foreign_keys: T.Optional(T.Array(UnindexedForeignKey, { maxItems: max.unindexed_foreign_keys })),
  /** Constraints added NOT VALID and not validated since. */
  invalid_constraints: T.Optional(T.Array(InvalidConstraint, { maxItems: max.invalid_constraints })),
  /** Estimated bloat of tables and btree indexes, the most bloated first. */
  bloat: T.Optional(T.Array(BloatEstimate, { maxItems: max.bloat })),
  /**
   * Column statistics of the tables most read by sequential scans: sent when their statistics changed (or
   * hourly), absent in between; absent from agents before it, dropped by servers before it.
   */
  column_stats: T.Optional(T.Array(ColumnStat, { maxItems: max.column_stats })),
  /** Client connections counted by user, application, client address and state. */
  connections: T.Optional(T.Array(ConnectionGroup, { maxItems: max.connections })),
  /** VACUUM, ANALYZE, CREATE INDEX and CLUSTER commands running at collection time, with their progress. */
  progress: T.Optional(T.Array(ProgressEntry, { maxItems: max.progress })),
  replication: T.Optional(ReplicationStatus),
  /** The WAL archiver's state (collected by `archiver`; absent from agents before it, ignored by servers before it). */
  archiver: T.Optional(ArchiverStatus),
  /** pg_wal's size and the last checkpoint (collected by `wal_dir`; absent from agents before it, ignored by servers before it). */
  wal_dir: T.Optional(WalDirStatus),
  /** The server log's entries of the cycle, classified, with exact counts (collected by `log_events`; absent from agents before it). */
  log_events: T.Optional(LogEventsSection),
  /** The database host's CPU, memory, filesystems and devices (collected by `host`; absent when the agent is not on the host). */
  host: T.Optional(HostStatus),
  /** Backups from pgBackRest or WAL-G (collected by `backups` when a backup command is configured; sent when read). */
  backups: T.Optional(BackupStatus),
  /** Triggers switched off (collected by `triggers`; absent from agents before it, ignored by servers before it). */
  disabled_triggers: T.Optional(T.Array(DisabledTrigger, { maxItems: max.disabled_triggers })),
  /** Roles, settings, functions, schemas and pg_hba lines the security advisors judge (collected by `security`; absent from agents before it). */
  security: T.Optional(SecurityStatus),
  /** Deltas of pg_stat_bgwriter / pg_stat_checkpointer counters. */
  bgwriter: T.Optional(counterMap),
  /** Deltas of pg_stat_wal counters (PostgreSQL 14+). */
  wal_stats: T.Optional(counterMap),
  /** Deltas of pg_stat_io counters per backend, object and context (PostgreSQL 16+). */
  io_stats: T.Optional(T.Array(IoStatRow, { maxItems: max.io_stats })),
  /** Database-wide gauges and counter deltas (pg_stat_database, settings, wraparound ages). */
  database_stats: T.Optional(counterMap),
  /** What holds back the xmin horizon, named (collected by database_stats; absent from older agents). */
  xmin_holders: T.Optional(T.Array(XminHolder, { maxItems: max.xmin_holders })),
  /** ClickHouse: active parts per table and partition. */
  parts: T.Optional(T.Array(PartStat, { maxItems: max.parts })),
  /** ClickHouse: merges running at collection time. */
  merges: T.Optional(T.Array(MergeEntry, { maxItems: max.merges })),
  /** ClickHouse: unfinished mutations and those of the last day. */
  mutations: T.Optional(T.Array(MutationEntry, { maxItems: max.mutations })),
  /** ClickHouse: server gauges (memory, limit, disks, connections, uptime) and query counter deltas. */
  server_metrics: T.Optional(counterMap),
  /** ClickHouse: its users' authentication and allowed hosts (collected by `security`; wire version 3, absent from agents before it). */
  clickhouse_users: T.Optional(ClickHouseUsers),
  /** What events are derived from (restarts, settings, resets, agent starts); absent from agents before it. */
  server_state: T.Optional(ServerState),
  /** Whether the agent reaches the database; alone with the header while it is down (Availability). */
  availability: T.Optional(Availability),
  /** The operator's own SQL checks (collected by `custom_metrics`; wire version 3, left out for older servers). */
  custom_metrics: T.Optional(CustomMetricsSection),
  collector_errors: T.Optional(T.Array(CollectorError, { maxItems: max.collector_errors })),
  /**
   * What the collectors that ran want the user to know (query_log disabled, statements the role may not
   * EXPLAIN, unreadable sequences), every cycle, empty when nothing: the server keeps the latest list.
   */
  collector_notes: T.Optional(T.Array(CollectorError, { maxItems: max.collector_notes })),
})
export type IngestBatch = Static<typeof IngestBatch>

/** Server-side settings the agent applies from its next cycle. */
export const DatabaseSettings = T.Object({
  poll_interval_seconds: T.Integer({ minimum: 1, maximum: MAX_POLL_INTERVAL_SECONDS }),
  collect_explain_plans: T.Boolean(),
  collect_replication: T.Boolean(),
  disabled_collectors: T.Array(T.String()),
})
export type DatabaseSettings = Static<typeof DatabaseSettings>

export const IngestResponse = T.Object({
  database_id: T.String(),
  /** True when this batch_id had been applied before (the replay was ignored). */
  duplicate: T.Boolean(),
  settings: DatabaseSettings,
  /**
   * Actions the dashboard asked of this database that wait for the agent (cancel, terminate, explain):
   * when above 0 the agent fetches them at once (GET AGENT_ACTIONS_PATH). Absent from older servers.
   */
  actions_pending: T.Optional(T.Integer({ minimum: 0 })),
})
export type IngestResponse = Static<typeof IngestResponse>

// ---- actions: what the dashboard asks the agent to run (src/server/routes/actions.ts, src/agent/actions.ts) ----

export { ACTION_KINDS, type ActionKind } from './action-kinds.ts'

/** The session a cancel or terminate is about, as the agent reported it (times in epoch ms, the agent's clock). */
export const ActionSession = T.Object({
  pid: T.Integer({ minimum: 1, maximum: 2_147_483_647 }),
  backend_start: epochMs,
  xact_start: T.Union([epochMs, T.Null()]),
  query_start: T.Union([epochMs, T.Null()]),
  user: T.Union([T.String({ maxLength: 256 }), T.Null()]),
  application_name: T.Union([T.String({ maxLength: 256 }), T.Null()]),
})
export type ActionSession = Static<typeof ActionSession>

/** A pending action handed to the agent (GET AGENT_ACTIONS_PATH). */
export const AgentAction = T.Object({
  id: T.String(),
  kind: T.Union(ACTION_KINDS.map((k) => T.Literal(k))),
  /** Milliseconds left until it expires: the agent does not start it later than that. */
  expires_in_ms: T.Integer({ minimum: 0 }),
  /** cancel, terminate: the session. */
  session: T.Optional(ActionSession),
  /** explain: the statement's query id (as pg_stat_statements names it) and the values of its $1, $2, … (null: NULL). */
  query_hash: T.Optional(T.String()),
  parameters: T.Optional(T.Array(T.Union([T.String(), T.Null()]))),
})
export type AgentAction = Static<typeof AgentAction>

export const AgentActions = T.Object({ actions: T.Array(AgentAction) })
export type AgentActions = Static<typeof AgentActions>

/** What became of an action, as the agent posts it back (POST AGENT_ACTIONS_PATH/{id}). */
export const AgentActionResult = T.Object({
  /** done: it ran; refused: the agent would not run it (reason says why); failed: it ran into an error (reason). */
  outcome: T.Union([T.Literal('done'), T.Literal('refused'), T.Literal('failed')]),
  reason: T.Optional(T.String({ maxLength: 4_000 })),
  /** cancel, terminate: whether a backend was signalled (false: the session had ended or is another one now). */
  signalled: T.Optional(T.Boolean()),
  /** explain: EXPLAIN (FORMAT JSON)'s first element. */
  plan: T.Optional(T.Unknown()),
})
export type AgentActionResult = Static<typeof AgentActionResult>

// In its own module so that the agent, which only builds batches, does not load TypeBox.
export { INGEST_PATH } from './ingest-path.ts'
