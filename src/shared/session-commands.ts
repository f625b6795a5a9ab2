// The one way the doctor writes a command that ends or cancels a PostgreSQL backend it names. A pid is
// reused once its session ends, so a bare `pg_terminate_backend(909)` pasted later can hit a stranger:
// every such command selects the backend from pg_stat_activity by the pid together with what the agent
// reported of that session (its start, role and application) and of the moment the finding is about
// (the transaction's or the statement's start). When nothing matches any more, the command returns no
// row and does nothing. Values from the monitored database go through sql-text.ts.
import { commentText, pgNumber, pgString } from './sql-text.ts'

/** What the agent reported of a session (an activity entry or an xmin holder); times are epoch milliseconds. */
export interface ReportedSession {
  pid: number | string
  user?: string | null
  application_name?: string | null
  backend_start?: number | null
  xact_start?: number | null
  query_start?: number | null
}

export interface SessionCommandOptions {
  /**
   * What the command acts on besides the session: `transaction` matches its transaction's start
   * (ending a session for what its open transaction holds), `statement` its statement's start (a
   * cancel; an older agent's report without it falls back to the transaction's start).
   */
  moment: 'transaction' | 'statement'
  /** When the report was taken (epoch ms, the agent's clock): with nothing else timed known, the backend must have started by then. */
  seenAt?: number | null
  /** What running it does, for its comment: `rolls back its transaction and ends the session`. */
  effect: string
}

const NO_ROW = 'returns no row if that session has already ended'

/** Why a live session may also give no row: pg_stat_activity shows other roles' start times only to some. */
const SEEN_BY =
  "; run it as a superuser, a member of pg_read_all_stats or the session's own role (to others its start times are hidden, and it finds no row)"

/** An epoch-millisecond time as a PostgreSQL timestamptz constant (UTC, ISO 8601); undefined when it is no time. */
function timestamp(ms: number): string | undefined {
  try {
    return `timestamptz ${pgString(new Date(ms).toISOString())}`
  } catch {
    return undefined
  }
}

/**
 * `column` within a millisecond of `ms`: the agent's times are milliseconds (truncated or rounded)
 * while PostgreSQL keeps microseconds, so an equality would never hold.
 */
function within(column: string, ms: number): string | undefined {
  const t = timestamp(ms)
  return t && `abs(extract(epoch FROM ${column} - ${t})) < 0.001`
}

/** The backend existed when the report was taken (by the agent's clock). */
function startedBy(ms: number): string | undefined {
  const t = timestamp(ms)
  return t && `backend_start <= ${t}`
}

const known = (v: number | null | undefined): v is number => typeof v === 'number' && Number.isFinite(v)

/**
 * `SELECT <fn>(pid) FROM pg_stat_activity WHERE pid = N AND ...;   -- <effect>; returns no row if that
 * session has already ended`: the conditions are the pid, the session's start, its role and application,
 * and the transaction's or statement's start, each one the report carries. A report with neither the
 * session's start nor the moment's (an older agent, a blocker outside the activity snapshot) keeps the
 * backends that started after it was taken out, and the comment says how little is known.
 */
export function sessionCommand(
  fn: 'pg_terminate_backend' | 'pg_cancel_backend',
  s: ReportedSession,
  options: SessionCommandOptions,
): string {
  const started = known(s.backend_start) ? within('backend_start', s.backend_start) : undefined
  const moment =
    options.moment === 'statement' && known(s.query_start)
      ? ('query_start' as const)
      : known(s.xact_start)
        ? ('xact_start' as const)
        : undefined
  const at = moment ? within(moment, s[moment]!) : undefined
  const where = [`pid = ${pgNumber(s.pid)}`]
  if (started) where.push(started)
  if (typeof s.user === 'string') where.push(`usename = ${pgString(s.user)}`)
  if (typeof s.application_name === 'string') where.push(`application_name = ${pgString(s.application_name)}`)
  if (at) where.push(at)
  let note = ''
  if (!started && !at) {
    const by = known(options.seenAt) ? startedBy(options.seenAt) : undefined
    if (by) where.push(by)
    note = by
      ? " (its start was not reported: any backend of that pid that started before dbm's report, by the agent's clock, matches)"
      : ' (only its pid is known: check that it is still the session described before running this)'
  }
  const ended = !at
    ? NO_ROW
    : moment === 'query_start'
      ? `${NO_ROW} or moved on to another statement`
      : `${NO_ROW} or its transaction has`
  const timed = where.length > 1 && where.some((w) => w.includes('_start'))
  return `SELECT ${fn}(pid) FROM pg_stat_activity WHERE ${where.join(' AND ')};   -- ${commentText(options.effect)}; ${ended}${note}${timed ? SEEN_BY : ''}`
}

/** Ends the session while it is still the one reported (and, when its transaction's start is known, still in that transaction). */
export const terminateSession = (s: ReportedSession, options: Omit<SessionCommandOptions, 'moment'>) =>
  sessionCommand('pg_terminate_backend', s, { moment: 'transaction', ...options })

/** Cancels the statement the session was reported running, while it still runs it. */
export const cancelStatement = (s: ReportedSession, options: Omit<SessionCommandOptions, 'moment'>) =>
  sessionCommand('pg_cancel_backend', s, { moment: 'statement', ...options })
