// connections: the server's client connections counted by database, user, application, client address
// and state (pg_stat_activity, idle ones included), the largest groups first. Connections are a
// server-wide resource (max_connections), so every database's count, the agent's own sessions among
// them, as PgHero's connection sources show them. A role without pg_monitor (or pg_read_all_stats)
// sees other users' sessions with a null state.
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import type { ConnectionGroup } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { PREPARED } from '../../own-statements.ts'

const MAX_GROUPS = ingestMaxItems.connections

const CONNECTIONS_SQL = `
  SELECT datname AS database, usename AS "user", application_name, host(client_addr) AS client_addr, state, count(*) AS count
  FROM pg_stat_activity
  WHERE backend_type = 'client backend'
  GROUP BY datname, usename, application_name, host(client_addr), state
  ORDER BY count(*) DESC, datname, usename, application_name, host(client_addr), state
  LIMIT ${MAX_GROUPS}`

type Row = Omit<ConnectionGroup, 'count'> & { count: string | number }

export const connections = registerCollector<PostgresContext>({
  name: 'connections',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<Row[]>(CONNECTIONS_SQL, [], PREPARED)
    return {
      connections: rows.map((r) => ({
        database: r.database,
        user: r.user,
        application_name: r.application_name,
        client_addr: r.client_addr,
        state: r.state,
        count: num(r.count) ?? 0,
      })),
    }
  },
})
