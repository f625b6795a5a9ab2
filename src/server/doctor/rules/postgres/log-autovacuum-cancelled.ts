// Autovacuum on a table cancelled again and again (the log's "canceling autovacuum task", with the table
// from its CONTEXT): a session asked for a lock that conflicts with the vacuum's (ALTER, TRUNCATE, LOCK,
// CREATE INDEX without CONCURRENTLY, a long migration) and the deadlock detector cancelled the vacuum
// after deadlock_timeout. A table whose autovacuum never finishes keeps its dead rows, bloats and, in the
// end, is vacuumed by the anti-wraparound vacuum that is not cancelled. Warning at 3 cancellations of
// one table in an hour, naming the blocking process and its statement when the log gives them. The fix
// is a manual VACUUM at a quiet moment (it is not cancelled so) and finding the job that takes the lock.
// PostgreSQL 13+ logs "sending cancel to blocking autovacuum PID" only at DEBUG1, so the cancel itself
// rarely names who wanted the lock; with log_lock_waits on, the waiter logs "still waiting for ... on
// relation" at the same moment, listing the autovacuum's pid among the lock's holders, with its own pid
// and statement: that entry is joined to the cancel (holders containing the cancelled worker's pid
// within a minute, or, when the wait names no holders, a wait logged within a second before the cancel).
import type { StoredLogEntry } from '../../../store/logs/types.ts'
import { commentText, pgQualified, pgRegclass } from '../../sql-text.ts'
import type { FindingDraft, Rule } from '../../types.ts'
import { logEntries, logExcerpt, numberField, settings, textField } from './log-evidence.ts'

/** A lock wait listing the cancelled worker among the holders counts within this time of the cancel. */
const HOLDER_JOIN_MS = 60_000
/** A lock wait naming no holders counts when logged this long before the cancel at most. */
const MOMENT_JOIN_MS = 1_000

const pidsOf = (v: unknown): number[] =>
  (Array.isArray(v) ? v : typeof v === 'number' ? [v] : typeof v === 'string' ? v.split(/[,\s]+/) : [])
    .map(Number)
    .filter((n) => Number.isSafeInteger(n) && n > 0)

/** The logged lock wait of the session whose lock request cancelled this autovacuum, when the log has one. */
export function waiterOf(cancel: StoredLogEntry, waits: readonly StoredLogEntry[]): StoredLogEntry | null {
  let best: StoredLogEntry | null = null
  for (const w of waits) {
    const holders = pidsOf(w.fields.holders)
    const gap = cancel.ts - w.ts
    const joined =
      holders.length > 0
        ? cancel.pid !== null && holders.includes(cancel.pid) && Math.abs(gap) <= HOLDER_JOIN_MS
        : gap >= 0 && gap <= MOMENT_JOIN_MS
    if (joined && (best === null || Math.abs(gap) < Math.abs(cancel.ts - best.ts))) best = w
  }
  return best
}

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
export function tableParts(
  logged: string,
  known: readonly { schema_name: string; table_name: string }[] = [],
): { schema: string; name: string } | null {
  const match = known.find(
    (t) => logged === `${t.schema_name}.${t.table_name}` || logged.endsWith(`.${t.schema_name}.${t.table_name}`),
  )
  if (match) return { schema: match.schema_name, name: match.table_name }
  const parts = logged.split('.')
  if (parts.length === 3) return { schema: parts[1]!, name: parts[2]! }
  if (parts.length === 2) return { schema: parts[0]!, name: parts[1]! }
  return null
}

export const logAutovacuumCancelled: Rule<typeof defaults> = {
  id: 'pg_log_autovacuum_cancelled',
  summary:
    'Autovacuum on a table cancelled again and again by sessions asking for conflicting locks (named from the log).',
  collectors: ['log_events', 'tables'],
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(logAutovacuumCancelled)
    const entries = await logEntries(ctx, ['autovacuum_cancelled'], t.window_minutes * 60_000)
    const waits =
      entries.length > 0 ? await logEntries(ctx, ['lock_wait'], t.window_minutes * 60_000 + HOLDER_JOIN_MS) : []
    const lockWaitsLogged = /^(on|true|yes|1)$/i.test((await settings(ctx))?.log_lock_waits ?? '')
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
    const ranked = [...byTable]
      .map(([table, list]) => ({ table, list, count: list.reduce((n, e) => n + e.count, 0) }))
      .sort((a, b) => b.count - a.count)
    for (const { table, list, count } of ranked.slice(0, t.max_tables)) {
      if (count < t.warning_count) continue
      // Who wanted the lock: the joined lock waits (pid, statement, mode), else the cancel's own blocker_pid.
      const joined = list.map((e) => waiterOf(e, waits)).filter((w): w is StoredLogEntry => w !== null)
      const blockers = [
        ...new Set(
          [...joined.map((w) => w.pid), ...list.map((e) => numberField(e, 'blocker_pid'))].filter(
            (p): p is number => p !== null,
          ),
        ),
      ]
      const withStatement = joined.find((w) => w.statement !== null) ?? list.find((e) => e.statement !== null)
      const mode = joined.map((w) => textField(w, 'mode')).find((m) => m !== null) ?? null
      const parts = tableParts(table, known)
      const holder =
        blockers.length > 0 || withStatement
          ? ` The lock was wanted by ${blockers.length > 0 ? `pid ${blockers.slice(0, 5).join(', ')}` : 'a session'}` +
            (mode ? ` (${mode})` : '') +
            (withStatement ? ` running: ${logExcerpt(withStatement.statement!)}` : '') +
            (withStatement?.user
              ? ` (user ${withStatement.user}${withStatement.application ? `, application ${withStatement.application}` : ''})`
              : '') +
            (joined.length > 0
              ? `, as its lock wait${joined.length === 1 ? '' : 's'} logged at the same moment show${joined.length === 1 ? 's' : ''}`
              : '') +
            '.'
          : lockWaitsLogged
            ? ' The log names no session that waited for the table at those moments (the lock waits were shorter than deadlock_timeout, or their entries were not sent).'
            : ' The log does not say which session wanted the lock: with log_lock_waits on, the waiting session logs its statement when the cancel happens.'
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
          ...(parts
            ? [
                `SELECT relname, n_dead_tup, last_autovacuum, last_vacuum, autovacuum_count FROM pg_stat_user_tables WHERE relid = ${pgRegclass(parts.schema, parts.name)};`,
              ]
            : []),
          ...blockers
            .slice(0, 3)
            .map(
              (p) =>
                `SELECT pid, usename, application_name, state, xact_start, left(query, 200) FROM pg_stat_activity WHERE pid = ${p};`,
            ),
          ...(withStatement
            ? [`-- the statement that wanted the lock: ${commentText(withStatement.statement!, 300)}`]
            : []),
          "SELECT name, setting FROM pg_settings WHERE name IN ('deadlock_timeout', 'log_lock_waits', 'log_autovacuum_min_duration');",
        ],
        how_to_fix: [
          ...(parts
            ? [
                `VACUUM (VERBOSE, ANALYZE) ${pgQualified(parts.schema, parts.name)};   -- at a quiet moment; not cancelled by lock requests`,
              ]
            : []),
          ...(lockWaitsLogged || blockers.length > 0
            ? []
            : [
                'ALTER SYSTEM SET log_lock_waits = on; SELECT pg_reload_conf();   -- the session that cancels the next vacuum logs its statement',
              ]),
        ],
        metrics: {
          cancellations: count,
          blocker_pids: blockers.length > 0 ? blockers.join(',') : null,
          lock_waits_joined: joined.length,
        },
      })
    }
    return findings
  },
}
