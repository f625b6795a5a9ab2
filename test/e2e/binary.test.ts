// End to end through the compiled binary: a fresh `dist/dbm` (built once per test run) runs `dbm serve`
// on a loopback port over a temp data dir, driven with fetch as a user would (signup, login, API key,
// database registration with the key), then stopped with SIGTERM. No secret may reach the server's log.
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pkg from '../../package.json' with { type: 'json' }
import { binaryPath as binary, builtBinary } from '../support/binary.ts'
import { type ServeProcess, request, runCommand, startServe, stopAllServers } from '../support/process.ts'

const tmpRoot = mkdtempSync(join(tmpdir(), 'dbm-e2e-'))
const dataDir = join(tmpRoot, 'data')

let server: ServeProcess

beforeAll(async () => {
  // Built once for the whole test run (test/support/binary.ts), whichever file asks first.
  await builtBinary()
  server = await startServe([binary], { dataDir, extraArgs: ['--log-level', 'debug'] })
}, 60_000)

afterAll(async () => {
  await stopAllServers()
  rmSync(tmpRoot, { recursive: true, force: true })
})

describe('dist/dbm', () => {
  const email = 'e2e-owner@example.com'
  const password = 'e2e correct horse battery'
  const secrets: string[] = [password]
  let accessToken = ''
  let apiKey = ''
  let orgId = ''
  let databaseId = ''

  test('`dbm version` from the binary prints the package version and its build stamp', async () => {
    const out = await runCommand([binary, 'version'])
    expect(out.exitCode).toBe(0)
    expect(out.stdout).toStartWith(`dbm ${pkg.version}\ncommit:   `)
    expect(out.stdout).toMatch(/^built: {4}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/m)
  })

  test('GET /healthz answers 200 with the version and the store', async () => {
    const res = await request(server.base, 'GET', '/healthz')
    const { event_loop: loop, ...rest } = res.body
    expect({ status: res.status, body: rest }).toEqual({
      status: 200,
      body: { status: 'ok', version: pkg.version, store: 'ok', signup: 'open' },
    })
    // How late the server's event loop ran over the last minute (src/server/loop-lag.ts).
    expect(Object.keys(loop).sort()).toEqual(['lag_max_ms', 'lag_p50_ms', 'lag_p99_ms', 'samples', 'window_s'])
    expect(loop.window_s).toBe(60)
    expect(loop.lag_p50_ms).toBeLessThanOrEqual(loop.lag_p99_ms)
    expect(loop.lag_p99_ms).toBeLessThanOrEqual(loop.lag_max_ms)
  })

  test('signup creates an unverified organization and its owner', async () => {
    const res = await request(server.base, 'POST', '/api/v1/auth/signup', {
      body: { email, password, name: 'E2E Owner', org_name: 'End To End' },
    })
    expect(res.status).toBe(201)
    expect(res.body.user).toMatchObject({ email, name: 'E2E Owner', role: 'owner', email_verified: false })
    expect(res.body.organization).toMatchObject({
      name: 'End To End',
      slug: 'end-to-end',
      plan: 'free',
      verified: false,
    })
    expect(res.body.expires_in).toBe(900)
    orgId = res.body.organization.id
    secrets.push(res.body.access_token, res.body.refresh_token)
  })

  test('login returns a Bearer session of 900 seconds', async () => {
    const res = await request(server.base, 'POST', '/api/v1/auth/login', { body: { email, password } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['access_token', 'expires_in', 'refresh_token', 'token_type'])
    expect(res.body.expires_in).toBe(900)
    expect(res.body.token_type).toBe('Bearer')
    accessToken = res.body.access_token
    secrets.push(res.body.access_token, res.body.refresh_token)
  })

  test('an API key is created once in full and listed by prefix only', async () => {
    // Every scope: the key registers a database below (admin) and reads (read) besides ingesting.
    const res = await request(server.base, 'POST', '/api/v1/api-keys', {
      token: accessToken,
      body: { name: 'e2e agent', scopes: ['ingest', 'read', 'admin'] },
    })
    expect(res.status).toBe(201)
    apiKey = res.body.key
    secrets.push(apiKey)
    expect(apiKey).toMatch(/^dbm_ak_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/)
    const keyId = apiKey.slice('dbm_ak_'.length, 'dbm_ak_'.length + 16)
    expect(res.body).toMatchObject({
      name: 'e2e agent',
      prefix: `dbm_ak_${keyId}_...`,
      last_used_at: null,
      revoked_at: null,
    })

    const list = await request(server.base, 'GET', '/api/v1/api-keys', { token: accessToken })
    expect(list.status).toBe(200)
    expect(list.body).toHaveLength(1)
    expect(list.body[0]).toEqual({
      id: res.body.id,
      name: 'e2e agent',
      prefix: `dbm_ak_${keyId}_...`,
      scopes: ['ingest', 'read', 'admin'],
      created_by: res.body.created_by,
      created_at: res.body.created_at,
      last_used_at: null,
      revoked_at: null,
    })
  })

  test('a database registered with the API key gets the default port and is listed', async () => {
    const res = await request(server.base, 'POST', '/api/v1/databases', {
      apiKey,
      body: { name: 'orders', engine: 'postgres', host: 'db.internal', tags: { env: 'e2e' } },
    })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({
      name: 'orders',
      engine: 'postgres',
      engine_version: null,
      host: 'db.internal',
      port: 5432,
      tags: { env: 'e2e' },
      status: 'disconnected',
      last_seen_at: null,
    })
    databaseId = res.body.id

    const list = await request(server.base, 'GET', '/api/v1/databases', { apiKey })
    expect(list.status).toBe(200)
    // the list adds each database's 30-day availability: none yet
    expect(list.body).toEqual([{ ...res.body, availability_30d: null, availability_30d_watched_ms: 0 }])
  })

  test('GET /api/v1/auth/me with the API key shows the organization and the key', async () => {
    const me = await request(server.base, 'GET', '/api/v1/auth/me', { apiKey })
    expect(me.status).toBe(200)
    expect(me.body.organization).toMatchObject({
      id: orgId,
      name: 'End To End',
      slug: 'end-to-end',
      plan: 'free',
      verified: false,
    })
    expect(me.body.api_key).toMatchObject({ name: 'e2e agent' })
    expect(me.body.user).toBeUndefined()
    expect(databaseId).not.toBe('')
  })

  test('a batch from a newer agent, with fields this binary does not know, is accepted and the fields are named at debug level', async () => {
    const batchId = crypto.randomUUID()
    const res = await request(server.base, 'POST', '/api/v1/ingest', {
      apiKey,
      body: {
        batch_id: batchId,
        collected_at: Date.now(),
        interval_seconds: 10,
        agent_version: '99.0.0',
        database: {
          name: 'orders',
          engine: 'postgres',
          engine_version: '18.1',
          host: 'db.internal',
          port: 5432,
          cluster_role: 'primary',
        },
        query_stats: [
          {
            query_hash: 'q1',
            query_text: 'SELECT 1',
            calls: 3,
            total_time_ms: 1.5,
            rows: 3,
            shared_blks_hit: 0,
            shared_blks_read: 0,
            jit_time_ms: 0.1,
          },
        ],
        compression: 'zstd',
      },
    })
    expect({ status: res.status, body: res.body }).toMatchObject({
      status: 200,
      body: { database_id: databaseId, duplicate: false },
    })
    const queries = await request(server.base, 'GET', `/api/v1/databases/${databaseId}/queries`, { apiKey })
    expect(queries.body.map((q: any) => [q.query_hash, q.total_calls, q.total_rows])).toEqual([['q1', 3, 3]])
    const line = server
      .stderr()
      .split('\n')
      .find((l) => l.includes(' DEBUG ingest: unknown fields ignored ') && l.includes(batchId))
    expect(line).toContain(' fields=database.cluster_role,query_stats[].jit_time_ms,compression')
  })

  test('the binary keeps the wire maxima: a count past 2^53 - 1 or a time past the year 9999 is a 400 naming the field', async () => {
    const batch = (overrides: Record<string, unknown>, calls: number) => ({
      batch_id: crypto.randomUUID(),
      collected_at: Date.now(),
      interval_seconds: 10,
      agent_version: '99.0.0',
      database: { name: 'orders', engine: 'postgres', engine_version: '18.1', host: 'db.internal', port: 5432 },
      query_stats: [
        {
          query_hash: 'q1',
          query_text: 'SELECT 1',
          calls,
          total_time_ms: 1.5,
          rows: 3,
          shared_blks_hit: 0,
          shared_blks_read: 0,
        },
      ],
      ...overrides,
    })
    const calls = await request(server.base, 'POST', '/api/v1/ingest', { apiKey, body: batch({}, 1e300) })
    expect({ status: calls.status, error: String(calls.body.error).split(':')[0] }).toEqual({
      status: 400,
      error: 'invalid query_stats.0.calls',
    })
    const collectedAt = await request(server.base, 'POST', '/api/v1/ingest', {
      apiKey,
      body: batch({ collected_at: 1e300 }, 1),
    })
    expect({ status: collectedAt.status, error: String(collectedAt.body.error).split(':')[0] }).toEqual({
      status: 400,
      error: 'invalid collected_at',
    })
  })

  test('with no SMTP relay the verification mail is one log line with the default public URL', async () => {
    // The logger quotes values holding `=`, so the link is written as link="...".
    const lines = server
      .stderr()
      .split('\n')
      .filter((l) => l.includes(' INFO mail '))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      new RegExp(
        `^\\S+ INFO mail to=${email.replaceAll('.', '\\.')} subject="Verify your email address for dbm" ` +
          'link="http://localhost:8080/#/verify\\?token=[A-Za-z0-9_-]{43}"$',
      ),
    )
  })

  test('SIGTERM stops the binary with exit 0 at once, even with an active-queries stream open (closed with 1001), leaving dbm.sqlite and no secret in the log', async () => {
    // A dashboard's Active page keeps a WebSocket open; the server must not wait for it to go.
    const ws = new WebSocket(
      `${server.base.replace(/^http/, 'ws')}/api/v1/databases/${databaseId}/active/ws?token=${accessToken}&interval=60`,
    )
    const firstMessage = new Promise((resolve) =>
      ws.addEventListener('message', (e) => resolve(JSON.parse(String(e.data))), { once: true }),
    )
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.addEventListener('close', (e) => resolve({ code: e.code, reason: e.reason })),
    )
    expect(await firstMessage).toEqual({ ts: null, active: [] })
    const started = performance.now()
    expect(await server.stop('SIGTERM')).toBe(0)
    expect(performance.now() - started).toBeLessThan(4000)
    expect(await closed).toEqual({ code: 1001, reason: 'server shutting down' })
    expect(existsSync(join(dataDir, 'dbm.sqlite'))).toBe(true)
    const log = server.stderr()
    expect(log).toContain(' INFO dbm serve listening ')
    expect(log).toContain(' DEBUG request method=POST path=/api/v1/auth/login status=200')
    // The stop is logged, and nothing went wrong after it (the stream's own request line may come after it:
    // it is logged when the stream closes, which the stop does).
    const lines = log.trimEnd().split('\n')
    const stopping = lines.findIndex((l) => /^\S+ INFO stopping signal=SIGTERM$/.test(l))
    expect(stopping).toBeGreaterThan(0)
    expect(lines.slice(stopping + 1).filter((l) => !/^\S+ DEBUG request /.test(l))).toEqual([])
    expect(secrets).toHaveLength(6)
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThan(8)
      expect(log).not.toContain(secret)
    }
    // The API key's secret part alone must not appear either.
    expect(log).not.toContain(apiKey.slice(-43))
  })
})

describe('dist/dbm on an existing store', () => {
  test('a column a counter family has and the store lacks is added at start and logged (the family step)', async () => {
    // The store of the tests above, as a dbm from before n_tup_newpage_upd left it.
    const db = new Database(join(dataDir, 'dbm.sqlite'))
    try {
      for (const table of ['table_stats', 'latest_tables'])
        db.exec(`ALTER TABLE ${table} DROP COLUMN n_tup_newpage_upd`)
    } finally {
      db.close()
    }
    const again = await startServe([binary], { dataDir })
    expect(await again.stop('SIGTERM')).toBe(0)
    const added = again
      .stderr()
      .split('\n')
      .filter((l) => l.includes(' INFO store column added for a counter '))
      .map((l) => l.replace(/^\S+ /, ''))
    expect(added).toEqual([
      'INFO store column added for a counter table=table_stats column=n_tup_newpage_upd definition=INTEGER',
      'INFO store column added for a counter table=latest_tables column=n_tup_newpage_upd definition=INTEGER',
    ])
    const check = new Database(join(dataDir, 'dbm.sqlite'))
    try {
      const columns = (table: string) =>
        (check.query(`SELECT name FROM pragma_table_info('${table}')`).all() as { name: string }[]).map((c) => c.name)
      expect(columns('table_stats')).toContain('n_tup_newpage_upd')
      expect(columns('latest_tables')).toContain('n_tup_newpage_upd')
    } finally {
      check.close()
    }
  })
})
