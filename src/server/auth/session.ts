// A signed-in session for the dashboard: a new refresh-token family, its access token, and the
// cookies that carry them (httpOnly, SameSite=Lax, Secure when the public URL is https) beside the
// script-readable hint. The login and signup routes use it, and so does `dbm local`'s one-time link.
import { ACCESS_COOKIE, REFRESH_COOKIE, SESSION_HINT_COOKIE } from './principal.ts'
import type { Deps } from '../context.ts'
import { tokenLifetimes } from '../limits.ts'
import type { User } from '../store/types.ts'

export type CookieJar = Record<string, { value?: unknown; set(o: Record<string, unknown>): void; remove(): void }>

export function sessionCookies(deps: Pick<Deps, 'store' | 'tokens' | 'clock' | 'publicUrl'>) {
  const { store, tokens, clock } = deps
  const secure = deps.publicUrl.startsWith('https:')

  const setSessionCookies = (cookie: CookieJar, access: string, refresh: string) => {
    cookie[ACCESS_COOKIE]!.set({ value: access, httpOnly: true, sameSite: 'lax', secure, path: '/', maxAge: tokenLifetimes.accessSeconds })
    cookie[REFRESH_COOKIE]!.set({
      value: refresh,
      httpOnly: true,
      sameSite: 'lax',
      secure,
      path: '/api/v1/auth',
      maxAge: tokenLifetimes.refreshSeconds,
    })
    // No secret: "a session may exist" for the page's script, which cannot see the two above.
    cookie[SESSION_HINT_COOKIE]!.set({ value: '1', httpOnly: false, sameSite: 'lax', secure, path: '/', maxAge: tokenLifetimes.refreshSeconds })
  }

  const clearSessionCookies = (cookie: CookieJar) => {
    cookie[ACCESS_COOKIE]!.set({ value: '', httpOnly: true, sameSite: 'lax', secure, path: '/', maxAge: 0 })
    cookie[REFRESH_COOKIE]!.set({ value: '', httpOnly: true, sameSite: 'lax', secure, path: '/api/v1/auth', maxAge: 0 })
    cookie[SESSION_HINT_COOKIE]!.set({ value: '', httpOnly: false, sameSite: 'lax', secure, path: '/', maxAge: 0 })
  }

  /** A new session (new refresh-token family) for the user. */
  const startSession = async (user: User, cookie: CookieJar) => {
    const jti = Bun.randomUUIDv7()
    const refresh = await tokens.signRefresh(user.id, jti)
    await store.createRefreshToken({ id: jti, user_id: user.id, family_id: jti, expires_at: refresh.expiresAt, now: clock() })
    const access = await tokens.signAccess(user.id, user.org_id, jti)
    setSessionCookies(cookie, access, refresh.token)
    return { access_token: access, refresh_token: refresh.token, token_type: 'Bearer' as const, expires_in: tokenLifetimes.accessSeconds }
  }

  return { setSessionCookies, clearSessionCookies, startSession }
}
