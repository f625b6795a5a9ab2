// Distributed tables that cannot reach their shards: refused or failed connection tries
// (DistributedConnectionFailTry; a query or send then tries another replica) and connections that failed
// to every replica of a shard (DistributedConnectionFailAtAll: the query or the send failed), and files
// of asynchronous Distributed INSERTs waiting on disk to be sent (DistributedFilesToInsert). Altinity
// alerts on any failure in a minute and on more than 50 files; dbm warns from one failed try in ten
// minutes, calls a failure at all critical, and files waiting a warning from 50 and critical from 1,000.
// system.distribution_queue names the Distributed table and its last exception.
import { signalRule } from './signals.ts'

export const distributed = signalRule({
  id: 'ch_distributed',
  summary: 'Distributed tables that cannot reach their shards, or whose asynchronous inserts pile up as files.',
  collectors: ['server_metrics', 'log_events'],
  category: 'availability',
  thresholds: {
    window_s: 600,
    fail_try_warning: 1,
    fail_try_critical: 1000,
    fail_at_all_warning: 1,
    fail_at_all_critical: 1,
    files_warning: 50,
    files_critical: 1000,
  },
  signals: [
    {
      key: 'distributed_connection_fail_at_all',
      kind: 'counter',
      name: 'DistributedConnectionFailAtAll',
      what: 'connections that failed to every replica of a shard',
      warning: 'fail_at_all_warning',
      critical: 'fail_at_all_critical',
    },
    {
      key: 'distributed_connection_fail_try',
      kind: 'counter',
      name: 'DistributedConnectionFailTry',
      what: 'failed connection tries to a shard',
      warning: 'fail_try_warning',
      critical: 'fail_try_critical',
    },
    {
      key: 'distributed_files_to_insert',
      kind: 'gauge',
      name: 'DistributedFilesToInsert',
      what: 'files of Distributed INSERTs waiting to be sent',
      warning: 'files_warning',
      critical: 'files_critical',
    },
  ],
  title: (hits) =>
    hits.some((h) => h.signal.key === 'distributed_connection_fail_at_all')
      ? 'Distributed queries could not reach a shard'
      : hits.some((h) => h.signal.key === 'distributed_connection_fail_try')
        ? 'Connections to shards fail'
        : 'Distributed INSERTs wait to be sent',
  explain:
    'A Distributed table (or remote(), cluster()) could not connect to a host of remote_servers: when every replica of a shard fails, the SELECT fails or, with skip_unavailable_shards, answers without that shard; ' +
    'asynchronous INSERTs into a Distributed table stay on this server as files until the shard takes them, and pile up while it cannot.',
  recommendation:
    'Find the host from the errors or system.distribution_queue (it names the Distributed table and the last exception), then check that it runs, that its port (9000, or 9440 with secure) is reachable from here, and the user and password in remote_servers.',
  how_to_investigate: [
    'SELECT database, table, data_path, is_blocked, error_count, data_files, data_compressed_bytes, last_exception, last_exception_time FROM system.distribution_queue WHERE data_files > 0 OR error_count > 0 ORDER BY data_files DESC LIMIT 20;',
    'SELECT cluster, shard_num, replica_num, host_name, port, errors_count, slowdowns_count, estimated_recovery_time FROM system.clusters WHERE errors_count > 0;',
    "SELECT name, value, last_error_time, last_error_message FROM system.errors WHERE name IN ('ALL_CONNECTION_TRIES_FAILED', 'NETWORK_ERROR', 'SOCKET_TIMEOUT', 'NO_REMOTE_SHARD_AVAILABLE', 'DISTRIBUTED_BROKEN_BATCH_FILES') ORDER BY last_error_time DESC;",
  ],
  how_to_fix: [
    'SYSTEM FLUSH DISTRIBUTED <database>.<distributed table>;   -- sends the waiting files once the shard is back (fails while it is not)',
    'SYSTEM START DISTRIBUTED SENDS <database>.<distributed table>;   -- in case sends were stopped',
  ],
  errors: [
    'ALL_CONNECTION_TRIES_FAILED',
    'NETWORK_ERROR',
    'SOCKET_TIMEOUT',
    'NO_REMOTE_SHARD_AVAILABLE',
    'DISTRIBUTED_BROKEN_BATCH_FILES',
  ],
})
