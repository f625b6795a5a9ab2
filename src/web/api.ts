// The dashboard's one way to call the API: same-origin fetches that carry the httpOnly session
// cookies. An expired access token is renewed once through POST /auth/refresh (the refresh cookie)
// and the call repeated, so a signed-in user never sees the 15-minute token lifetime. When that renewal
// is refused (cookies gone, refresh token expired, signed out elsewhere) the session has ended: the
// listeners of onSessionEnded() hear it once per call. A server that cannot be reached (the fetch
// itself fails, or a proxy answers 502–504 for it) throws UnreachableError and tells the listeners of
// onReachability(); the next answer of the server tells them it is back. Without the session hint
// cookie (dbm_session, set and cleared by the server with the httpOnly session cookies) there is no
// session to renew: a 401 then ends the session without asking /auth/refresh, which could only fail.
import type { Answer, GetAnswer, Method, Served } from './api-routes.ts'

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

/** The dbm server did not answer (network down, server stopped, proxy without upstream). */
export class UnreachableError extends Error {
  readonly unreachable = true
  constructor(cause?: unknown) {
    super('Cannot reach the dbm server — retrying', { cause })
  }
}

export const isUnreachable = (e: unknown): e is UnreachableError => e instanceof UnreachableError

/** The message of a call refused because the session ended. */
export const SESSION_ENDED = 'Your session has ended: sign in again.'

const BASE = '/api/v1'

/** Auth calls that are about credentials themselves: their 401 is an answer, not an expired session. */
const NO_RENEWAL = [
  '/auth/login',
  '/auth/signup',
  '/auth/refresh',
  '/auth/logout',
  '/auth/forgot-password',
  '/auth/reset-password',
  '/auth/verify-email',
]

type Listener<T> = (value: T) => void
const sessionListeners = new Set<Listener<void>>()
const reachListeners = new Set<Listener<boolean>>()
let reachable = true

/** Calls `fn` whenever a call finds the session ended; returns the unsubscribe function. */
export function onSessionEnded(fn: () => void): () => void {
  sessionListeners.add(fn)
  return () => sessionListeners.delete(fn)
}

/** Calls `fn` with false when the server stops answering and with true when it answers again. */
export function onReachability(fn: (reachable: boolean) => void): () => void {
  reachListeners.add(fn)
  return () => reachListeners.delete(fn)
}

function setReachable(now: boolean): void {
  if (now === reachable) return
  reachable = now
  for (const fn of reachListeners) fn(now)
}

const SESSION_HINT = 'dbm_session'

/** True while the server's session hint cookie is there: a session may exist (its cookies are httpOnly, out of the page's sight). */
export function mayHaveSession(): boolean {
  if (typeof document === 'undefined') return true
  return document.cookie.split(';').some((c) => c.trim().startsWith(`${SESSION_HINT}=`))
}

/** Drops the hint once the session is known to be over (the renewal refused), so that the next visit asks nothing. */
function forgetSession(): void {
  if (typeof document !== 'undefined') document.cookie = `${SESSION_HINT}=; Max-Age=0; Path=/; SameSite=Lax`
}

let refreshing: Promise<'renewed' | 'refused'> | undefined

/** Renews the session from the refresh cookie; concurrent callers share one attempt. Throws UnreachableError. */
function refreshSession(): Promise<'renewed' | 'refused'> {
  if (!mayHaveSession()) return Promise.resolve('refused')
  refreshing ??= send('POST', '/auth/refresh', {})
    .then((r): 'renewed' | 'refused' => {
      if (r.ok) return 'renewed'
      forgetSession()
      return 'refused'
    })
    .finally(() => {
      refreshing = undefined
    })
  return refreshing
}

async function send(method: string, path: string, body?: unknown): Promise<Response> {
  let res: Response
  try {
    res = await fetch(BASE + path, {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  } catch (e) {
    setReachable(false)
    throw new UnreachableError(e)
  }
  // A proxy in front of dbm answers these when dbm is down: its answers are never JSON.
  if (
    (res.status === 502 || res.status === 503 || res.status === 504) &&
    !res.headers.get('content-type')?.includes('json')
  ) {
    setReachable(false)
    throw new UnreachableError(new Error(`${res.status} ${res.statusText}`))
  }
  setReachable(true)
  return res
}

/**
 * Calls `method path` under /api/v1 and returns the parsed JSON (undefined for 204); throws ApiError with
 * the server's message. Typed by the server's routes (api-routes.ts): a path no route serves does not
 * compile, and the answer is the route's response schema.
 */
export async function api<M extends Method, const P extends string>(
  method: M,
  path: P & Served<M, P>,
  body?: unknown,
): Promise<Answer<M, P>> {
  type T = Answer<M, P>
  let res = await send(method, path, body)
  const renewable = !NO_RENEWAL.some((p) => path === p || path.startsWith(`${p}?`))
  if (res.status === 401 && renewable) {
    if ((await refreshSession()) === 'renewed') res = await send(method, path, body)
    // Still refused: the session is over. /auth/* calls (the start-up /auth/me) answer for themselves.
    if (res.status === 401 && !path.startsWith('/auth/')) {
      for (const fn of sessionListeners) fn()
      throw new ApiError(401, SESSION_ENDED)
    }
  }
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let parsed: unknown
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  if (!res.ok)
    throw new ApiError(
      res.status,
      (parsed as { error?: string } | undefined)?.error ?? `${res.status} ${res.statusText}`,
    )
  return parsed as T
}

/** GET `path`, typed by its route (see api). */
export const get = <const P extends string>(path: P & Served<'GET', P>): Promise<GetAnswer<P>> =>
  api<'GET', P>('GET', path)
