// `dbm local`'s one-time sign-in link, GET /local-sign-in?token=…: registered only by `dbm local`
// (serve's `routes` hook), never by `dbm serve`. The token is 32 random bytes, kept in this process's
// memory as its SHA-256 only, valid once and for 15 minutes; a new run issues a new one. Following it
// starts a session exactly as a login does (src/server/auth/session.ts) and redirects to the dashboard.
// A used, expired or unknown token gets a short page saying so (4xx); the log says only that a link was used.
// Only by the run's host name (listen.ts): the session cookies are set for that name alone, never for a
// bare loopback address that every server on the machine shares; by another host the token is left unused.
import { Elysia } from 'elysia'
import { randomToken, sha256 } from '../server/auth/secrets.ts'
import { type CookieJar, startSession } from '../server/auth/session.ts'
import type { Deps } from '../server/context.ts'
import { withSecurityHeaders } from '../server/web/security-headers.ts'
import { byName } from './listen.ts'

export const SIGN_IN_PATH = '/local-sign-in'
export const SIGN_IN_LIFETIME_MS = 15 * 60_000

type Outcome = { ok: true; userId: string } | { ok: false; status: number; title: string; text: string }

/** The links issued by this process, by their token's hash. */
export class SignInLinks {
  private readonly links = new Map<string, { userId: string; expiresAt: number; used: boolean }>()

  /** A new token for `userId`; only its hash is kept. */
  issue(userId: string, now: number): string {
    const token = randomToken(32)
    this.links.set(sha256(token), { userId, expiresAt: now + SIGN_IN_LIFETIME_MS, used: false })
    return token
  }

  /** Uses the token up: its user, or why it cannot sign anyone in. */
  consume(token: string, now: number): Outcome {
    const restart = 'Stop dbm local and start it again: it prints a new sign-in link.'
    const link = token ? this.links.get(sha256(token)) : undefined
    if (!link)
      return {
        ok: false,
        status: 404,
        title: 'Unknown sign-in link',
        text: `This sign-in link is not one this dbm local issued. ${restart}`,
      }
    if (link.used)
      return {
        ok: false,
        status: 410,
        title: 'Sign-in link already used',
        text: `Each sign-in link works once. ${restart}`,
      }
    if (now >= link.expiresAt)
      return {
        ok: false,
        status: 410,
        title: 'Sign-in link expired',
        text: `A sign-in link works for 15 minutes. ${restart}`,
      }
    link.used = true
    return { ok: true, userId: link.userId }
  }
}

const page = (title: string, text: string) =>
  `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>dbm: ${title}</title></head><body><h1>${title}</h1><p>${text}</p></body></html>\n`

/** `name`: the run's host name; `used`: told when a link has signed someone in. */
export function localSignInRoutes(deps: Deps, links: SignInLinks, options: { name: string; used?: () => void }) {
  return new Elysia().get(
    SIGN_IN_PATH,
    async ({ request, cookie, set }) => {
      withSecurityHeaders(set.headers)
      set.headers['cache-control'] = 'no-store'
      if (!byName(request, options.name)) {
        set.status = 403
        set.headers['content-type'] = 'text/html; charset=utf-8'
        return page(
          'Open the link as printed',
          "Sign-in links work only at the address dbm local printed, whose name is this run's own: open the Sign in line of its output as it is.",
        )
      }
      const token = new URL(request.url).searchParams.get('token') ?? ''
      const outcome = links.consume(token, deps.clock())
      const user = outcome.ok ? await deps.store.getUser(outcome.userId) : undefined
      if (!outcome.ok || !user) {
        const { status, title, text } = outcome.ok
          ? { status: 404, title: 'Unknown user', text: 'The local user of this link no longer exists.' }
          : outcome
        set.status = status
        set.headers['content-type'] = 'text/html; charset=utf-8'
        return page(title, text)
      }
      await startSession(deps, user, cookie as CookieJar)
      options.used?.()
      deps.log.info('sign-in link used')
      set.status = 302
      set.headers.location = '/#/databases'
      // Local mode's own door, not part of the API: left out of GET /api/v1/openapi.json.
    },
    { detail: { hide: true } },
  )
}
