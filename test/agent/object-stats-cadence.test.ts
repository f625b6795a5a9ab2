// The per-object statistics' cadence (object_stats_interval, issue 29 d5): tables, indexes, bloat and
// column_stats run in the first cycle of a runner, are left out of the cycles within the interval, and
// run again after it, while the other collectors run every cycle; the counters stay exact across the
// skipped cycles and across a restart of the agent. A real PostgreSQL 17, a real server behind a
// recording proxy, cycles driven by hand (Runner.cycle) back to back with one row inserted before each:
// about 5 s, the 4 s interval waited out once on the wall clock, as the cadence is the wall clock's.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { DatabaseConfig } from '../../src/agent/config.ts'
import { PostgresRunner, defaultTimings } from '../../src/agent/postgres-runner.ts'
import { cadenceDue } from '../../src/agent/runner.ts'
import { Shipper } from '../../src/agent/shipper.ts'
import { stateFileName } from '../../src/agent/state.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { IngestBatch, TableStat } from '../../src/shared/wire.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

describe('cadenceDue', () => {
  const minute = 60_000
  const poll = 10_000
  const at = (m: number, s: number) => m * minute + s * 1000

  test('the first cycle, every cycle when the interval is at most the poll interval, and after a clock going back', () => {
    expect(cadenceDue(at(5, 5), undefined, minute, poll)).toBe(true)
    expect(cadenceDue(at(5, 6), at(5, 5), poll, poll)).toBe(true)
    expect(cadenceDue(at(5, 6), at(5, 5), 0, poll)).toBe(true)
    expect(cadenceDue(at(5, 4), at(5, 5), minute, poll)).toBe(true)
  })

  test('once per minute on the wall clock: the first cycle of a new minute at least half a minute after the last run', () => {
    expect(cadenceDue(at(5, 15), at(5, 5), minute, poll)).toBe(false)
    expect(cadenceDue(at(5, 55), at(5, 5), minute, poll)).toBe(false)
    expect(cadenceDue(at(6, 5), at(5, 5), minute, poll)).toBe(true)
    // Cycles of 10.4 s read at every minute's first one, never skipping a minute (drift stays in the minute).
    expect(cadenceDue(at(6, 2), at(5, 10), minute, poll)).toBe(true)
    // A run late in a minute (the first after a start): the next minute's first cycle is too soon.
    expect(cadenceDue(at(6, 1), at(5, 58), minute, poll)).toBe(false)
    expect(cadenceDue(at(6, 31), at(5, 58), minute, poll)).toBe(true)
    // A whole interval since the last run: due, whatever the window.
    expect(cadenceDue(at(10, 0), at(5, 0), 5 * minute, poll)).toBe(true)
    expect(cadenceDue(at(9, 59), at(5, 0), 5 * minute, poll)).toBe(false)
  })
})

const INTERVAL_MS = 4_000
let server: TestServer
let account: Account
let key: string
let recorder: ReturnType<typeof Bun.serve>
let sql: postgres.Sql
let dsn: string
let dir: string
/** The cycles' batches as the agent sent them (availability reports left out). */
const batches: IngestBatch[] = []
const runners: PostgresRunner[] = []

beforeAll(async () => {
  const pg = await sharedPostgres(17)
  dsn = await pg.freshDatabase()
  sql = postgres(dsn, { max: 1, onnotice: () => {} })
  await sql`CREATE TABLE cadenced (id serial PRIMARY KEY, v int)`
  server = await startTestServer('sqlite')
  ;({ account, key } = await agentAccount(server))
  recorder = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const url = new URL(req.url)
      const body = await req.text()
      const batch = JSON.parse(body) as IngestBatch
      if (batch.covered_seconds !== undefined) batches.push(batch)
      const res = await fetch(server.base + url.pathname, { method: 'POST', headers: req.headers, body })
      return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers })
    },
  })
  dir = mkdtempSync(join(tmpdir(), 'dbm-cadence-'))
}, 60_000)

afterAll(async () => {
  for (const runner of runners) await runner.stop().catch(() => {})
  recorder?.stop(true)
  await sql?.end()
  await server?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** A runner of `cadenced` polled every second, its per-object statistics every INTERVAL_MS, its state saved in `dir`. */
function runner(): PostgresRunner {
  const log = createLogger('error', () => {})
  const config: DatabaseConfig = {
    name: 'cadenced',
    engine: 'postgres',
    dsn,
    pollIntervalMs: 1000,
    objectStatsIntervalMs: INTERVAL_MS,
    enabledCollectors: ['activity', 'tables', 'indexes', 'column_stats', 'bloat'],
    tags: {},
  }
  const shipper = new Shipper({
    endpoint: `http://127.0.0.1:${recorder.port}`,
    apiKey: key,
    databaseName: config.name,
    bufferDir: dir,
    retryIntervalMs: 60_000,
    bufferMaxAgeMs: 3_600_000,
    requestTimeoutMs: 15_000,
    log,
  })
  const timings = { ...defaultTimings, pingIntervalMs: 60_000, collectorDeadlineMs: 20_000, connectTimeoutS: 5 }
  const made = new PostgresRunner(config, shipper, log, timings, join(dir, stateFileName(config.name)))
  runners.push(made)
  return made
}

/** pg_stat_user_tables' n_tup_ins of the table now, after this session's counts are flushed. */
async function inserted(): Promise<number> {
  await sql`SELECT pg_stat_force_next_flush()`
  return until('the inserts counted', async () => {
    await sql`SELECT pg_stat_clear_snapshot()`
    const [row] = await sql`SELECT n_tup_ins::int AS n, (SELECT count(*)::int FROM cadenced) AS rows
      FROM pg_stat_user_tables WHERE relname = 'cadenced'`
    return row!.n === row!.rows ? (row!.n as number) : undefined
  })
}

/** One row inserted, then a cycle: the table as the batch carries it (undefined: not read this cycle), and what PostgreSQL counted. */
async function cycle(r: PostgresRunner): Promise<{ batch: IngestBatch; table: TableStat | undefined; truth: number }> {
  await sql`INSERT INTO cadenced (v) VALUES (1)`
  const truth = await inserted()
  const before = batches.length
  await r.cycle()
  const batch = batches.slice(before).at(-1)!
  expect(batch).toBeDefined()
  return { batch, table: batch.tables?.find((t) => t.table_name === 'cadenced'), truth }
}

test('tables and indexes read in the first cycle, skipped within the interval, read after it; counts exact across the skips and a restart', async () => {
  const first = runner()
  const start = await cycle(first)
  // The first cycle reads every object collector, and the table's first sample has no delta.
  expect(start.table?.n_tup_ins).toBe(start.truth)
  expect(start.table?.delta).toBeNull()
  expect(start.batch.indexes?.some((i) => i.index_name === 'cadenced_pkey')).toBe(true)
  expect(start.batch.activity).toBeDefined()

  let lastRead = start
  let skipped = 0
  let readAfterSkip = false
  while (!readAfterSkip) {
    const now = await cycle(first)
    const since = now.batch.collected_at - lastRead.batch.collected_at
    expect(now.batch.collected_at - start.batch.collected_at).toBeLessThan(3 * INTERVAL_MS)
    // Every cycle sends the collectors of every cycle.
    expect(now.batch.activity).toBeDefined()
    if (since < INTERVAL_MS / 2) expect(now.table).toBeUndefined()
    if (since >= INTERVAL_MS) expect(now.table).toBeDefined()
    if (!now.table) {
      expect(now.batch.indexes).toBeUndefined()
      // The health status says when the statistics were last read.
      expect(first.status.collectors.tables).toMatch(/^ok in \d+ ms, \d+ s ago \(object_stats_interval 4s\)$/)
      skipped++
      continue
    }
    // Read again: the delta covers every row inserted since the last read, the skipped cycles' included.
    expect(now.table.n_tup_ins).toBe(now.truth)
    expect(now.table.delta?.n_tup_ins).toBe(now.truth - lastRead.truth)
    expect(now.batch.indexes?.some((i) => i.index_name === 'cadenced_pkey')).toBe(true)
    readAfterSkip = skipped > 0
    lastRead = now
  }
  expect(skipped).toBeGreaterThan(0)

  // Rows inserted in cycles that skipped the tables, then the agent stopped and started again: the first
  // cycle of the new runner reads them, its delta from the saved baseline of the last read.
  const afterRead = await cycle(first)
  if (afterRead.table) lastRead = afterRead
  await first.stop()
  const second = runner()
  const restarted = await cycle(second)
  expect(restarted.table?.n_tup_ins).toBe(restarted.truth)
  expect(restarted.table?.delta?.n_tup_ins).toBe(restarted.truth - lastRead.truth)

  // The server: the table still listed after batches without it, its latest count PostgreSQL's, its
  // minute deltas adding up to every row inserted after the first sample, and no drop read into a skip.
  const dbs = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as any[]
  const dbId = dbs.find((d) => d.name === 'cadenced').id as string
  const table = await server.store.objects.table(dbId, 'public', 'cadenced')
  expect(table?.n_tup_ins).toBe(restarted.truth)
  const series = await server.store.objects.tableSeries(dbId, 'public', 'cadenced', {
    since: start.batch.collected_at - 120_000,
    until: Date.now() + 60_000,
  })
  expect(series.points.reduce((sum, p) => sum + (p.n_tup_ins ?? 0), 0)).toBe(restarted.truth - start.truth)
  const events = (await server.call('GET', `/api/v1/databases/${dbId}/events`, { token: account.token })).body as any
  const kinds = (Array.isArray(events) ? events : events.events).map((e: { kind: string }) => e.kind)
  expect(kinds).not.toContain('table_dropped')
  expect(kinds).not.toContain('index_dropped')
}, 30_000)
