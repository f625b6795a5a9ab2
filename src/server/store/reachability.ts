// Whether the store can be reached. isStoreUnreachable is the one place that tells "the store is down or
// cannot be reached" (refused, reset or closed connections, an administrator's shutdown, a server still
// starting, a connect timeout) from a statement that failed on its own; StoreReachability follows the
// outage episodes those failures make, so that they are reported once per episode, not once per request.

/** postgres.js and socket error codes that mean the connection, not the statement, failed. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  // SQLSTATE: admin_shutdown, crash_shutdown, cannot_connect_now.
  '57P01',
  '57P02',
  '57P03',
])

/** SQLSTATE class 08: connection exceptions. */
const CONNECTION_EXCEPTION_CLASS = '08'

function unreachableCode(code: unknown): boolean {
  return (
    typeof code === 'string' &&
    (UNREACHABLE_CODES.has(code) || (code.length === 5 && code.startsWith(CONNECTION_EXCEPTION_CLASS)))
  )
}

/**
 * True when `error`, or an error it wraps (`cause`, or one of an AggregateError's `errors`), says the store
 * could not be reached. A statement's own failure (a constraint, a timeout of the statement) is not.
 */
export function isStoreUnreachable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 8) return false
  const e = error as { code?: unknown; cause?: unknown; errors?: unknown }
  if (unreachableCode(e.code)) return true
  if (Array.isArray(e.errors) && e.errors.some((inner) => isStoreUnreachable(inner, depth + 1))) return true
  return isStoreUnreachable(e.cause, depth + 1)
}

export type ReachabilityChange = { available: false; cause: unknown } | { available: true; unavailableForMs: number }

/**
 * Outage episodes of a store: the first statement that fails for want of the store starts one, the first
 * statement answered that was sent after it started ends it. Statements already under way when an episode
 * starts or ends settle whichever way the store left them, so they neither end nor start an episode.
 * Times are performance.now() values.
 */
export class StoreReachability {
  private unavailableSince: number | undefined
  private availableSince = Number.NEGATIVE_INFINITY
  private readonly listeners = new Set<(change: ReachabilityChange) => void>()

  get available(): boolean {
    return this.unavailableSince === undefined
  }

  /** A statement sent at `sentAt` failed because the store could not be reached. */
  unreachable(sentAt: number, cause: unknown): void {
    if (this.unavailableSince !== undefined || sentAt < this.availableSince) return
    this.unavailableSince = performance.now()
    this.emit({ available: false, cause })
  }

  /** A statement sent at `sentAt` was answered. */
  answered(sentAt: number): void {
    if (this.unavailableSince === undefined || sentAt < this.unavailableSince) return
    const now = performance.now()
    const unavailableForMs = Math.round(now - this.unavailableSince)
    this.unavailableSince = undefined
    this.availableSince = now
    this.emit({ available: true, unavailableForMs })
  }

  /** Calls `listener` at the start and at the end of every episode; returns the unsubscribe. */
  onChange(listener: (change: ReachabilityChange) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  private emit(change: ReachabilityChange) {
    for (const listener of this.listeners) listener(change)
  }
}
