// Sessions waiting for a lock another session holds, grouped by the root blocker: the session at the
// head of the chain (it blocks others and waits for nobody), which is the one to act on. Waits come
// from the locks snapshot (pg_locks.waitstart on PostgreSQL 14+), else from the waiting statement's
// start. PostgreSQL itself logs a wait past deadlock_timeout (1 s) with log_lock_waits, and PgHero
// lists every blocked query; dbm warns once a session has waited 30 s (a web request has given up by
// then) and goes critical at 5 minutes, or when 10 sessions queue behind one blocker (a pile-up that
// eats the connection slots).
import type { ActiveQuery } from '../../../../shared/wire.ts'
import { type FindingDraft, type Rule, duration, severityAbove } from '../../types.ts'
import { cancelStatement, terminateSession } from '../../session-commands.ts'
import { pgNumber } from '../../sql-text.ts'
import { sessionWho, titleText } from '../../session-title.ts'

const defaults = {
  warning_wait_s: 30,
  critical_wait_s: 300,
  critical_sessions: 10,
  /** Root blockers named one finding each; the rest are counted in one more. */
  max_findings: 10,
}

const short = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

export const blockedSessions: Rule<typeof defaults> = {
  id: 'pg_blocked_sessions',
  summary: 'Sessions waiting for a lock, grouped by the root blocker to act on.',
  collectors: ['activity', 'locks'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(blockedSessions)
    const [{ ts, entries }, locks] = await Promise.all([ctx.activity(), ctx.locks()])
    const byPid = new Map(entries.map((a) => [Number(a.pid), a]))
    const waiting = entries.filter((a) => a.blocking_pids.length > 0)
    if (waiting.length === 0) return []
    // How long each waiter has waited: its ungranted lock's age, else its statement's.
    const waitMs = (a: ActiveQuery) =>
      locks.entries.find((l) => l.pid === Number(a.pid) && !l.granted)?.duration_ms ?? a.duration_ms ?? 0
    const relationOf = (a: ActiveQuery) =>
      locks.entries.find((l) => l.pid === Number(a.pid) && !l.granted)?.relation_name ?? null
    // The roots of a waiter: follow blocking_pids up to sessions that wait for nobody (pid 0 is a prepared transaction).
    const rootsOf = (pid: number, seen = new Set<number>()): number[] => {
      seen.add(pid)
      return byPid.get(pid)!.blocking_pids.flatMap((b) => {
        const blocker = byPid.get(b)
        if (!blocker || blocker.blocking_pids.length === 0) return [b]
        return seen.has(b) ? [] : rootsOf(b, seen)
      })
    }
    const groups = new Map<number, ActiveQuery[]>()
    for (const w of waiting)
      for (const root of new Set(rootsOf(Number(w.pid)))) groups.set(root, [...(groups.get(root) ?? []), w])
    const ranked = [...groups]
      .map(([root, blocked]) => ({ root, blocked, longest: Math.max(...blocked.map(waitMs)) }))
      .sort((a, b) => b.longest - a.longest || b.blocked.length - a.blocked.length)
    const severityOf = (g: (typeof ranked)[number]) =>
      g.blocked.length >= t.critical_sessions
        ? 'critical'
        : severityAbove(g.longest / 1000, t.warning_wait_s, t.critical_wait_s)
    const flagged = ranked.filter((g) => severityOf(g) !== undefined)
    const findings: FindingDraft[] = flagged.slice(0, t.max_findings).map((g) => {
      const root = byPid.get(g.root)
      const relations = [...new Set(g.blocked.map(relationOf).filter((r): r is string => r !== null))]
      const rootText =
        g.root === 0
          ? 'a prepared transaction (pid 0: two-phase commit left pending)'
          : root
            ? `pid ${g.root} (${[root.user && `user ${root.user}`, root.application_name && `application "${root.application_name}"`].filter(Boolean).join(', ') || 'unknown session'}, ` +
              `${root.state}${root.state?.startsWith('idle in transaction') ? ` for ${duration(root.duration_ms ?? 0)}` : ''}` +
              `${root.xact_start ? `, transaction open for ${duration(ctx.now - root.xact_start)}` : ''}; ${root.state === 'active' ? 'running' : 'last statement'}: ${short(root.query_text)})`
            : `pid ${g.root} (not in the activity snapshot: an idle session holding a session-level lock, or one of another database)`
      const pids = g.blocked.map((b) => b.pid)
      const fix =
        g.root === 0
          ? [
              "SELECT gid, prepared, owner, database FROM pg_prepared_xacts ORDER BY prepared;   -- then COMMIT PREPARED '<gid>' or ROLLBACK PREPARED '<gid>'",
            ]
          : root?.state === 'active'
            ? [
                cancelStatement(root, {
                  seenAt: ts,
                  effect:
                    'cancels its statement; if the lock stays held (an open transaction), write pg_terminate_backend in place of pg_cancel_backend',
                }),
              ]
            : [
                terminateSession(root ?? { pid: g.root }, {
                  seenAt: ts,
                  effect: 'rolls back its transaction and releases its locks',
                }),
              ]
      return {
        severity: severityOf(g)!,
        object: g.root === 0 ? 'prepared transaction' : `pid ${g.root}`,
        // The blocker by name and the first table its waiters wait on: two pile-ups as long read apart.
        title: `${g.blocked.length} session${g.blocked.length === 1 ? '' : 's'} blocked for up to ${duration(g.longest)} by ${
          g.root === 0
            ? `a prepared transaction${relations.length > 0 ? `, on ${titleText([...relations].sort()[0]!, 60)}` : ''}`
            : sessionWho(root ?? { pid: g.root }, [...relations].sort()[0])
        }`,
        detail:
          `${rootText} blocks ${g.blocked.length} session${g.blocked.length === 1 ? '' : 's'} (pid ${pids.join(', ')})` +
          `${relations.length > 0 ? ` waiting on ${relations.join(', ')}` : ''}; the longest has waited ${duration(g.longest)}: ` +
          `${short(g.blocked.reduce((a, b) => (waitMs(b) > waitMs(a) ? b : a)).query_text)}`,
        recommendation:
          'Release the blocker: cancel its statement or end its session (an idle-in-transaction blocker can only be ended). ' +
          'Then keep it from recurring: short transactions, lock_timeout on migrations and DDL, idle_in_transaction_session_timeout.',
        how_to_investigate: [
          'SELECT pid, pg_blocking_pids(pid) AS blocked_by, wait_event_type, wait_event, now() - query_start AS waiting_for, left(query, 200) FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0;',
          `SELECT pid, usename, application_name, state, now() - xact_start AS transaction_age, now() - state_change AS in_state_for, query FROM pg_stat_activity WHERE pid = ${g.root};`,
          `SELECT pid, locktype, relation::regclass, mode, granted FROM pg_locks WHERE pid IN (${[g.root, ...pids].map(pgNumber).join(', ')}) ORDER BY granted DESC, pid;`,
        ],
        how_to_fix: [
          ...fix,
          "SET lock_timeout = '5s';   -- in migrations and DDL sessions, so they give up instead of queueing everyone behind them",
        ],
        objects: [g.root === 0 ? 'prepared transaction' : `pid ${g.root}`, ...pids.map((p) => `pid ${p}`)],
        metrics: { root_pid: g.root, blocked_sessions: g.blocked.length, longest_wait_s: Math.round(g.longest / 1000) },
      }
    })
    const rest = flagged.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((g) => severityOf(g) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more blocking sessions`,
        detail: `Besides the ${t.max_findings} named, ${rest.length} more sessions block others: ${rest
          .slice(0, 20)
          .map((g) => `pid ${g.root} (${g.blocked.length} waiting, up to ${duration(g.longest)})`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation:
          'Many independent blockers at once usually mean a hot row or table that every transaction updates; look for it in the waiting locks.',
        how_to_investigate: [
          'SELECT l.relation::regclass, l.mode, count(*) FROM pg_locks l WHERE NOT l.granted GROUP BY 1, 2 ORDER BY 3 DESC;',
        ],
        how_to_fix: [
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN (SELECT unnest(pg_blocking_pids(pid)) FROM pg_stat_activity) AND state LIKE 'idle in transaction%' AND backend_type = 'client backend' AND datname = current_database();   -- the blockers idle in a transaction in the database you run it in",
        ],
        objects: rest.map((g) => `pid ${g.root}`),
        metrics: { blockers: rest.length },
      })
    }
    return findings
  },
}
