// Deadlines that cancel, against real servers: a PostgreSQL server frozen with SIGSTOP (every process
// but the test's own backend) while a second database on another server keeps its cycle, with reload
// and stop timed and exact statement counts after it resumes; the server-side cancel of a collector
// past its deadline, also when its backend is stopped and cannot act on the cancel; and the abort of a
// ClickHouse collector's request past its deadline (on the chdb test server, see the test's note).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { ClickHouseRunner } from '../../src/agent/clickhouse-runner.ts'
import type { ClickHouseCollector, PostgresCollector } from '../../src/agent/collectors/types.ts'
import type { DatabaseConfig } from '../../src/agent/config.ts'
import { PostgresRunner } from '../../src/agent/postgres-runner.ts'
import { defaultTimings, type RunnerTimings } from '../../src/agent/runner.ts'
import { Shipper } from '../../src/agent/shipper.ts'
import { loadState } from '../../src/agent/state.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'
import { type PostgresServer, startPostgres, statementsDatabase } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

const DEADLINE_MS = 2000
const GRACE_MS = 500
/** What a reload or a stop may take beyond one collector deadline on this busy, shared machine. */
const MARGIN_MS = 1500

let hungServer: PostgresServer
let healthyServer: PostgresServer
let hungDsn: string
let healthyDsn: string
let server: TestServer
let account: Account
let key: string
const dirs: string[] = []
/** Processes this file stopped: resumed in afterAll whatever happened. */
const stopped = new Set<number>()

beforeAll(async () => {
  ;[hungServer, healthyServer] = await Promise.all([
    startPostgres(17, ['-c', 'shared_preload_libraries=pg_stat_statements']),
    startPostgres(17, ['-c', 'shared_preload_libraries=pg_stat_statements']),
  ])
  ;[hungDsn, healthyDsn] = await Promise.all([statementsDatabase(hungServer), statementsDatabase(healthyServer)])
  server = await startTestServer('sqlite')
  ;({ account, key } = await agentAccount(server))
})

afterAll(async () => {
  resume([...stopped])
  await server?.stop()
  await hungServer?.stop()
  await healthyServer?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-deadlines-'))
  dirs.push(dir)
  return dir
}

/** The parent of a process, from /proc/<pid>/stat (the field after the command name). */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

function childrenOf(pid: number): number[] {
  const children: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (parentOf(Number(entry)) === pid) children.push(Number(entry))
    } catch {
      // the process ended while the list was read
    }
  }
  return children
}

function suspend(pid: number): void {
  process.kill(pid, 'SIGSTOP')
  stopped.add(pid)
}

function resume(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGCONT')
    } catch {
      // gone already
    }
    stopped.delete(pid)
  }
}

/**
 * Freezes the PostgreSQL server of backend `keep`: its postmaster first (no new connection gets
 * anywhere), then every other process of it, so that every connection the agent has or opens hangs,
 * while `keep` still runs the test's statements. Returns the frozen processes.
 */
function freezeServerBut(keep: number): number[] {
  const postmaster = parentOf(keep)
  suspend(postmaster)
  const frozen = [postmaster]
  for (const pid of childrenOf(postmaster)) {
    if (pid === keep) continue
    suspend(pid)
    frozen.push(pid)
  }
  return frozen
}

describe('deadlines that cancel', () => {
  test('a hung database: collectors fail at their deadline, the other database keeps its cycle, reload and stop take about one deadline, counts stay exact', async () => {
    const N = 7
    const M = 5
    const dir = tempDir()
    const path = join(dir, 'config.yaml')
    const writeConfig = (edit: { healthy: number; hung: number }) =>
      writeFileSync(
        path,
        `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n` +
          `  - name: hung\n    dsn: ${hungDsn}\n    poll_interval: 1s\n    tags:\n      edit: "${edit.hung}"\n` +
          `  - name: healthy\n    dsn: ${healthyDsn}\n    poll_interval: 1s\n    tags:\n      edit: "${edit.healthy}"\n`,
      )
    writeConfig({ healthy: 0, hung: 0 })
    const logs: string[] = []
    const agent = new Agent({
      configPath: path,
      bufferDir: dir,
      log: createLogger('debug', (l) => logs.push(l)),
      timings: {
        // As in production (3 pings 10 s apart against a 10 s deadline), the pings give up on the
        // connection well after a collector's deadline, even when a loaded machine delays the cycle.
        pingIntervalMs: 1000,
        reconnectAfterFailures: 8,
        connectTimeoutS: 2,
        statementTimeoutMs: 1000,
        collectorDeadlineMs: DEADLINE_MS,
        cancelGraceMs: GRACE_MS,
        watchIntervalMs: 60_000,
      },
    })
    // The test's own session on the hung server: its backend stays running while the rest is frozen.
    const marker = postgres(hungDsn, { max: 1, onnotice: () => {}, connection: { application_name: 'dbm-test' } })
    const [markerBackend] = await marker<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
    const markerPid = markerBackend!.pid
    const runMarker = async (times: number) => {
      for (let i = 0; i < times; i++) await marker`SELECT id AS hang_marker FROM t WHERE id = ${i + 1}`
    }
    let frozen: number[] = []
    let agentStopped = false
    await agent.start()
    try {
      const databaseId = async (name: string) =>
        until(`${name} to register`, async () => {
          const dbs = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as any[]
          return dbs.find((d) => d.name === name)?.id as string | undefined
        })
      const hungId = await databaseId('hung')
      const healthyId = await databaseId('healthy')
      const batches = async (id: string) =>
        Number(
          (await server.store.driver.get<{ n: number }>(
            'SELECT COUNT(*) AS n FROM ingest_batches WHERE database_id = $1',
            [id],
          ))!.n,
        )
      const moreBatches = async (id: string, what: string, count: number) => {
        const from = await batches(id)
        await until(what, async () => ((await batches(id)) >= from + count ? true : undefined))
      }
      const serverCalls = async () => {
        const rows = (
          await server.call('GET', `/api/v1/databases/${hungId}/queries?limit=100`, { token: account.token })
        ).body as any[]
        return rows.find((r) => r.query_text.includes('hang_marker'))?.total_calls as number | undefined
      }
      const hungStatus = () => agent.runner('hung')!.status

      await until('a statement baseline on the hung database', async () =>
        hungStatus().collectors.query_stats?.startsWith('ok') ? true : undefined,
      )
      await runMarker(N)
      await until(`${N} calls counted`, async () => ((await serverCalls()) === N ? true : undefined))

      frozen = freezeServerBut(markerPid)
      await runMarker(M)
      // The first failed ping marks the database disconnected; a collector fails with its deadline.
      await until('the hung database to be marked disconnected', async () =>
        hungStatus().state === 'disconnected' && hungStatus().last_error?.startsWith('health ping failed')
          ? true
          : undefined,
      )
      const deadlineFailure = new RegExp(`^failed: \\w+ took longer than ${DEADLINE_MS} ms$`)
      await until('a collector of the hung database to fail at its deadline', async () =>
        Object.values(hungStatus().collectors).some((s) => deadlineFailure.test(s)) ? true : undefined,
      )
      await moreBatches(healthyId, '3 batches of the healthy database while the other hangs', 3)

      writeConfig({ healthy: 1, hung: 0 })
      let started = performance.now()
      await agent.reload()
      const reloadHealthyMs = performance.now() - started
      writeConfig({ healthy: 1, hung: 1 })
      started = performance.now()
      await agent.reload()
      const reloadHungMs = performance.now() - started
      console.log(
        `reload with a hung database: ${Math.round(reloadHealthyMs)} ms (healthy entry edited), ${Math.round(reloadHungMs)} ms (hung entry edited); collector deadline ${DEADLINE_MS} ms`,
      )
      expect(reloadHealthyMs).toBeLessThan(DEADLINE_MS + MARGIN_MS)
      expect(reloadHungMs).toBeLessThan(DEADLINE_MS + MARGIN_MS)
      expect(logs.some((l) => l.includes('config reloaded') && l.includes('restarted=hung'))).toBe(true)
      await moreBatches(healthyId, '2 batches of the restarted healthy database while the other hangs', 2)

      resume(frozen)
      frozen = []
      await until(
        `${N} + ${M} calls counted after the hang`,
        async () => ((await serverCalls()) === N + M ? true : undefined),
        { timeoutMs: 30_000 },
      )
      const [truth] = await marker<{ calls: number }[]>`
        SELECT sum(calls)::int AS calls FROM pg_stat_statements WHERE query LIKE '%hang_marker%' AND query NOT LIKE '%pg_stat_statements%'`
      expect(truth!.calls).toBe(N + M)
      await moreBatches(hungId, '2 more batches of the recovered database', 2)
      expect(await serverCalls()).toBe(N + M)
      expect(hungStatus().state).toBe('connected')

      // Stop while the server hangs again.
      frozen = freezeServerBut(markerPid)
      await until('the hung database to be marked disconnected again', async () =>
        hungStatus().state === 'disconnected' ? true : undefined,
      )
      started = performance.now()
      await agent.stop()
      agentStopped = true
      const stopMs = performance.now() - started
      console.log(`stop with a hung database: ${Math.round(stopMs)} ms; collector deadline ${DEADLINE_MS} ms`)
      expect(stopMs).toBeLessThan(DEADLINE_MS + MARGIN_MS)
    } finally {
      resume(frozen)
      if (!agentStopped) await agent.stop()
      await marker.end()
    }
  }, 120_000)

  test('a collector past its deadline is cancelled on the server, also when its backend cannot act on the cancel', async () => {
    const dir = tempDir()
    const dsn = await hungServer.freshDatabase()
    const watcher = postgres(dsn, { max: 1, onnotice: () => {}, connection: { application_name: 'dbm-test' } })
    // A probe that swallows its failure and writes state after it: its state must not be committed.
    const slowProbe: PostgresCollector = {
      name: 'slow_probe',
      engine: 'postgres',
      defaultEnabled: true,
      async collect(ctx) {
        await ctx.sql`SELECT pg_sleep(30) AS deadline_probe`.catch(() => {})
        ctx.state.set('slow_probe', 'late')
        return {}
      },
    }
    const quickProbe: PostgresCollector = {
      name: 'quick_probe',
      engine: 'postgres',
      defaultEnabled: true,
      async collect(ctx) {
        await ctx.sql`SELECT 1`
        ctx.state.set('quick_probe', ctx.now)
        return {}
      },
    }
    class ProbeRunner extends PostgresRunner {
      protected override readonly collectors = [slowProbe, quickProbe]
    }
    const log = createLogger('error', () => {})
    const config: DatabaseConfig = {
      name: 'probe',
      engine: 'postgres',
      dsn,
      pollIntervalMs: 1000,
      objectStatsIntervalMs: 0,
      tags: {},
    }
    const shipper = new Shipper({
      endpoint: server.base,
      apiKey: key,
      databaseName: 'probe',
      bufferDir: dir,
      retryIntervalMs: 30_000,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 5_000,
      log,
    })
    const timings: RunnerTimings = {
      ...defaultTimings,
      statementTimeoutMs: 60_000,
      collectorDeadlineMs: 1500,
      cancelGraceMs: GRACE_MS,
    }
    const stateFile = join(dir, 'state.json')
    const runner = new ProbeRunner(config, shipper, log, timings, stateFile)
    const probes = async () =>
      watcher<{ pid: number }[]>`
        SELECT pid FROM pg_stat_activity
        WHERE application_name = 'dbm-agent' AND datname = current_database() AND state = 'active' AND query LIKE '%deadline_probe%'`
    let held: number | undefined
    try {
      // A plain cancel: the probe's pg_sleep stops long before its 30 s and the 60 s statement_timeout.
      let cycle = runner.cycle()
      await until('the probe to run on the server', async () => ((await probes()).length > 0 ? true : undefined))
      await cycle
      expect(runner.status.collectors.slow_probe).toBe('failed: slow_probe took longer than 1500 ms')
      expect(runner.status.collectors.quick_probe).toStartWith('ok')
      await until(
        'no probe running after the deadline',
        async () => ((await probes()).length === 0 ? true : undefined),
        { timeoutMs: 5_000 },
      )
      const saved = loadState(stateFile)
      expect(saved.kind).toBe('loaded')
      if (saved.kind === 'loaded') {
        expect(saved.entries.has('quick_probe')).toBe(true)
        expect(saved.entries.has('slow_probe')).toBe(false)
      }

      // The probe's backend is stopped: the cancel waits in its signal queue, the agent does not wait.
      const started = performance.now()
      cycle = runner.cycle()
      held = await until('the probe to run again', async () => (await probes())[0]?.pid)
      suspend(held)
      await cycle
      const cycleMs = performance.now() - started
      expect(runner.status.collectors.slow_probe).toBe('failed: slow_probe took longer than 1500 ms')
      // The next collector ran at once on a fresh pool, not behind the stuck connection.
      expect(runner.status.collectors.quick_probe).toStartWith('ok')
      expect(cycleMs).toBeLessThan(1500 + MARGIN_MS)
      resume([held])
      held = undefined
      // Resumed, the backend acts on the cancel (and on its closed connection): nothing of the agent's stays running.
      await until(
        'no probe running after the backend resumed',
        async () => ((await probes()).length === 0 ? true : undefined),
        { timeoutMs: 5_000 },
      )
    } finally {
      if (held !== undefined) resume([held])
      await runner.stop()
      await watcher.end()
    }
  }, 60_000)

  test('a ClickHouse collector past its deadline has its request aborted and its query stopped', async () => {
    // The chdb test server kills a request's query when the client disconnects (as a real server does
    // with cancel_http_readonly_queries_on_client_close). Its query ids are not the engine's, so the
    // agent's KILL QUERY by query id finds nothing there: what this shows is the aborted request.
    const ch: ClickHouseRig = await startClickHouse()
    const dir = tempDir()
    const slowProbe: ClickHouseCollector = {
      name: 'slow_probe',
      engine: 'clickhouse',
      defaultEnabled: true,
      async collect(ctx) {
        const result = await ctx.client.query({
          query: 'SELECT sleepEachRow(0.1) AS deadline_probe FROM numbers(150) SETTINGS max_block_size = 1',
          format: 'JSONEachRow',
        })
        await result.json()
        ctx.state.set('slow_probe', 'late')
        return {}
      },
    }
    const quickProbe: ClickHouseCollector = {
      name: 'quick_probe',
      engine: 'clickhouse',
      defaultEnabled: true,
      async collect(ctx) {
        await (await ctx.client.query({ query: 'SELECT 1', format: 'JSONEachRow' })).json()
        return {}
      },
    }
    // The quick probe runs first: on this rig's in-process chdb an ASYNC KILL QUERY can land on the query
    // that starts next ("killed in pending state", 1 run in ~10), which a ClickHouse server, matching
    // the query ids, does not do. The PostgreSQL tests above show a collector after a timed-out one.
    class ProbeRunner extends ClickHouseRunner {
      protected override readonly collectors = [quickProbe, slowProbe]
    }
    const log = createLogger('error', () => {})
    const config: DatabaseConfig = {
      name: 'ch-probe',
      engine: 'clickhouse',
      dsn: ch.dsn,
      pollIntervalMs: 1000,
      objectStatsIntervalMs: 0,
      tags: {},
    }
    const shipper = new Shipper({
      endpoint: server.base,
      apiKey: key,
      databaseName: 'ch-probe',
      bufferDir: dir,
      retryIntervalMs: 30_000,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 5_000,
      log,
    })
    const timings: RunnerTimings = {
      ...defaultTimings,
      statementTimeoutMs: 60_000,
      collectorDeadlineMs: 1500,
      cancelGraceMs: GRACE_MS,
    }
    const runner = new ProbeRunner(config, shipper, log, timings)
    const running = async () =>
      Number(
        (
          await ch.query<{ n: string }>(
            "SELECT count() AS n FROM system.processes WHERE query LIKE '%deadline_probe%' AND query NOT LIKE '%system.processes%'",
          )
        )[0]!.n,
      )
    try {
      const started = performance.now()
      const cycle = runner.cycle()
      await until('the probe to run on the server', async () => ((await running()) > 0 ? true : undefined))
      await cycle
      expect(performance.now() - started).toBeLessThan(1500 + MARGIN_MS)
      expect(runner.status.collectors.slow_probe).toBe('failed: slow_probe took longer than 1500 ms')
      expect(runner.status.collectors.quick_probe).toStartWith('ok')
      // 150 rows of 0.1 s would take 15 s: the query is gone well before.
      await until('no probe running after the deadline', async () => ((await running()) === 0 ? true : undefined), {
        timeoutMs: 5_000,
      })
    } finally {
      await runner.stop()
      await ch.stop()
    }
  }, 60_000)
})
