// ClickHouse's error signals as server_metrics reads them: which system.events counters (sent as deltas)
// and system.metrics gauges stand for which wire key, under every name the engine has used. Checked on
// ClickHouse 26.7 (system.events with system_events_show_zero_values = 1, system.metrics): all present
// except NetworkErrors, the name of DNSError before ClickHouse 20.3 (PR 9632), which is read as well and
// added to dns_errors. QueryPreempted is both an event and a metric; the metric (queries paused now by
// the 'priority' setting) is the one Altinity's rule reads. The doctor's rules over these keys live in
// server/doctor/rules/clickhouse/ (distributed, replication-errors, keeper, buffer-flush, file-io,
// network, slow-reads).
import type { ServerCounterKey, ServerGaugeKey } from '../../../shared/metrics.ts'

/** system.events counters, by event name (several names may feed one key: their deltas add up). */
export const SIGNAL_EVENTS: Record<string, ServerCounterKey> = {
  DistributedConnectionFailTry: 'distributed_connection_fail_try',
  DistributedConnectionFailAtAll: 'distributed_connection_fail_at_all',
  StorageBufferErrorOnFlush: 'buffer_flush_errors',
  ReplicatedPartChecksFailed: 'replicated_part_checks_failed',
  ReplicatedPartFailedFetches: 'replicated_part_failed_fetches',
  ReplicatedDataLoss: 'replicated_data_loss',
  ZooKeeperHardwareExceptions: 'zookeeper_hardware_exceptions',
  ReadBufferFromFileDescriptorReadFailed: 'file_read_failures',
  WriteBufferFromFileDescriptorWriteFailed: 'file_write_failures',
  DNSError: 'dns_errors',
  NetworkErrors: 'dns_errors',
  SlowRead: 'slow_reads',
  InsertQuery: 'insert_queries',
  InsertedRows: 'inserted_rows',
}

/** system.metrics gauges, by metric name. */
export const SIGNAL_METRICS: Record<string, ServerGaugeKey> = {
  ZooKeeperSession: 'zookeeper_sessions',
  DistributedFilesToInsert: 'distributed_files_to_insert',
  QueryPreempted: 'queries_preempted',
}

/**
 * The counter deltas of one cycle by wire key: each event's delta (reset-aware, via `delta`) added to
 * its key's. Events the server lists under none of a key's names count 0 (system.events shows only
 * counters that moved since the start).
 */
export function signalDeltas(
  previous: Record<string, number>,
  current: Record<string, number>,
  delta: (previous: number | undefined, current: number) => number | null,
): Partial<Record<ServerCounterKey, number>> {
  const out: Partial<Record<ServerCounterKey, number>> = {}
  for (const [event, key] of Object.entries(SIGNAL_EVENTS)) {
    const d = delta(previous[event], current[event] ?? 0) ?? 0
    out[key] = (out[key] ?? 0) + d
  }
  return out
}
