// Share of queries that failed over the last hour, with the statements that failed most. Counted from
// query_log by the agent (queries_logged / queries_logged_failed: initial queries, the agent's own left
// out, syntax errors included); without query_log, from system.events (FailedQuery against Query, which
// also count the agent's queries and every statement of a multi-statement request). No published
// threshold exists for this: a healthy workload fails well under 1 %, so dbm warns from 5 % (a broken
// client, timeouts, memory limits) and calls 20 % critical; fewer than 100 queries in the hour say nothing.
// With log events (system.errors), it names the errors the server counted most in the hour, with their
// last messages; ch_log_error_rate then stays quiet (one finding per cause).
import type { DoctorContext } from '../../context.ts'
import { chNumber, chString } from '../../sql-text.ts'
import { type Rule, type Severity, pct, severityAbove } from '../../types.ts'
import { count, short } from './common.ts'
import { topErrors } from './error-names.ts'

const defaults = {
  warning_ratio: 0.05,
  critical_ratio: 0.2,
  min_queries: 100,
  window_s: 3600,
  /** Statements with errors named in the detail, the most errors first. */
  statements_named: 5,
}

interface Verdict {
  severity: Severity
  total: number
  failed: number
  ratio: number
  logged: boolean
}

/** Whether queries fail often enough for a finding (once per diagnosis; ch_log_error_rate asks too). */
export function failingQueries(ctx: DoctorContext): Promise<Verdict | null> {
  return ctx.once('ch_failed_queries', async () => {
    const t = ctx.thresholds(failedQueries)
    const server = (await ctx.totals('server', t.window_s * 1000)).get('') ?? {}
    const logged = server.queries_logged !== undefined
    const total = (logged ? server.queries_logged : server.queries_total) ?? 0
    const failed = (logged ? server.queries_logged_failed : server.queries_failed) ?? 0
    if (total < t.min_queries) return null
    const ratio = failed / total
    const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
    return severity ? { severity, total, failed, ratio, logged } : null
  })
}

export const failedQueries: Rule<typeof defaults> = {
  id: 'ch_failed_queries',
  summary: 'A high share of queries failed over the last hour, with the statements that failed most.',
  collectors: ['server_metrics', 'query_stats'],
  engine: 'clickhouse',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(failedQueries)
    const window = t.window_s * 1000
    const verdict = await failingQueries(ctx)
    if (!verdict) return []
    const { severity, total, failed, ratio, logged } = verdict
    const errors = (await topErrors(ctx, ctx.now - window, ctx.now + 1)).slice(0, 3)
    const failing = (await ctx.queries(window, 'calls', 1000))
      .filter((q) => q.errors > 0)
      .sort((a, b) => b.errors - a.errors)
      .slice(0, t.statements_named)
    const named = failing.map(
      (q) => `${q.errors} of ${q.total_calls} calls of statement ${q.query_hash} (${short(q.query_text, 120)})`,
    )
    return [
      {
        severity,
        title: `${pct(ratio)} of queries failed in the last hour`,
        detail:
          `${count(failed)} of the ${count(total)} queries ${logged ? 'query_log recorded' : 'the server counted (system.events, no query_log)'} in the last ${t.window_s === 3600 ? 'hour' : `${t.window_s} s`} failed (${pct(ratio)}; a warning from ${pct(t.warning_ratio, 0)}, critical from ${pct(t.critical_ratio, 0)}).` +
          (named.length > 0 ? ` The statements that failed most: ${named.join('; ')}.` : '') +
          (errors.length > 0
            ? ` The errors the server counted most in that time: ${errors.map((e) => `${e.name} × ${count(e.count)} (last: "${e.message}")`).join('; ')}.`
            : ''),
        recommendation:
          'Group the failures by error code: syntax or unknown-column errors point to a client deployed against the wrong schema, TIMEOUT_EXCEEDED and MEMORY_LIMIT_EXCEEDED to queries that outgrew their limits, TOO_MANY_SIMULTANEOUS_QUERIES to a concurrency burst.',
        how_to_investigate: [
          "SELECT exception_code, errorCodeToName(exception_code) AS error, count() AS failures, any(user) AS user, any(left(query, 200)) AS example FROM system.query_log WHERE type IN ('ExceptionBeforeStart', 'ExceptionWhileProcessing') AND event_time > now() - INTERVAL 1 HOUR GROUP BY exception_code ORDER BY failures DESC LIMIT 10;",
          'SELECT name, code, value, last_error_time, last_error_message FROM system.errors ORDER BY last_error_time DESC LIMIT 10;',
          ...failing
            .slice(0, 1)
            .map(
              (q) =>
                `SELECT event_time, user, exception FROM system.query_log WHERE normalized_query_hash = ${chNumber(q.query_hash)} AND exception_code != 0 AND event_time > now() - INTERVAL 1 HOUR ORDER BY event_time DESC LIMIT 10;`,
            ),
          ...errors
            .slice(0, 1)
            .map(
              (e) =>
                `SELECT name, code, value, last_error_time, last_error_message, last_error_trace FROM system.errors WHERE name = ${chString(e.name)};`,
            ),
        ],
        how_to_fix: [
          '-- depends on the error; for MEMORY_LIMIT_EXCEEDED, let big GROUP BY and ORDER BY spill to disk:',
          'ALTER USER <user> SETTINGS max_bytes_before_external_group_by = 5000000000, max_bytes_before_external_sort = 5000000000;',
          '-- for TIMEOUT_EXCEEDED, raise the limit of the users whose queries are expected to run long:',
          `ALTER USER <user> SETTINGS max_execution_time = 300;`,
        ],
        objects: failing.map((q) => `statement ${q.query_hash}`),
        metrics: {
          queries: total,
          failed,
          failed_ratio: Number(ratio.toFixed(4)),
          source: logged ? 'query_log' : 'events',
          top_error: errors[0]?.name ?? null,
          top_error_count: errors[0]?.count ?? null,
        },
      },
    ]
  },
}
