// The doctor names the cause of dead rows VACUUM cannot remove, on real PostgreSQL 17 watched by the
// real agent: the issue's case (a session idle in a REPEATABLE READ transaction while another deletes
// nearly every row of a table and VACUUM runs), then a prepared transaction and a standby's
// hot_standby_feedback, through a physical replication slot and through a WAL sender without one, on a
// server of this file's own. Each time
// the dead-row finding names the holder as PostgreSQL itself reports it (pg_stat_activity,
// pg_prepared_xacts, pg_replication_slots), its fix ends exactly that holder when run as written
// (hostile user and application names, statement text and gid included, through sql-text.ts), and the
// findings go once the holder has gone and VACUUM has run.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { pgString } from '../../src/server/doctor/sql-text.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type PostgresDoctorRig, postgresDoctorRig, workload } from '../support/doctor.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { type Standby, startStandby } from '../support/replica.ts'
import { createApiKey } from '../support/server.ts'
import { until } from '../support/wait.ts'

let rig: PostgresDoctorRig
const clients: postgres.Sql[] = []

beforeAll(async () => {
  rig = await postgresDoctorRig(17)
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

/** A table of 20,000 rows, made in a session that flushes its statistics (a later flush would count them again after a VACUUM). */
async function createTable(dsn: string, table: string, options = '') {
  await workload(dsn, async (s) => {
    await s.unsafe(`CREATE TABLE ${table} (id int PRIMARY KEY, note text, v int) ${options}`)
    await s.unsafe(`INSERT INTO ${table} SELECT g, 'n' || g, 0 FROM generate_series(1, 20000) g`)
  })
}

/** Then all but 10 deleted in a session that flushes its statistics, then VACUUM: 19,990 dead rows it cannot remove while the horizon is held. */
async function deleteAndVacuum(dsn: string, sql: postgres.Sql, table: string, beforeVacuum?: () => Promise<void>) {
  await workload(dsn, (s) => s.unsafe(`DELETE FROM ${table} WHERE id > 10`))
  await beforeVacuum?.()
  await sql.unsafe(`VACUUM ${table}`)
  const [stats] = await sql.unsafe<{ n_live_tup: number; n_dead_tup: number; last_vacuum: Date }[]>(
    `SELECT n_live_tup::int, n_dead_tup::int, last_vacuum FROM pg_stat_user_tables WHERE relid = '${table}'::regclass`,
  )
  return stats!
}

/** What the activity collector and the doctor read of a session, from pg_stat_activity itself. */
async function activityOf(sql: postgres.Sql, pid: number) {
  const [row] = await sql<
    { usename: string; application_name: string; client_addr: string; state: string; query: string }[]
  >`
    SELECT usename, application_name, host(client_addr) AS client_addr, state, query FROM pg_stat_activity WHERE pid = ${pid}`
  return row!
}

const short = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

describe("the issue's case: a session idle in a REPEATABLE READ transaction holds back VACUUM", () => {
  // Hostile names: quotes, a comment end, a backslash, a line break and non-ASCII letters.
  const role = `dbm "report" o'hara */ \\ ü\nnext`
  const application = `nightly'"*/ \\ export -- ü`
  const statement = `SELECT count(*) AS "it's */ ü" FROM orders\n  WHERE note <> E'\\\\' -- end`

  test('the dead-row finding names the pid, user, application and state as pg_stat_activity has them; its fix ends that session; then VACUUM cleans', async () => {
    // Autovacuum off for it, so that the first VACUUM is the test's own.
    await createTable(rig.dsn, 'orders', 'WITH (autovacuum_enabled = false)')
    await rig.sql.unsafe(`CREATE ROLE "${role.replaceAll('"', '""')}" LOGIN PASSWORD 'dbm-test'`)
    await rig.sql.unsafe(`GRANT SELECT ON orders TO "${role.replaceAll('"', '""')}"`)
    const url = new URL(rig.dsn)
    const asRole = () => {
      const sql = postgres({
        host: url.hostname,
        port: Number(url.port),
        database: url.pathname.slice(1),
        username: role,
        password: 'dbm-test',
        max: 1,
        onnotice: () => {},
        connection: { application_name: application },
      })
      clients.push(sql)
      return sql
    }
    const holder = asRole()
    await holder`BEGIN ISOLATION LEVEL REPEATABLE READ`
    await holder.unsafe(statement)
    const pid = (await holder<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
    // The statement above is the session's last one for pg_stat_activity: run it again last.
    await holder.unsafe(statement)
    await rig.cycle()

    const stats = await deleteAndVacuum(rig.dsn, rig.sql, 'orders', async () => {
      // Before any VACUUM ran into the holder: the usual finding, with the holder named as the likely cause.
      await rig.cycle()
      const [before] = await rig.findings('pg_dead_tuples')
      expect(before).toMatchObject({
        key: 'pg_dead_tuples:public.orders',
        title: 'Many dead rows in public.orders',
        metrics: { n_dead_tup: 19_990 },
      })
      expect(before.detail).toContain(`pid ${pid} (user `)
      expect(before.detail).toContain(`has held back the xmin horizon since `)
      expect(before.detail).toContain(
        `no VACUUM can remove the rows deleted or updated after that until pid ${pid} ends its transaction.`,
      )
      expect(before.how_to_fix[0]).toBe('VACUUM (ANALYZE, VERBOSE) public.orders;')
    })
    expect(stats).toMatchObject({ n_live_tup: 10, n_dead_tup: 19_990 })
    await rig.cycle()
    const session = await activityOf(rig.sql, pid)
    expect(session).toMatchObject({ usename: role, state: 'idle in transaction', query: statement })

    const [finding, ...others] = await rig.findings('pg_dead_tuples')
    expect(others).toEqual([])
    expect(finding).toMatchObject({
      key: 'pg_dead_tuples:public.orders',
      severity: 'critical',
      title: `Vacuum cannot clean public.orders until pid ${pid} ends its transaction`,
      objects: ['public.orders', `pid ${pid}`],
      metrics: {
        n_dead_tup: 19_990,
        n_live_tup: 10,
        last_vacuum: stats.last_vacuum.toISOString(),
        held_by: `pid ${pid}`,
        holder_kind: 'backend',
      },
    })
    expect(finding.detail).toStartWith(
      `public.orders has 19,990 dead rows against 10 live ones (${((19_990 / 20_000) * 100).toFixed(1)} % dead)`,
    )
    expect(finding.detail).toContain(
      `by a manual VACUUM (autovacuum never ran on it), when pid ${pid} already held back the xmin horizon, so that VACUUM could not remove them`,
    )
    expect(finding.detail).toContain(
      `The holder: pid ${pid} (user ${session.usename}, application "${session.application_name}", from ${session.client_addr}, ${session.state}; transaction open for `,
    )
    expect(finding.detail).toContain(`; last statement: ${short(session.query)})`)
    expect(Date.parse(finding.as_of)).toBeGreaterThanOrEqual(stats.last_vacuum.getTime())

    // The fix: one line per command, the names as string constants, ending exactly that session.
    const terminate = finding.how_to_fix[0] as string
    const vacuum = finding.how_to_fix[1] as string
    for (const command of finding.how_to_fix as string[]) expect(command).not.toMatch(/[\n\r\u2028]/)
    expect(terminate).toStartWith(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ${pid} AND abs(extract(epoch FROM backend_start - timestamptz '`,
    )
    expect(terminate).toContain(
      `')) < 0.001 AND usename = ${pgString(session.usename)} AND application_name = ${pgString(session.application_name)} AND abs(extract(epoch FROM xact_start - timestamptz '`,
    )
    expect(terminate).toEndWith(
      "')) < 0.001;   -- ends that session and rolls back its open transaction (its uncommitted work is lost: check with its owner first); returns no row if that session has already ended or its transaction has; run it as a superuser, a member of pg_read_all_stats or the session's own role (to others its start times are hidden, and it finds no row)",
    )
    expect(vacuum).toBe('VACUUM (ANALYZE, VERBOSE) public.orders;   -- once the holder has gone')

    // The cause raised as soon as it holds back dead rows, at their severity (the default thresholds wait an hour).
    const [cause] = await rig.findings('pg_xmin_horizon')
    expect(cause).toMatchObject({
      key: `pg_xmin_horizon:pid ${pid}`,
      severity: 'critical',
      metrics: { pid, held_tables: 1, held_dead_rows: 19_990 },
    })
    expect(cause.detail).toContain('It keeps VACUUM from removing 19,990 dead rows in public.orders.')
    expect(cause.how_to_fix).toEqual([terminate])

    // Once the holder has ended and a session of the same role and application has its pid (here: that
    // session's pid put in the command), the command returns no row and leaves it and its transaction be.
    const newcomer = asRole()
    await newcomer`BEGIN`
    await newcomer`SELECT 1 AS newcomer`
    const newPid = (await newcomer<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
    const identity = async () =>
      (
        await rig.sql`SELECT usename, application_name, backend_start, xact_start FROM pg_stat_activity WHERE pid = ${newPid}`
      )[0]
    const before = await identity()
    expect(before).toMatchObject({ usename: session.usename, application_name: session.application_name })
    const reused = terminate.replace(`pid = ${pid} AND`, `pid = ${newPid} AND`)
    expect(reused).not.toBe(terminate)
    expect(Array.from(await rig.sql.unsafe(reused)) as unknown[]).toEqual([])
    expect(await identity()).toEqual(before)
    await newcomer`ROLLBACK`

    expect(Array.from(await rig.sql.unsafe(terminate)) as unknown[]).toEqual([{ pg_terminate_backend: true }])
    await until('the holder to end', async () =>
      (await rig.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length === 0 ? true : undefined,
    )
    await rig.sql.unsafe(vacuum.split(';')[0]!)
    await rig.cycle()
    expect(await rig.findings('pg_dead_tuples')).toEqual([])
    expect(await rig.findings('pg_xmin_horizon')).toEqual([])
  })
})

describe("a prepared transaction and a standby's feedback (through a slot, through a WAL sender) hold back VACUUM (a server of their own)", () => {
  let own: PostgresServer
  let dsn: string
  let sql: postgres.Sql
  let agent: Agent
  let apiKey: string
  let dbId: string
  let dir: string
  let standby: Standby | undefined

  beforeAll(async () => {
    own = await startPostgres(17, ['-c', 'max_prepared_transactions=2'])
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
    dir = mkdtempSync(join(tmpdir(), 'dbm-doctor-causes-'))
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
    await standby?.stop().catch(() => {})
    await agent?.stop()
    await own?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const findings = async (rule: string) => {
    await agent.cycleAll()
    const res = await rig.server.call('GET', `/api/v1/databases/${dbId}/doctor`, { apiKey })
    return (res.body.top_issues as any[]).filter((f) => f.rule === rule)
  }

  test('a prepared transaction with a hostile gid: named with its owner; ROLLBACK PREPARED from the fix, run as written, ends it', async () => {
    const gid = `dbm'tx */ \\ ü\n\u2028end`
    await createTable(dsn, 'ledger')
    const twoPhase = connect(dsn)
    await twoPhase`BEGIN`
    await twoPhase`UPDATE ledger SET v = 1 WHERE id = 1`
    await twoPhase.unsafe(`PREPARE TRANSACTION ${pgString(gid)}`)
    const stats = await deleteAndVacuum(dsn, sql, 'ledger')
    expect(stats).toMatchObject({ n_live_tup: 10, n_dead_tup: 19_990 })
    const [prepared] = await sql<{ gid: string; owner: string }[]>`SELECT gid, owner FROM pg_prepared_xacts`
    expect(prepared!.gid).toBe(gid)

    const [finding, ...others] = await findings('pg_dead_tuples')
    expect(others).toEqual([])
    expect(finding).toMatchObject({
      key: 'pg_dead_tuples:public.ledger',
      severity: 'critical',
      title: `Vacuum cannot clean public.ledger until prepared transaction ${pgString(gid)} is committed or rolled back`,
      objects: ['public.ledger', `prepared transaction ${gid}`],
      metrics: { n_dead_tup: 19_990, held_by: `prepared transaction ${gid}`, holder_kind: 'prepared' },
    })
    expect(finding.detail).toContain(
      `The holder: prepared transaction ${pgString(gid)} (PREPARE TRANSACTION, two-phase commit, owner ${prepared!.owner}, prepared `,
    )
    const rollback = finding.how_to_fix[0] as string
    expect(rollback).toBe(
      `ROLLBACK PREPARED ${pgString(gid)};   -- in this database; write COMMIT PREPARED instead to keep its changes`,
    )
    expect(rollback).not.toMatch(/[\n\r\u2028]/)
    const [cause] = await findings('pg_xmin_horizon')
    expect(cause).toMatchObject({
      key: 'pg_xmin_horizon:prepared transactions',
      severity: 'critical',
      how_to_fix: [rollback],
      metrics: { held_tables: 1 },
    })

    await sql.unsafe(rollback)
    expect((await sql`SELECT gid FROM pg_prepared_xacts`).length).toBe(0)
    await sql`VACUUM ledger`
    expect(await findings('pg_dead_tuples')).toEqual([])
    expect(await findings('pg_xmin_horizon')).toEqual([])
  })

  test("a standby's query through a physical slot (hot_standby_feedback): the active slot named; once the standby is gone, dropping the slot (the fix) frees VACUUM", async () => {
    await createTable(dsn, 'events')
    await sql`SELECT pg_create_physical_replication_slot('dbm_standby')`
    standby = await startStandby(own, sql, 'dbm_standby', [
      // A hot standby needs at least the primary's max_prepared_transactions.
      ...['-c', 'max_prepared_transactions=2', '-c', 'hot_standby_feedback=on', '-c', 'wal_receiver_status_interval=1'],
    ])
    const dbName = new URL(dsn).pathname.slice(1)
    const reader = connect(standby.url.replace(/\/postgres$/, `/${dbName}`))
    await until(
      'the table on the standby',
      async () => ((await reader`SELECT count(*)::int AS n FROM events`)[0]!.n === 20000 ? true : undefined),
      { ignoreErrors: true },
    )
    await reader`BEGIN ISOLATION LEVEL REPEATABLE READ`
    await reader`SELECT count(*) FROM events`
    const [{ xmin }] =
      (await reader`SELECT backend_xmin::text AS xmin FROM pg_stat_activity WHERE pid = pg_backend_pid()`) as unknown as [
        { xmin: string },
      ]
    await until("the slot to hold the standby query's xmin", async () => {
      const [slot] = await sql`SELECT xmin::text AS xmin FROM pg_replication_slots WHERE slot_name = 'dbm_standby'`
      return slot?.xmin === xmin ? true : undefined
    })
    // A cycle sees the slot's xmin before the VACUUM: the agent's first sight of it is when it began holding at the latest.
    await agent.cycleAll()
    const stats = await deleteAndVacuum(dsn, sql, 'events')
    expect(stats).toMatchObject({ n_live_tup: 10, n_dead_tup: 19_990 })

    let [finding] = await findings('pg_dead_tuples')
    expect(finding).toMatchObject({
      key: 'pg_dead_tuples:public.events',
      title:
        'Vacuum cannot clean public.events until replication slot "dbm_standby" moves on (its standby\'s oldest query ends)',
      metrics: { n_dead_tup: 19_990, held_by: 'slot dbm_standby', holder_kind: 'slot' },
    })
    const [slot] = await sql<
      { active_pid: number; xmin_age: number }[]
    >`SELECT active_pid, age(xmin) AS xmin_age FROM pg_replication_slots WHERE slot_name = 'dbm_standby'`
    expect(finding.detail).toContain(
      `The holder: physical slot "dbm_standby" (active, WAL sender pid ${slot!.active_pid}; xmin `,
    )
    expect(finding.how_to_fix[0]).toBe(
      'ALTER SYSTEM SET hot_standby_feedback = off; SELECT pg_reload_conf();   -- on the standby, if its queries may be cancelled instead',
    )

    // The standby goes away for good: its slot keeps the xmin it last sent.
    await reader.end({ timeout: 1 }).catch(() => {})
    await standby.stop()
    standby = undefined
    await until('the slot to be inactive', async () =>
      (await sql`SELECT active FROM pg_replication_slots WHERE slot_name = 'dbm_standby'`)[0]?.active === false
        ? true
        : undefined,
    )
    const [kept] = await sql<
      { xmin: string | null }[]
    >`SELECT xmin::text AS xmin FROM pg_replication_slots WHERE slot_name = 'dbm_standby'`
    expect(kept!.xmin).toBe(xmin)
    await sql`VACUUM events`
    ;[finding] = await findings('pg_dead_tuples')
    expect(finding).toMatchObject({
      title:
        'Vacuum cannot clean public.events until replication slot "dbm_standby" is dropped or its consumer comes back',
    })
    expect(finding.how_to_fix[0]).toBe(
      "SELECT pg_drop_replication_slot('dbm_standby');   -- only once its consumer is gone for good: a standby or subscriber using it must then be rebuilt",
    )
    await sql.unsafe(finding.how_to_fix[0])
    await sql`VACUUM events`
    expect(await findings('pg_dead_tuples')).toEqual([])
    expect(await findings('pg_xmin_horizon')).toEqual([])
  }, 120_000)

  test("a standby's query held by hot_standby_feedback without a slot: the WAL sender's backend_xmin, the standby named; the standby gone, VACUUM cleans", async () => {
    await createTable(dsn, 'feeds')
    standby = await startStandby(own, sql, undefined, [
      '-c',
      'max_prepared_transactions=2',
      '-c',
      'hot_standby_feedback=on',
      '-c',
      'wal_receiver_status_interval=1',
    ])
    const dbName = new URL(dsn).pathname.slice(1)
    const reader = connect(standby.url.replace(/\/postgres$/, `/${dbName}`))
    await until(
      'the table on the standby',
      async () => ((await reader`SELECT count(*)::int AS n FROM feeds`)[0]!.n === 20000 ? true : undefined),
      { ignoreErrors: true },
    )
    await reader`BEGIN ISOLATION LEVEL REPEATABLE READ`
    await reader`SELECT count(*) FROM feeds`
    const [{ xmin }] =
      (await reader`SELECT backend_xmin::text AS xmin FROM pg_stat_activity WHERE pid = pg_backend_pid()`) as unknown as [
        { xmin: string },
      ]
    let sender: { pid: number; application_name: string; client_addr: string } | undefined
    await until("the WAL sender to hold the standby query's xmin", async () => {
      const [row] = await sql<{ pid: number; application_name: string; client_addr: string; xmin: string }[]>`
        SELECT pid, application_name, host(client_addr) AS client_addr, backend_xmin::text AS xmin FROM pg_stat_replication`
      if (row?.xmin !== xmin) return undefined
      sender = row
      return true
    })
    await agent.cycleAll()
    const stats = await deleteAndVacuum(dsn, sql, 'feeds')
    expect(stats).toMatchObject({ n_live_tup: 10, n_dead_tup: 19_990 })

    const [finding] = await findings('pg_dead_tuples')
    expect(finding).toMatchObject({
      key: 'pg_dead_tuples:public.feeds',
      title: `Vacuum cannot clean public.feeds until the standby behind WAL sender pid ${sender!.pid} finishes its oldest query`,
      metrics: { n_dead_tup: 19_990, held_by: `pid ${sender!.pid}`, holder_kind: 'walsender' },
    })
    expect(finding.detail).toContain(
      `The holder: WAL sender pid ${sender!.pid} (application "${sender!.application_name}" from ${sender!.client_addr}), relaying the hot_standby_feedback of a standby`,
    )
    expect(finding.how_to_fix[0]).toStartWith('SELECT pid, now() - xact_start AS transaction_age')
    const [cause] = await findings('pg_xmin_horizon')
    expect(cause).toMatchObject({
      key: `pg_xmin_horizon:pid ${sender!.pid}`,
      severity: 'critical',
      title: expect.stringMatching(/^A standby's feedback holds back cleanup: /),
    })

    await reader.end({ timeout: 1 }).catch(() => {})
    await standby.stop()
    standby = undefined
    await until('the WAL sender to end', async () =>
      (await sql`SELECT 1 FROM pg_stat_replication`).length === 0 ? true : undefined,
    )
    await sql`VACUUM feeds`
    expect(await findings('pg_dead_tuples')).toEqual([])
    expect(await findings('pg_xmin_horizon')).toEqual([])
  }, 120_000)
})
