// Edges of authentication on both stores: ending a session (password reset, logout, a replayed refresh
// token) refuses its access tokens at once, even ones issued in the same instant, while tokens issued
// after it work; only the newest password-reset link works; bad cookies and headers are 401s with an
// error body, never 500s; and DBM_SIGNUP=closed refuses signups once the store has an organization.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SignJWT } from 'jose'
import { sha256 } from '../../src/server/auth/secrets.ts'
import {
  type Account,
  TEST_JWT_SECRET,
  type TestServer,
  freshStoreLocation,
  signup,
  startTestServer,
  storeKinds,
  uniqueIp,
} from '../support/server.ts'

const ACCESS_REFUSED = { status: 401, body: { error: 'invalid or expired access token' } }
const REFRESH_REFUSED = { status: 401, body: { error: 'invalid or expired refresh token' } }
const SIGNUP_CLOSED = { status: 403, body: { error: 'signup is closed on this server' } }

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString())
const newSignup = (n: number | string) => ({
  email: `owner-${n}-${Math.random().toString(36).slice(2, 8)}@example.com`,
  password: 'password1',
  name: 'O',
  org_name: `Org ${n}`,
})

for (const kind of storeKinds) {
  describe(`auth edges (${kind})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer(kind)
    })
    afterAll(async () => {
      await server.stop()
    })

    const post = (path: string, body?: unknown, extra: Record<string, unknown> = {}) =>
      server.call('POST', `/api/v1/auth/${path}`, { body, ip: uniqueIp(), ...extra })
    const me = async (token: string) => {
      const res = await server.call('GET', '/api/v1/auth/me', { token })
      return res.status === 200
        ? { status: 200, body: { id: res.body.user.id } }
        : { status: res.status, body: res.body }
    }
    const login = async (account: Account) =>
      (await post('login', { email: account.email, password: account.password })).body
    const resetLink = async (account: Account) => {
      expect((await post('forgot-password', { email: account.email })).status).toBe(200)
      return new URL(server.mailLink(account.email, /reset/i)!).searchParams.get('token')!
    }

    describe('ending a session refuses its access tokens at once, whatever the clock says', () => {
      // The clock stands still: the tokens issued before, the revocation and the tokens issued after
      // all fall in the same millisecond, so no comparison of times can tell them apart.
      beforeAll(() => server.freeze(true))
      afterAll(() => server.freeze(false))

      test('a password reset refuses every access token issued before it and accepts those issued after', async () => {
        const account = await signup(server)
        const second = await login(account)
        const token = await resetLink(account)
        expect((await post('reset-password', { token, password: 'a new password' })).status).toBe(200)
        expect(await me(account.token)).toEqual(ACCESS_REFUSED)
        expect(await me(second.access_token)).toEqual(ACCESS_REFUSED)
        expect({ status: (await post('refresh', { refresh_token: second.refresh_token })).status }).toEqual({
          status: 401,
        })

        const after = await login({ ...account, password: 'a new password' })
        expect(await me(after.access_token)).toEqual({ status: 200, body: { id: account.userId } })
        const refreshed = await post('refresh', { refresh_token: after.refresh_token })
        expect(await me(refreshed.body.access_token)).toEqual({ status: 200, body: { id: account.userId } })
      })

      test("logout ends that session's access tokens, and no other session's", async () => {
        const account = await signup(server)
        const second = await login(account)
        const third = await login(account)
        // With the refresh token in the body (an API client).
        expect((await post('logout', { refresh_token: account.refreshToken })).status).toBe(204)
        expect(await me(account.token)).toEqual(ACCESS_REFUSED)
        expect(await me(second.access_token)).toEqual({ status: 200, body: { id: account.userId } })
        // With only the access token (Bearer): its session ends, refresh token included.
        expect((await post('logout', undefined, { token: second.access_token })).status).toBe(204)
        expect(await me(second.access_token)).toEqual(ACCESS_REFUSED)
        expect(await post('refresh', { refresh_token: second.refresh_token })).toMatchObject(REFRESH_REFUSED)
        // With the dashboard's cookies.
        const cookie = `dbm_access=${third.access_token}; dbm_refresh=${third.refresh_token}`
        expect((await post('logout', undefined, { headers: { cookie } })).status).toBe(204)
        expect(await me(third.access_token)).toEqual(ACCESS_REFUSED)
        // A new sign-in in the same instant works.
        expect(await me((await login(account)).access_token)).toEqual({ status: 200, body: { id: account.userId } })
      })

      test("a replayed refresh token ends its session's access tokens; the user's other sessions go on", async () => {
        const account = await signup(server)
        const other = await login(account)
        const rotated = await post('refresh', { refresh_token: account.refreshToken })
        expect(await me(rotated.body.access_token)).toEqual({ status: 200, body: { id: account.userId } })
        const replay = await post('refresh', { refresh_token: account.refreshToken })
        expect(replay.status).toBe(401)
        expect(await me(account.token)).toEqual(ACCESS_REFUSED)
        expect(await me(rotated.body.access_token)).toEqual(ACCESS_REFUSED)
        expect(await me(other.access_token)).toEqual({ status: 200, body: { id: account.userId } })
      })

      test('an access token without a session (the format before sessions) is refused', async () => {
        const account = await signup(server)
        const { sid: _, ...claims } = claimsOf(account.token)
        const legacy = await new SignJWT(claims)
          .setProtectedHeader({ alg: 'HS256' })
          .sign(new TextEncoder().encode(TEST_JWT_SECRET))
        expect(await me(legacy)).toEqual(ACCESS_REFUSED)
        // Another user's session id does not make it valid either.
        const stranger = await signup(server)
        const borrowed = await new SignJWT({ ...claims, sid: claimsOf(stranger.token).sid })
          .setProtectedHeader({ alg: 'HS256' })
          .sign(new TextEncoder().encode(TEST_JWT_SECRET))
        expect(await me(borrowed)).toEqual(ACCESS_REFUSED)
      })
    })

    describe('password reset links', () => {
      test('a new link ends the older ones, and it works once', async () => {
        const account = await signup(server)
        const older = await resetLink(account)
        server.advance(61_000) // the forgot-password cooldown
        const newer = await resetLink(account)
        expect(newer).not.toBe(older)
        const stale = await post('reset-password', { token: older, password: 'older link password' })
        expect({ status: stale.status, body: stale.body }).toEqual({
          status: 400,
          body: { error: 'invalid or expired reset token' },
        })
        expect((await post('reset-password', { token: newer, password: 'newer link password' })).status).toBe(200)
        expect((await post('login', { email: account.email, password: 'newer link password' })).status).toBe(200)
        expect((await post('reset-password', { token: newer, password: 'again password' })).status).toBe(400)
      })

      test('using a link ends every other live one (links issued before this rule)', async () => {
        const account = await signup(server)
        const now = server.deps.clock()
        const extra = ['kept-from-before-1', 'kept-from-before-2']
        for (const token of extra) {
          await server.store.driver.run(
            'INSERT INTO email_tokens (token_hash, user_id, kind, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)',
            [sha256(token), account.userId, 'reset', now + 3_600_000, now],
          )
        }
        // Using one of them ends the other.
        expect((await post('reset-password', { token: extra[0], password: 'first link password' })).status).toBe(200)
        const other = await post('reset-password', { token: extra[1], password: 'second link password' })
        expect({ status: other.status, body: other.body }).toEqual({
          status: 400,
          body: { error: 'invalid or expired reset token' },
        })
        expect((await post('login', { email: account.email, password: 'first link password' })).status).toBe(200)
      })
    })

    describe('bad credentials are 401 with an error body, never 500', () => {
      let account: Account
      const bad: Record<string, string> = {}
      beforeAll(async () => {
        account = await signup(server)
        const [header, payload, signature] = account.token.split('.') as [string, string, string]
        const claims = claimsOf(account.token)
        const secret = new TextEncoder().encode(TEST_JWT_SECRET)
        Object.assign(bad, {
          garbage: 'garbage',
          'lone percent sign': '%',
          'truncated percent-encoding': '%E0%A4%A',
          'invalid UTF-8 percent-encoding': '%C3%28',
          'wrong signature': `${header}.${payload}.${signature.slice(0, -4)}AAAA`,
          'tampered payload': `${header}.${b64({ ...claims, org: 'another-org' })}.${signature}`,
          'alg none': `${b64({ alg: 'none', typ: 'JWT' })}.${payload}.`,
          'alg HS512': await new SignJWT(claims).setProtectedHeader({ alg: 'HS512' }).sign(secret),
          'alg RS256 header': `${b64({ alg: 'RS256', typ: 'JWT' })}.${payload}.${signature}`,
          'signed JSON array payload': await signedRaw('[1,2]'),
          'signed non-JSON payload': await signedRaw('not json'),
          'header not JSON': `${Buffer.from('not json').toString('base64url')}.${payload}.${signature}`,
          'two segments': `${header}.${payload}`,
          'empty segments': '..',
          'huge (12 KB)': `${header}.${'A'.repeat(12_000)}.${signature}`,
          'non-ASCII, percent-encoded': encodeURIComponent('jeton-é-✓'),
          'JSON-looking': '{"sub":"x"}',
          'number-looking': '12345',
        })
      })
      /** HS256 over an arbitrary payload text, signed with the server's secret. */
      async function signedRaw(payloadText: string) {
        const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${Buffer.from(payloadText).toString('base64url')}`
        const key = await crypto.subtle.importKey(
          'raw',
          new TextEncoder().encode(TEST_JWT_SECRET),
          { name: 'HMAC', hash: 'SHA-256' },
          false,
          ['sign'],
        )
        const mac = await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(input))
        return `${input}.${Buffer.from(mac).toString('base64url')}`
      }

      test('a bad dbm_access cookie', async () => {
        for (const [name, value] of Object.entries(bad)) {
          for (const path of ['/api/v1/databases', '/api/v1/auth/me']) {
            const res = await server.call('GET', path, { headers: { cookie: `dbm_access=${value}` } })
            expect({ name, path, status: res.status, body: res.body }).toEqual({ name, path, ...ACCESS_REFUSED })
          }
        }
        // A raw non-ASCII byte sequence (not percent-encoded) too.
        const raw = await fetch(`${server.base}/api/v1/auth/me`, { headers: { cookie: 'dbm_access=jeton-\u00e9' } })
        expect({ status: raw.status, body: await raw.json() }).toEqual(ACCESS_REFUSED)
        expect(server.logs.filter((l) => l.includes('unhandled error'))).toEqual([])
      })

      test('a bad dbm_refresh cookie, on refresh (401) and logout (204)', async () => {
        for (const [name, value] of Object.entries(bad)) {
          const res = await post('refresh', undefined, { headers: { cookie: `dbm_refresh=${value}` } })
          expect({ name, status: res.status, body: res.body }).toEqual({ name, ...REFRESH_REFUSED })
          for (const cookie of ['dbm_refresh', 'dbm_access']) {
            const out = await post('logout', undefined, { headers: { cookie: `${cookie}=${value}` } })
            expect({ name, cookie, status: out.status }).toEqual({ name, cookie, status: 204 })
          }
        }
        // In the body, a token over the 4096-character cap is a 400 that says so.
        const long = await post('refresh', { refresh_token: 'x'.repeat(4097) })
        expect({ status: long.status, body: long.body }).toEqual({
          status: 400,
          body: { error: 'refresh_token must be a non-empty string of at most 4096 characters' },
        })
        const longOut = await post('logout', { refresh_token: 'x'.repeat(4097) })
        expect({ status: longOut.status, body: longOut.body }).toEqual({
          status: 400,
          body: { error: 'refresh_token must be a string of at most 4096 characters' },
        })
        // The account's real session survived all of that.
        expect(await me(account.token)).toEqual({ status: 200, body: { id: account.userId } })
        expect(server.logs.filter((l) => l.includes('unhandled error'))).toEqual([])
      })

      test('a bad Authorization header', async () => {
        for (const [name, value] of Object.entries(bad)) {
          const res = await server.call('GET', '/api/v1/databases', { headers: { authorization: `Bearer ${value}` } })
          expect({ name, status: res.status, body: res.body }).toEqual({ name, ...ACCESS_REFUSED })
        }
        const scheme = 'unsupported authorization scheme: use "X-API-Key: <key>" or "Authorization: Bearer <token>"'
        for (const value of [
          'Bearer',
          'Bearer ',
          `Bearer ${account.token} extra`,
          `Basic ${account.token}`,
          account.token,
          `Bearer\u00e9 ${account.token}`,
        ]) {
          const res = await server.call('GET', '/api/v1/databases', { headers: { authorization: value } })
          expect({ value, status: res.status, body: res.body }).toEqual({ value, status: 401, body: { error: scheme } })
        }
        expect(server.logs.filter((l) => l.includes('unhandled error'))).toEqual([])
      })
    })
  })
}

describe('DBM_SIGNUP', () => {
  for (const kind of storeKinds) {
    test(`open (the default) lets anyone sign up (${kind})`, async () => {
      for (const mode of [undefined, 'open'] as const) {
        const server = await startTestServer(kind, { signup: mode })
        try {
          for (let i = 0; i < 2; i++) {
            const res = await server.call('POST', '/api/v1/auth/signup', { ip: uniqueIp(), body: newSignup(i) })
            expect({ mode, i, status: res.status }).toEqual({ mode, i, status: 201 })
          }
        } finally {
          await server.stop()
        }
      }
    })

    test(`closed on an empty store allows exactly the first signup, even when several race (${kind})`, async () => {
      const server = await startTestServer(kind, { signup: 'closed' })
      try {
        expect((await server.call('GET', '/healthz')).body.signup).toBe('open')
        const answers = await Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            server.call('POST', '/api/v1/auth/signup', { ip: uniqueIp(), body: newSignup(i) }),
          ),
        )
        expect(answers.filter((r) => r.status === 201)).toHaveLength(1)
        expect(answers.filter((r) => r.status !== 201).map((r) => ({ status: r.status, body: r.body }))).toEqual(
          Array(4).fill(SIGNUP_CLOSED),
        )
        const first = answers.find((r) => r.status === 201)!.body
        // The first account works; a later signup, even with the first account's address, is the same 403.
        expect((await server.call('GET', '/api/v1/auth/me', { token: first.access_token })).status).toBe(200)
        const again = await server.call('POST', '/api/v1/auth/signup', {
          ip: uniqueIp(),
          body: { ...newSignup('x'), email: first.user.email },
        })
        expect({ status: again.status, body: again.body }).toEqual(SIGNUP_CLOSED)
        // Closed is answered before validation and before the rate limit: an incomplete form, or a sixth try
        // from one address, learns the same thing and is not sent to wait an hour for it.
        const invalid = await server.call('POST', '/api/v1/auth/signup', {
          ip: uniqueIp(),
          body: { ...newSignup('y'), password: 'short' },
        })
        expect({ status: invalid.status, body: invalid.body }).toEqual(SIGNUP_CLOSED)
        const ip = uniqueIp()
        for (let i = 0; i < 8; i++) {
          const res = await server.call('POST', '/api/v1/auth/signup', { ip, body: {} })
          expect({ i, status: res.status, body: res.body }).toEqual({ i, ...SIGNUP_CLOSED })
        }
        // /healthz tells the dashboard not to offer the form.
        expect((await server.call('GET', '/healthz')).body.signup).toBe('closed')
      } finally {
        await server.stop()
      }
    })

    test(`closed on a store that has an organization refuses signup; sign-in goes on (${kind})`, async () => {
      const location = await freshStoreLocation(kind)
      try {
        const open = await startTestServer(kind, { dataDir: location.dataDir, databaseUrl: location.databaseUrl })
        const account = await signup(open)
        await open.stop()
        const closed = await startTestServer(kind, {
          dataDir: location.dataDir,
          databaseUrl: location.databaseUrl,
          signup: 'closed',
        })
        try {
          const res = await closed.call('POST', '/api/v1/auth/signup', { ip: uniqueIp(), body: newSignup('late') })
          expect({ status: res.status, body: res.body }).toEqual(SIGNUP_CLOSED)
          const login = await closed.call('POST', '/api/v1/auth/login', {
            ip: uniqueIp(),
            body: { email: account.email, password: account.password },
          })
          expect(login.status).toBe(200)
        } finally {
          await closed.stop()
        }
      } finally {
        location.cleanup()
      }
    })
  }
})
