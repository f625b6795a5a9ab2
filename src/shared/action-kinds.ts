// The kinds of actions the dashboard may ask an agent to run (src/shared/wire.ts describes them), in a
// module of its own so that the agent's config reads the names without loading TypeBox.
export const ACTION_KINDS = ['cancel', 'terminate', 'explain'] as const
export type ActionKind = (typeof ACTION_KINDS)[number]
/** What an agent runs when its config says nothing (allow_actions): plans only, never a kill. */
export const DEFAULT_ALLOWED_ACTIONS: readonly ActionKind[] = ['explain']
/** How long an action waits for its agent before it expires (never run later). */
export const ACTION_TTL_MS = 120_000
/**
 * Kills (cancel, terminate) and explains are limited apart (rate and pending caps on the server, the order
 * the agent runs them in), so that a flood of explains never holds back a kill.
 */
export type ActionClass = 'kill' | 'explain'
export const actionClass = (kind: ActionKind): ActionClass => (kind === 'explain' ? 'explain' : 'kill')
