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
// the organization's retention (sweepActions, from the monitor's retention pass), as its events do.
// What the agent allows is recorded from the database's own agent key only (heardListener): the first key
// to long-poll for it, until that one falls silent; the long-polls and results of any other key of the
// organization are refused by the route.
// Records and interfaces here; reads.ts implements ActionReads (an action, the recent ones, what the agent
// allows), writes.ts ActionWrites; rows.ts reads a row as its record.
import type { ActionClass } from '../../../shared/action-kinds.ts'
import type { ActionKind, ActionSession } from '../../../shared/wire.ts'
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

export type NewAction = Pick<
  StoredAction,
  'id' | 'org_id' | 'database_id' | 'kind' | 'request' | 'requested_by' | 'requested_at' | 'expires_at'
>

/** What a database's agent allows (allow_actions), as it said on its latest long-poll, and with which key. */
export interface ActionListener {
  allowed: ActionKind[]
  heard_at: number
  /** The API key (its id) of the database's own agent: the only one whose long-polls count; null before any. */
  agent_key_id: string | null
}

/** What a long-poll's key came to: the database's own agent key (recorded), or another one while that one is heard. */
export type ListenerAdmission =
  | { own: true; took_over_from: string | null }
  | { own: false; agent_key_id: string; heard_at: number }

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
  heardListener(
    databaseId: string,
    agentKeyId: string,
    allowed: readonly ActionKind[],
    now: number,
    silentBefore: number,
  ): Promise<ListenerAdmission>
  /** Adds the audit event of a cancel or terminate to the database's events timeline (kind session_action). */
  auditAction(databaseId: string, event: DbEvent): Promise<void>
}

export type ActionStore = ActionReads & ActionWrites
