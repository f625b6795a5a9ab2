// Account endpoints through HTTP on both stores: signup validation, login, refresh rotation and
// reuse detection, logout, me, e-mail verification and password reset with their lifetimes.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  type TestServer,
  createApiKey,
  signup,
  startTestServer,
  storeKinds,
  uniqueIp,
  verify,
  verifyCall,
} from '../support/server.ts'

const cookieNamed = (headers: Headers, name: string) => headers.getSetCookie().find((c) => c.startsWith(`${name}=`))

for (const kind of storeKinds) {
  describe(`auth (${kind})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer(kind)
    })
    afterAll(async () => {
      await server.stop()
    })

    const post = (path: string, body: unknown, extra: Record<string, unknown> = {}) =>
      server.call('POST', `/api/v1/auth/${path}`, { body, ip: uniqueIp(), ...extra })

    test('signup creates an unverified organization with its owner and returns a session', async () => {
      const res = await post('signup', {
        email: 'Ada@Example.COM',
        password: 'password1',
        name: 'Ada',
        org_name: 'Analytical Engines',
      })
      expect(res.status).toBe(201)
      expect(res.body.user).toMatchObject({
        email: 'ada@example.com',
        name: 'Ada',
        role: 'owner',
        email_verified: false,
      })
      expect(res.body.organization).toMatchObject({
        name: 'Analytical Engines',
        slug: 'analytical-engines',
        plan: 'free',
        verified: false,
      })
      expect(res.body.expires_in).toBe(900)
      expect(res.body.token_type).toBe('Bearer')
      expect(typeof res.body.access_token).toBe('string')
      expect(typeof res.body.refresh_token).toBe('string')
      expect(server.mailLink('ada@example.com', /verify/i)).toMatch(
        /^http:\/\/dbm\.test:8080\/#\/verify\?token=[A-Za-z0-9_-]{43}$/,
      )

      const again = await post('signup', {
        email: 'ada@example.com',
        password: 'password2',
        name: 'Ada 2',
        org_name: 'Analytical Engines',
      })
      expect(again.status).toBe(409)
      expect(again.body).toEqual({ error: 'email is already registered' })
    })

    test('signup validation names the field', async () => {
      const valid = { email: 'v@example.com', password: 'password1', name: 'V', org_name: 'O' }
      const cases: [Record<string, unknown>, string][] = [
        [{ ...valid, email: 'not-an-email' }, 'email must be a valid email address'],
        [{ ...valid, password: 'short' }, 'password must be a string of at least 8 characters'],
        [{ ...valid, name: '' }, 'name is required and must be a non-empty string of at most 200 characters'],
        [
          { email: valid.email, password: valid.password, name: 'V' },
          'org_name is required and must be a non-empty string of at most 200 characters',
        ],
        [{ ...valid, plan: 'enterprise' }, 'unknown field: plan'],
      ]
      for (const [body, error] of cases) {
        const res = await post('signup', body)
        expect({ status: res.status, body: res.body }).toEqual({ status: 400, body: { error } })
      }
    })

    test('login returns tokens and httpOnly cookies; wrong credentials are one 401', async () => {
      const account = await signup(server)
      const res = await post('login', { email: account.email.toUpperCase(), password: account.password })
      expect(res.status).toBe(200)
      expect(Object.keys(res.body).sort()).toEqual(['access_token', 'expires_in', 'refresh_token', 'token_type'])
      expect(res.body.expires_in).toBe(900)
      const access = cookieNamed(res.headers, 'dbm_access')!
      expect(access).toContain('HttpOnly')
      expect(access).toContain('SameSite=Lax')
      expect(access).toContain('Max-Age=900')
      expect(access).not.toContain('Secure') // public URL is http:// in this test
      expect(cookieNamed(res.headers, 'dbm_refresh')).toContain('Path=/api/v1/auth')
      // The page's hint that a session may exist: readable by its script, holding no secret, as long-lived as the refresh token.
      expect(cookieNamed(res.headers, 'dbm_session')).toBe('dbm_session=1; Max-Age=604800; Path=/; SameSite=Lax')

      const wrong = await post('login', { email: account.email, password: 'wrong password' })
      const nobody = await post('login', { email: 'nobody@example.com', password: 'wrong password' })
      expect(wrong.status).toBe(401)
      expect(wrong.body).toEqual({ error: 'invalid email or password' })
      expect(nobody.status).toBe(401)
      expect(nobody.body).toEqual(wrong.body)
    })

    test('me answers user and organization for a JWT, the organization for an API key, and accepts the cookie', async () => {
      const account = await signup(server, { org_name: 'Me Org' })
      const withJwt = await server.call('GET', '/api/v1/auth/me', { token: account.token })
      expect(withJwt.status).toBe(200)
      expect(withJwt.body.user).toMatchObject({ id: account.userId, email: account.email })
      expect(withJwt.body.organization).toMatchObject({
        id: account.orgId,
        name: 'Me Org',
        slug: expect.stringMatching(/^me-org/),
        plan: 'free',
        verified: false,
      })
      expect(Object.keys(withJwt.body.organization).sort()).toEqual([
        'created_at',
        'id',
        'name',
        'plan',
        'slug',
        'verified',
      ])
      // How alerts reach the organization: no SMTP in the test server (mails go to its log), no webhook yet.
      expect(withJwt.body.notifications).toEqual({ mail: 'log', webhook: false })

      const key = await createApiKey(server, account, 'me-key')
      const withKey = await server.call('GET', '/api/v1/auth/me', { apiKey: key.key })
      expect(withKey.status).toBe(200)
      expect(withKey.body.user).toBeUndefined()
      expect(withKey.body.organization.id).toBe(account.orgId)
      expect(withKey.body.api_key).toEqual({ id: key.id, name: 'me-key', scopes: ['ingest', 'read', 'admin'] })

      const withCookie = await server.call('GET', '/api/v1/auth/me', {
        headers: { cookie: `dbm_access=${account.token}` },
      })
      expect(withCookie.status).toBe(200)
      expect(withCookie.body.user.id).toBe(account.userId)
    })

    test('refresh rotates the token; presenting a used one revokes the whole family', async () => {
      const account = await signup(server)
      const first = await post('refresh', { refresh_token: account.refreshToken })
      expect(first.status).toBe(200)
      expect(first.body.expires_in).toBe(900)
      expect(first.body.refresh_token).not.toBe(account.refreshToken)
      const me = await server.call('GET', '/api/v1/auth/me', { token: first.body.access_token })
      expect(me.status).toBe(200)

      const second = await post('refresh', { refresh_token: first.body.refresh_token })
      expect(second.status).toBe(200)

      const replay = await post('refresh', { refresh_token: account.refreshToken })
      expect(replay.status).toBe(401)
      expect(replay.body).toEqual({
        error: 'refresh token was already used; the session has been revoked, sign in again',
      })
      // The newest token of the family is dead too.
      const after = await post('refresh', { refresh_token: second.body.refresh_token })
      expect(after.status).toBe(401)
    })

    test('refresh reads the cookie when the body has no token, and rejects garbage', async () => {
      const account = await signup(server)
      const viaCookie = await server.call('POST', '/api/v1/auth/refresh', {
        ip: uniqueIp(),
        headers: { cookie: `dbm_refresh=${account.refreshToken}` },
      })
      expect(viaCookie.status).toBe(200)
      expect(cookieNamed(viaCookie.headers, 'dbm_access')).toContain('HttpOnly')
      expect(cookieNamed(viaCookie.headers, 'dbm_session')).toStartWith('dbm_session=1;')

      expect((await post('refresh', {})).body).toEqual({ error: 'refresh_token is required' })
      const garbage = await post('refresh', { refresh_token: 'not-a-token' })
      expect(garbage.status).toBe(401)
      expect(garbage.body).toEqual({ error: 'invalid or expired refresh token' })
      // An access token is not a refresh token.
      expect((await post('refresh', { refresh_token: account.token })).status).toBe(401)
    })

    test('refresh tokens expire after 7 days, access tokens after 15 minutes', async () => {
      const account = await signup(server)
      server.advance(15 * 60 * 1000 + 1000)
      const expired = await server.call('GET', '/api/v1/auth/me', { token: account.token })
      expect(expired.status).toBe(401)
      expect(expired.body).toEqual({ error: 'invalid or expired access token' })
      const refreshed = await post('refresh', { refresh_token: account.refreshToken })
      expect(refreshed.status).toBe(200)
      server.advance(7 * 24 * 3600 * 1000)
      expect((await post('refresh', { refresh_token: refreshed.body.refresh_token })).status).toBe(401)
      server.advance(-(7 * 24 * 3600 * 1000 + 15 * 60 * 1000 + 1000))
    })

    test('logout answers 204, clears the cookies and revokes the refresh token', async () => {
      const account = await signup(server)
      const res = await post('logout', { refresh_token: account.refreshToken })
      expect(res.status).toBe(204)
      expect(cookieNamed(res.headers, 'dbm_access')).toContain('Max-Age=0')
      expect(cookieNamed(res.headers, 'dbm_refresh')).toContain('Max-Age=0')
      expect(cookieNamed(res.headers, 'dbm_session')).toContain('Max-Age=0')
      const refresh = await post('refresh', { refresh_token: account.refreshToken })
      expect(refresh.status).toBe(401)
      // Logout without any session is still 204.
      expect((await server.call('POST', '/api/v1/auth/logout')).status).toBe(204)
    })

    test('verify-email marks the organization verified; the link verifies once and answers "already verified" after', async () => {
      const account = await signup(server)
      const link = verifyCall(server.mailLink(account.email, /verify/i)!)
      const res = await server.call('GET', link)
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ verified: true, message: 'email address verified' })
      const me = await server.call('GET', '/api/v1/auth/me', { token: account.token })
      expect(me.body.organization.verified).toBe(true)
      expect(me.body.user.email_verified).toBe(true)

      // The link opened again: the user is verified already, which it says (no error).
      const again = await server.call('GET', link)
      expect(again.status).toBe(200)
      expect(again.body).toEqual({ verified: true, message: 'email already verified' })
      // An unknown token is still a 400.
      const unknown = await server.call('GET', link.replace(/token=[^&]+/, `token=${'x'.repeat(43)}`))
      expect(unknown.status).toBe(400)
      expect(unknown.body).toEqual({ error: 'invalid or expired verification token' })
      expect((await server.call('GET', '/api/v1/auth/verify-email')).status).toBe(400)
    })

    test('resend-verification needs a user access token, honours the 60 s cooldown and refuses verified accounts', async () => {
      const account = await signup(server)
      const anonymous = await post('resend-verification', undefined)
      expect(anonymous.status).toBe(401)
      const key = await createApiKey(server, account)
      const withKey = await post('resend-verification', undefined, { apiKey: key.key })
      // Refused by the scope table (auth/scopes.ts) before the route looks: a key is no user.
      expect(withKey.status).toBe(403)
      expect(withKey.body).toEqual({
        error: 'API keys cannot use POST /api/v1/auth/resend-verification: sign in as a user of the organization',
      })

      // The signup mail does not start the cooldown.
      const first = await post('resend-verification', undefined, { token: account.token })
      expect(first.status).toBe(200)
      expect(first.body).toEqual({ message: 'verification email sent' })
      const second = await post('resend-verification', undefined, { token: account.token })
      expect(second.status).toBe(429)
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(59)
      expect(Number(second.headers.get('retry-after'))).toBeLessThanOrEqual(60)
      server.advance(61_000)
      expect((await post('resend-verification', undefined, { token: account.token })).status).toBe(200)

      await verify(server, account)
      server.advance(61_000)
      const verified = await post('resend-verification', undefined, { token: account.token })
      expect(verified.status).toBe(409)
      expect(verified.body).toEqual({ error: 'email address is already verified' })
    })

    test('forgot-password answers the same whether or not the account exists, with a per-address cooldown', async () => {
      const account = await signup(server)
      const known = await post('forgot-password', { email: account.email })
      const unknown = await post('forgot-password', { email: 'ghost@example.com' })
      expect(known.status).toBe(200)
      expect(unknown.status).toBe(200)
      expect(known.body).toEqual(unknown.body)
      expect(known.body).toEqual({
        message: 'if an account exists for that email, a password reset link has been sent',
      })
      expect(server.mailLink(account.email, /reset/i)).toStartWith('http://dbm.test:8080/reset-password?token=')
      expect(server.mailLink('ghost@example.com', /reset/i)).toBeUndefined()

      const knownAgain = await post('forgot-password', { email: account.email })
      const unknownAgain = await post('forgot-password', { email: 'ghost@example.com' })
      expect(knownAgain.status).toBe(429)
      expect(unknownAgain.status).toBe(429)
      expect(knownAgain.body.error).toMatch(/^too many requests; try again in \d+ s$/)
      expect(knownAgain.headers.get('retry-after')).not.toBeNull()

      const invalid = await post('forgot-password', { email: 'nope' })
      expect(invalid.body).toEqual({ error: 'email must be a valid email address' })
    })

    test('reset-password sets the new password once, revokes sessions, and expires after 1 hour', async () => {
      const account = await signup(server)
      server.advance(120_000)
      await post('forgot-password', { email: account.email })
      const token = new URL(server.mailLink(account.email, /reset/i)!).searchParams.get('token')!

      const tooShort = await post('reset-password', { token, password: 'short' })
      expect(tooShort.body).toEqual({ error: 'password must be a string of at least 8 characters' })

      const res = await post('reset-password', { token, password: 'a brand new password' })
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ message: 'password updated; sign in with the new password' })
      expect((await post('login', { email: account.email, password: account.password })).status).toBe(401)
      expect((await post('login', { email: account.email, password: 'a brand new password' })).status).toBe(200)
      // Every refresh token issued before the reset is revoked.
      expect((await post('refresh', { refresh_token: account.refreshToken })).status).toBe(401)
      // Single use.
      const reuse = await post('reset-password', { token, password: 'another password' })
      expect(reuse.status).toBe(400)
      expect(reuse.body).toEqual({ error: 'invalid or expired reset token' })

      // A token older than one hour is refused.
      server.advance(120_000)
      await post('forgot-password', { email: account.email })
      const late = new URL(server.mailLink(account.email, /reset/i)!).searchParams.get('token')!
      server.advance(60 * 60 * 1000 + 1000)
      const expired = await post('reset-password', { token: late, password: 'too late password' })
      expect(expired.status).toBe(400)
      expect(expired.body).toEqual({ error: 'invalid or expired reset token' })
    })
  })
}

describe('reset-password link', () => {
  test("the mailed link redirects to the dashboard's reset page with the token in the fragment", async () => {
    const server = await startTestServer('sqlite')
    try {
      const page = await fetch(`${server.base}/reset-password?token=abc_-12`, { redirect: 'manual' })
      expect(page.status).toBe(302)
      expect(page.headers.get('location')).toBe('/#/reset?token=abc_-12')
      expect(page.headers.get('referrer-policy')).toBe('no-referrer')
      expect(page.headers.get('cache-control')).toBe('no-store')
      const bare = await fetch(`${server.base}/reset-password`, { redirect: 'manual' })
      expect(bare.headers.get('location')).toBe('/#/reset')
      // The dashboard it lands on is served at `/`.
      const dashboard = await fetch(`${server.base}/`)
      expect(dashboard.status).toBe(200)
      expect(await dashboard.text()).toContain('<div id="app"></div>')
    } finally {
      await server.stop()
    }
  })
})
