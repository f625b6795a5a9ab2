// The share of transactions rolled back (pg_stat_database xact_commit and xact_rollback, as deltas) over
// the last window, judged two ways: absolutely (fewer than 90 % of transactions committed, with real
// volume: at least one rollback a second or a minimum count of transactions in the window, so a
// quiet database's few rollbacks say nothing) and against the database's own previous week (the
// rollback share several times what it was, for an application that always rolls some back). Failed
// statements, aborted requests and ORM sessions that roll back by default all count; the server log
// (log_min_error_statement) names the errors behind them.
import { type FindingDraft, type Rule, pct, severityBelow } from '../../types.ts'

const defaults = {
  /** The window judged, in minutes. */
  window_minutes: 15,
  /** Committed share of transactions at or below which the finding is raised. */
  warning_commit_ratio: 0.9,
  critical_commit_ratio: 0.5,
  /** Real volume: rollbacks a second in the window (this or min_transactions is enough). */
  min_rollbacks_per_s: 1,
  /** Real volume: transactions in the window (this or min_rollbacks_per_s is enough). */
  min_transactions: 10_000,
  /** Against the previous week: the rollback share at least this many times the week's (with baseline_min_increase). */
  baseline_factor: 3,
  /** Against the previous week: the rollback share at least this much higher than the week's (0.05: 5 points). */
  baseline_min_increase: 0.05,
}

const HOUR = 3_600_000
const WEEK = 7 * 24 * HOUR
const n = (v: number) => Math.round(v).toLocaleString('en-US')

export const rollbackRatio: Rule<typeof defaults> = {
  id: 'pg_rollback_ratio',
  engine: 'postgres',
  category: 'reliability',
  summary:
    "A low commit ratio with real volume: many transactions rolled back, absolutely or against the database's own previous week.",
  collectors: ['database_stats'],
  thresholds: defaults,
  ranges: {
    window_minutes: { min: 1, max: 1440, whole: true },
    min_rollbacks_per_s: { min: 0, max: 1_000_000 },
    min_transactions: { min: 0, max: 1e12, whole: true },
    baseline_factor: { min: 1, max: 1000 },
    baseline_min_increase: { min: 0, max: 1 },
  },
  async check(ctx) {
    const t = ctx.thresholds(rollbackRatio)
    const windowMs = t.window_minutes * 60_000
    const now = await ctx.sums('database', windowMs)
    const commits = now.xact_commit ?? 0
    const rollbacks = now.xact_rollback ?? 0
    const total = commits + rollbacks
    if (total === 0 || rollbacks === 0) return []
    const rate = rollbacks / (windowMs / 1000)
    const volume = rate >= t.min_rollbacks_per_s || total >= t.min_transactions
    if (!volume) return []
    const ratio = commits / total
    // The previous week before this window: the week's sums less this window's.
    const week = await ctx.sums('database', WEEK + windowMs)
    const weekCommits = (week.xact_commit ?? 0) - commits
    const weekRollbacks = (week.xact_rollback ?? 0) - rollbacks
    const weekTotal = weekCommits + weekRollbacks
    const weekShare = weekTotal >= t.min_transactions ? weekRollbacks / weekTotal : null
    const share = rollbacks / total
    const absolute = severityBelow(ratio, t.warning_commit_ratio, t.critical_commit_ratio)
    const risen =
      weekShare !== null && share >= weekShare * t.baseline_factor && share - weekShare >= t.baseline_min_increase
    const severity = absolute ?? (risen ? 'warning' : undefined)
    if (!severity) return []
    const minutes = `${t.window_minutes} minutes`
    const against =
      weekShare === null
        ? ' The previous week has too few transactions to compare with.'
        : ` In the previous week ${pct(weekShare)} of its ${n(weekTotal)} transactions were rolled back${risen ? `: the share is ${(share / Math.max(weekShare, 1e-9)).toFixed(weekShare > 0 ? 1 : 0)} times that now` : ''}.`
    const finding: FindingDraft = {
      severity,
      title: absolute
        ? `Only ${pct(ratio)} of transactions committed in ${t.window_minutes} min: ${rate.toFixed(1)} rollbacks a second`
        : `Rollbacks rose to ${pct(share)} of transactions from ${pct(weekShare!)} last week`,
      detail:
        `In the last ${minutes} this database committed ${n(commits)} transactions and rolled back ${n(rollbacks)} (${pct(ratio)} committed, ${rate.toFixed(1)} rollbacks a second).${against} ` +
        'Each rollback is work thrown away: a failed statement, an aborted request, or a client that rolls back what it could have committed.',
      recommendation:
        'Find the errors behind the rollbacks in the server log (log_min_error_statement = error logs each failed statement) and fix them in the application; a client library that opens a transaction for every read and rolls it back is cheaper in autocommit.',
      how_to_investigate: [
        'SELECT datname, xact_commit, xact_rollback, round(100.0 * xact_rollback / nullif(xact_commit + xact_rollback, 0), 1) AS rollback_pct, stats_reset FROM pg_stat_database WHERE datname = current_database();',
        "SELECT name, setting FROM pg_settings WHERE name IN ('log_min_error_statement', 'log_min_messages');",
        "SELECT query, calls FROM pg_stat_statements WHERE query ILIKE 'rollback%' ORDER BY calls DESC LIMIT 5;   -- explicit ROLLBACKs (failed statements are not counted there)",
      ],
      how_to_fix: [
        "ALTER SYSTEM SET log_min_error_statement = 'error'; SELECT pg_reload_conf();   -- log the statement of every error, to find what fails",
      ],
      metrics: {
        commit_ratio: Number(ratio.toFixed(4)),
        xact_commit: commits,
        xact_rollback: rollbacks,
        rollbacks_per_s: Number(rate.toFixed(3)),
        window_minutes: t.window_minutes,
        previous_week_rollback_ratio: weekShare === null ? null : Number(weekShare.toFixed(4)),
      },
    }
    return [finding]
  },
}
