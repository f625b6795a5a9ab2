// Replicated tables' error counters: parts whose check failed (ReplicatedPartChecksFailed), parts that
// could not be fetched from another replica (ReplicatedPartFailedFetches), and parts that no replica has
// any more (ReplicatedDataLoss: rows lost for good). Altinity alerts on any of each in a minute; dbm
// warns from one in ten minutes, critical from 100 failed checks or fetches and from one lost part.
// The queue and delay of replicated tables are ch_replication's. system.replication_queue and
// system.part_log name the tables.
import { signalRule } from './signals.ts'

export const replicationErrors = signalRule({
  id: 'ch_replication_errors',
  summary: "Replicated tables' error counters: failed part checks, failed fetches and parts no replica has any more.",
  collectors: ['server_metrics', 'log_events'],
  category: 'replication',
  thresholds: {
    window_s: 600,
    checks_warning: 1,
    checks_critical: 100,
    fetches_warning: 1,
    fetches_critical: 100,
    data_loss_warning: 1,
    data_loss_critical: 1,
  },
  signals: [
    {
      key: 'replicated_data_loss',
      kind: 'counter',
      name: 'ReplicatedDataLoss',
      what: 'parts no replica has any more',
      warning: 'data_loss_warning',
      critical: 'data_loss_critical',
    },
    {
      key: 'replicated_part_checks_failed',
      kind: 'counter',
      name: 'ReplicatedPartChecksFailed',
      what: 'failed part checks',
      warning: 'checks_warning',
      critical: 'checks_critical',
    },
    {
      key: 'replicated_part_failed_fetches',
      kind: 'counter',
      name: 'ReplicatedPartFailedFetches',
      what: 'failed part fetches from other replicas',
      warning: 'fetches_warning',
      critical: 'fetches_critical',
    },
  ],
  title: (hits) =>
    hits.some((h) => h.signal.key === 'replicated_data_loss')
      ? 'Replicated parts were lost'
      : 'Replicated parts fail their checks or fetches',
  explain:
    'A failed check means a local part differs from what Keeper records (a broken part: it is detached and fetched again); a failed fetch, that another replica did not deliver a part (network, disk or the replica itself); ' +
    'a lost part, that the part was written on one replica only and that replica lost it before the others fetched it: those rows are gone unless inserted again.',
  recommendation:
    'Read the failing entries of system.replication_queue (last_exception names the table and the part), check the network and disks between the replicas, and for lost parts find which INSERTs they held (system.part_log) and send them again; insert with insert_quorum to avoid it.',
  how_to_investigate: [
    "SELECT database, table, type, new_part_name, num_tries, last_exception, last_attempt_time FROM system.replication_queue WHERE last_exception != '' ORDER BY num_tries DESC LIMIT 20;",
    'SELECT event_time, database, table, part_name, event_type, error, exception FROM system.part_log WHERE error != 0 AND event_time > now() - INTERVAL 1 HOUR ORDER BY event_time DESC LIMIT 20;',
    "SELECT database, table, name, reason, modification_time FROM system.detached_parts WHERE reason IN ('broken', 'unexpected', 'covered-by-broken') ORDER BY modification_time DESC LIMIT 20;",
  ],
  how_to_fix: [
    "SYSTEM RESTART REPLICA <database>.<table>;   -- re-reads the table's state from Keeper once replicas and network are back",
  ],
  errors: [
    'CHECKSUM_DOESNT_MATCH',
    'NO_REPLICA_HAS_PART',
    'ALL_REPLICAS_LOST',
    'CANNOT_READ_ALL_DATA',
    'NETWORK_ERROR',
    'SOCKET_TIMEOUT',
    'CORRUPTED_DATA',
  ],
})
