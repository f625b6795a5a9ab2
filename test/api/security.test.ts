// Security properties on both stores: organization isolation (404, never 403), every bad credential
// is a 401, secrets are stored only as hashes, logs carry no tokens, keys or passwords, and the
// error contract holds for oversize, malformed and unknown requests and internal failures.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SignJWT } from 'jose'
import { sha256 } from '../../src/server/auth/secrets.ts'
import {
  type Account,
  TEST_JWT_SECRET,
  type TestServer,
  createApiKey,
  signup,
  startTestServer,
  storeKinds,
  uniqueIp,
  verify,
} from '../support/server.ts'

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')

for (const kind of storeKinds) {
  describe(`security (${kind})`, () => {
    let server: TestServer
    let alice: Account
    let mallory: Account
    let aliceKey: { id: string; key: string }
    let aliceDb: { id: string }
    beforeAll(async () => {
      server = await startTestServer(kind)
      alice = await signup(server, { org_name: 'Alice Co' })
      mallory = await signup(server, { org_name: 'Mallory Co' })
      await verify(server, alice)
      aliceKey = await createApiKey(server, alice)
      aliceDb = (
        await server.call('POST', '/api/v1/databases', {
          token: alice.token,
          body: { name: 'secret-db', engine: 'postgres', host: 'h' },
        })
      ).body
    })
    afterAll(async () => {
      await server.stop()
    })

    test("another organization's ids are 404 on every route, and lists never show them", async () => {
      const malloryKey = await createApiKey(server, mallory)
      for (const auth of [{ token: mallory.token }, { apiKey: malloryKey.key }]) {
        const attempts: [string, string, unknown?][] = [
          ['GET', `/api/v1/databases/${aliceDb.id}`],
          ['PATCH', `/api/v1/databases/${aliceDb.id}`, { name: 'pwned' }],
          ['DELETE', `/api/v1/databases/${aliceDb.id}`],
          ['GET', `/api/v1/databases/${aliceDb.id}/health`],
          ['DELETE', `/api/v1/api-keys/${aliceKey.id}`],
        ]
        for (const [method, path, body] of attempts) {
          const res = await server.call(method, path, { ...auth, body })
          expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 })
          expect(res.body.error).toMatch(/not found$/)
        }
        expect((await server.call('GET', '/api/v1/databases', auth)).body).toEqual([])
        const keys = (await server.call('GET', '/api/v1/api-keys?include_revoked=true', auth)).body
        expect(keys.map((k: any) => k.id)).toEqual([malloryKey.id])
      }
      // Alice's things are untouched.
      const db = await server.call('GET', `/api/v1/databases/${aliceDb.id}`, { apiKey: aliceKey.key })
      expect(db.body.name).toBe('secret-db')
    })

    test('tampered, expired, alg:none and wrongly signed JWTs are 401', async () => {
      const [header, payload, signature] = alice.token.split('.') as [string, string, string]
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString())
      const secret = new TextEncoder().encode(TEST_JWT_SECRET)
      const now = Math.floor(Date.now() / 1000)
      const forged = {
        tampered: `${header}.${b64({ ...claims, org: mallory.orgId })}.${signature}`,
        badSignature: `${header}.${payload}.${signature.slice(0, -4)}AAAA`,
        algNone: `${b64({ alg: 'none', typ: 'JWT' })}.${payload}.`,
        expired: await new SignJWT({ ...claims, exp: now - 10 }).setProtectedHeader({ alg: 'HS256' }).sign(secret),
        otherSecret: await new SignJWT({ ...claims })
          .setProtectedHeader({ alg: 'HS256' })
          .sign(new TextEncoder().encode('x'.repeat(48))),
        hs512: await new SignJWT({ ...claims }).setProtectedHeader({ alg: 'HS512' }).sign(secret),
        refreshAsAccess: alice.refreshToken,
      }
      for (const [name, token] of Object.entries(forged)) {
        const res = await server.call('GET', '/api/v1/databases', { token })
        expect({ name, status: res.status, body: res.body }).toEqual({
          name,
          status: 401,
          body: { error: 'invalid or expired access token' },
        })
      }
      // The untampered token still works.
      expect((await server.call('GET', '/api/v1/databases', { token: alice.token })).status).toBe(200)
    })

    test('wrong header schemes, malformed and wrong keys are 401', async () => {
      const [, , keyId] = aliceKey.key.split('_')
      const cases: [Record<string, string>, string][] = [
        [{}, 'authentication required: send "X-API-Key: <key>" or "Authorization: Bearer <token>"'],
        [
          { authorization: `Basic ${btoa('a:b')}` },
          'unsupported authorization scheme: use "X-API-Key: <key>" or "Authorization: Bearer <token>"',
        ],
        [
          { authorization: `Token ${aliceKey.key}` },
          'unsupported authorization scheme: use "X-API-Key: <key>" or "Authorization: Bearer <token>"',
        ],
        [
          { authorization: aliceKey.key },
          'unsupported authorization scheme: use "X-API-Key: <key>" or "Authorization: Bearer <token>"',
        ],
        [
          { 'x-api-token': aliceKey.key },
          'authentication required: send "X-API-Key: <key>" or "Authorization: Bearer <token>"',
        ],
        [{ 'x-api-key': 'dbm_ak_nope' }, 'invalid API key'],
        [{ 'x-api-key': `dbm_ak_${keyId}_${'A'.repeat(43)}` }, 'invalid API key'],
        [{ 'x-api-key': alice.token }, 'invalid API key'],
      ]
      for (const [headers, error] of cases) {
        const res = await server.call('GET', '/api/v1/databases', { headers })
        expect({ headers, status: res.status, body: res.body }).toEqual({ headers, status: 401, body: { error } })
      }
    })

    test('passwords, key secrets and mailed tokens are stored only as hashes', async () => {
      const driver = server.store.driver
      const user = await driver.get<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [
        alice.userId,
      ])
      expect(user!.password_hash).toStartWith('$argon2id$')
      expect(user!.password_hash).not.toContain(alice.password)

      const secret = aliceKey.key.split('_').slice(3).join('_')
      const key = await driver.get<Record<string, unknown>>('SELECT * FROM api_keys WHERE id = $1', [aliceKey.id])
      expect(key!.secret_hash).toBe(sha256(secret))
      expect(JSON.stringify(key)).not.toContain(secret)

      await server.call('POST', '/api/v1/auth/forgot-password', { ip: uniqueIp(), body: { email: alice.email } })
      const token = new URL(server.mailLink(alice.email, /reset/i)!).searchParams.get('token')!
      const rows = await driver.all<{ token_hash: string }>('SELECT token_hash FROM email_tokens WHERE user_id = $1', [
        alice.userId,
      ])
      expect(rows.map((r) => r.token_hash)).toContain(sha256(token))
      expect(JSON.stringify(rows)).not.toContain(token)
      const refresh = await driver.all('SELECT * FROM refresh_tokens WHERE user_id = $1', [alice.userId])
      expect(JSON.stringify(refresh)).not.toContain(alice.refreshToken)
    })

    test('logs never contain passwords, JWTs or API keys', async () => {
      const login = await server.call('POST', '/api/v1/auth/login', {
        ip: uniqueIp(),
        body: { email: alice.email, password: alice.password },
      })
      await server.call('GET', '/api/v1/databases', { token: login.body.access_token })
      await server.call('GET', `/api/v1/databases?token=${login.body.access_token}`, { apiKey: aliceKey.key })
      await server.call('POST', '/api/v1/auth/refresh', {
        ip: uniqueIp(),
        body: { refresh_token: login.body.refresh_token },
      })
      await server.call('GET', '/api/v1/databases', { apiKey: `${aliceKey.key}x` })
      const logs = server.logs.join('\n')
      expect(logs).toContain('path=/api/v1/databases')
      for (const secret of [
        alice.password,
        mallory.password,
        login.body.access_token,
        login.body.refresh_token,
        alice.token,
        aliceKey.key,
        aliceKey.key.split('_').slice(3).join('_'),
      ]) {
        expect(logs).not.toContain(secret)
      }
    })

    test('cookie-authenticated writes from another site are refused', async () => {
      const cookie = `dbm_access=${alice.token}`
      const foreign = await server.call('POST', '/api/v1/api-keys', {
        body: { name: 'csrf' },
        headers: { cookie, origin: 'https://evil.example' },
      })
      expect({ status: foreign.status, body: foreign.body }).toEqual({
        status: 403,
        body: { error: 'cross-site request refused' },
      })
      const same = await server.call('POST', '/api/v1/api-keys', {
        body: { name: 'same-site' },
        headers: { cookie, origin: 'http://dbm.test:8080' },
      })
      expect(same.status).toBe(201)
    })

    test('sign-in forms posted from another site are refused (login CSRF): login, signup, accept-invite', async () => {
      // A text/plain form carries JSON (the "=" hidden in a value): the body parser reads it, so the Origin decides.
      const form = (body: Record<string, string>) => {
        const json = JSON.stringify(body)
        return { rawBody: json, headers: { 'content-type': 'text/plain', origin: 'https://evil.example' } }
      }
      const cases = [
        ['/api/v1/auth/login', { email: alice.email, password: alice.password }],
        [
          '/api/v1/auth/signup',
          { email: `csrf-${Date.now()}@example.com`, password: 'a long password', name: 'x', org_name: 'x' },
        ],
        ['/api/v1/auth/accept-invite', { token: 'x'.repeat(43), name: 'x', password: 'a long password' }],
        ['/api/v1/auth/refresh', { refresh_token: alice.refreshToken }],
      ] as const
      for (const [path, body] of cases) {
        const res = await server.call('POST', path, { ip: uniqueIp(), ...form(body) })
        expect({ path, status: res.status, body: res.body }).toEqual({
          path,
          status: 403,
          body: { error: 'cross-site request refused' },
        })
        expect(res.headers.get('set-cookie')).toBeNull()
      }
      // An Origin of "null" (a sandboxed frame, a file) is another site too.
      const opaque = await server.call('POST', '/api/v1/auth/login', {
        ip: uniqueIp(),
        body: { email: alice.email, password: alice.password },
        headers: { origin: 'null' },
      })
      expect(opaque.status).toBe(403)
      // The dashboard's own form (same origin) and clients that send no Origin sign in.
      const same = await server.call('POST', '/api/v1/auth/login', {
        ip: uniqueIp(),
        body: { email: alice.email, password: alice.password },
        headers: { origin: 'http://dbm.test:8080' },
      })
      expect(same.status).toBe(200)
      const none = await server.call('POST', '/api/v1/auth/login', {
        ip: uniqueIp(),
        body: { email: alice.email, password: alice.password },
      })
      expect(none.status).toBe(200)
    })

    test('error contract: malformed JSON 400, oversize 413, unknown route 404, all as {"error"}', async () => {
      const auth = { apiKey: aliceKey.key }
      const malformed = await server.call('POST', '/api/v1/databases', {
        ...auth,
        rawBody: '{"name": "x",',
        headers: { 'content-type': 'application/json' },
      })
      expect({ status: malformed.status, body: malformed.body }).toEqual({
        status: 400,
        body: { error: 'request body must be valid JSON' },
      })
      const notObject = await server.call('POST', '/api/v1/databases', { ...auth, body: [1, 2] })
      expect(notObject.status).toBe(400)
      expect(Object.keys(notObject.body)).toEqual(['error'])

      const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024), engine: 'postgres', host: 'h' })
      const oversize = await server.call('POST', '/api/v1/databases', {
        ...auth,
        rawBody: big,
        headers: { 'content-type': 'application/json' },
      })
      expect({ status: oversize.status, body: oversize.body }).toEqual({
        status: 413,
        body: { error: 'request body is larger than the 1024 KiB limit' },
      })
      // Without a Content-Length (chunked), the cap still holds.
      const chunks = [new TextEncoder().encode(big.slice(0, 600_000)), new TextEncoder().encode(big.slice(600_000))]
      const stream = new ReadableStream({
        pull(c) {
          const next = chunks.shift()
          if (next) c.enqueue(next)
          else c.close()
        },
      })
      const chunked = await fetch(`${server.base}/api/v1/databases`, {
        method: 'POST',
        headers: { 'x-api-key': aliceKey.key, 'content-type': 'application/json' },
        body: stream,
      })
      expect(chunked.status).toBe(413)
      expect(await chunked.json()).toEqual({ error: 'request body is larger than the 1024 KiB limit' })

      for (const [method, path] of [
        ['GET', '/api/v1/nothing-here'],
        ['PUT', '/api/v1/databases'],
        ['GET', '/nothing-here'],
      ] as const) {
        const res = await server.call(method, path, auth)
        expect({ path, status: res.status, body: res.body }).toEqual({
          path,
          status: 404,
          body: { error: 'not found' },
        })
        expect(res.headers.get('content-type')).toStartWith('application/json')
      }
    })
  })
}

describe('internal failures', () => {
  test('are a plain 500 without a stack trace, logged with their cause', async () => {
    const server = await startTestServer('sqlite')
    const account = await signup(server)
    await server.store.driver.exec('DROP TABLE databases')
    const res = await server.call('GET', '/api/v1/databases', { token: account.token })
    expect({ status: res.status, body: res.body }).toEqual({ status: 500, body: { error: 'internal server error' } })
    const line = server.logs.find((l) => l.includes('unhandled error'))!
    expect(line).toContain('path=/api/v1/databases')
    expect(line).toContain('no such table: databases')
    await server.stop()
  })
})

describe('hardening', () => {
  let server: TestServer
  let account: Account
  beforeAll(async () => {
    server = await startTestServer('sqlite')
    account = await signup(server)
  })
  afterAll(async () => {
    await server.stop()
  })

  test('trailing and repeated slashes do not escape an auth rate limit', async () => {
    const ip = '192.0.2.201'
    const paths = ['/api/v1/auth/login/', '//api/v1/auth/login']
    for (let i = 0; i < 10; i++) {
      const res = await server.call('POST', paths[i % paths.length]!, {
        ip,
        body: { email: 'x@y.z', password: 'nope' },
      })
      expect(res.status).toBe(401)
    }
    for (const path of ['/api/v1/auth/login', ...paths]) {
      expect((await server.call('POST', path, { ip, body: { email: 'x@y.z', password: 'nope' } })).status).toBe(429)
    }
  })

  test('behind a trusted proxy the client address is the last X-Forwarded-For entry', async () => {
    for (let i = 0; i < 5; i++)
      await server.call('POST', '/api/v1/auth/signup', {
        headers: { 'x-forwarded-for': `10.1.1.${i}, 198.51.100.99` },
        body: {},
      })
    const res = await server.call('POST', '/api/v1/auth/signup', {
      headers: { 'x-forwarded-for': '10.1.1.77, 198.51.100.99' },
      body: {},
    })
    expect(res.status).toBe(429)
  })

  test('deeply nested JSON is refused at once', async () => {
    const started = performance.now()
    const res = await server.call('POST', '/api/v1/auth/logout', { rawBody: '['.repeat(50_000) + ']'.repeat(50_000) })
    expect({ status: res.status, body: res.body }).toEqual({
      status: 400,
      body: { error: 'request body is nested deeper than 200 levels' },
    })
    expect(performance.now() - started).toBeLessThan(1000)
  })

  test('NUL characters are a 400, in bodies and in URLs', async () => {
    const body = await server.call('POST', '/api/v1/api-keys', { token: account.token, body: { name: 'a\u0000b' } })
    expect({ status: body.status, body: body.body }).toEqual({
      status: 400,
      body: { error: 'request body strings must not contain NUL characters' },
    })
    const url = await server.call('GET', '/api/v1/databases/%00', { token: account.token })
    expect({ status: url.status, body: url.body }).toEqual({
      status: 400,
      body: { error: 'the URL must not contain NUL characters' },
    })
  })

  test('blank names, non-object bodies and long tag keys are 400s that say why', async () => {
    const blank = await server.call('POST', '/api/v1/databases', {
      token: account.token,
      body: { name: '   ', engine: 'postgres', host: 'h' },
    })
    expect(blank.body).toEqual({ error: 'name is required and must be a non-empty string of at most 200 characters' })
    for (const raw of ['[]', 'null', '"x"', '42']) {
      const res = await server.call('POST', '/api/v1/databases', {
        token: account.token,
        rawBody: raw,
        headers: { 'content-type': 'application/json' },
      })
      expect({ raw, status: res.status, body: res.body }).toEqual({
        raw,
        status: 400,
        body: { error: 'request body must be a JSON object' },
      })
    }
    const tags = await server.call('POST', '/api/v1/databases', {
      token: account.token,
      body: { name: 'n', engine: 'postgres', host: 'h', tags: { ['k'.repeat(101)]: 'v' } },
    })
    expect(tags.body).toEqual({ error: 'tags: keys must be 1 to 100 characters' })
  })

  test('unknown query parameters are ignored', async () => {
    const res = await server.call('GET', '/api/v1/api-keys?include_revoked=false&_=12345', { token: account.token })
    expect(res.status).toBe(200)
  })

  test('a password reset also ends the access tokens issued before it, and not those issued after', async () => {
    const victim = await signup(server)
    const other = await server.call('POST', '/api/v1/auth/login', {
      ip: uniqueIp(),
      body: { email: victim.email, password: victim.password },
    })
    await server.call('POST', '/api/v1/auth/forgot-password', { ip: uniqueIp(), body: { email: victim.email } })
    const token = new URL(server.mailLink(victim.email, /reset/i)!).searchParams.get('token')!
    expect(
      (
        await server.call('POST', '/api/v1/auth/reset-password', {
          ip: uniqueIp(),
          body: { token, password: 'new password 123' },
        })
      ).status,
    ).toBe(200)
    for (const t of [victim.token, other.body.access_token]) {
      expect((await server.call('GET', '/api/v1/auth/me', { token: t })).status).toBe(401)
    }
    const fresh = await server.call('POST', '/api/v1/auth/login', {
      ip: uniqueIp(),
      body: { email: victim.email, password: 'new password 123' },
    })
    expect((await server.call('GET', '/api/v1/auth/me', { token: fresh.body.access_token })).status).toBe(200)
  })

  test('the reset link only redirects into the dashboard, keeping the token out of logs and referrers', async () => {
    const page = await fetch(`${server.base}/reset-password?token=secret-token`, { redirect: 'manual' })
    expect(page.status).toBe(302)
    expect(page.headers.get('location')).toBe('/#/reset?token=secret-token')
    expect(page.headers.get('referrer-policy')).toBe('no-referrer')
    expect(await page.text()).toBe('')
  })
})
