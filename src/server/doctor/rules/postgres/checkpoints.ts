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
// When the log says why checkpoints started (log_checkpoints), the reasons judge, not the statistics
// (which count CHECKPOINT commands, backups and shutdowns as requested too): only "wal" calls for
// max_wal_size; forced ones (CHECKPOINT, backups) are named as such, as info, with no max_wal_size fix;
// shutdown and end-of-recovery checkpoints are no finding. Without the log, a max_wal_size that already
// holds the WAL measured per checkpoint_timeout says the same. No fix sets what is already set.
import { type Rule, type Severity, bytes, duration, pct, severityAbove } from '../../types.ts'
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

/** Why a checkpoint started, from its "checkpoint starting: <flags>" line; null when the log did not say. */
export type CheckpointCause = 'wal' | 'time' | 'manual' | 'shutdown' | 'recovery' | 'other'

/**
 * The flags PostgreSQL logs: "shutdown immediate", "end-of-recovery immediate wait", "wal" (max_wal_size
 * reached; "xlog" before 10), "time" (checkpoint_timeout), and "immediate force wait" / "force wait"
 * (a CHECKPOINT command, pg_backup_start(), a base backup, CREATE DATABASE). WAL wins over force when
 * both were asked for: the WAL pressure is there.
 */
export function causeOf(reason: string | null): CheckpointCause | null {
  if (reason === null || reason.trim() === '') return null
  if (/\bshutdown\b/.test(reason)) return 'shutdown'
  if (/\bend-of-recovery\b/.test(reason)) return 'recovery'
  if (/\b(wal|xlog)\b/.test(reason)) return 'wal'
  if (/\b(force|immediate)\b/.test(reason)) return 'manual'
  if (/\btime\b/.test(reason)) return 'time'
  return 'other'
}

interface Causes extends Record<CheckpointCause, number> {
  /** Checkpoints whose reason the log gave. */
  explained: number
  /** The forced ones' flags as logged, with their counts. */
  manualReasons: Map<string, number>
}

function checkpointCauses(reasons: (string | null)[]): Causes {
  const c: Causes = {
    wal: 0,
    time: 0,
    manual: 0,
    shutdown: 0,
    recovery: 0,
    other: 0,
    explained: 0,
    manualReasons: new Map(),
  }
  for (const r of reasons) {
    const cause = causeOf(r)
    if (cause === null) continue
    c[cause]++
    c.explained++
    if (cause === 'manual')
      c.manualReasons.set(r!.trim().slice(0, 60), (c.manualReasons.get(r!.trim().slice(0, 60)) ?? 0) + 1)
  }
  return c
}

const causeWords = (c: Causes) =>
  (
    [
      ['wal', 'for WAL ("wal": max_wal_size reached)'],
      ['time', 'for time'],
      ['manual', 'forced (CHECKPOINT, a backup)'],
      ['shutdown', 'at shutdown'],
      ['recovery', 'at the end of recovery'],
      ['other', 'for other reasons'],
    ] as const
  )
    .filter(([k]) => c[k] > 0)
    .map(([k, words]) => `${c[k]} ${words}`)
    .join(', ')

/** The typical interval of forced checkpoints when they come regularly (every gap within a quarter of the median), else null. */
function regularity(times: number[]): number | null {
  const sorted = [...times].sort((a, b) => a - b)
  const gaps = sorted.slice(1).map((t, i) => t - sorted[i]!)
  if (gaps.length < 2) return null
  const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)]!
  return median > 0 && gaps.every((g) => Math.abs(g - median) <= median / 4) ? median : null
}

export const requestedCheckpoints: Rule<typeof defaults> = {
  id: 'pg_requested_checkpoints',
  summary:
    "Checkpoints requested rather than timed (WAL-driven ones call for a larger max_wal_size, computed), with the log's own reasons when it has them.",
  collectors: ['bgwriter', 'wal_stats', 'log_events'],
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
    const [logged, tooFrequent] = await Promise.all([
      logEntries(ctx, ['checkpoint'], windowMs),
      logEntries(ctx, ['checkpoints_too_frequent'], windowMs),
    ])
    const checkpoints = logged.filter((e) => e.fields.restartpoint !== true)
    const causes = checkpointCauses(checkpoints.map((e) => textField(e, 'reason')))
    const walStarted = causes.wal
    const timeStarted = causes.time
    const distances = checkpoints.map((e) => numberField(e, 'distance_bytes')).filter((d): d is number => d !== null)
    const meanDistance = distances.length > 0 ? distances.reduce((a, b) => a + b, 0) / distances.length : null
    const apart = tooFrequent.map((e) => numberField(e, 'seconds_apart')).filter((s): s is number => s !== null)
    const tooFrequentCount = tooFrequent.reduce((n, e) => n + e.count, 0)

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
      if (span > 0)
        walPerTimeout = ((distances.reduce((a, b) => a + b, 0) - distances[distances.length - 1]!) / span) * timeoutMs
    }
    const wanted = walPerTimeout !== null ? walPerTimeout * (1 + completion) * t.headroom : null
    const holds = wanted !== null && current !== undefined && wanted <= current

    // Who asked. With the log's reasons, the reasons decide: only WAL-driven checkpoints call for
    // max_wal_size; CHECKPOINT commands and backups are named as such; shutdowns and end-of-recovery
    // checkpoints are no finding. Without them, the statistics' requested share, and the WAL measured
    // per checkpoint_timeout: a max_wal_size that already holds it says the requests come from elsewhere.
    const all = timed + requested
    const statsShare = all >= t.min_checkpoints ? requested / all : null
    const fromLog = causes.explained > 0
    const logShare = walStarted + timeStarted >= t.min_checkpoints ? walStarted / (walStarted + timeStarted) : null
    const tooFrequentSeverity = tooFrequentCount >= t.warning_too_frequent ? ('warning' as const) : undefined
    let cause: 'wal' | 'elsewhere' | null = null
    let severity: Severity | undefined
    if (fromLog) {
      severity =
        (logShare !== null ? severityAbove(logShare, t.warning_share, t.critical_share) : undefined) ??
        tooFrequentSeverity
      if (severity) cause = 'wal'
      else if (
        causes.manual >= t.min_checkpoints &&
        causes.manual / Math.max(1, causes.manual + causes.wal + causes.time) >= t.warning_share
      ) {
        cause = 'elsewhere'
        severity = 'info'
      }
    } else {
      severity =
        (statsShare !== null ? severityAbove(statsShare, t.warning_share, t.critical_share) : undefined) ??
        tooFrequentSeverity
      if (severity && holds && tooFrequentCount === 0) {
        cause = 'elsewhere'
        severity = 'info'
      } else if (severity) cause = 'wal'
    }
    if (!severity || !cause) return []
    const share = fromLog ? logShare : statsShare
    // WAL-driven: the size measured, or, when max_wal_size already holds the average (bursts), twice the current one.
    const toSet =
      cause !== 'wal'
        ? null
        : wanted !== null && !holds
          ? sizeSetting(wanted)
          : current !== undefined
            ? sizeSetting(2 * current)
            : null
    const logCheckpointsOn = /^(on|true|yes|1)$/i.test(s?.log_checkpoints ?? '')

    const evidence: string[] = []
    if (statsShare !== null)
      evidence.push(
        `${requested} of ${all} checkpoints (${pct(statsShare)}) were requested (WAL reached max_wal_size, or a CHECKPOINT command, a backup or a shutdown) and ${timed} timed (checkpoint_timeout)`,
      )
    if (fromLog)
      evidence.push(
        `the server log shows why ${causes.explained} checkpoint${causes.explained === 1 ? '' : 's'} started: ${causeWords(causes)}`,
      )
    if (tooFrequentCount > 0)
      evidence.push(
        `it warned ${tooFrequentCount} time${tooFrequentCount === 1 ? '' : 's'} that checkpoints occur too frequently${apart.length > 0 ? ` (${Math.min(...apart)} seconds apart at the closest)` : ''}`,
      )
    if (meanDistance !== null)
      evidence.push(`the logged checkpoints were ${bytes(meanDistance)} of WAL apart on average`)
    const sizing =
      walPerTimeout === null
        ? ''
        : ` About ${bytes(Math.round(walPerTimeout))} of WAL is written per checkpoint_timeout (${duration(timeoutMs)}); max_wal_size is ${current === undefined ? 'not reported' : bytes(current)}` +
          (!holds
            ? toSet
              ? `, and ${toSet} would let checkpoints come from the timeout.`
              : '.'
            : cause === 'wal'
              ? ', which holds that on average: the WAL comes in bursts that fill it between two timeouts.'
              : ', which already holds that: the requested checkpoints come from elsewhere.')
    const metricsOf = () => ({
      checkpoints_timed: timed,
      checkpoints_req: requested,
      requested_share: share === null ? null : Number(share.toFixed(4)),
      checkpoint_write_time_ms: writeMs,
      log_wal_checkpoints: walStarted,
      log_time_checkpoints: timeStarted,
      log_forced_checkpoints: causes.manual,
      log_shutdown_checkpoints: causes.shutdown,
      log_recovery_checkpoints: causes.recovery,
      too_frequent_warnings: tooFrequentCount,
      mean_distance_bytes: meanDistance === null ? null : Math.round(meanDistance),
      wal_per_timeout_bytes: walPerTimeout === null ? null : Math.round(walPerTimeout),
      max_wal_size_to_set: toSet,
    })
    const regular =
      causes.manual >= 3
        ? regularity(checkpoints.filter((e) => causeOf(textField(e, 'reason')) === 'manual').map((e) => e.ts))
        : null
    const elsewhereWords = fromLog
      ? ` ${causes.manual} checkpoint${causes.manual === 1 ? ' was' : 's were'} forced (${[...causes.manualReasons].map(([r, n]) => `"checkpoint starting: ${r}" ×${n}`).join(', ')}): a CHECKPOINT command, pg_backup_start() or a base backup (pg_basebackup, pgBackRest, WAL-G), or CREATE DATABASE${regular ? `, about every ${duration(regular)} (a scheduled job)` : ''}. More WAL room would not change them.`
      : ' CHECKPOINT commands, base backups or restarts request them; more WAL room would not change them.'
    if (cause === 'elsewhere') {
      return [
        {
          severity,
          title: 'Checkpoints are forced by CHECKPOINT commands or backups',
          detail: `Over the last ${duration(windowMs)}, ${evidence.join('; ')}.${sizing}${elsewhereWords}`,
          recommendation:
            'Find what forces them: a job running CHECKPOINT (often needless: the server checkpoints by itself), backups started too often, or CREATE DATABASE in a loop. Each forced checkpoint writes every dirty buffer at once (an I/O spike) and the next writes of each page log full-page images. max_wal_size does not need to change.',
          how_to_investigate: [
            "SELECT pid, usename, application_name, backend_type, query_start, left(query, 200) FROM pg_stat_activity WHERE query ILIKE '%checkpoint%' OR query ILIKE '%pg_backup_start%' OR backend_type = 'walsender';",
            'SELECT num_timed, num_requested, stats_reset FROM pg_stat_checkpointer;   -- PostgreSQL 17+',
            'SELECT checkpoints_timed, checkpoints_req, stats_reset FROM pg_stat_bgwriter;   -- before 17',
            ...(logCheckpointsOn || fromLog
              ? []
              : [
                  "SELECT name, setting FROM pg_settings WHERE name = 'log_checkpoints';   -- on: the log says why each checkpoint started",
                ]),
          ],
          how_to_fix:
            logCheckpointsOn || fromLog
              ? []
              : [
                  'ALTER SYSTEM SET log_checkpoints = on; SELECT pg_reload_conf();   -- the log then says why each checkpoint started',
                ],
          metrics: metricsOf(),
        },
      ]
    }
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
          ...(toSet
            ? [
                holds || wanted === null
                  ? `ALTER SYSTEM SET max_wal_size = '${toSet}'; SELECT pg_reload_conf();   -- twice today's: WAL-driven checkpoints should become rare`
                  : `ALTER SYSTEM SET max_wal_size = '${toSet}'; SELECT pg_reload_conf();   -- the WAL of one checkpoint_timeout × (1 + checkpoint_completion_target), with headroom`,
              ]
            : [
                "ALTER SYSTEM SET max_wal_size = '8GB'; SELECT pg_reload_conf();   -- e.g. double it until requested checkpoints become rare",
              ]),
          ...(logCheckpointsOn || fromLog
            ? []
            : [
                'ALTER SYSTEM SET log_checkpoints = on; SELECT pg_reload_conf();   -- the log then says why each checkpoint started',
              ]),
        ],
        metrics: metricsOf(),
      },
    ]
  },
}
