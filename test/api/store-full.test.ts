// `serve` while its store refuses writes. SQLite: the server's own connection is held at its file's page
// count (PRAGMA max_page_count, which answers SQLITE_FULL as a full disk does); an ingest, a dashboard
// write and /healthz answer 503 naming SQLITE_FULL (with Retry-After), the log has one error line naming
// it (never the ROLLBACK after it, never a 500); a real agent (the Agent class, real PostgreSQL 17)
// buffers its batch, and once the limit is raised the server takes writes again without a restart and
// the batch lands exactly once. That test waits for the agent's retry after the 5 s Retry-After (about
// 6 s). PostgreSQL: a trigger raises the real SQLSTATE 53100 (disk_full) on the tables ingest and the
// /healthz probe write, as a full disk would fail them.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent, type AgentStatus } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { at, pgBatch } from '../support/batches.ts'
import { freePort, sharedPostgres } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

const SQLITE_FULL = "the store's disk is full (SQLITE_FULL): database or disk is full"

/** A batch of 200 statements with long texts: more than the free room of the store's pages. */
function batch(name: string, calls: number) {
  return pgBatch(name, at(0), {
    query_stats: Array.from({ length: 200 }, (_, i) => ({
      query_hash: `q${i}`,
      query_text: `SELECT * FROM orders WHERE id = $1 AND note = '${'x'.repeat(500)}' -- ${i}`,
      calls,
      total_time_ms: calls,
      rows: calls,
      shared_blks_hit: 0,
      shared_blks_read: 0,
    })),
  })
}

describe('serve on SQLite while its file may not grow', () => {
  const dirs: string[] = []
  let server: TestServer
  let account: Account
  let key: string
  let dsn: string
  let agent: Agent | undefined
  let healthPort = 0
  const agentHealth = async () => (await (await fetch(`http://127.0.0.1:${healthPort}/healthz`)).json()) as AgentStatus

  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'dbm-full-api-'))
    dirs.push(dir)
    return dir
  }
  const errorLines = () => server.logs.filter((l) => / ERROR /.test(l))

  beforeAll(async () => {
    dsn = await (await sharedPostgres(17)).freshDatabase()
    const setup = postgres(dsn, { max: 1, onnotice: () => {} })
    await setup`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    await setup.end()
    server = await startTestServer('sqlite', { dataDir: tempDir() })
    ;({ account, key } = await agentAccount(server))
  }, 60_000)

  afterAll(async () => {
    await agent?.stop()
    await server?.stop()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  test('ingest, a dashboard write and /healthz answer 503 naming SQLITE_FULL; one error line; the agent buffers', async () => {
    // The server's own connection (max_page_count is per connection), with no free page left in the file.
    const driver = server.store.driver
    await driver.exec('VACUUM')
    const { page_count } = (await driver.get<{ page_count: number }>('PRAGMA page_count'))!
    await driver.get(`PRAGMA max_page_count = ${page_count}`)
    const errorsBefore = errorLines().length

    const ingest = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch('direct', 5) })
    expect([ingest.status, ingest.body, ingest.headers.get('retry-after')]).toEqual([503, { error: SQLITE_FULL }, '5'])
    // A dashboard write small enough for the room left in its table's page is taken; held read-only,
    // the file refuses it too (SQLITE_READONLY, in the same episode: no second error line).
    await driver.exec('PRAGMA query_only = ON')
    const write = await server.call('POST', '/api/v1/api-keys', {
      token: account.token,
      body: { name: 'another key', scopes: ['read'] },
    })
    await driver.exec('PRAGMA query_only = OFF')
    expect([write.status, write.body, write.headers.get('retry-after')]).toEqual([
      503,
      { error: "the store's file cannot be written (SQLITE_READONLY): attempt to write a readonly database" },
      '5',
    ])
    // Reads still answer.
    expect((await server.call('GET', '/api/v1/databases', { token: account.token })).status).toBe(200)
    const health = await server.call('GET', '/healthz')
    expect(health.status).toBe(503)
    // Its reason names the cause and its code, not the driver's text: /healthz answers anyone.
    expect(health.body).toMatchObject({
      status: 'unavailable',
      store: 'unavailable',
      reason: "the store's disk is full (SQLITE_FULL)",
    })

    // A real agent's first batch is refused and kept in its buffer.
    healthPort = await freePort()
    const config = join(tempDir(), 'config.yaml')
    writeFileSync(
      config,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\n` +
        `databases:\n  - name: agent-db\n    dsn: ${dsn}\n    poll_interval: 1h\n`,
    )
    agent = new Agent({
      configPath: config,
      bufferDir: tempDir(),
      log: createLogger('error', () => {}),
      timings: { retryIntervalMs: 500, pingIntervalMs: 1000, connectTimeoutS: 5 },
    })
    await agent.start()
    await until('the agent to buffer its refused batch', async () => {
      const h = await agentHealth()
      return h.databases[0]?.buffered === 1 && h.api.last_failure_at ? h : undefined
    })

    const episode = errorLines().slice(errorsBefore)
    expect(episode).toEqual([
      expect.stringMatching(
        / ERROR store refuses writes; requests that write are answered 503 until one succeeds code=SQLITE_FULL cause="the store's disk is full \(SQLITE_FULL\): database or disk is full"$/,
      ),
    ])
    expect(server.logs.join('\n')).not.toMatch(/rollback|unhandled error/i)
  }, 30_000)

  test('once the file may grow: /healthz 200, writes answer, the buffered batch is applied exactly once', async () => {
    await server.store.driver.get('PRAGMA max_page_count = 1000000')
    // /healthz's probe write (at most one per 5 s) or the agent's retry finds the space.
    const health = await until('/healthz to answer 200', async () => {
      const res = await server.call('GET', '/healthz')
      return res.status === 200 ? res.body : undefined
    })
    expect(health).toMatchObject({ status: 'ok', store: 'ok' })
    const h = await until('the agent to deliver its buffer', async () => {
      const s = await agentHealth()
      return s.databases[0]?.buffered === 0 ? s : undefined
    })
    expect(h.databases[0]).toMatchObject({ dropped_batches: 0, lost_batches: 0 })
    const db = (await server.call('GET', '/api/v1/databases', { token: account.token })).body.find(
      (d: { name: string }) => d.name === 'agent-db',
    )
    expect(db).toBeDefined()
    const stored = await server.store.driver.get<{ n: number }>(
      'SELECT COUNT(*) AS n FROM ingest_batches WHERE database_id = $1',
      [db.id],
    )
    expect(stored).toEqual({ n: 1 })
    const ingest = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch('direct', 5) })
    expect(ingest.status).toBe(200)
    expect(ingest.body.duplicate).toBe(false)
    expect(server.logs.join('\n')).not.toMatch(/rollback|unhandled error/i)
  }, 30_000)
})

describe('serve on PostgreSQL while its disk is full (SQLSTATE 53100)', () => {
  let server: TestServer
  let databaseUrl: string
  let dataDir: string
  let key: string
  const DISK_FULL = `the store's disk is full (SQLSTATE 53100): could not extend file "base/1/2": No space left on device`

  beforeAll(async () => {
    databaseUrl = await (await sharedPostgres(17)).freshDatabase()
    dataDir = mkdtempSync(join(tmpdir(), 'dbm-full-pg-'))
    // With the ingest writer's thread, as `dbm serve` runs: its refusals reach /healthz and the log too.
    server = await startTestServer('postgres', { databaseUrl, dataDir, ingestWriter: true })
    ;({ key } = await agentAccount(server))
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  test('ingest and /healthz answer 503 naming 53100, one error line; writes answer again once it passes', async () => {
    // The server's real error with a full disk's SQLSTATE, on the tables a batch and the probe write.
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} })
    await admin.unsafe(`
      CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'could not extend file "base/1/2": No space left on device' USING ERRCODE = 'disk_full';
      END $$;
      CREATE TRIGGER full_disk BEFORE INSERT ON ingest_batches FOR EACH ROW EXECUTE FUNCTION refuse();
      CREATE TRIGGER full_disk BEFORE INSERT ON rate_events FOR EACH ROW EXECUTE FUNCTION refuse();`)
    try {
      const errorsBefore = server.logs.filter((l) => / ERROR /.test(l)).length
      for (let i = 0; i < 2; i++) {
        const ingest = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch('pg', 5) })
        expect([ingest.status, ingest.body, ingest.headers.get('retry-after')]).toEqual([
          503,
          { error: DISK_FULL },
          '5',
        ])
      }
      const health = await server.call('GET', '/healthz')
      expect(health.status).toBe(503)
      expect(health.body).toMatchObject({
        status: 'unavailable',
        store: 'unavailable',
        reason: "the store's disk is full (SQLSTATE 53100)",
      })
      expect(server.logs.filter((l) => / ERROR /.test(l)).slice(errorsBefore)).toEqual([
        expect.stringMatching(/ ERROR store refuses writes; .* code="SQLSTATE 53100" cause=/),
      ])
      expect(server.store.reachability?.available).toBe(true)

      await admin.unsafe('DROP TRIGGER full_disk ON ingest_batches; DROP TRIGGER full_disk ON rate_events')
      const ingest = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch('pg', 5) })
      expect(ingest.status).toBe(200)
      expect((await server.call('GET', '/healthz')).status).toBe(200)
      expect(server.logs.join('\n')).not.toMatch(/rollback|unhandled error/i)
    } finally {
      await admin.end()
    }
  }, 30_000)
})
