// Autovacuum on a table cancelled again and again (the log's "canceling autovacuum task", with the table
// from its CONTEXT): a session asked for a lock that conflicts with the vacuum's (ALTER, TRUNCATE, LOCK,
// CREATE INDEX without CONCURRENTLY, a long migration) and the deadlock detector cancelled the vacuum
// after deadlock_timeout. A table whose autovacuum never finishes keeps its dead rows, bloats and, in the
// end, is vacuumed by the anti-wraparound vacuum that is not cancelled. Warning at 3 cancellations of
// one table in an hour, naming the blocking process and its statement when the log gives them. The fix
// is a manual VACUUM at a quiet moment (it is not cancelled so) and finding the job that takes the lock.
import { commentText, pgQualified, pgRegclass } from '../../sql-text.ts'
import type { FindingDraft, Rule } from '../../types.ts'
import { logEntries, logExcerpt, numberField, textField } from './log-evidence.ts'

const defaults = {
  window_minutes: 60,
  warning_count: 3,
  /** Tables named, the most cancelled first. */
  max_tables: 10,
}

/**
 * The logged table ("db.schema.table" as PostgreSQL logs it, unquoted, or "schema.table") as schema and
 * name: the known table (the latest tables collected) whose schema.name it ends with, else its parts when
 * they are exactly two or three; null when dots in the names make it ambiguous.
 */
export function tableParts(logged: string, known: readonly { schema_name: string; table_name: string }[] = []): { schema: string; name: string } | null {
  const match = known.find((t) => logged === `${t.schema_name}.${t.table_name}` || logged.endsWith(`.${t.schema_name}.${t.table_name}`))
  if (match) return { schema: match.schema_name, name: match.table_name }
  const parts = logged.split('.')
  if (parts.length === 3) return { schema: parts[1]!, name: parts[2]! }
  if (parts.length === 2) return { schema: parts[0]!, name: parts[1]! }
  return null
}

export const logAutovacuumCancelled: Rule<typeof defaults> = {
  id: 'pg_log_autovacuum_cancelled',
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(logAutovacuumCancelled)
    const entries = await logEntries(ctx, ['autovacuum_cancelled'], t.window_minutes * 60_000)
    const byTable = new Map<string, typeof entries>()
    for (const e of entries) {
      const table = textField(e, 'table')
      if (table === null) continue
      const list = byTable.get(table)
      if (list) list.push(e)
      else byTable.set(table, [e])
    }
    const known = byTable.size > 0 ? await ctx.tables() : []
    const findings: FindingDraft[] = []
    const ranked = [...byTable].map(([table, list]) => ({ table, list, count: list.reduce((n, e) => n + e.count, 0) })).sort((a, b) => b.count - a.count)
    for (const { table, list, count } of ranked.slice(0, t.max_tables)) {
      if (count < t.warning_count) continue
      const blockers = [...new Set(list.map((e) => numberField(e, 'blocker_pid')).filter((p): p is number => p !== null))]
      const withStatement = list.find((e) => e.statement !== null)
      const parts = tableParts(table, known)
      const holder =
        blockers.length > 0 || withStatement
          ? ` The lock was wanted by ${blockers.length > 0 ? `pid ${blockers.slice(0, 5).join(', ')}` : 'a session'}` +
            (withStatement ? ` running: ${logExcerpt(withStatement.statement!)}` : '') +
            (withStatement?.user ? ` (user ${withStatement.user}${withStatement.application ? `, application ${withStatement.application}` : ''})` : '') +
            '.'
          : ' The log does not say which session wanted the lock (log_lock_waits on shows it).'
      findings.push({
        severity: 'warning',
        object: table,
        objects: [table, ...blockers.slice(0, 5).map((p) => `pid ${p}`)],
        title: `Autovacuum of ${logExcerpt(table, 120)} cancelled ${count} times in ${t.window_minutes} minutes`,
        detail:
          `The server cancelled the automatic vacuum of ${table} ${count} times in the last ${t.window_minutes} minutes ("canceling autovacuum task"): ` +
          `each time a session asked for a lock that conflicts with VACUUM's, and the vacuum gave way after deadlock_timeout.${holder} ` +
          'Its dead rows stay until a vacuum finishes.',
        recommendation:
          'Find the job that takes the conflicting lock (DDL, LOCK TABLE, TRUNCATE, CREATE INDEX without CONCURRENTLY) and run it less often or at another time; ' +
          'vacuum the table by hand at a quiet moment meanwhile (a manual VACUUM is not cancelled by lock requests).',
        how_to_investigate: [
          ...(parts ? [`SELECT relname, n_dead_tup, last_autovacuum, last_vacuum, autovacuum_count FROM pg_stat_user_tables WHERE relid = ${pgRegclass(parts.schema, parts.name)};`] : []),
          ...blockers.slice(0, 3).map((p) => `SELECT pid, usename, application_name, state, xact_start, left(query, 200) FROM pg_stat_activity WHERE pid = ${p};`),
          ...(withStatement ? [`-- the statement that wanted the lock: ${commentText(withStatement.statement!, 300)}`] : []),
          "SELECT name, setting FROM pg_settings WHERE name IN ('deadlock_timeout', 'log_lock_waits', 'log_autovacuum_min_duration');",
        ],
        how_to_fix: parts ? [`VACUUM (VERBOSE, ANALYZE) ${pgQualified(parts.schema, parts.name)};   -- at a quiet moment; not cancelled by lock requests`] : [],
        metrics: { cancellations: count, blocker_pids: blockers.length > 0 ? blockers.join(',') : null },
      })
    }
    return findings
  },
}
