// Checkpoints requested rather than timed, over the last hours (pg_stat_bgwriter, or
// pg_stat_checkpointer on PostgreSQL 17: num_requested / num_timed), and the server log's own word on it
// when log_events are collected: each "checkpoint starting: wal" against "time", and "checkpoints are
// occurring too frequently (N seconds apart)". A checkpoint is requested when the WAL since the last one
// reaches max_wal_size (or by a CHECKPOINT command); frequent requested checkpoints mean more full-page
// writes and I/O spikes. The PostgreSQL manual (WAL configuration) and the tuning guides built on it
// (pganalyze, EDB, Crunchy) say most checkpoints should be timed: a requested share above 10-20 % says
// max_wal_size is too small for the write rate. One finding whichever source shows it. The max_wal_size
// to set is computed from the WAL measured per checkpoint_timeout (pg_stat_wal's wal_bytes, else the
// checkpoints' logged distances): a checkpoint is requested once WAL since the last reaches about
// max_wal_size / (1 + checkpoint_completion_target), so that product, with a quarter of headroom.
import { type Rule, bytes, duration, pct, severityAbove } from '../../types.ts'
import { logEntries, numberField, settingBytes, settingMs, settings, sizeSetting, textField } from './log-evidence.ts'

const defaults = {
  warning_share: 0.2,
  critical_share: 0.5,
  /** Fewer checkpoints than this in the window say nothing. */
  min_checkpoints: 4,
  window_s: 6 * 3600,
  /** "checkpoints are occurring too frequently" entries in the window that make a warning by themselves. */
  warning_too_frequent: 1,
  /** Headroom over the WAL written per checkpoint_timeout × (1 + checkpoint_completion_target). */
  headroom: 1.25,
}

const MB = 1024 * 1024

export const requestedCheckpoints: Rule<typeof defaults> = {
  id: 'pg_requested_checkpoints',
  engine: 'postgres',
  category: 'configuration',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(requestedCheckpoints)
    const windowMs = t.window_s * 1000
    const totals = await ctx.totals('bgwriter', windowMs)
    let timed = 0
    let requested = 0
    let writeMs = 0
    for (const values of totals.values()) {
      timed += values.checkpoints_timed ?? 0
      requested += values.checkpoints_req ?? 0
      writeMs += values.checkpoint_write_time_ms ?? 0
    }
    // The log: checkpoints with their reason and distance, and the server's own warning.
    const [logged, tooFrequent] = await Promise.all([logEntries(ctx, ['checkpoint'], windowMs), logEntries(ctx, ['checkpoints_too_frequent'], windowMs)])
    const checkpoints = logged.filter((e) => e.fields.restartpoint !== true)
    const reasons = checkpoints.map((e) => textField(e, 'reason') ?? '')
    const walStarted = reasons.filter((r) => /\bwal\b/.test(r)).length
    const timeStarted = reasons.filter((r) => /\btime\b/.test(r)).length
    const distances = checkpoints.map((e) => numberField(e, 'distance_bytes')).filter((d): d is number => d !== null)
    const meanDistance = distances.length > 0 ? distances.reduce((a, b) => a + b, 0) / distances.length : null
    const apart = tooFrequent.map((e) => numberField(e, 'seconds_apart')).filter((s): s is number => s !== null)
    const tooFrequentCount = tooFrequent.reduce((n, e) => n + e.count, 0)

    const all = timed + requested
    const statsShare = all >= t.min_checkpoints ? requested / all : null
    const logShare = walStarted + timeStarted >= t.min_checkpoints ? walStarted / (walStarted + timeStarted) : null
    const share = statsShare ?? logShare
    const severity =
      (share !== null ? severityAbove(share, t.warning_share, t.critical_share) : undefined) ?? (tooFrequentCount >= t.warning_too_frequent ? 'warning' : undefined)
    if (!severity) return []

    // WAL per checkpoint_timeout: pg_stat_wal's bytes over the window, else the logged distances over their span.
    const s = await settings(ctx)
    const timeoutMs = settingMs(s?.checkpoint_timeout, 1000) ?? 300_000
    const target = Number(s?.checkpoint_completion_target ?? '0.9')
    const completion = Number.isFinite(target) && target >= 0 && target <= 1 ? target : 0.9
    const current = settingBytes(s?.max_wal_size, MB)
    const walBytes = (await ctx.sums('wal', windowMs)).wal_bytes ?? 0
    let walPerTimeout: number | null = null
    if (walBytes > 0) walPerTimeout = (walBytes / windowMs) * timeoutMs
    else if (checkpoints.length >= 2 && distances.length >= 2) {
      const span = checkpoints[0]!.ts - checkpoints[checkpoints.length - 1]!.ts
      // The distances after the oldest checkpoint cover the span between the oldest and the newest.
      if (span > 0) walPerTimeout = ((distances.reduce((a, b) => a + b, 0) - distances[distances.length - 1]!) / span) * timeoutMs
    }
    const wanted = walPerTimeout !== null ? walPerTimeout * (1 + completion) * t.headroom : null
    const toSet = wanted !== null && (current === undefined || wanted > current) ? sizeSetting(wanted) : null

    const evidence: string[] = []
    if (statsShare !== null) evidence.push(`${requested} of ${all} checkpoints (${pct(statsShare)}) were requested (WAL reached max_wal_size, or a CHECKPOINT command) and ${timed} timed (checkpoint_timeout)`)
    if (walStarted + timeStarted > 0) evidence.push(`the server log shows ${walStarted} checkpoints started for WAL ("checkpoint starting: wal") and ${timeStarted} for time`)
    if (tooFrequentCount > 0) evidence.push(`it warned ${tooFrequentCount} time${tooFrequentCount === 1 ? '' : 's'} that checkpoints occur too frequently${apart.length > 0 ? ` (${Math.min(...apart)} seconds apart at the closest)` : ''}`)
    if (meanDistance !== null) evidence.push(`the logged checkpoints were ${bytes(meanDistance)} of WAL apart on average`)
    const sizing =
      walPerTimeout === null
        ? ''
        : ` About ${bytes(walPerTimeout)} of WAL is written per checkpoint_timeout (${duration(timeoutMs)}); max_wal_size is ${current === undefined ? 'not reported' : bytes(current)}` +
          (toSet ? `, and ${toSet} would let checkpoints come from the timeout.` : ', which already holds that: the requested checkpoints come from elsewhere (CHECKPOINT commands, base backups).')
    return [
      {
        severity,
        title: 'Most checkpoints are requested, not timed',
        detail: `Over the last ${duration(windowMs)}, ${evidence.join('; ')}; checkpoints spent ${duration(writeMs)} writing buffers. Healthy servers keep requested checkpoints under ${pct(t.warning_share, 0)}.${sizing}`,
        recommendation:
          'Raise max_wal_size so that checkpoints are triggered by checkpoint_timeout instead of WAL volume (size it to the WAL written in one checkpoint_timeout, with headroom); check first that nothing runs CHECKPOINT on a schedule. The server log says why each checkpoint started when log_checkpoints is on ("checkpoint starting: wal" is the one to avoid).',
        how_to_investigate: [
          'SELECT num_timed, num_requested, write_time, sync_time, buffers_written, stats_reset FROM pg_stat_checkpointer;   -- PostgreSQL 17+',
          'SELECT checkpoints_timed, checkpoints_req, checkpoint_write_time, buffers_checkpoint, stats_reset FROM pg_stat_bgwriter;   -- before 17',
          "SELECT name, setting, unit FROM pg_settings WHERE name IN ('max_wal_size', 'min_wal_size', 'checkpoint_timeout', 'checkpoint_completion_target', 'log_checkpoints');",
          'SELECT pg_size_pretty(wal_bytes) AS wal_written, stats_reset FROM pg_stat_wal;   -- WAL per checkpoint_timeout sizes max_wal_size',
        ],
        how_to_fix: [
          toSet
            ? `ALTER SYSTEM SET max_wal_size = '${toSet}'; SELECT pg_reload_conf();   -- the WAL of one checkpoint_timeout × (1 + checkpoint_completion_target), with headroom`
            : "ALTER SYSTEM SET max_wal_size = '8GB'; SELECT pg_reload_conf();   -- e.g. double it until requested checkpoints become rare",
          'ALTER SYSTEM SET log_checkpoints = on; SELECT pg_reload_conf();',
        ],
        metrics: {
          checkpoints_timed: timed,
          checkpoints_req: requested,
          requested_share: share === null ? null : Number(share.toFixed(4)),
          checkpoint_write_time_ms: writeMs,
          log_wal_checkpoints: walStarted,
          log_time_checkpoints: timeStarted,
          too_frequent_warnings: tooFrequentCount,
          mean_distance_bytes: meanDistance === null ? null : Math.round(meanDistance),
          wal_per_timeout_bytes: walPerTimeout === null ? null : Math.round(walPerTimeout),
          max_wal_size_to_set: toSet,
        },
      },
    ]
  },
}
