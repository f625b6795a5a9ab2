// Counter and gauge names of the batch sections (query_stats, bgwriter, wal_stats, io_stats,
// database_stats, server_metrics): what the agent's collectors send and what the server stores, in one place.
// Statements', tables' and indexes' fields have store columns of their own: they are defined in families.ts.
import { POSTGRES_STATEMENT_COUNTERS, STATEMENT_COUNTERS } from './families.ts'

/** pg_stat_statements counters of a statement (deltas): the statement family's (src/shared/families.ts). */
export const POSTGRES_QUERY_COUNTER_KEYS = POSTGRES_STATEMENT_COUNTERS

/** Every statement counter the server keeps: PostgreSQL's, and ClickHouse's bytes, memory and errors. */
export const QUERY_COUNTER_KEYS = STATEMENT_COUNTERS

/** pg_stat_bgwriter / pg_stat_checkpointer counters (deltas). */
export const BGWRITER_KEYS = [
  'checkpoints_timed',
  'checkpoints_req',
  'checkpoint_write_time_ms',
  'checkpoint_sync_time_ms',
  'buffers_checkpoint',
  'buffers_clean',
  'maxwritten_clean',
  'buffers_backend',
  'buffers_backend_fsync',
  'buffers_alloc',
  'restartpoints_timed',
  'restartpoints_req',
  'restartpoints_done',
] as const

/** pg_stat_wal counters (deltas, PostgreSQL 14+). */
export const WAL_KEYS = [
  'wal_records',
  'wal_fpi',
  'wal_bytes',
  'wal_buffers_full',
  'wal_write',
  'wal_sync',
  'wal_write_time_ms',
  'wal_sync_time_ms',
] as const

/** pg_stat_io counters per backend type, object and context (deltas, PostgreSQL 16+). */
export const IO_KEYS = [
  'reads',
  'writes',
  'extends',
  'hits',
  'evictions',
  'reuses',
  'fsyncs',
  'writebacks',
  'read_time_ms',
  'write_time_ms',
  'extend_time_ms',
  'fsync_time_ms',
  'writeback_time_ms',
  'read_bytes',
  'write_bytes',
  'extend_bytes',
] as const

/** pg_stat_database counters (deltas). */
export const DATABASE_COUNTER_KEYS = [
  'xact_commit',
  'xact_rollback',
  'blks_read',
  'blks_hit',
  'tup_returned',
  'tup_fetched',
  'tup_inserted',
  'tup_updated',
  'tup_deleted',
  'conflicts',
  'temp_files',
  'temp_bytes',
  'deadlocks',
] as const

/** database_stats keys that are gauges (kept as the bucket's latest value), not deltas. */
export const DATABASE_GAUGE_KEYS = [
  'numbackends',
  'database_size_bytes',
  'connections_total',
  'max_connections',
  'superuser_reserved_connections',
  'xid_age',
  'mxid_age',
  'oldest_xact_age_s',
  'fsync_on',
  'track_counts_on',
  'full_page_writes_on',
  'autovacuum_on',
  // Whether statements' blk_read_time / blk_write_time are counted at all (the dashboard says so when they are all 0).
  'track_io_timing_on',
  'pg_stat_statements_installed',
  'autovacuum_freeze_max_age',
  'autovacuum_multixact_freeze_max_age',
  // What holds back the xmin horizon (cleanup and freezing), by kind: the oldest backend transaction
  // or snapshot (XID age, pid, transaction age), replication slots' xmin, prepared transactions.
  'xmin_backend_age',
  'xmin_backend_pid',
  'xmin_backend_xact_age_s',
  'xmin_slot_age',
  'prepared_xacts',
  'xmin_prepared_age',
  'xmin_prepared_age_s',
] as const

/** ClickHouse server_metrics keys that are gauges (the server keeps each interval's latest value). */
export const SERVER_GAUGE_KEYS = [
  'uptime_s',
  'memory_resident_bytes',
  'memory_tracked_bytes',
  'memory_limit_bytes',
  'os_memory_total_bytes',
  'os_memory_available_bytes',
  'tcp_connections',
  'http_connections',
  // p99 duration of the initial queries query_log recorded since the previous cycle (the agent's own left out).
  'query_p99_ms',
  // system.replicas, only with Replicated tables: read-only replicas, the longest replication queue
  // of one table, the largest absolute_delay.
  'replicas_readonly',
  'replication_queue_size',
  'max_replica_delay_s',
  // system.detached_parts: parts on disk that no table uses.
  'detached_parts',
  // Error signals (system.metrics; see agent/collectors/clickhouse/error-signals.ts): Keeper sessions
  // open (more than one is a fault), files of Distributed tables waiting to be sent, queries paused by
  // the 'priority' setting.
  'zookeeper_sessions',
  'distributed_files_to_insert',
  'queries_preempted',
  // The load against the server's limits (agent collectors/clickhouse/load.ts): queries running now
  // (the agent's own left out) and max_concurrent_queries; connections of the protocols besides TCP and
  // HTTP, and max_connections (the limits only when system.server_settings has them and they are set).
  'running_queries',
  'max_concurrent_queries',
  'mysql_connections',
  'postgresql_connections',
  'interserver_connections',
  'max_connections',
] as const
export type ServerGaugeKey = (typeof SERVER_GAUGE_KEYS)[number]

/** ClickHouse server_metrics keys that are deltas since the agent's previous cycle (the server sums them). */
export const SERVER_COUNTER_KEYS = [
  'queries_total',
  'queries_failed',
  // Initial queries in query_log that ended, and those of them that failed (the agent's own left out).
  'queries_logged',
  'queries_logged_failed',
  // system.events DelayedInserts / RejectedInserts: INSERTs slowed down or refused for too many parts.
  'delayed_inserts',
  'rejected_inserts',
  // Error signals (system.events; see agent/collectors/clickhouse/error-signals.ts for the engine's names).
  'distributed_connection_fail_try',
  'distributed_connection_fail_at_all',
  'buffer_flush_errors',
  'replicated_part_checks_failed',
  'replicated_part_failed_fetches',
  'replicated_data_loss',
  'zookeeper_hardware_exceptions',
  'file_read_failures',
  'file_write_failures',
  'dns_errors',
  'slow_reads',
  // INSERT statements and the rows they wrote (system.events InsertQuery / InsertedRows, the server's whole count).
  'insert_queries',
  'inserted_rows',
] as const
export type ServerCounterKey = (typeof SERVER_COUNTER_KEYS)[number]

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
