// Custom metrics on ClickHouse (the chdb-backed HTTP rig, test/support/clickhouse.ts): the query runs with
// readonly=1, max_execution_time and max_result_rows; values arrive as the query returns them (UInt64 as
// quoted text, parsed), labels as text; a write, or a query that tries to lift its own limits, is refused
// and reported for that metric alone while the others are collected.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { connectClickHouse, type ClickHouseConnection } from '../../src/agent/clickhouse-connection.ts'
import { clickhouseCustomQuery, collectCustom } from '../../src/agent/collectors/custom-metrics.ts'
import type { CustomMetricConfig } from '../../src/agent/config.ts'
import { Value } from '@sinclair/typebox/value'
import { CustomMetricsSection } from '../../src/shared/wire.ts'
import { startClickHouse, type ClickHouseRig } from '../support/clickhouse.ts'

let ch: ClickHouseRig
let conn: ClickHouseConnection

const metric = (name: string, sql: string, over: Partial<CustomMetricConfig> = {}): CustomMetricConfig => ({
  name,
  sql,
  intervalMs: 10_000,
  labels: [],
  values: ['v'],
  kind: 'gauge',
  timeoutMs: 5_000,
  ...over,
})

beforeAll(async () => {
  ch = await startClickHouse({ user: 'dbm_agent', password: 'secret' })
  conn = await connectClickHouse(ch.dsn, { requestTimeoutMs: 10_000, maxExecutionTimeS: 5 })
  await conn.client.command({ query: 'CREATE TABLE events (kind String, n UInt64) ENGINE = MergeTree ORDER BY kind' })
  await conn.client.command({
    query: `INSERT INTO events VALUES ('click', 18446744073709), ('view"\\n*/', 7), ('view"\\n*/', 5)`,
  })
}, 60_000)

afterAll(async () => {
  await conn?.close()
  await ch?.stop()
})

test('values as returned, labels as text, writes and lifted limits refused, each metric on its own', async () => {
  const metrics = [
    metric('event_rows', 'SELECT count() AS v FROM events'),
    metric('events_by_kind', 'SELECT kind, sum(n) AS v FROM events GROUP BY kind ORDER BY kind', { labels: ['kind'] }),
    metric('sneaky', 'SELECT count() AS v FROM events SETTINGS readonly = 0'),
    metric('writer', 'INSERT INTO events SELECT * FROM events'),
    metric('missing', 'SELECT v FROM no_such_table'),
  ]
  const notes = new Map<string, string>()
  const section = await collectCustom(metrics, { now: Date.now(), state: new Map(), notes }, (m) =>
    clickhouseCustomQuery(conn.client, m),
  )
  expect(Value.Check(CustomMetricsSection, section)).toBe(true)
  expect(section!.samples).toEqual([
    { name: 'event_rows', column: 'v', labels: {}, value: 3 },
    { name: 'events_by_kind', column: 'v', labels: { kind: 'click' }, value: 18446744073709 },
    { name: 'events_by_kind', column: 'v', labels: { kind: 'view"\n*/' }, value: 12 },
  ])
  const errors = Object.fromEntries(section!.errors.map((e) => [e.name, e.message]))
  expect(Object.keys(errors).sort()).toEqual(['missing', 'sneaky', 'writer'])
  expect(errors.sneaky).toContain('readonly')
  expect(errors.writer).toContain('readonly')
  expect(errors.missing).toContain('no_such_table')
  const count = await (
    await conn.client.query({ query: 'SELECT count() AS n FROM events', format: 'JSONEachRow' })
  ).json<{ n: string }>()
  expect(Number(count[0]!.n)).toBe(3)
  expect(notes.get('custom_metrics')).toContain('writer: ')
}, 30_000)

test('at most 1,000 rows are kept, and saying so', async () => {
  const section = await collectCustom(
    [metric('many', 'SELECT toString(number) AS k, number AS v FROM numbers(5000)', { labels: ['k'] })],
    { now: Date.now(), state: new Map(), notes: new Map() },
    (m) => clickhouseCustomQuery(conn.client, m),
  )
  expect(section!.samples.length).toBe(1000)
  expect(section!.errors).toEqual([{ name: 'many', message: 'returned more than 1000 rows; the first 1000 are kept' }])
}, 30_000)
