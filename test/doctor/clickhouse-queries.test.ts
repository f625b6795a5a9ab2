// The ClickHouse query rules on the chdb rig watched by the real agent. chdb has no query_log of its
// own: the rig's is created empty and seeded. Queries that throw raise the failed share counted from
// system.events while query_log is missing, until successful ones dilute it; seeded query_log rows set
// the server's p99 (through the agent's query_p99_ms gauge) and its failed share until fast, successful
// ones bring them down; a query sleeping in another client is long-running past lowered thresholds until
// the finding's KILL QUERY ends it. The tests run in this order and build on each other's query_log.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { ClickHouseLogLevel } from '@clickhouse/client'
import {
  type QueryLogRow,
  createSystemLogTables,
  dropSystemLogTables,
  seedQueryLog,
} from '../support/clickhouse-system-tables.ts'
import { type ClickHouseDoctorRig, clickhouseDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

let rig: ClickHouseDoctorRig

beforeAll(async () => {
  rig = await clickhouseDoctorRig({
    thresholds: {
      ch_long_running_queries: { warning_s: 1, critical_s: 3 },
      ch_failed_queries: { min_queries: 10 },
      ch_query_p99: { min_minutes: 1 },
    },
  })
})
afterAll(async () => {
  await rig?.stop()
})

/** The command of a how_to_fix line, without its trailing comment. */
const command = (line: string) => line.replace(/;\s+--.*$/, '')

/** Runs a query `times` over HTTP, as a client would; its failure is expected and ignored. */
async function run(sql: string, times: number) {
  const quiet = rig.ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
  for (let i = 0; i < times; i++)
    await quiet.query({ query: sql }).then(
      (r) => r.text(),
      () => {},
    )
}

/** query_log rows logged now (after the agent's watermark), `times` of each. */
async function seed(
  rows: { query: string; ms: number; times: number; type?: QueryLogRow['type']; exception_code?: number }[],
) {
  const at = new Date(Date.now() + 1)
  await seedQueryLog(
    rig.ch,
    rows.flatMap(({ query, ms, times, type, exception_code }) =>
      Array.from({ length: times }, () => ({ event_time: at, query, query_duration_ms: ms, type, exception_code })),
    ),
  )
}

test('failed queries without query_log, from system.events: a warning; successful queries dilute it', async () => {
  // Before the agent's second cycle: it never sends query_log counts, so the rule counts system.events.
  await dropSystemLogTables(rig.ch)
  try {
    await run('SELECT throwIf(1)', 20)
    await rig.cycle()
    const [warning] = await rig.findings('ch_failed_queries')
    // Every query counts: the agent's own (a few of which fail on the missing query_log, per cycle) and
    // each SET the rig runs for a request.
    expect(warning).toMatchObject({
      key: 'ch_failed_queries',
      severity: 'warning',
      category: 'reliability',
      metrics: { source: 'events' },
    })
    const { queries: total, failed } = warning.metrics
    expect(failed).toBeGreaterThanOrEqual(20)
    expect(failed).toBeLessThanOrEqual(26)
    expect(warning.metrics.failed_ratio).toBe(Number((failed / total).toFixed(4)))
    expect(warning.detail).toStartWith(
      `${failed} of the ${total} queries the server counted (system.events, no query_log) in the last hour failed`,
    )
    expect(warning.title).toBe(`${((failed / total) * 100).toFixed(1)} % of queries failed in the last hour`)

    await run('SELECT 1', 300)
    await rig.cycle()
    expect(await rig.findings('ch_failed_queries')).toEqual([])
  } finally {
    await createSystemLogTables(rig.ch)
    await rig.cycle() // the agent's new query_log baseline
  }
})

test("query p99 from the agent's server-wide gauge: warning, critical, cured; the overview shows the same p99", async () => {
  // The store keeps one p99 a minute (the latest), by the minute the agent's cycle began in: the whole
  // story's three cycles must begin in one minute. It takes about a second, so it starts only with 20 s of
  // the minute left, else at the next minute (a wait for wall-clock time, not for a cycle); and each
  // cycle is checked to have begun in the first one's minute, so a story that ran over would say so.
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 20_000) await Bun.sleep(left + 200)
  const cycleMinute = () => Math.floor(Date.parse(rig.agent.runner('target')!.status.last_cycle_at!) / 60_000)
  // 149 calls of one statement at 2 s and one of another at 60 s: the server's p99 is 2 s, while the
  // slow statement's own p99 is 60 s (what the overview would show without the server-wide gauge).
  await seed([
    { query: 'SELECT * FROM hits WHERE day = today()', ms: 2000, times: 149 },
    { query: 'SELECT count() FROM hits GROUP BY user', ms: 60_000, times: 1 },
  ])
  await rig.cycle()
  const minute = cycleMinute()
  const [warning] = await rig.findings('ch_query_p99')
  expect(warning).toMatchObject({
    key: 'ch_query_p99',
    severity: 'warning',
    title: 'Query p99 of 2.0 s over the last hour',
    metrics: { p99_ms: 2000, max_minute_p99_ms: 2000, minutes: 1, slow_minutes: 1, queries: 150 },
  })
  expect(warning.objects).toHaveLength(2)
  expect(warning.detail).toContain('The statements with the highest p99: ')
  expect(warning.detail.indexOf('p99 60 s, 1 call: SELECT count() FROM hits GROUP BY user')).toBeLessThan(
    warning.detail.indexOf('p99 2.0 s, 149 calls'),
  )
  expect((await rig.api('/overview')).query_p99_ms).toBe(2000)

  await seed([{ query: 'SELECT * FROM hits WHERE day = today()', ms: 20_000, times: 150 }])
  await rig.cycle()
  expect(cycleMinute()).toBe(minute)
  expect(await rig.findings('ch_query_p99')).toEqual([
    expect.objectContaining({
      severity: 'critical',
      metrics: expect.objectContaining({ p99_ms: 20_000, queries: 300 }),
    }),
  ])

  await seed([{ query: 'SELECT 1', ms: 10, times: 150 }])
  await rig.cycle()
  expect(cycleMinute()).toBe(minute)
  expect(await rig.findings('ch_query_p99')).toEqual([])
  expect((await rig.api('/overview')).query_p99_ms).toBe(10)
  // One meaning everywhere: the latest cycle's p99, as stored, on /server-metrics (with its count) and in the doctor's summary.
  expect(await rig.api('/server-metrics')).toMatchObject({ query_p99_ms: 10, queries_logged: 150 })
  expect((await rig.api('/doctor')).metrics_summary.query_p99_ms).toBe(10)

  // A cycle that logged no query: null, not the hour's highest statement p99 (60 s) as before.
  await rig.cycle()
  expect((await rig.api('/overview')).query_p99_ms).toBeNull()
  expect(await rig.api('/server-metrics')).toMatchObject({ query_p99_ms: null, queries_logged: 0 })
  expect((await rig.api('/doctor')).metrics_summary.query_p99_ms).toBeNull()
}, 60_000)

test('the load against the limits, as the engine counts it: running queries, connections by protocol, max_connections', async () => {
  const other = rig.ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
  const sleeping = Array.from({ length: 3 }, () =>
    other
      .query({
        query: 'SELECT sleepEachRow(1) AS slept FROM numbers(20) SETTINGS max_block_size = 1',
        format: 'JSONEachRow',
      })
      .then(
        (r) => r.json(),
        (e) => e.type,
      ),
  )
  const running = async () =>
    (
      await rig.ch.query<{ n: number }>(
        "SELECT count() AS n FROM system.processes WHERE query LIKE 'SELECT sleepEachRow(1)%'",
      )
    )[0]!.n
  try {
    await until('three queries running', async () => ((await running()) === 3 ? true : undefined), {
      everyMs: 50,
      timeoutMs: 10_000,
    })
    await rig.cycle()
    const engine: Record<string, number> = Object.fromEntries(
      (
        await rig.ch.query<{ metric: string; value: number }>(
          "SELECT metric, value FROM system.metrics WHERE metric IN ('TCPConnection', 'HTTPConnection', 'MySQLConnection', 'PostgreSQLConnection', 'InterserverConnection')",
        )
      ).map((r) => [r.metric, Number(r.value)]),
    )
    const settings = Object.fromEntries(
      (
        await rig.ch.query<{ name: string; value: string }>(
          "SELECT name, value FROM system.server_settings WHERE name IN ('max_connections', 'max_concurrent_queries')",
        )
      ).map((r) => [r.name, Number(r.value)]),
    )
    expect(Object.keys(engine)).toHaveLength(5)
    expect(settings).toEqual({ max_connections: 4096, max_concurrent_queries: 0 }) // the engine's defaults: 0 is no limit
    const metrics = await rig.api('/server-metrics')
    expect(metrics).toMatchObject({
      running_queries: 3, // the agent's own left out
      max_concurrent_queries: null,
      max_connections: 4096,
      tcp_connections: engine.TCPConnection,
      http_connections: engine.HTTPConnection,
      mysql_connections: engine.MySQLConnection,
      postgresql_connections: engine.PostgreSQLConnection,
      interserver_connections: engine.InterserverConnection,
      connections: Object.values(engine).reduce((sum, n) => sum + n, 0),
    })
    // No limit on queries, and 3 connections at most of 4,096: neither rule says anything.
    expect(await rig.findings('ch_running_queries')).toEqual([])
    expect(await rig.findings('ch_connections')).toEqual([])
  } finally {
    await rig.ch.command("KILL QUERY WHERE query LIKE 'SELECT sleepEachRow(1)%' ASYNC")
    expect(await Promise.all(sleeping)).toEqual(['QUERY_WAS_CANCELLED', 'QUERY_WAS_CANCELLED', 'QUERY_WAS_CANCELLED'])
  }
  await until('the queries gone', async () => ((await running()) === 0 ? true : undefined), {
    everyMs: 50,
    timeoutMs: 10_000,
  })
  // The engine counts every query of every client at the cycle's moment (a cancelled one may linger there a
  // moment longer than in the test's own view): the figure comes back to 0 within a few cycles.
  await until(
    "no query running in the agent's figure",
    async () => {
      await rig.cycle()
      return (await rig.api('/server-metrics')).running_queries === 0 ? true : undefined
    },
    { everyMs: 50, timeoutMs: 10_000 },
  )
})

test('failed queries from query_log: critical with the statements that failed most, then a warning, then cured', async () => {
  // Everything in this query_log was seeded: 450 finished queries by the test before, and now 150 failures.
  await seed([
    {
      query: 'SELECT uniqExact(user) FROM hits',
      ms: 5000,
      times: 100,
      type: 'ExceptionWhileProcessing',
      exception_code: 241,
    },
    { query: 'SELEC 1', ms: 0, times: 50, type: 'ExceptionBeforeStart', exception_code: 62 },
  ])
  await rig.cycle()
  const [critical] = await rig.findings('ch_failed_queries')
  expect(critical).toMatchObject({
    key: 'ch_failed_queries',
    severity: 'critical',
    title: '25.0 % of queries failed in the last hour',
    metrics: { queries: 600, failed: 150, failed_ratio: 0.25, source: 'query_log' },
  })
  // Per statement, only failures while running count (query_stats): the syntax errors have no statement.
  expect(critical.objects).toHaveLength(1)
  expect(critical.detail).toContain('The statements that failed most: 100 of 100 calls of statement ')
  expect(critical.detail).toContain('(SELECT uniqExact(user) FROM hits)')
  // The errors the real engine counted in system.errors (through log_events), named with their last message.
  expect(critical.detail).toContain('The errors the server counted most in that time: ')
  // One finding per cause: the error rate stays quiet while queries fail.
  expect(await rig.findings('ch_log_error_rate')).toEqual([])
  expect(critical.how_to_investigate[2]).toMatch(
    /^SELECT event_time, user, exception FROM system\.query_log WHERE normalized_query_hash = \d+ AND exception_code != 0/,
  )

  await seed([{ query: 'SELECT 1', ms: 1, times: 900 }])
  await rig.cycle()
  expect(await rig.findings('ch_failed_queries')).toEqual([
    expect.objectContaining({
      severity: 'warning',
      metrics: expect.objectContaining({ queries: 1500, failed: 150, failed_ratio: 0.1 }),
    }),
  ])

  await seed([{ query: 'SELECT 1', ms: 1, times: 2000 }])
  await rig.cycle()
  expect(await rig.findings('ch_failed_queries')).toEqual([])
})

test('a long-running query: warning, then critical, named by its query id; its KILL QUERY cures it', async () => {
  const other = rig.ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
  // Eight blocks of one row, each sleeping a second.
  const long = other
    .query({
      query: 'SELECT sleepEachRow(1) AS slept FROM numbers(8) SETTINGS max_block_size = 1',
      format: 'JSONEachRow',
    })
    .then(
      (r) => r.json(),
      (e) => e.type,
    )
  const running = async (atLeast: number) =>
    (
      await rig.ch.query<{ query_id: string; elapsed: number }>(
        "SELECT query_id, elapsed FROM system.processes WHERE query LIKE 'SELECT sleepEachRow(1)%'",
      )
    ).find((p) => p.elapsed >= atLeast)
  try {
    const { query_id } = await until('the query past a second', () => running(1.2), { everyMs: 50, timeoutMs: 10_000 })
    await rig.cycle()
    const [warning] = await rig.findings('ch_long_running_queries')
    expect(warning).toMatchObject({
      key: `ch_long_running_queries:query ${query_id}`,
      severity: 'warning',
      category: 'performance',
      objects: [`query ${query_id}`],
    })
    expect(warning.title).toMatch(/^Query running for [12]\.\d s$/)
    expect(warning.detail).toContain(`Query ${query_id} (user `)
    expect(warning.detail).toContain(': SELECT sleepEachRow(1) AS slept FROM numbers(8) SETTINGS max_block_size = 1')
    expect(warning.metrics.elapsed_s).toBeGreaterThanOrEqual(1)

    await until('the query past three seconds', () => running(3.2), { everyMs: 50, timeoutMs: 10_000 })
    await rig.cycle()
    const [critical] = await rig.findings('ch_long_running_queries')
    expect(critical).toMatchObject({ key: `ch_long_running_queries:query ${query_id}`, severity: 'critical' })
    expect(critical.how_to_fix[0]).toBe(`KILL QUERY WHERE query_id = '${query_id}' ASYNC;`)

    await rig.ch.command(command(critical.how_to_fix[0]))
    expect(await long).toBe('QUERY_WAS_CANCELLED')
    await until('the query gone', async () => ((await running(0)) ? undefined : true), {
      everyMs: 50,
      timeoutMs: 10_000,
    })
    await rig.cycle()
    expect(await rig.findings('ch_long_running_queries')).toEqual([])
  } finally {
    await long
  }
})
