// An action's row as its record (a pending or running one past its expiry reads as what the sweep will
// make of it), the listener's row, and the rules both reads and writes apply (the running grace).
import { ACTION_KINDS } from '../../../shared/action-kinds.ts'
import type { ActionKind } from '../../../shared/wire.ts'
import { num, numOrNull } from '../rows.ts'
import type { ActionListener, ActionRequest, ActionResult, StoredAction } from './types.ts'
import type { DbRow } from '../rows.ts'

export const COLUMNS =
  'id, org_id, database_id, kind, state, request, requested_by, requested_at, expires_at, claimed_at, finished_at, result'

const parse = <T>(text: unknown): T | null => {
  if (typeof text !== 'string') return null
  try {
    return JSON.parse(text) as T
  } catch {
    return null
  }
}

export function toAction(r: DbRow, now?: number): StoredAction {
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

export function expiryReason(state: 'pending' | 'running'): string {
  return state === 'pending'
    ? 'no agent took it before it expired (is the agent of this database running, and version 26 or later?)'
    : 'the agent took it but sent no result before it expired'
}

/** Kills (cancel, terminate) before explains, then oldest first. */
export function killsFirst(
  a: Pick<StoredAction, 'kind' | 'requested_at'>,
  b: Pick<StoredAction, 'kind' | 'requested_at'>,
): number {
  return Number(a.kind === 'explain') - Number(b.kind === 'explain') || a.requested_at - b.requested_at
}

/** The agent's result as it is kept when it came `lateBy` ms after the expiry: expired, saying what the agent reported. */
export function lateResult(result: ActionResult, lateBy: number): ActionResult {
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
    reason:
      `the agent's result came ${(lateBy / 1000).toFixed(1)} s after the action expired, so it is not counted as run in time; the agent reported: ${said}`.slice(
        0,
        4_000,
      ),
  }
}

/**
 * The own agent key rides in action_listeners.allowed beside the kinds, as `key:<api key id>` (migration 18
 * has no column for it; a later migration may give it one): rows written before it have none, and the next
 * key to ask becomes the database's own.
 */
export const KEY_TOKEN = 'key:'

export function readListener(r: { allowed: string; heard_at: unknown }): ActionListener {
  const tokens = r.allowed.split(' ').filter(Boolean)
  const key = tokens.find((t) => t.startsWith(KEY_TOKEN))
  return {
    allowed: tokens.filter((t): t is ActionKind => (ACTION_KINDS as readonly string[]).includes(t)),
    heard_at: num(r.heard_at),
    agent_key_id: key ? key.slice(KEY_TOKEN.length) : null,
  }
}

/** Running actions get this long past the expiry before their silence is taken as a failure (a kill or a plan runs in seconds). */
export const RUNNING_GRACE_MS = 60_000
