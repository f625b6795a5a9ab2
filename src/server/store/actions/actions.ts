// Actions the dashboard asks an agent to run on a monitored database (migration 18): cancel or terminate
// a session, explain a statement with parameter values. The server never connects to a monitored
// database: it stores the request as `pending`, the database's agent claims it (`running`) through its
// long-poll or after a batch whose answer said one waits, runs it and posts the result (`done`, `refused`,
// `failed`). A pending action not claimed by its expiry is `expired` and never handed out later (the
// claim and the expiry are one conditional UPDATE each, so several serve processes on one PostgreSQL
// store never hand one action out twice nor expire one that was claimed). A claimed action whose result
// never came (the agent died mid-way) shows as running until its expiry, then as expired with that said;
// a result that comes after the expiry is kept, but as expired (with what the agent reported and how
// late), never as done. Claims hand out kills before explains.
// A database holds at most a given number of pending actions of each class, kills and explains apart (the
// route's limits): asking for one more is
// refused until one is taken or expires, so a member cannot fill the store, and an agent that comes back
// finds no backlog of kills. The count and the insert are one transaction under a lock of the database's
// actions, so several serve processes on one PostgreSQL store never go past it. Finished actions go with
// the organization's retention (sweepActions, from the health monitor's retention pass), as its events do.
// What the agent allows is recorded from the database's own agent key only (heardListener): the first key
// to long-poll for it, until that one falls silent; the long-polls and results of any other key of the
// organization are refused by the route.
// Reads (an action, the recent ones, what the agent allows) are apart from writes.
import { ACTION_KINDS, type ActionClass, actionClass } from '../../../shared/action-kinds.ts'
import type { ActionKind, ActionSession } from '../../../shared/wire.ts'
import { num, numOrNull } from '../accounts/rows.ts'
import type { SqlDriver } from '../driver.ts'
import { recordEventsNow } from '../events/record.ts'
import type { DbEvent } from '../events/types.ts'

export type ActionState = 'pending' | 'running' | 'done' | 'refused' | 'failed' | 'expired'

/** What was asked: the session of a kill, or the statement and parameter values of an explain. */
export interface ActionRequest {
  session?: ActionSession
  query_hash?: string
  parameters?: (string | null)[]
  /** The statement's text as the server had it when asked (shown in the confirmation and the audit), cut. */
  statement?: string
}

/** What came of it, as the agent posted it (or the expiry wrote). */
export interface ActionResult {
  outcome: 'done' | 'refused' | 'failed' | 'expired'
  reason?: string
  signalled?: boolean
  plan?: unknown
  /** A result that came after the action's expiry (outcome expired): what the agent said, and how late it came. */
  agent_outcome?: 'done' | 'refused' | 'failed'
  late_by_ms?: number
}

export interface StoredAction {
  id: string
  org_id: string
  database_id: string
  kind: ActionKind
  state: ActionState
  request: ActionRequest
  /** Who asked: `user:<id> <email>` or `key:<id> <name>`, as written when asked. */
  requested_by: string
  requested_at: number
  expires_at: number
  claimed_at: number | null
  finished_at: number | null
  result: ActionResult | null
}

export type NewAction = Pick<StoredAction, 'id' | 'org_id' | 'database_id' | 'kind' | 'request' | 'requested_by' | 'requested_at' | 'expires_at'>

/** What a database's agent allows (allow_actions), as it said on its latest long-poll, and with which key. */
export interface ActionListener {
  allowed: ActionKind[]
  heard_at: number
  /** The API key (its id) of the database's own agent: the only one whose long-polls count; null before any. */
  agent_key_id: string | null
}

/** What a long-poll's key came to: the database's own agent key (recorded), or another one while that one is heard. */
export type ListenerAdmission = { own: true; took_over_from: string | null } | { own: false; agent_key_id: string; heard_at: number }

export interface ActionReads {
  /** The action of that id when it belongs to the organization's database; a pending one past its expiry reads as expired. */
  getAction(orgId: string, databaseId: string, id: string, now: number): Promise<StoredAction | undefined>
  /** The database's latest actions, newest first. */
  listActions(databaseId: string, limit: number, now: number): Promise<StoredAction[]>
  /** How many of the database's actions wait for the agent now. */
  pendingActions(databaseId: string, now: number): Promise<number>
  /** What the database's agent allows, as it last said; undefined when no agent asked for actions yet. */
  actionListener(databaseId: string): Promise<ActionListener | undefined>
  /** The own agent key of the database of the organization's running action `id`: null when none asked yet, undefined when there is no such running action. */
  actionAgentKey(orgId: string, id: string): Promise<string | null | undefined>
}

/** What asking came to: the action stored, or refused because the database already has `pending` of its class waiting. */
export type ActionAdmission =
  | { created: StoredAction }
  | {
      full: {
        class: ActionClass
        pending: number
        /** When the first of them expires (epoch ms): from then on there is room again at the latest. */
        next_expiry: number
      }
    }

export interface ActionWrites {
  /**
   * Stores the action as pending unless the database already has `maxPending` pending, unexpired actions of
   * its class (kills, or explains: counted apart, so that explains never take a kill's room).
   */
  createAction(action: NewAction, maxPending: number): Promise<ActionAdmission>
  /** Marks the database's pending, unexpired actions running (kills before explains, oldest first, at most `limit`) and returns them. */
  claimActions(databaseId: string, now: number, limit: number): Promise<StoredAction[]>
  /**
   * Records the agent's result of a running action of the organization; undefined when there is none (or it
   * finished). A result that comes after the action's expiry is recorded as expired, never as done: the
   * agent's outcome is kept as agent_outcome, with how late it came.
   */
  finishAction(orgId: string, id: string, result: ActionResult, now: number): Promise<StoredAction | undefined>
  /** Marks every pending action of the database past its expiry expired (running ones past it too: their agent never answered); returns them. */
  expireActions(databaseId: string, now: number): Promise<StoredAction[]>
  /**
   * Records what the database's agent allows, and that it asked for actions now, when `agentKeyId` is the
   * database's own agent key: the first key to ask, or any key once that one has not asked since
   * `silentBefore` (its agent is gone, or the key was revoked). Another key records nothing.
   */
  heardListener(databaseId: string, agentKeyId: string, allowed: readonly ActionKind[], now: number, silentBefore: number): Promise<ListenerAdmission>
  /** Adds the audit event of a cancel or terminate to the database's events timeline (kind session_action). */
  auditAction(databaseId: string, event: DbEvent): Promise<void>
}

export interface ActionStore extends ActionReads, ActionWrites {}

const COLUMNS = 'id, org_id, database_id, kind, state, request, requested_by, requested_at, expires_at, claimed_at, finished_at, result'

const parse = <T>(text: unknown): T | null => {
  if (typeof text !== 'string') return null
  try {
    return JSON.parse(text) as T
  } catch {
    return null
  }
}

function toAction(r: any, now?: number): StoredAction {
  const action: StoredAction = {
    id: r.id,
    org_id: r.org_id,
    database_id: r.database_id,
    kind: r.kind,
    state: r.state,
    request: parse<ActionRequest>(r.request) ?? {},
    requested_by: r.requested_by,
    requested_at: num(r.requested_at),
    expires_at: num(r.expires_at),
    claimed_at: numOrNull(r.claimed_at),
    finished_at: numOrNull(r.finished_at),
    result: parse<ActionResult>(r.result),
  }
  // Not yet swept: read as what the sweep will make of it.
  if (now !== undefined && (action.state === 'pending' || action.state === 'running') && action.expires_at <= now) {
    action.result = { outcome: 'expired', reason: expiryReason(action.state) }
    action.state = 'expired'
    action.finished_at = action.expires_at
  }
  return action
}

function expiryReason(state: 'pending' | 'running'): string {
  return state === 'pending'
    ? 'no agent took it before it expired (is the agent of this database running, and version 26 or later?)'
    : 'the agent took it but sent no result before it expired'
}

/** Kills (cancel, terminate) before explains, then oldest first. */
export function killsFirst(a: Pick<StoredAction, 'kind' | 'requested_at'>, b: Pick<StoredAction, 'kind' | 'requested_at'>): number {
  return Number(a.kind === 'explain') - Number(b.kind === 'explain') || a.requested_at - b.requested_at
}

/** The agent's result as it is kept when it came `lateBy` ms after the expiry: expired, saying what the agent reported. */
function lateResult(result: ActionResult, lateBy: number): ActionResult {
  const outcome = result.outcome as 'done' | 'refused' | 'failed'
  const said =
    outcome === 'done'
      ? result.signalled === undefined
        ? 'it ran'
        : result.signalled
          ? 'the backend was signalled'
          : 'no backend was signalled'
      : `${outcome}${result.reason ? `: ${result.reason}` : ''}`
  return {
    ...result,
    outcome: 'expired',
    agent_outcome: outcome,
    late_by_ms: lateBy,
    reason: `the agent's result came ${(lateBy / 1000).toFixed(1)} s after the action expired, so it is not counted as run in time; the agent reported: ${said}`.slice(0, 4_000),
  }
}

/**
 * The own agent key rides in action_listeners.allowed beside the kinds, as `key:<api key id>` (migration 18
 * has no column for it; a later migration may give it one): rows written before it have none, and the next
 * key to ask becomes the database's own.
 */
const KEY_TOKEN = 'key:'

function readListener(r: { allowed: string; heard_at: unknown }): ActionListener {
  const tokens = r.allowed.split(' ').filter(Boolean)
  const key = tokens.find((t) => t.startsWith(KEY_TOKEN))
  return {
    allowed: tokens.filter((t): t is ActionKind => (ACTION_KINDS as readonly string[]).includes(t)),
    heard_at: num(r.heard_at),
    agent_key_id: key ? key.slice(KEY_TOKEN.length) : null,
  }
}

/** Running actions get this long past the expiry before their silence is taken as a failure (a kill or a plan runs in seconds). */
const RUNNING_GRACE_MS = 60_000

export class SqlActions implements ActionStore {
  constructor(private readonly driver: SqlDriver) {}

  createAction(a: NewAction, maxPending: number): Promise<ActionAdmission> {
    // One process at a time per database between the count and the insert (an advisory lock on PostgreSQL;
    // SQLite's transactions are exclusive already).
    return this.driver.transaction(async (tx) => {
      const kind = actionClass(a.kind)
      const waiting = await tx.get<{ n: unknown; first: unknown }>(
        `SELECT COUNT(*) AS n, MIN(expires_at) AS first FROM actions
         WHERE database_id = $1 AND state = 'pending' AND expires_at > $2 AND (CASE WHEN kind = 'explain' THEN 'explain' ELSE 'kill' END) = $3`,
        [a.database_id, a.requested_at, kind],
      )
      const pending = Number(waiting?.n ?? 0)
      if (pending >= maxPending) return { full: { class: kind, pending, next_expiry: num(waiting?.first) } }
      await tx.run(
        `INSERT INTO actions (id, org_id, database_id, kind, state, request, requested_by, requested_at, expires_at) VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)`,
        [a.id, a.org_id, a.database_id, a.kind, JSON.stringify(a.request), a.requested_by, a.requested_at, a.expires_at],
      )
      return { created: { ...a, state: 'pending', claimed_at: null, finished_at: null, result: null } }
    }, `dbm:actions:${a.database_id}`)
  }

  async getAction(orgId: string, databaseId: string, id: string, now: number): Promise<StoredAction | undefined> {
    const r = await this.driver.get(`SELECT ${COLUMNS} FROM actions WHERE id = $1 AND org_id = $2 AND database_id = $3`, [id, orgId, databaseId])
    if (!r) return undefined
    const action = toAction(r)
    // A running one gets its grace before it reads as expired.
    return toAction(r, action.state === 'running' ? now - RUNNING_GRACE_MS : now)
  }

  async listActions(databaseId: string, limit: number, now: number): Promise<StoredAction[]> {
    const rows = await this.driver.all(`SELECT ${COLUMNS} FROM actions WHERE database_id = $1 ORDER BY requested_at DESC, id LIMIT $2`, [databaseId, limit])
    return rows.map((r: any) => toAction(r, r.state === 'running' ? now - RUNNING_GRACE_MS : now))
  }

  async pendingActions(databaseId: string, now: number): Promise<number> {
    const r = await this.driver.get<{ n: unknown }>("SELECT COUNT(*) AS n FROM actions WHERE database_id = $1 AND state = 'pending' AND expires_at > $2", [databaseId, now])
    return Number(r?.n ?? 0)
  }

  async claimActions(databaseId: string, now: number, limit: number): Promise<StoredAction[]> {
    // The state is checked again on the row being updated: of two processes claiming at once, one wins.
    // Kills first: a queue of explains never keeps a cancel or terminate out of the agent's batch.
    const rows = await this.driver.all(
      `UPDATE actions SET state = 'running', claimed_at = $2
       WHERE id IN (SELECT id FROM actions WHERE database_id = $1 AND state = 'pending' AND expires_at > $2
                    ORDER BY CASE WHEN kind = 'explain' THEN 1 ELSE 0 END, requested_at, id LIMIT $3)
         AND state = 'pending' AND expires_at > $2
       RETURNING ${COLUMNS}`,
      [databaseId, now, limit],
    )
    return rows.map((r) => toAction(r)).sort(killsFirst)
  }

  async finishAction(orgId: string, id: string, result: ActionResult, now: number): Promise<StoredAction | undefined> {
    const row = await this.driver.get<{ expires_at: unknown }>(`SELECT expires_at FROM actions WHERE id = $1 AND org_id = $2 AND state = 'running'`, [id, orgId])
    if (!row) return undefined
    const lateBy = now - num(row.expires_at)
    const recorded: ActionResult = lateBy > 0 && result.outcome !== 'expired' ? lateResult(result, lateBy) : result
    // Still running on the row being updated: of two results at once, one is taken.
    const rows = await this.driver.all(
      `UPDATE actions SET state = $3, result = $4, finished_at = $5 WHERE id = $1 AND org_id = $2 AND state = 'running' RETURNING ${COLUMNS}`,
      [id, orgId, recorded.outcome, JSON.stringify(recorded), now],
    )
    return rows[0] ? toAction(rows[0]) : undefined
  }

  async expireActions(databaseId: string, now: number): Promise<StoredAction[]> {
    // Called every second by each waiting long-poll: a read first, so that nothing is written (on SQLite,
    // no write lock taken) unless something is overdue.
    const overdue = await this.driver.get(
      "SELECT 1 AS x FROM actions WHERE database_id = $1 AND ((state = 'pending' AND expires_at <= $2) OR (state = 'running' AND expires_at <= $3)) LIMIT 1",
      [databaseId, now, now - RUNNING_GRACE_MS],
    )
    if (!overdue) return []
    const out: StoredAction[] = []
    for (const state of ['pending', 'running'] as const) {
      const before = state === 'pending' ? now : now - RUNNING_GRACE_MS
      const result = JSON.stringify({ outcome: 'expired', reason: expiryReason(state) })
      const rows = await this.driver.all(
        `UPDATE actions SET state = 'expired', result = $3, finished_at = $4 WHERE database_id = $1 AND state = '${state}' AND expires_at <= $2 RETURNING ${COLUMNS}`,
        [databaseId, before, result, now],
      )
      out.push(...rows.map((r) => toAction(r)))
    }
    return out
  }

  heardListener(databaseId: string, agentKeyId: string, allowed: readonly ActionKind[], now: number, silentBefore: number): Promise<ListenerAdmission> {
    // Read and write under the database's actions lock: of two keys asking at once, one is the agent's.
    return this.driver.transaction(async (tx) => {
      const r = await tx.get<{ allowed: string; heard_at: unknown }>('SELECT allowed, heard_at FROM action_listeners WHERE database_id = $1', [databaseId])
      const current = r ? readListener(r) : undefined
      if (current?.agent_key_id && current.agent_key_id !== agentKeyId && current.heard_at > silentBefore) {
        return { own: false, agent_key_id: current.agent_key_id, heard_at: current.heard_at }
      }
      await tx.run(
        `INSERT INTO action_listeners (database_id, allowed, heard_at) VALUES ($1, $2, $3)
         ON CONFLICT (database_id) DO UPDATE SET allowed = excluded.allowed, heard_at = excluded.heard_at`,
        [databaseId, [...allowed, `${KEY_TOKEN}${agentKeyId}`].join(' '), now],
      )
      return { own: true, took_over_from: current?.agent_key_id && current.agent_key_id !== agentKeyId ? current.agent_key_id : null }
    }, `dbm:actions:${databaseId}`)
  }

  auditAction(databaseId: string, event: DbEvent): Promise<void> {
    return recordEventsNow(this.driver, databaseId, [event])
  }

  async actionListener(databaseId: string): Promise<ActionListener | undefined> {
    const r = await this.driver.get<{ allowed: string; heard_at: unknown }>('SELECT allowed, heard_at FROM action_listeners WHERE database_id = $1', [databaseId])
    return r ? readListener(r) : undefined
  }

  async actionAgentKey(orgId: string, id: string): Promise<string | null | undefined> {
    const r = await this.driver.get<{ allowed: string | null; heard_at: unknown }>(
      "SELECT l.allowed, l.heard_at FROM actions a LEFT JOIN action_listeners l ON l.database_id = a.database_id WHERE a.id = $1 AND a.org_id = $2 AND a.state = 'running'",
      [id, orgId],
    )
    if (!r) return undefined
    return r.allowed === null ? null : readListener({ allowed: r.allowed, heard_at: r.heard_at }).agent_key_id
  }
}

/**
 * The actions retention (retention/retention.ts) deletes from a database, with the parameters of its cutoff: those
 * asked before it that are over, finished or expired before it (a running one with its grace), so that no
 * expiry goes before it was swept and audited.
 */
export function sweptActions(databaseId: string, before: number): { where: string; params: unknown[] } {
  return {
    where: "database_id = $1 AND requested_at < $2 AND (state IN ('done', 'refused', 'failed', 'expired') OR expires_at < $3)",
    params: [databaseId, before, before - RUNNING_GRACE_MS],
  }
}
