// activity: the client sessions of the connected database doing something right now
// (pg_stat_activity), with the sessions blocking each one. Idle sessions and the agent's own are left
// out; "idle in transaction" is kept. Sessions of the server's other databases belong to their own
// entries in the agent config, so that each session is reported (and diagnosed) once.
import type { ActiveQuery } from '../../../shared/wire.ts'
import { epoch, num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { nonNegative } from './common.ts'
import { maskSecretStatements } from '../../secret-statements.ts'

const MAX_QUERY_TEXT = 10_000
const MAX_SESSIONS = 10_000

interface Row {
  pid: number
  query_text: string
  state: string | null
  wait_event_type: string | null
  wait_event: string | null
  duration_ms: string | number | null
  blocking_pids: number[]
  usename: string | null
  application_name: string | null
  client_addr: string | null
  datname: string | null
  backend_type: string | null
  xact_start: Date | null
  backend_start: Date | null
  query_start: Date | null
}

// A null state (a session the agent's role may not see) is left out with the idle ones.
// duration_ms is the time spent in the current state: since query_start for a running statement,
// since state_change for a session idle in a transaction (how long it has sat there doing nothing;
// the transaction's age travels separately as xact_start). pg_blocking_pids takes the lock manager's
// locks, so it is asked only for sessions waiting on a heavyweight lock, the only waits it reports;
// it travels as JSON, which postgres.js parses whether or not it fetched the array types.
// backend_start with the pid names the session (a pid is reused), and query_start its statement: the
// doctor's commands that end or cancel it match them.
export const activity = registerCollector<PostgresContext>({
  name: 'activity',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql<Row[]>`
      SELECT pid,
             left(coalesce(query, ''), ${MAX_QUERY_TEXT}) AS query_text,
             state, wait_event_type, wait_event,
             extract(epoch FROM clock_timestamp() - CASE
               WHEN state LIKE 'idle in transaction%' THEN state_change
               ELSE query_start END) * 1000 AS duration_ms,
             to_json(CASE WHEN wait_event_type = 'Lock' THEN pg_blocking_pids(pid) ELSE '{}'::int[] END) AS blocking_pids,
             usename, application_name, host(client_addr) AS client_addr, datname, backend_type, xact_start,
             backend_start, query_start
      FROM pg_stat_activity
      WHERE backend_type = 'client backend'
        AND datname = current_database()
        AND pid <> pg_backend_pid()
        AND state <> 'idle'
      ORDER BY query_start NULLS LAST
      LIMIT ${MAX_SESSIONS}`
    const sessions: ActiveQuery[] = rows.map((r) => ({
      pid: r.pid,
      query_text: maskSecretStatements(r.query_text),
      state: r.state,
      wait_event_type: r.wait_event_type,
      wait_event: r.wait_event,
      duration_ms: nonNegative(num(r.duration_ms)),
      blocking_pids: r.blocking_pids ?? [],
      user: r.usename,
      application_name: r.application_name,
      client_addr: r.client_addr,
      database: r.datname,
      backend_type: r.backend_type,
      xact_start: epoch(r.xact_start),
      backend_start: epoch(r.backend_start),
      query_start: epoch(r.query_start),
    }))
    return { activity: sessions }
  },
})
