// Query latency of the whole server over the last hour: the agent sends the p99 of the queries
// query_log recorded in each cycle (server_metrics query_p99_ms, its own queries left out), the store
// keeps one value a minute, and the rule judges the median minute, so one slow report does not make
// the hour slow but a slow half hour does. The statements with the highest p99 are named. No standard
// number exists for an analytics server: dashboards expect answers within a second, so dbm warns from
// 1 s and calls 10 s critical; fewer than 100 queries or 10 minutes with queries say nothing.
import type { MetricPoint } from '../../../store/internals/types.ts'
import { commentText } from '../../sql-text.ts'
import { type Rule, duration, severityAbove } from '../../types.ts'
import { count, counted, short } from './common.ts'

const defaults = {
  warning_ms: 1000,
  critical_ms: 10_000,
  min_queries: 100,
  min_minutes: 10,
  window_s: 3600,
  /** Statements named in the detail, the highest p99 first. */
  statements_named: 5,
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export const queryP99: Rule<typeof defaults> = {
  id: 'ch_query_p99',
  summary:
    "The server's query latency (the median minute's p99 over the last hour) too high, naming the slowest statements.",
  collectors: ['server_metrics', 'query_stats'],
  engine: 'clickhouse',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(queryP99)
    const window = t.window_s * 1000
    const points = await ctx.once<MetricPoint[]>(`server-minutes:${window}`, () =>
      ctx.store.clickhouse.metricSeries(ctx.db.id, 'server', {
        since: ctx.now - window,
        until: ctx.now,
        bucketSeconds: 60,
      }),
    )
    const minutes = points.map((p) => p.values.query_p99_ms).filter((v): v is number => typeof v === 'number')
    const queries = points.reduce((sum, p) => sum + (p.values.queries_logged ?? 0), 0)
    if (minutes.length < t.min_minutes || queries < t.min_queries) return []
    const p99 = median(minutes)
    const severity = severityAbove(p99, t.warning_ms, t.critical_ms)
    if (!severity) return []
    const slow = minutes.filter((v) => v >= t.warning_ms).length
    const statements = (await ctx.queries(window, 'total_time', 1000))
      .filter((q) => (q.p99_ms ?? 0) >= t.warning_ms)
      .sort((a, b) => b.p99_ms! - a.p99_ms!)
      .slice(0, t.statements_named)
    return [
      {
        severity,
        title: `Query p99 of ${duration(p99)} over the last hour`,
        detail:
          `Over the last hour the server's p99 query latency was ${duration(p99)} in the median minute (${slow} of ${minutes.length} minutes with queries at ${duration(t.warning_ms)} or more, ` +
          `the worst ${duration(Math.max(...minutes))}; ${count(queries)} queries; a warning from ${duration(t.warning_ms)}, critical from ${duration(t.critical_ms)}).` +
          (statements.length > 0
            ? ` The statements with the highest p99: ${statements.map((q) => `${q.query_hash} (p99 ${duration(q.p99_ms!)}, ${counted(q.total_calls, 'call')}: ${short(q.query_text, 120)})`).join('; ')}.`
            : ''),
        recommendation:
          'Look at the slowest statements: read_rows against result_rows shows a scan the primary key (ORDER BY) does not narrow; a query that became slow with more data needs a better ORDER BY, a projection or a materialized view. ' +
          'If everything is slow at once, the server is saturated (CPU, disk, concurrent queries).',
        how_to_investigate: [
          "SELECT normalized_query_hash, any(left(query, 200)) AS example, count() AS calls, quantile(0.99)(query_duration_ms) AS p99_ms, sum(read_rows) AS read_rows, sum(result_rows) AS result_rows FROM system.query_log WHERE type = 'QueryFinish' AND is_initial_query AND event_time > now() - INTERVAL 1 HOUR GROUP BY normalized_query_hash ORDER BY p99_ms DESC LIMIT 10;",
          "SELECT toStartOfMinute(event_time) AS minute, count() AS queries, quantile(0.99)(query_duration_ms) AS p99_ms FROM system.query_log WHERE type = 'QueryFinish' AND is_initial_query AND event_time > now() - INTERVAL 1 HOUR GROUP BY minute ORDER BY minute;",
          "SELECT metric, value FROM system.metrics WHERE metric IN ('Query', 'BackgroundMergesAndMutationsPoolTask');",
          ...statements
            .slice(0, 1)
            .map(
              (q) =>
                `EXPLAIN indexes = 1 <its query, from the first query>;   -- statement ${commentText(q.query_hash, 64)}: how many parts and granules the primary key leaves`,
            ),
        ],
        how_to_fix: [
          'ALTER TABLE <database>.<table> ADD PROJECTION <name> (SELECT * ORDER BY <filter column>); ALTER TABLE <database>.<table> MATERIALIZE PROJECTION <name>;   -- a second sort order for queries that filter on another column',
          'ALTER USER <user> SETTINGS max_execution_time = 60;   -- stops runaway queries from holding the server',
        ],
        objects: statements.map((q) => `statement ${q.query_hash}`),
        metrics: {
          p99_ms: p99,
          max_minute_p99_ms: Math.max(...minutes),
          minutes: minutes.length,
          slow_minutes: slow,
          queries,
        },
      },
    ]
  },
}
