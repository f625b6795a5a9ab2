// pg_replication_lag on a real PostgreSQL 17 primary with a streaming hot standby (made as in
// test/agent/replication-e2e.test.ts), each watched by the real agent pushing to its own dbm server
// (each with its own thresholds). With replay paused on the standby and WAL written on the primary,
// the standby reports the WAL it has not replayed and the primary the replica's replay lag; when replay
// resumes, both findings go.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import type { Deps } from '../../src/server/context.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type PostgresServer, freePort, startPostgres } from '../support/postgres.ts'
import { type TestServer, createApiKey, signup, startTestServer, verify } from '../support/server.ts'
import { until as waitUntil } from '../support/wait.ts'

/** Polls through errors: the standby refuses connections while it starts. */
const until = <T>(what: string, probe: () => Promise<T | undefined>) => waitUntil(what, probe, { ignoreErrors: true, timeoutMs: 25_000 })

const MB = 1024 ** 2

interface Watcher {
  server: TestServer
  agent: Agent
  cycle(): Promise<void>
  findings(rule: string): Promise<any[]>
  stop(): Promise<void>
}

/** The real agent watching `dsn` (cycles driven by the test) and pushing to a dbm server of its own. */
async function watch(dsn: string, thresholds: Deps['doctorThresholds']): Promise<Watcher> {
  const server = await startTestServer('sqlite', { doctorThresholds: thresholds })
  const account = await signup(server)
  await verify(server, account)
  const key = (await createApiKey(server, account, 'agent')).key
  const created = await server.call('POST', '/api/v1/databases', { token: account.token, body: { name: 'target', engine: 'postgres', host: '127.0.0.1' } })
  await server.call('PATCH', `/api/v1/databases/${created.body.id}`, { token: account.token, body: { poll_interval_seconds: 3600 } })
  const dir = mkdtempSync(join(tmpdir(), 'dbm-doctor-repl-'))
  const config = join(dir, 'config.yaml')
  writeFileSync(config, `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: target\n    dsn: ${dsn}\n    poll_interval: 1h\n    enabled_collectors: [replication]\n`)
  const agent = new Agent({ configPath: config, bufferDir: dir, log: createLogger('error', () => {}), timings: { pingIntervalMs: 60_000 } })
  await agent.start()
  const doctor = async () => (await server.call('GET', `/api/v1/databases/${created.body.id}/doctor`, { apiKey: key })).body
  await until('the first batch', async () => ((await server.call('GET', `/api/v1/databases/${created.body.id}`, { apiKey: key })).body.last_seen_at ? true : undefined))
  return {
    server,
    agent,
    cycle: () => agent.cycleAll(),
    findings: async (rule) => ((await doctor()).top_issues as any[]).filter((f) => f.rule === rule),
    async stop() {
      await agent.stop()
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * A hot standby of `server` streaming through the physical slot `slot`, from a copy of the data
 * directory taken between pg_backup_start and pg_backup_stop (the embedded packages ship no pg_basebackup).
 */
async function startStandby(server: PostgresServer, sql: postgres.Sql, slot: string): Promise<{ url: string; stop(): Promise<void> }> {
  const [{ data_directory }] = (await sql`SHOW data_directory`) as unknown as [{ data_directory: string }]
  const dir = mkdtempSync(join(tmpdir(), 'dbm-doctor-replica-'))
  const dataDir = join(dir, 'data')
  const backup = await sql.reserve()
  try {
    await backup`SELECT pg_backup_start('dbm-doctor', true)`
    const copy = Bun.spawnSync(['cp', '-a', data_directory, dataDir])
    if (copy.exitCode !== 0) throw new Error(`copying the data directory failed: ${copy.stderr}`)
    const [{ labelfile }] = (await backup`SELECT labelfile FROM pg_backup_stop(false)`) as unknown as [{ labelfile: string }]
    writeFileSync(join(dataDir, 'backup_label'), labelfile)
  } finally {
    backup.release()
  }
  rmSync(join(dataDir, 'postmaster.pid'), { force: true })
  rmSync(join(dataDir, 'postmaster.opts'), { force: true })
  rmSync(join(dataDir, 'pg_replslot'), { recursive: true, force: true })
  mkdirSync(join(dataDir, 'pg_replslot'), { mode: 0o700 })
  writeFileSync(join(dataDir, 'standby.signal'), '')
  appendFileSync(
    join(dataDir, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=127.0.0.1 port=${server.port} user=postgres password=dbm-test application_name=dbm_replica'\nprimary_slot_name = '${slot}'\n`,
  )
  Bun.spawnSync(['chown', '-R', 'postgres:postgres', dir])
  const port = await freePort()
  const { default: EmbeddedPostgres } = (await import('pg17')) as unknown as { default: new (o: object) => { start(): Promise<void>; stop(): Promise<void> } }
  const standby = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: 'dbm-test',
    persistent: false,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: () => {},
    onError: () => {},
  })
  // start() waits for "ready to accept connections"; a standby says "read-only connections".
  standby.start().catch(() => {})
  return {
    url: `postgres://postgres:dbm-test@127.0.0.1:${port}/postgres`,
    async stop() {
      await standby.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

let primary: PostgresServer
let primarySql: postgres.Sql
let replicaSql: postgres.Sql
let standby: { url: string; stop(): Promise<void> } | undefined
const watchers: Watcher[] = []

beforeAll(async () => {
  // A primary of this file's own: replication slots and standbys are server-wide.
  primary = await startPostgres(17)
  primarySql = postgres(primary.url(), { max: 2, onnotice: () => {} })
  await primarySql`SELECT pg_create_physical_replication_slot('dbm_doctor_standby')`
  standby = await startStandby(primary, primarySql, 'dbm_doctor_standby')
  replicaSql = postgres(standby.url, { max: 1, onnotice: () => {} })
  await until('the standby to stream', async () => {
    const [row] = await replicaSql`SELECT status FROM pg_stat_wal_receiver`
    return row?.status === 'streaming' ? row : undefined
  })
}, 60_000)

afterAll(async () => {
  for (const w of watchers) await w.stop()
  await replicaSql?.end({ timeout: 1 }).catch(() => {})
  await primarySql?.end({ timeout: 1 }).catch(() => {})
  await standby?.stop()
  await primary?.stop()
})

test('replay paused: the replica is critical by bytes, the primary warns by replay lag; replay resumed: both go', async () => {
  // The standby judged by bytes (critical from 1 MB), the primary by seconds (warning from 1 s).
  const onReplica = await watch(standby!.url, {
    pg_replication_lag: { warning_bytes: 64 * 1024, critical_bytes: MB, warning_seconds: 3600, critical_seconds: 7200 },
  })
  watchers.push(onReplica)
  const onPrimary = await watch(primary.url(), {
    pg_replication_lag: { warning_seconds: 1, critical_seconds: 3600, warning_bytes: 1024 * MB, critical_bytes: 2048 * MB },
  })
  watchers.push(onPrimary)
  await Promise.all([onReplica.cycle(), onPrimary.cycle()])
  expect(await onReplica.findings('pg_replication_lag')).toEqual([])
  expect(await onPrimary.findings('pg_replication_lag')).toEqual([])

  // One transaction replayed first (the lag in seconds counts from the last replayed one), then replay paused.
  await primarySql`CREATE TABLE replayed_marker (id int)`
  await until('the standby to replay it', async () => {
    const [row] = await replicaSql`SELECT to_regclass('replayed_marker') IS NOT NULL AS seen`
    return row?.seen ? true : undefined
  })
  await replicaSql`SELECT pg_wal_replay_pause()`
  await until('replay to pause', async () => {
    const [row] = await replicaSql`SELECT pg_get_wal_replay_pause_state() AS state`
    return row?.state === 'paused' ? true : undefined
  })
  const [{ before }] = (await primarySql`SELECT pg_current_wal_lsn()::text AS before`) as unknown as [{ before: string }]
  await primarySql`CREATE TABLE filler AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g`
  const [{ written }] = (await primarySql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), ${before}::pg_lsn)::float8 AS written`) as unknown as [{ written: number }]
  expect(written).toBeGreaterThan(MB)
  await until('the standby to receive it', async () => {
    const [row] = await replicaSql`SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::float8 AS waiting`
    return row!.waiting >= written ? true : undefined
  })

  await onReplica.cycle()
  const [onStandby] = await onReplica.findings('pg_replication_lag')
  expect(onStandby).toMatchObject({
    key: 'pg_replication_lag',
    severity: 'critical',
    category: 'replication',
    title: 'This replica is behind its primary',
    objects: ['127.0.0.1'],
  })
  expect(onStandby.metrics.replication_lag_bytes).toBeGreaterThanOrEqual(written)
  expect(onStandby.metrics.replication_lag_seconds).toBeGreaterThan(0)
  expect(onStandby.detail).toContain('from 127.0.0.1 but not replayed yet')
  expect(onStandby.how_to_fix).toContain("SELECT pg_wal_replay_resume();   -- on the replica, when pg_get_wal_replay_pause_state() says 'paused'")

  // The primary measures the replica's replay lag from its replies; it grows while replay stays paused.
  const [onPrimaryFinding] = await until('the primary to see the replay lag', async () => {
    await onPrimary.cycle()
    const found = await onPrimary.findings('pg_replication_lag')
    return found.length > 0 ? found : undefined
  })
  expect(onPrimaryFinding).toMatchObject({
    key: 'pg_replication_lag:dbm_replica@127.0.0.1',
    severity: 'warning',
    title: 'A replica is behind this primary',
    objects: ['dbm_replica@127.0.0.1'],
  })
  expect(onPrimaryFinding.metrics.lag_bytes).toBeGreaterThanOrEqual(written)
  expect(onPrimaryFinding.metrics.replay_lag_seconds).toBeGreaterThanOrEqual(1)
  expect(onPrimaryFinding.metrics.replay_lag_seconds).toBeLessThan(3600)
  expect(onPrimaryFinding.detail).toContain('Replica dbm_replica@127.0.0.1 (streaming, async)')

  // Cured: replay resumes; the standby catches up and reports it to the primary.
  await replicaSql`SELECT pg_wal_replay_resume()`
  await until('the standby finding to go', async () => {
    await onReplica.cycle()
    return (await onReplica.findings('pg_replication_lag')).length === 0 ? true : undefined
  })
  await until('the primary finding to go', async () => {
    await onPrimary.cycle()
    return (await onPrimary.findings('pg_replication_lag')).length === 0 ? true : undefined
  })
}, 90_000)
