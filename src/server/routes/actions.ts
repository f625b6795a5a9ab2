// Actions the dashboard asks the database's agent to run (issue 26): cancel a session's statement,
// terminate a session, explain a statement with parameter values. dbm's server never connects to a
// monitored database: it stores the request, and the agent runs it and posts the result.
//
// The dashboard's side (a user's session, or an API key):
//   POST /api/v1/databases/{id}/actions        ask; cancel and terminate need an owner (or an 'admin' key),
//                                              explain any member; 202 with the action, `pending`
//   GET  /api/v1/databases/{id}/actions        what the agent allows and the latest actions
//   GET  /api/v1/databases/{id}/actions/{aid}  one action: its state and result
// The agent's side (its API key, 'ingest' scope; never a user):
//   GET  /api/v1/agent/actions?database=NAME&wait=S&allow=cancel,explain
//        long-poll: answers as soon as one of the database's actions is pending (claiming it: running),
//        else after `wait` seconds (at most 20) with none. Actions stored by this process wake it at once;
//        those another serve process stored (one PostgreSQL store) are found by a claim once a second.
//        It records what the agent allows (`allow`, from its allow_actions) for the dashboard, from the
//        database's own agent key only: the first key to poll for it, until that one has been silent
//        agentKeyTakeoverMs; another key is a 409 and records nothing. At most agentActionPolls wait at
//        once per database and per key in a process: one more is a 429 at once.
//   POST /api/v1/agent/actions/{aid}           the result (done, refused, failed), from that key only
// A pending action expires ACTION_TTL_MS after it was asked and is never handed out later; the sweep runs
// whenever the agent polls or anyone reads the database's actions. Kills (cancel, terminate) and explains
// are limited apart, so that a flood of explains never holds back a kill: each has rate buckets per
// requester and per database (actionLimits, in the store) and a cap of pending ones per database
// (pendingActionsPerDatabase): one more is a 429 with Retry-After, so no member fills the store or leaves
// its agent a backlog; retention deletes them with the events. Every cancel and terminate is audited in
// the database's events timeline (kind session_action): asked, then run, refused, failed or expired, naming
// who asked, the pid, the session's role and application. The agent reads an explain's statement text from
// pg_stat_statements by its hash: no text from the dashboard is ever run.
import { randomUUID } from 'node:crypto'
import { Type as T } from '@sinclair/typebox'
import { Elysia, t } from 'elysia'
import { ACTION_TTL_MS, type ActionClass, type ActionKind, actionClass } from '../../shared/action-kinds.ts'
import { ActionList, ActionView, AgentActionsAnswer, NewAction } from '../../shared/api/actions.ts'
import { ACTION_KINDS, AgentActionResult, type ActionSession, type AgentAction } from '../../shared/wire.ts'
import { jsonQuote } from '../../shared/log.ts'
import { NAME_MAX_CHARS } from '../../shared/database-limits.ts'
import { type Principal, authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { cancelStatement, terminateSession } from '../../shared/session-commands.ts'
import { badRequest, conflict, forbidden, notFound, tooManyRequests } from '../http-error.ts'
import {
  actionLimits,
  agentActionPolls,
  agentKeyTakeoverMs,
  explainParameterLimits,
  pendingActionsPerDatabase,
} from '../limits.ts'
import { errorAnswers } from '../openapi.ts'
import type { StoredAction } from '../store/actions/types.ts'
import { rfc3339 } from '../views.ts'
import { query } from './schema.ts'
import { databaseFor } from './telemetry-params.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Long-polls waiting in this process, by `db:<id>` and `key:<id>` (agentActionPolls caps them). */
const polling = new Map<string, number>()

/** Counts a long-poll under `names`, or refuses it (429) when one of them is at its cap; returns the release. */
function admitPoll(names: { name: string; cap: number; what: string }[]): () => void {
  for (const n of names) {
    const now = polling.get(n.name) ?? 0
    if (now >= n.cap)
      throw tooManyRequests(
        agentActionPolls.retryAfterMs,
        `${now} long-polls for actions already wait ${n.what}, at most ${n.cap} may (does another agent poll for it?)`,
      )
  }
  for (const n of names) polling.set(n.name, (polling.get(n.name) ?? 0) + 1)
  return () => {
    for (const n of names) {
      const left = (polling.get(n.name) ?? 1) - 1
      if (left <= 0) polling.delete(n.name)
      else polling.set(n.name, left)
    }
  }
}

/** The public prefix of an API key of the organization by its id (as the keys list shows it). */
async function keyPrefix(deps: Deps, orgId: string, id: string): Promise<string> {
  const key = (await deps.store.listApiKeys(orgId, true)).find((k) => k.id === id)
  return key ? `dbm_ak_${key.key_id}_... ("${key.name.slice(0, 60)}")` : 'a key since deleted'
}

/** In-process wake-ups of long-polls, by database id: an action stored here is handed out at once. */
const waiters = new Map<string, Set<() => void>>()

function wake(databaseId: string) {
  for (const w of waiters.get(databaseId) ?? []) w()
}

/** Resolves after `ms`, on a wake-up of the database, or when `signal` aborts. */
function pause(databaseId: string, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    let set = waiters.get(databaseId)
    if (!set) waiters.set(databaseId, (set = new Set()))
    const done = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      set!.delete(done)
      if (set!.size === 0) waiters.delete(databaseId)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done)
    set.add(done)
  })
}

function parseTime(value: string | null | undefined, field: string): number | null {
  if (value === null || value === undefined) return null
  const ms = Date.parse(value)
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || !Number.isFinite(ms))
    throw badRequest(`session.${field} must be an RFC 3339 timestamp`)
  return ms
}

/** The command an owner could run by hand: the same guarded selection the agent runs (session-commands.ts). */
function commandOf(a: StoredAction): string | undefined {
  const s = a.request.session
  if (!s || a.kind === 'explain') return undefined
  const reported = { ...s }
  return a.kind === 'cancel'
    ? cancelStatement(reported, { effect: 'cancels the statement it runs' })
    : terminateSession(reported, { effect: 'rolls back its transaction and ends the session' })
}

export function actionView(a: StoredAction) {
  const s = a.request.session
  const r = a.result
  return {
    id: a.id,
    kind: a.kind,
    state: a.state,
    requested_by: a.requested_by,
    requested_at: rfc3339(a.requested_at),
    expires_at: rfc3339(a.expires_at),
    finished_at: rfc3339(a.finished_at),
    ...(s
      ? {
          session: {
            pid: s.pid,
            backend_start: rfc3339(s.backend_start),
            xact_start: rfc3339(s.xact_start),
            query_start: rfc3339(s.query_start),
            user: s.user,
            application_name: s.application_name,
          },
        }
      : {}),
    ...(a.request.statement !== undefined ? { statement: a.request.statement } : {}),
    ...(a.request.query_hash !== undefined ? { query_hash: a.request.query_hash } : {}),
    ...(a.request.parameters !== undefined ? { parameters: a.request.parameters } : {}),
    ...(r?.reason !== undefined ? { reason: r.reason } : {}),
    ...(r?.signalled !== undefined ? { signalled: r.signalled } : {}),
    ...(r?.plan !== undefined ? { plan: r.plan } : {}),
    ...(r?.agent_outcome !== undefined ? { agent_outcome: r.agent_outcome, late_by_ms: r.late_by_ms ?? 0 } : {}),
    ...(a.kind !== 'explain' ? { command: commandOf(a) } : {}),
  }
}

const VERB: Record<ActionKind, string> = { cancel: 'Cancel', terminate: 'Terminate', explain: 'Explain' }

/**
 * Who and what, for an audit line: `pid 4242 (role "app", application "psql")`. The names come from the
 * request (a member may send anything) and from the monitored database: each is a JSON string with its
 * control, bidi and invisible characters escaped (jsonQuote), so the title reads as written wherever the
 * events timeline shows it, the server log included.
 */
function sessionText(s: ActionSession | undefined): string {
  if (!s) return 'a session'
  const parts = [
    s.user !== null ? `role ${jsonQuote(s.user)}` : null,
    s.application_name !== null ? `application ${jsonQuote(s.application_name)}` : null,
  ].filter(Boolean)
  return `pid ${s.pid}${parts.length > 0 ? ` (${parts.join(', ')})` : ''}`
}

/** The audit event of a cancel or terminate at one step (asked, or its outcome); explains are not audited. */
async function audit(deps: Deps, a: StoredAction, ts: number) {
  if (a.kind === 'explain') return
  const who = sessionText(a.request.session)
  const by = a.requested_by
  let title: string
  let severity: 'info' | 'warning' = 'info'
  if (a.state === 'pending') title = `${VERB[a.kind]} of ${who} asked by ${by}`
  else if (a.state === 'done')
    title = a.result?.signalled
      ? `${VERB[a.kind]} of ${who} run: the backend was signalled (asked by ${by})`
      : `${VERB[a.kind]} of ${who} run: no backend signalled, that session had ended or moved on (asked by ${by})`
  else if (a.state === 'expired' && a.result?.agent_outcome !== undefined) {
    // The agent's result came after the deadline: said so, never as a timely run.
    severity = 'warning'
    const late = `${((a.result.late_by_ms ?? 0) / 1000).toFixed(1)} s`
    const said =
      a.result.agent_outcome === 'done'
        ? a.result.signalled
          ? 'the backend was signalled'
          : 'no backend signalled'
        : `the agent reported it ${a.result.agent_outcome}`
    title = `${VERB[a.kind]} of ${who} ran late: its result came ${late} after it expired, ${said} (asked by ${by})`
  } else {
    severity = 'warning'
    title = `${VERB[a.kind]} of ${who} ${a.state} (asked by ${by})`
  }
  const detail =
    [
      a.result?.reason ? `Reason: ${a.result.reason}` : null,
      a.request.statement ? `Statement: ${a.request.statement}` : null,
    ]
      .filter(Boolean)
      .join('\n') || null
  await deps.store.actions.auditAction(a.database_id, {
    ts,
    kind: 'session_action',
    severity,
    title,
    detail,
    object: `${a.id}:${a.state}`,
    link: `#/db/${a.database_id}/active`,
  })
  // And in the server's log, each field escaped by the logger (formatLogValue).
  deps.log.info('session action', { database: a.database_id, action: a.id, kind: a.kind, state: a.state, title })
}

/** Expires the database's overdue actions, auditing the kills among them. */
async function sweep(deps: Deps, databaseId: string) {
  const now = deps.clock()
  for (const a of await deps.store.actions.expireActions(databaseId, now)) await audit(deps, a, now)
}

function requireKillRight(principal: Principal, kind: ActionKind) {
  if (kind === 'explain') return
  if (principal.kind === 'user' && principal.role !== 'owner') throw forbidden(`only an owner can ${kind} a session`)
  if (principal.kind === 'api_key' && !principal.scopes.includes('admin'))
    throw forbidden(`this API key lacks the 'admin' scope, which ${kind} needs`)
}

async function requestedBy(deps: Deps, principal: Principal): Promise<string> {
  if (principal.kind === 'api_key') return `API key ${principal.apiKeyId}`
  return (await deps.store.getUser(principal.userId))?.email ?? `user ${principal.userId}`
}

const CLASS_NAME: Record<ActionClass, string> = { kill: 'cancels and terminates', explain: 'explains' }

/**
 * Counts the request in its class's rate buckets (limits.ts actionLimits; in the store, so they hold across
 * restarts and serve processes): the requester's first, then the database's, so that a request refused as
 * one requester's excess never uses up the database's room. A 429 names the bucket that is full.
 */
async function countAction(deps: Deps, principal: Principal, databaseId: string, kind: ActionClass) {
  const limits = actionLimits[kind]
  const requester = principal.kind === 'user' ? `user:${principal.userId}` : `key:${principal.apiKeyId}`
  const now = deps.clock()
  const mine = await deps.store.hitRateLimit(
    `rate:actions:${kind}:${requester}`,
    limits.perRequester,
    actionLimits.windowMs,
    now,
  )
  if (!mine.allowed)
    throw tooManyRequests(
      mine.retryAfterMs,
      `you asked for ${limits.perRequester} ${CLASS_NAME[kind]} in the last minute, the most one requester may`,
    )
  const database = await deps.store.hitRateLimit(
    `rate:actions:${kind}:db:${databaseId}`,
    limits.perDatabase,
    actionLimits.windowMs,
    now,
  )
  if (!database.allowed)
    throw tooManyRequests(
      database.retryAfterMs,
      `${limits.perDatabase} ${CLASS_NAME[kind]} were asked of this database in the last minute, the most it takes`,
    )
}

function requireAgent(principal: Principal): Extract<Principal, { kind: 'api_key' }> {
  if (principal.kind !== 'api_key') throw forbidden("only an agent's API key can take actions")
  return principal
}

const AGENT_RESULT_BODY = T.Object(AgentActionResult.properties, { additionalProperties: false })

export function actionRoutes(deps: Deps) {
  const { store, clock } = deps
  const prefix = '/api/v1/databases/:id/actions'
  return new Elysia()
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .post(
      prefix,
      async ({ principal, params, body, set }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        requireKillRight(principal, body.kind)
        await countAction(deps, principal, db.id, actionClass(body.kind))
        const now = clock()
        const request: StoredAction['request'] = {}
        if (body.kind === 'explain') {
          if (body.query_hash === undefined) throw badRequest('query_hash is required for explain')
          if (body.session !== undefined) throw badRequest('session is for cancel and terminate')
          request.query_hash = body.query_hash
          request.parameters = body.parameters ?? []
          const { count, totalBytes } = explainParameterLimits
          if (request.parameters.length > count) throw badRequest(`parameters: at most ${count} values`)
          const bytes = request.parameters.reduce((n, p) => n + (p === null ? 0 : Buffer.byteLength(p, 'utf8')), 0)
          if (bytes > totalBytes) throw badRequest(`parameters: ${bytes} bytes in all, at most ${totalBytes} are taken`)
          if (request.parameters.some((p) => p?.includes('\u0000')))
            throw badRequest('parameters cannot hold NUL characters')
        } else {
          const s = body.session
          if (s === undefined)
            throw badRequest(`session is required for ${body.kind}: its pid and backend_start at least`)
          if (body.query_hash !== undefined || body.parameters !== undefined)
            throw badRequest('query_hash and parameters are for explain')
          request.session = {
            pid: s.pid,
            backend_start: parseTime(s.backend_start, 'backend_start')!,
            xact_start: parseTime(s.xact_start, 'xact_start'),
            query_start: parseTime(s.query_start, 'query_start'),
            user: s.user ?? null,
            application_name: s.application_name ?? null,
          }
          if (body.statement !== undefined)
            request.statement = body.statement.length > 500 ? `${body.statement.slice(0, 499)}…` : body.statement
        }
        const admission = await store.actions.createAction(
          {
            id: randomUUID(),
            org_id: principal.orgId,
            database_id: db.id,
            kind: body.kind,
            request,
            requested_by: await requestedBy(deps, principal),
            requested_at: now,
            expires_at: now + ACTION_TTL_MS,
          },
          pendingActionsPerDatabase[actionClass(body.kind)],
        )
        if ('full' in admission) {
          const { pending, next_expiry, class: kind } = admission.full
          throw tooManyRequests(
            next_expiry - now,
            `${pending} ${CLASS_NAME[kind]} already wait for this database's agent, at most ${pendingActionsPerDatabase[kind]} may (is its agent running, and do its allow_actions allow them?); one goes when the agent takes it or it expires`,
          )
        }
        const action = admission.created
        await audit(deps, action, now)
        wake(db.id)
        set.status = 202
        return actionView(action)
      },
      {
        body: NewAction,
        response: { 202: ActionView },
        detail: {
          summary:
            "Ask the database's agent to cancel or terminate a session (owners, 'admin' keys) or explain a statement with parameter values (members)",
          responses: errorAnswers({
            403: "cancel or terminate by a member, or by an API key without the 'admin' scope",
            429: `more than the requester's or the database's share of kills (${actionLimits.kill.perRequester}, ${actionLimits.kill.perDatabase}) or explains (${actionLimits.explain.perRequester}, ${actionLimits.explain.perDatabase}) in a minute, or ${pendingActionsPerDatabase.kill} kills or ${pendingActionsPerDatabase.explain} explains already waiting for the database's agent`,
          }),
        },
      },
    )
    .get(
      prefix,
      async ({ principal, params }) => {
        const db = await databaseFor(deps, principal, params.id)
        await sweep(deps, db.id)
        const [listener, actions] = await Promise.all([
          store.actions.actionListener(db.id),
          store.actions.listActions(db.id, 20, clock()),
        ])
        return {
          allowed: listener?.allowed ?? null,
          agent_heard_at: listener ? rfc3339(listener.heard_at) : null,
          actions: actions.map(actionView),
        }
      },
      {
        response: { 200: ActionList },
        detail: { summary: "What the database's agent allows, and the latest actions asked of it" },
      },
    )
    .get(
      `${prefix}/:aid`,
      async ({ principal, params }) => {
        const db = await databaseFor(deps, principal, params.id)
        if (!UUID.test(params.aid)) throw badRequest('aid must be an action id (a UUID)')
        await sweep(deps, db.id)
        const action = await store.actions.getAction(principal.orgId, db.id, params.aid, clock())
        if (!action) throw notFound('action')
        return actionView(action)
      },
      {
        response: { 200: ActionView },
        detail: { summary: 'One action: its state and, once the agent ran it, its result' },
      },
    )
    .get(
      '/api/v1/agent/actions',
      async ({ principal, query: q, request }) => {
        const agent = requireAgent(principal)
        const name = q.database
        if (typeof name !== 'string' || name.length === 0 || name.length > NAME_MAX_CHARS)
          throw badRequest('database must name a database as the agent config does')
        const wait = q.wait === undefined ? 0 : Number(q.wait)
        if (!Number.isFinite(wait) || wait < 0) throw badRequest('wait must be a number of seconds')
        const allow = (q.allow ?? '').split(',').filter(Boolean)
        if (allow.some((k) => !(ACTION_KINDS as readonly string[]).includes(k)))
          throw badRequest(`allow must list some of: ${ACTION_KINDS.join(', ')}`)
        const releaseKey = admitPoll([
          { name: `key:${agent.apiKeyId}`, cap: agentActionPolls.perKey, what: 'with this API key' },
        ])
        try {
          const db = (await store.listDatabases(agent.orgId)).find((d) => d.name === name)
          if (!db) throw notFound('database')
          // Only the database's own agent key is heard (what it allows, and its actions handed out).
          const heard = await store.actions.heardListener(
            db.id,
            agent.apiKeyId,
            allow as ActionKind[],
            clock(),
            clock() - agentKeyTakeoverMs,
          )
          if (!heard.own) {
            throw conflict(
              `database ${JSON.stringify(name)} takes actions from its own agent's key, ${await keyPrefix(deps, agent.orgId, heard.agent_key_id)}, heard ${Math.max(0, Math.round((clock() - heard.heard_at) / 1000))} s ago; another key is heard once that one has been silent ${agentKeyTakeoverMs / 1000} s (stop its agent, or revoke it)`,
            )
          }
          if (heard.took_over_from)
            deps.log.warn('actions: another agent key took the database over', {
              database: db.id,
              key: agent.apiKeyId,
              previous_key: heard.took_over_from,
            })
          const releaseDb = admitPoll([
            { name: `db:${db.id}`, cap: agentActionPolls.perDatabase, what: `for database ${JSON.stringify(name)}` },
          ])
          try {
            const until = Date.now() + Math.min(wait, 20) * 1000
            for (;;) {
              await sweep(deps, db.id)
              // A read each second; the claim (a write) only when something waits.
              const claimed =
                (await store.actions.pendingActions(db.id, clock())) > 0
                  ? await store.actions.claimActions(db.id, clock(), 10)
                  : []
              if (claimed.length > 0 || request.signal.aborted)
                return { actions: claimed.map((a) => agentAction(a, clock())) }
              const left = until - Date.now()
              if (left <= 0) return { actions: [] }
              await pause(db.id, Math.min(1_000, left), request.signal)
            }
          } finally {
            releaseDb()
          }
        } finally {
          releaseKey()
        }
      },
      {
        query: query({
          database: t.String({
            description: 'the database as the agent config names it',
            examples: ['orders-pg'],
            error: 'database must name a database as the agent config does',
          }),
          wait: t.Optional(
            t.String({ description: 'seconds to wait for an action (at most 20; default 0: answer at once)' }),
          ),
          allow: t.Optional(
            t.String({ description: 'what the agent config allows, comma-separated (cancel, terminate, explain)' }),
          ),
        }),
        response: { 200: AgentActionsAnswer },
        detail: {
          summary:
            "The agent's long-poll for its database's pending actions (an agent's API key with the 'ingest' scope); takes them",
          responses: errorAnswers({
            403: 'a user, not an agent key',
            404: 'no database of that name in the organization',
            409: "another key is the database's own agent key, and was heard lately",
            429: `${agentActionPolls.perDatabase} long-polls already wait for the database, or ${agentActionPolls.perKey} with the key, in this serve process`,
          }),
        },
      },
    )
    .post(
      '/api/v1/agent/actions/:aid',
      async ({ principal, params, body, set }) => {
        const agent = requireAgent(principal)
        if (!UUID.test(params.aid)) throw badRequest('aid must be an action id (a UUID)')
        const own = await store.actions.actionAgentKey(agent.orgId, params.aid)
        if (own === undefined) throw notFound('running action')
        if (own !== agent.apiKeyId)
          throw conflict("only the database's own agent key, which was handed the action, may post its result")
        const now = clock()
        const finished = await store.actions.finishAction(agent.orgId, params.aid, body, now)
        if (!finished) throw notFound('running action')
        await audit(deps, finished, now)
        set.status = 204
      },
      {
        body: AGENT_RESULT_BODY,
        response: { 204: t.Undefined() },
        detail: {
          summary: "The agent's result of an action it took",
          responses: errorAnswers({
            403: 'a user, not an agent key',
            404: 'no such running action in the organization',
            409: "not the database's own agent key",
          }),
        },
      },
    )
}

function agentAction(a: StoredAction, now: number): AgentAction {
  const out: AgentAction = { id: a.id, kind: a.kind, expires_in_ms: Math.max(0, a.expires_at - now) }
  if (a.request.session) out.session = a.request.session
  if (a.request.query_hash !== undefined) out.query_hash = a.request.query_hash
  if (a.request.parameters !== undefined) out.parameters = a.request.parameters
  return out
}
