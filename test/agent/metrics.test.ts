// GET /metrics of `dbm agent` (health.listen_addr): the Prometheus text format read with a text-format
// parser package, the conventions, and the values against ground truth: the batches the agent counts as
// sent are the batches the server counts as received; each collector's runs and failures are the cycles
// run and the failures injected (a table its query reads dropped for some cycles, on real PostgreSQL);
// a batch the API cannot take is counted as buffered with its bytes; one it refuses as dropped.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import type { PostgresCollector } from '../../src/agent/collectors/types.ts'
import { type DatabaseConfig, ConfigError, parseAgentConfig } from '../../src/agent/config.ts'
import { AgentMetrics } from '../../src/agent/metrics.ts'
import { PostgresRunner } from '../../src/agent/postgres-runner.ts'
import { defaultTimings } from '../../src/agent/runner.ts'
import { Shipper } from '../../src/agent/shipper.ts'
import { createLogger } from '../../src/shared/log.ts'
import { pgBatch } from '../support/batches.ts'
import { type Scrape, checkConventions, histogram, histogramCount, parseScrape, value } from '../support/prometheus.ts'
import { type PostgresServer, freePort, sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

let pg: PostgresServer
let server: TestServer
let key = ''
/** The serve's server-wide view (batches received) is behind DBM_METRICS_TOKEN, not an organization's key. */
const METRICS_TOKEN = 'metrics-token-of-this-test-0123456789abcdef'
const dirs: string[] = []
const log = createLogger('error', () => {})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-agent-metrics-'))
  dirs.push(dir)
  return dir
}

async function serverScrape(): Promise<Scrape> {
  const res = await fetch(`${server.base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
  expect(res.status).toBe(200)
  return parseScrape(await res.text())
}

/** Batches the server received: applied and acknowledged duplicates. */
const received = (s: Scrape) =>
  value(s, 'dbm_ingest_batches_total', { result: 'applied' }) +
  value(s, 'dbm_ingest_batches_total', { result: 'duplicate' })

beforeAll(async () => {
  pg = await sharedPostgres(17)
  server = await startTestServer('sqlite', { metricsToken: METRICS_TOKEN })
  key = (await agentAccount(server)).key
})

afterAll(async () => {
  await server?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe('dbm agent GET /metrics', () => {
  test('the agent: batches sent equal the batches the server received; each collector run counted once per cycle', async () => {
    const dsn = await statementsDatabase(pg)
    const dir = tempDir()
    const healthPort = await freePort()
    const config = join(dir, 'config.yaml')
    // An hour's poll interval: the first cycle at start, then only the cycles the test runs.
    writeFileSync(
      config,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\ndatabases:\n  - name: alpha\n    dsn: ${dsn}\n    poll_interval: 1h\n  - name: beta\n    dsn: ${dsn}\n    poll_interval: 1h\n`,
    )
    const before = await serverScrape()
    const agent = new Agent({ configPath: config, bufferDir: dir, log })
    await agent.start()
    let agentText = ''
    try {
      for (const name of ['alpha', 'beta']) {
        await until(`the first cycle of ${name}`, async () =>
          agent.runner(name)?.status.state === 'connected' ? true : undefined,
        )
      }
      await agent.cycleAll()
      await agent.cycleAll()
      const res = await fetch(`http://127.0.0.1:${healthPort}/metrics`)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
      agentText = await res.text()
      expect((await fetch(`http://127.0.0.1:${healthPort}/healthz`)).status).toBe(200)
      const scrape = parseScrape(agentText)
      checkConventions(scrape, 'dbm_agent_')
      expect(
        Object.fromEntries([...scrape.values()].filter((f) => f.name.startsWith('dbm_')).map((f) => [f.name, f.type])),
      ).toEqual({
        dbm_agent_collector_duration_seconds: 'HISTOGRAM',
        dbm_agent_collector_failures_total: 'COUNTER',
        dbm_agent_batches_sent_total: 'COUNTER',
        dbm_agent_batches_buffered_total: 'COUNTER',
        dbm_agent_batches_dropped_total: 'COUNTER',
        dbm_agent_batches_lost_total: 'COUNTER',
        dbm_agent_buffered_batches: 'GAUGE',
        dbm_agent_buffer_bytes: 'GAUGE',
        dbm_agent_api_request_duration_seconds: 'HISTOGRAM',
        dbm_agent_database_up: 'GAUGE',
      })
      for (const name of ['alpha', 'beta']) {
        const collectors = agent.runner(name)!.status.collectors
        const ran = Object.entries(collectors).filter(([, status]) => !status.startsWith('skipped'))
        expect(ran.length).toBeGreaterThan(5)
        for (const [collector, status] of ran) {
          expect({ collector, status: status.startsWith('ok') }).toEqual({ collector, status: true })
          expect({
            collector,
            runs: histogramCount(scrape, 'dbm_agent_collector_duration_seconds', { database: name, collector }),
          }).toEqual({ collector, runs: 3 })
          expect({
            collector,
            failures: value(scrape, 'dbm_agent_collector_failures_total', { database: name, collector }),
          }).toEqual({ collector, failures: 0 })
        }
        for (const [collector] of Object.entries(collectors).filter(([, status]) => status.startsWith('skipped'))) {
          expect(
            histogram(scrape, 'dbm_agent_collector_duration_seconds', { database: name, collector }),
          ).toBeUndefined()
        }
        expect(value(scrape, 'dbm_agent_batches_sent_total', { database: name })).toBeGreaterThanOrEqual(3)
        expect(value(scrape, 'dbm_agent_buffered_batches', { database: name })).toBe(0)
        expect(value(scrape, 'dbm_agent_buffer_bytes', { database: name })).toBe(0)
        expect(value(scrape, 'dbm_agent_batches_buffered_total', { database: name })).toBe(0)
        expect(value(scrape, 'dbm_agent_database_up', { database: name })).toBe(1)
      }
      const sent =
        value(scrape, 'dbm_agent_batches_sent_total', { database: 'alpha' }) +
        value(scrape, 'dbm_agent_batches_sent_total', { database: 'beta' })
      expect(histogramCount(scrape, 'dbm_agent_api_request_duration_seconds', { status: '200' })).toBe(sent)
      expect(received(await serverScrape()) - received(before)).toBe(sent)
      expect(value(scrape, 'process_resident_memory_bytes')).toBeGreaterThan(0)
    } finally {
      await agent.stop()
    }
  })

  test('a collector failing in injected cycles: its failures count equals the failures injected', async () => {
    const dsn = await statementsDatabase(pg)
    const admin = postgres(dsn, { max: 1, onnotice: () => {} })
    await admin`CREATE TABLE fault_switch (id int)`
    const faultProbe: PostgresCollector = {
      name: 'fault_probe',
      engine: 'postgres',
      defaultEnabled: true,
      async collect(ctx) {
        await ctx.sql`SELECT count(*) FROM fault_switch`
        return {}
      },
    }
    const steadyProbe: PostgresCollector = {
      name: 'steady_probe',
      engine: 'postgres',
      defaultEnabled: true,
      async collect(ctx) {
        await ctx.sql`SELECT 1`
        return {}
      },
    }
    class ProbeRunner extends PostgresRunner {
      protected override readonly collectors = [faultProbe, steadyProbe]
    }
    const dir = tempDir()
    let shipper: Shipper | undefined
    const metrics = new AgentMetrics(() =>
      shipper ? [{ database: 'probe', batches: () => shipper!.buffered(), bytes: () => shipper!.bufferBytes() }] : [],
    )
    shipper = new Shipper({
      endpoint: server.base,
      apiKey: key,
      databaseName: 'probe',
      bufferDir: dir,
      retryIntervalMs: 30_000,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 5_000,
      log,
      metrics: metrics.shipper('probe'),
    })
    const config: DatabaseConfig = {
      name: 'probe',
      engine: 'postgres',
      dsn,
      pollIntervalMs: 3_600_000,
      objectStatsIntervalMs: 0,
      tags: {},
    }
    const runner = new ProbeRunner(config, shipper, log, defaultTimings)
    runner.metrics = metrics.runner('probe')
    const before = await serverScrape()
    const injected = new Set([1, 3, 4])
    try {
      for (let cycle = 0; cycle < 6; cycle++) {
        if (injected.has(cycle)) await admin`DROP TABLE IF EXISTS fault_switch`
        else await admin`CREATE TABLE IF NOT EXISTS fault_switch (id int)`
        await runner.cycle()
        expect({ cycle, failed: runner.status.collectors.fault_probe!.startsWith('failed:') }).toEqual({
          cycle,
          failed: injected.has(cycle),
        })
      }
      const scrape = parseScrape(metrics.registry.expose())
      checkConventions(scrape, 'dbm_agent_')
      expect(value(scrape, 'dbm_agent_collector_failures_total', { database: 'probe', collector: 'fault_probe' })).toBe(
        injected.size,
      )
      expect(
        value(scrape, 'dbm_agent_collector_failures_total', { database: 'probe', collector: 'steady_probe' }),
      ).toBe(0)
      expect(
        histogramCount(scrape, 'dbm_agent_collector_duration_seconds', { database: 'probe', collector: 'fault_probe' }),
      ).toBe(6)
      expect(
        histogramCount(scrape, 'dbm_agent_collector_duration_seconds', {
          database: 'probe',
          collector: 'steady_probe',
        }),
      ).toBe(6)
      // One batch a cycle, each taken by the server.
      expect(value(scrape, 'dbm_agent_batches_sent_total', { database: 'probe' })).toBe(6)
      expect(received(await serverScrape()) - received(before)).toBe(6)
    } finally {
      await runner.stop()
      await shipper.stop()
      await admin.end()
    }
  })

  test('a batch the API cannot take is buffered, with its bytes; one it refuses as malformed is dropped', async () => {
    const dir = tempDir()
    const shippers: { name: string; shipper: Shipper }[] = []
    const metrics = new AgentMetrics(() =>
      shippers.map(({ name, shipper }) => ({
        database: name,
        batches: () => shipper.buffered(),
        bytes: () => shipper.bufferBytes(),
      })),
    )
    const shipperTo = (endpoint: string, name: string) => {
      const shipper = new Shipper({
        endpoint,
        apiKey: key,
        databaseName: name,
        bufferDir: dir,
        retryIntervalMs: 3_600_000,
        bufferMaxAgeMs: 3_600_000,
        requestTimeoutMs: 5_000,
        log,
        metrics: metrics.shipper(name),
      })
      shippers.push({ name, shipper })
      return shipper
    }
    const down = shipperTo(`http://127.0.0.1:${await freePort()}`, 'down "db"\\x')
    const refused = shipperTo(server.base, 'refused')
    try {
      const batches = [pgBatch('down', Date.now() - 1000), pgBatch('down', Date.now())]
      for (const b of batches) await down.send(b)
      const bad = { ...pgBatch('refused', Date.now()), interval_seconds: -1 }
      expect(await refused.send(bad)).toBe('dropped')
      const scrape = parseScrape(metrics.registry.expose())
      const bytes = batches.reduce((sum, b) => sum + Buffer.byteLength(JSON.stringify(b)), 0)
      expect(value(scrape, 'dbm_agent_batches_buffered_total', { database: 'down "db"\\x' })).toBe(2)
      expect(value(scrape, 'dbm_agent_buffered_batches', { database: 'down "db"\\x' })).toBe(2)
      expect(value(scrape, 'dbm_agent_buffer_bytes', { database: 'down "db"\\x' })).toBe(bytes)
      expect(value(scrape, 'dbm_agent_batches_sent_total', { database: 'down "db"\\x' })).toBe(0)
      // The first was tried and failed; the second queued behind it without a request.
      expect(histogramCount(scrape, 'dbm_agent_api_request_duration_seconds', { status: '0' })).toBe(1)
      expect(value(scrape, 'dbm_agent_batches_dropped_total', { database: 'refused' })).toBe(1)
      expect(histogramCount(scrape, 'dbm_agent_api_request_duration_seconds', { status: '400' })).toBe(1)
    } finally {
      for (const { shipper } of shippers) await shipper.stop()
    }
  })

  test("enabled_exporter: the database's own figures as series, against what PostgreSQL says; none for a database without it", async () => {
    const dsn = await statementsDatabase(pg)
    const quiet = await statementsDatabase(pg)
    const dir = tempDir()
    const healthPort = await freePort()
    const config = join(dir, 'config.yaml')
    writeFileSync(
      config,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\ndatabases:\n  - name: gamma\n    dsn: ${dsn}\n    poll_interval: 1h\n    enabled_exporter: true\n  - name: quiet\n    dsn: ${quiet}\n    poll_interval: 1h\n`,
    )
    const sql = postgres(dsn, { max: 1, onnotice: () => {} })
    const agent = new Agent({ configPath: config, bufferDir: dir, log })
    await agent.start()
    const scrape = async () => parseScrape(await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text())
    try {
      for (const name of ['gamma', 'quiet']) {
        await until(`the first cycle of ${name}`, async () =>
          agent.runner(name)?.status.state === 'connected' ? true : undefined,
        )
      }
      // After the baseline cycle: 1,000 rows, which pg_stat_database counts once the session's statistics are
      // flushed: at its next idle moment when asked to (otherwise up to 10 s later).
      await sql`INSERT INTO t SELECT generate_series(51, 1050)`
      await sql`SELECT pg_stat_force_next_flush()`
      const inserted = await until('the insert in the exported counter', async () => {
        await agent.cycleAll()
        const n = value(await scrape(), 'dbm_pg_tuples_inserted_total', { database: 'gamma' })
        return n >= 1000 ? n : undefined
      })
      expect(inserted).toBe(1000)
      await agent.cycleAll()
      const s = await scrape()
      checkConventions(s, 'dbm_')
      expect(value(s, 'dbm_pg_tuples_inserted_total', { database: 'gamma' })).toBe(1000)
      const [settings] = await sql<
        { max_connections: string }[]
      >`SELECT current_setting('max_connections') AS max_connections`
      expect(value(s, 'dbm_pg_max_connections', { database: 'gamma' })).toBe(Number(settings!.max_connections))
      // The size PostgreSQL reports now is the one the last cycle read (nothing writes to the database meanwhile).
      const [size] = await sql<{ bytes: string }[]>`SELECT pg_database_size(current_database())::text AS bytes`
      expect(value(s, 'dbm_pg_database_size_bytes', { database: 'gamma' })).toBe(Number(size!.bytes))
      expect(value(s, 'dbm_pg_xact_commit_total', { database: 'gamma' })).toBeGreaterThan(0)
      expect(s.get('dbm_pg_backends')?.type).toBe('GAUGE')
      expect(s.get('dbm_pg_xact_commit_total')?.type).toBe('COUNTER')
      expect(value(s, 'dbm_agent_database_up', { database: 'gamma' })).toBe(1)
      expect(value(s, 'dbm_agent_database_up', { database: 'quiet' })).toBe(1)
      // Only gamma's figures, and no ClickHouse families for an agent without a ClickHouse exporter.
      for (const family of s.values()) {
        if (!family.name.startsWith('dbm_pg_')) continue
        expect({ name: family.name, databases: family.metrics.map((m) => m.labels?.database) }).toEqual({
          name: family.name,
          databases: ['gamma'],
        })
      }
      expect([...s.keys()].filter((name) => name.startsWith('dbm_clickhouse_'))).toEqual([])
    } finally {
      await agent.stop()
      await sql.end()
    }
  })

  test('enabled_exporter in the config: true or false, anything else named', () => {
    const yaml = (v: string) =>
      `api:\n  key: dbm_ak_0123456789abcdef_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ\ndatabases:\n  - name: a\n    dsn: postgres://u@h/db\n${v}`
    expect(parseAgentConfig(yaml('    enabled_exporter: true\n')).databases[0]!.exporter).toBe(true)
    expect(parseAgentConfig(yaml('    enabled_exporter: false\n')).databases[0]!.exporter).toBeUndefined()
    expect(parseAgentConfig(yaml('')).databases[0]!.exporter).toBeUndefined()
    expect(() => parseAgentConfig(yaml('    enabled_exporter: yes\n'))).toThrow(
      new ConfigError('databases[0].enabled_exporter: expected true or false, got "yes"'),
    )
  })
})
