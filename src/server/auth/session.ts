// Starting and ending a signed-in session in the dashboard's cookies: signup, login and refresh
// (routes/auth.ts) and an accepted invite (routes/organization.ts) start one the same way.
import type { Deps } from '../context.ts'
import { tokenLifetimes } from '../limits.ts'
import type { User } from '../store/types.ts'
import { ACCESS_COOKIE, REFRESH_COOKIE, SESSION_HINT_COOKIE } from './principal.ts'

export type CookieJar = Record<string, { value?: unknown; set(o: Record<string, unknown>): void; remove(): void }>

export function sessionCookies(deps: Pick<Deps, 'publicUrl'>) {
  const secure = deps.publicUrl.startsWith('https:')
  return {
    set(cookie: CookieJar, access: string, refresh: string) {
      cookie[ACCESS_COOKIE]!.set({
        value: access,
        httpOnly: true,
        sameSite: 'lax',
        secure,
        path: '/',
        maxAge: tokenLifetimes.accessSeconds,
      })
      cookie[REFRESH_COOKIE]!.set({
        value: refresh,
        httpOnly: true,
        sameSite: 'lax',
        secure,
        path: '/api/v1/auth',
        maxAge: tokenLifetimes.refreshSeconds,
      })
      // No secret: "a session may exist" for the page's script, which cannot see the two above.
      cookie[SESSION_HINT_COOKIE]!.set({
        value: '1',
        httpOnly: false,
        sameSite: 'lax',
        secure,
        path: '/',
        maxAge: tokenLifetimes.refreshSeconds,
      })
    },
    clear(cookie: CookieJar) {
      cookie[ACCESS_COOKIE]!.set({ value: '', httpOnly: true, sameSite: 'lax', secure, path: '/', maxAge: 0 })
      cookie[REFRESH_COOKIE]!.set({
        value: '',
        httpOnly: true,
        sameSite: 'lax',
        secure,
        path: '/api/v1/auth',
        maxAge: 0,
      })
      cookie[SESSION_HINT_COOKIE]!.set({ value: '', httpOnly: false, sameSite: 'lax', secure, path: '/', maxAge: 0 })
    },
  }
}

/** A new session (new refresh-token family) for the user: its tokens, also set as cookies. */
export async function startSession(
  deps: Pick<Deps, 'store' | 'tokens' | 'clock' | 'publicUrl'>,
  user: User,
  cookie: CookieJar,
) {
  const jti = Bun.randomUUIDv7()
  const refresh = await deps.tokens.signRefresh(user.id, jti)
  await deps.store.createRefreshToken({
    id: jti,
    user_id: user.id,
    family_id: jti,
    expires_at: refresh.expiresAt,
    now: deps.clock(),
  })
  const access = await deps.tokens.signAccess(user.id, user.org_id, jti)
  sessionCookies(deps).set(cookie, access, refresh.token)
  return {
    access_token: access,
    refresh_token: refresh.token,
    token_type: 'Bearer' as const,
    expires_in: tokenLifetimes.accessSeconds,
  }
}
