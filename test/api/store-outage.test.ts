// `serve` while its PostgreSQL store is down, on a PostgreSQL server of its own that the test stops and
// starts: /healthz says 503 with the store unavailable, requests that need the store get 503 "store
// unavailable" with Retry-After (never a 500), the outage is logged once; once the server is back,
// everything answers again without a restart, and an ingest that was mid-transaction when the server
// went down left nothing behind (its retry is applied in full, once). SQLite: /healthz asks the store too.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import pkg from '../../package.json' with { type: 'json' }
import type { IngestBatch } from '../../src/shared/wire.ts'
import { at, iso, pgBatch } from '../support/batches.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer, uniqueIp } from '../support/server.ts'
import { until } from '../support/wait.ts'

const UNAVAILABLE = { status: 503, body: { error: 'store unavailable' }, retryAfter: '5' }

function statsBatch(collectedAt: number, calls: number): IngestBatch {
  return pgBatch('orders', collectedAt, {
    query_stats: [
      {
        query_hash: 'q1',
        query_text: 'SELECT * FROM orders WHERE id = $1',
        calls,
        total_time_ms: calls,
        rows: calls,
        shared_blks_hit: 0,
        shared_blks_read: 0,
      },
    ],
  })
}

describe('serve with its PostgreSQL store stopped and started again', () => {
  let pg: PostgresServer
  let databaseUrl: string
  let dataDir: string
  let server: TestServer
  let account: Account
  let key: string
  let databaseId: string

  beforeAll(async () => {
    pg = await startPostgres(17)
    databaseUrl = await pg.freshDatabase()
    dataDir = mkdtempSync(join(tmpdir(), 'dbm-outage-'))
    server = await startTestServer('postgres', { databaseUrl, dataDir })
    ;({ account, key } = await agentAccount(server))
    const first = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: statsBatch(at(0), 10) })
    expect(first.status).toBe(200)
    databaseId = first.body.database_id
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await pg?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  const call = async (method: string, path: string, options: Parameters<TestServer['call']>[2] = {}) => {
    const res = await server.call(method, path, options)
    return { status: res.status, body: res.body, retryAfter: res.headers.get('retry-after') }
  }
  const healthz = async () => {
    const res = await server.call('GET', '/healthz')
    return { status: res.status, body: res.body }
  }
  const errorLines = () => server.logs.filter((line) => / ERROR /.test(line))
  const totalCalls = async () => {
    const res = await call('GET', `/api/v1/databases/${databaseId}/queries?since=${iso(at(0))}&until=${iso(at(60))}`, {
      apiKey: key,
    })
    expect(res.status).toBe(200)
    return res.body.map((q: any) => [q.query_hash, q.total_calls])
  }

  test('while the store answers, /healthz is 200 and says so', async () => {
    expect(await healthz()).toEqual({
      status: 200,
      body: { status: 'ok', version: pkg.version, store: 'ok', signup: 'open' },
    })
    expect(await totalCalls()).toEqual([['q1', 10]])
  })

  test('an ingest caught mid-transaction by the shutdown, then every request while the server is down: 503, one error line', async () => {
    // Hold the database's row (NO KEY UPDATE lets the foreign keys of the batch's rows through), so the
    // next ingest writes its batch id and statements and then waits on its last statement (UPDATE
    // databases ... last_seen_at) inside its transaction.
    const blocker = postgres(databaseUrl, { max: 1, onnotice: () => {} })
    await blocker.unsafe('BEGIN')
    await blocker.unsafe('SELECT id FROM databases WHERE id = $1 FOR NO KEY UPDATE', [databaseId])
    const interrupted = statsBatch(at(1), 5)
    const pending = call('POST', '/api/v1/ingest', { apiKey: key, body: interrupted })
    await until('the ingest to wait inside its transaction', async () => {
      // Only the ingest's last statement touches that row (its batch's rows only check it as a key).
      const [row] = await blocker.unsafe(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'dbm' AND pg_backend_pid() = ANY (pg_blocking_pids(pid))",
      )
      return row!.n === 1 ? true : undefined
    })
    const errorsBefore = errorLines().length

    await pg.halt()
    await blocker.end({ timeout: 1 }).catch(() => {})
    expect(await pending).toEqual(UNAVAILABLE)

    expect(await healthz()).toEqual({
      status: 503,
      body: { status: 'unavailable', version: pkg.version, store: 'unavailable' },
    })
    // With an access token, with an API key, an agent's batch, and an endpoint counted by rate limits.
    expect(await call('GET', '/api/v1/databases', { token: account.token })).toEqual(UNAVAILABLE)
    expect(await call('GET', `/api/v1/databases/${databaseId}/queries`, { apiKey: key })).toEqual(UNAVAILABLE)
    expect(await call('POST', '/api/v1/ingest', { apiKey: key, body: statsBatch(at(2), 7) })).toEqual(UNAVAILABLE)
    expect(
      await call('POST', '/api/v1/auth/login', {
        body: { email: account.email, password: account.password },
        ip: uniqueIp(),
      }),
    ).toEqual(UNAVAILABLE)
    expect(await healthz()).toMatchObject({ status: 503 })

    const episode = errorLines().slice(errorsBefore)
    expect(episode).toHaveLength(1)
    expect(episode[0]).toMatch(
      / ERROR store unavailable; requests that need it are answered 503 until it answers again code=\S+ cause=/,
    )
    expect(server.logs.join('\n')).not.toContain('unhandled error')
    // A request that needs no store still answers.
    expect((await call('GET', '/api/v1/no-such-route')).status).toBe(404)
  })

  test('once the server is back, serve answers again by itself; the interrupted batch had left nothing, its retry counts once', async () => {
    await pg.start()
    expect(
      await until('/healthz to answer 200', async () =>
        (await healthz()).status === 200 ? await healthz() : undefined,
      ),
    ).toEqual({
      status: 200,
      body: { status: 'ok', version: pkg.version, store: 'ok', signup: 'open' },
    })
    expect(server.logs.filter((line) => / INFO store available again unavailable_for_ms=\d+$/.test(line))).toHaveLength(
      1,
    )

    // Only the batch applied before the outage is stored: the interrupted one wrote nothing.
    expect(await totalCalls()).toEqual([['q1', 10]])
    // The agent retries what it could not deliver: the interrupted batch (same batch_id) and the refused one.
    const interruptedRetry = await call('POST', '/api/v1/ingest', { apiKey: key, body: statsBatch(at(1), 5) })
    expect(interruptedRetry.status).toBe(200)
    expect(interruptedRetry.body).toMatchObject({ database_id: databaseId, duplicate: false })
    const refused = statsBatch(at(2), 7)
    const applied = await call('POST', '/api/v1/ingest', { apiKey: key, body: refused })
    const replayed = await call('POST', '/api/v1/ingest', { apiKey: key, body: refused })
    expect([applied.status, applied.body.duplicate, replayed.status, replayed.body.duplicate]).toEqual([
      200,
      false,
      200,
      true,
    ])
    expect(await totalCalls()).toEqual([['q1', 22]])
    expect((await call('GET', '/api/v1/databases', { token: account.token })).status).toBe(200)
    // Still the one error line of the outage.
    expect(errorLines()).toHaveLength(1)
  })
})

describe('serve on its SQLite store', () => {
  let server: TestServer
  let dataDir: string
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'dbm-outage-'))
    server = await startTestServer('sqlite', { dataDir })
  })
  afterAll(async () => {
    // The test closed the store already.
    await server?.stop().catch(() => {})
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  test('/healthz asks the store: 200 while it answers, 503 once it cannot', async () => {
    expect(await server.call('GET', '/healthz').then((r) => ({ status: r.status, body: r.body }))).toEqual({
      status: 200,
      body: { status: 'ok', version: pkg.version, store: 'ok', signup: 'open' },
    })
    await server.store.close()
    expect(await server.call('GET', '/healthz').then((r) => ({ status: r.status, body: r.body }))).toEqual({
      status: 503,
      body: { status: 'unavailable', version: pkg.version, store: 'unavailable' },
    })
  })
})
