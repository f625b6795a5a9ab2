// Replicated tables (system.replicas, through server_metrics; sent only when the server has some):
// read-only replicas, the longest replication queue of one table, and the largest absolute_delay.
// A read-only replica (lost or no Keeper session) refuses inserts: critical, as in the Grafana
// ClickHouse mixin (ClickHouseReplicasInReadOnly) and Altinity's ClickHouseReadonlyReplica. A queue
// over 99 entries is the mixin's ClickHouseReplicationQueueBackingUp (warning); a delay over 300 s is
// Altinity's ClickHouseReplicasMaxAbsoluteDelay (warning here, critical from an hour, when Distributed
// queries may already skip the replica per max_replica_delay_for_distributed_queries, 300 s).
import { type FindingDraft, type Rule, duration, severityAbove } from '../../types.ts'
import { count } from './common.ts'

const defaults = {
  readonly_critical: 1,
  queue_warning: 100,
  queue_critical: 1000,
  delay_warning_s: 300,
  delay_critical_s: 3600,
}

const INVESTIGATE = [
  'SELECT database, table, is_readonly, is_session_expired, queue_size, inserts_in_queue, merges_in_queue, absolute_delay, last_queue_update_exception, zookeeper_exception FROM system.replicas WHERE is_readonly OR queue_size > 0 OR absolute_delay > 0 ORDER BY absolute_delay DESC;',
  'SELECT database, table, type, create_time, num_tries, last_exception, postpone_reason FROM system.replication_queue ORDER BY create_time LIMIT 20;',
  "SELECT * FROM system.zookeeper_connection;   -- the Keeper session (older versions: SELECT * FROM system.zookeeper WHERE path = '/')",
]

export const replication: Rule<typeof defaults> = {
  id: 'ch_replication',
  summary: 'Replicated tables with a read-only replica, a long replication queue or a large replication delay.',
  collectors: ['server_metrics'],
  engine: 'clickhouse',
  category: 'replication',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(replication)
    const m = (await ctx.serverMetrics())?.payload
    if (!m) return []
    const findings: FindingDraft[] = []
    const readonly = m.replicas_readonly ?? 0
    if (readonly >= t.readonly_critical) {
      findings.push({
        severity: 'critical',
        object: 'readonly',
        title: `${readonly} read-only replica${readonly === 1 ? '' : 's'}`,
        detail: `${count(readonly)} Replicated table${readonly === 1 ? ' is' : 's are'} read-only on this server: they refuse inserts and do not replicate until the Keeper (ZooKeeper) session is back.`,
        recommendation:
          'A replica turns read-only when it loses its Keeper session or starts without one, or when its metadata in Keeper is missing. Check the Keeper ensemble and the network to it first; a replica whose metadata was lost needs SYSTEM RESTORE REPLICA.',
        how_to_investigate: INVESTIGATE,
        how_to_fix: [
          "SYSTEM RESTART REPLICA <database>.<table>;   -- re-initialises the table's Keeper session once Keeper is reachable",
          'SYSTEM RESTORE REPLICA <database>.<table>;   -- only when its metadata in Keeper is lost',
        ],
        metrics: { replicas_readonly: readonly },
      })
    }
    const queue = m.replication_queue_size ?? 0
    const queueSeverity = severityAbove(queue, t.queue_warning, t.queue_critical)
    if (queueSeverity) {
      findings.push({
        severity: queueSeverity,
        object: 'queue',
        title: `Replication queue of ${count(queue)} entries`,
        detail: `A Replicated table on this server has ${count(queue)} entries in its replication queue (fetches, merges and mutations to replay; a warning from ${count(t.queue_warning)}, critical from ${count(t.queue_critical)}).`,
        recommendation:
          'The replica does not keep up: entries fail and are retried (see last_exception), fetches from other replicas are slow, or merges wait for free disk or pool slots.',
        how_to_investigate: INVESTIGATE,
        how_to_fix: [
          'SYSTEM SYNC REPLICA <database>.<table>;   -- waits until the queue is replayed (with a timeout), after the cause is fixed',
        ],
        metrics: { replication_queue_size: queue },
      })
    }
    const delay = m.max_replica_delay_s ?? 0
    const delaySeverity = severityAbove(delay, t.delay_warning_s, t.delay_critical_s)
    if (delaySeverity) {
      findings.push({
        severity: delaySeverity,
        object: 'delay',
        title: `A replica is ${duration(delay * 1000)} behind`,
        detail: `The most delayed Replicated table on this server is ${duration(delay * 1000)} behind its freshest replica (absolute_delay; a warning from ${duration(t.delay_warning_s * 1000)}, critical from ${duration(t.delay_critical_s * 1000)}). Distributed queries may skip it or read stale data.`,
        recommendation:
          'Find the table and what its queue is waiting for: network to the other replicas, free disk space, Keeper latency, or a failing entry retried over and over.',
        how_to_investigate: INVESTIGATE,
        how_to_fix: ['SYSTEM SYNC REPLICA <database>.<table>;   -- after the cause is fixed'],
        metrics: { max_replica_delay_s: delay },
      })
    }
    return findings
  },
}
