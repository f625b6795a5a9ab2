// The session rules on a real PostgreSQL 17 watched by the real agent: long-running statements
// (pg_sleep), sessions idle in a transaction (BEGIN; SELECT ... left open), blocked sessions (three
// sessions queueing for a row one transaction updated), and connections against max_connections
// (dozens of real connections). Thresholds are lowered to seconds and to a share of the server's
// max_connections so the tests take seconds; each finding is then cured with the finding's own fix
// command where it is one (pg_cancel_backend, pg_terminate_backend) and seen to go. Before that, each
// command naming a session is run with another live session's pid in its place (same role and
// application): what pasting it does once its session has ended and the pid belongs to a newcomer.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

let rig: PostgresDoctorRig
const clients: postgres.Sql[] = []

beforeAll(async () => {
  rig = await postgresDoctorRig(17, {
    thresholds: {
      pg_long_running_queries: { warning_s: 1, critical_s: 4, max_findings: 2 },
      pg_idle_in_transaction: { warning_s: 1, critical_s: 4 },
      pg_blocked_sessions: { warning_wait_s: 1, critical_wait_s: 600, critical_sessions: 3 },
      pg_connections: { warning_ratio: 0.25, critical_ratio: 0.4 },
    },
  })
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end({ timeout: 1 }).catch(() => {})))
  await rig?.stop()
})

/** A new session (one connection) to the rig's database, and its backend pid. */
async function session(): Promise<{ sql: postgres.Sql; pid: number }> {
  const sql = postgres(rig.dsn, { max: 1, onnotice: () => {} })
  clients.push(sql)
  const [row] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
  return { sql, pid: row!.pid }
}

async function waitForState(
  pid: number,
  predicate: (row: { state: string; wait_event_type: string | null }) => boolean,
) {
  await until(`pid ${pid} in the expected state`, async () => {
    const [row] = await rig.sql<
      { state: string; wait_event_type: string | null }[]
    >`SELECT state, wait_event_type FROM pg_stat_activity WHERE pid = ${pid}`
    return row && predicate(row) ? true : undefined
  })
}

/**
 * Waits until each pid's statement (`query_start`) or idle spell in its transaction (`state_change`) is at
 * least the given seconds old by the server's clock: the clock the agent measures durations with, read
 * later by the agent, so the ages it reports are at least these. These waits are for wall-clock time
 * (thresholds in seconds), not for a cycle; they end as soon as the ages are reached, and what a busy
 * machine adds falls into the margins left below each upper bound.
 */
async function waitForAges(since: 'query_start' | 'state_change', ages: [pid: number, seconds: number][]) {
  await until(
    `${ages.map(([pid, s]) => `pid ${pid} ${s} s past its ${since}`).join(', ')}`,
    async () => {
      const rows = await rig.sql<{ pid: number; query_s: number | null; state_s: number | null }[]>`
      SELECT pid, extract(epoch FROM clock_timestamp() - query_start)::float8 AS query_s, extract(epoch FROM clock_timestamp() - state_change)::float8 AS state_s
      FROM pg_stat_activity WHERE pid = ANY(${ages.map(([pid]) => pid)}::int[])`
      const age = (pid: number) => {
        const row = rows.find((r) => r.pid === pid)
        return (since === 'query_start' ? row?.query_s : row?.state_s) ?? 0
      }
      return ages.every(([pid, seconds]) => age(pid) >= seconds) ? true : undefined
    },
    { everyMs: 20 },
  )
}

/** The command with pid `to` in place of `from`: what it does once `from` has ended and another session got its pid. */
const onPid = (command: string, from: number, to: number) =>
  command.replace(new RegExp(`(pid = |_backend\\()${from}\\b`, 'g'), `$1${to}`)

const TIME = `'\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z'`
const within = (column: string) => `abs\\(extract\\(epoch FROM ${column} - timestamptz ${TIME}\\)\\) < 0\\.001`
/** The shape of a fix that acts on a session while it is still the one named (rig sessions: user postgres, application postgres.js). */
const guarded = (fn: string, pid: number, moment: 'xact_start' | 'query_start', comment: string) =>
  new RegExp(
    `^SELECT ${fn}\\(pid\\) FROM pg_stat_activity WHERE pid = ${pid} AND ${within('backend_start')} AND usename = 'postgres' AND application_name = 'postgres\\.js' AND ${within(moment)};   -- ${comment.replace(/[()]/g, '\\$&')}; returns no row if that session has already ended`,
  )

/** A session of the same role and application idle in a transaction, and what identifies it and its transaction now. */
async function bystander() {
  const s = await session()
  await s.sql`BEGIN`
  await s.sql`SELECT 1 AS bystander`
  const identity = async () =>
    (await rig.sql`SELECT backend_start, xact_start, state FROM pg_stat_activity WHERE pid = ${s.pid}`)[0]
  return { ...s, identity, before: await identity() }
}

const byKey = (findings: any[]) => Object.fromEntries(findings.map((f) => [f.key, f]))

test('long-running statements: warning past 1 s, critical past 4 s, the third counted in a summary; their cancel command cures them', async () => {
  await rig.cycle()
  expect(await rig.findings('pg_long_running_queries')).toEqual([])
  // The second starts 1.4 s after the first and the third just after the second, so the first is ~2.7 s
  // into its statement when the third passes 1 s: the first reports 3 s (2.5 s and up round to it) with
  // ~1.3 s to spare before 4 s (critical), and later the second is ~1.4 s short of 4 s when the first
  // passes it.
  // A statement as long in another database of the server: not this database's, never listed, never cancelled by its fixes.
  const elsewhere = postgres(await rig.pg.freshDatabase(), { max: 1, onnotice: () => {} })
  clients.push(elsewhere)
  const elsewherePid = (await elsewhere<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
  const elsewhereRunning = elsewhere`SELECT pg_sleep(60) AS elsewhere_marker`.catch((e: Error) => e)
  await waitForState(elsewherePid, (r) => r.state === 'active')
  const sleepers = []
  for (const gap of [1.4, 0.2, 0]) {
    const s = await session()
    const running = s.sql`SELECT pg_sleep(60) AS long_sleep_marker`.catch((e: Error) => e)
    await waitForState(s.pid, (r) => r.state === 'active')
    sleepers.push({ ...s, running })
    await waitForAges('query_start', [[s.pid, gap]])
  }
  const [first, second, third] = sleepers as [(typeof sleepers)[0], (typeof sleepers)[0], (typeof sleepers)[0]]
  // All three past 1 s, none past 4 s.
  await waitForAges('query_start', [
    [third.pid, 1],
    [first.pid, 2.6],
  ])
  await rig.cycle()
  let findings = byKey(await rig.findings('pg_long_running_queries'))
  expect(Object.keys(findings).sort()).toEqual(
    [
      'pg_long_running_queries',
      `pg_long_running_queries:pid ${first.pid}`,
      `pg_long_running_queries:pid ${second.pid}`,
    ].sort(),
  )
  const named = findings[`pg_long_running_queries:pid ${first.pid}`]
  expect(named).toMatchObject({
    severity: 'warning',
    category: 'performance',
    objects: [`pid ${first.pid}`],
    metrics: { pid: first.pid },
  })
  expect(named.metrics.running_s).toBeGreaterThanOrEqual(3)
  expect(named.metrics.running_s).toBeLessThanOrEqual(4)
  expect(named.detail).toContain(`pid ${first.pid} (user postgres`)
  expect(named.detail).toContain('SELECT pg_sleep(60) AS long_sleep_marker')
  expect(named.how_to_fix[0]).toMatch(
    guarded(
      'pg_cancel_backend',
      first.pid,
      'query_start',
      'cancels the statement (pg_terminate_backend in place of pg_cancel_backend also ends the session)',
    ),
  )
  expect(named.how_to_fix[1]).toStartWith("ALTER ROLE postgres SET statement_timeout = '1min';")
  expect(findings[`pg_long_running_queries:pid ${second.pid}`]).toMatchObject({ severity: 'warning' })
  // Over the cap of 2: the third is counted in the summary finding.
  expect(findings.pg_long_running_queries).toMatchObject({
    severity: 'warning',
    title: '1 more long-running statements',
    objects: [`pid ${third.pid}`],
    metrics: { statements: 1 },
  })

  // Past 4 s the first is critical; the second (~2.6 s) is still a warning.
  await waitForAges('query_start', [[first.pid, 4]])
  await rig.cycle()
  findings = byKey(await rig.findings('pg_long_running_queries'))
  // The title names the session (pid, user, application; pg_sleep holds no table): the three read apart.
  expect(findings[`pg_long_running_queries:pid ${first.pid}`]).toMatchObject({
    severity: 'critical',
    title: expect.stringMatching(
      new RegExp(`^Statement running for 4\\.\\d s: pid ${first.pid}, user postgres, application "postgres\\.js"$`),
    ),
  })
  expect(findings[`pg_long_running_queries:pid ${second.pid}`].title).toEndWith(
    `: pid ${second.pid}, user postgres, application "postgres.js"`,
  )
  expect(findings[`pg_long_running_queries:pid ${second.pid}`]).toMatchObject({ severity: 'warning' })
  expect((await rig.api('/doctor')).status).toBe('unhealthy')

  // The first's cancel on the second's pid (the same role and application, running the same statement):
  // no row, and the second's statement runs on; as given, it cancels the first's statement.
  const cancel = findings[`pg_long_running_queries:pid ${first.pid}`].how_to_fix[0] as string
  const statementOf = async (pid: number) =>
    (await rig.sql`SELECT state, query_start FROM pg_stat_activity WHERE pid = ${pid}`)[0]
  const secondBefore = await statementOf(second.pid)
  expect(Array.from(await rig.sql.unsafe(onPid(cancel, first.pid, second.pid))) as unknown[]).toEqual([])
  expect(Array.from(await rig.sql.unsafe(cancel)) as unknown[]).toEqual([{ pg_cancel_backend: true }])
  expect(String(await first.running)).toContain('canceling statement due to user request')
  expect(await statementOf(second.pid)).toEqual({ ...secondBefore, state: 'active' })

  // The summary's fix cancels every statement past the threshold (the first's already cancelled).
  await rig.sql.unsafe(findings.pg_long_running_queries.how_to_fix[0])
  for (const s of sleepers) expect(String(await s.running)).toContain('canceling statement due to user request')
  const [other] =
    await rig.sql`SELECT state, now() - query_start > interval '4 seconds' AS long FROM pg_stat_activity WHERE pid = ${elsewherePid}`
  expect(other).toEqual({ state: 'active', long: true })
  await rig.sql`SELECT pg_cancel_backend(${elsewherePid})`
  expect(String(await elsewhereRunning)).toContain('canceling statement due to user request')
  await rig.cycle()
  expect(await rig.findings('pg_long_running_queries')).toEqual([])
})

test('idle in transaction: the session, its idle time, transaction age and locks; critical past 4 s; pg_terminate_backend cures it', async () => {
  await rig.sql`CREATE TABLE orders (id int PRIMARY KEY)`
  const s = await session()
  await s.sql`BEGIN`
  await s.sql`SELECT count(*) FROM orders`
  // Idle past 1 s (a warning); idle_s must then read under 4, leaving ~2.5 s of margin.
  await waitForAges('state_change', [[s.pid, 1]])
  await rig.cycle()
  let [finding, ...others] = await rig.findings('pg_idle_in_transaction')
  expect(others).toEqual([])
  expect(finding).toMatchObject({
    key: `pg_idle_in_transaction:pid ${s.pid}`,
    severity: 'warning',
    category: 'reliability',
    objects: [`pid ${s.pid}`],
    metrics: { pid: s.pid, sessions_blocked: 0 },
  })
  expect(finding.metrics.idle_s).toBeGreaterThanOrEqual(1)
  expect(finding.metrics.idle_s).toBeLessThan(4)
  expect(finding.metrics.transaction_age_s).toBeGreaterThanOrEqual(1)
  // The AccessShareLock on orders, held until the transaction ends.
  expect(finding.metrics.locks_held).toBeGreaterThanOrEqual(1)
  expect(finding.detail).toContain('has sat idle inside a transaction')
  expect(finding.detail).toContain('Its last statement: SELECT count(*) FROM orders')
  expect(finding.how_to_fix[0]).toMatch(
    guarded('pg_terminate_backend', s.pid, 'xact_start', 'rolls back its transaction and ends the session'),
  )
  expect(finding.how_to_fix.slice(1)).toEqual([
    "ALTER ROLE postgres SET idle_in_transaction_session_timeout = '1min';   -- the role's new sessions",
    "ALTER SYSTEM SET idle_in_transaction_session_timeout = '1min'; SELECT pg_reload_conf();   -- server-wide default",
  ])

  await waitForAges('state_change', [[s.pid, 4]])
  await rig.cycle()
  ;[finding] = await rig.findings('pg_idle_in_transaction')
  expect(finding).toMatchObject({ key: `pg_idle_in_transaction:pid ${s.pid}`, severity: 'critical' })

  // On the pid of another session of the same role and application idle in a transaction: no row, and
  // it keeps its session and transaction. As given, it ends the session named.
  const other = await bystander()
  expect(Array.from(await rig.sql.unsafe(onPid(finding.how_to_fix[0], s.pid, other.pid))) as unknown[]).toEqual([])
  expect(Array.from(await rig.sql.unsafe(finding.how_to_fix[0])) as unknown[]).toEqual([{ pg_terminate_backend: true }])
  await until('the session to end', async () =>
    (await rig.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${s.pid}`).length === 0 ? true : undefined,
  )
  expect(await other.identity()).toEqual(other.before)
  await other.sql`ROLLBACK`
  await rig.cycle()
  expect(await rig.findings('pg_idle_in_transaction')).toEqual([])
})

test('blocked sessions: the root blocker named with the sessions queued behind it; 3 queued is critical; terminating the root cures it', async () => {
  await rig.sql`CREATE TABLE accounts (id int PRIMARY KEY, balance int)`
  await rig.sql`INSERT INTO accounts VALUES (1, 0)`
  const root = await session()
  await root.sql`BEGIN`
  await root.sql`UPDATE accounts SET balance = 1 WHERE id = 1`
  const waiters: { pid: number; done: Promise<unknown> }[] = []
  const queue = async (balance: number) => {
    const s = await session()
    const done = s.sql`UPDATE accounts SET balance = ${balance} WHERE id = 1`.catch((e: Error) => e)
    await waitForState(s.pid, (r) => r.wait_event_type === 'Lock')
    waiters.push({ pid: s.pid, done })
  }
  await queue(2)
  await queue(3)
  // The first waiter a second in its lock wait by the server's clock (pg_locks.waitstart, as the agent reads it).
  await until(
    'a lock wait of a second',
    async () => {
      const [row] = await rig.sql<{ waited_s: number | null }[]>`
      SELECT extract(epoch FROM clock_timestamp() - waitstart)::float8 AS waited_s FROM pg_locks WHERE pid = ${waiters[0]!.pid} AND NOT granted`
      return (row?.waited_s ?? 0) >= 1 ? true : undefined
    },
    { everyMs: 20 },
  )
  await rig.cycle()
  const findings = await rig.findings('pg_blocked_sessions')
  expect(findings).toHaveLength(1)
  let [finding] = findings
  expect(finding).toMatchObject({
    key: `pg_blocked_sessions:pid ${root.pid}`,
    severity: 'warning',
    // The blocker by pid, user and application, and the table its waiters wait on.
    title: expect.stringMatching(
      new RegExp(
        `^2 sessions blocked for up to [\\d.]+ s by pid ${root.pid}, user postgres, application "postgres\\.js", on public\\.accounts$`,
      ),
    ),
    objects: [`pid ${root.pid}`, ...waiters.map((w) => `pid ${w.pid}`)],
    metrics: { root_pid: root.pid, blocked_sessions: 2 },
  })
  expect(finding.metrics.longest_wait_s).toBeGreaterThanOrEqual(1)
  expect(finding.detail).toContain(`pid ${root.pid} (user postgres`)
  expect(finding.detail).toContain('idle in transaction')
  // The root blocker's statement, as pg_stat_activity has it.
  const [rootActivity] = await rig.sql<{ query: string }[]>`SELECT query FROM pg_stat_activity WHERE pid = ${root.pid}`
  expect(rootActivity!.query).toBe('UPDATE accounts SET balance = 1 WHERE id = 1')
  expect(finding.detail).toContain(`; last statement: ${rootActivity!.query}) blocks 2 sessions`)
  expect(finding.detail).toContain(
    `blocks 2 sessions (pid ${waiters[0]!.pid}, ${waiters[1]!.pid}) waiting on public.accounts`,
  )
  expect(finding.how_to_fix[0]).toMatch(
    guarded('pg_terminate_backend', root.pid, 'xact_start', 'rolls back its transaction and releases its locks'),
  )
  // The waiting statements are blocked, not long-running.
  expect(await rig.findings('pg_long_running_queries')).toEqual([])

  await queue(4)
  await rig.cycle()
  ;[finding] = await rig.findings('pg_blocked_sessions')
  expect(finding).toMatchObject({
    key: `pg_blocked_sessions:pid ${root.pid}`,
    severity: 'critical',
    metrics: { blocked_sessions: 3 },
  })

  // On the pid of another session of the same role and application in a transaction: no row, and it
  // keeps its session and transaction. As given, it ends the root and the queue moves.
  const other = await bystander()
  expect(Array.from(await rig.sql.unsafe(onPid(finding.how_to_fix[0], root.pid, other.pid))) as unknown[]).toEqual([])
  expect(Array.from(await rig.sql.unsafe(finding.how_to_fix[0])) as unknown[]).toEqual([{ pg_terminate_backend: true }])
  for (const w of waiters) expect(await w.done).not.toBeInstanceOf(Error)
  expect(await other.identity()).toEqual(other.before)
  await other.sql`ROLLBACK`
  await rig.cycle()
  expect(await rig.findings('pg_blocked_sessions')).toEqual([])
  // The root's update was rolled back; the waiters' updates all went through, in the lock manager's order.
  expect([2, 3, 4]).toContain((await rig.sql`SELECT balance FROM accounts`)[0]!.balance)
})

test('connections: warning and critical by the share of max_connections minus the reserved slots; closing them cures it', async () => {
  const clientBackends = async () =>
    Number((await rig.sql`SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend'`)[0]!.n)
  const [{ max, reserved }] =
    (await rig.sql`SELECT current_setting('max_connections')::int AS max, current_setting('superuser_reserved_connections')::int AS reserved`) as unknown as [
      { max: number; reserved: number },
    ]
  const usable = max - reserved
  await rig.cycle()
  expect(await rig.findings('pg_connections')).toEqual([])

  const extra: postgres.Sql[] = []
  const openUpTo = async (target: number) => {
    const wanted = target - (await clientBackends())
    const opened = Array.from({ length: wanted }, () => postgres(rig.dsn, { max: 1, onnotice: () => {} }))
    await Promise.all(opened.map((c) => c`SELECT 1`))
    extra.push(...opened)
    clients.push(...opened)
  }
  const cycleAndCount = async () => {
    const before = await clientBackends()
    await rig.cycle()
    const after = await clientBackends()
    const [finding] = await rig.findings('pg_connections')
    expect(finding.metrics.connections_total).toBeGreaterThanOrEqual(Math.min(before, after))
    expect(finding.metrics.connections_total).toBeLessThanOrEqual(Math.max(before, after))
    return finding
  }

  await openUpTo(Math.ceil(usable * 0.25) + 2)
  let finding = await cycleAndCount()
  const total = finding.metrics.connections_total
  expect(finding).toMatchObject({
    key: 'pg_connections',
    severity: 'warning',
    category: 'capacity',
    metrics: {
      max_connections: max,
      superuser_reserved_connections: reserved,
      usage_ratio: Number((total / usable).toFixed(4)),
    },
  })
  expect(finding.detail).toStartWith(
    `${total} client connections of the ${usable} that ordinary roles may open (max_connections ${max} minus superuser_reserved_connections ${reserved})`,
  )
  expect(finding.metrics.idle_connections).toBeGreaterThanOrEqual(extra.length)

  await openUpTo(Math.ceil(usable * 0.4) + 2)
  finding = await cycleAndCount()
  expect(finding.severity).toBe('critical')
  expect(finding.metrics.connections_total / usable).toBeGreaterThanOrEqual(0.4)

  await Promise.all(extra.map((c) => c.end({ timeout: 1 })))
  await until('the connections to close', async () => ((await clientBackends()) < usable * 0.25 ? true : undefined))
  await rig.cycle()
  expect(await rig.findings('pg_connections')).toEqual([])
})
