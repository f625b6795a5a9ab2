// Replication falling behind. On a replica: the WAL received but not replayed yet (bytes) and the time
// since the last replayed transaction while some WAL waits (seconds). On a primary: each streaming
// replica's replay lag (pg_stat_replication.replay_lag) and the WAL between the primary's position and
// the replica's replay_lsn. Thresholds from common alerting practice for streaming replication: five
// minutes is the usual critical alert (postgres_exporter-based runbooks alert at 300 s); 30 s or
// 100 MB already means reads from the replica are visibly stale.
import { type FindingDraft, type Rule, type Severity, bytes, duration, severityAbove } from '../../types.ts'

const MB = 1024 ** 2

const defaults = {
  warning_seconds: 30,
  critical_seconds: 300,
  warning_bytes: 100 * MB,
  critical_bytes: 1024 * MB,
  /** Replicas of a primary named one finding each; the rest are counted in one more finding. */
  max_replicas: 10,
}

const worst = (...s: (Severity | undefined)[]): Severity | undefined =>
  s.includes('critical') ? 'critical' : s.includes('warning') ? 'warning' : undefined

const REPLICA_INVESTIGATE = [
  'SELECT pg_get_wal_replay_pause_state() AS replay, pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) AS replay_lag_bytes, now() - pg_last_xact_replay_timestamp() AS since_last_replay;   -- on the replica',
  'SELECT status, sender_host, last_msg_receipt_time, latest_end_lsn FROM pg_stat_wal_receiver;   -- on the replica',
  "SELECT pid, now() - xact_start AS xact_age, wait_event_type, wait_event, left(query, 100) AS query FROM pg_stat_activity WHERE state <> 'idle' AND backend_type = 'client backend' ORDER BY xact_start LIMIT 10;   -- on the replica: long queries hold replay back",
  "SELECT name, setting FROM pg_settings WHERE name IN ('hot_standby_feedback', 'max_standby_streaming_delay', 'recovery_min_apply_delay');   -- on the replica",
]

const REPLICA_FIX = [
  "SELECT pg_wal_replay_resume();   -- on the replica, when pg_get_wal_replay_pause_state() says 'paused'",
  'SELECT pg_cancel_backend(<pid>);   -- on the replica: a long query that replay waits for',
  "ALTER SYSTEM SET max_standby_streaming_delay = '30s'; SELECT pg_reload_conf();   -- on the replica: cancel conflicting queries sooner instead of delaying replay",
]

export const replicationLag: Rule<typeof defaults> = {
  id: 'pg_replication_lag',
  summary:
    'Replication falling behind, on a replica (WAL not replayed, time since the last replayed transaction) or per replica on a primary.',
  collectors: ['replication'],
  engine: 'postgres',
  category: 'replication',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(replicationLag)
    const status = (await ctx.replication())?.payload
    if (!status) return []
    const judge = (seconds: number, lagBytes: number) =>
      worst(
        severityAbove(seconds, t.warning_seconds, t.critical_seconds),
        severityAbove(lagBytes, t.warning_bytes, t.critical_bytes),
      )

    if (status.is_replica) {
      const seconds = status.replication_lag_seconds ?? 0
      const lagBytes = status.replication_lag_bytes ?? 0
      const severity = judge(seconds, lagBytes)
      if (!severity) return []
      return [
        {
          severity,
          title: 'This replica is behind its primary',
          detail: `The replica has ${bytes(lagBytes)} of WAL received from ${status.upstream_host ?? 'its primary'} but not replayed yet, and its last replayed transaction is ${duration(seconds * 1000)} old (a warning from ${duration(t.warning_seconds * 1000)} or ${bytes(t.warning_bytes)}, critical from ${duration(t.critical_seconds * 1000)} or ${bytes(t.critical_bytes)}).`,
          recommendation:
            "The WAL arrives but replay does not keep up: replay may be paused, waiting for long queries on this replica (max_standby_streaming_delay; with hot_standby_feedback on, long queries hold back cleanup on the primary instead), or the replica's disks may be slower than the primary's write rate.",
          how_to_investigate: REPLICA_INVESTIGATE,
          how_to_fix: REPLICA_FIX,
          objects: status.upstream_host ? [status.upstream_host] : [],
          metrics: { replication_lag_seconds: Number(seconds.toFixed(1)), replication_lag_bytes: lagBytes },
        },
      ]
    }

    const lagging: (FindingDraft & { rank: number })[] = []
    for (const r of status.replicas) {
      const lagBytes = r.lag_bytes ?? 0
      // Once caught up (no WAL left to replay), replay_lag keeps its last measured value for a while: not a lag.
      const seconds = lagBytes > 0 ? (r.replay_lag_ms ?? 0) / 1000 : 0
      const severity = judge(seconds, lagBytes)
      if (!severity) continue
      const name = [r.application_name, r.client_addr].filter(Boolean).join('@') || 'replica'
      const sending = r.write_lag_ms !== null && r.replay_lag_ms !== null && r.write_lag_ms >= 0.5 * r.replay_lag_ms
      lagging.push({
        rank: lagBytes + seconds * MB,
        severity,
        object: name,
        title: 'A replica is behind this primary',
        detail: `Replica ${name} (${r.state ?? 'unknown state'}, ${r.sync_state ?? 'async'}) has not replayed ${bytes(lagBytes)} of WAL; its replay lag is ${duration(seconds * 1000)} (write lag ${r.write_lag_ms === null ? 'unknown' : duration(r.write_lag_ms)}, flush lag ${r.flush_lag_ms === null ? 'unknown' : duration(r.flush_lag_ms)}).`,
        recommendation: sending
          ? "The WAL is slow to even reach the replica (write lag close to replay lag): check the network between the servers and the replica's disk; a burst of writes (bulk load, index build) can also outrun it."
          : 'The replica receives the WAL but replays it late: look for replay paused, long queries on the replica that replay waits for (max_standby_streaming_delay), or slow disks on the replica.',
        how_to_investigate: [
          'SELECT application_name, client_addr, state, sync_state, write_lag, flush_lag, replay_lag, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) AS replay_lag_bytes FROM pg_stat_replication;',
          ...REPLICA_INVESTIGATE,
        ],
        how_to_fix: REPLICA_FIX,
        metrics: {
          replay_lag_seconds: Number(seconds.toFixed(1)),
          lag_bytes: lagBytes,
          write_lag_ms: r.write_lag_ms,
          flush_lag_ms: r.flush_lag_ms,
        },
      })
    }
    lagging.sort((a, b) => b.rank - a.rank)
    const named = lagging.slice(0, t.max_replicas).map(({ rank: _rank, ...f }) => f)
    const rest = lagging.slice(t.max_replicas)
    if (rest.length > 0) {
      named.push({
        severity: worst(...rest.map((f) => f.severity))!,
        title: 'More replicas are behind this primary',
        detail: `${rest.length} more replicas are behind: ${rest.map((f) => f.object).join(', ')}.`,
        recommendation:
          'See the findings of the most lagging replicas; they usually share one cause (a burst of writes, the network).',
        how_to_investigate: lagging[0]!.how_to_investigate,
        how_to_fix: REPLICA_FIX,
        objects: rest.map((f) => f.object!),
        metrics: { replicas: rest.length },
      })
    }
    return named
  },
}
