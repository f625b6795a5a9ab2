// The agent's side of the dashboard's actions (src/server/routes/actions.ts): one poller per PostgreSQL
// database long-polls GET /api/v1/agent/actions (answered as soon as an action is pending, else after
// 20 s) and runs what it is handed, kills at once and one at a time, explains one at a time on a lane of
// their own, then posts each result. The ingest answer's
// actions_pending wakes a poller that is pausing after a failure.
//
// Only what the database's allow_actions lets it run (default: explain; `dbm local`: all three); anything
// else is refused with the reason and the line to add. Each action runs on a connection of its own (not the
// collectors' pool, which a slow cycle may hold), opened for it and closed after, with a statement and
// lock timeout and a deadline over the whole run. An action is never run after its expiry: the agent
// checks it (on its own clock, from the expires_in_ms it was handed) right before each action starts and
// again right before the statement that signals or plans, and refuses it when it has passed. In a batch,
// kills (cancel, terminate) run before explains. A fault (the API away, the database down, a refused login) is logged and retried later: the
// agent never stops for it.
// - cancel, terminate: the guarded selection of src/shared/session-commands.ts, parameterised: the
//   backend must have the pid, the session's start (within a millisecond), its role and application, and
//   the statement's start (cancel) or the transaction's (terminate) as the dashboard reported them; a pid
//   reused by another session matches nothing and no backend is signalled (signalled: false).
// - explain: the statement's text is read from pg_stat_statements by its queryid (no text from the
//   dashboard is ever run), and planned under the plan sampler's rules (collectors/postgres/explain-plans.ts):
//   only a top-level statement a trusted role ran, no writable schema on the search_path, no function or
//   operator of an untrusted role, every object the PREPARE locks a trusted role's; EXPLAIN (FORMAT JSON),
//   never ANALYZE, in a READ ONLY transaction, with the values bound as constants (a custom plan). Every
//   statement of an explain, the EXPLAIN too, runs under a 1 s statement timeout, and a database's
//   explains run one at a time, on a lane apart from its kills.
import type postgres from 'postgres'
import { ACTION_KINDS, type ActionKind, DEFAULT_ALLOWED_ACTIONS } from '../shared/action-kinds.ts'
import { AGENT_ACTIONS_PATH } from '../shared/ingest-path.ts'
import type { AgentAction, AgentActionResult, AgentActions } from '../shared/wire.ts'
import type { AgentLogger } from './collectors/types.ts'
import type { DatabaseConfig } from './config.ts'
import {
  EXPLAINABLE,
  UntrustedCodeAppeared,
  UntrustedObjects,
  explainOne,
  noToplevelAdvice,
  grantHint,
  parameterCount,
  trustLine,
  trustedRoles,
  untrustedAdvice,
  untrustedCode,
  writableAdvice,
  writableSearchPath,
} from './collectors/postgres/explain-plans.ts'
import { featuresOf } from './collectors/postgres/query-stats.ts'
import { addArrayTypes, agentPostgres, fetchArrayTypes } from './own-statements.ts'
import { VERSION } from '../version.ts'

export interface ActionPollerOptions {
  endpoint: string
  apiKey: string
  database: DatabaseConfig
  log: AgentLogger
  /** The long-poll's wait, seconds (the server answers within it). */
  waitSeconds?: number
  /** The pause after a failed poll (doubles up to 60 s). */
  retryMs?: number
  /** Over one action's run: connecting, checking and running it. */
  deadlineMs?: number
  /** An explain's statement timeout, each of its statements (the EXPLAIN too); default 1 s. */
  explainTimeoutMs?: number
}

/**
 * Explains run one at a time per database (by its name in the agent config), on a lane apart from the
 * poller's loop: kills go on being taken and run while an explain plans.
 */
const explainLanes = new Map<string, Promise<void>>()

/** What a database's agent allows: its allow_actions, else explain only. */
export const allowedActions = (db: Pick<DatabaseConfig, 'allowActions'>): readonly ActionKind[] =>
  db.allowActions ?? DEFAULT_ALLOWED_ACTIONS

const cut = (text: string, max = 2_000) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

/** A refusal the dashboard shows as it is. */
class Refusal extends Error {}

/** 404: the database is not registered yet (before its first batch), or the server predates actions. */
class NotRegistered extends Error {}

export class ActionPoller {
  private stopped = false
  private controller = new AbortController()
  private loop: Promise<void> | undefined
  private wakeUp: (() => void) | undefined

  constructor(private readonly options: ActionPollerOptions) {}

  start(): void {
    this.loop ??= this.run()
  }

  /** Polls at once (the ingest answer said actions wait) when pausing after a failure. */
  poke(): void {
    this.wakeUp?.()
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.controller.abort()
    this.wakeUp?.()
    await this.loop
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        resolve()
      }
      this.wakeUp = done
    })
  }

  private async run(): Promise<void> {
    const { database, log } = this.options
    let failures = 0
    while (!this.stopped) {
      let actions: AgentAction[]
      let receivedAt: number
      try {
        actions = await this.poll()
        receivedAt = performance.now()
        failures = 0
      } catch (e) {
        if (this.stopped) break
        if (e instanceof NotRegistered) {
          // Quietly: the first accepted batch wakes the poller (agent.ts), and an older server never has actions.
          await this.pause(60_000)
          continue
        }
        failures++
        const waitMs = Math.min(60_000, (this.options.retryMs ?? 5_000) * 2 ** Math.min(failures - 1, 4))
        if (failures === 1 || failures % 20 === 0)
          log.warn('actions: polling the API failed; trying again', {
            database: database.name,
            cause: (e as Error).message,
            retry_ms: waitMs,
          })
        await this.pause(waitMs)
        continue
      }
      // Kills first, here: a cancel or terminate never waits behind an explain. Explains go to the
      // database's lane, one at a time, each checked against its expiry when its turn comes.
      for (const action of [...actions].sort(killsFirst)) {
        if (this.stopped) break
        const startBy = receivedAt + action.expires_in_ms
        if (action.kind === 'explain') this.queueExplain(action, startBy)
        else await this.handle(action, startBy)
      }
    }
    await this.lane
  }

  /** The explains this poller queued, on its database's lane (explainLanes). */
  private lane: Promise<void> = Promise.resolve()

  private queueExplain(action: AgentAction, startBy: number): void {
    const name = this.options.database.name
    const turn = (explainLanes.get(name) ?? Promise.resolve()).then(() =>
      this.stopped ? undefined : this.handle(action, startBy),
    )
    explainLanes.set(name, turn)
    this.lane = turn
    void turn.finally(() => {
      if (explainLanes.get(name) === turn) explainLanes.delete(name)
    })
  }

  private async handle(action: AgentAction, startBy: number): Promise<void> {
    const { database, log } = this.options
    const result = await this.execute(action, startBy)
    log.info('action handled', {
      database: database.name,
      kind: action.kind,
      id: action.id,
      outcome: result.outcome,
      signalled: result.signalled,
    })
    await this.report(action.id, result)
  }

  private headers() {
    return {
      'content-type': 'application/json',
      'x-api-key': this.options.apiKey,
      'user-agent': `dbm-agent/${VERSION}`,
    }
  }

  private async poll(): Promise<AgentAction[]> {
    const wait = this.options.waitSeconds ?? 20
    const q = new URLSearchParams({
      database: this.options.database.name,
      wait: String(wait),
      allow: allowedActions(this.options.database).join(','),
    })
    const signal = AbortSignal.any([this.controller.signal, AbortSignal.timeout((wait + 15) * 1000)])
    const res = await fetch(`${this.options.endpoint}${AGENT_ACTIONS_PATH}?${q}`, { headers: this.headers(), signal })
    const body = (await res.json().catch(() => undefined)) as (AgentActions & { error?: string }) | undefined
    if (res.status === 404) throw new NotRegistered(String(body?.error ?? 'not found'))
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${cut(String(body?.error ?? 'no answer'), 200)}`)
    return Array.isArray(body?.actions) ? body.actions : []
  }

  /** Posts the result, a few times over a short outage; an action whose result is lost shows as expired. */
  private async report(id: string, result: AgentActionResult): Promise<void> {
    for (let attempt = 1; attempt <= 3 && !this.stopped; attempt++) {
      try {
        const res = await fetch(`${this.options.endpoint}${AGENT_ACTIONS_PATH}/${id}`, {
          method: 'POST',
          headers: this.headers(),
          body: JSON.stringify(result),
          signal: AbortSignal.timeout(15_000),
        })
        if (res.ok) return
        if (res.status >= 400 && res.status < 500) {
          // Not taken (another key is the database's agent now, or the action is over): said, not retried.
          const body = (await res.json().catch(() => undefined)) as { error?: string } | undefined
          this.options.log.warn('actions: the server refused the result', {
            database: this.options.database.name,
            id,
            status: res.status,
            cause: cut(String(body?.error ?? ''), 300),
          })
          return
        }
      } catch {}
      await this.pause(1_000 * attempt)
    }
    this.options.log.warn('actions: the result could not be posted', { database: this.options.database.name, id })
  }

  /**
   * Runs one action within its deadline; never throws. `startBy` (performance.now() time, default: its
   * expires_in_ms from now) is its expiry on this agent's clock: checked right before it starts, and again
   * right before the statement that signals or plans, so that an action is never run after it expired.
   */
  async execute(action: AgentAction, startBy = performance.now() + action.expires_in_ms): Promise<AgentActionResult> {
    const { database } = this.options
    const allowed = allowedActions(database)
    if (!(ACTION_KINDS as readonly string[]).includes(action.kind))
      return { outcome: 'refused', reason: `this agent does not know the action ${JSON.stringify(action.kind)}` }
    if (!allowed.includes(action.kind)) {
      return {
        outcome: 'refused',
        reason: `the agent config does not allow ${action.kind} for database ${JSON.stringify(database.name)} (allow_actions: [${allowed.join(', ')}]); to allow it, add ${action.kind} to allow_actions in that database's entry, or run the command shown by hand`,
      }
    }
    const expired = expiredRefusal(startBy)
    if (expired) return { outcome: 'refused', reason: expired }
    const beforeStart = () => {
      const late = expiredRefusal(startBy)
      if (late) throw new Refusal(late)
    }
    const deadlineMs = Math.min(this.options.deadlineMs ?? 20_000, startBy - performance.now() + 10_000)
    const explainMs = this.options.explainTimeoutMs ?? 1_000
    const sql = agentPostgres(database.dsn, {
      max: 1,
      connect_timeout: 10,
      onnotice: () => {},
      connection: {
        application_name: 'dbm-agent',
        statement_timeout: action.kind === 'explain' ? explainMs : 5_000,
        lock_timeout: Math.min(1_000, action.kind === 'explain' ? explainMs : 1_000),
        idle_in_transaction_session_timeout: 10_000,
      },
    })
    let timer: ReturnType<typeof setTimeout> | undefined
    try {
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${deadlineMs / 1000} s`)), deadlineMs)
      })
      const run =
        action.kind === 'explain'
          ? explain(sql, database, action, beforeStart, explainMs)
          : kill(sql, action, beforeStart)
      return await Promise.race([run, deadline])
    } catch (e) {
      if (e instanceof Refusal) return { outcome: 'refused', reason: cut(e.message) }
      const code = (e as { code?: string }).code
      const message = cut((e as Error).message)
      return { outcome: 'failed', reason: code ? `${message} (SQLSTATE ${code})` : message }
    } finally {
      clearTimeout(timer)
      // Destroyed at once: a statement still running past the deadline goes with its connection.
      await sql.end({ timeout: 0 }).catch(() => {})
    }
  }
}

/** Kills (cancel, terminate) before explains, each kind in the order handed out. */
const killsFirst = (a: AgentAction, b: AgentAction) => Number(a.kind === 'explain') - Number(b.kind === 'explain')

/** The refusal of an action whose expiry (`startBy`, performance.now() time) has passed, else undefined. */
function expiredRefusal(startBy: number): string | undefined {
  const over = performance.now() - startBy
  return over >= 0 ? `it expired ${Math.round(over)} ms before the agent could start it; it was not run` : undefined
}

/** The session's times as PostgreSQL timestamptz text. */
const iso = (ms: number) => new Date(ms).toISOString()

/** cancel or terminate: the guarded selection, parameterised (see the header). */
async function kill(sql: postgres.Sql, action: AgentAction, beforeStart: () => void): Promise<AgentActionResult> {
  const s = action.session
  if (!s || !Number.isFinite(s.backend_start)) throw new Refusal("the session's pid and start are needed")
  const fn = action.kind === 'cancel' ? 'pg_cancel_backend' : 'pg_terminate_backend'
  const where = ['pid = $1', 'abs(extract(epoch FROM backend_start - $2::timestamptz)) < 0.001']
  const params: (string | number)[] = [s.pid, iso(s.backend_start)]
  if (typeof s.user === 'string') {
    params.push(s.user)
    where.push(`usename = $${params.length}`)
  }
  if (typeof s.application_name === 'string') {
    params.push(s.application_name)
    where.push(`application_name = $${params.length}`)
  }
  const moment =
    action.kind === 'cancel' && typeof s.query_start === 'number'
      ? 'query_start'
      : typeof s.xact_start === 'number'
        ? 'xact_start'
        : undefined
  if (moment) {
    params.push(iso(s[moment]!))
    where.push(`abs(extract(epoch FROM ${moment} - $${params.length}::timestamptz)) < 0.001`)
  }
  // Connecting took time: the last check of the expiry, right before the signal.
  beforeStart()
  try {
    const rows = await sql.unsafe(
      `SELECT ${fn}(pid) AS signalled FROM pg_stat_activity WHERE ${where.join(' AND ')}`,
      params as never[],
    )
    return { outcome: 'done', signalled: rows.length > 0 && rows[0]!.signalled === true }
  } catch (e) {
    if ((e as { code?: string }).code === '42501') {
      throw new Refusal(
        `the agent's role may not signal that session (${cut((e as Error).message, 300)}): GRANT pg_signal_backend TO the agent role (it cannot signal superusers' sessions)`,
      )
    }
    throw e
  }
}

/** explain: the statement's text from pg_stat_statements, planned under the sampler's rules. */
async function explain(
  sql: postgres.Sql,
  database: DatabaseConfig,
  action: AgentAction,
  beforeStart: () => void,
  timeoutMs: number,
): Promise<AgentActionResult> {
  const hash = action.query_hash ?? ''
  if (!/^-?\d{1,20}$/.test(hash)) throw new Refusal('the statement is named by its query id (a number)')
  addArrayTypes(sql, await fetchArrayTypes(sql))
  const [extension] = await sql`SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements'`
  if (!extension)
    throw new Refusal('pg_stat_statements is not installed in this database: CREATE EXTENSION pg_stat_statements')
  if (!featuresOf(String(extension.extversion)).info) throw new Refusal(noToplevelAdvice(database.local))
  // The plan sampler's trust, to the role: under dbm local the database's owner too.
  const trusted = await trustedRoles(sql, database.explainTrustedRoles ?? [], database.explainTrustsOwner)
  const rows = await sql`
    SELECT s.query, r.rolname::text AS runner,
           COALESCE(r.rolsuper OR r.rolname = current_user OR r.rolname = ANY(${sql.array([...trusted])}::text[]), false) AS trusted
    FROM pg_stat_statements s LEFT JOIN pg_roles r ON r.oid = s.userid
    WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND s.queryid::text = ${hash} AND s.toplevel
    ORDER BY 3 DESC
    LIMIT 1`
  const row = rows[0]
  if (!row)
    throw new Refusal(
      'pg_stat_statements has no top-level statement of that id in this database now (its statistics were reset, or it ran only inside functions)',
    )
  const text = String(row.query ?? '')
  if (!row.trusted) {
    const runner = cut(String(row.runner ?? 'a dropped role'), 63)
    throw new Refusal(
      `not explained: role ${runner} ran it, and the agent plans only what roles it trusts ran (their text reaches the planner). ${trustLine([runner], database.name, runner, database.local)}`,
    )
  }
  if (!EXPLAINABLE.test(text) || text.includes(';') || /\bdbm_explain\b/.test(text))
    throw new Refusal('only a single SELECT, WITH, INSERT, UPDATE or DELETE is explained')
  const values = action.parameters ?? []
  const count = parameterCount(text)
  if (values.length !== count)
    throw new Refusal(
      `the statement has ${count} parameter${count === 1 ? '' : 's'} ($1…); ${values.length} value${values.length === 1 ? ' was' : 's were'} given`,
    )
  const writable = await writableSearchPath(sql, trusted)
  if (writable.length > 0) throw new Refusal(`not explained: ${writableAdvice(writable)}`)
  const untrusted = await untrustedCode(sql, trusted)
  if (untrusted) throw new Refusal(`not explained: ${untrustedAdvice(untrusted, database.name, database.local)}`)
  beforeStart()
  try {
    const explained = await explainOne({ sql }, text, trusted, values, {
      statementMs: timeoutMs,
      lockMs: Math.min(timeoutMs, 500),
    })
    if (!explained) throw new Error('EXPLAIN gave no plan')
    return { outcome: 'done', plan: explained }
  } catch (e) {
    if (e instanceof UntrustedCodeAppeared)
      throw new Refusal(`not explained: ${untrustedAdvice(e.found, database.name, database.local)}`)
    if (e instanceof UntrustedObjects) {
      const owners = [...new Set(e.objects.map((o) => o.owner))]
      throw new Refusal(
        `not explained: it reaches ${e.objects.map((o) => `${o.name} (owned by ${o.owner})`).join(', ')}. ${trustLine(owners, database.name, 'their owners', database.local)}`,
      )
    }
    if ((e as { code?: string }).code === '42501')
      throw new Refusal(
        `the agent's role may not plan it (${cut((e as Error).message, 300)}): ${grantHint(14, text, (e as Error).message)}`,
      )
    throw e
  }
}
