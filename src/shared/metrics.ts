// Every metric of the batch sections bgwriter, wal_stats, io_stats, database_stats and server_metrics,
// one record each: its key, whether it is a counter (the agent sends deltas since its previous sample,
// the server sums them) or a gauge (the server keeps each interval's latest value), its unit, its help
// text, the server versions that report it where they differ from its collector's, the dashboard's
// legend for it, and its series name on the agent's /metrics when it is exported there. The key lists
// the agent's collectors, the wire and API schemas and the server's routes use, the exporter's HELP and
// TYPE lines (src/agent/exporter.ts) and the dashboard's chart legends are all derived from these
// records. The SQL that reads each section stays in its collector (src/agent/collectors/*): it is the
// agent's alone, and src/shared holds only what both sides use.
// Statements', tables' and indexes' fields have store columns of their own: they are defined in families.ts.
import { POSTGRES_STATEMENT_COUNTERS, STATEMENT_COUNTERS } from './families.ts'

/** A counter is sent as a delta since the previous sample; a gauge as its value now. */
export type MetricKind = 'counter' | 'gauge'

/**
 * The unit of a metric's value: `count` of things or events, `bytes`, `ms` or `s` durations (ages too),
 * `xids` transaction or multixact IDs, `pid` a process ID, `flag` 1 on and 0 off, `setting` a server
 * setting's value in its own unit.
 */
export type MetricUnit = 'count' | 'bytes' | 'ms' | 's' | 'xids' | 'pid' | 'flag' | 'setting'

export interface MetricRecord<K extends string = string> {
  key: K
  kind: MetricKind
  unit: MetricUnit
  /** What it measures and where it is read from, one sentence without the closing period. */
  help: string
  /** Lowest server major that reports it, where higher than its collector's (null on older ones). */
  minVersion?: number
  /** Highest server major that reports it, where the server dropped it (null on newer ones). */
  lastVersion?: number
  /** Its legend on the dashboard's charts. */
  label?: string
  /** Its series on the agent's GET /metrics (enabled_exporter); absent = not exported. */
  exported?: string
}

type Extra = Pick<MetricRecord, 'minVersion' | 'lastVersion' | 'label' | 'exported'>
const counter = <K extends string>(key: K, unit: MetricUnit, help: string, extra: Extra = {}) => ({
  key,
  kind: 'counter' as const,
  unit,
  help,
  ...extra,
})
const gauge = <K extends string>(key: K, unit: MetricUnit, help: string, extra: Extra = {}) => ({
  key,
  kind: 'gauge' as const,
  unit,
  help,
  ...extra,
})

/** The keys of `records` of one kind (or all), in the records' order. */
function keysOf<R extends { key: string; kind: MetricKind }, Kind extends MetricKind = MetricKind>(
  records: readonly R[],
  kind?: Kind,
): Extract<R, { kind: Kind }>['key'][] {
  return records.filter((r) => kind === undefined || r.kind === kind).map((r) => r.key) as Extract<
    R,
    { kind: Kind }
  >['key'][]
}

/** pg_stat_bgwriter / pg_stat_checkpointer (PostgreSQL 17 moved the checkpoint counters there). */
export const BGWRITER_METRICS = [
  counter('checkpoints_timed', 'count', 'Checkpoints started by checkpoint_timeout', {
    label: 'timed',
    exported: 'dbm_pg_checkpoints_timed_total',
  }),
  counter('checkpoints_req', 'count', 'Checkpoints requested (max_wal_size reached, CHECKPOINT)', {
    label: 'requested',
    exported: 'dbm_pg_checkpoints_requested_total',
  }),
  counter('checkpoint_write_time_ms', 'ms', 'Time checkpoints spent writing buffers', {
    label: 'write',
    exported: 'dbm_pg_checkpoint_write_seconds_total',
  }),
  counter('checkpoint_sync_time_ms', 'ms', 'Time checkpoints spent syncing files to disk', { label: 'sync' }),
  counter('buffers_checkpoint', 'count', 'Buffers written by checkpoints', {
    label: 'checkpointer',
    exported: 'dbm_pg_checkpoint_buffers_written_total',
  }),
  counter('buffers_clean', 'count', 'Buffers written by the background writer', { label: 'bgwriter' }),
  counter(
    'maxwritten_clean',
    'count',
    'Times the background writer stopped a round for writing bgwriter_lru_maxpages buffers',
  ),
  counter(
    'buffers_backend',
    'count',
    'Buffers written by backends themselves (pg_stat_io has them from PostgreSQL 17)',
    { lastVersion: 16, label: 'backends' },
  ),
  counter('buffers_backend_fsync', 'count', 'Times a backend had to fsync a file itself', { lastVersion: 16 }),
  counter('buffers_alloc', 'count', 'Buffers allocated'),
  counter(
    'restartpoints_timed',
    'count',
    'Restartpoints started by checkpoint_timeout on a standby (pg_stat_checkpointer)',
    { minVersion: 17 },
  ),
  counter('restartpoints_req', 'count', 'Restartpoints requested on a standby (pg_stat_checkpointer)', {
    minVersion: 17,
  }),
  counter('restartpoints_done', 'count', 'Restartpoints completed on a standby (pg_stat_checkpointer)', {
    minVersion: 17,
  }),
] as const

/** pg_stat_wal (PostgreSQL 14+; on 18 the writes and syncs come from pg_stat_io's object 'wal'). */
export const WAL_METRICS = [
  counter('wal_records', 'count', 'WAL records written (pg_stat_wal)', {
    label: 'records',
    exported: 'dbm_pg_wal_records_total',
  }),
  counter('wal_fpi', 'count', 'Full page images written to WAL (pg_stat_wal)', {
    label: 'full-page images',
    exported: 'dbm_pg_wal_full_page_images_total',
  }),
  counter('wal_bytes', 'bytes', 'Bytes of WAL written (pg_stat_wal)', {
    label: 'WAL',
    exported: 'dbm_pg_wal_bytes_total',
  }),
  counter('wal_buffers_full', 'count', 'Times WAL was written to disk because the WAL buffers were full'),
  counter('wal_write', 'count', 'Times WAL buffers were written out to disk'),
  counter('wal_sync', 'count', 'Times WAL files were synced to disk'),
  counter('wal_write_time_ms', 'ms', 'Time spent writing WAL to disk (0 unless track_wal_io_timing is on)'),
  counter('wal_sync_time_ms', 'ms', 'Time spent syncing WAL files to disk (0 unless track_wal_io_timing is on)'),
] as const

/** pg_stat_io per backend type, object and context (PostgreSQL 16+). */
export const IO_METRICS = [
  counter('reads', 'count', 'Read operations', { label: 'reads' }),
  counter('writes', 'count', 'Write operations', { label: 'writes' }),
  counter('extends', 'count', 'Relation extend operations', { label: 'extends' }),
  counter('hits', 'count', 'Times a wanted block was found in shared buffers'),
  counter('evictions', 'count', 'Times a block was evicted from a buffer to make room'),
  counter('reuses', 'count', 'Times a buffer of a ring buffer was reused'),
  counter('fsyncs', 'count', 'fsync calls'),
  counter('writebacks', 'count', 'Requests to the kernel to write data back to storage'),
  counter('read_time_ms', 'ms', 'Time spent in reads (0 unless track_io_timing is on)'),
  counter('write_time_ms', 'ms', 'Time spent in writes (0 unless track_io_timing is on)'),
  counter('extend_time_ms', 'ms', 'Time spent in extends (0 unless track_io_timing is on)'),
  counter('fsync_time_ms', 'ms', 'Time spent in fsyncs (0 unless track_io_timing is on)'),
  counter('writeback_time_ms', 'ms', 'Time spent in writebacks (0 unless track_io_timing is on)'),
  counter('read_bytes', 'bytes', 'Bytes read (before PostgreSQL 18: reads × op_bytes)'),
  counter('write_bytes', 'bytes', 'Bytes written (before PostgreSQL 18: writes × op_bytes)'),
  counter('extend_bytes', 'bytes', 'Bytes extended (before PostgreSQL 18: extends × op_bytes)'),
] as const

/** pg_stat_database counters of the connected database, then gauges of it and of the server. */
export const DATABASE_METRICS = [
  counter('xact_commit', 'count', 'Transactions committed (pg_stat_database.xact_commit)', {
    label: 'commits',
    exported: 'dbm_pg_xact_commit_total',
  }),
  counter('xact_rollback', 'count', 'Transactions rolled back (pg_stat_database.xact_rollback)', {
    label: 'rollbacks',
    exported: 'dbm_pg_xact_rollback_total',
  }),
  counter('blks_read', 'count', 'Blocks read from disk or the OS cache (pg_stat_database.blks_read)', {
    label: 'read',
    exported: 'dbm_pg_blocks_read_total',
  }),
  counter('blks_hit', 'count', 'Blocks found in shared buffers (pg_stat_database.blks_hit)', {
    label: 'hit',
    exported: 'dbm_pg_blocks_hit_total',
  }),
  counter('tup_returned', 'count', 'Rows returned by scans (pg_stat_database.tup_returned)', {
    label: 'returned',
    exported: 'dbm_pg_tuples_returned_total',
  }),
  counter('tup_fetched', 'count', 'Rows fetched by index scans (pg_stat_database.tup_fetched)', {
    label: 'fetched',
    exported: 'dbm_pg_tuples_fetched_total',
  }),
  counter('tup_inserted', 'count', 'Rows inserted (pg_stat_database.tup_inserted)', {
    label: 'inserted',
    exported: 'dbm_pg_tuples_inserted_total',
  }),
  counter('tup_updated', 'count', 'Rows updated (pg_stat_database.tup_updated)', {
    label: 'updated',
    exported: 'dbm_pg_tuples_updated_total',
  }),
  counter('tup_deleted', 'count', 'Rows deleted (pg_stat_database.tup_deleted)', {
    label: 'deleted',
    exported: 'dbm_pg_tuples_deleted_total',
  }),
  counter('conflicts', 'count', 'Queries cancelled by recovery conflicts on a standby (pg_stat_database.conflicts)', {
    exported: 'dbm_pg_recovery_conflicts_total',
  }),
  counter('temp_files', 'count', 'Temporary files written by queries (pg_stat_database.temp_files)', {
    exported: 'dbm_pg_temp_files_total',
  }),
  counter('temp_bytes', 'bytes', 'Bytes of temporary files written by queries (pg_stat_database.temp_bytes)', {
    exported: 'dbm_pg_temp_bytes_total',
  }),
  counter('deadlocks', 'count', 'Deadlocks detected (pg_stat_database.deadlocks)', {
    exported: 'dbm_pg_deadlocks_total',
  }),
  gauge('numbackends', 'count', 'Sessions connected to the database (pg_stat_database.numbackends)', {
    label: 'backends',
    exported: 'dbm_pg_backends',
  }),
  gauge('database_size_bytes', 'bytes', 'Size of the database on disk (pg_database_size)', {
    exported: 'dbm_pg_database_size_bytes',
  }),
  gauge('connections_total', 'count', 'Client backends of the whole server, the ones max_connections limits'),
  gauge('max_connections', 'setting', 'The max_connections setting', {
    label: 'max',
    exported: 'dbm_pg_max_connections',
  }),
  gauge('superuser_reserved_connections', 'setting', 'The superuser_reserved_connections setting'),
  gauge(
    'xid_age',
    'xids',
    'Transaction IDs since the database was last frozen (age(datfrozenxid)); wraparound at about 2 billion',
    { exported: 'dbm_pg_xid_age' },
  ),
  gauge('mxid_age', 'xids', 'Multixact IDs since the database was last frozen (mxid_age(datminmxid))', {
    exported: 'dbm_pg_mxid_age',
  }),
  gauge('oldest_xact_age_s', 's', 'Age of the oldest open transaction', {
    exported: 'dbm_pg_oldest_transaction_age_seconds',
  }),
  gauge('fsync_on', 'flag', 'Whether fsync is on'),
  gauge('track_counts_on', 'flag', 'Whether track_counts is on (autovacuum and the statistics views need it)'),
  gauge('full_page_writes_on', 'flag', 'Whether full_page_writes is on'),
  gauge('autovacuum_on', 'flag', 'Whether autovacuum is on'),
  // Whether statements' blk_read_time / blk_write_time are counted at all (the dashboard says so when they are all 0).
  gauge(
    'track_io_timing_on',
    'flag',
    "Whether track_io_timing is on (statements' read and write times are 0 without it)",
  ),
  gauge(
    'pg_stat_statements_installed',
    'flag',
    'Whether the pg_stat_statements extension is installed in the database',
  ),
  gauge('autovacuum_freeze_max_age', 'setting', 'The autovacuum_freeze_max_age setting'),
  gauge('autovacuum_multixact_freeze_max_age', 'setting', 'The autovacuum_multixact_freeze_max_age setting'),
  // What holds back the xmin horizon (cleanup and freezing), by kind: the oldest backend transaction
  // or snapshot (XID age, pid, transaction age), replication slots' xmin, prepared transactions.
  gauge('xmin_backend_age', 'xids', 'Age of the oldest backend transaction or snapshot holding back the xmin horizon'),
  gauge('xmin_backend_pid', 'pid', 'The process of that backend'),
  gauge('xmin_backend_xact_age_s', 's', "Age of that backend's transaction"),
  gauge('xmin_slot_age', 'xids', "Age of the oldest xmin or catalog_xmin of the server's replication slots"),
  gauge('prepared_xacts', 'count', 'Prepared transactions waiting for COMMIT PREPARED or ROLLBACK PREPARED', {
    exported: 'dbm_pg_prepared_transactions',
  }),
  gauge('xmin_prepared_age', 'xids', 'Age of the oldest prepared transaction'),
  gauge('xmin_prepared_age_s', 's', 'Time since the oldest prepared transaction was prepared'),
] as const

/** ClickHouse server_metrics: gauges, then counters (deltas since the agent's previous cycle). */
export const SERVER_METRICS = [
  gauge('uptime_s', 's', 'Time since the ClickHouse server started', { exported: 'dbm_clickhouse_uptime_seconds' }),
  gauge('memory_resident_bytes', 'bytes', 'Resident memory of the ClickHouse server', {
    exported: 'dbm_clickhouse_memory_resident_bytes',
  }),
  gauge('memory_tracked_bytes', 'bytes', 'Memory tracked by ClickHouse (MemoryTracking)', {
    exported: 'dbm_clickhouse_memory_tracked_bytes',
  }),
  gauge('memory_limit_bytes', 'bytes', "The server's memory limit (max_server_memory_usage)"),
  gauge('os_memory_total_bytes', 'bytes', "The machine's memory"),
  gauge('os_memory_available_bytes', 'bytes', "The machine's available memory"),
  gauge('tcp_connections', 'count', 'Open native-protocol connections', {
    label: 'TCP',
    exported: 'dbm_clickhouse_tcp_connections',
  }),
  gauge('http_connections', 'count', 'Open HTTP connections', {
    label: 'HTTP',
    exported: 'dbm_clickhouse_http_connections',
  }),
  gauge(
    'query_p99_ms',
    'ms',
    "p99 duration of the initial queries query_log recorded since the previous cycle (the agent's own left out)",
  ),
  // system.replicas, only with Replicated tables.
  gauge('replicas_readonly', 'count', 'Replicated tables in read-only mode', {
    exported: 'dbm_clickhouse_readonly_replicas',
  }),
  gauge('replication_queue_size', 'count', 'The longest replication queue of one Replicated table'),
  gauge('max_replica_delay_s', 's', 'The largest replication delay of a Replicated table', {
    exported: 'dbm_clickhouse_max_replica_delay_seconds',
  }),
  gauge('detached_parts', 'count', 'Detached parts on disk that no table uses', {
    exported: 'dbm_clickhouse_detached_parts',
  }),
  // Error signals (system.metrics; see agent/collectors/clickhouse/error-signals.ts).
  gauge('zookeeper_sessions', 'count', 'Keeper sessions open (more than one is a fault)'),
  gauge('distributed_files_to_insert', 'count', 'Files of Distributed tables waiting to be sent'),
  gauge('queries_preempted', 'count', "Queries paused by the 'priority' setting"),
  // The load against the server's limits (agent collectors/clickhouse/load.ts); the limits only when
  // system.server_settings has them and they are set.
  gauge('running_queries', 'count', "Queries running now (the agent's own left out)"),
  gauge('max_concurrent_queries', 'setting', 'The max_concurrent_queries setting'),
  gauge('mysql_connections', 'count', 'Open MySQL-protocol connections'),
  gauge('postgresql_connections', 'count', 'Open PostgreSQL-protocol connections'),
  gauge('interserver_connections', 'count', 'Open interserver connections'),
  gauge('max_connections', 'setting', 'The max_connections setting'),
  counter('queries_total', 'count', 'Queries started (system.events Query)', {
    exported: 'dbm_clickhouse_queries_total',
  }),
  counter('queries_failed', 'count', 'Queries that failed (system.events FailedQuery)', {
    exported: 'dbm_clickhouse_queries_failed_total',
  }),
  counter('queries_logged', 'count', "Initial queries in query_log that ended (the agent's own left out)"),
  counter('queries_logged_failed', 'count', 'Those of them that failed'),
  counter('delayed_inserts', 'count', 'INSERTs slowed down for too many parts', {
    exported: 'dbm_clickhouse_delayed_inserts_total',
  }),
  counter('rejected_inserts', 'count', 'INSERTs refused for too many parts', {
    exported: 'dbm_clickhouse_rejected_inserts_total',
  }),
  // Error signals (system.events; see agent/collectors/clickhouse/error-signals.ts for the engine's names).
  counter(
    'distributed_connection_fail_try',
    'count',
    'Connection attempts of Distributed tables that failed and were retried',
  ),
  counter(
    'distributed_connection_fail_at_all',
    'count',
    'Connections of Distributed tables that failed after every retry',
  ),
  counter('buffer_flush_errors', 'count', 'Buffer tables that failed to flush'),
  counter('replicated_part_checks_failed', 'count', 'Checks of replicated parts that failed'),
  counter('replicated_part_failed_fetches', 'count', 'Fetches of replicated parts that failed'),
  counter('replicated_data_loss', 'count', 'Replicated parts lost on every replica'),
  counter('zookeeper_hardware_exceptions', 'count', 'Keeper connection faults'),
  counter('file_read_failures', 'count', 'File reads that failed'),
  counter('file_write_failures', 'count', 'File writes that failed'),
  counter('dns_errors', 'count', 'DNS lookups that failed'),
  counter('slow_reads', 'count', 'Reads slower than the server counts as slow'),
  counter('insert_queries', 'count', "INSERT statements (system.events InsertQuery, the server's whole count)"),
  counter('inserted_rows', 'count', 'Rows INSERT statements wrote (system.events InsertedRows)'),
] as const

/** The metric records of each batch section that has them. */
export const METRIC_SECTIONS = {
  bgwriter: BGWRITER_METRICS,
  wal_stats: WAL_METRICS,
  io_stats: IO_METRICS,
  database_stats: DATABASE_METRICS,
  server_metrics: SERVER_METRICS,
} as const satisfies Record<string, readonly MetricRecord[]>
export type MetricSection = keyof typeof METRIC_SECTIONS

/** pg_stat_bgwriter / pg_stat_checkpointer counters (deltas). */
export const BGWRITER_KEYS = keysOf(BGWRITER_METRICS)

/** pg_stat_wal counters (deltas, PostgreSQL 14+). */
export const WAL_KEYS = keysOf(WAL_METRICS)

/** pg_stat_io counters per backend type, object and context (deltas, PostgreSQL 16+). */
export const IO_KEYS = keysOf(IO_METRICS)

/** pg_stat_database counters (deltas). */
export const DATABASE_COUNTER_KEYS = keysOf(DATABASE_METRICS, 'counter')

/** database_stats keys that are gauges (kept as the bucket's latest value), not deltas. */
export const DATABASE_GAUGE_KEYS = keysOf(DATABASE_METRICS, 'gauge')

/** ClickHouse server_metrics keys that are gauges (the server keeps each interval's latest value). */
export const SERVER_GAUGE_KEYS = keysOf(SERVER_METRICS, 'gauge')
export type ServerGaugeKey = (typeof SERVER_GAUGE_KEYS)[number]

/** ClickHouse server_metrics keys that are deltas since the agent's previous cycle (the server sums them). */
export const SERVER_COUNTER_KEYS = keysOf(SERVER_METRICS, 'counter')
export type ServerCounterKey = (typeof SERVER_COUNTER_KEYS)[number]

/** The chart legends of `keys` of one section's records: `[key, label]`, the key itself when it has no label. */
export function legends<R extends MetricRecord>(records: readonly R[], ...keys: R['key'][]): [R['key'], string][] {
  return keys.map((key) => [key, records.find((r) => r.key === key)?.label ?? key])
}

/** pg_stat_statements counters of a statement (deltas): the statement family's (src/shared/families.ts). */
export const POSTGRES_QUERY_COUNTER_KEYS = POSTGRES_STATEMENT_COUNTERS

/** Every statement counter the server keeps: PostgreSQL's, and ClickHouse's bytes, memory and errors. */
export const QUERY_COUNTER_KEYS = STATEMENT_COUNTERS

/** Per-disk gauges of server_metrics, sent as `disk.<name>.<key>`. */
export const DISK_KEYS = ['free_bytes', 'total_bytes'] as const
export type DiskKey = (typeof DISK_KEYS)[number]

/** The server_metrics key of one disk's gauge. */
export const diskMetricKey = (disk: string, key: DiskKey) => `disk.${disk}.${key}`

/** `s`: a disk's name may hold any character, line breaks included. */
const DISK_METRIC_KEY = new RegExp(`^disk\\.(.+)\\.(${DISK_KEYS.join('|')})$`, 's')

/** The disk and gauge a server_metrics key names; undefined for a key that is not a disk's. */
export function parseDiskMetricKey(key: string): { disk: string; key: DiskKey } | undefined {
  const match = DISK_METRIC_KEY.exec(key)
  return match ? { disk: match[1]!, key: match[2] as DiskKey } : undefined
}
