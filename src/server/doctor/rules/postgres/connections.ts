// Client connections against the slots max_connections leaves to ordinary roles (max_connections
// minus superuser_reserved_connections): once they are used up, new connections fail with "sorry, too
// many clients already". Thresholds from the postgres_exporter mixin (prometheus-community):
// PostgreSQLHighConnections at 80 % of those slots (warning); critical at 95 %, a few connections
// before its PostgreSQLMaxConnectionsReached.
import { type Rule, pct, severityAbove } from '../../types.ts'

const defaults = {
  warning_ratio: 0.8,
  critical_ratio: 0.95,
}

export const connections: Rule<typeof defaults> = {
  id: 'pg_connections',
  summary:
    'Client connections near the slots max_connections leaves to ordinary roles: past them new connections fail.',
  collectors: ['activity', 'database_stats'],
  engine: 'postgres',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(connections)
    const stats = (await ctx.databaseStats())?.payload
    const total = stats?.connections_total
    const max = stats?.max_connections
    if (typeof total !== 'number' || typeof max !== 'number' || max <= 0) return []
    const reserved = stats?.superuser_reserved_connections ?? 0
    const usable = Math.max(1, max - reserved)
    const ratio = total / usable
    const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
    if (!severity) return []
    // The activity snapshot lists the sessions that are not idle; the rest of the connections are idle.
    const { entries } = await ctx.activity()
    const byState = new Map<string, number>()
    for (const a of entries) byState.set(a.state ?? 'unknown', (byState.get(a.state ?? 'unknown') ?? 0) + 1)
    const idle = Math.max(0, total - entries.length)
    const states = [...byState].sort((a, b) => b[1] - a[1]).map(([state, n]) => `${n} ${state}`)
    return [
      {
        severity,
        title: `${pct(ratio, 0)} of the connection slots in use`,
        detail:
          `${total} client connections of the ${usable} that ordinary roles may open (max_connections ${max} minus superuser_reserved_connections ${reserved}): ${pct(ratio)}. ` +
          `Of these, ${[...states, `${idle} idle`].join(', ')}.`,
        recommendation:
          "Most connections are usually idle: put a pooler (PgBouncer in transaction mode) between the applications and PostgreSQL, and shrink the applications' own pools. " +
          'Raising max_connections needs a restart and costs memory per connection; it is the last resort.',
        how_to_investigate: [
          "SELECT usename, application_name, client_addr, state, count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC;",
          "SELECT count(*) FILTER (WHERE state = 'idle' AND now() - state_change > interval '10 minutes') AS idle_over_10_min, count(*) AS total FROM pg_stat_activity WHERE backend_type = 'client backend';",
          'SHOW max_connections; SHOW superuser_reserved_connections;',
        ],
        how_to_fix: [
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'idle' AND now() - state_change > interval '1 hour';",
          "ALTER SYSTEM SET idle_session_timeout = '1h'; SELECT pg_reload_conf();   -- PostgreSQL 14+: ends sessions idle that long",
          `ALTER SYSTEM SET max_connections = ${Math.ceil((max * 1.5) / 10) * 10};   -- takes effect after a restart`,
        ],
        metrics: {
          connections_total: total,
          max_connections: max,
          superuser_reserved_connections: reserved,
          usage_ratio: Number(ratio.toFixed(4)),
          idle_connections: idle,
        },
      },
    ]
  },
}
