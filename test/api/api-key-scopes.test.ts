// API key scopes and owners through HTTP on both stores: every route of the app has its access in the
// scope table (auth/scopes.ts) and a request path finds its own route there; a key of each single
// scope against representative routes; a new key's default scopes and the validation of `scopes`; a key
// creates keys only with `admin` and never grants a scope it lacks; the list shows scopes and creators;
// removing or demoting an owner revokes their keys (and the keys made with them) at once, so the very
// next request with one is a 401; members cannot change what is collected, owners and admin keys can.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createApp } from '../../src/server/app.ts'
import { ROUTE_ACCESS, matchRoute, routeKey } from '../../src/server/auth/scopes.ts'
import { agentKey } from '../../src/local/account.ts'
import { generateApiKey } from '../../src/server/auth/api-keys.ts'
import { fullBatch } from '../support/full-batch.ts'
import {
  type Account,
  type TestServer,
  createApiKey,
  signup,
  startTestServer,
  storeKinds,
  uniqueIp,
  verify,
} from '../support/server.ts'

const SOME_ID = '0195d2c0-0000-7000-8000-000000000000'

/** An owner's key made through the API with these scopes (none: the request names none). */
async function keyWith(server: TestServer, owner: Account, scopes?: string[], name = 'scoped') {
  const res = await server.call('POST', '/api/v1/api-keys', {
    token: owner.token,
    body: scopes ? { name, scopes } : { name },
  })
  expect(res.status).toBe(201)
  return res.body as {
    id: string
    key: string
    scopes: string[]
    created_by: { id: string; email: string; name: string } | null
  }
}

/** A second person joins `owner`'s organization through an invite, with `role`. */
async function join(server: TestServer, owner: Account, role: 'owner' | 'member'): Promise<Account> {
  const email = `joiner-${Math.random().toString(36).slice(2, 9)}@example.com`
  const res = await server.call('POST', '/api/v1/organization/invites', { token: owner.token, body: { email, role } })
  expect(res.status).toBe(201)
  await server.deps.mailer.idle()
  const token = new URL(server.mailLink(email, /invited/)!).searchParams.get('token')
  const accepted = await server.call('POST', '/api/v1/auth/accept-invite', {
    ip: uniqueIp(),
    body: { token, name: `${role} joiner`, password: 'joiner password 1' },
  })
  expect(accepted.status).toBe(201)
  return {
    email,
    password: 'joiner password 1',
    token: accepted.body.access_token,
    refreshToken: accepted.body.refresh_token,
    userId: accepted.body.user.id,
    orgId: accepted.body.organization.id,
  }
}

describe('the scope table', () => {
  test('every route of the app has its access declared, each request path finds its own route, and the table names no route the app lacks', async () => {
    const server = await startTestServer('sqlite')
    try {
      const routes = createApp(server.deps).routes
      const keys = new Set<string>()
      for (const route of routes) {
        const key = routeKey(route.method, route.path)
        keys.add(key)
        expect({ route: key, declared: key in ROUTE_ACCESS }).toEqual({ route: key, declared: true })
        // a path as a client sends it, each parameter filled in: the table's match is the route itself
        const path = route.path.replace(/:[^/]+/g, (p) => (p === ':id' ? SOME_ID : 'x-value')).replace(/(.)\/$/, '$1')
        expect({ route: key, matched: matchRoute(route.method === 'WS' ? 'GET' : route.method, path) }).toEqual({
          route: key,
          matched: key,
        })
      }
      expect(Object.keys(ROUTE_ACCESS).filter((k) => !keys.has(k))).toEqual([])
      // fixed segments win over parameters, as in the router; paths outside the table match nothing
      expect(matchRoute('GET', '/api/v1/databases/health')).toBe('GET /api/v1/databases/health')
      expect(matchRoute('GET', '/api/v1/databases/health/')).toBe('GET /api/v1/databases/health')
      expect(matchRoute('HEAD', '/api/v1/databases')).toBe('GET /api/v1/databases')
      expect(matchRoute('POST', '/api/v1/databases/x/queries')).toBeUndefined()
      expect(matchRoute('GET', '/api/v1/api-keys/x/y')).toBeUndefined()
    } finally {
      await server.stop()
    }
  })
})

for (const kind of storeKinds) {
  describe(`API key scopes and owners (${kind})`, () => {
    let server: TestServer
    let owner: Account
    let databaseId: string
    beforeAll(async () => {
      server = await startTestServer(kind)
      owner = await signup(server)
      await server.deps.mailer.idle()
      await verify(server, owner)
      const { key } = await createApiKey(server, owner, 'seed')
      const res = await server.call('POST', '/api/v1/ingest', {
        apiKey: key,
        body: fullBatch('orders', Date.now() - 30_000),
      })
      expect(res.status).toBe(200)
      databaseId = res.body.database_id
    })
    afterAll(async () => {
      await server?.stop()
    })

    test("a key of each single scope against representative routes: allowed where its scope is the route's, else 403 naming the scope", async () => {
      const routes: [string, string, 'ingest' | 'read' | 'admin' | 'key' | 'users', unknown?][] = [
        ['POST', '/api/v1/ingest', 'ingest', { ...fullBatch('orders', Date.now() - 20_000) }],
        ['GET', '/api/v1/auth/me', 'key'],
        ['GET', '/api/v1/databases', 'read'],
        ['GET', '/api/v1/databases/health', 'read'],
        ['GET', `/api/v1/databases/${databaseId}`, 'read'],
        ['GET', `/api/v1/databases/${databaseId}/queries`, 'read'],
        ['GET', `/api/v1/databases/${databaseId}/doctor`, 'read'],
        ['GET', `/api/v1/databases/${databaseId}/alerts`, 'read'],
        ['GET', `/api/v1/databases/${databaseId}/events`, 'read'],
        ['GET', '/api/v1/api-keys', 'admin'],
        ['POST', '/api/v1/api-keys', 'admin', { name: 'child', scopes: ['admin'] }],
        ['GET', '/api/v1/organization/webhook', 'admin'],
        ['PUT', '/api/v1/organization/webhook', 'admin', { url: 'https://203.0.113.10/dbm' }],
        [
          'POST',
          '/api/v1/databases',
          'admin',
          { name: `made-${kind}-${Math.random()}`, engine: 'postgres', host: 'h' },
        ],
        ['PATCH', `/api/v1/databases/${databaseId}`, 'admin', { tags: { scoped: 'yes' } }],
        ['DELETE', `/api/v1/databases/${SOME_ID}`, 'admin'],
        ['GET', '/api/v1/organization/members', 'users'],
        ['POST', '/api/v1/organization/invites', 'users', { email: 'someone@example.com', role: 'owner' }],
      ]
      const refusals: string[] = []
      for (const scope of ['ingest', 'read', 'admin'] as const) {
        const { key } = await keyWith(server, owner, [scope], `only ${scope}`)
        for (const [method, path, needs, body] of routes) {
          const res = await server.call(method, path, {
            apiKey: key,
            body:
              body && method === 'POST' && path.endsWith('/ingest')
                ? { ...(body as object), batch_id: crypto.randomUUID() }
                : body,
          })
          const allowed = needs === 'key' || needs === scope
          const label = `${scope} key: ${method} ${path}`
          if (allowed) {
            // let in: whatever the route answers (a 404 for an unknown id, say), never the scope's 403
            expect({ label, status: res.status }).not.toEqual({ label, status: 403 })
            expect({ label, status: res.status < 500 }).toEqual({ label, status: true })
          } else {
            expect({ label, status: res.status }).toEqual({ label, status: 403 })
            refusals.push(res.body.error)
          }
        }
      }
      expect(refusals).toContain(
        "this API key lacks the 'admin' scope, which POST /api/v1/api-keys needs: an owner can create a key with it (Settings → API keys)",
      )
      expect(refusals).toContain(
        "this API key lacks the 'read' scope, which GET /api/v1/databases/:id/queries needs: an owner can create a key with it (Settings → API keys)",
      )
      expect(refusals).toContain(
        "this API key lacks the 'ingest' scope, which POST /api/v1/ingest needs: an owner can create a key with it (Settings → API keys)",
      )
      expect(refusals).toContain(
        'API keys cannot use GET /api/v1/organization/members: sign in as a user of the organization',
      )
      // nothing a refused key asked for happened: the ingest-only key made no key
      const names = (await server.call('GET', '/api/v1/api-keys', { token: owner.token })).body.map(
        (k: { name: string }) => k.name,
      )
      expect(names.filter((n: string) => n === 'child')).toHaveLength(1)
      // a user is never held to scopes
      expect((await server.call('GET', '/api/v1/api-keys', { token: owner.token })).status).toBe(200)
    })

    test("dbm local's agent key holds the ingest scope only: it ingests, and reads nothing", async () => {
      const user = (await server.store.getUser(owner.userId))!
      const key = await agentKey(server.deps, user)
      expect(
        (await server.store.listApiKeys(owner.orgId, false)).find((k) => k.name === 'dbm local agent')?.scopes,
      ).toEqual(['ingest'])
      expect(
        (
          await server.call('POST', '/api/v1/ingest', {
            apiKey: key,
            body: { ...fullBatch('local', Date.now() - 10_000), batch_id: crypto.randomUUID() },
          })
        ).status,
      ).toBe(200)
      expect((await server.call('GET', '/api/v1/databases', { apiKey: key })).status).toBe(403)
    })

    test('a new key has ingest and read unless asked; scopes are validated, naming the field; the list shows scopes and creator', async () => {
      const byDefault = await keyWith(server, owner)
      expect(byDefault.scopes).toEqual(['ingest', 'read'])
      expect(byDefault.created_by).toEqual({ id: owner.userId, email: owner.email, name: 'Test User' })
      const all = await keyWith(server, owner, ['admin', 'read', 'ingest'])
      expect(all.scopes).toEqual(['ingest', 'read', 'admin'])
      const listed = (await server.call('GET', '/api/v1/api-keys', { token: owner.token })).body.find(
        (k: { id: string }) => k.id === byDefault.id,
      )
      expect(listed).toMatchObject({
        scopes: ['ingest', 'read'],
        created_by: { id: owner.userId, email: owner.email, name: 'Test User' },
      })
      const scopesError = 'scopes must be a list of distinct scopes, at least one, from: ingest, read, admin'
      for (const scopes of [[], ['write'], ['read', 'read'], 'read', [1], ['ingest', 'read', 'admin', 'ingest']]) {
        const res = await server.call('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'bad', scopes } })
        expect({ scopes, status: res.status, error: res.body.error?.startsWith('scopes') }).toEqual({
          scopes,
          status: 400,
          error: true,
        })
        expect({ scopes, error: [scopesError, 'scopes must be one of: ingest, read, admin'] }).toEqual({
          scopes,
          error: expect.arrayContaining([res.body.error]),
        })
      }
    })

    test('a key creates keys only with admin, never grants a scope it lacks, and its keys name its creator', async () => {
      const readOnly = await keyWith(server, owner, ['ingest', 'read'])
      const refused = await server.call('POST', '/api/v1/api-keys', {
        apiKey: readOnly.key,
        body: { name: 'escalate', scopes: ['ingest'] },
      })
      expect(refused.status).toBe(403)
      const admin = await keyWith(server, owner, ['read', 'admin'])
      const wider = await server.call('POST', '/api/v1/api-keys', {
        apiKey: admin.key,
        body: { name: 'wider', scopes: ['ingest', 'admin'] },
      })
      expect({ status: wider.status, body: wider.body }).toEqual({
        status: 403,
        body: { error: "this API key cannot grant the 'ingest' scope: it does not hold it" },
      })
      // the default (ingest and read) is a scope it lacks too: asked for explicitly, it is fine
      expect(
        (await server.call('POST', '/api/v1/api-keys', { apiKey: admin.key, body: { name: 'default' } })).status,
      ).toBe(403)
      const child = await server.call('POST', '/api/v1/api-keys', {
        apiKey: admin.key,
        body: { name: 'child', scopes: ['read'] },
      })
      expect(child.status).toBe(201)
      expect(child.body).toMatchObject({ scopes: ['read'], created_by: { id: owner.userId, email: owner.email } })
    })

    test('a key with no known creator (made by a key before keys recorded theirs) keeps its scopes but creates no keys', async () => {
      // As migration 14 leaves such a key: every scope, no creator, so no removal ever reaches it or what it would make.
      const legacy = generateApiKey()
      await server.store.createApiKey({
        id: Bun.randomUUIDv7(),
        org_id: owner.orgId,
        key_id: legacy.keyId,
        name: 'made by a key, long ago',
        secret_hash: legacy.secretHash,
        scopes: ['ingest', 'read', 'admin'],
        created_by: null,
        created_at: Date.now(),
      })
      expect((await server.call('GET', '/api/v1/api-keys', { apiKey: legacy.fullKey })).status).toBe(200)
      const refused = await server.call('POST', '/api/v1/api-keys', {
        apiKey: legacy.fullKey,
        body: { name: 'heir', scopes: ['read'] },
      })
      expect({ status: refused.status, body: refused.body }).toEqual({
        status: 403,
        body: {
          error:
            'this API key has no known creator (a key made it before keys recorded theirs), so it cannot create keys: an owner can',
        },
      })
      const listed = (await server.call('GET', '/api/v1/api-keys', { token: owner.token })).body as {
        name: string
        created_by: unknown
      }[]
      expect(listed.find((k) => k.name === 'made by a key, long ago')?.created_by).toBeNull()
    })

    test("removing an owner revokes their keys and the keys made with them: the very next request with one is a 401; the other owner's keys work on", async () => {
      const second = await join(server, owner, 'owner')
      const theirs = await keyWith(server, second, ['ingest', 'read', 'admin'], 'ex-owner key')
      const made = await server.call('POST', '/api/v1/api-keys', {
        apiKey: theirs.key,
        body: { name: 'made with it', scopes: ['read'] },
      })
      expect(made.status).toBe(201)
      expect(made.body.created_by.id).toBe(second.userId)
      const mine = await keyWith(server, owner, ['read'], 'stays')
      // in use (the SQLite store caches found keys)
      for (const key of [theirs.key, made.body.key, mine.key])
        expect((await server.call('GET', '/api/v1/databases', { apiKey: key })).status).toBe(200)

      expect(
        (await server.call('DELETE', `/api/v1/organization/members/${second.userId}`, { token: owner.token })).status,
      ).toBe(204)
      for (const key of [theirs.key, made.body.key]) {
        const res = await server.call('GET', '/api/v1/databases', { apiKey: key })
        expect({ status: res.status, body: res.body }).toEqual({
          status: 401,
          body: { error: 'API key has been revoked' },
        })
        expect(
          (await server.call('POST', '/api/v1/api-keys', { apiKey: key, body: { name: 'again', scopes: ['read'] } }))
            .status,
        ).toBe(401)
      }
      expect((await server.call('GET', '/api/v1/databases', { apiKey: mine.key })).status).toBe(200)
      // listed as revoked, their creator gone
      const list = (await server.call('GET', '/api/v1/api-keys?include_revoked=true', { token: owner.token })).body as {
        id: string
        revoked_at: string | null
        created_by: unknown
      }[]
      for (const id of [theirs.id, made.body.id])
        expect(list.find((k) => k.id === id)).toMatchObject({ revoked_at: expect.any(String), created_by: null })
    })

    test("demoting an owner revokes their keys at once; the demoted member's session works on, as a member", async () => {
      const second = await join(server, owner, 'owner')
      const theirs = await keyWith(server, second, ['read', 'admin'], 'demoted key')
      expect((await server.call('GET', '/api/v1/api-keys', { apiKey: theirs.key })).status).toBe(200)
      const demoted = await server.call('PATCH', `/api/v1/organization/members/${second.userId}`, {
        token: owner.token,
        body: { role: 'member' },
      })
      expect(demoted.status).toBe(200)
      expect((await server.call('GET', '/api/v1/api-keys', { apiKey: theirs.key })).status).toBe(401)
      expect((await server.call('GET', '/api/v1/databases', { apiKey: theirs.key })).status).toBe(401)
      expect((await server.call('GET', '/api/v1/databases', { token: second.token })).status).toBe(200)
      expect((await server.call('GET', '/api/v1/api-keys', { token: second.token })).status).toBe(403)
    })

    test('members cannot change what is collected nor the name (403 naming the settings); the same values, hosts and tags they may; owners and admin keys may', async () => {
      const member = await join(server, owner, 'member')
      const url = `/api/v1/databases/${databaseId}`
      const before = (await server.call('GET', url, { token: owner.token })).body
      const settings: Record<string, unknown>[] = [
        { poll_interval_seconds: before.poll_interval_seconds + 5 },
        { collect_explain_plans: !before.collect_explain_plans },
        { collect_replication: !before.collect_replication },
        { disabled_collectors: ['activity', 'locks', 'query_stats'] },
        // renamed, the agent's next batch (under the old name) would register it again with the default settings
        { name: `${before.name}-old` },
      ]
      for (const body of settings) {
        const res = await server.call('PATCH', url, { token: member.token, body: { ...body, tags: { by: 'member' } } })
        const field = Object.keys(body)[0]
        expect({ field, status: res.status, body: res.body }).toEqual({
          field,
          status: 403,
          body: {
            error: `only an owner can change collection settings (poll_interval_seconds, collect_explain_plans, collect_replication, disabled_collectors) or the name, which the agent's settings follow: ${field}`,
          },
        })
      }
      // nothing changed, not even the tags sent with them
      const after = (await server.call('GET', url, { token: owner.token })).body
      expect({ ...after, last_seen_at: null, updated_at: null, availability_30d_watched_ms: null }).toEqual({
        ...before,
        last_seen_at: null,
        updated_at: null,
        availability_30d_watched_ms: null,
      })
      // the settings as they are, with a change of tags: allowed
      const same = await server.call('PATCH', url, {
        token: member.token,
        body: {
          poll_interval_seconds: before.poll_interval_seconds,
          collect_explain_plans: before.collect_explain_plans,
          collect_replication: before.collect_replication,
          disabled_collectors: [...before.disabled_collectors].reverse(),
          name: before.name,
          tags: { by: 'member' },
        },
      })
      expect(same.status).toBe(200)
      expect(same.body.tags).toEqual({ by: 'member' })
      // an owner turns plans off; an admin key turns them on again
      expect(
        (await server.call('PATCH', url, { token: owner.token, body: { collect_explain_plans: false } })).body
          .collect_explain_plans,
      ).toBe(false)
      const admin = await keyWith(server, owner, ['admin'])
      expect(
        (await server.call('PATCH', url, { apiKey: admin.key, body: { collect_explain_plans: true } })).body
          .collect_explain_plans,
      ).toBe(true)
    })
  })
}
