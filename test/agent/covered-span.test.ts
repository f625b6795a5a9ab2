// The span a batch's deltas cover (covered_seconds, issue 29 d6), from the real agent polling a real
// PostgreSQL every second, its batches read on their way to a real server by a recording proxy: after
// the agent was stopped for a few seconds, its first batch back covers the gap (from its saved
// baseline) and the following ones one poll interval; a cycle that failed moved no baseline, so the
// first batch back covers it too: while the database refuses connections (a TCP proxy in front of it
// closed) and while the collector may not read its view (a batch of its error alone goes). Every
// measured batch says exactly the time since the one before it; interval_seconds stays the poll
// interval. About 11 s: three real gaps of 2 to 2.5 s, as the spans are whole seconds.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { type Server, type Socket, connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { SENT_AT_HEADER } from '../../src/shared/ingest-path.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

let server: TestServer
let recorder: ReturnType<typeof Bun.serve>
let dbProxy: Server
let dir: string
let agent: Agent | undefined
/** Batches posted without the agent's clock at sending (X-Dbm-Sent-At), or with one far off. */
let unsent = 0
/** The cycles' batches as the agent sent them (availability reports, which cover nothing, left out). */
const batches: IngestBatch[] = []
const sockets = new Set<Socket>()
/** The port of the proxy in front of the database: closed, the database does not answer. */
let port = 0
let setup: postgres.Sql

beforeAll(async () => {
  const pg = await sharedPostgres(17)
  const dsn = new URL(await pg.freshDatabase())
  setup = postgres(dsn.href, { max: 1, onnotice: () => {} })
  await setup`CREATE TABLE t (id int)`
  // The agent logs in as a monitoring role (no superuser), so a privilege taken away fails its collector.
  await setup.unsafe(
    "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'covered_agent') THEN CREATE ROLE covered_agent LOGIN PASSWORD 'covered' IN ROLE pg_monitor; END IF; END $$",
  )
  dsn.username = 'covered_agent'
  dsn.password = 'covered'
  server = await startTestServer('sqlite')
  const { key } = await agentAccount(server)
  recorder = Bun.serve({
    hostname: '127.0.0.1',
    idleTimeout: 60,
    port: 0,
    async fetch(req) {
      const url = new URL(req.url)
      const body = req.method === 'POST' ? await req.text() : undefined
      if (url.pathname === '/api/v1/ingest' && body) {
        // Every batch says the agent's clock as it left (the server measures the agent's clock by it).
        const sentAt = Number(req.headers.get(SENT_AT_HEADER))
        if (!(Math.abs(sentAt - Date.now()) < 5_000)) unsent++
        const batch = JSON.parse(body) as IngestBatch
        if (batch.covered_seconds !== undefined) batches.push(batch)
      }
      const res = await fetch(server.base + url.pathname + url.search, {
        method: req.method,
        headers: req.headers,
        body,
      })
      return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers })
    },
  })
  dbProxy = createServer((client) => {
    const upstream = connect(pg.port, '127.0.0.1')
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('error', () => {})
      s.on('close', () => {
        sockets.delete(s)
        client.destroy()
        upstream.destroy()
      })
    }
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>((resolve) => dbProxy.listen(0, '127.0.0.1', resolve))
  port = (dbProxy.address() as { port: number }).port
  dsn.hostname = '127.0.0.1'
  dsn.port = String(port)
  dir = mkdtempSync(join(tmpdir(), 'dbm-covered-'))
  writeFileSync(
    join(dir, 'config.yaml'),
    `api:\n  endpoint: http://127.0.0.1:${recorder.port}\n  key: ${key}\ndatabases:\n  - name: covered\n    dsn: ${dsn}\n    poll_interval: 1s\n    object_stats_interval: 0s\n    enabled_collectors: [tables]\n`,
  )
})

afterAll(async () => {
  await agent?.stop()
  recorder?.stop(true)
  for (const s of sockets) s.destroy()
  dbProxy?.close()
  await setup?.end()
  await server?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

async function startAgent(): Promise<void> {
  agent = new Agent({
    configPath: join(dir, 'config.yaml'),
    bufferDir: dir,
    log: createLogger('error', () => {}),
  })
  await agent.start()
}

/** A batch whose collector finished: it moved the baseline (one that carries only errors did not). */
const measured = (b: IngestBatch) => b.tables !== undefined

/** The first `count` measured batches collected after `since`. */
function measuredAfter(since: number, count: number): Promise<IngestBatch[]> {
  return until(
    `${count} batches after ${new Date(since).toISOString()}`,
    async () => {
      const found = batches.filter((b) => b.collected_at > since && measured(b))
      return found.length >= count ? found.slice(0, count) : undefined
    },
    { everyMs: 50 },
  )
}

/** The last measured batch collected before `until`. */
const lastMeasuredBefore = (at: number) => batches.filter((b) => b.collected_at < at && measured(b)).at(-1)!

test('a restart covers the gap from the saved baseline; a database that did not answer moves none', async () => {
  await startAgent()
  await measuredAfter(0, 2)

  // The agent stopped for ~2.5 s: its saved state's time is its last cycle's.
  await agent!.stop()
  agent = undefined
  const stoppedAt = Date.now()
  await until('2.5 s stopped', async () => (Date.now() - stoppedAt >= 2_500 ? true : undefined))
  const restartedAt = Date.now()
  await startAgent()
  const [back, next] = await measuredAfter(restartedAt, 2)
  const before = lastMeasuredBefore(restartedAt)
  const gapS = (back!.collected_at - before.collected_at) / 1000
  expect(gapS).toBeGreaterThan(2.5)
  expect(back!.covered_seconds).toBe(Math.round(gapS))
  expect([back!.interval_seconds, next!.interval_seconds]).toEqual([1, 1])
  expect(next!.covered_seconds).toBe(1)

  // The database does not answer for ~2 s (connections refused): the cycles fail and send nothing.
  dbProxy.close()
  for (const s of sockets) s.destroy()
  const downAt = Date.now()
  await until('2 s down', async () => (Date.now() - downAt >= 2_000 ? true : undefined))
  await new Promise<void>((resolve) => dbProxy.listen(port, '127.0.0.1', resolve))
  const [recovered] = await measuredAfter(Date.now(), 1)
  // (a cycle may also wait out the outage in its connection attempts and succeed late: it covers as much)
  const outageS = (recovered!.collected_at - lastMeasuredBefore(recovered!.collected_at).collected_at) / 1000
  expect(recovered!.covered_seconds).toBe(Math.max(1, Math.round(outageS)))

  // The tables collector may not read pg_stat_user_tables for a while: the cycle sends a batch of its
  // error alone, which moves no baseline.
  await setup`REVOKE SELECT ON pg_catalog.pg_stat_user_tables FROM PUBLIC`
  const revokedAt = Date.now()
  await until('a failed cycle', async () =>
    batches.some((b) => b.collected_at > revokedAt && b.collector_errors?.length) ? true : undefined,
  )
  await setup`GRANT SELECT ON pg_catalog.pg_stat_user_tables TO PUBLIC`
  const [afterLock, steady] = await measuredAfter(Date.now(), 2)
  const lockS = (afterLock!.collected_at - lastMeasuredBefore(afterLock!.collected_at).collected_at) / 1000
  expect(lockS).toBeGreaterThan(1.5)
  expect(afterLock!.covered_seconds).toBe(Math.round(lockS))
  expect(steady!.covered_seconds).toBe(1)
  // Every measured batch of the run says the time since the one before it (at least the poll interval).
  const run = [...new Map(batches.filter(measured).map((b) => [b.batch_id, b])).values()]
  for (let i = 1; i < run.length; i++) {
    const since = Math.max(1, Math.round((run[i]!.collected_at - run[i - 1]!.collected_at) / 1000))
    expect(run[i]!.covered_seconds).toBe(since)
    expect(run[i]!.interval_seconds).toBe(1)
  }
  expect(unsent).toBe(0)
}, 30_000)
