// The ClickHouse test rig (test/support/clickhouse.ts): the real ClickHouse engine from chdb behind the
// HTTP interface, reached through @clickhouse/client as the agent will reach a server. These tests pin
// what the ClickHouse collectors' tests rely on: formats, parameters, 64-bit integers, parts with merges
// stopped, failing mutations, running queries in system.processes, cancellation, auth, concurrency,
// and the seeded system.query_log / system.asynchronous_metrics.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ClickHouseError, ClickHouseLogLevel, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client'
import { startClickHouse, type ClickHouseRig } from './support/clickhouse.ts'
import {
  createSystemLogTables,
  dropSystemLogTables,
  seedAsynchronousMetrics,
  seedQueryLog,
} from './support/clickhouse-system-tables.ts'

const USER = 'dbm_agent'
const PASSWORD = 'p@ss:word'

let ch: ClickHouseRig
let client: ClickHouseClient

beforeAll(async () => {
  ch = await startClickHouse({ user: USER, password: PASSWORD })
  console.log(`ClickHouse rig ${ch.version} ready in ${ch.startupMs} ms`)
  client = ch.createClient()
})

afterAll(async () => {
  await ch?.stop()
})

const rows = async <T>(
  c: ClickHouseClient,
  query: string,
  params?: Record<string, unknown>,
  settings?: ClickHouseSettings,
) =>
  (await (
    await c.query({ query, format: 'JSONEachRow', query_params: params, clickhouse_settings: settings })
  ).json()) as T[]

/** The error a promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<ClickHouseError> {
  try {
    await promise
  } catch (e) {
    return e as ClickHouseError
  }
  throw new Error('expected a failure')
}

const quiet = () => ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })

describe('queries through @clickhouse/client', () => {
  test('version() is ClickHouse 26.x, and ping works both ways', async () => {
    const [row] = await rows<{ v: string }>(client, 'SELECT version() AS v')
    expect(row!.v).toMatch(/^26\.\d+\.\d+/)
    expect(row!.v).toBe(ch.version)
    expect((await client.ping()).success).toBe(true)
    expect((await client.ping({ select: true })).success).toBe(true)
  })

  test('query_params bind typed placeholders, strings and NULL exactly', async () => {
    const [row] = await rows<Record<string, unknown>>(
      client,
      'SELECT {x:UInt32} + 1 AS next, {s:String} AS s, {n:Nullable(String)} AS n, {a:Array(UInt8)} AS a',
      { x: 41, s: "it's a\ttab\nand \\ backslash", n: null, a: [1, 2, 3] },
    )
    expect(row).toEqual({ next: 42, s: "it's a\ttab\nand \\ backslash", n: null, a: [1, 2, 3] })
  })

  test('JSONEachRow and JSON formats; 64-bit integers as strings when quoted', async () => {
    const sql = 'SELECT number AS n, toUInt64(18446744073709551615) AS big FROM numbers(2)'
    expect(await rows(client, sql)).toEqual([
      { n: 0, big: 2 ** 64 },
      { n: 1, big: 2 ** 64 },
    ])
    expect(await rows(client, sql, undefined, { output_format_json_quote_64bit_integers: 1 })).toEqual([
      { n: '0', big: '18446744073709551615' },
      { n: '1', big: '18446744073709551615' },
    ])
    const json = await (
      await client.query({
        query: sql,
        format: 'JSON',
        clickhouse_settings: { output_format_json_quote_64bit_integers: 1 },
      })
    ).json<{
      n: string
      big: string
    }>()
    expect(json.meta).toEqual([
      { name: 'n', type: 'UInt64' },
      { name: 'big', type: 'UInt64' },
    ])
    expect(json.data).toEqual([
      { n: '0', big: '18446744073709551615' },
      { n: '1', big: '18446744073709551615' },
    ])
    expect(json.rows).toBe(2)
  })

  test('response headers: query id, format, summary', async () => {
    const result = await client.query({
      query: 'SELECT number FROM numbers(5)',
      format: 'JSONEachRow',
      query_id: 'rig-headers-1',
    })
    expect(result.query_id).toBe('rig-headers-1')
    expect(result.response_headers['x-clickhouse-query-id']).toBe('rig-headers-1')
    expect(result.response_headers['x-clickhouse-format']).toBe('JSONEachRow')
    const summary = JSON.parse(String(result.response_headers['x-clickhouse-summary']))
    expect(summary.result_rows).toBe('5')
    expect(await result.json()).toHaveLength(5)
  })

  test('the database option and a compressed exchange both ways', async () => {
    await client.command({ query: 'CREATE DATABASE IF NOT EXISTS rig_db' })
    await client.command({ query: 'CREATE TABLE rig_db.kv (k String, v UInt32) ENGINE = MergeTree ORDER BY k' })
    const scoped = ch.createClient({ database: 'rig_db', compression: { request: true, response: true } })
    await scoped.insert({
      table: 'kv',
      values: [
        { k: 'a', v: 1 },
        { k: 'b', v: 2 },
      ],
      format: 'JSONEachRow',
    })
    const result = await scoped.query({ query: 'SELECT k, v FROM kv ORDER BY k', format: 'JSONEachRow' })
    expect(result.response_headers['content-encoding']).toBe('gzip')
    expect(await result.json()).toEqual([
      { k: 'a', v: 1 },
      { k: 'b', v: 2 },
    ])
  })

  test('multipart query parameters (use_multipart_params)', async () => {
    const multipart = ch.createClient({ use_multipart_params: true })
    expect(await rows(multipart, 'SELECT {s:String} AS s', { s: 'x'.repeat(10_000) })).toEqual([
      { s: 'x'.repeat(10_000) },
    ])
  })

  test('engine errors reach the client as ClickHouseError with code and type', async () => {
    const missing = await failure(quiet().query({ query: 'SELECT * FROM no_such_table' }))
    expect(missing).toBeInstanceOf(ClickHouseError)
    expect(missing.code).toBe('60')
    expect(missing.type).toBe('UNKNOWN_TABLE')
    const thrown = await failure(quiet().query({ query: 'SELECT throwIf(1)' }))
    expect(thrown.code).toBe('395')
    expect(thrown.type).toBe('FUNCTION_THROW_IF_VALUE_IS_NON_ZERO')
  })
})

describe('MergeTree state with known expectations', () => {
  test('inserts with merges stopped give exactly that many active parts', async () => {
    await client.command({ query: 'CREATE TABLE parts_t (id UInt64, s String) ENGINE = MergeTree ORDER BY id' })
    await client.command({ query: 'SYSTEM STOP MERGES parts_t' })
    for (let i = 0; i < 5; i++) {
      await client.insert({
        table: 'parts_t',
        values: [
          { id: i, s: `row ${i}` },
          { id: i + 100, s: 'more' },
        ],
        format: 'JSONEachRow',
      })
    }
    const [parts] = await rows<{ parts: number; rows: number }>(
      client,
      "SELECT count() AS parts, sum(rows) AS rows FROM system.parts WHERE database = currentDatabase() AND table = 'parts_t' AND active",
    )
    expect(parts).toEqual({ parts: 5, rows: 10 })
  })

  test('a failing ALTER ... UPDATE (mutations_sync=0) is listed in system.mutations with its failure', async () => {
    await client.command({ query: 'CREATE TABLE mut_t (id UInt64, s String) ENGINE = MergeTree ORDER BY id' })
    await client.insert({ table: 'mut_t', values: [{ id: 1, s: 'a' }], format: 'JSONEachRow' })
    const started = Date.now()
    await client.command({
      query: "ALTER TABLE mut_t UPDATE s = 'b' WHERE throwIf(1)",
      clickhouse_settings: { mutations_sync: '0' },
    })
    expect(Date.now() - started).toBeLessThan(5_000) // it returned without waiting for the mutation
    let mutation: { is_done: number; parts_to_do: number; latest_fail_reason: string } | undefined
    for (let i = 0; i < 100; i++) {
      ;[mutation] = await rows<typeof mutation & {}>(
        client,
        "SELECT is_done, parts_to_do, latest_fail_reason FROM system.mutations WHERE database = currentDatabase() AND table = 'mut_t'",
      )
      if (mutation?.latest_fail_reason) break
      await Bun.sleep(100)
    }
    expect(mutation!.is_done).toBe(0)
    expect(mutation!.parts_to_do).toBe(1)
    expect(mutation!.latest_fail_reason).toContain('FUNCTION_THROW_IF_VALUE_IS_NON_ZERO')
  })
})

describe('running queries', () => {
  test('a long query is visible in system.processes from a second, concurrent request', async () => {
    const other = ch.createClient()
    const long = rows(client, 'SELECT sleep(3) AS slept')
    let seen: { query: string; elapsed: number; user: string }[] = []
    for (let i = 0; i < 50 && seen.length === 0; i++) {
      await Bun.sleep(50)
      seen = await rows(other, "SELECT query, elapsed, user FROM system.processes WHERE query LIKE 'SELECT sleep(3)%'")
    }
    expect(seen).toHaveLength(1)
    expect(seen[0]!.elapsed).toBeGreaterThan(0)
    expect(await long).toEqual([{ slept: 0 }])
  })

  test('the query_id is findable as the log_comment of the running query; aborting the request kills it', async () => {
    const controller = new AbortController()
    const scan = quiet()
      .query({
        query: 'SELECT count() FROM numbers(1000000000000)',
        format: 'JSONEachRow',
        query_id: 'rig-abort-1',
        abort_signal: controller.signal,
      })
      .catch((e) => e)
    const lookup = "SELECT read_rows FROM system.processes WHERE Settings['log_comment'] = 'rig-abort-1'"
    let seen: { read_rows: number }[] = []
    for (let i = 0; i < 50 && seen.length === 0; i++) {
      await Bun.sleep(50)
      seen = await rows(client, lookup)
    }
    expect(seen).toHaveLength(1)
    controller.abort()
    expect(String(await scan)).toContain('aborted')
    const abortedAt = Date.now()
    while ((await rows(client, lookup)).length > 0) {
      if (Date.now() - abortedAt > 5_000) throw new Error('the aborted query still runs after 5 s')
      await Bun.sleep(50)
    }
  })

  test('KILL QUERY ... ASYNC cancels a running query; ... SYNC is refused instead of hanging', async () => {
    const victim = quiet()
      .query({ query: 'SELECT count() FROM numbers(1000000000000)', format: 'JSONEachRow', query_id: 'rig-kill-1' })
      .catch((e) => e)
    let killed: { kill_status: string }[] = []
    for (let i = 0; i < 50 && killed.length === 0; i++) {
      await Bun.sleep(50)
      killed = await rows(client, "KILL QUERY WHERE Settings['log_comment'] = 'rig-kill-1' ASYNC")
    }
    expect(killed).toHaveLength(1)
    const error = (await victim) as ClickHouseError
    expect(error.type).toBe('QUERY_WAS_CANCELLED')
    const sync = await failure(quiet().command({ query: "KILL QUERY WHERE query_id = 'nothing' SYNC" }))
    expect(sync.type).toBe('NOT_IMPLEMENTED')
  })

  test('two clients run concurrently: six 1-second sleeps finish in well under 6 s', async () => {
    const a = ch.createClient()
    const b = ch.createClient()
    const started = Date.now()
    const results = await Promise.all(
      [a, b, a, b, a, b].map((c, i) => rows<{ i: number }>(c, 'SELECT sleep(1), {i:UInt8} AS i', { i })),
    )
    const elapsed = Date.now() - started
    expect(results.map((r) => r[0]!.i)).toEqual([0, 1, 2, 3, 4, 5]) // each request's parameters stay its own
    expect(elapsed).toBeLessThan(2_500)
  })
})

describe('HTTP interface details', () => {
  test('a wrong password fails with 516 through the client, 403 and the exception header over HTTP', async () => {
    const wrong = ch.createClient({ password: 'wrong', log: { level: ClickHouseLogLevel.OFF } })
    const error = await failure(wrong.query({ query: 'SELECT 1' }))
    expect(error).toBeInstanceOf(ClickHouseError)
    expect(error.code).toBe('516')
    expect(error.type).toBe('AUTHENTICATION_FAILED')

    const response = await fetch(`${ch.url}/?query=SELECT%201`, {
      headers: { 'X-ClickHouse-User': USER, 'X-ClickHouse-Key': 'nope' },
    })
    expect(response.status).toBe(403)
    expect(response.headers.get('x-clickhouse-exception-code')).toBe('516')
    expect(await response.text()).toMatch(
      new RegExp(
        `^Code: 516\\. DB::Exception: ${USER}: Authentication failed: password is incorrect, or there is no user with such name\\. \\(AUTHENTICATION_FAILED\\) \\(version 26\\.`,
      ),
    )
  })

  test('X-ClickHouse-User/Key and URL credentials are accepted; /ping and GET / answer Ok.', async () => {
    const viaHeaders = await fetch(`${ch.url}/?query=SELECT%2042`, {
      headers: { 'X-ClickHouse-User': USER, 'X-ClickHouse-Key': PASSWORD },
    })
    expect(await viaHeaders.text()).toBe('42\n')
    const viaParams = await fetch(`${ch.url}/?user=${USER}&password=${encodeURIComponent(PASSWORD)}&query=SELECT%2043`)
    expect(await viaParams.text()).toBe('43\n')
    expect(await (await fetch(`${ch.url}/ping`)).text()).toBe('Ok.\n')
    expect(await (await fetch(`${ch.url}/`)).text()).toBe('Ok.\n')
  })

  test('errors are the server text with the exception code header; GET is read-only', async () => {
    const auth = { Authorization: `Basic ${btoa(`${USER}:${PASSWORD}`)}` }
    const failing = await fetch(`${ch.url}/`, { method: 'POST', headers: auth, body: 'SELECT throwIf(1)' })
    expect(failing.status).toBe(500)
    expect(failing.headers.get('x-clickhouse-exception-code')).toBe('395')
    expect(await failing.text()).toMatch(
      /^Code: 395\. DB::Exception: .*\(FUNCTION_THROW_IF_VALUE_IS_NON_ZERO\) \(version 26\.[\d.]+\)\n$/s,
    )
    const readOnly = await fetch(
      `${ch.url}/?query=${encodeURIComponent('CREATE TABLE via_get (x UInt8) ENGINE = Memory')}`,
      { headers: auth },
    )
    expect(readOnly.headers.get('x-clickhouse-exception-code')).toBe('164')
  })

  test('URL settings apply to the query: max_execution_time, readonly; an unknown one fails as on a server', async () => {
    const timedOut = await failure(
      quiet().query({
        query: 'SELECT count() FROM numbers(1000000000000)',
        clickhouse_settings: { max_execution_time: 1 },
      }),
    )
    expect(timedOut.type).toBe('TIMEOUT_EXCEEDED')
    const settings = { readonly: '1', max_threads: 3 } as const
    expect(await rows(client, "SELECT {x:UInt8} AS x, getSetting('max_threads') AS t", { x: 7 }, settings)).toEqual([
      { x: 7, t: 3 },
    ])
    const denied = await failure(
      quiet().command({ query: 'CREATE TABLE ro_t (x UInt8) ENGINE = Memory', clickhouse_settings: { readonly: '1' } }),
    )
    expect(denied.type).toBe('READONLY')
    const unknown = await failure(
      quiet().query({ query: 'SELECT 1', clickhouse_settings: { no_such_setting: 1 } as ClickHouseSettings }),
    )
    expect(unknown.code).toBe('115')
  })

  test('a session keeps its settings between requests; a plain request does not', async () => {
    const sql = "SELECT getSetting('max_threads') AS t"
    const inSession = ch.createClient({ session_id: `rig-session-${crypto.randomUUID()}` })
    await inSession.command({ query: 'SET max_threads = 1' })
    expect(await rows(inSession, sql)).toEqual([{ t: 1 }])
    await client.command({ query: 'SET max_threads = 1' })
    expect(await rows<{ t: number }>(client, sql)).not.toEqual([{ t: 1 }])
  })
})

describe('system.query_log and system.asynchronous_metrics', () => {
  test('created with the server schema, seeded with known rows, dropped again', async () => {
    await createSystemLogTables(ch)
    const columns = await rows<{ name: string; type: string }>(
      client,
      "SELECT name, type FROM system.columns WHERE database = 'system' AND table = 'query_log' AND name IN ('type', 'event_time_microseconds', 'normalized_query_hash', 'databases', 'exception_code', 'user', 'memory_usage') ORDER BY name",
    )
    expect(columns).toEqual([
      { name: 'databases', type: 'Array(LowCardinality(String))' },
      { name: 'event_time_microseconds', type: 'DateTime64(6)' },
      { name: 'exception_code', type: 'Int32' },
      { name: 'memory_usage', type: 'UInt64' },
      { name: 'normalized_query_hash', type: 'UInt64' },
      {
        name: 'type',
        type: "Enum8('QueryStart' = 1, 'QueryFinish' = 2, 'ExceptionBeforeStart' = 3, 'ExceptionWhileProcessing' = 4)",
      },
      { name: 'user', type: 'LowCardinality(String)' },
    ])

    const at = new Date('2026-01-02T03:04:05.678Z')
    await seedQueryLog(ch, [
      {
        event_time: at,
        query: 'SELECT * FROM t WHERE id = 1',
        query_duration_ms: 10,
        read_rows: 5,
        memory_usage: 1024,
        tables: ['default.t'],
      },
      { event_time: at, query: 'SELECT * FROM t WHERE id = 2', query_duration_ms: 30, read_rows: 7 },
      {
        event_time: at,
        query: 'SELECT broken',
        query_duration_ms: 1,
        type: 'ExceptionBeforeStart',
        exception_code: 47,
      },
    ])
    const logged = await rows<Record<string, unknown>>(
      client,
      `SELECT normalized_query_hash = normalizedQueryHash('SELECT * FROM t WHERE id = 99') AS same_shape, type, query_duration_ms,
              toUnixTimestamp64Micro(event_time_microseconds) AS event_us, toUnixTimestamp(query_start_time) AS start_s,
              query_kind, is_initial_query, user, exception_code, tables
       FROM system.query_log ORDER BY query`,
    )
    expect(logged).toEqual([
      {
        same_shape: 1,
        type: 'QueryFinish',
        query_duration_ms: 10,
        event_us: 1767323045678000,
        start_s: 1767323045,
        query_kind: 'Select',
        is_initial_query: 1,
        user: 'default',
        exception_code: 0,
        tables: ['default.t'],
      },
      {
        same_shape: 1,
        type: 'QueryFinish',
        query_duration_ms: 30,
        event_us: 1767323045678000,
        start_s: 1767323045,
        query_kind: 'Select',
        is_initial_query: 1,
        user: 'default',
        exception_code: 0,
        tables: [],
      },
      {
        same_shape: 0,
        type: 'ExceptionBeforeStart',
        query_duration_ms: 1,
        event_us: 1767323045678000,
        start_s: 1767323045,
        query_kind: 'Select',
        is_initial_query: 1,
        user: 'default',
        exception_code: 47,
        tables: [],
      },
    ])

    await seedAsynchronousMetrics(ch, [
      { metric: 'OSMemoryTotal', value: 8e9, description: 'Total memory' },
      { metric: 'Uptime', value: 3600 },
    ])
    expect(
      await rows(client, 'SELECT metric, value, description FROM system.asynchronous_metrics ORDER BY metric'),
    ).toEqual([
      { metric: 'OSMemoryTotal', value: 8e9, description: 'Total memory' },
      { metric: 'Uptime', value: 3600, description: '' },
    ])

    await dropSystemLogTables(ch)
    const gone = await failure(quiet().query({ query: 'SELECT count() FROM system.query_log' }))
    expect(gone.type).toBe('UNKNOWN_TABLE')
  })
})
