// Statements that have been running for a long time (pg_stat_activity state 'active', timed from
// query_start): each holds its locks and its snapshot all along, so it blocks DDL and VACUUM's cleanup.
// Thresholds: pghero.sql and pg-extras call "long running" the queries over five minutes (warning);
// postgres-checkup (G002) treats anything open over an hour as a P1 problem (critical). A statement
// waiting for a lock is left to pg_blocked_sessions, which names what it waits for.
import type { ActiveQuery } from '../../../../shared/wire.ts'
import { type FindingDraft, type Rule, duration, severityAbove } from '../../types.ts'
import { cancelStatement } from '../../session-commands.ts'
import { pgIdent, pgNumber } from '../../sql-text.ts'
import { firstHeldRelation, sessionWho } from '../../session-title.ts'

const defaults = {
  warning_s: 300,
  critical_s: 3600,
  /** Statements named one finding each; the rest are counted in one more. */
  max_findings: 10,
}

const short = (text: string, max = 300) => (text.length > max ? `${text.slice(0, max)}…` : text)

function who(a: ActiveQuery): string {
  const parts = [
    a.user && `user ${a.user}`,
    a.application_name && `application "${a.application_name}"`,
    a.database && `database ${a.database}`,
    a.client_addr && `from ${a.client_addr}`,
  ]
  return parts.filter(Boolean).join(', ')
}

export const longRunningQueries: Rule<typeof defaults> = {
  id: 'pg_long_running_queries',
  summary: 'Statements running for a long time, holding their locks and snapshot all along.',
  collectors: ['activity', 'locks'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(longRunningQueries)
    const [{ ts, entries }, locks] = await Promise.all([ctx.activity(), ctx.locks()])
    const long = entries
      .filter((a) => a.state === 'active' && a.blocking_pids.length === 0 && (a.duration_ms ?? 0) >= t.warning_s * 1000)
      .sort((a, b) => b.duration_ms! - a.duration_ms!)
    const severityOf = (a: ActiveQuery) => severityAbove(a.duration_ms! / 1000, t.warning_s, t.critical_s)!
    const findings: FindingDraft[] = long.slice(0, t.max_findings).map((a) => {
      const xactAge = a.xact_start ? ctx.now - a.xact_start : null
      const role = a.user ? pgIdent(a.user) : '<role>'
      const pid = pgNumber(a.pid)
      return {
        severity: severityOf(a),
        object: `pid ${a.pid}`,
        // The session and the first table it holds a lock on: two statements running as long read apart.
        title: `Statement running for ${duration(a.duration_ms!)}: ${sessionWho(a, firstHeldRelation(locks.entries, Number(a.pid)))}`,
        detail:
          `pid ${a.pid} (${who(a) || 'unknown session'}) has been running one statement for ${duration(a.duration_ms!)}` +
          `${xactAge !== null ? ` in a transaction open for ${duration(xactAge)}` : ''}` +
          `${a.wait_event ? `, now waiting on ${a.wait_event_type}/${a.wait_event}` : ''}: ${short(a.query_text)}`,
        recommendation:
          'Find out whether this statement is expected to run this long (a report, a migration, a batch job). If not, cancel it; ' +
          'a statement_timeout for the role or application that runs it stops the next runaway statement by itself.',
        how_to_investigate: [
          `SELECT pid, usename, application_name, client_addr, now() - query_start AS running_for, now() - xact_start AS transaction_age, wait_event_type, wait_event, query FROM pg_stat_activity WHERE pid = ${pid};`,
          `SELECT locktype, relation::regclass, mode, granted FROM pg_locks WHERE pid = ${pid};`,
          `SELECT pid, now() - query_start AS waiting_for, query FROM pg_stat_activity WHERE ${pid} = ANY(pg_blocking_pids(pid));`,
        ],
        how_to_fix: [
          cancelStatement(a, {
            seenAt: ts,
            effect: 'cancels the statement (pg_terminate_backend in place of pg_cancel_backend also ends the session)',
          }),
          `ALTER ROLE ${role} SET statement_timeout = '${Math.max(1, Math.round(t.warning_s / 60))}min';   -- applies to the role's new sessions`,
        ],
        metrics: {
          pid: Number(a.pid),
          running_s: Math.round(a.duration_ms! / 1000),
          transaction_age_s: xactAge === null ? null : Math.round(xactAge / 1000),
        },
      }
    })
    const rest = long.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((a) => severityOf(a) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more long-running statements`,
        detail: `Besides the ${t.max_findings} longest, ${rest.length} more statements have run for over ${duration(t.warning_s * 1000)}: ${rest
          .slice(0, 20)
          .map((a) => `pid ${a.pid} (${duration(a.duration_ms!)})`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation:
          'So many long statements at once usually share a cause: a slow plan after a deploy, a missing index, or lock contention. Look at them together.',
        how_to_investigate: [
          `SELECT pid, usename, application_name, now() - query_start AS running_for, wait_event_type, wait_event, left(query, 200) FROM pg_stat_activity WHERE state = 'active' AND now() - query_start > interval '${t.warning_s} seconds' ORDER BY query_start;`,
        ],
        how_to_fix: [
          `SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend' AND datname = current_database() AND now() - query_start > interval '${t.warning_s} seconds' AND pid <> pg_backend_pid();   -- the statements of the database you run it in, as listed`,
        ],
        objects: rest.map((a) => `pid ${a.pid}`),
        metrics: { statements: rest.length },
      })
    }
    return findings
  },
}
