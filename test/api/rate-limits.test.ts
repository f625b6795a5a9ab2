// Auth rate limits: the spec's table per client address (per /64 for IPv6), 429 with Retry-After, counted
// in the store so they survive a restart and hold across two `serve` processes sharing one PostgreSQL store.
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { authRateLimits } from '../../src/server/limits.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { startServe } from '../support/process.ts'
import { type TestServer, freshStoreLocation, startTestServer, storeKinds } from '../support/server.ts'

const spec = {
  signup: 5,
  login: 10,
  refresh: 30,
  'forgot-password': 5,
  'reset-password': 10,
  'resend-verification': 5,
  'accept-invite': 10,
} as const

test("the limits table is the spec's", () => {
  expect(Object.fromEntries(Object.entries(authRateLimits).map(([k, v]) => [k.replaceAll('_', '-'), v.limit]))).toEqual(
    spec,
  )
  for (const v of Object.values(authRateLimits)) expect(v.windowMs).toBe(3600_000)
})

for (const kind of storeKinds) {
  describe(`rate limits (${kind})`, () => {
    let server: TestServer
    afterAll(async () => {
      await server?.stop()
    })

    test('each auth endpoint allows its hourly count per address, then 429 with Retry-After', async () => {
      server = await startTestServer(kind)
      for (const [endpoint, limit] of Object.entries(spec)) {
        const ip = `192.0.2.${limit}${endpoint.length}`
        // Invalid requests count too: the limit is on attempts, not successes.
        for (let i = 0; i < limit; i++) {
          const res = await server.call('POST', `/api/v1/auth/${endpoint}`, { ip, body: {} })
          expect(res.status).not.toBe(429)
        }
        const over = await server.call('POST', `/api/v1/auth/${endpoint}`, { ip, body: {} })
        expect({ endpoint, status: over.status }).toEqual({ endpoint, status: 429 })
        expect(over.body).toEqual({ error: 'too many requests; try again in 3600 s' })
        expect(over.headers.get('retry-after')).toBe('3600')
        // Another address is not affected.
        expect(
          (await server.call('POST', `/api/v1/auth/${endpoint}`, { ip: '198.51.100.7', body: {} })).status,
        ).not.toBe(429)
      }
    })

    test('the window slides: an attempt is forgotten one hour after it was made', async () => {
      const ip = '203.0.113.9'
      const started = Date.now()
      for (let i = 0; i < 10; i++) {
        await server.call('POST', '/api/v1/auth/login', { ip, body: { email: 'a@b.c', password: 'x' } })
        server.advance(60_000)
      }
      const over = await server.call('POST', '/api/v1/auth/login', { ip, body: { email: 'a@b.c', password: 'x' } })
      expect(over.status).toBe(429)
      // The oldest attempt is 600 s plus the requests' own run time old (measured: 14 s on a loaded CI machine).
      const retryAfter = Number(over.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(3000 - Math.ceil((Date.now() - started) / 1000) - 1)
      expect(retryAfter).toBeLessThanOrEqual(3000)
      server.advance((3600 - 600) * 1000 + 1)
      const again = await server.call('POST', '/api/v1/auth/login', { ip, body: { email: 'a@b.c', password: 'x' } })
      expect(again.status).toBe(401)
      expect((await server.call('POST', '/api/v1/auth/login', { ip, body: {} })).status).toBe(429)
    })
  })
}

test('X-Forwarded-For is ignored unless the proxy is trusted', async () => {
  const server = await startTestServer('sqlite', { trustProxy: false })
  try {
    for (let i = 0; i < 5; i++) await server.call('POST', '/api/v1/auth/signup', { ip: `10.9.9.${i}`, body: {} })
    const res = await server.call('POST', '/api/v1/auth/signup', { ip: '10.9.9.200', body: {} })
    expect(res.status).toBe(429)
  } finally {
    await server.stop()
  }
})

test('IPv6 clients are counted per /64: two addresses of one /64 share a budget, another /64 has its own', async () => {
  const server = await startTestServer('sqlite')
  try {
    // forgot-password allows 5 an hour: spent by five forms of addresses in 2001:db8:5:6::/64.
    const sameNetwork = [
      '2001:db8:5:6::1',
      '2001:DB8:5:6::2',
      '2001:0db8:0005:0006:ffff:0:0:3',
      '2001:db8:5:6::4%eth0',
      '[2001:db8:5:6::5]:443',
    ]
    for (const ip of sameNetwork)
      expect((await server.call('POST', '/api/v1/auth/forgot-password', { ip, body: {} })).status).not.toBe(429)
    expect(
      (await server.call('POST', '/api/v1/auth/forgot-password', { ip: '2001:db8:5:6:abcd::99', body: {} })).status,
    ).toBe(429)
    // The neighbouring /64 is another budget, and so is an IPv4 address that an IPv4-mapped form names.
    expect(
      (await server.call('POST', '/api/v1/auth/forgot-password', { ip: '2001:db8:5:7::1', body: {} })).status,
    ).not.toBe(429)
    for (let i = 0; i < 5; i++)
      await server.call('POST', '/api/v1/auth/forgot-password', { ip: '::ffff:192.0.2.66', body: {} })
    expect((await server.call('POST', '/api/v1/auth/forgot-password', { ip: '192.0.2.66', body: {} })).status).toBe(429)
    expect((await server.call('POST', '/api/v1/auth/forgot-password', { ip: '192.0.2.67', body: {} })).status).not.toBe(
      429,
    )
  } finally {
    await server.stop()
  }
})

test('limits survive a restart of the server on the same SQLite data directory', async () => {
  const location = await freshStoreLocation('sqlite')
  let server = await startTestServer('sqlite', { dataDir: location.dataDir })
  for (let i = 0; i < 10; i++) await server.call('POST', '/api/v1/auth/login', { ip: '192.0.2.77', body: {} })
  await server.stop()
  server = await startTestServer('sqlite', { dataDir: location.dataDir })
  try {
    expect((await server.call('POST', '/api/v1/auth/login', { ip: '192.0.2.77', body: {} })).status).toBe(429)
  } finally {
    await server.stop()
    location.cleanup()
  }
})

test('two serve processes on one PostgreSQL store share the limit', async () => {
  const databaseUrl = await (await sharedPostgres()).freshDatabase()
  const dirs = [mkdtempSync(join(tmpdir(), 'dbm-a-')), mkdtempSync(join(tmpdir(), 'dbm-b-'))]
  // Start one first so the second finds the schema migrated (both would be safe: migrations lock).
  const options = (dataDir: string) => ({
    dataDir,
    extraArgs: ['--database-url', databaseUrl],
    env: { DBM_JWT_SECRET: 'shared-secret-of-two-processes-0123456789' },
  })
  const a = await startServe(['bun', 'src/cli.ts'], options(dirs[0]!))
  const b = await startServe(['bun', 'src/cli.ts'], options(dirs[1]!))
  try {
    const login = (base: string) =>
      fetch(`${base}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"email":"x@y.z","password":"nope"}',
      })
    const statuses: number[] = []
    for (let i = 0; i < 10; i++) statuses.push((await login(i % 2 ? a.base : b.base)).status)
    expect(statuses).toEqual(Array(10).fill(401))
    const overA = await login(a.base)
    const overB = await login(b.base)
    expect([overA.status, overB.status]).toEqual([429, 429])
    expect(Number(overB.headers.get('retry-after'))).toBeGreaterThan(3590)
  } finally {
    expect(await a.stop()).toBe(0)
    expect(await b.stop()).toBe(0)
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  }
})
