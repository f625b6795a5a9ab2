// How records leave the API: RFC 3339 times, no secrets, field names as the spec writes them.
import { keyPrefix } from './auth/api-keys.ts'
import { silentAfterMs } from './limits.ts'
import type { ApiKey, Organization, RegisteredDatabase, User } from './store/types.ts'
import { type AvailabilityState, lastHeardAt } from './store/availability/types.ts'

export function rfc3339(ms: number): string
export function rfc3339(ms: number | null): string | null
export function rfc3339(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString()
}

/**
 * `n` per second over `seconds`, rounded to `digits` decimals; null when either is unknown, the interval is
 * not positive, or the rate is not a finite number (a wire-valid but tiny interval_seconds such as 5e-324
 * divides a count into Infinity, which no answer's schema admits).
 */
export function perSecond(n: number | null | undefined, seconds: number | null | undefined, digits = 3): number | null {
  if (n === null || n === undefined || seconds === null || seconds === undefined || !(seconds > 0)) return null
  const rate = Number((n / seconds).toFixed(digits))
  return Number.isFinite(rate) ? rate : null
}

export function organizationView(o: Organization) {
  return { id: o.id, name: o.name, slug: o.slug, plan: o.plan, verified: o.verified, created_at: rfc3339(o.created_at) }
}

export function userView(u: User) {
  return {
    id: u.id,
    email: u.email,
    name: u.name,
    role: u.role,
    email_verified: u.email_verified_at !== null,
    created_at: rfc3339(u.created_at),
  }
}

/** A key as the API shows it; `creator`: the user who made it (or made the key it was made with), while they exist. */
export function apiKeyView(k: ApiKey, creator: { id: string; email: string; name: string } | null) {
  return {
    id: k.id,
    name: k.name,
    prefix: keyPrefix(k.key_id),
    scopes: k.scopes,
    created_by: creator && { id: creator.id, email: creator.email, name: creator.name },
    created_at: rfc3339(k.created_at),
    last_used_at: rfc3339(k.last_used_at),
    revoked_at: rfc3339(k.revoked_at),
  }
}

/** `connected` while a batch arrived within max(3 × poll interval, 60 s). */
export function healthStatus(
  db: Pick<RegisteredDatabase, 'last_seen_at' | 'poll_interval_seconds'>,
  now: number,
): 'connected' | 'disconnected' {
  if (db.last_seen_at === null) return 'disconnected'
  return now - db.last_seen_at <= silentAfterMs(db.poll_interval_seconds) ? 'connected' : 'disconnected'
}

/**
 * The database's status with its availability: disconnected when the agent reports the database down
 * (reason database_down, within one ping of the failure) or when nothing was heard from the agent (batches
 * or reports) for max(3 × poll interval, 60 s) (agent_silent); connected otherwise.
 */
export function availabilityView(
  db: Pick<RegisteredDatabase, 'last_seen_at' | 'poll_interval_seconds'>,
  state: AvailabilityState | undefined,
  now: number,
) {
  const heard = lastHeardAt(db, state)
  const window = silentAfterMs(db.poll_interval_seconds)
  const down = state?.state === 'down'
  const reason = heard === null ? 'no_data' : now - heard > window ? 'agent_silent' : down ? 'database_down' : null
  return {
    status: reason === null ? ('connected' as const) : ('disconnected' as const),
    reason: reason as 'database_down' | 'agent_silent' | 'no_data' | null,
    down_since: down ? rfc3339(state.since) : null,
    cause: down ? state.cause : null,
    cause_message: down ? state.message : null,
    agent_last_heard_at: rfc3339(heard),
    data_as_of: rfc3339(down ? state.data_as_of : db.last_seen_at),
  }
}

/** `availability30d`: the database's 30-day figures (the list and one database; POST answers leave them out). */
export function databaseView(
  db: RegisteredDatabase,
  now: number,
  state?: AvailabilityState,
  availability30d?: { ratio: number | null; watched_ms: number },
) {
  return {
    id: db.id,
    name: db.name,
    engine: db.engine,
    engine_version: db.engine_version,
    host: db.host,
    port: db.port,
    tags: db.tags,
    poll_interval_seconds: db.poll_interval_seconds,
    collect_explain_plans: db.collect_explain_plans,
    collect_replication: db.collect_replication,
    disabled_collectors: db.disabled_collectors,
    last_seen_at: rfc3339(db.last_seen_at),
    ...availabilityView(db, state, now),
    ...(availability30d !== undefined
      ? { availability_30d: availability30d.ratio, availability_30d_watched_ms: availability30d.watched_ms }
      : {}),
    created_at: rfc3339(db.created_at),
    updated_at: rfc3339(db.updated_at),
  }
}
