// pg_replication_lag on a real PostgreSQL 17 primary with a streaming hot standby (test/support/replica.ts),
// each watched by the real agent pushing to its own dbm server (each with its own thresholds). With replay paused on the standby and WAL written on the primary,
// the standby reports the WAL it has not replayed and the primary the replica's replay lag; when replay
// resumes, both findings go.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import type { Deps } from '../../src/server/context.ts'
import { type DoctorRig, watchDatabase } from '../support/doctor.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { type Standby, startStandby } from '../support/replica.ts'
import { until as waitUntil } from '../support/wait.ts'

/** Polls through errors: the standby refuses connections while it starts. */
const until = <T>(what: string, probe: () => Promise<T | undefined>) =>
  waitUntil(what, probe, { ignoreErrors: true, timeoutMs: 25_000 })

const MB = 1024 ** 2

/** The real agent running only the replication collector on `dsn`, pushing to a dbm server of its own. */
const watchReplication = (dsn: string, thresholds: Deps['doctorThresholds']) =>
  watchDatabase(dsn, { thresholds, entry: '    enabled_collectors: [replication]\n' })

let primary: PostgresServer
let primarySql: postgres.Sql
let replicaSql: postgres.Sql
let standby: Standby | undefined
const watchers: DoctorRig[] = []

beforeAll(async () => {
  // A primary of this file's own: replication slots and standbys are server-wide.
  primary = await startPostgres(17)
  primarySql = postgres(primary.url(), { max: 2, onnotice: () => {} })
  await primarySql`SELECT pg_create_physical_replication_slot('dbm_doctor_standby')`
  // Replies to the primary every second (10 s by default): the primary sees the replay lag grow while replay
  // is paused, and its end once replay resumes, a second after the standby has them.
  standby = await startStandby(primary, primarySql, 'dbm_doctor_standby', ['-c', 'wal_receiver_status_interval=1'])
  replicaSql = postgres(standby.url, { max: 1, onnotice: () => {} })
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
  const onReplica = await watchReplication(standby!.url, {
    pg_replication_lag: { warning_bytes: 64 * 1024, critical_bytes: MB, warning_seconds: 3600, critical_seconds: 7200 },
  })
  watchers.push(onReplica)
  const onPrimary = await watchReplication(primary.url(), {
    pg_replication_lag: {
      warning_seconds: 1,
      critical_seconds: 3600,
      warning_bytes: 1024 * MB,
      critical_bytes: 2048 * MB,
    },
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
  const [{ before }] = (await primarySql`SELECT pg_current_wal_lsn()::text AS before`) as unknown as [
    { before: string },
  ]
  await primarySql`CREATE TABLE filler AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g`
  const [{ written }] =
    (await primarySql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), ${before}::pg_lsn)::float8 AS written`) as unknown as [
      { written: number },
    ]
  expect(written).toBeGreaterThan(MB)
  await until('the standby to receive it', async () => {
    const [row] =
      await replicaSql`SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::float8 AS waiting`
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
  expect(onStandby.how_to_fix).toContain(
    "SELECT pg_wal_replay_resume();   -- on the replica, when pg_get_wal_replay_pause_state() says 'paused'",
  )

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
