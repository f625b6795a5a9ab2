// Errors in the server log far above their own baseline: the entries of severity ERROR, FATAL or PANIC
// in the last 10 minutes (exact, from the log's counts) per minute, against the same rate over the 24
// hours before them (the judgement is ../error-rate.ts, shared with ClickHouse's). An application that
// suddenly fails hundreds of times a minute (a deploy that broke a statement, a constraint now violated,
// timeouts) shows in no statistics view; pganalyze's Log Insights and temboard alert on it.
// One finding per cause: kinds another rule judges are left out (failed logins: pg_log_auth_failures;
// deadlocks: pg_deadlocks; out of memory, fork failures, disk full and crashes: pg_log_resource_faults,
// host_memory_pressure or pg_disk_fill; cancelled autovacuum: pg_log_autovacuum_cancelled).
// Warning at 10 times the baseline and at least 5 a minute; critical at 100 times and 50 a minute (the
// floors keep a quiet database's first few errors from alerting). Names the most frequent SQLSTATE and
// message, with a statement that raised it.
import { commentText } from '../../sql-text.ts'
import type { Rule } from '../../types.ts'
import { ERROR_RATE_DEFAULTS, ERROR_SEVERITIES, judgeErrorRate } from '../error-rate.ts'
import { MAX_LOG_ENTRIES, logExcerpt } from './log-evidence.ts'

const defaults = { ...ERROR_RATE_DEFAULTS }

/** Kinds other rules judge. */
const OWN_RULE_KINDS = new Set([
  'auth_failed',
  'deadlock',
  'out_of_memory',
  'could_not_fork',
  'disk_full',
  'server_crash',
  'autovacuum_cancelled',
])

export const logErrorRate: Rule<typeof defaults> = {
  id: 'pg_log_error_rate',
  summary:
    'Errors in the server log far above their own baseline of the day before, naming the top SQLSTATE, message and statement.',
  collectors: ['log_events'],
  engine: 'postgres',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(logErrorRate)
    const { recent, baseline, rate, baseRate, severity, start, end } = await judgeErrorRate(ctx, t, OWN_RULE_KINDS)
    if (!severity) return []
    // The most frequent error among the entries sent whole.
    const entries = (
      await ctx.once(`log-errors:${start}:${end}`, () =>
        ctx.store.logEvents.entries(
          ctx.db.id,
          { since: start, until: end, severities: ERROR_SEVERITIES },
          MAX_LOG_ENTRIES,
        ),
      )
    ).filter((e) => !OWN_RULE_KINDS.has(e.kind))
    const groups = new Map<
      string,
      {
        sqlstate: string | null
        fingerprint: string
        count: number
        statement: string | null
        message: string
        users: Set<string>
      }
    >()
    for (const e of entries) {
      const key = JSON.stringify([e.sqlstate, e.fingerprint])
      const g = groups.get(key) ?? {
        sqlstate: e.sqlstate,
        fingerprint: e.fingerprint,
        count: 0,
        statement: null,
        message: e.message,
        users: new Set<string>(),
      }
      g.count += e.count
      g.statement ??= e.statement
      if (e.user) g.users.add(e.user)
      groups.set(key, g)
    }
    const top = [...groups.values()].sort((a, b) => b.count - a.count)[0]
    const named = top
      ? ` The most frequent: ${top.sqlstate ? `SQLSTATE ${top.sqlstate}, ` : ''}"${logExcerpt(top.message)}" (${top.count} of the ${entries.length} entries read${top.users.size > 0 ? `, user ${[...top.users].slice(0, 3).join(', ')}` : ''})` +
        (top.statement ? `, raised by: ${logExcerpt(top.statement)}.` : '.')
      : ''
    return [
      {
        severity,
        title: `${recent} errors in the server log in ${t.window_minutes} minutes, ${baseRate > 0 ? `${Math.round(rate / baseRate)} times` : 'far above'} the usual rate`,
        detail:
          `The server logged ${recent} entries of severity ERROR or above (failed logins, deadlocks and resource faults aside: other findings name them) in the last ${t.window_minutes} minutes, ${rate.toFixed(1)} a minute, ` +
          `against ${baseRate.toFixed(2)} a minute over the ${t.baseline_hours} hours before.${named}`,
        recommendation:
          'Find what changed: a deploy, a migration, a new constraint, a lock or timeout setting. The Logs page groups the errors by message; the SQLSTATE says the class ' +
          '(23: constraint violation, 40: serialization failure or deadlock, 57014: statement timeout or cancel, 53: out of resources). Fix the statement or the application, not the server.',
        how_to_investigate: [
          'SELECT datname, xact_commit, xact_rollback, deadlocks, stats_reset FROM pg_stat_database WHERE datname = current_database();',
          "SELECT name, setting FROM pg_settings WHERE name IN ('log_min_error_statement', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout');",
          ...(top?.statement ? [`-- the statement that raised it most: ${commentText(top.statement, 300)}`] : []),
        ],
        how_to_fix: [],
        metrics: {
          errors_recent: recent,
          errors_baseline: baseline,
          per_minute: Number(rate.toFixed(2)),
          baseline_per_minute: Number(baseRate.toFixed(4)),
          top_sqlstate: top?.sqlstate ?? null,
          top_fingerprint: top?.fingerprint ?? null,
          top_count: top?.count ?? null,
        },
      },
    ]
  },
}
