// Who is calling: an API key (X-API-Key, or Authorization: Bearer dbm_ak_...) or a user's access
// JWT (Authorization: Bearer, or the dashboard's httpOnly cookie). Every failure is a 401. A key is then
// held to its scopes for the request's route (scopes.ts: one table for every route), a 403 when it lacks
// the one the route needs; a user is held to their role by the routes (requireOwner).
import type { Deps } from '../context.ts'
import { HttpError, forbidden, unauthorized } from '../http-error.ts'
import { apiKeyTouchIntervalMs } from '../limits.ts'
import type { ApiKeyScope } from '../../shared/api/api-keys.ts'
import { looksLikeApiKey, parseApiKey } from './api-keys.ts'
import { requireKeyAccess } from './scopes.ts'
import { sameHash, sha256 } from './secrets.ts'

export const ACCESS_COOKIE = 'dbm_access'
export const REFRESH_COOKIE = 'dbm_refresh'
/**
 * Set beside the session cookies and cleared with them, readable by the page (not httpOnly) and holding
 * no secret ("1"): it tells the dashboard that a session may exist, so that a signed-out visit asks
 * nothing that must fail (GET /auth/me answering 401, POST /auth/refresh 400).
 */
export const SESSION_HINT_COOKIE = 'dbm_session'

export type Principal =
  // role: as stored when the request came (a role change applies from the caller's next request).
  | { kind: 'user'; orgId: string; userId: string; role: string }
  // createdBy: the user the key acts for (its creator, or its creating key's), null when unknown.
  | { kind: 'api_key'; orgId: string; apiKeyId: string; scopes: ApiKeyScope[]; createdBy: string | null }

export type UserPrincipal = Extract<Principal, { kind: 'user' }>

/**
 * Refuses (403) a caller who may not do `action` (e.g. 'manage API keys'): a user who is not an owner of
 * the organization. An API key has passed its scope check already (authenticate, scopes.ts: these
 * routes need `admin`) unless `apiKeys: false`: invites and members, never open to a key, so that a
 * leaked agent key cannot let anyone in.
 */
export function requireOwner(principal: Principal, action: string): Principal
export function requireOwner(principal: Principal, action: string, options: { apiKeys: false }): UserPrincipal
export function requireOwner(principal: Principal, action: string, options: { apiKeys?: boolean } = {}): Principal {
  if (principal.kind === 'api_key') {
    if (options.apiKeys === false) throw forbidden(`only an owner can ${action}: sign in as one (API keys cannot)`)
    return principal
  }
  if (principal.role !== 'owner') throw forbidden(`only an owner can ${action}`)
  return principal
}

/** When this process last recorded each key's use, so the store is written at most once a minute per key. */
const lastTouched = new WeakMap<Deps['store'], Map<string, number>>()

function touch(deps: Deps, keyId: string) {
  const now = deps.clock()
  let touched = lastTouched.get(deps.store)
  if (!touched) lastTouched.set(deps.store, (touched = new Map()))
  const last = touched.get(keyId)
  if (last !== undefined && now - last < apiKeyTouchIntervalMs && now >= last) return
  touched.set(keyId, now)
  deps.store
    .touchApiKey(keyId, now, apiKeyTouchIntervalMs)
    .catch((e) => deps.log.warn('api key last_used_at not recorded', { cause: (e as Error).message }))
}

async function fromApiKey(deps: Deps, value: string): Promise<Principal> {
  const parsed = parseApiKey(value)
  const key = parsed ? await deps.store.findApiKey(parsed.keyId) : undefined
  if (!parsed || !key || !sameHash(sha256(parsed.secret), key.secret_hash)) throw unauthorized('invalid API key')
  if (key.revoked_at !== null) throw unauthorized('API key has been revoked')
  touch(deps, key.id)
  return { kind: 'api_key', orgId: key.org_id, apiKeyId: key.id, scopes: key.scopes, createdBy: key.created_by }
}

async function fromAccessToken(deps: Deps, token: string): Promise<Principal> {
  const claims = await deps.tokens.verifyAccess(token)
  if (!claims) throw unauthorized('invalid or expired access token')
  // Only while its session is live: logout, a password reset or a replayed refresh token ends it.
  const user = await deps.store.getSessionUser(claims.sub, claims.sid)
  if (!user || user.org_id !== claims.org) throw unauthorized('invalid or expired access token')
  return { kind: 'user', orgId: user.org_id, userId: user.id, role: user.role }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

/**
 * Writes from a browser must come from this site: cookie-authenticated writes (SameSite=Lax plus this
 * check), and every POST under /api/v1/auth (app.ts), whose forms another site could otherwise submit
 * (a text/plain form carries JSON) to sign a visitor in to an account of its choosing.
 */
export function checkOrigin(deps: Deps, request: Request) {
  if (SAFE_METHODS.has(request.method)) return
  const origin = request.headers.get('origin')
  if (!origin) return
  const host = request.headers.get('host')
  let originHost: string
  try {
    originHost = new URL(origin).host
  } catch {
    throw new HttpError(403, 'cross-site request refused')
  }
  if (originHost !== host && originHost !== new URL(deps.publicUrl).host) {
    throw new HttpError(403, 'cross-site request refused')
  }
}

/**
 * The value of cookie `name`, read straight from the header; undefined when absent or empty. Never
 * throws: a value that is not valid percent-encoding is returned as sent, and then fails verification
 * like any other bad token (a 401, not a 500).
 */
export function readCookie(request: Request, name: string): string | undefined {
  const header = request.headers.get('cookie')
  if (!header) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq <= 0 || part.slice(0, eq).trim() !== name) continue
    const raw = part.slice(eq + 1).trim()
    try {
      return decodeURIComponent(raw) || undefined
    } catch {
      return raw
    }
  }
  return undefined
}

/** The dashboard's access-token cookie (used only when no credential header came). */
export function accessCookie(request: Request): string | undefined {
  return readCookie(request, ACCESS_COOKIE)
}

/** The user access token a request presents (Bearer header, else the cookie), if any; API keys are not. */
export function presentedAccessToken(request: Request): string | undefined {
  if (request.headers.get('x-api-key') !== null) return undefined
  const authorization = request.headers.get('authorization')
  if (authorization !== null) {
    const credential = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1]
    return credential && !looksLikeApiKey(credential) ? credential : undefined
  }
  return accessCookie(request)
}

/**
 * Each request's answer from authenticate, found once: app.ts authenticates an ingest in its request hook
 * (before the request may take an ingest place) and the route asks again, at no further cost.
 */
const authenticated = new WeakMap<Request, Promise<Principal>>()

/**
 * The caller of `request`: API key, Bearer token, or the dashboard's cookie, in that order. A key must
 * hold the scope of the request's route (scopes.ts), else 403. Found once per request (a refusal too).
 */
export function authenticate(deps: Deps, request: Request): Promise<Principal> {
  let answer = authenticated.get(request)
  if (!answer) authenticated.set(request, (answer = authenticateOnce(deps, request)))
  return answer
}

async function authenticateOnce(deps: Deps, request: Request): Promise<Principal> {
  const principal = await identify(deps, request)
  if (principal.kind === 'api_key') requireKeyAccess(principal.scopes, request.method, new URL(request.url).pathname)
  return principal
}

async function identify(deps: Deps, request: Request): Promise<Principal> {
  const apiKey = request.headers.get('x-api-key')
  if (apiKey !== null) return fromApiKey(deps, apiKey.trim())
  const authorization = request.headers.get('authorization')
  if (authorization !== null) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    if (!m)
      throw unauthorized('unsupported authorization scheme: use "X-API-Key: <key>" or "Authorization: Bearer <token>"')
    const credential = m[1]!
    return looksLikeApiKey(credential) ? fromApiKey(deps, credential) : fromAccessToken(deps, credential)
  }
  const cookie = accessCookie(request)
  if (cookie) {
    checkOrigin(deps, request)
    return fromAccessToken(deps, cookie)
  }
  throw unauthorized('authentication required: send "X-API-Key: <key>" or "Authorization: Bearer <token>"')
}
