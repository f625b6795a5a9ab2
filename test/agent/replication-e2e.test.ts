// Replication end to end: a real PostgreSQL 17 primary with a streaming hot standby, both watched by
// the real Agent (config file, runners, shipper) that pushes to a real dbm server. With replay paused
// on the standby and a known amount of WAL written on the primary, the API shows the standby's lag
// (current and in its history) and the WAL an unused slot holds back (current and in slot history).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { startStandby } from '../support/replica.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until as waitUntil } from '../support/wait.ts'

/** Polls through errors: the standby refuses connections while it starts. */
const until = <T>(what: string, probe: () => Promise<T | undefined>) => waitUntil(what, probe, { ignoreErrors: true })

let primary: PostgresServer
let primarySql: postgres.Sql
let replicaSql: postgres.Sql
let replicaUrl: string
let stopReplica: (() => Promise<void>) | undefined
const dirs: string[] = []

beforeAll(async () => {
  primary = await startPostgres(17)
  primarySql = postgres(primary.url(), { max: 2, onnotice: () => {} })
  await primarySql`SELECT pg_create_physical_replication_slot('dbm_standby')`
  // A slot nobody consumes: it holds back every byte of WAL written after it.
  await primarySql`SELECT pg_create_physical_replication_slot('dbm_idle', true)`
  const standby = await startStandby(primary, primarySql, 'dbm_standby')
  stopReplica = standby.stop
  replicaUrl = standby.url
  replicaSql = postgres(replicaUrl, { max: 1, onnotice: () => {} })
}, 60_000)

afterAll(async () => {
  await replicaSql?.end({ timeout: 1 }).catch(() => {})
  await primarySql?.end({ timeout: 1 }).catch(() => {})
  await stopReplica?.()
  await primary?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe('replication through the agent and the API', () => {
  let server: TestServer
  let account: Account
  let key: string
  beforeAll(async () => {
    server = await startTestServer('sqlite')
    ;({ account, key } = await agentAccount(server))
  })
  afterAll(async () => {
    await server.stop()
  })

  const api = async (path: string) => (await server.call('GET', `/api/v1${path}`, { token: account.token })).body

  test('standby lag and slot lag show up current and in their histories', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dbm-e2e-agent-'))
    dirs.push(dir)
    const configPath = join(dir, 'config.yaml')
    const entry = (name: string, dsn: string) =>
      `  - name: ${name}\n    dsn: ${dsn}\n    poll_interval: 1s\n    enabled_collectors: [replication, wal_stats, database_stats]\n`
    writeFileSync(
      configPath,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n${entry('primary', primary.url())}${entry('standby', replicaUrl)}`,
    )
    const agent = new Agent({ configPath, bufferDir: dir, log: createLogger('error', () => {}) })
    await agent.start()
    try {
      const ids = await until('both databases to register', async () => {
        const list = (await api('/databases')) as { name: string; id: string }[]
        const p = list.find((d) => d.name === 'primary')
        const s = list.find((d) => d.name === 'standby')
        return p && s ? { primary: p.id, standby: s.id } : undefined
      })
      const streaming = await until('the standby to report itself', async () => {
        const r = await api(`/databases/${ids.standby}/replication`)
        return r.is_replica === true && r.replication_lag_bytes === 0 ? r : undefined
      })
      expect(streaming).toMatchObject({
        is_replica: true,
        upstream_host: '127.0.0.1',
        replication_lag_seconds: 0,
        slots: [],
        replicas: [],
      })

      // One transaction replayed first: the lag in seconds counts from the last replayed one.
      await primarySql`CREATE TABLE replayed_marker (id int)`
      await until('the standby to replay a transaction', async () => {
        const [row] =
          await replicaSql`SELECT pg_last_xact_replay_timestamp() IS NOT NULL AND to_regclass('replayed_marker') IS NOT NULL AS seen`
        return row?.seen ? true : undefined
      })
      // Replay paused on the standby, then a known amount of WAL on the primary.
      await replicaSql`SELECT pg_wal_replay_pause()`
      await until('replay to pause', async () => {
        const [row] = await replicaSql`SELECT pg_get_wal_replay_pause_state() AS state`
        return row?.state === 'paused' ? true : undefined
      })
      const [{ before }] = (await primarySql`SELECT pg_current_wal_lsn()::text AS before`) as unknown as [
        { before: string },
      ]
      // In a session of its own that ends at once: a backend flushes its WAL statistics when it exits.
      const filler = postgres(primary.url(), { max: 1, onnotice: () => {} })
      await filler`CREATE TABLE filler AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g`
      await filler.end()
      const [{ written }] =
        (await primarySql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), ${before}::pg_lsn)::float8 AS written`) as unknown as [
          { written: number },
        ]
      expect(written).toBeGreaterThan(1_000_000)

      const lagging = await until('the standby lag to show', async () => {
        const r = await api(`/databases/${ids.standby}/replication`)
        return r.replication_lag_bytes >= written ? r : undefined
      })
      expect(lagging.replication_lag_seconds).toBeGreaterThan(0)
      const history = (await api(`/databases/${ids.standby}/replication/history`)) as {
        replication_lag_bytes: number | null
      }[]
      expect(Math.max(...history.map((p) => p.replication_lag_bytes ?? 0))).toBeGreaterThanOrEqual(written)

      const onPrimary = await until('the idle slot to hold the WAL back', async () => {
        const r = await api(`/databases/${ids.primary}/replication`)
        const idle = r.slots?.find((s: { slot_name: string }) => s.slot_name === 'dbm_idle')
        return idle?.lag_bytes >= written ? r : undefined
      })
      expect(onPrimary).toMatchObject({ is_replica: false, replication_lag_bytes: null, upstream_host: null })
      expect(onPrimary.replicas).toMatchObject([{ application_name: 'dbm_replica', state: 'streaming' }])
      expect(onPrimary.slots.map((s: { slot_name: string; active: boolean }) => [s.slot_name, s.active])).toEqual([
        ['dbm_idle', false],
        ['dbm_standby', true],
      ])
      const slotHistory = (await api(`/databases/${ids.primary}/replication/slots/history`)) as {
        slot_name: string
        lag_bytes: number
      }[]
      expect(slotHistory.some((p) => p.slot_name === 'dbm_idle' && p.lag_bytes >= written)).toBe(true)
      expect(slotHistory.some((p) => p.slot_name === 'dbm_standby')).toBe(true)

      // Replay resumes: the current lag returns to zero while the history keeps the peak.
      await replicaSql`SELECT pg_wal_replay_resume()`
      await until('the standby to catch up', async () => {
        const r = await api(`/databases/${ids.standby}/replication`)
        return r.replication_lag_bytes === 0 ? r : undefined
      })
      const after = (await api(`/databases/${ids.standby}/replication/history`)) as {
        replication_lag_bytes: number | null
      }[]
      expect(Math.max(...after.map((p) => p.replication_lag_bytes ?? 0))).toBeGreaterThanOrEqual(written)
      // The WAL the filler wrote also shows in the primary's WAL statistics.
      await until('the WAL statistics to count the filler', async () => {
        const wal = (await api(`/databases/${ids.primary}/wal-stats/timeseries`)) as { wal_bytes: number | null }[]
        return wal.reduce((sum, p) => sum + (p.wal_bytes ?? 0), 0) >= written ? true : undefined
      })
    } finally {
      await agent.stop()
    }
  })
})
