// Who is calling: an API key (X-API-Key, or Authorization: Bearer dbm_ak_...) or a user's access
// JWT (Authorization: Bearer, or the dashboard's httpOnly cookie). Every failure is a 401.
import type { Deps } from '../context.ts'
import { HttpError, unauthorized } from '../http-error.ts'
import { apiKeyTouchIntervalMs } from '../limits.ts'
import { looksLikeApiKey, parseApiKey } from './api-keys.ts'
import { sameHash, sha256 } from './secrets.ts'

export const ACCESS_COOKIE = 'dbm_access'
export const REFRESH_COOKIE = 'dbm_refresh'

export type Principal =
  | { kind: 'user'; orgId: string; userId: string }
  | { kind: 'api_key'; orgId: string; apiKeyId: string }

async function fromApiKey(deps: Deps, value: string): Promise<Principal> {
  const parsed = parseApiKey(value)
  const key = parsed ? await deps.store.findApiKey(parsed.keyId) : undefined
  if (!parsed || !key || !sameHash(sha256(parsed.secret), key.secret_hash)) throw unauthorized('invalid API key')
  if (key.revoked_at !== null) throw unauthorized('API key has been revoked')
  deps.store
    .touchApiKey(key.id, deps.clock(), apiKeyTouchIntervalMs)
    .catch((e) => deps.log.warn('api key last_used_at not recorded', { cause: (e as Error).message }))
  return { kind: 'api_key', orgId: key.org_id, apiKeyId: key.id }
}

async function fromAccessToken(deps: Deps, token: string): Promise<Principal> {
  const claims = await deps.tokens.verifyAccess(token)
  if (!claims) throw unauthorized('invalid or expired access token')
  const user = await deps.store.getUser(claims.sub)
  if (!user || user.org_id !== claims.org) throw unauthorized('invalid or expired access token')
  return { kind: 'user', orgId: user.org_id, userId: user.id }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

/** Cookie-authenticated writes must come from this site (SameSite=Lax plus an Origin check). */
function checkOrigin(deps: Deps, request: Request) {
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

export async function authenticate(deps: Deps, request: Request, accessCookie: string | undefined): Promise<Principal> {
  const apiKey = request.headers.get('x-api-key')
  if (apiKey !== null) return fromApiKey(deps, apiKey.trim())
  const authorization = request.headers.get('authorization')
  if (authorization !== null) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    if (!m) throw unauthorized('unsupported authorization scheme: use "X-API-Key: <key>" or "Authorization: Bearer <token>"')
    const credential = m[1]!
    return looksLikeApiKey(credential) ? fromApiKey(deps, credential) : fromAccessToken(deps, credential)
  }
  if (accessCookie) {
    checkOrigin(deps, request)
    return fromAccessToken(deps, accessCookie)
  }
  throw unauthorized('authentication required: send "X-API-Key: <key>" or "Authorization: Bearer <token>"')
}
