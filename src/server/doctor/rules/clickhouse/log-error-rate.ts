// ClickHouse's errors far above their own baseline: the same judgement as PostgreSQL's
// pg_log_error_rate (../error-rate.ts) over the log events the agent reads from system.errors (one
// entry per error name and cycle standing for `count` occurrences: the counts sum them), text_log and
// crash_log. The agent's own queries raise none (it looks optional tables up in system.tables). Names
// the most frequent error name with its code and its last message. One finding per cause: while
// ch_failed_queries fires (queries fail), that finding names the top errors and this one stays quiet.
import { chNumber, chString } from '../../sql-text.ts'
import type { Rule } from '../../types.ts'
import { ERROR_RATE_DEFAULTS, judgeErrorRate } from '../error-rate.ts'
import { topErrors } from './error-names.ts'
import { failingQueries } from './failed-queries.ts'

const defaults = { ...ERROR_RATE_DEFAULTS }

export const logErrorRate: Rule<typeof defaults> = {
  id: 'ch_log_error_rate',
  summary: "ClickHouse's errors far above their own baseline of the day before, naming the top error.",
  collectors: ['log_events'],
  engine: 'clickhouse',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(logErrorRate)
    const { recent, baseline, rate, baseRate, severity, start, end } = await judgeErrorRate(ctx, t, new Set())
    if (!severity || (await failingQueries(ctx))) return []
    const [top] = await topErrors(ctx, start, end)
    const named = top
      ? ` The most frequent: ${top.name}${top.code !== null ? ` (code ${top.code})` : ''}, ${top.count} times, last: "${top.message}".`
      : ''
    return [
      {
        severity,
        title: `${recent} errors on the ClickHouse server in ${t.window_minutes} minutes, ${baseRate > 0 ? `${Math.round(rate / baseRate)} times` : 'far above'} the usual rate`,
        detail:
          `The server counted ${recent} errors (system.errors, and text_log's errors and fatal messages when enabled) in the last ${t.window_minutes} minutes, ${rate.toFixed(1)} a minute, ` +
          `against ${baseRate.toFixed(2)} a minute over the ${t.baseline_hours} hours before.${named}`,
        recommendation:
          'Find what changed: a deploy sending queries the schema no longer fits (UNKNOWN_TABLE, UNKNOWN_IDENTIFIER, SYNTAX_ERROR), queries that outgrew their limits (MEMORY_LIMIT_EXCEEDED, TIMEOUT_EXCEEDED), ' +
          'a burst of connections (TOO_MANY_SIMULTANEOUS_QUERIES), or background work failing (merges, fetches, Keeper). system.errors keeps the last message of each error; query_log the queries that raised them.',
        how_to_investigate: [
          'SELECT name, code, value, last_error_time, last_error_message, remote FROM system.errors ORDER BY last_error_time DESC LIMIT 20;',
          ...(top
            ? [
                `SELECT name, code, value, last_error_time, last_error_message, last_error_trace FROM system.errors WHERE name = ${chString(top.name)};`,
                ...(top.code !== null
                  ? [
                      `SELECT event_time, user, left(query, 300) AS query, exception FROM system.query_log WHERE exception_code = ${chNumber(top.code)} AND event_time > now() - INTERVAL 1 HOUR ORDER BY event_time DESC LIMIT 20;`,
                    ]
                  : []),
              ]
            : []),
        ],
        how_to_fix: [],
        metrics: {
          errors_recent: recent,
          errors_baseline: baseline,
          per_minute: Number(rate.toFixed(2)),
          baseline_per_minute: Number(baseRate.toFixed(4)),
          top_error: top?.name ?? null,
          top_code: top?.code ?? null,
          top_count: top?.count ?? null,
        },
      },
    ]
  },
}
