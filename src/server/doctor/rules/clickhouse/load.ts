// The server's load against its limits, from the latest server_metrics (agent
// collectors/clickhouse/load.ts). ch_running_queries: the queries running now (the agent's own left
// out) against max_concurrent_queries; at the limit ClickHouse refuses new queries with
// TOO_MANY_SIMULTANEOUS_QUERIES. ch_connections: the open connections of every protocol (native TCP,
// HTTP, MySQL, PostgreSQL, interserver) against max_connections, the thread pool all the listeners
// share; past it new connections wait or are dropped. Each warns from 80 % of its limit and is
// critical from 95 %; without a known limit (an older server without system.server_settings, or no
// limit set) neither says anything. Altinity's clickhouse-operator alerts on both
// (ClickHouseTooManyRunningQueries, ClickHouseTooManyConnections) with fixed numbers; dbm reads the
// server's own limits.
import { type Rule, pct, severityAbove } from '../../types.ts'
import { count, counted } from './common.ts'

const queryDefaults = {
  /** running_queries / max_concurrent_queries from which it is a warning. */
  warning_ratio: 0.8,
  critical_ratio: 0.95,
  /** Users named in the detail, the most queries first. */
  users_named: 3,
}

/** The protocols, by their server_metrics key, as the findings name them. */
export const CONNECTION_PROTOCOLS = [
  ['tcp_connections', 'native TCP'],
  ['http_connections', 'HTTP'],
  ['mysql_connections', 'MySQL'],
  ['postgresql_connections', 'PostgreSQL'],
  ['interserver_connections', 'interserver'],
] as const

const connectionDefaults = {
  /** All protocols' connections / max_connections from which it is a warning. */
  warning_ratio: 0.8,
  critical_ratio: 0.95,
}

const known = (v: number | null | undefined): v is number => typeof v === 'number' && Number.isFinite(v)

export const runningQueries: Rule<typeof queryDefaults> = {
  id: 'ch_running_queries',
  summary: 'Running queries near max_concurrent_queries, past which ClickHouse refuses new ones.',
  collectors: ['server_metrics', 'activity'],
  engine: 'clickhouse',
  category: 'capacity',
  thresholds: queryDefaults,
  async check(ctx) {
    const t = ctx.thresholds(runningQueries)
    const metrics = (await ctx.serverMetrics())?.payload ?? {}
    const running = metrics.running_queries
    const limit = metrics.max_concurrent_queries
    if (!known(running) || !known(limit) || limit <= 0) return []
    const ratio = running / limit
    const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
    if (!severity) return []
    const byUser = new Map<string, number>()
    for (const a of (await ctx.activity()).entries) byUser.set(a.user ?? '', (byUser.get(a.user ?? '') ?? 0) + 1)
    const users = [...byUser].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, t.users_named)
    return [
      {
        severity,
        title: `${count(running)} ${running === 1 ? 'query' : 'queries'} running of ${count(limit)} allowed`,
        detail:
          `${count(running)} queries are running (${pct(ratio)} of max_concurrent_queries ${count(limit)}; a warning from ${pct(t.warning_ratio, 0)}, critical from ${pct(t.critical_ratio, 0)}). ` +
          `At the limit ClickHouse refuses new queries with TOO_MANY_SIMULTANEOUS_QUERIES.` +
          (users.length > 0
            ? ` The most by user: ${users.map(([user, n]) => `${user || '(unknown)'} ${count(n)}`).join(', ')}.`
            : ''),
        recommendation:
          'Many queries at once usually means they pile up because each got slow (see the long-running queries and the query p99), or a client opens more than it needs. Speed up or cancel the slow ones, cap a client with max_concurrent_queries_for_user, or raise max_concurrent_queries if the server has the CPU and memory for it.',
        how_to_investigate: [
          'SELECT user, count() AS queries, max(elapsed) AS longest_s, formatReadableSize(sum(memory_usage)) AS memory FROM system.processes GROUP BY user ORDER BY queries DESC;',
          "SELECT name, value FROM system.server_settings WHERE name IN ('max_concurrent_queries', 'max_concurrent_select_queries', 'max_concurrent_insert_queries');",
          'SELECT event_time, user, left(query, 200) AS query FROM system.query_log WHERE exception_code = 202 AND event_time > now() - INTERVAL 1 HOUR ORDER BY event_time DESC LIMIT 20;   -- 202: TOO_MANY_SIMULTANEOUS_QUERIES',
        ],
        how_to_fix: [
          'ALTER USER <user> SETTINGS max_concurrent_queries_for_user = 20;   -- caps one client so it cannot take every slot (20: pick what it needs)',
          'KILL QUERY WHERE elapsed > 600 ASYNC;   -- after reviewing which queries that cancels',
          'SYSTEM RELOAD CONFIG;   -- after raising max_concurrent_queries in the server config (it applies without a restart)',
        ],
        objects: users.map(([user]) => `user ${user}`),
        metrics: { running_queries: running, max_concurrent_queries: limit, ratio: Number(ratio.toFixed(4)) },
      },
    ]
  },
}

export const connections: Rule<typeof connectionDefaults> = {
  id: 'ch_connections',
  summary: 'Open connections of every protocol near max_connections.',
  collectors: ['server_metrics'],
  engine: 'clickhouse',
  category: 'capacity',
  thresholds: connectionDefaults,
  async check(ctx) {
    const t = ctx.thresholds(connections)
    const metrics = (await ctx.serverMetrics())?.payload ?? {}
    const limit = metrics.max_connections
    const open = CONNECTION_PROTOCOLS.filter(([key]) => known(metrics[key])).map(([key, name]) => ({
      key,
      name,
      n: metrics[key] as number,
    }))
    if (!known(limit) || limit <= 0 || open.length === 0) return []
    const total = open.reduce((sum, p) => sum + p.n, 0)
    const ratio = total / limit
    const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
    if (!severity) return []
    const split = [...open].sort((a, b) => b.n - a.n).map((p) => `${count(p.n)} ${p.name}`)
    return [
      {
        severity,
        title: `${counted(total, 'connection')} open of ${count(limit)} allowed`,
        detail:
          `${count(total)} connections are open (${split.join(', ')}): ${pct(ratio)} of max_connections ${count(limit)}, which all the protocols' listeners share ` +
          `(a warning from ${pct(t.warning_ratio, 0)}, critical from ${pct(t.critical_ratio, 0)}). Past it new connections wait or are refused.`,
        recommendation:
          'Clients that open a connection per query, or keep idle ones, use up the pool: reuse connections (a pool in the client, HTTP keep-alive) and close idle ones. Raise max_connections only if the server has the threads and memory for it.',
        how_to_investigate: [
          "SELECT metric, value FROM system.metrics WHERE metric IN ('TCPConnection', 'HTTPConnection', 'MySQLConnection', 'PostgreSQLConnection', 'InterserverConnection');",
          'SELECT user, toString(address) AS client, interface, count() AS queries FROM system.processes GROUP BY user, client, interface ORDER BY queries DESC LIMIT 20;   -- 1: TCP, 2: HTTP',
          "SELECT name, value FROM system.server_settings WHERE name IN ('max_connections', 'keep_alive_timeout');",
        ],
        how_to_fix: [
          'systemctl restart clickhouse-server   # after raising max_connections in /etc/clickhouse-server/config.d/ (it needs a restart), only with the threads and memory for it',
        ],
        metrics: {
          connections: total,
          max_connections: limit,
          ratio: Number(ratio.toFixed(4)),
          ...Object.fromEntries(open.map((p) => [p.key, p.n])),
        },
      },
    ]
  },
}
