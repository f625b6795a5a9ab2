// locks: heavyweight locks held and awaited by the sessions of the connected database (pg_locks
// with pg_stat_activity and pg_class), each waiting lock with the first session blocking it.
import type { LockEntry } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { forVersion, nonNegative } from './common.ts'
import { maskSecretStatements } from '../../secret-statements.ts'
import { PREPARED } from '../../own-statements.ts'

const MAX_QUERY_TEXT = 10_000
const MAX_LOCKS = 20_000

// Left out, to keep the list to what a DBA acts on:
// - the agent's own locks, and locks of prepared transactions (no session, pid null);
// - sessions connected to other databases of the server (a lock entry carries no database name, and
//   relation OIDs only resolve in their own database);
// - granted virtualxid locks that nobody waits for: every transaction holds one on itself.
// relation_name is schema.table (unquoted, as tables report them). A session waiting for a row waits
// on the holder's transactionid, which names no relation; its relation is then taken from the tuple
// lock the waiter holds on that row.
// duration_ms: a waiting lock since the wait started (pg_locks.waitstart, PostgreSQL 14+; before, and
// in the instant before waitstart is set, since the waiting statement started); a granted lock since
// its transaction started, since locks are held until the transaction ends.
const locksSql = (waitStart: string) => `
  WITH l AS (
    SELECT * FROM pg_locks
    WHERE pid IS NOT NULL AND pid <> pg_backend_pid()
  )
  SELECT l.pid, l.locktype AS lock_type, l.mode, l.granted,
         rel.nspname || '.' || rel.relname AS relation_name,
         CASE WHEN NOT l.granted THEN (pg_blocking_pids(l.pid))[1] END AS blocked_by_pid,
         extract(epoch FROM clock_timestamp() - CASE
           WHEN l.granted THEN coalesce(a.xact_start, a.query_start)
           ELSE ${waitStart} END) * 1000 AS duration_ms,
         left(a.query, ${MAX_QUERY_TEXT}) AS query_text
  FROM l
  JOIN pg_stat_activity a ON a.pid = l.pid
  LEFT JOIN LATERAL (
    SELECT n.nspname, c.relname
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = coalesce(l.relation, CASE WHEN l.locktype = 'transactionid' AND NOT l.granted THEN
      (SELECT t.relation FROM l t WHERE t.pid = l.pid AND t.locktype = 'tuple' AND t.granted LIMIT 1) END)
  ) rel ON true
  WHERE a.datname = current_database()
    AND NOT (l.locktype = 'virtualxid' AND l.granted AND l.virtualxid NOT IN (
      SELECT w.virtualxid FROM l w WHERE w.locktype = 'virtualxid' AND NOT w.granted AND w.virtualxid IS NOT NULL))
  ORDER BY l.granted, l.pid, l.locktype
  LIMIT ${MAX_LOCKS}`

const SQL = {
  10: locksSql('a.query_start'),
  14: locksSql('coalesce(l.waitstart, a.query_start)'),
}

interface Row {
  pid: number
  lock_type: string
  mode: string
  granted: boolean
  relation_name: string | null
  blocked_by_pid: number | null
  duration_ms: string | number | null
  query_text: string | null
}

export const locks = registerCollector<PostgresContext>({
  name: 'locks',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<Row[]>(forVersion(SQL, ctx.major), [], PREPARED)
    const entries: LockEntry[] = rows.map((r) => ({
      pid: r.pid,
      lock_type: r.lock_type,
      mode: r.mode,
      relation_name: r.relation_name,
      granted: r.granted,
      blocked_by_pid: r.blocked_by_pid,
      duration_ms: nonNegative(num(r.duration_ms)),
      query_text: r.query_text === null ? null : maskSecretStatements(r.query_text),
    }))
    return { locks: entries }
  },
})
