// Webhook destinations cannot reach the server's own network (issue 12): every class of internal address,
// written plainly or encoded (2130706433, 0x7f.1, 127.1, [::ffff:127.0.0.1], 6to4, NAT64), is refused at
// PUT with a 400 naming it, and so is a name resolving to one; a webhook stored while internal receivers
// were allowed is refused at delivery once the server runs without DBM_WEBHOOK_ALLOW_PRIVATE, and
// delivered again with it; the test endpoint answers the same words for a refused address, a closed port,
// a name that does not resolve and a 500. Deliveries connect to the address they checked: a name only an
// injected resolver knows is delivered to it with its Host header, a DNS answer that changes after the
// check (rebinding) does not move the delivery, and over https the server name (SNI, certificate check)
// is the URL's name. Both stores where the store is involved.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createMonitor, postWebhook } from '../../src/server/monitor/index.ts'
import { TEST_NOT_DELIVERED } from '../../src/server/routes/alerts.ts'
import { ALLOW_PRIVATE_HINT, type Resolver, internalKind, systemResolver } from '../../src/server/webhook-target.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, freshStoreLocation, startTestServer, storeKinds } from '../support/server.ts'
import { startWebhookReceiver } from '../support/webhook.ts'

const refused = (what: string) => `url: ${what}; ${ALLOW_PRIVATE_HINT}`
const notDelivered = { status: 200, body: { delivered: false, reason: TEST_NOT_DELIVERED } }
/** A public address that is never anyone's receiver (TEST-NET-3, RFC 5737). */
const PUBLIC = '203.0.113.7'

/** Names only the injected resolver knows (the system's answers every other name). */
function resolverOf(names: Record<string, string[] | (() => string[])>) {
  const lookups: string[] = []
  const resolve: Resolver = async (name) => {
    lookups.push(name)
    const fixed = names[name]
    if (fixed) return typeof fixed === 'function' ? fixed() : fixed
    return systemResolver(name)
  }
  return { resolve, lookups, count: (name: string) => lookups.filter((n) => n === name).length }
}

/** A loopback port nothing listens on (taken from the OS, then released). */
function closedPort(): number {
  const probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response() })
  const port = probe.port!
  probe.stop(true)
  return port
}

/** 50 % of block reads from shared buffers: a critical finding, so an alert (and a webhook POST) opens. */
const critical = (name: string) =>
  pgBatch(name, Date.now() - 30_000, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })

/** An unverified organization (its alerts go to the webhook only) and calls with its API key. */
async function organization(server: TestServer) {
  const { account, key } = await agentAccount(server, { verified: false })
  const call = (method: string, path: string, body?: unknown) => server.call(method, path, { apiKey: key, body })
  return {
    account,
    key,
    call,
    put: (url: string) => call('PUT', '/api/v1/organization/webhook', { url }),
    test: () => call('POST', '/api/v1/organization/webhook/test'),
  }
}

describe('internal addresses', () => {
  test('every internal class is named, IPv6 forms carrying an IPv4 address by it; public addresses are not', () => {
    const table: Record<string, string | null> = {
      '0.0.0.0': 'unspecified ("this network")',
      '0.255.255.255': 'unspecified ("this network")',
      '10.0.0.1': 'private',
      '100.64.0.1': 'shared address space (carrier-grade NAT)',
      '100.127.255.255': 'shared address space (carrier-grade NAT)',
      '100.128.0.1': null,
      '127.0.0.1': 'loopback',
      '127.255.255.254': 'loopback',
      '169.254.169.254': 'link-local',
      '172.15.255.255': null,
      '172.16.0.1': 'private',
      '172.31.255.255': 'private',
      '172.32.0.1': null,
      '192.0.0.8': 'reserved (IETF protocol assignments)',
      '192.168.1.1': 'private',
      '198.17.255.255': null,
      '198.18.0.1': 'reserved (benchmarking)',
      '198.19.255.255': 'reserved (benchmarking)',
      '224.0.0.1': 'multicast',
      '239.255.255.250': 'multicast',
      '240.0.0.1': 'reserved',
      '255.255.255.255': 'broadcast',
      '8.8.8.8': null,
      [PUBLIC]: null,
      '::': 'unspecified',
      '::1': 'loopback',
      '::ffff:127.0.0.1': 'loopback (IPv4 127.0.0.1)',
      '::ffff:7f00:1': 'loopback (IPv4 127.0.0.1)',
      '::ffff:a9fe:a9fe': 'link-local (IPv4 169.254.169.254)',
      '::ffff:0:a00:1': 'private (IPv4 10.0.0.1)',
      '::7f00:1': 'loopback (IPv4 127.0.0.1)',
      '::2': 'unspecified ("this network") (IPv4 0.0.0.2)',
      '64:ff9b::a00:1': 'private (IPv4 10.0.0.1)',
      '64:ff9b::808:808': null,
      '64:ff9b:1::1': 'reserved (local-use NAT64)',
      '2002:c0a8:101::1': 'private (IPv4 192.168.1.1)',
      '2002:808:808::1': null,
      'fc00::1': 'unique-local',
      'fd12:3456::1': 'unique-local',
      'fe80::1': 'link-local',
      'febf::1': 'link-local',
      'fec0::1': 'site-local',
      'ff02::1': 'multicast',
      '100::1': 'reserved',
      '2001:4860:4860::8888': null,
      '[2001:4860:4860::8888]': null,
      'example.com': 'not an IP address',
    }
    expect(Object.fromEntries(Object.keys(table).map((a) => [a, internalKind(a)]))).toEqual(table)
  })
})

for (const kind of storeKinds) {
  describe(`webhook destinations (${kind})`, () => {
    const names = resolverOf({
      'internal.example.test': [PUBLIC, '10.1.2.3'],
      'v6.example.test': ['2001:4860:4860::8888', 'fd00::5'],
      'mapped.example.test': ['::ffff:169.254.169.254'],
      'public.example.test': [PUBLIC],
      'pinned.example.test': ['127.0.0.1'],
    })
    let strict: TestServer
    let allowing: TestServer
    beforeAll(async () => {
      ;[strict, allowing] = await Promise.all([
        startTestServer(kind, { webhooks: { allowPrivate: false, resolve: names.resolve } }),
        startTestServer(kind, { webhooks: { allowPrivate: true, resolve: names.resolve } }),
      ])
    })
    afterAll(async () => {
      await Promise.all([strict?.stop(), allowing?.stop()])
    })

    test('PUT refuses every internal address, plain or encoded, and names resolving to one; public ones and unresolved names are taken', async () => {
      const org = await organization(strict)
      const refusals: [string, string][] = [
        ['http://127.0.0.1/hook', refused('address 127.0.0.1 is loopback')],
        ['http://2130706433/hook', refused('address 127.0.0.1 is loopback')],
        ['http://0x7f.1/hook', refused('address 127.0.0.1 is loopback')],
        ['http://127.1/hook', refused('address 127.0.0.1 is loopback')],
        ['http://0177.0.0.1:8080/hook', refused('address 127.0.0.1 is loopback')],
        ['http://%31%32%37.0.0.1/hook', refused('address 127.0.0.1 is loopback')],
        ['https://127.0.0.1./hook', refused('address 127.0.0.1 is loopback')],
        ['http://0/', refused('address 0.0.0.0 is unspecified ("this network")')],
        ['http://169.254.169.254/latest/meta-data/', refused('address 169.254.169.254 is link-local')],
        ['http://10.0.0.9:8000/hook', refused('address 10.0.0.9 is private')],
        ['http://172.16.5.4/', refused('address 172.16.5.4 is private')],
        ['http://192.168.1.1/', refused('address 192.168.1.1 is private')],
        ['http://100.64.0.1/', refused('address 100.64.0.1 is shared address space (carrier-grade NAT)')],
        ['http://192.0.0.8/', refused('address 192.0.0.8 is reserved (IETF protocol assignments)')],
        ['http://198.18.0.1/', refused('address 198.18.0.1 is reserved (benchmarking)')],
        ['http://224.0.0.1/', refused('address 224.0.0.1 is multicast')],
        ['http://240.0.0.1/', refused('address 240.0.0.1 is reserved')],
        ['http://255.255.255.255/', refused('address 255.255.255.255 is broadcast')],
        ['http://[::]/', refused('address :: is unspecified')],
        ['http://[::1]:8080/', refused('address ::1 is loopback')],
        ['http://[::ffff:127.0.0.1]/', refused('address ::ffff:7f00:1 is loopback (IPv4 127.0.0.1)')],
        [
          'http://[0:0:0:0:0:ffff:a9fe:a9fe]/',
          refused('address ::ffff:a9fe:a9fe is link-local (IPv4 169.254.169.254)'),
        ],
        ['http://[::127.0.0.1]/', refused('address ::7f00:1 is loopback (IPv4 127.0.0.1)')],
        ['http://[64:ff9b::10.0.0.1]/', refused('address 64:ff9b::a00:1 is private (IPv4 10.0.0.1)')],
        ['http://[2002:c0a8:101::1]/', refused('address 2002:c0a8:101::1 is private (IPv4 192.168.1.1)')],
        ['http://[fc00::1]/', refused('address fc00::1 is unique-local')],
        ['http://[fd00::1]/', refused('address fd00::1 is unique-local')],
        ['http://[fe80::1]/', refused('address fe80::1 is link-local')],
        ['http://[ff02::1]/', refused('address ff02::1 is multicast')],
        // One internal address among public ones is enough.
        // The message leaves out the address a name resolved to (the server's DNS may know internal names).
        [
          'https://internal.example.test/hook',
          refused('internal.example.test resolves to an internal address (private)'),
        ],
        ['https://v6.example.test/hook', refused('v6.example.test resolves to an internal address (unique-local)')],
        [
          'https://mapped.example.test/hook',
          refused('mapped.example.test resolves to an internal address (link-local)'),
        ],
        ['http://localhost:8080/hook', refused('localhost resolves to an internal address (loopback)')], // the system's resolver
        ['ftp://hooks.example.com/x', 'url must be an http:// or https:// URL'],
        ['http://user:pw@hooks.example.com/x', 'url must not contain a user name or password'],
      ]
      for (const [url, error] of refusals) {
        const res = await org.put(url)
        expect({ url, status: res.status, body: res.body }).toEqual({ url, status: 400, body: { error } })
      }
      expect((await org.call('GET', '/api/v1/organization/webhook')).status).toBe(404)

      // Public addresses, names resolving only to them, and names that do not resolve (yet) are taken.
      const taken = [
        `http://${PUBLIC}:8080/hook`,
        'https://public.example.test/hook',
        'http://[2001:4860:4860::8888]/hook',
        'https://nothing-here.dbm.invalid/hook',
      ]
      const statuses: number[] = []
      for (const url of taken) {
        const res = await org.put(url)
        statuses.push(res.status)
        expect(res.body.url).toBe(url)
      }
      expect(statuses).toEqual([201, 200, 200, 200])
    })

    test('an organization may set a URL with a host name 30 times an hour, refused ones included; IP addresses are not counted', async () => {
      const org = await organization(strict)
      for (let i = 0; i < 30; i++) {
        const res = await org.put(
          i % 2 === 0 ? `https://internal.example.test/${i}` : `https://nothing-${i}.dbm.invalid/hook`,
        )
        expect({ i, status: res.status }).toEqual({ i, status: i % 2 === 0 ? 400 : i === 1 ? 201 : 200 })
      }
      const limited = await org.put('https://public.example.test/hook')
      expect(limited.status).toBe(429)
      expect(limited.body.error).toMatch(/^too many requests; try again in \d+ s$/)
      // An address needs no resolving, so tells nothing: still judged.
      expect((await org.put('http://10.9.9.9/')).body).toEqual({
        error:
          'url: address 10.9.9.9 is private; set DBM_WEBHOOK_ALLOW_PRIVATE=true on the server to allow internal receivers',
      })
      expect((await org.put(`http://${PUBLIC}/hook`)).status).toBe(200)
    })

    test('a webhook kept from when internal receivers were allowed is refused at delivery without the setting, and delivered with it', async () => {
      const location = await freshStoreLocation(kind)
      const receiver = startWebhookReceiver()
      try {
        const open = (allowPrivate: boolean) =>
          startTestServer(kind, {
            dataDir: location.dataDir,
            databaseUrl: location.databaseUrl,
            webhooks: { allowPrivate },
          })
        let server = await open(true)
        const org = await organization(server)
        // Calls go to whichever server runs at the time.
        const call = (method: string, path: string) => server.call(method, path, { apiKey: org.key })
        expect((await org.put(`${receiver.url}/hooks/dbm`)).status).toBe(201)
        expect(
          (await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: critical('orders') })).status,
        ).toBe(200)
        await server.stop()

        // Restarted without DBM_WEBHOOK_ALLOW_PRIVATE: the alert's POST is refused before any connection.
        server = await open(false)
        const monitor = createMonitor(server.deps, { retentionDays: 30 })
        expect((await monitor.runOnce()).notifications).toEqual({ sent: 0, failed: 1, given_up: 0 })
        expect(receiver.received).toHaveLength(0)
        const why = `address 127.0.0.1 is loopback; ${ALLOW_PRIVATE_HINT}`
        expect((await call('GET', '/api/v1/organization/webhook')).body).toMatchObject({
          last_success_at: null,
          last_failure_at: expect.any(String),
          last_error: why,
        })
        const warned = server.logs.filter(
          (l) => l.includes(' WARN webhook delivery failed ') && l.includes(`org=${org.account.orgId} `),
        )
        expect(warned).toHaveLength(1)
        expect(warned[0]).toContain(`target=${receiver.url} attempt=1 cause="${why.replaceAll('"', '\\"')}"`)
        const tested = await call('POST', '/api/v1/organization/webhook/test')
        expect({ status: tested.status, body: tested.body }).toEqual(notDelivered)
        expect(receiver.received).toHaveLength(0)
        await server.stop()

        // With the setting again, the pending notification goes out at the next evaluation.
        server = await open(true)
        const allowed = createMonitor(server.deps, { retentionDays: 30 })
        expect((await allowed.runOnce()).notifications).toEqual({ sent: 1, failed: 0, given_up: 0 })
        expect(receiver.received.map((r) => [r.path, r.body.event])).toEqual([['/hooks/dbm', 'alert.opened']])
        // The last failure stays on record, older than the success.
        const after = (await call('GET', '/api/v1/organization/webhook')).body
        expect(after.last_error).toBe(why)
        expect(Date.parse(after.last_success_at)).toBeGreaterThan(Date.parse(after.last_failure_at))
        await server.stop()
      } finally {
        receiver.stop()
        location.cleanup()
      }
    })

    test('a test delivery answers the same for a refused address, a name resolving to one, no such name, a closed port and a 500', async () => {
      const receiver = startWebhookReceiver({ statuses: [500] })
      try {
        const answers: Record<string, unknown> = {}
        const attempt = async (what: string, server: TestServer, url: string, viaStore = false) => {
          const org = await organization(server)
          // Refused URLs cannot be PUT: they are stored as a webhook set before this check existed would be.
          if (viaStore)
            await server.store.monitor.putWebhook(org.account.orgId, url, 'dbm_whsec_test', server.deps.clock())
          else expect((await org.put(url)).status).toBe(201)
          const res = await org.test()
          answers[what] = { status: res.status, body: res.body }
        }
        await attempt('refused address', strict, 'http://127.0.0.1:9/hook', true)
        await attempt('name resolving to an internal address', strict, 'http://internal.example.test/hook', true)
        await attempt('no such name', strict, 'http://nothing-here.dbm.invalid/hook')
        await attempt('closed port', allowing, `http://127.0.0.1:${closedPort()}/hook`)
        await attempt('500', allowing, `${receiver.url}/hook`)
        expect(answers).toEqual({
          'refused address': notDelivered,
          'name resolving to an internal address': notDelivered,
          'no such name': notDelivered,
          'closed port': notDelivered,
          '500': notDelivered,
        })
        expect(receiver.received).toHaveLength(1)
      } finally {
        receiver.stop()
      }
    })

    test('a delivery connects to the address it resolved: a name only the resolver knows arrives with its Host header', async () => {
      const receiver = startWebhookReceiver()
      try {
        const org = await organization(allowing)
        const port = new URL(receiver.url).port
        expect((await org.put(`http://pinned.example.test:${port}/hook?x=1`)).status).toBe(201)
        const before = names.count('pinned.example.test')
        expect((await org.test()).body).toEqual({ delivered: true })
        expect(names.count('pinned.example.test') - before).toBe(1)
        expect(receiver.received.map((r) => [r.path, r.headers.host])).toEqual([
          ['/hook?x=1', `pinned.example.test:${port}`],
        ])
      } finally {
        receiver.stop()
      }
    })
  })
}

describe('pinned deliveries', () => {
  const send = (url: string, policy: Parameters<typeof postWebhook>[4]['policy'], timeoutMs = 2000) =>
    postWebhook({ url, secret: 'dbm_whsec_test' }, 'test', 'delivery-1', '{"event":"test"}', { timeoutMs, policy })

  test('DNS rebinding: the delivery resolves once, checks that answer and connects to it; a later internal answer refuses it', async () => {
    const receiver = startWebhookReceiver()
    try {
      let calls = 0
      // First answer public, every later one the receiver's loopback address (what a second lookup by the
      // HTTP client would see).
      const resolve: Resolver = async () => (++calls === 1 ? [PUBLIC] : ['127.0.0.1'])
      const url = `http://rebind.example.test:${new URL(receiver.url).port}/hook`
      const first = await send(url, { allowPrivate: false, resolve }, 500)
      expect(first.error).not.toBeNull() // nothing answers 2xx at TEST-NET-3
      expect(calls).toBe(1)
      expect(receiver.received).toHaveLength(0)
      const second = await send(url, { allowPrivate: false, resolve }, 500)
      expect(second).toEqual({
        status: null,
        error: `rebind.example.test resolves to an internal address (loopback); ${ALLOW_PRIVATE_HINT}`,
        duration_ms: expect.any(Number),
      })
      expect(calls).toBe(2)
      expect(receiver.received).toHaveLength(0)
    } finally {
      receiver.stop()
    }
  })

  test('an address that refuses the connection is followed by the next checked one; a name that does not resolve is said so', async () => {
    const receiver = startWebhookReceiver()
    try {
      const port = new URL(receiver.url).port
      // Nothing listens on 127.0.0.2 at the receiver's port.
      const resolve: Resolver = async (name) => (name === 'two.example.test' ? ['127.0.0.2', '127.0.0.1'] : [])
      expect(await send(`http://two.example.test:${port}/hook`, { allowPrivate: true, resolve })).toEqual({
        status: 200,
        error: null,
        duration_ms: expect.any(Number),
      })
      expect(receiver.received.map((r) => r.headers.host)).toEqual([`two.example.test:${port}`])
      expect(await send(`http://none.example.test:${port}/hook`, { allowPrivate: true, resolve })).toEqual({
        status: null,
        error: 'cannot resolve none.example.test (no addresses)',
        duration_ms: expect.any(Number),
      })
      const unresolvable = await send('http://nothing-here.dbm.invalid/hook', { allowPrivate: false })
      expect(unresolvable.error).toStartWith('cannot resolve nothing-here.dbm.invalid (')
    } finally {
      receiver.stop()
    }
  })

  test('redirects are not followed', async () => {
    const target = startWebhookReceiver()
    const redirecting = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: () => new Response(null, { status: 307, headers: { location: `${target.url}/elsewhere` } }),
    })
    try {
      expect(await send(`http://127.0.0.1:${redirecting.port}/hook`, { allowPrivate: true })).toEqual({
        status: 307,
        error: 'HTTP 307 (redirects are not followed)',
        duration_ms: expect.any(Number),
      })
      expect(target.received).toHaveLength(0)
    } finally {
      redirecting.stop(true)
      target.stop()
    }
  })

  test('https to a checked address: the TLS server name and the certificate check are the URL name', async () => {
    const fixture = (name: string) => ({
      serverName: name,
      cert: readFileSync(join(import.meta.dir, '../fixtures/tls', `${name}.crt`), 'utf8'),
      key: readFileSync(join(import.meta.dir, '../fixtures/tls', `${name}.key`), 'utf8'),
    })
    const certs = [fixture('hooks.example.test'), fixture('other.example.test')]
    const hosts: string[] = []
    // The certificate is chosen by the server name the client sends (SNI); hooks.example.test's is the default.
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      tls: certs,
      fetch(request) {
        hosts.push(request.headers.get('host') ?? '')
        return new Response(null, { status: 204 })
      },
    })
    try {
      const resolve: Resolver = async () => ['127.0.0.1']
      const ca = certs.map((c) => c.cert).join('')
      const policy = { allowPrivate: true, resolve, ca }
      const port = server.port
      expect(await send(`https://other.example.test:${port}/hook`, policy)).toEqual({
        status: 204,
        error: null,
        duration_ms: expect.any(Number),
      })
      expect(await send(`https://hooks.example.test:${port}/hook`, policy)).toEqual({
        status: 204,
        error: null,
        duration_ms: expect.any(Number),
      })
      expect(hosts).toEqual([`other.example.test:${port}`, `hooks.example.test:${port}`])
      // A name neither certificate is for, and the bare address, fail the certificate check; so does a
      // self-signed receiver without the test's trusted certificates (verification stays on).
      const wrong = await send(`https://wrong.example.test:${port}/hook`, policy)
      const bare = await send(`https://127.0.0.1:${port}/hook`, policy)
      const untrusted = await send(`https://hooks.example.test:${port}/hook`, { allowPrivate: true, resolve })
      expect([wrong, bare, untrusted].map((a) => [a.status, a.error === null])).toEqual([
        [null, false],
        [null, false],
        [null, false],
      ])
      expect(hosts).toHaveLength(2)
    } finally {
      server.stop(true)
    }
  })
})
