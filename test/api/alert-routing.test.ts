// Routing, repeats and silences of alerts (issue 28 deliverable 4) against a real server on each store
// and a real HTTP receiver (Bun.serve on a loopback port, one path per destination): a route sends an
// alert to its destinations only; a silence holds an alert's notifications back, and its end (early by
// DELETE, or at ends_at) releases the held one exactly once; an alert still open is sent again after
// its route's repeat interval, decided from the store (a second monitor, as after a restart, repeats on
// time) and not while silenced. Time moves by the server's clock (advance) and the monitor's `now`,
// never by sleeping; each step ingests a fresh batch so the finding stays. The routes: members may
// silence but not route (403), another organization's route or silence is a 404, bad matchers a 400.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type AlertRoute, destinationsFor, silenceOf } from '../../src/server/alerts/routing.ts'
import { type Monitor, createMonitor } from '../../src/server/monitor/index.ts'
import type { StoreKind } from '../support/server.ts'
import { pgBatch } from '../support/batches.ts'
import {
  type Account,
  type TestServer,
  agentAccount,
  createApiKey,
  inviteMember,
  startTestServer,
} from '../support/server.ts'
import { startWebhookReceiver } from '../support/webhook.ts'

const RULE = 'pg_cache_hit_ratio'
const DESTINATIONS = '/api/v1/organization/alert-destinations'
const ROUTES = '/api/v1/organization/alert-routes'
const SILENCES = '/api/v1/organization/silences'
const MINUTE = 60_000

describe('route and silence matching (no server)', () => {
  const route = (
    name: string,
    match: AlertRoute['match'],
    destinations: string[],
    more: Partial<AlertRoute> = {},
  ): AlertRoute => ({
    id: name,
    org_id: 'o',
    position: 0,
    name,
    match,
    destinations,
    continue: false,
    repeat_interval_s: null,
    created_at: 0,
    updated_at: 0,
    ...more,
  })
  const prod = { id: 'db1', tags: { env: 'prod' } }
  const alert = (severity: 'critical' | 'warning', rule = RULE) => ({
    key: `${rule}:x`,
    rule,
    severity,
    consequences: [{ key: `${rule}:lead` }],
  })

  test('no routes: every enabled destination; routes: the first match, then later ones while continue', () => {
    expect([...destinationsFor([], ['A', 'B'], alert('warning'), prod)]).toEqual([
      ['A', null],
      ['B', null],
    ])
    const routes = [
      route('critical', { severity: ['critical'] }, ['A'], { position: 0, repeat_interval_s: 600 }),
      route('warning', { severity: ['warning'] }, ['B'], { position: 1 }),
      route('prod', { tag: { env: 'prod' } }, ['C'], { position: 2 }),
    ]
    expect([...destinationsFor(routes, ['A', 'B', 'C'], alert('critical'), prod)]).toEqual([['A', 600_000]])
    expect([...destinationsFor(routes, ['A', 'B', 'C'], alert('warning'), prod)]).toEqual([['B', null]])
    routes[0]!.continue = true
    // Continued: the warning route does not match, the prod one does (and stops there).
    expect([...destinationsFor(routes, ['A', 'B', 'C'], alert('critical'), prod)]).toEqual([
      ['A', 600_000],
      ['C', null],
    ])
    routes[1]!.match = {}
    expect([...destinationsFor(routes, ['A', 'B', 'C'], alert('critical'), prod)]).toEqual([
      ['A', 600_000],
      ['B', null],
    ])
    // A disabled (or deleted) destination is left out; an alert no route matches goes nowhere.
    expect([...destinationsFor(routes, ['B'], alert('critical'), prod)]).toEqual([['B', null]])
    expect([
      ...destinationsFor([route('only rule x', { rule: ['x'] }, ['A'])], ['A'], alert('critical'), prod),
    ]).toEqual([])
  })

  test('a silence matches when every matcher it has does, while in effect; the one ending last wins', () => {
    const base = {
      org_id: 'o',
      comment: '',
      created_by: { kind: 'user' as const, id: 'u' },
      created_at: 0,
      expired_early_at: null,
    }
    const s = (
      id: string,
      m: Partial<{ database_id: string; rule: string; key: string; tag: { key: string; value: string } }>,
      starts: number,
      ends: number,
    ) => ({
      ...base,
      id,
      database_id: m.database_id ?? null,
      rule: m.rule ?? null,
      key: m.key ?? null,
      tag: m.tag ?? null,
      starts_at: starts,
      ends_at: ends,
    })
    const a = alert('critical')
    expect(silenceOf([s('db', { database_id: 'db1' }, 0, 100)], a, prod, 50)?.id).toBe('db')
    expect(silenceOf([s('db', { database_id: 'db2' }, 0, 100)], a, prod, 50)).toBeUndefined()
    expect(
      silenceOf([s('rule+tag', { rule: RULE, tag: { key: 'env', value: 'prod' } }, 0, 100)], a, prod, 50)?.id,
    ).toBe('rule+tag')
    expect(
      silenceOf([s('rule+tag', { rule: RULE, tag: { key: 'env', value: 'staging' } }, 0, 100)], a, prod, 50),
    ).toBeUndefined()
    expect(silenceOf([s('lead', { key: `${RULE}:lead` }, 0, 100)], a, prod, 50)?.id).toBe('lead')
    expect(silenceOf([s('cause', { key: `${RULE}:x` }, 0, 100)], a, prod, 50)?.id).toBe('cause')
    // Not yet started (a maintenance window), ended, and the latest end among several.
    expect(silenceOf([s('later', { rule: RULE }, 60, 100)], a, prod, 50)).toBeUndefined()
    expect(silenceOf([s('over', { rule: RULE }, 0, 50)], a, prod, 50)).toBeUndefined()
    expect(
      silenceOf([s('short', { rule: RULE }, 0, 60), s('long', { database_id: 'db1' }, 0, 90)], a, prod, 50)?.id,
    ).toBe('long')
  })
})

for (const kind of ['sqlite', 'postgres'] as StoreKind[]) {
  describe(`routing, repeats and silences (${kind})`, () => {
    let server: TestServer
    let monitor: Monitor
    let receiver: ReturnType<typeof startWebhookReceiver>

    beforeAll(async () => {
      server = await startTestServer(kind, { webhooks: { allowPrivate: true } })
      monitor = createMonitor(server.deps, { retentionDays: 30, evaluateEveryMs: 30_000 })
      receiver = startWebhookReceiver()
    })
    afterAll(async () => {
      receiver?.stop()
      await server?.stop()
    })

    const now = () => server.deps.clock()
    const critical = (name: string) =>
      pgBatch(name, now() - 30_000, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })
    /** The deliveries the receiver got at `path`, as [event, database name]. */
    const at = (path: string) =>
      receiver.received.filter((h) => h.path === path).map((h) => [h.headers['x-dbm-event'], h.body.database.name])

    async function organization() {
      const { account, key } = await agentAccount(server, { verified: true })
      const call = (method: string, path: string, body?: unknown, who: Account = account) =>
        server.call(method, path, { token: who.token, body })
      const tag = Math.random().toString(36).slice(2, 8)
      const destination = async (name: string) => {
        const res = await call('POST', DESTINATIONS, { kind: 'webhook', name, url: `${receiver.url}/${tag}/${name}` })
        expect(res.status).toBe(201)
        return { id: res.body.id as string, path: `/${tag}/${name}` }
      }
      const ingest = async (name: string) => {
        const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: critical(name) })
        expect(res.status).toBe(200)
        return res.body.database_id as string
      }
      return { account, key, call, destination, ingest }
    }

    const member = (account: Account) => inviteMember(server, account)

    test("a route sends a prod database's alert to A only and the other to B only; a deleted destination leaves its route", async () => {
      const org = await organization()
      const a = await org.destination('a')
      const b = await org.destination('b')
      const billing = await org.ingest('billing')
      const scratch = await org.ingest('scratch')
      expect((await org.call('PATCH', `/api/v1/databases/${billing}`, { tags: { env: 'prod' } })).status).toBe(200)
      const first = await org.call('POST', ROUTES, {
        name: 'prod critical',
        match: { severity: ['critical'], tag: { env: 'prod' } },
        destinations: [a.id],
      })
      expect(first.status).toBe(201)
      expect(first.body).toMatchObject({
        position: 0,
        match: { severity: ['critical'], tag: { env: 'prod' } },
        destinations: [a.id],
        continue: false,
        repeat_interval_s: null,
      })
      const rest = await org.call('POST', ROUTES, { name: 'the rest', match: {}, destinations: [b.id] })
      expect(rest.body.position).toBe(1)

      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([['alert.opened', 'billing']])
      expect(at(b.path)).toEqual([['alert.opened', 'scratch']])

      // Moved to the top, the catch-all is listed first.
      expect((await org.call('PATCH', `${ROUTES}/${rest.body.id}`, { position: 0 })).body.position).toBe(0)
      expect((await org.call('GET', ROUTES)).body.map((r: any) => r.name)).toEqual(['the rest', 'prod critical'])

      expect((await org.call('DELETE', `${DESTINATIONS}/${a.id}`)).status).toBe(204)
      expect((await org.call('GET', `${ROUTES}/${first.body.id}`)).body.destinations).toEqual([])
      expect(scratch).not.toBe(billing)
    })

    test('a silence holds an alert back; expiring it early releases the notification once', async () => {
      const org = await organization()
      const a = await org.destination('a')
      const db = await org.ingest('orders')
      const silence = await org.call('POST', SILENCES, {
        database_id: db,
        ends_at: new Date(now() + 3_600_000).toISOString(),
        comment: 'vacuum full tonight',
      })
      expect(silence.status).toBe(201)
      expect(silence.body).toMatchObject({
        status: 'active',
        database_id: db,
        rule: null,
        key: null,
        tag: null,
        comment: 'vacuum full tonight',
        created_by: { kind: 'user', id: org.account.userId, name: expect.stringContaining(`(${org.account.email})`) },
        expired_early_at: null,
      })

      const t0 = now()
      await monitor.runOnce(t0)
      expect(at(a.path)).toEqual([])
      const [alert] = (await org.call('GET', `/api/v1/databases/${db}/alerts`)).body
      expect(alert.rule).toBe(RULE)
      expect(alert.silenced).toEqual({
        id: silence.body.id,
        ends_at: silence.body.ends_at,
        comment: 'vacuum full tonight',
        by: { kind: 'user', id: org.account.userId, name: expect.stringContaining(`(${org.account.email})`) },
      })
      // The destination it is queued for, not sent while held.
      expect(alert.notified.opened.destinations).toEqual([{ id: a.id, kind: 'webhook', name: 'a', sent_at: null }])
      // Still held at the next evaluation.
      server.advance(31_000)
      await org.ingest('orders')
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([])

      expect((await org.call('DELETE', `${SILENCES}/${silence.body.id}`)).status).toBe(204)
      expect((await org.call('GET', SILENCES)).body.map((s: any) => s.id)).not.toContain(silence.body.id)
      const [expired] = (await org.call('GET', `${SILENCES}?state=expired`)).body
      expect(expired).toMatchObject({ id: silence.body.id, status: 'expired', expired_early_at: expired.ends_at })
      server.advance(31_000)
      await org.ingest('orders')
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([['alert.opened', 'orders']])
      const [released] = (await org.call('GET', `/api/v1/databases/${db}/alerts`)).body
      expect(released.silenced).toBeNull()
      // ... and, once released, when it went (the Issues page's "Notified by").
      expect(released.notified.opened.destinations).toEqual([
        { id: a.id, kind: 'webhook', name: 'a', sent_at: expect.any(String) },
      ])
      expect(Date.parse(released.notified.opened.destinations[0].sent_at)).toBeGreaterThan(t0 + 62_000)
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([['alert.opened', 'orders']])
    })

    test('a silence longer than the day of retries still releases its held alert', async () => {
      const org = await organization()
      const a = await org.destination('a')
      const db = await org.ingest('archive')
      const silence = await org.call('POST', SILENCES, {
        database_id: db,
        ends_at: new Date(now() + 25 * 3_600_000 + 60_000).toISOString(),
        comment: 'migration weekend',
      })
      expect(silence.status).toBe(201)
      await monitor.runOnce(now())
      server.advance(25 * 3_600_000)
      await org.ingest('archive')
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([])
      server.advance(61_000) // past its end
      await org.ingest('archive')
      await monitor.runOnce(now())
      expect(
        receiver.received.filter((h) => h.path === a.path).map((h) => [h.body.event, h.body.alert.rule]),
      ).toContainEqual(['alert.opened', RULE])
    })

    test('a maintenance window is scheduled, then holds, and its end releases the alert once', async () => {
      const org = await organization()
      const a = await org.destination('a')
      const db = await org.ingest('ledger')
      expect((await org.call('PATCH', `/api/v1/databases/${db}`, { tags: { team: 'payments' } })).status).toBe(200)
      const window = await org.call('POST', SILENCES, {
        tag: 'team=payments',
        rule: RULE,
        starts_at: new Date(now() + 10_000).toISOString(),
        ends_at: new Date(now() + 50_000).toISOString(),
        comment: 'failover drill',
      })
      expect(window.body).toMatchObject({ status: 'scheduled', tag: 'team=payments', rule: RULE })
      server.advance(15_000)
      await org.ingest('ledger')
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([])
      expect((await org.call('GET', SILENCES)).body[0].status).toBe('active')
      server.advance(31_000)
      await org.ingest('ledger')
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([]) // held until the window ends (at +50 s)
      server.advance(10_000)
      await org.ingest('ledger')
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([['alert.opened', 'ledger']])
    })

    test("an open alert is sent again after the repeat interval, by the store's record, and not while silenced", async () => {
      const org = await organization()
      const a = await org.destination('a')
      const b = await org.destination('b')
      const db = await org.ingest('events')
      const route = await org.call('POST', ROUTES, {
        name: 'page',
        match: { rule: [RULE] },
        destinations: [a.id],
        repeat_interval_s: 300,
      })
      expect(route.status).toBe(201)
      await monitor.runOnce(now())
      expect(at(a.path)).toEqual([['alert.opened', 'events']])
      expect(at(b.path)).toEqual([]) // not routed there
      const step = async (ms: number, m = monitor) => {
        server.advance(ms)
        await org.ingest('events')
        await m.runOnce(now())
      }
      await step(4 * MINUTE)
      expect(at(a.path)).toHaveLength(1)
      // A monitor of another process (or after a restart) knows when the alert was last sent.
      const restarted = createMonitor(server.deps, { retentionDays: 30, evaluateEveryMs: 30_000 })
      await step(MINUTE + 1000, restarted)
      expect(at(a.path)).toEqual([
        ['alert.opened', 'events'],
        ['alert.repeated', 'events'],
      ])
      const repeat = receiver.received.filter((h) => h.path === a.path)[1]!
      expect(repeat.body.event).toBe('alert.repeated')
      await step(30_000)
      expect(at(a.path)).toHaveLength(2)

      // Silenced: no repeat when one is due; after the silence, the due repeat goes once.
      const silence = await org.call('POST', SILENCES, {
        rule: RULE,
        ends_at: new Date(now() + 3_600_000).toISOString(),
        comment: 'known, fix on Monday',
      })
      await step(5 * MINUTE)
      expect(at(a.path)).toHaveLength(2)
      expect((await org.call('DELETE', `${SILENCES}/${silence.body.id}`)).status).toBe(204)
      await step(1000)
      expect(at(a.path).map(([e]) => e)).toEqual(['alert.opened', 'alert.repeated', 'alert.repeated'])
      await step(1000)
      expect(at(a.path)).toHaveLength(3)
      expect(db).toBeString()
    })

    test('members may silence but not route; another organization gets 404; bad input is a 400 naming it', async () => {
      const org = await organization()
      const other = await organization()
      const a = await org.destination('a')
      const db = await org.ingest('crm')
      const foreignDestination = await other.destination('x')
      const foreignDb = await other.ingest('theirs')
      const m = await member(org.account)
      const ends = new Date(now() + 3_600_000).toISOString()

      // An API key with the admin scope may silence too, recorded as the key; one with read only may not.
      const admin = await createApiKey(server, org.account, 'silencer', ['read', 'admin'])
      const byKey = await server.call('POST', SILENCES, {
        apiKey: admin.key,
        body: { rule: RULE, ends_at: ends, comment: 'from a script' },
      })
      expect(byKey.status).toBe(201)
      expect(byKey.body.created_by).toEqual({ kind: 'api_key', id: admin.id, name: 'API key "silencer"' })
      const reader = await createApiKey(server, org.account, 'reader', ['read'])
      expect((await server.call('GET', SILENCES, { apiKey: reader.key })).status).toBe(200)
      expect(
        (
          await server.call('POST', SILENCES, {
            apiKey: reader.key,
            body: { rule: RULE, ends_at: ends, comment: 'no' },
          })
        ).status,
      ).toBe(403)

      // Members: silences yes, routes no.
      const made = await org.call('POST', SILENCES, { key: `${RULE}`, ends_at: ends, comment: 'member silence' }, m)
      expect(made.status).toBe(201)
      expect(made.body.created_by).toEqual({ kind: 'user', id: m.userId, name: `A Member (${m.email})` })
      expect((await org.call('GET', SILENCES, undefined, m)).status).toBe(200)
      expect((await org.call('DELETE', `${SILENCES}/${made.body.id}`, undefined, m)).status).toBe(204)
      for (const [method, path, body] of [
        ['GET', ROUTES, undefined],
        ['POST', ROUTES, { name: 'x', destinations: [a.id] }],
      ] as const) {
        const res = await org.call(method, path, body, m)
        expect({ method, status: res.status, body: res.body }).toEqual({
          method,
          status: 403,
          body: { error: 'only an owner can manage alert routes' },
        })
      }

      // Another organization's route and silence are 404s; its destination and database are 400s here.
      const route = await org.call('POST', ROUTES, { name: 'mine', destinations: [a.id] })
      const silence = await org.call('POST', SILENCES, { database_id: db, ends_at: ends, comment: 'mine' })
      for (const [method, path] of [
        ['GET', `${ROUTES}/${route.body.id}`],
        ['PATCH', `${ROUTES}/${route.body.id}`],
        ['DELETE', `${ROUTES}/${route.body.id}`],
        ['DELETE', `${SILENCES}/${silence.body.id}`],
      ] as const) {
        const res = await other.call(method, path, method === 'PATCH' ? { name: 'taken' } : undefined)
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 })
      }
      expect((await other.call('GET', SILENCES)).body).toEqual([])

      const refusals: [string, unknown, string][] = [
        [
          SILENCES,
          { ends_at: ends, comment: 'no matcher' },
          'a silence needs at least one matcher: database_id, rule, key or tag',
        ],
        [SILENCES, { tag: 'novalue', ends_at: ends, comment: 'c' }, 'tag must be key=value, such as env=production'],
        [
          SILENCES,
          { database_id: foreignDb, ends_at: ends, comment: 'c' },
          'database_id names no database of the organization',
        ],
        [SILENCES, { database_id: 'nope', ends_at: ends, comment: 'c' }, 'id must be a database id (a UUID)'],
        [
          SILENCES,
          { rule: RULE, ends_at: 'tomorrow', comment: 'c' },
          'ends_at must be an RFC 3339 time, such as 2026-11-30T22:00:00Z',
        ],
        [
          SILENCES,
          { rule: RULE, ends_at: new Date(now() - 1000).toISOString(), comment: 'c' },
          'ends_at must be later than starts_at and than now',
        ],
        [
          SILENCES,
          { rule: RULE, ends_at: new Date(now() + 91 * 86_400_000).toISOString(), comment: 'c' },
          'ends_at must be at most 90 days from now',
        ],
        [
          SILENCES,
          { rule: RULE, ends_at: ends },
          'comment is required and must be a non-empty string of at most 1000 characters',
        ],
        [
          ROUTES,
          { name: 'r', destinations: [foreignDestination.id] },
          `destinations: "${foreignDestination.id}" is not an alert destination of the organization`,
        ],
        [
          ROUTES,
          { name: 'r', destinations: ['x'] },
          'destinations: "x" is not an alert destination of the organization',
        ],
        [
          ROUTES,
          { name: 'r', match: { database_id: [foreignDb] }, destinations: [] },
          `match.database_id: "${foreignDb}" is not a database of the organization`,
        ],
        [
          ROUTES,
          { name: 'r', match: { severity: ['urgent'] }, destinations: [] },
          'match.severity must be one of: critical, warning, info',
        ],
        [
          ROUTES,
          { name: 'r', destinations: [], repeat_interval_s: 60 },
          'repeat_interval_s must be null or a whole number of seconds from 300 to 604800',
        ],
      ]
      for (const [path, body, error] of refusals) {
        const res = await org.call('POST', path, body)
        expect({ body, status: res.status, error: res.body.error }).toEqual({ body, status: 400, error })
      }
      const unknownMatcher = await org.call('POST', ROUTES, { name: 'r', match: { colour: ['red'] }, destinations: [] })
      expect(unknownMatcher).toMatchObject({
        status: 400,
        body: { error: 'match may hold only severity, rule, database_id and tag' },
      })
      expect((await org.call('GET', `${SILENCES}?state=gone`)).body).toEqual({
        error: 'state must be one of: active, expired, all',
      })
    })
  })
}
