// `enabled_exporter: true` on a database (issue 15 deliverable 3): the monitored database's own key
// figures from each cycle's batch as Prometheus series on the agent's GET /metrics, so that Grafana can
// graph what dbm collects without a second exporter. One table of figures per engine: the batch section
// and key, the series name by the Prometheus conventions, its type and the factor to base units. The
// batch carries counters as deltas since the previous cycle: their series add them up from the agent's
// start (a counter reset when the agent restarts, which rate() handles). A gauge keeps the last value a
// cycle reported.
import type { EngineName } from '../shared/collectors.ts'
import type { IngestBatch } from '../shared/wire.ts'
import type { CounterChild, GaugeChild, Registry } from '../shared/prometheus.ts'

type Section = 'database_stats' | 'wal_stats' | 'bgwriter' | 'server_metrics'

interface Figure {
  section: Section
  key: string
  name: string
  help: string
  type: 'counter' | 'gauge'
  /** Multiplies the batch's value into the series' unit (milliseconds to seconds). */
  scale?: number
}

const counter = (section: Section, key: string, name: string, help: string, scale?: number): Figure => ({ section, key, name, help, type: 'counter', scale })
const gauge = (section: Section, key: string, name: string, help: string, scale?: number): Figure => ({ section, key, name, help, type: 'gauge', scale })

export const EXPORTED_FIGURES: Record<EngineName, Figure[]> = {
  postgres: [
    counter('database_stats', 'xact_commit', 'dbm_pg_xact_commit_total', 'Transactions committed (pg_stat_database.xact_commit), since the agent started.'),
    counter('database_stats', 'xact_rollback', 'dbm_pg_xact_rollback_total', 'Transactions rolled back (pg_stat_database.xact_rollback), since the agent started.'),
    counter('database_stats', 'blks_read', 'dbm_pg_blocks_read_total', 'Blocks read from disk or the OS cache (pg_stat_database.blks_read), since the agent started.'),
    counter('database_stats', 'blks_hit', 'dbm_pg_blocks_hit_total', 'Blocks found in shared buffers (pg_stat_database.blks_hit), since the agent started.'),
    counter('database_stats', 'tup_returned', 'dbm_pg_tuples_returned_total', 'Rows returned by scans (pg_stat_database.tup_returned), since the agent started.'),
    counter('database_stats', 'tup_fetched', 'dbm_pg_tuples_fetched_total', 'Rows fetched by index scans (pg_stat_database.tup_fetched), since the agent started.'),
    counter('database_stats', 'tup_inserted', 'dbm_pg_tuples_inserted_total', 'Rows inserted (pg_stat_database.tup_inserted), since the agent started.'),
    counter('database_stats', 'tup_updated', 'dbm_pg_tuples_updated_total', 'Rows updated (pg_stat_database.tup_updated), since the agent started.'),
    counter('database_stats', 'tup_deleted', 'dbm_pg_tuples_deleted_total', 'Rows deleted (pg_stat_database.tup_deleted), since the agent started.'),
    counter('database_stats', 'conflicts', 'dbm_pg_recovery_conflicts_total', 'Queries cancelled by recovery conflicts on a standby (pg_stat_database.conflicts), since the agent started.'),
    counter('database_stats', 'temp_files', 'dbm_pg_temp_files_total', 'Temporary files written by queries (pg_stat_database.temp_files), since the agent started.'),
    counter('database_stats', 'temp_bytes', 'dbm_pg_temp_bytes_total', 'Bytes of temporary files written by queries (pg_stat_database.temp_bytes), since the agent started.'),
    counter('database_stats', 'deadlocks', 'dbm_pg_deadlocks_total', 'Deadlocks detected (pg_stat_database.deadlocks), since the agent started.'),
    gauge('database_stats', 'numbackends', 'dbm_pg_backends', 'Sessions connected to the database (pg_stat_database.numbackends).'),
    gauge('database_stats', 'database_size_bytes', 'dbm_pg_database_size_bytes', 'Size of the database on disk (pg_database_size).'),
    gauge('database_stats', 'max_connections', 'dbm_pg_max_connections', 'The max_connections setting.'),
    gauge('database_stats', 'xid_age', 'dbm_pg_xid_age', 'Transaction IDs since the database was last frozen (age(datfrozenxid)); wraparound at about 2 billion.'),
    gauge('database_stats', 'mxid_age', 'dbm_pg_mxid_age', 'Multixact IDs since the database was last frozen (mxid_age(datminmxid)).'),
    gauge('database_stats', 'oldest_xact_age_s', 'dbm_pg_oldest_transaction_age_seconds', 'Age of the oldest open transaction.'),
    gauge('database_stats', 'prepared_xacts', 'dbm_pg_prepared_transactions', 'Prepared transactions waiting for COMMIT PREPARED or ROLLBACK PREPARED.'),
    counter('wal_stats', 'wal_records', 'dbm_pg_wal_records_total', 'WAL records written (pg_stat_wal), since the agent started.'),
    counter('wal_stats', 'wal_fpi', 'dbm_pg_wal_full_page_images_total', 'Full page images written to WAL (pg_stat_wal), since the agent started.'),
    counter('wal_stats', 'wal_bytes', 'dbm_pg_wal_bytes_total', 'Bytes of WAL written (pg_stat_wal), since the agent started.'),
    counter('bgwriter', 'checkpoints_timed', 'dbm_pg_checkpoints_timed_total', 'Checkpoints started by checkpoint_timeout, since the agent started.'),
    counter('bgwriter', 'checkpoints_req', 'dbm_pg_checkpoints_requested_total', 'Checkpoints requested (max_wal_size reached, CHECKPOINT), since the agent started.'),
    counter('bgwriter', 'checkpoint_write_time_ms', 'dbm_pg_checkpoint_write_seconds_total', 'Time checkpoints spent writing buffers, since the agent started.', 0.001),
    counter('bgwriter', 'buffers_checkpoint', 'dbm_pg_checkpoint_buffers_written_total', 'Buffers written by checkpoints, since the agent started.'),
  ],
  clickhouse: [
    gauge('server_metrics', 'uptime_s', 'dbm_clickhouse_uptime_seconds', 'Time since the ClickHouse server started.'),
    gauge('server_metrics', 'memory_resident_bytes', 'dbm_clickhouse_memory_resident_bytes', 'Resident memory of the ClickHouse server.'),
    gauge('server_metrics', 'memory_tracked_bytes', 'dbm_clickhouse_memory_tracked_bytes', 'Memory tracked by ClickHouse (MemoryTracking).'),
    gauge('server_metrics', 'tcp_connections', 'dbm_clickhouse_tcp_connections', 'Open native-protocol connections.'),
    gauge('server_metrics', 'http_connections', 'dbm_clickhouse_http_connections', 'Open HTTP connections.'),
    gauge('server_metrics', 'replicas_readonly', 'dbm_clickhouse_readonly_replicas', 'Replicated tables in read-only mode.'),
    gauge('server_metrics', 'max_replica_delay_s', 'dbm_clickhouse_max_replica_delay_seconds', 'The largest replication delay of a Replicated table.'),
    gauge('server_metrics', 'detached_parts', 'dbm_clickhouse_detached_parts', 'Detached parts on disk that no table uses.'),
    counter('server_metrics', 'queries_total', 'dbm_clickhouse_queries_total', 'Queries started (system.events Query), since the agent started.'),
    counter('server_metrics', 'queries_failed', 'dbm_clickhouse_queries_failed_total', 'Queries that failed (system.events FailedQuery), since the agent started.'),
    counter('server_metrics', 'delayed_inserts', 'dbm_clickhouse_delayed_inserts_total', 'INSERTs slowed down for too many parts, since the agent started.'),
    counter('server_metrics', 'rejected_inserts', 'dbm_clickhouse_rejected_inserts_total', 'INSERTs refused for too many parts, since the agent started.'),
  ],
}

type Family = { figure: Figure; labels(database: string): CounterChild | GaugeChild }

/** The exporter's families in `registry`, registered per engine on first use. */
export class Exporter {
  private readonly families = new Map<EngineName, Family[]>()

  constructor(private readonly registry: Registry) {}

  private familiesOf(engine: EngineName): Family[] {
    let families = this.families.get(engine)
    if (!families) {
      families = EXPORTED_FIGURES[engine].map((figure) => {
        const options = { name: figure.name, help: figure.help, labelNames: ['database'] as const }
        const metric = figure.type === 'counter' ? this.registry.counter(options) : this.registry.gauge(options)
        return { figure, labels: (database: string) => metric.labels(database) }
      })
      this.families.set(engine, families)
    }
    return families
  }

  /** Records the figures of each batch of `database`. */
  recorder(database: string, engine: EngineName): (batch: IngestBatch) => void {
    const series = this.familiesOf(engine).map(({ figure, labels }) => ({ figure, child: labels(database) }))
    return (batch) => {
      for (const { figure, child } of series) {
        const value = (batch[figure.section] as Record<string, number> | undefined)?.[figure.key]
        if (typeof value !== 'number' || !Number.isFinite(value)) continue
        const scaled = figure.scale === undefined ? value : value * figure.scale
        if (figure.type === 'gauge') (child as GaugeChild).set(scaled)
        else if (scaled > 0) (child as CounterChild).inc(scaled)
      }
    }
  }
}
