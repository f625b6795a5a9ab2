// Sessions sitting 'idle in transaction': the application opened a transaction and stopped talking
// while keeping it open, holding its locks and its snapshot (VACUUM cannot clean up behind it). The
// activity collector times such a session from its last state change, how long it has sat idle; the
// transaction's own age comes from xact_start. Thresholds: salsify's postgres-vacuum-monitor reports
// transactions open over 5 minutes (warning); postgres-checkup (G002) calls over an hour P1 (critical).
import type { ActiveQuery } from '../../../../shared/wire.ts'
import { type FindingDraft, type Rule, duration, severityAbove } from '../../types.ts'
import { terminateSession } from '../../session-commands.ts'
import { pgIdent } from '../../sql-text.ts'
import { firstHeldRelation, sessionWho } from '../../session-title.ts'

const defaults = {
  warning_s: 300,
  critical_s: 3600,
  /** Sessions named one finding each; the rest are counted in one more. */
  max_findings: 10,
}

const short = (text: string, max = 300) => (text.length > max ? `${text.slice(0, max)}…` : text)

export const idleInTransaction: Rule<typeof defaults> = {
  id: 'pg_idle_in_transaction',
  summary: 'Sessions idle in a transaction, holding its locks and snapshot while the application does nothing.',
  collectors: ['activity', 'locks'],
  engine: 'postgres',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(idleInTransaction)
    const [{ ts, entries }, locks] = await Promise.all([ctx.activity(), ctx.locks()])
    const idle = entries
      .filter((a) => (a.state ?? '').startsWith('idle in transaction') && (a.duration_ms ?? 0) >= t.warning_s * 1000)
      .sort((a, b) => b.duration_ms! - a.duration_ms!)
    const severityOf = (a: ActiveQuery) => severityAbove(a.duration_ms! / 1000, t.warning_s, t.critical_s)!
    const findings: FindingDraft[] = idle.slice(0, t.max_findings).map((a) => {
      const pid = Number(a.pid)
      const xactAge = a.xact_start ? ctx.now - a.xact_start : null
      const held = locks.entries.filter((l) => l.pid === pid && l.granted).length
      // The first table it holds a lock on, by name, for the title.
      const relation = firstHeldRelation(locks.entries, pid)
      const blocked = entries.filter((b) => b.blocking_pids.includes(pid)).map((b) => b.pid)
      const aborted = a.state === 'idle in transaction (aborted)'
      const role = a.user ? pgIdent(a.user) : '<role>'
      return {
        severity: severityOf(a),
        object: `pid ${pid}`,
        title: `Session idle in a transaction for ${duration(a.duration_ms!)}: ${sessionWho(a, relation)}`,
        detail:
          `pid ${pid} (${[a.user && `user ${a.user}`, a.application_name && `application "${a.application_name}"`, a.client_addr && `from ${a.client_addr}`].filter(Boolean).join(', ') || 'unknown session'}) ` +
          `has sat idle inside ${aborted ? 'a failed (aborted) transaction' : 'a transaction'} for ${duration(a.duration_ms!)}` +
          `${xactAge !== null ? `; the transaction has been open for ${duration(xactAge)}` : ''}. ` +
          `It holds ${held} lock${held === 1 ? '' : 's'}${blocked.length > 0 ? ` and blocks ${blocked.length} session${blocked.length === 1 ? '' : 's'} (pid ${blocked.join(', ')})` : ''}. ` +
          `Its last statement: ${short(a.query_text)}`,
        recommendation:
          'The application began a transaction and stopped without committing or rolling back (a missing commit on an error path, or work done between statements). ' +
          'End the session if its owner cannot finish it, fix the code path, and set idle_in_transaction_session_timeout so PostgreSQL ends such sessions by itself.',
        how_to_investigate: [
          `SELECT pid, usename, application_name, client_addr, state, now() - state_change AS idle_for, now() - xact_start AS transaction_age, backend_xid, backend_xmin, query FROM pg_stat_activity WHERE pid = ${pid};`,
          `SELECT locktype, relation::regclass, mode, granted FROM pg_locks WHERE pid = ${pid};`,
          `SELECT pid, now() - query_start AS waiting_for, query FROM pg_stat_activity WHERE ${pid} = ANY(pg_blocking_pids(pid));`,
        ],
        how_to_fix: [
          terminateSession(a, { seenAt: ts, effect: 'rolls back its transaction and ends the session' }),
          `ALTER ROLE ${role} SET idle_in_transaction_session_timeout = '${Math.max(1, Math.round(t.warning_s / 60))}min';   -- the role's new sessions`,
          `ALTER SYSTEM SET idle_in_transaction_session_timeout = '${Math.max(1, Math.round(t.critical_s / 60))}min'; SELECT pg_reload_conf();   -- server-wide default`,
        ],
        metrics: {
          pid,
          idle_s: Math.round(a.duration_ms! / 1000),
          transaction_age_s: xactAge === null ? null : Math.round(xactAge / 1000),
          locks_held: held,
          sessions_blocked: blocked.length,
        },
      }
    })
    const rest = idle.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((a) => severityOf(a) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more sessions idle in a transaction`,
        detail: `Besides the ${t.max_findings} named, ${rest.length} more sessions have sat idle in a transaction for over ${duration(t.warning_s * 1000)}: ${rest
          .slice(0, 20)
          .map((a) => `pid ${a.pid} (${duration(a.duration_ms!)})`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation:
          'Many such sessions at once point to one application code path (or a connection pool that leaks transactions): find it by application_name.',
        how_to_investigate: [
          `SELECT application_name, usename, count(*), max(now() - state_change) AS longest_idle FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' GROUP BY 1, 2 ORDER BY 3 DESC;`,
        ],
        how_to_fix: [
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND backend_type = 'client backend' AND datname = current_database() AND now() - state_change > interval '${t.warning_s} seconds';   -- the sessions of the database you run it in, as listed`,
        ],
        objects: rest.map((a) => `pid ${a.pid}`),
        metrics: { sessions: rest.length },
      })
    }
    return findings
  },
}
