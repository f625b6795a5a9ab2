// Checks of one's own end to end: a real PostgreSQL 17 watched by the real agent with custom_metrics in
// its config, pushing to a real dbm server. What the SQL returns arrives in the API unchanged (a gauge
// from count(*), labels with quotes, newlines, `*/`, backslashes, bidi and emoji), reaches /metrics
// escaped per the text format; a counter from a sequence's last_value becomes a rate, never negative
// across a reset; a failing metric is reported alone and the others go on; a write in the SQL is refused
// (READ ONLY); `agent --check` shows each metric's first rows or its error.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { checkConfig } from '../../src/agent/check.ts'
import { parseAgentConfig } from '../../src/agent/config.ts'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

let server: PostgresServer
let sql: postgres.Sql
let rig: AgentRig
let dir: string

const HOSTILE = ["quote\"d 'single'", 'new\nline', '*/ DROP TABLE x; /*', 'back\\slash', 'ünïcödé 😀 \u202egnp.exe']

const ENTRY = `    enabled_collectors: [custom_metrics]
    custom_metrics:
      - name: outbox_rows
        sql: SELECT count(*) AS rows FROM outbox
        values: [rows]
        alert: {above: 10000, for: 5m, severity: warning}
      - name: jobs
        sql: SELECT state, count(*) AS n, sum(weight) AS weight FROM jobs GROUP BY state ORDER BY n DESC
        labels: [state]
        values: [n, weight]
      - name: orders_total
        sql: SELECT last_value AS v FROM orders_seq
        values: [v]
        kind: counter
      - name: broken
        sql: SELECT v FROM no_such_table
        values: [v]
      - name: writer
        sql: UPDATE outbox SET id = id RETURNING id AS v
        values: [v]
`

interface Latest {
  column: string
  labels: Record<string, string>
  value: number | null
  raw_value: number | null
  ts: string | null
}
interface Metric {
  name: string
  kind: string
  last_error: string | null
  error_count: number
  latest: Latest[]
}

const metrics = async (): Promise<Record<string, Metric>> =>
  Object.fromEntries(((await rig.api('/custom-metrics')).metrics as Metric[]).map((m) => [m.name, m]))

beforeAll(async () => {
  server = await startPostgres(17)
  sql = postgres(server.url(), { max: 1, onnotice: () => {} })
  await sql`CREATE TABLE outbox (id int)`
  await sql`INSERT INTO outbox SELECT generate_series(1, 12345)`
  await sql`CREATE TABLE jobs (state text, weight numeric)`
  for (const [i, state] of HOSTILE.entries())
    await sql`INSERT INTO jobs SELECT ${state}, 0.25 FROM generate_series(1, ${i + 1})`
  await sql`CREATE SEQUENCE orders_seq`
  await sql`SELECT setval('orders_seq', 1000)`
  dir = mkdtempSync(join(tmpdir(), 'dbm-custom-'))
  rig = await startAgentRig(server.url(), 'custom', dir, undefined, ENTRY)
}, 60_000)

afterAll(async () => {
  await rig?.stop()
  await sql?.end({ timeout: 1 })
  await server?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('a gauge and labelled values arrive as the SQL returns them; failing and writing metrics are reported alone', async () => {
  const got = await until('the custom metrics to arrive', async () => {
    const m = await metrics()
    return m.outbox_rows?.latest.length &&
      m.jobs?.latest.length === HOSTILE.length * 2 &&
      m.broken?.last_error &&
      m.writer?.last_error
      ? m
      : undefined
  })
  const [count] = await sql<{ n: string }[]>`SELECT count(*) AS n FROM outbox`
  expect(count!.n).toBe('12345')
  expect(got.outbox_rows!.latest).toEqual([
    { column: 'rows', labels: {}, value: 12345, raw_value: 12345, ts: expect.any(String) },
  ])
  const rows = await sql<
    { state: string; n: string; weight: string }[]
  >`SELECT state, count(*) AS n, sum(weight) AS weight FROM jobs GROUP BY state`
  for (const row of rows) {
    const n = got.jobs!.latest.find((l) => l.column === 'n' && l.labels.state === row.state)
    const weight = got.jobs!.latest.find((l) => l.column === 'weight' && l.labels.state === row.state)
    expect({ state: row.state, n: n?.value, weight: weight?.value }).toEqual({
      state: row.state,
      n: Number(row.n),
      weight: Number(row.weight),
    })
  }
  expect(got.broken!.last_error).toBe('relation "no_such_table" does not exist')
  expect(got.broken!.error_count).toBeGreaterThan(0)
  expect(got.broken!.latest).toEqual([])
  expect(got.writer!.last_error).toBe('cannot execute UPDATE in a read-only transaction')
  const [after] = await sql<{ n: string }[]>`SELECT count(*) AS n FROM outbox`
  expect(after!.n).toBe('12345')
  expect(rig.agent.runner('custom')!.status.collectors.custom_metrics).toContain(
    'broken: relation "no_such_table" does not exist',
  )

  // One metric's series over the window: a point per value column and label set.
  const series = await rig.api('/custom-metrics/jobs')
  expect(series.kind).toBe('gauge')
  expect(series.series.length).toBe(HOSTILE.length * 2)
  const quoted = series.series.find(
    (s: { column: string; labels: Record<string, string> }) => s.column === 'n' && s.labels.state === HOSTILE[0],
  )
  expect(quoted.points.at(-1).value).toBe(1)

  // Bad parameters and another organization's database.
  expect(
    (
      await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/custom-metrics/Not-A-Name`, {
        token: rig.account.token,
      })
    ).status,
  ).toBe(400)
  expect(
    (await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/custom-metrics/nope`, { token: rig.account.token }))
      .status,
  ).toBe(404)
  expect(
    (
      await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/custom-metrics/jobs?since=yesterday`, {
        token: rig.account.token,
      })
    ).status,
  ).toBe(400)
  const { agentAccount } = await import('../support/server.ts')
  const other = await agentAccount(rig.server)
  expect(
    (await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/custom-metrics`, { token: other.account.token }))
      .status,
  ).toBe(404)
  expect(
    (await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/custom-metrics/jobs`, { token: other.account.token }))
      .status,
  ).toBe(404)
}, 60_000)

test("/metrics: dbm_custom_<name> with the database and the metric's labels, escaped", async () => {
  const res = await fetch(`${rig.server.base}/metrics`, { headers: { authorization: `Bearer ${rig.account.token}` } })
  expect(res.status).toBe(200)
  const text = await res.text()
  expect(text).toContain('# TYPE dbm_custom_outbox_rows gauge\ndbm_custom_outbox_rows{database="custom"} 12345\n')
  const escapeLabel = (v: string) => v.replace(/[\\"\n]/g, (c) => (c === '\\' ? '\\\\' : c === '"' ? '\\"' : '\\n'))
  for (const [i, state] of HOSTILE.entries()) {
    expect(text).toContain(`dbm_custom_jobs_n{database="custom",state="${escapeLabel(state)}"} ${i + 1}\n`)
  }
  expect(text).toContain('dbm_custom_jobs_n{database="custom",state="quote\\"d \'single\'"} 1\n')
  expect(text).toContain('dbm_custom_jobs_n{database="custom",state="new\\nline"} 2\n')
  expect(text).toContain('# TYPE dbm_custom_orders_total counter\n')
  // No line of the exposition is broken by a label value.
  for (const line of text.split('\n'))
    expect(line === '' || line.startsWith('#') || /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? \S+$/.test(line)).toBe(true)
})

test('a counter becomes a rate per second, and a reset is no negative rate', async () => {
  const first = await until('the counter to be read at 1000', async () => (await metrics()).orders_total?.latest[0])
  expect(first.raw_value).toBe(1000)
  await sql`SELECT setval('orders_seq', 1600)`
  const rising = await until('a rate after 1600', async () => {
    const l = (await metrics()).orders_total?.latest[0]
    return l?.raw_value === 1600 && l.value !== null && l.value > 0 ? l : undefined
  })
  // 600 over the seconds between two readings a second or so apart.
  expect(rising.value!).toBeGreaterThan(600 / 5)
  expect(rising.value!).toBeLessThanOrEqual(600 / 0.5)
  await sql`ALTER SEQUENCE orders_seq RESTART WITH 7`
  await sql`SELECT nextval('orders_seq')`
  const reset = await until('the reading after the reset', async () => {
    const l = (await metrics()).orders_total?.latest[0]
    return l?.raw_value === 7 ? l : undefined
  })
  expect(reset.value!).toBeGreaterThanOrEqual(0)
  const series = await rig.api('/custom-metrics/orders_total')
  expect(series.unit).toBe('per_second')
  for (const point of series.series[0].points) expect(point.value).toBeGreaterThanOrEqual(0)
}, 30_000)

test('agent --check runs each custom metric once and shows its first rows or its error', async () => {
  const config = parseAgentConfig(
    `api:\n  key: dbm_ak_0123456789abcdef_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ\ndatabases:\n  - name: custom\n    dsn: ${server.url()}\n    poll_interval: 1s\n${ENTRY}`,
  )
  const [line] = await checkConfig(config, 10)
  expect(line!.ok).toBe(false)
  const lines = line!.line.split('\n')
  expect(lines).toContain('ok    custom: custom metric outbox_rows (gauge, every 1 s): 1 row(s), first: {rows="12345"}')
  expect(lines).toContain('FAIL  custom: custom metric broken: "relation \\"no_such_table\\" does not exist"')
  expect(lines).toContain('FAIL  custom: custom metric writer: "cannot execute UPDATE in a read-only transaction"')
  // A hostile label stays on its line, quoted.
  const jobs = lines.find((l) => l.includes('custom metric jobs'))!
  expect(jobs).toContain('{state="*/ DROP TABLE x; /*", n="3", weight="0.75"}')
  // A bidi override is shown escaped, never as itself.
  expect(jobs).toContain('\\u202egnp.exe')
  expect(jobs).not.toContain('\u202e')
  expect(lines.length).toBe(6)
}, 30_000)
