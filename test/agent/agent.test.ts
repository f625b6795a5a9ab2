// The agent as production runs it (config file, runner, shipper, buffer) against a real PostgreSQL 17
// with pg_stat_statements preloaded and a real dbm server: a known workload gives exact statement
// counts; an API outage is buffered to disk and every batch arrives exactly once, in order.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { waitForBaseline, waitForCycles } from '../support/agent.ts'
import { type PostgresServer, freePort, postgresMajors, sharedPostgres, startPostgres } from '../support/postgres.ts'
import {
  type Account,
  type TestServer,
  agentAccount,
  createApiKey,
  signup,
  startTestServer,
  verify,
} from '../support/server.ts'
import { until } from '../support/wait.ts'

let pg: PostgresServer
let dsn: string
let workload: postgres.Sql
const dirs: string[] = []

beforeAll(async () => {
  pg = await startPostgres(17, [
    '-c',
    'shared_preload_libraries=pg_stat_statements',
    '-c',
    'pg_stat_statements.track=top',
  ])
  dsn = await pg.freshDatabase()
  workload = postgres(dsn, { max: 1, onnotice: () => {} })
  await workload`CREATE EXTENSION pg_stat_statements`
  await workload`CREATE TABLE items (id int PRIMARY KEY, label text)`
  await workload`INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g`
})

afterAll(async () => {
  await workload?.end()
  await pg?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'dbm-agent-'))
  dirs.push(d)
  return d
}

function writeConfig(dir: string, endpoint: string, key: string, name: string, extra = ''): string {
  const path = join(dir, 'config.yaml')
  writeFileSync(
    path,
    `api:\n  endpoint: ${endpoint}\n  key: ${key}\ndatabases:\n  - name: ${name}\n    dsn: ${dsn}\n    poll_interval: 1s\n${extra}`,
  )
  return path
}

async function queryCalls(
  server: TestServer,
  account: Account,
  dbId: string,
  marker: string,
): Promise<number | undefined> {
  const res = await server.call('GET', `/api/v1/databases/${dbId}/queries?limit=100`, { token: account.token })
  const row = (res.body as any[]).find((q) => q.query_text.includes(marker))
  return row?.total_calls
}

describe('agent against every tested PostgreSQL major', () => {
  let server: TestServer
  let account: Account
  let key: string
  beforeAll(async () => {
    server = await startTestServer('postgres')
    ;({ account, key } = await agentAccount(server))
  })
  afterAll(async () => {
    await server.stop()
  })

  for (const major of postgresMajors) {
    test(`PostgreSQL ${major}: N executions give total_calls N; every collector runs or is skipped by version`, async () => {
      const url = await (await sharedPostgres(major)).freshDatabase()
      const session = postgres(url, { max: 1, onnotice: () => {} })
      await session`CREATE EXTENSION pg_stat_statements`
      await session.unsafe(`CREATE TABLE major_${major} (id int PRIMARY KEY)`)
      await session.unsafe(`INSERT INTO major_${major} SELECT generate_series(1, 10)`)
      const dir = tempDir()
      const path = join(dir, 'config.yaml')
      writeFileSync(
        path,
        `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: pg${major}\n    dsn: ${url}\n    poll_interval: 1s\n`,
      )
      const agent = new Agent({ configPath: path, bufferDir: dir, log: createLogger('error', () => {}) })
      await agent.start()
      try {
        const db = await until('the database to register', async () => {
          const list = await server.call('GET', '/api/v1/databases', { token: account.token })
          return (list.body as any[]).find((d) => d.name === `pg${major}` && d.status === 'connected')
        })
        expect(db.engine_version).toStartWith(`${major}.`)
        await waitForBaseline(agent, `pg${major}`)
        for (let i = 0; i < 19; i++)
          await session.unsafe(`SELECT id AS major_marker FROM major_${major} WHERE id = $1`, [(i % 10) + 1])
        expect(
          await until('19 calls', async () =>
            (await queryCalls(server, account, db.id, 'major_marker')) === 19 ? 19 : undefined,
          ),
        ).toBe(19)
        const skipped = agent.runner(`pg${major}`)!.status.collectors
        expect(skipped.wal_stats).toBe(major >= 14 ? skipped.wal_stats : 'skipped: needs PostgreSQL 14+')
        expect(skipped.io_stats).toBe(major >= 16 ? skipped.io_stats : 'skipped: needs PostgreSQL 16+')
        for (const [name, state] of Object.entries(skipped))
          expect({ name, ok: state.startsWith('ok') || state.startsWith('skipped') }).toEqual({ name, ok: true })
      } finally {
        await agent.stop()
        await session.end()
      }
    })
  }
})

describe('agent against PostgreSQL 17', () => {
  let server: TestServer
  let account: Account
  let key: string
  beforeAll(async () => {
    server = await startTestServer('sqlite')
    // The agent needs only the ingest scope (dbm local's agent key has no other).
    ;({ account, key } = await agentAccount(server, { scopes: ['ingest'] }))
  })
  afterAll(async () => {
    await server.stop()
  })

  test('N executions of a statement give total_calls N, through the real agent and API', async () => {
    const dir = tempDir()
    const logs: string[] = []
    const agent = new Agent({
      configPath: writeConfig(dir, server.base, key, 'orders'),
      bufferDir: dir,
      log: createLogger('debug', (l) => logs.push(l)),
    })
    await agent.start()
    try {
      const db = await until('the database to register', async () => {
        const list = await server.call('GET', '/api/v1/databases', { token: account.token })
        return (list.body as any[]).find((d) => d.name === 'orders' && d.status === 'connected')
      })
      expect(db).toMatchObject({
        engine: 'postgres',
        host: '127.0.0.1',
        port: pg.port,
        engine_version: expect.stringMatching(/^17\./),
      })
      // The first cycle is the baseline: the workload after it lands in a delta.
      await waitForBaseline(agent, 'orders')
      for (let i = 0; i < 37; i++) await workload`SELECT label FROM items WHERE id = ${i + 1} /* dbm-marker-1 */`
      const calls = await until('37 calls to appear', async () => {
        const n = await queryCalls(server, account, db.id, 'dbm-marker-1')
        return n === 37 ? n : undefined
      })
      expect(calls).toBe(37)
      // And it stays 37: later cycles add nothing for an idle statement.
      await waitForCycles(agent, 'orders', 2)
      expect(await queryCalls(server, account, db.id, 'dbm-marker-1')).toBe(37)
      const q = (
        await server.call('GET', `/api/v1/databases/${db.id}/queries?limit=100`, { token: account.token })
      ).body.find((r: any) => r.query_text.includes('dbm-marker-1'))
      expect(q.total_rows).toBe(37)
      expect(q.query_text).toBe('SELECT label FROM items WHERE id = $1 /* dbm-marker-1 */')
      expect(logs.join('\n')).not.toContain(key)
    } finally {
      await agent.stop()
    }
  })

  test('two databases on one server each report only their own statements', async () => {
    const other = await pg.freshDatabase()
    const otherSession = postgres(other, { max: 1, onnotice: () => {} })
    await otherSession`CREATE EXTENSION pg_stat_statements`
    const dir = tempDir()
    const path = join(dir, 'config.yaml')
    writeFileSync(
      path,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: own-a\n    dsn: ${dsn}\n    poll_interval: 1s\n  - name: own-b\n    dsn: ${other}\n    poll_interval: 1s\n`,
    )
    const agent = new Agent({ configPath: path, bufferDir: dir, log: createLogger('error', () => {}) })
    await agent.start()
    try {
      const ids = await until('both databases', async () => {
        const list = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as any[]
        const a = list.find((d) => d.name === 'own-a' && d.status === 'connected')
        const b = list.find((d) => d.name === 'own-b' && d.status === 'connected')
        return a && b ? { a: a.id, b: b.id } : undefined
      })
      await waitForBaseline(agent, 'own-a')
      await waitForBaseline(agent, 'own-b')
      for (let i = 0; i < 4; i++) await workload`SELECT id AS only_in_a FROM items WHERE id = ${i + 1}`
      expect(
        await until('4 calls in a', async () =>
          (await queryCalls(server, account, ids.a, 'only_in_a')) === 4 ? 4 : undefined,
        ),
      ).toBe(4)
      // A cycle of b that began after the workload has delivered its batch.
      await waitForCycles(agent, 'own-b', 1)
      expect(await queryCalls(server, account, ids.b, 'only_in_a')).toBeUndefined()
    } finally {
      await agent.stop()
      await otherSession.end()
    }
  })

  test('a database without pg_stat_statements gives one clear warning; server-side settings apply from the next cycle', async () => {
    const bare = await pg.freshDatabase()
    const dir = tempDir()
    const logs: string[] = []
    const path = join(dir, 'config.yaml')
    writeFileSync(
      path,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: bare\n    dsn: ${bare}\n    poll_interval: 1s\n`,
    )
    const agent = new Agent({ configPath: path, bufferDir: dir, log: createLogger('debug', (l) => logs.push(l)) })
    await agent.start()
    try {
      const db = await until('the database to register', async () => {
        const list = await server.call('GET', '/api/v1/databases', { token: account.token })
        return (list.body as any[]).find((d) => d.name === 'bare')
      })
      await waitForCycles(agent, 'bare', 3)
      const warnings = logs.filter((l) => l.includes('pg_stat_statements is not installed'))
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toContain('CREATE EXTENSION pg_stat_statements')
      expect(agent.runner('bare')!.status.collectors.query_stats).toStartWith('ok')

      // Turn the locks collector off on the server: the agent skips it from the next cycle on.
      await server.call('PATCH', `/api/v1/databases/${db.id}`, {
        token: account.token,
        body: { disabled_collectors: ['locks'] },
      })
      await until('locks to be skipped', async () =>
        agent.runner('bare')!.status.collectors.locks === 'skipped: disabled on the server' ? true : undefined,
      )
      await server.call('PATCH', `/api/v1/databases/${db.id}`, {
        token: account.token,
        body: { disabled_collectors: [] },
      })
      await until('locks to run again', async () =>
        agent.runner('bare')!.status.collectors.locks?.startsWith('ok') ? true : undefined,
      )
    } finally {
      await agent.stop()
    }
  })

  test('a revoked key is an error once and a degraded /healthz; a fixed key delivers the buffer, with the config tags', async () => {
    const revoked = await createApiKey(server, account, 'revoked', ['ingest'])
    expect((await server.call('DELETE', `/api/v1/api-keys/${revoked.id}`, { token: account.token })).status).toBe(204)
    const dir = tempDir()
    const logs: string[] = []
    const healthPort = await freePort()
    const path = join(dir, 'config.yaml')
    const config = (apiKey: string) =>
      `api:\n  endpoint: ${server.base}\n  key: ${apiKey}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\ndatabases:\n  - name: refused\n    dsn: ${dsn}\n    poll_interval: 1s\n    tags: { env: prod }\n`
    writeFileSync(path, config(revoked.key))
    const agent = new Agent({
      configPath: path,
      bufferDir: dir,
      log: createLogger('debug', (l) => logs.push(l)),
      timings: { retryIntervalMs: 500, watchIntervalMs: 200 },
    })
    await agent.start()
    try {
      await until('three refused cycles', async () =>
        (agent.runner('refused')?.status.buffered ?? 0) >= 3 ? true : undefined,
      )
      const health = (await (await fetch(`http://127.0.0.1:${healthPort}/healthz`)).json()) as any
      expect(health.status).toBe('degraded')
      expect(health.databases[0].state).toBe('connected')
      expect(health.databases[0].last_error).toStartWith(
        'the API refused the API key (HTTP 401: API key has been revoked)',
      )
      const errors = logs.filter((l) => l.includes('the API refused the API key'))
      expect(errors).toHaveLength(1)
      expect(errors[0]).toContain('ERROR')
      expect(logs.some((l) => l.includes('API unreachable'))).toBe(false)

      writeFileSync(path, config(key))
      const db = await until('the buffered batches to arrive', async () => {
        const list = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as any[]
        return list.find((d) => d.name === 'refused')
      })
      expect(db.tags).toEqual({ env: 'prod' })
      await until(
        'the buffer to drain',
        async () => (existsSync(join(dir, 'service_buffer_refused.db')) ? undefined : true),
        { timeoutMs: 15_000 },
      )
      const batches = await server.store.driver.all<{ n: number }>(
        'SELECT COUNT(*) AS n FROM ingest_batches WHERE database_id = $1',
        [db.id],
      )
      expect(Number(batches[0]!.n)).toBeGreaterThanOrEqual(3)
      const healthy = await until('a healthy status', async () => {
        const h = (await (await fetch(`http://127.0.0.1:${healthPort}/healthz`)).json()) as any
        return h.status === 'ok' && h.databases[0].last_error === null ? h : undefined
      })
      expect(healthy.databases[0].name).toBe('refused')
      expect(logs.join('\n')).not.toContain(key)
      expect(logs.join('\n')).not.toContain(revoked.key)
    } finally {
      await agent.stop()
    }
  })

  test('an API outage is buffered to service_buffer_<name>.db; every batch arrives once, in order', async () => {
    const port = await freePort()
    const dir = tempDir()
    const logs: string[] = []
    const agent = new Agent({
      configPath: writeConfig(dir, `http://127.0.0.1:${port}`, key, 'outage'),
      bufferDir: dir,
      log: createLogger('debug', (l) => logs.push(l)),
      timings: { retryIntervalMs: 700 },
    })
    const bufferFile = join(dir, 'service_buffer_outage.db')
    await agent.start()
    let revived: TestServer | undefined
    try {
      // Nothing listens on the port: batches go to the buffer file.
      await until('the buffer file', async () => (existsSync(bufferFile) ? true : undefined))
      await waitForBaseline(agent, 'outage')
      // (pg_stat_statements ignores comments and constants when it identifies a statement, so this one differs in shape.)
      for (let i = 0; i < 23; i++) await workload`SELECT id AS dbm_marker_2, label FROM items WHERE id = ${i + 1}`
      // A cycle after the workload has buffered its batch, and retries have failed with the API down.
      await waitForCycles(agent, 'outage', 1)
      await until('three buffered batches', async () =>
        (agent.runner('outage')?.status.buffered ?? 0) >= 3 ? true : undefined,
      )
      expect(existsSync(bufferFile)).toBe(true)
      const buffered = agent.runner('outage')!.status.buffered
      expect(buffered).toBeGreaterThanOrEqual(3)
      expect(logs.some((l) => l.includes('API unreachable; buffering batches'))).toBe(true)

      // The API comes back on the same port, with the same store.
      revived = await startTestServer('sqlite', { port })
      const owner = await signup(revived)
      await verify(revived, owner)
      // The agent's key belongs to the first server's store: register the same key on the revived one.
      const keyId = key.split('_')[2]!
      await revived.store.driver.run(
        `INSERT INTO api_keys (id, org_id, key_id, name, secret_hash, scopes, created_at) VALUES ($1, $2, $3, 'agent', $4, 'ingest', 0)`,
        [crypto.randomUUID(), owner.orgId, keyId, (await server.store.findApiKey(keyId))!.secret_hash],
      )
      await until('the buffer to drain', async () => (existsSync(bufferFile) ? undefined : true), { timeoutMs: 15_000 })
      expect(logs.some((l) => l.includes('API reachable again; buffer drained'))).toBe(true)
      const dbId = (await revived.call('GET', '/api/v1/databases', { token: owner.token })).body.find(
        (d: any) => d.name === 'outage',
      ).id
      expect(await queryCalls(revived, owner, dbId, 'dbm_marker_2')).toBe(23)
      // Every batch once, in the order the agent made them.
      const batches = await revived.store.driver.all<{ collected_at: number }>(
        'SELECT collected_at FROM ingest_batches WHERE database_id = $1 ORDER BY received_at, collected_at',
        [dbId],
      )
      expect(batches.length).toBeGreaterThanOrEqual(buffered)
      const order = batches.map((b) => Number(b.collected_at))
      expect(order).toEqual([...order].sort((a, b) => a - b))
      expect(new Set(order).size).toBe(order.length)
    } finally {
      await agent.stop()
      await revived?.stop()
    }
  })
})
