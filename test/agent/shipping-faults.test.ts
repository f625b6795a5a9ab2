// The agent's shipping under faults, end to end (the Agent class, a real dbm server, a real PostgreSQL 17):
// /healthz tells an API outage, buffered batches and their age, and recovery as they are; a buffer left
// by an earlier run is drained at start; a full buffer filesystem (a 1 MiB tmpfs) neither stops the
// agent nor loses a batch uncounted, with one error line per episode (where the machine cannot mount
// tmpfs, the agent runs in a child process under a file-size limit instead, and the test names say
// which ran). Cycles are driven by cycleAll() (poll_interval 1h), so every count is exact.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent, type AgentStatus } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { freePort, sharedPostgres } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

let dsn: string
let server: TestServer | undefined
let dataDir: string
let port: number
let account: Account
let key: string
const dirs: string[] = []
const mounts: string[] = []
const agents: Agent[] = []

function tempDir(prefix = 'dbm-shipping-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

beforeAll(async () => {
  dsn = await (await sharedPostgres(17)).freshDatabase()
  const setup = postgres(dsn, { max: 1, onnotice: () => {} })
  await setup`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
  await setup.end()
  dataDir = tempDir('dbm-shipping-store-')
  server = await startTestServer('sqlite', { dataDir })
  port = Number(new URL(server.base).port)
  ;({ account, key } = await agentAccount(server))
})

afterAll(async () => {
  for (const agent of agents) await agent.stop()
  await server?.stop()
  for (const mount of mounts) Bun.spawnSync(['umount', mount])
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** Stops the API; its store stays in dataDir. */
async function apiDown(): Promise<void> {
  await server?.stop()
  server = undefined
}

/** Starts the API again on the same port over the same store. */
async function apiUp(): Promise<TestServer> {
  server = await startTestServer('sqlite', { dataDir, port })
  return server
}

async function startAgent(name: string, bufferDir: string, retryIntervalMs = 500) {
  const healthPort = await freePort()
  const path = join(tempDir(), 'config.yaml')
  writeFileSync(
    path,
    `api:\n  endpoint: http://127.0.0.1:${port}\n  key: ${key}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\n` +
      `databases:\n  - name: ${name}\n    dsn: ${dsn}\n    poll_interval: 1h\n`,
  )
  const logs: string[] = []
  const agent = new Agent({
    configPath: path,
    bufferDir,
    log: createLogger('debug', (l) => logs.push(l)),
    timings: { retryIntervalMs, pingIntervalMs: 1000, connectTimeoutS: 5 },
  })
  agents.push(agent)
  await agent.start()
  const healthz = async () => (await (await fetch(`http://127.0.0.1:${healthPort}/healthz`)).json()) as AgentStatus
  const waitFor = (what: string, ok: (h: AgentStatus) => boolean) =>
    until(what, async () => {
      const h = await healthz()
      return ok(h) ? h : undefined
    })
  return { agent, logs, healthz, waitFor }
}

async function storedBatches(name: string): Promise<number> {
  const api = server!
  const db = (
    (await api.call('GET', '/api/v1/databases', { token: account.token })).body as { id: string; name: string }[]
  ).find((d) => d.name === name)
  if (!db) return 0
  const row = await api.store.driver.get<{ n: number }>(
    'SELECT COUNT(*) AS n FROM ingest_batches WHERE database_id = $1',
    [db.id],
  )
  return Number(row!.n)
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

describe('agent /healthz and the API', () => {
  test('an API outage: unreachable, buffered with the oldest age, degraded past one retry interval; back to ok with every batch delivered once', async () => {
    await apiDown()
    const { agent, logs, healthz, waitFor } = await startAgent('outage', tempDir())
    try {
      await waitFor('the first batch buffered', (h) => h.databases[0]?.buffered === 1)
      await agent.cycleAll()
      await agent.cycleAll()
      const down = await waitFor('a degraded status naming the outage and the buffer', (h) =>
        h.reasons.some((r) => r.startsWith('outage: batches buffered for')),
      )
      expect(Object.keys(down).sort()).toEqual(['api', 'databases', 'reasons', 'status', 'version'])
      expect(down.status).toBe('degraded')
      expect(down.reasons).toEqual([
        expect.stringMatching(/^every request to the API has failed for \d+ s$/),
        expect.stringMatching(/^outage: batches buffered for \d+ s$/),
      ])
      expect(down.api).toEqual({
        endpoint: `http://127.0.0.1:${port}`,
        reachable: false,
        last_success_at: null,
        last_failure_at: expect.stringMatching(ISO),
        last_error: 'ECONNREFUSED: Unable to connect. Is the computer able to access the url?',
      })
      expect(down.databases).toHaveLength(1)
      // Read before toMatchObject, which (in Bun 1.4.5) leaves its matchers in the object it matched.
      const oldest = down.databases[0]!.oldest_buffered_at!
      expect(Date.parse(oldest)).toBeLessThan(Date.now() - 500)
      expect(down.databases[0]).toMatchObject({
        name: 'outage',
        state: 'connected',
        buffered: 3,
        oldest_buffered_at: expect.stringMatching(ISO),
        dropped_batches: 0,
        last_drop: null,
        lost_batches: 0,
        last_loss: null,
        buffer_error: null,
      })

      await apiUp()
      // (ok may come a moment before the last batch is delivered: one buffered for less than a retry interval is fine)
      const up = await waitFor(
        'ok again, with the buffer delivered',
        (h) => h.status === 'ok' && h.databases[0]?.buffered === 0,
      )
      expect(up.reasons).toEqual([])
      expect(up.api.reachable).toBe(true)
      expect(up.api.last_success_at).toMatch(ISO)
      expect(Date.parse(up.api.last_success_at!)).toBeGreaterThan(Date.parse(up.api.last_failure_at!))
      expect(up.databases[0]).toMatchObject({
        buffered: 0,
        oldest_buffered_at: null,
        dropped_batches: 0,
        lost_batches: 0,
        buffer_error: null,
      })
      expect(await storedBatches('outage')).toBe(3)
      expect(
        logs.filter((l) => l.includes('API reachable again; buffer drained') && l.includes('delivered=3')),
      ).toHaveLength(1)
      expect(JSON.stringify(up)).not.toContain(key)
    } finally {
      await agent.stop()
    }
  })

  test('a buffer left by an earlier run is drained at start, long before the first retry interval', async () => {
    await apiDown()
    const bufferDir = tempDir()
    const first = await startAgent('restarted', bufferDir)
    try {
      await first.waitFor('the first batch buffered', (h) => h.databases[0]?.buffered === 1)
      await first.agent.cycleAll()
      expect((await first.healthz()).databases[0]!.buffered).toBe(2)
    } finally {
      await first.agent.stop()
    }
    await apiUp()
    // A retry interval of an hour: only the drain at start can deliver the two batches.
    const second = await startAgent('restarted', bufferDir, 3_600_000)
    try {
      await until(
        'the two buffered batches and the first new one',
        async () => ((await storedBatches('restarted')) === 3 ? true : undefined),
        { timeoutMs: 15_000 },
      )
      expect(existsSync(join(bufferDir, 'service_buffer_restarted.db'))).toBe(false)
      expect(
        second.logs.filter((l) => l.includes('resuming buffered batches') && l.includes('buffered=2')),
      ).toHaveLength(1)
      const h = await second.waitFor('ok', (s) => s.status === 'ok')
      expect(h.databases[0]).toMatchObject({ buffered: 0, lost_batches: 0, dropped_batches: 0 })
    } finally {
      await second.agent.stop()
    }
  })
})

/** Fills the filesystem of `dir` to the last byte; returns the filler file. */
function fill(dir: string): string {
  const path = join(dir, 'filler')
  const fd = openSync(path, 'a')
  try {
    for (const size of [64 * 1024, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x61)
      for (;;) {
        try {
          writeSync(fd, chunk)
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e
          break
        }
      }
    }
  } finally {
    closeSync(fd)
  }
  return path
}

/** A 1 MiB tmpfs, or undefined when this machine does not let the tests mount one (or DBM_TEST_NO_MOUNT is set). */
function tinyFilesystem(): string | undefined {
  if (process.env.DBM_TEST_NO_MOUNT) return undefined
  const dir = tempDir('dbm-full-disk-')
  const mounted = Bun.spawnSync(['mount', '-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', dir], { stderr: 'pipe' })
  if (mounted.exitCode !== 0) return undefined
  mounts.push(dir)
  return dir
}

const mount = tinyFilesystem()

describe('a full buffer filesystem', () => {
  test.skipIf(mount === undefined)(
    'the agent keeps running and counts what it cannot keep; one error per episode; batches flow again once there is room and the API is back (ran on a 1 MiB tmpfs)',
    async () => {
      const dir = mount!
      await apiDown()
      let filler = fill(dir)
      const { agent, logs, healthz, waitFor } = await startAgent('full', dir)
      const failingLines = () => logs.filter((l) => l.includes('the buffer is failing'))
      const workingLines = () => logs.filter((l) => l.includes('the buffer works again'))
      try {
        await waitFor('the first batch lost', (h) => h.databases[0]?.lost_batches === 1)
        await agent.cycleAll()
        await agent.cycleAll()
        const full = await healthz()
        expect(full.status).toBe('degraded')
        expect(full.reasons).toContain('full: the buffer is failing')
        expect(full.databases[0]).toMatchObject({
          name: 'full',
          state: 'connected',
          buffered: 0,
          oldest_buffered_at: null,
          dropped_batches: 0,
          lost_batches: 3,
          last_loss: {
            at: expect.stringMatching(ISO),
            reason: expect.stringMatching(/^the buffer cannot keep it \((SQLITE_FULL|ENOSPC)/),
          },
          buffer_error: expect.stringMatching(/^(add|probe): (SQLITE_FULL|ENOSPC)/),
        })
        expect(failingLines()).toHaveLength(1)
        expect(failingLines()[0]).toContain(' ERROR ')
        expect(failingLines()[0]).toContain('database=full')

        // Room again: the next retry round's test write ends the episode; the API is still down, so batches are buffered.
        rmSync(filler)
        await until('the buffer to work again', async () => (workingLines().length === 1 ? true : undefined))
        expect(workingLines()[0]).toContain(' INFO ')
        expect(workingLines()[0]).toContain('lost=3')
        await agent.cycleAll()
        expect((await healthz()).databases[0]).toMatchObject({ buffered: 1, lost_batches: 3, buffer_error: null })

        // The disk fills up again while a batch waits: a second episode, a second error line.
        filler = fill(dir)
        await agent.cycleAll()
        const again = await healthz()
        expect(again.databases[0]).toMatchObject({ buffered: 1, lost_batches: 4 })
        expect(again.databases[0]!.buffer_error).not.toBeNull()
        expect(failingLines()).toHaveLength(2)

        rmSync(filler)
        await apiUp()
        const ok = await waitFor(
          'ok again, with the buffer delivered',
          (h) => h.status === 'ok' && h.databases[0]?.buffered === 0,
        )
        expect(ok.databases[0]).toMatchObject({ buffered: 0, lost_batches: 4, dropped_batches: 0, buffer_error: null })
        expect(workingLines()).toHaveLength(2)
        expect(workingLines()[1]).toContain('lost=1')
        expect(await storedBatches('full')).toBe(1)
        await agent.cycleAll()
        expect(await storedBatches('full')).toBe(2)
        expect(readdirSync(dir).filter((f) => f.startsWith('service_buffer_'))).toEqual([])
      } finally {
        await agent.stop()
      }
    },
  )
})

describe('a full buffer filesystem, without mount', () => {
  test.skipIf(mount !== undefined)(
    'the agent keeps running and counts what it cannot keep, with one error line (ran in a child process under a file-size limit: tmpfs could not be mounted)',
    async () => {
      await apiDown()
      const bufferDir = tempDir()
      const path = join(tempDir(), 'config.yaml')
      writeFileSync(
        path,
        `api:\n  endpoint: http://127.0.0.1:${port}\n  key: ${key}\ndatabases:\n  - name: limited\n    dsn: ${dsn}\n    poll_interval: 1h\n`,
      )
      // 4 KiB: SQLite's first write-ahead-log frame is already past it. SIGXFSZ ignored: a write past the limit fails with EFBIG.
      const child = Bun.spawn(
        [
          'bash',
          '-c',
          `ulimit -f 4; trap '' XFSZ; exec bun ${join(import.meta.dir, 'full-disk-child.ts')} "$0" "$1"`,
          path,
          bufferDir,
        ],
        {
          stdout: 'pipe',
          stderr: 'pipe',
          timeout: 60_000,
        },
      )
      const [out, err, exitCode] = await Promise.all([
        new Response(child.stdout).text(),
        new Response(child.stderr).text(),
        child.exited,
      ])
      expect({ exitCode, err: exitCode === 0 ? '' : err }).toEqual({ exitCode: 0, err: '' })
      const { status, logs } = JSON.parse(out) as { status: AgentStatus; logs: string[] }
      expect(status.status).toBe('degraded')
      expect(status.reasons).toContain('limited: the buffer is failing')
      expect(status.databases[0]).toMatchObject({
        name: 'limited',
        state: 'connected',
        buffered: 0,
        lost_batches: 3,
        dropped_batches: 0,
      })
      expect(status.databases[0]!.buffer_error).toMatch(/SQLITE_(IOERR|FULL)/)
      expect(logs.filter((l) => l.includes('the buffer is failing'))).toHaveLength(1)
      await apiUp()
    },
  )
})
