// Temp files, deadlocks and risky settings on a real PostgreSQL 17 watched by the real agent: a sort
// that spills under a 64 kB work_mem, real deadlocks between two transactions, pg_stat_statements
// dropped from the database, and fsync and track_counts turned off server-wide with ALTER SYSTEM
// (reset and reloaded afterwards, even when the test fails). The windowed rules are cured by moving
// the server's clock past their windows.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

const MB = 1024 * 1024
const HOUR = 3_600_000

let rig: PostgresDoctorRig
const clients: postgres.Sql[] = []

beforeAll(async () => {
  rig = await postgresDoctorRig(17, {
    thresholds: {
      pg_temp_files: { info_bytes: 1 * MB, warning_bytes: 8 * MB, critical_bytes: 1024 * MB },
      pg_deadlocks: { warning_per_hour: 1, critical_per_hour: 2, info_per_day: 1 },
    },
  })
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end({ timeout: 1 }).catch(() => {})))
  await rig?.stop()
})

function connect(options: postgres.Options<{}> = {}): postgres.Sql {
  const sql = postgres(rig.dsn, { max: 1, onnotice: () => {}, ...options })
  clients.push(sql)
  return sql
}

const databaseCounters = async () =>
  (
    await rig.sql<{ temp_files: number; temp_bytes: number; deadlocks: number }[]>`
    SELECT temp_files::int, temp_bytes::float8 AS temp_bytes, deadlocks::int FROM pg_stat_database WHERE datname = current_database()`
  )[0]!

test('temp files: the spilling statement named; info, then warning as spills add up; its work_mem fix stops the spill; gone after the hour', async () => {
  await rig.sql`CREATE TABLE events AS SELECT g AS id, md5(g::text) AS token FROM generate_series(1, 50000) g`
  await rig.cycle()
  expect(await rig.findings('pg_temp_files')).toEqual([])

  const spiller = connect({ connection: { work_mem: '64kB' } })
  const spill = async () => {
    const before = (await databaseCounters()).temp_bytes
    await spiller`SELECT token FROM events ORDER BY token`
    // Backends flush their statistics when idle, at most once a second, else 10 s later: ask for it now.
    await spiller`SELECT pg_stat_force_next_flush()`
    return until('the spill in pg_stat_database', async () => {
      const now = await databaseCounters()
      return now.temp_bytes > before ? now : undefined
    })
  }
  let counters = await spill()
  expect(counters.temp_bytes).toBeGreaterThanOrEqual(1 * MB)
  expect(counters.temp_bytes).toBeLessThan(8 * MB)
  await rig.cycle()
  let [finding] = await rig.findings('pg_temp_files')
  expect(finding).toMatchObject({
    key: 'pg_temp_files',
    severity: 'info',
    category: 'performance',
    metrics: { temp_files: counters.temp_files, temp_bytes: counters.temp_bytes, statements_spilling: 1 },
  })
  expect(finding.detail).toContain(
    "The statements that spilled most in the same 60 minutes (pg_stat_statements' temp blocks, in bytes): (1) ",
  )
  // Named by its queryid, which the fix commands use (the text stays out of them).
  expect(finding.detail).toMatch(
    /\(1\) statement -?\d+, [\d.]+ MB written to temporary files in 1 call \([\d.]+ MB per call\), needing about 8 MB of work_mem per execution: SELECT token FROM events ORDER BY token\.$/,
  )
  const queryid = /\(1\) statement (-?\d+),/.exec(finding.detail)![1]
  // The one statement wrote every byte: the spill is that statement's issue (grouping.ts).
  expect(finding).toMatchObject({ objects: [queryid], metrics: { statement: queryid }, cause: `statement:${queryid}` })
  expect(finding.how_to_investigate).toContain(
    `SELECT query FROM pg_stat_statements WHERE queryid = ${queryid};   -- the text of statement ${queryid}`,
  )
  // For that statement alone, in its transaction; the test's session takes it as its own.
  expect(finding.how_to_fix[0]).toStartWith(
    `BEGIN; SET LOCAL work_mem = '8MB'; <the statement>; COMMIT;   -- for statement ${queryid} alone: twice its temp bytes per call`,
  )
  const setWorkMem = "SET work_mem = '8MB'"

  // The fix's work_mem keeps the sort in memory: no new temp bytes, once the statement's own statistics
  // (its scan of events, flushed with any temp bytes it had) have arrived.
  const scans = async () =>
    Number((await rig.sql`SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'events'`)[0]!.seq_scan)
  const scansBefore = await scans()
  await spiller.unsafe(setWorkMem)
  await spiller`SELECT token FROM events ORDER BY token`
  await spiller`SELECT pg_stat_force_next_flush()`
  await until("the sort's scan in pg_stat_user_tables", async () => ((await scans()) > scansBefore ? true : undefined))
  expect((await databaseCounters()).temp_bytes).toBe(counters.temp_bytes)
  await spiller`SET work_mem = '64kB'`

  while (counters.temp_bytes < 8 * MB) counters = await spill()
  await rig.cycle()
  ;[finding] = await rig.findings('pg_temp_files')
  expect(finding).toMatchObject({
    severity: 'warning',
    metrics: { temp_files: counters.temp_files, temp_bytes: counters.temp_bytes },
  })

  rig.server.advance(HOUR + 60_000)
  try {
    expect(await rig.findings('pg_temp_files')).toEqual([])
  } finally {
    rig.server.advance(-(HOUR + 60_000))
  }
})

test('deadlocks: one in the hour is a warning, two critical; an hour later info for the day; gone after a day', async () => {
  await rig.sql`CREATE TABLE pair (id int PRIMARY KEY, v int)`
  await rig.sql`INSERT INTO pair VALUES (1, 0), (2, 0)`
  const deadlock = async () => {
    const before = (await databaseCounters()).deadlocks
    const [a, b] = [connect(), connect()]
    await a`BEGIN`
    await a`UPDATE pair SET v = v + 1 WHERE id = 1`
    await b`BEGIN`
    await b`UPDATE pair SET v = v + 1 WHERE id = 2`
    const first = a`UPDATE pair SET v = v + 1 WHERE id = 2`.catch((e: Error) => e)
    await until('a to wait for b', async () =>
      (await rig.sql`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%WHERE id = 2'`)
        .length > 0
        ? true
        : undefined,
    )
    const second = b`UPDATE pair SET v = v + 1 WHERE id = 1`.catch((e: Error) => e)
    const outcomes = await Promise.all([first, second])
    expect(outcomes.filter((o) => o instanceof Error).map((e) => (e as any).code)).toEqual(['40P01'])
    await Promise.all([a`ROLLBACK`, b`ROLLBACK`])
    await Promise.all([a`SELECT pg_stat_force_next_flush()`, b`SELECT pg_stat_force_next_flush()`])
    await until('the deadlock in pg_stat_database', async () =>
      (await databaseCounters()).deadlocks === before + 1 ? true : undefined,
    )
  }

  await rig.cycle()
  expect(await rig.findings('pg_deadlocks')).toEqual([])
  await deadlock()
  await rig.cycle()
  let [finding] = await rig.findings('pg_deadlocks')
  expect(finding).toMatchObject({
    key: 'pg_deadlocks',
    severity: 'warning',
    category: 'reliability',
    title: '1 deadlock in the last hour',
    metrics: { deadlocks_last_hour: 1, deadlocks_last_day: 1 },
  })

  await deadlock()
  await rig.cycle()
  ;[finding] = await rig.findings('pg_deadlocks')
  expect(finding).toMatchObject({
    severity: 'critical',
    title: '2 deadlocks in the last hour',
    metrics: { deadlocks_last_hour: 2, deadlocks_last_day: 2 },
  })

  rig.server.advance(2 * HOUR)
  try {
    ;[finding] = await rig.findings('pg_deadlocks')
    expect(finding).toMatchObject({
      severity: 'info',
      title: '2 deadlocks in the last day',
      metrics: { deadlocks_last_hour: 0, deadlocks_last_day: 2 },
    })
    rig.server.advance(23 * HOUR)
    expect(await rig.findings('pg_deadlocks')).toEqual([])
  } finally {
    rig.server.advance(-25 * HOUR)
  }
})

test('risky settings: pg_stat_statements missing is a warning; fsync, track_counts and autovacuum off are critical, full_page_writes off a warning; each goes once restored', async () => {
  await rig.sql`DROP EXTENSION pg_stat_statements`
  await rig.cycle()
  let findings = await rig.findings('pg_risky_settings')
  expect(findings.map((f) => [f.key, f.severity])).toEqual([['pg_risky_settings:pg_stat_statements', 'warning']])
  expect(findings[0].how_to_fix[0]).toBe('CREATE EXTENSION IF NOT EXISTS pg_stat_statements;')
  await rig.sql.unsafe(findings[0].how_to_fix[0])
  await rig.cycle()
  expect(await rig.findings('pg_risky_settings')).toEqual([])

  const restore = async () => {
    await rig.sql`ALTER SYSTEM RESET fsync`
    await rig.sql`ALTER SYSTEM RESET track_counts`
    await rig.sql`ALTER SYSTEM RESET autovacuum`
    await rig.sql`ALTER SYSTEM RESET full_page_writes`
    await rig.sql`SELECT pg_reload_conf()`
  }
  try {
    await rig.sql`ALTER SYSTEM SET fsync = off`
    await rig.sql`ALTER SYSTEM SET track_counts = off`
    await rig.sql`ALTER SYSTEM SET autovacuum = off`
    await rig.sql`ALTER SYSTEM SET full_page_writes = off`
    await rig.sql`SELECT pg_reload_conf()`
    // Backends apply a reload at their next command: cycle until the agent's session has.
    findings = await until('the four settings reported off', async () => {
      await rig.cycle()
      const found = await rig.findings('pg_risky_settings')
      return found.length === 4 ? found : undefined
    })
    expect(findings.map((f) => [f.key, f.severity, f.category])).toEqual([
      ['pg_risky_settings:autovacuum', 'critical', 'configuration'],
      ['pg_risky_settings:fsync', 'critical', 'configuration'],
      ['pg_risky_settings:track_counts', 'critical', 'configuration'],
      ['pg_risky_settings:full_page_writes', 'warning', 'configuration'],
    ])
    expect(findings[0]).toMatchObject({ title: 'autovacuum is off', metrics: { autovacuum_on: 0 } })
    expect(findings[1]).toMatchObject({
      title: 'fsync is off: a crash can corrupt the database',
      metrics: { fsync_on: 0 },
      how_to_fix: ['ALTER SYSTEM SET fsync = on; SELECT pg_reload_conf();'],
    })
    expect(findings[2]).toMatchObject({
      title: 'track_counts is off: autovacuum cannot work',
      metrics: { track_counts_on: 0 },
    })
    expect(findings[3]).toMatchObject({
      title: 'full_page_writes is off: a crash can leave torn pages',
      how_to_fix: ['ALTER SYSTEM SET full_page_writes = on; SELECT pg_reload_conf();'],
    })
    expect((await rig.api('/doctor')).status).toBe('unhealthy')
  } finally {
    await restore()
  }
  await until('both settings reported on again', async () => {
    await rig.cycle()
    return (await rig.findings('pg_risky_settings')).length === 0 ? true : undefined
  })
})
