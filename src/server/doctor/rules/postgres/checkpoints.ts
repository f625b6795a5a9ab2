// Checkpoints requested rather than timed, over the last hours (pg_stat_bgwriter, or
// pg_stat_checkpointer on PostgreSQL 17: num_requested / num_timed). A checkpoint is requested when the
// WAL since the last one reaches max_wal_size (or by a CHECKPOINT command); frequent requested
// checkpoints mean more full-page writes and I/O spikes. The PostgreSQL manual (WAL configuration)
// and the tuning guides built on it (pganalyze, EDB, Crunchy) say most checkpoints should be timed:
// a requested share above 10-20 % says max_wal_size is too small for the write rate.
import { type Rule, duration, pct, severityAbove } from '../../types.ts'

const defaults = {
  warning_share: 0.2,
  critical_share: 0.5,
  /** Fewer checkpoints than this in the window say nothing. */
  min_checkpoints: 4,
  window_s: 6 * 3600,
}

export const requestedCheckpoints: Rule<typeof defaults> = {
  id: 'pg_requested_checkpoints',
  engine: 'postgres',
  category: 'configuration',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(requestedCheckpoints)
    const totals = await ctx.totals('bgwriter', t.window_s * 1000)
    let timed = 0
    let requested = 0
    let writeMs = 0
    for (const values of totals.values()) {
      timed += values.checkpoints_timed ?? 0
      requested += values.checkpoints_req ?? 0
      writeMs += values.checkpoint_write_time_ms ?? 0
    }
    const all = timed + requested
    if (all < t.min_checkpoints) return []
    const share = requested / all
    const severity = severityAbove(share, t.warning_share, t.critical_share)
    if (!severity) return []
    return [
      {
        severity,
        title: 'Most checkpoints are requested, not timed',
        detail: `Over the last ${duration(t.window_s * 1000)}, ${requested} of ${all} checkpoints (${pct(share)}) were requested (WAL reached max_wal_size, or a CHECKPOINT command) and ${timed} timed (checkpoint_timeout); checkpoints spent ${duration(writeMs)} writing buffers. Healthy servers keep requested checkpoints under ${pct(t.warning_share, 0)}.`,
        recommendation:
          'Raise max_wal_size so that checkpoints are triggered by checkpoint_timeout instead of WAL volume (size it to the WAL written in one checkpoint_timeout, with headroom); check first that nothing runs CHECKPOINT on a schedule. The server log says why each checkpoint started when log_checkpoints is on ("checkpoint starting: wal" is the one to avoid).',
        how_to_investigate: [
          'SELECT num_timed, num_requested, write_time, sync_time, buffers_written, stats_reset FROM pg_stat_checkpointer;   -- PostgreSQL 17+',
          'SELECT checkpoints_timed, checkpoints_req, checkpoint_write_time, buffers_checkpoint, stats_reset FROM pg_stat_bgwriter;   -- before 17',
          "SELECT name, setting, unit FROM pg_settings WHERE name IN ('max_wal_size', 'min_wal_size', 'checkpoint_timeout', 'checkpoint_completion_target', 'log_checkpoints');",
          'SELECT pg_size_pretty(wal_bytes) AS wal_written, stats_reset FROM pg_stat_wal;   -- WAL per checkpoint_timeout sizes max_wal_size',
        ],
        how_to_fix: [
          "ALTER SYSTEM SET max_wal_size = '8GB'; SELECT pg_reload_conf();   -- e.g. double it until requested checkpoints become rare",
          'ALTER SYSTEM SET log_checkpoints = on; SELECT pg_reload_conf();',
        ],
        metrics: { checkpoints_timed: timed, checkpoints_req: requested, requested_share: Number(share.toFixed(4)), checkpoint_write_time_ms: writeMs },
      },
    ]
  },
}
