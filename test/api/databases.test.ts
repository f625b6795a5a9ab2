// Registered databases through HTTP on both stores: create with defaults and validation, the
// unverified one-database limit, 409 on a taken name, get, patch, delete (204) and health.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type Account, type TestServer, signup, startTestServer, storeKinds, verify } from '../support/server.ts'

for (const kind of storeKinds) {
  describe(`databases (${kind})`, () => {
    let server: TestServer
    let account: Account
    beforeAll(async () => {
      server = await startTestServer(kind)
      account = await signup(server)
      await verify(server, account)
    })
    afterAll(async () => {
      await server.stop()
    })

    const create = (body: unknown, who: Account = account) =>
      server.call('POST', '/api/v1/databases', { token: who.token, body })

    test('create applies the default port per engine and the server-side defaults', async () => {
      const pg = await create({ name: 'orders', engine: 'postgres', host: 'db1.internal', tags: { env: 'prod' } })
      expect(pg.status).toBe(201)
      expect(pg.body).toMatchObject({
        name: 'orders',
        engine: 'postgres',
        engine_version: null,
        host: 'db1.internal',
        port: 5432,
        tags: { env: 'prod' },
        poll_interval_seconds: 10,
        collect_explain_plans: true,
        collect_replication: true,
        disabled_collectors: [],
        status: 'disconnected',
        last_seen_at: null,
      })
      const ch = await create({ name: 'events', engine: 'clickhouse', host: 'ch1', engine_version: '24.8.1' })
      expect(ch.body).toMatchObject({ port: 8123, engine_version: '24.8.1', tags: {} })
      const custom = await create({ name: 'custom-port', engine: 'postgres', host: 'h', port: 6543 })
      expect(custom.body.port).toBe(6543)

      const got = await server.call('GET', `/api/v1/databases/${pg.body.id}`, { token: account.token })
      // GET adds the up time over 30 days (null: nothing known yet).
      expect(got.body).toEqual({ ...pg.body, availability_30d: null, availability_30d_watched_ms: 0 })
      const list = await server.call('GET', '/api/v1/databases', { token: account.token })
      expect(list.body.map((d: any) => d.name)).toEqual(['custom-port', 'events', 'orders'])
    })

    test('create validation names the field', async () => {
      const valid = { name: 'v', engine: 'postgres', host: 'h' }
      const cases: [unknown, string][] = [
        [
          { engine: 'postgres', host: 'h' },
          'name is required and must be a non-empty string of at most 200 characters',
        ],
        [{ ...valid, engine: 'mysql' }, 'engine must be one of: postgres, clickhouse'],
        [{ name: 'v', host: 'h' }, 'engine must be one of: postgres, clickhouse'],
        [
          { name: 'v', engine: 'postgres' },
          'host is required and must be a non-empty string of at most 255 characters',
        ],
        [{ ...valid, port: 0 }, 'port must be an integer from 1 to 65535'],
        [{ ...valid, port: 65536 }, 'port must be an integer from 1 to 65535'],
        [{ ...valid, port: 5432.5 }, 'port must be an integer from 1 to 65535'],
        [{ ...valid, tags: ['a'] }, 'tags must be an object of at most 50 string values'],
        [{ ...valid, poll_interval_seconds: 5 }, 'unknown field: poll_interval_seconds'],
      ]
      for (const [body, error] of cases) {
        const res = await create(body)
        expect({ status: res.status, body: res.body }).toEqual({ status: 400, body: { error } })
      }
    })

    test('a taken name is 409; the same name in another organization is fine', async () => {
      await create({ name: 'dup', engine: 'postgres', host: 'h' })
      const again = await create({ name: 'dup', engine: 'clickhouse', host: 'h2' })
      expect(again.status).toBe(409)
      expect(again.body).toEqual({ error: 'a database named "dup" already exists in this organization' })
      const other = await signup(server)
      expect((await create({ name: 'dup', engine: 'postgres', host: 'h' }, other)).status).toBe(201)
    })

    test('an unverified organization registers one database, then 403 says to verify', async () => {
      const fresh = await signup(server)
      expect((await create({ name: 'first', engine: 'postgres', host: 'h' }, fresh)).status).toBe(201)
      const second = await create({ name: 'second', engine: 'postgres', host: 'h' }, fresh)
      expect(second.status).toBe(403)
      expect(second.body).toEqual({
        error: 'unverified organizations can register 1 database; verify your email address to register more',
      })
      await verify(server, fresh)
      expect((await create({ name: 'second', engine: 'postgres', host: 'h' }, fresh)).status).toBe(201)
    })

    test('patch updates settings and validates them against the engine', async () => {
      const db = (await create({ name: 'patchme', engine: 'postgres', host: 'h' })).body
      const patch = (body: unknown) =>
        server.call('PATCH', `/api/v1/databases/${db.id}`, { token: account.token, body })
      const res = await patch({
        name: 'patched',
        port: 6000,
        tags: { team: 'core' },
        poll_interval_seconds: 1,
        collect_explain_plans: false,
        collect_replication: false,
        disabled_collectors: ['locks', 'io_stats', 'locks'],
      })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({
        name: 'patched',
        port: 6000,
        host: 'h',
        tags: { team: 'core' },
        poll_interval_seconds: 1,
        collect_explain_plans: false,
        collect_replication: false,
        disabled_collectors: ['locks', 'io_stats'],
      })
      expect(Date.parse(res.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(db.updated_at))

      const cases: [unknown, string][] = [
        [{ poll_interval_seconds: 0 }, 'poll_interval_seconds must be an integer from 1 to 86400'],
        [{ port: 70000 }, 'port must be an integer from 1 to 65535'],
        [{ collect_replication: 'yes' }, 'collect_replication must be true or false'],
        [
          { disabled_collectors: ['parts'] },
          'disabled_collectors: unknown postgres collector "parts" (known: query_stats, explain_plans, activity, locks, waits, tables, indexes, replication, bgwriter, wal_stats, io_stats, database_stats, constraints, bloat, connections, progress, column_stats, archiver, backups, triggers, wal_dir, security, host, log_events, custom_metrics)',
        ],
        [{ disabled_collectors: 'locks' }, 'disabled_collectors must be an array of collector names'],
        [{ engine: 'clickhouse' }, 'unknown field: engine'],
        [{ name: '' }, 'name is required and must be a non-empty string of at most 200 characters'],
      ]
      for (const [body, error] of cases) {
        const r = await patch(body)
        expect({ status: r.status, body: r.body }).toEqual({ status: 400, body: { error } })
      }
      await create({ name: 'taken', engine: 'postgres', host: 'h' })
      const clash = await patch({ name: 'taken' })
      expect(clash.status).toBe(409)
      const unknown = await server.call('PATCH', '/api/v1/databases/00000000-0000-7000-8000-000000000000', {
        token: account.token,
        body: { port: 1 },
      })
      expect({ status: unknown.status, body: unknown.body }).toEqual({
        status: 404,
        body: { error: 'database not found' },
      })
      const malformed = await server.call('PATCH', '/api/v1/databases/missing', {
        token: account.token,
        body: { port: 1 },
      })
      expect({ status: malformed.status, body: malformed.body }).toEqual({
        status: 400,
        body: { error: 'id must be a database id (a UUID)' },
      })
    })

    test('delete answers 204, then the database is gone', async () => {
      const db = (await create({ name: 'doomed', engine: 'clickhouse', host: 'h' })).body
      const res = await server.call('DELETE', `/api/v1/databases/${db.id}`, { token: account.token })
      expect(res.status).toBe(204)
      expect(res.body).toBeNull()
      const get = await server.call('GET', `/api/v1/databases/${db.id}`, { token: account.token })
      expect({ status: get.status, body: get.body }).toEqual({ status: 404, body: { error: 'database not found' } })
      expect((await server.call('DELETE', `/api/v1/databases/${db.id}`, { token: account.token })).status).toBe(404)
    })

    test('health is disconnected until a batch arrives, connected within max(3 × poll interval, 60 s)', async () => {
      const db = (await create({ name: 'health', engine: 'postgres', host: 'h' })).body
      const health = () => server.call('GET', `/api/v1/databases/${db.id}/health`, { token: account.token })
      expect((await health()).body).toEqual({
        id: db.id,
        status: 'disconnected',
        last_seen_at: null,
        reason: 'no_data',
        down_since: null,
        cause: null,
        cause_message: null,
        agent_last_heard_at: null,
        data_as_of: null,
      })

      // Batches arrive through ingest (a later issue); here the store records one directly.
      const seen = server.deps.clock()
      await server.store.driver.run('UPDATE databases SET last_seen_at = $1 WHERE id = $2', [seen, db.id])
      expect((await health()).body).toMatchObject({
        id: db.id,
        status: 'connected',
        reason: null,
        last_seen_at: new Date(seen).toISOString(),
        agent_last_heard_at: new Date(seen).toISOString(),
      })
      server.advance(59_000)
      expect((await health()).body.status).toBe('connected')
      server.advance(2_000)
      expect((await health()).body.status).toBe('disconnected')
      // With a 30 s poll interval the window is 90 s.
      await server.call('PATCH', `/api/v1/databases/${db.id}`, {
        token: account.token,
        body: { poll_interval_seconds: 30 },
      })
      expect((await health()).body.status).toBe('connected')
      server.advance(30_000)
      expect((await health()).body.status).toBe('disconnected')
      server.advance(-91_000)
    })
  })
}
