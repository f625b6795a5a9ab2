// Wraparound and the xmin horizon on real PostgreSQL 17 servers watched by the real agent.
// Wraparound cannot be driven to hundreds of millions of XIDs in a test: the thresholds are lowered to
// a few hundred XIDs above the age the fresh database starts with (its datfrozenxid is template1's),
// and the rule still judges the real age(datfrozenxid) / mxid_age(datminmxid) the agent measured,
// raised by really assigning transaction IDs and creating multixacts, and cured by a real
// VACUUM (FREEZE). The xmin horizon is held by an open transaction with a transaction ID on the
// shared server, and by a prepared transaction and a logical replication slot on a server of this
// file's own (the shared one has max_prepared_transactions = 0 and wal_level = replica).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { type PostgresServer, sharedPostgres, startPostgres } from '../support/postgres.ts'
import { createApiKey } from '../support/server.ts'
import { until } from '../support/wait.ts'

let rig: PostgresDoctorRig
/** template1's ages when the file starts: the fresh database starts from them. */
let startXid: number
let startMxid: number
const clients: postgres.Sql[] = []

beforeAll(async () => {
  const admin = postgres((await sharedPostgres(17)).url('template1'), { max: 1, onnotice: () => {} })
  const [ages] = await admin<
    { xid: number; mxid: number }[]
  >`SELECT age(datfrozenxid) AS xid, mxid_age(datminmxid) AS mxid FROM pg_database WHERE datname = 'template1'`
  await admin.end()
  startXid = ages!.xid
  startMxid = ages!.mxid
  rig = await postgresDoctorRig(17, {
    thresholds: {
      pg_wraparound: {
        warning_age: startXid + 300,
        critical_age: startXid + 3000,
        warning_mxid_age: startMxid + 100,
        critical_mxid_age: startMxid + 100_000,
      },
      pg_xmin_horizon: { warning_xids: 100, critical_xids: 2000, warning_s: 1e9, critical_s: 1e9 },
      pg_blocked_sessions: { warning_wait_s: 1 },
    },
  })
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end({ timeout: 1 }).catch(() => {})))
  await rig?.stop()
})

function connect(dsn: string): postgres.Sql {
  const sql = postgres(dsn, { max: 1, onnotice: () => {} })
  clients.push(sql)
  return sql
}

/** Assigns `n` transaction IDs, one committed transaction each (asynchronous commits keep it fast). */
async function burnXids(sql: postgres.Sql, n: number) {
  await sql.unsafe(
    `DO $$ BEGIN PERFORM set_config('synchronous_commit', 'off', false); FOR i IN 1..${n} LOOP PERFORM txid_current(); COMMIT; END LOOP; END $$`,
  )
}

const ageOf = async (sql: postgres.Sql) =>
  (
    await sql<
      { xid: number; mxid: number }[]
    >`SELECT age(datfrozenxid) AS xid, mxid_age(datminmxid) AS mxid FROM pg_database WHERE datname = current_database()`
  )[0]!

/** Runs a cycle and returns the findings of `rule` with the database's real ages measured around it. */
async function measured(rule: string) {
  const before = await ageOf(rig.sql)
  await rig.cycle()
  const after = await ageOf(rig.sql)
  return { before, after, findings: await rig.findings(rule) }
}

/** Runs a psql `... \gexec` fix: the query, then each statement it returns. */
async function gexec(sql: postgres.Sql, fix: string) {
  const [query] = fix.split(' \\gexec')
  const statements = await sql.unsafe<{ format: string }[]>(query!)
  for (const { format } of statements) await sql.unsafe(format)
  return statements.map((s) => s.format)
}

describe("wraparound (thresholds lowered to template1's age + a few hundred; the age is the real one)", () => {
  test('XID age: warning, then critical as transaction IDs are assigned; multixacts likewise; VACUUM (FREEZE) cures both', async () => {
    await rig.cycle()
    expect(await rig.findings('pg_wraparound')).toEqual([])

    await burnXids(rig.sql, 400)
    let { before, after, findings } = await measured('pg_wraparound')
    expect(findings).toHaveLength(1)
    let [finding] = findings
    expect(finding).toMatchObject({
      key: 'pg_wraparound:xid',
      severity: 'warning',
      category: 'maintenance',
      metrics: { autovacuum_freeze_max_age: 200_000_000 },
    })
    expect(finding.metrics.age).toBeGreaterThanOrEqual(before.xid)
    expect(finding.metrics.age).toBeLessThanOrEqual(after.xid)
    expect(finding.metrics.age).toBeGreaterThanOrEqual(startXid + 400)
    expect(finding.metrics.used_ratio).toBe(Number((finding.metrics.age / 2 ** 31).toFixed(4)))
    expect(finding.detail).toContain(
      `The oldest unfrozen transaction ID in this database is ${finding.metrics.age.toLocaleString('en-US')} transaction IDs old`,
    )
    expect(finding.detail).toContain(
      'autovacuum_freeze_max_age is 200,000,000: anti-wraparound autovacuum has not started yet.',
    )
    expect(finding.how_to_fix[1]).toBe(
      `vacuumdb --all --freeze --min-xid-age=${startXid + 300} --jobs=4   # every database, the tables past ${(startXid + 300).toLocaleString('en-US')}`,
    )

    await burnXids(rig.sql, 3000)
    ;({ before, after, findings } = await measured('pg_wraparound'))
    ;[finding] = findings
    expect(finding).toMatchObject({ key: 'pg_wraparound:xid', severity: 'critical' })
    expect(finding.metrics.age).toBeGreaterThanOrEqual(Math.max(before.xid, startXid + 3400))
    expect(finding.metrics.age).toBeLessThanOrEqual(after.xid)

    // 200 multixacts: one transaction share-locks 200 rows, then another share-locks each of them from
    // a subtransaction of its own (same members would reuse one multixact).
    await rig.sql`CREATE TABLE shared_rows AS SELECT g AS id FROM generate_series(1, 200) g`
    const locker = connect(rig.dsn)
    await locker`BEGIN`
    await locker`SELECT id FROM shared_rows FOR SHARE`
    await rig.sql.unsafe(`DO $$ DECLARE r record; BEGIN
      FOR r IN SELECT id FROM shared_rows LOOP
        BEGIN PERFORM 1 FROM shared_rows WHERE id = r.id FOR SHARE; EXCEPTION WHEN others THEN RAISE; END;
      END LOOP; END $$`)
    await locker`COMMIT`
    ;({ before, after, findings } = await measured('pg_wraparound'))
    const mxid = findings.find((f) => f.key === 'pg_wraparound:mxid')
    expect(mxid).toMatchObject({
      severity: 'warning',
      title: expect.stringMatching(/^Multixact ID wraparound: 0 % of the ID space used$/),
      metrics: { autovacuum_multixact_freeze_max_age: 400_000_000 },
    })
    expect(mxid.metrics.age).toBeGreaterThanOrEqual(Math.max(before.mxid, startMxid + 200))
    expect(mxid.metrics.age).toBeLessThanOrEqual(after.mxid)

    // The fix: the oldest tables' VACUUM (FREEZE) statements run (\gexec) as they are; then the whole database.
    const ran = await gexec(rig.sql, finding.how_to_fix[0])
    expect(ran).toHaveLength(10)
    for (const statement of ran) expect(statement).toMatch(/^VACUUM \(FREEZE, VERBOSE\) \S+;$/)
    await rig.sql`VACUUM (FREEZE)`
    const frozen = await ageOf(rig.sql)
    expect(frozen.xid).toBeLessThan(startXid + 300)
    await rig.cycle()
    expect(await rig.findings('pg_wraparound')).toEqual([])
  })
})

describe('xmin horizon held by an open transaction', () => {
  test('the holder named by pid with its age in XIDs; critical past 2000; terminating it cures it', async () => {
    await rig.cycle()
    expect(await rig.findings('pg_xmin_horizon')).toEqual([])
    const holder = connect(rig.dsn)
    const pid = (await holder<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
    await holder`BEGIN`
    await holder`SELECT txid_current() AS holding_marker`
    await burnXids(rig.sql, 150)
    await rig.cycle()
    let [finding, ...others] = await rig.findings('pg_xmin_horizon')
    expect(others).toEqual([])
    expect(finding).toMatchObject({
      key: `pg_xmin_horizon:pid ${pid}`,
      severity: 'warning',
      category: 'maintenance',
      metrics: { pid },
    })
    expect(finding.metrics.xmin_age_xids).toBeGreaterThanOrEqual(151)
    expect(finding.metrics.xmin_age_xids).toBeLessThan(2000)
    expect(finding.metrics.transaction_age_s).toBeGreaterThanOrEqual(0)
    expect(finding.detail).toMatch(
      new RegExp(
        `belongs to pid ${pid} \\(user postgres, application "postgres\\.js", from 127\\.0\\.0\\.1, idle in transaction; transaction open for [0-9.]+ s; last statement: SELECT txid_current\\(\\) AS holding_marker\\)`,
      ),
    )
    expect(finding.detail).toContain(`${finding.metrics.xmin_age_xids.toLocaleString('en-US')} transactions old`)

    await burnXids(rig.sql, 2000)
    await rig.cycle()
    ;[finding] = await rig.findings('pg_xmin_horizon')
    expect(finding).toMatchObject({ key: `pg_xmin_horizon:pid ${pid}`, severity: 'critical' })
    expect(finding.metrics.xmin_age_xids).toBeGreaterThanOrEqual(2151)

    // The session is ended only while it is the one named (pid, session start, user, application, transaction start).
    expect(finding.how_to_fix).toHaveLength(1)
    const time = `timestamptz '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z'`
    expect(finding.how_to_fix[0]).toMatch(
      new RegExp(
        `^SELECT pg_terminate_backend\\(pid\\) FROM pg_stat_activity WHERE pid = ${pid} AND abs\\(extract\\(epoch FROM backend_start - ${time}\\)\\) < 0\\.001 AND usename = 'postgres' AND application_name = 'postgres\\.js' AND abs\\(extract\\(epoch FROM xact_start - ${time}\\)\\) < 0\\.001;   -- ends that session`,
      ),
    )
    expect(Array.from(await rig.sql.unsafe(finding.how_to_fix[0])) as unknown[]).toEqual([
      { pg_terminate_backend: true },
    ])
    await until('the holder to end', async () =>
      (await rig.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length === 0 ? true : undefined,
    )
    await rig.cycle()
    expect(await rig.findings('pg_xmin_horizon')).toEqual([])
  })
})

describe('wraparound held back by a transaction', () => {
  test('a transaction older than the warning age: the wraparound finding names it, VACUUM (FREEZE) cannot cure it; ending it (the fix) and freezing does', async () => {
    const holder = connect(rig.dsn)
    const pid = (await holder<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
    await holder`BEGIN`
    await holder`SELECT txid_current() AS wraparound_holder`
    await burnXids(rig.sql, startXid + 400)
    // Frozen as far as the horizon lets it: the database's age is now the holder's.
    await rig.sql`VACUUM (FREEZE)`
    const { before, after, findings } = await measured('pg_wraparound')
    const finding = findings.find((f) => f.key === 'pg_wraparound:xid')
    expect(finding).toMatchObject({
      severity: 'warning',
      objects: ['xid', `pid ${pid}`],
      metrics: { held_by: `pid ${pid}`, holder_kind: 'backend' },
    })
    expect(finding.metrics.age).toBeGreaterThanOrEqual(Math.max(before.xid, startXid + 400))
    expect(finding.metrics.age).toBeLessThanOrEqual(after.xid)
    expect(finding.metrics.holder_xmin_age).toBeGreaterThanOrEqual(startXid + 400)
    expect(finding.detail).toContain(
      `VACUUM (FREEZE) cannot freeze past the xmin horizon, which pid ${pid} (user postgres, application "postgres.js", from 127.0.0.1, idle in transaction; transaction open for `,
    )
    expect(finding.detail).toContain('last statement: SELECT txid_current() AS wraparound_holder)')
    expect(finding.how_to_fix[0]).toStartWith(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ${pid} AND abs(extract(epoch FROM backend_start - timestamptz '`,
    )
    expect(finding.how_to_fix[0]).toContain(
      `')) < 0.001 AND usename = 'postgres' AND application_name = 'postgres.js' AND abs(extract(epoch FROM xact_start - timestamptz '`,
    )

    expect(Array.from(await rig.sql.unsafe(finding.how_to_fix[0])) as unknown[]).toEqual([
      { pg_terminate_backend: true },
    ])
    await until('the holder to end', async () =>
      (await rig.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length === 0 ? true : undefined,
    )
    await rig.sql`VACUUM (FREEZE)`
    expect((await ageOf(rig.sql)).xid).toBeLessThan(startXid + 300)
    await rig.cycle()
    expect((await rig.findings('pg_wraparound')).filter((f) => f.key === 'pg_wraparound:xid')).toEqual([])
  })
})

describe('xmin horizon held by a prepared transaction and by a replication slot (a server of their own)', () => {
  let own: PostgresServer
  let dsn: string
  let sql: postgres.Sql
  let agent: Agent
  let apiKey: string
  let dbId: string
  let dir: string

  beforeAll(async () => {
    own = await startPostgres(17, ['-c', 'max_prepared_transactions=2', '-c', 'wal_level=logical'])
    dsn = await own.freshDatabase()
    sql = connect(dsn)
    apiKey = (await createApiKey(rig.server, rig.account, 'own server')).key
    const created = await rig.server.call('POST', '/api/v1/databases', {
      token: rig.account.token,
      body: { name: 'own', engine: 'postgres', host: '127.0.0.1' },
    })
    dbId = created.body.id
    await rig.server.call('PATCH', `/api/v1/databases/${dbId}`, {
      token: rig.account.token,
      body: { poll_interval_seconds: 3600 },
    })
    dir = mkdtempSync(join(tmpdir(), 'dbm-doctor-own-'))
    writeFileSync(
      join(dir, 'config.yaml'),
      `api:\n  endpoint: ${rig.server.base}\n  key: ${apiKey}\ndatabases:\n  - name: own\n    dsn: ${dsn}\n    poll_interval: 1h\n`,
    )
    agent = new Agent({
      configPath: join(dir, 'config.yaml'),
      bufferDir: dir,
      log: createLogger('error', () => {}),
      timings: { pingIntervalMs: 60_000 },
    })
    await agent.start()
    await until('the first batch', async () =>
      (await rig.server.call('GET', `/api/v1/databases/${dbId}`, { apiKey })).body.last_seen_at ? true : undefined,
    )
  })
  afterAll(async () => {
    await agent?.stop()
    await own?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const findings = async (rule: string) => {
    await agent.cycleAll()
    const res = await rig.server.call('GET', `/api/v1/databases/${dbId}/doctor`, { apiKey })
    return (res.body.top_issues as any[]).filter((f) => f.rule === rule)
  }

  test('a prepared transaction: its age in XIDs and time, the session it blocks (pid 0); ROLLBACK PREPARED from the fix cures both', async () => {
    expect(await findings('pg_xmin_horizon')).toEqual([])
    await sql`CREATE TABLE ledger (id int PRIMARY KEY, v int)`
    await sql`INSERT INTO ledger VALUES (1, 0)`
    const twoPhase = connect(dsn)
    await twoPhase`BEGIN`
    await twoPhase`UPDATE ledger SET v = 1 WHERE id = 1`
    await twoPhase`PREPARE TRANSACTION 'dbm_test_prepared'`
    const waiter = connect(dsn)
    const [{ pid: waiterPid }] = (await waiter`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }]
    const waiting = waiter`UPDATE ledger SET v = 2 WHERE id = 1`.catch((e: Error) => e)
    await burnXids(sql, 150)
    // Wall-clock time has to pass here, not a cycle: the prepared transaction a second old (its age is
    // reported in whole seconds) and the waiter a second in its lock wait (the blocked-sessions warning).
    // Both ages are read from the server's clock, as the agent reads them, so the wait ends when they are
    // reached however busy the machine is.
    await until(
      'the prepared transaction and the lock wait to last a second',
      async () => {
        const [ages] = await sql<{ prepared_s: number | null; waited_s: number | null }[]>`
        SELECT (SELECT extract(epoch FROM clock_timestamp() - prepared)::float8 FROM pg_prepared_xacts WHERE gid = 'dbm_test_prepared') AS prepared_s,
               (SELECT extract(epoch FROM clock_timestamp() - waitstart)::float8 FROM pg_locks WHERE pid = ${waiterPid} AND NOT granted) AS waited_s`
        return ages && (ages.prepared_s ?? 0) >= 1 && (ages.waited_s ?? 0) >= 1 ? true : undefined
      },
      { everyMs: 20 },
    )

    const [finding, ...others] = await findings('pg_xmin_horizon')
    expect(others).toEqual([])
    expect(finding).toMatchObject({
      key: 'pg_xmin_horizon:prepared transactions',
      severity: 'warning',
      title: expect.stringMatching(/^A prepared transaction holds back cleanup: \d+ transactions, \d/),
      metrics: { prepared_transactions: 1 },
    })
    expect(finding.metrics.xmin_age_xids).toBeGreaterThanOrEqual(151)
    expect(finding.metrics.prepared_age_s).toBeGreaterThanOrEqual(1)
    expect(finding.detail).toContain(
      "1 prepared transaction (PREPARE TRANSACTION, two-phase commit) is pending in this database; the oldest is prepared transaction 'dbm_test_prepared' (PREPARE TRANSACTION, two-phase commit, owner postgres, prepared ",
    )

    const [blocked] = await findings('pg_blocked_sessions')
    expect(blocked).toMatchObject({
      key: 'pg_blocked_sessions:prepared transaction',
      severity: 'warning',
      metrics: { root_pid: 0, blocked_sessions: 1 },
    })
    expect(blocked.detail).toStartWith('a prepared transaction (pid 0: two-phase commit left pending) blocks 1 session')

    expect(finding.how_to_fix).toEqual([
      "ROLLBACK PREPARED 'dbm_test_prepared';   -- in this database; write COMMIT PREPARED instead to keep its changes",
    ])
    await sql.unsafe(finding.how_to_fix[0])
    expect(await waiting).not.toBeInstanceOf(Error)
    expect(await findings('pg_xmin_horizon')).toEqual([])
    expect(await findings('pg_blocked_sessions')).toEqual([])
  })

  test('a logical replication slot: its catalog_xmin age, the slot named; dropping it (the fix) cures it', async () => {
    await sql`SELECT pg_create_logical_replication_slot('dbm_test_slot', 'pgoutput')`
    await burnXids(sql, 150)
    const [finding, ...others] = await findings('pg_xmin_horizon')
    expect(others).toEqual([])
    expect(finding).toMatchObject({
      key: 'pg_xmin_horizon:replication slots',
      severity: 'warning',
      objects: ['slot dbm_test_slot'],
      metrics: { slots: 1, inactive_slots: 1 },
    })
    expect(finding.metrics.xmin_age_xids).toBeGreaterThanOrEqual(150)
    const [{ datname }] = (await sql`SELECT current_database() AS datname`) as unknown as [{ datname: string }]
    expect(finding.detail).toContain(
      `the slots: logical slot "dbm_test_slot" (inactive, database ${datname}; catalog_xmin ${finding.metrics.xmin_age_xids} transactions old (the system catalogs only))`,
    )
    expect(finding.how_to_fix).toEqual([
      "SELECT pg_drop_replication_slot('dbm_test_slot');   -- only once its consumer is gone for good: a standby or subscriber using it must then be rebuilt",
    ])
    await sql.unsafe(finding.how_to_fix[0])
    expect(await findings('pg_xmin_horizon')).toEqual([])
  })
})
