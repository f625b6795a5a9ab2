// The ClickHouse collectors against the real ClickHouse engine (test/support/clickhouse.ts), reached
// through connectClickHouse() as the agent reaches a server. Known states give exact expectations;
// every section a collector returns is checked against the wire schema the server validates with.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ClickHouseLogLevel } from '@clickhouse/client'
import { Value } from '@sinclair/typebox/value'
import {
  AGENT_LOG_COMMENT,
  connectClickHouse,
  type ClickHouseConnection,
} from '../../src/agent/clickhouse-connection.ts'
import { clickhouseCollectors } from '../../src/agent/collectors/clickhouse/index.ts'
import type { BatchSections, ClickHouseCollector, ClickHouseContext } from '../../src/agent/collectors/types.ts'
import { collectorsFor } from '../../src/shared/collectors.ts'
import type { Logger } from '../../src/shared/log.ts'
import { IngestBatch, type MutationEntry } from '../../src/shared/wire.ts'
import { startClickHouse, type ClickHouseRig } from '../support/clickhouse.ts'
import { SIGNAL_EVENTS, signalDeltas } from '../../src/agent/collectors/clickhouse/error-signals.ts'
import { counterDelta } from '../../src/agent/collectors/delta.ts'
import {
  createSystemLogTables,
  dropSystemLogTables,
  seedAsynchronousMetrics,
  seedQueryLog,
} from '../support/clickhouse-system-tables.ts'
import { until } from '../support/wait.ts'

let ch: ClickHouseRig
let conn: ClickHouseConnection

beforeAll(async () => {
  ch = await startClickHouse({ user: 'dbm_agent', password: 'secret' })
  conn = await connectClickHouse(ch.dsn, { requestTimeoutMs: 10_000, maxExecutionTimeS: 5 })
})

afterAll(async () => {
  await conn?.close()
  await ch?.stop()
})

interface LogLine {
  level: string
  message: string
}

function captureLog(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = []
  const at = (level: string) => (message: string) => void lines.push({ level, message })
  return { lines, enabled: () => true, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

function context(log = captureLog()): ClickHouseContext {
  return {
    name: 'ch',
    client: conn.client,
    version: conn.version,
    versionNum: conn.versionNum,
    major: conn.major,
    now: Date.now(),
    settings: { collectExplainPlans: false, collectReplication: false },
    state: new Map(),
    notes: new Map(),
    log,
  }
}

const collector = (name: string) => clickhouseCollectors.find((c) => c.name === name)!

/** Runs one cycle and checks the sections against the ingest schema, as the server would. */
async function run(c: ClickHouseCollector, ctx: ClickHouseContext): Promise<Partial<BatchSections>> {
  ctx.now = Date.now()
  const sections = await c.collect(ctx)
  const batch = {
    batch_id: 'batch-0001',
    collected_at: ctx.now,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name: 'ch', engine: 'clickhouse', host: '127.0.0.1', port: ch.port },
    ...sections,
  }
  if (!Value.Check(IngestBatch, batch))
    throw new Error(JSON.stringify([...Value.Errors(IngestBatch, batch)].slice(0, 3)))
  return sections
}

describe('connectClickHouse', () => {
  test('reads the version and quotes 64-bit integers; ping answers', async () => {
    expect(conn.version).toBe(ch.version)
    expect(conn.major).toBe(26)
    expect(conn.versionNum).toBe(26_000 + Number(ch.version.split('.')[1]))
    const [row] = await (
      await conn.client.query({
        query: 'SELECT toUInt64(18446744073709551615) AS big, 1 AS small',
        format: 'JSONEachRow',
      })
    ).json()
    expect(row).toEqual({ big: '18446744073709551615', small: 1 })
    expect(await conn.ping()).toBe(true)
  })

  test('every query runs under max_execution_time', async () => {
    const [row] = await (
      await conn.client.query({ query: "SELECT getSetting('max_execution_time') AS t", format: 'JSONEachRow' })
    ).json()
    expect(row).toEqual({ t: 5 })
  })

  test('the collectors are exactly the ClickHouse names of the name table', () => {
    expect(clickhouseCollectors.map((c) => c.name)).toEqual(collectorsFor('clickhouse'))
    expect(clickhouseCollectors.every((c) => c.engine === 'clickhouse')).toBe(true)
  })
})

describe('query_stats', () => {
  test('finished and failed initial queries since the baseline, grouped by normalized hash', async () => {
    await createSystemLogTables(ch)
    const c = collector('query_stats')
    const ctx = context()
    await seedQueryLog(ch, [
      { query: 'SELECT * FROM t WHERE id = 0', query_duration_ms: 99_999, event_time: new Date(Date.now() - 60_000) },
    ])
    expect(await run(c, ctx)).toEqual({}) // the baseline
    await Bun.sleep(5)
    const at = new Date(Date.now() + 1)
    const row = (id: number, query_duration_ms: number) => ({
      event_time: at,
      query: `SELECT * FROM t WHERE id = ${id}`,
      query_duration_ms,
      result_rows: 2,
      read_bytes: 100,
      memory_usage: 1000,
    })
    await seedQueryLog(ch, [
      row(1, 10),
      row(2, 20),
      row(3, 30),
      row(4, 40),
      row(5, 1000),
      { ...row(6, 7), type: 'ExceptionWhileProcessing', exception_code: 395, result_rows: 0 },
      { ...row(7, 5000), type: 'ExceptionBeforeStart', exception_code: 62 }, // never ran: not counted
      { ...row(8, 5000), type: 'QueryStart' },
      { ...row(9, 5000), is_initial_query: 0 }, // a distributed sub-query
      {
        event_time: at,
        query: 'INSERT INTO t VALUES',
        query_kind: 'Insert',
        query_duration_ms: 3,
        written_rows: 50,
        result_rows: 50,
      },
    ])
    const [expectedP99] = await ch.query<{ p: number }>(
      'SELECT quantileExact(0.99)(x) AS p FROM (SELECT arrayJoin([10, 20, 30, 40, 1000, 7]) AS x)',
    )
    const hash = (
      await ch.query<{ h: string }>("SELECT toString(normalizedQueryHash('SELECT * FROM t WHERE id = 1')) AS h")
    )[0]!.h
    const { query_stats } = await run(c, ctx)
    expect(query_stats).toHaveLength(2)
    const select = query_stats!.find((s) => s.query_hash === hash)
    expect(select).toEqual({
      query_hash: hash,
      query_text: expect.stringMatching(/^SELECT \* FROM t WHERE id = [1-6]$/),
      calls: 6,
      total_time_ms: 10 + 20 + 30 + 40 + 1000 + 7,
      rows: 10,
      shared_blks_hit: 0,
      shared_blks_read: 0,
      read_bytes: 600,
      memory_bytes: 6000,
      p99_ms: expectedP99!.p,
      errors: 1,
    })
    expect(select!.p99_ms).toBe(1000)
    const insert = query_stats!.find((s) => s.query_hash !== hash)!
    expect(insert).toMatchObject({ calls: 1, rows: 50, errors: 0, total_time_ms: 3 })

    // Nothing new: an empty list; then only the newer rows count.
    expect(await run(c, ctx)).toEqual({ query_stats: [] })
    await seedQueryLog(ch, [{ ...row(10, 15), event_time: new Date(Date.now() + 2) }])
    const next = await run(c, ctx)
    expect(next.query_stats!.map((s) => [s.query_hash, s.calls, s.total_time_ms])).toEqual([[hash, 1, 15]])
  })

  test('the watermark is exact to the microsecond: a row later in its second counts, one at it or before does not', async () => {
    await createSystemLogTables(ch)
    const second = Math.floor(Date.now() / 1000) - 10
    const ctx = context()
    ctx.state.set('query_stats', { sinceUs: String(second * 1_000_000 + 500_000) })
    const at = (ms: number, query_duration_ms: number) => ({
      event_time: new Date(second * 1000 + ms),
      query: 'SELECT watermark_probe FROM t',
      query_duration_ms,
    })
    await seedQueryLog(ch, [at(-100, 1), at(499, 2), at(500, 4), at(501, 8), at(1_200, 16)])
    const { query_stats } = await run(collector('query_stats'), ctx)
    const mine = query_stats!.find((s) => s.query_text === 'SELECT watermark_probe FROM t')
    expect(mine).toMatchObject({ calls: 2, total_time_ms: 8 + 16 })
  })

  test('query_log missing: one clear warning over several cycles, nothing sent, no error on the server; back again after it returns', async () => {
    await dropSystemLogTables(ch)
    // A real server always has asynchronous_metrics (chdb has not): only query_log is missing here.
    await ch.command(
      'CREATE TABLE system.asynchronous_metrics (metric String, value Float64, description String) ENGINE = Memory',
    )
    const unknownTables = async () =>
      Number(
        (
          await ch.query<{ n: string }>(
            "SELECT toString(sum(value)) AS n FROM system.errors WHERE name = 'UNKNOWN_TABLE'",
          )
        )[0]?.n ?? 0,
      )
    const errorsBefore = await unknownTables()
    const log = captureLog()
    const ctx = context(log)
    const c = collector('query_stats')
    const metricsCtx = context()
    for (let i = 0; i < 3; i++) {
      expect(await run(c, ctx)).toEqual({})
      expect((await run(collector('server_metrics'), metricsCtx)).server_metrics?.queries_logged).toBeUndefined()
    }
    expect(log.lines).toEqual([
      { level: 'warn', message: 'query_log is disabled: enable <query_log> in the server config' },
    ])
    // The table is looked up in system.tables, never queried while missing: system.errors (which
    // log_events reports) gains no UNKNOWN_TABLE from the agent's own cycles.
    expect(await unknownTables()).toBe(errorsBefore)
    await createSystemLogTables(ch)
    expect(await run(c, ctx)).toEqual({}) // a new baseline
    expect(await run(c, ctx)).toEqual({ query_stats: [] })
    expect(log.lines.map((l) => l.level)).toEqual(['warn', 'info'])
  })
})

describe('parts, merges, mutations', () => {
  test('inserts with merges stopped: the partition shows exactly that many active parts', async () => {
    await ch.command('CREATE TABLE parts_t (p UInt8, id UInt64) ENGINE = MergeTree PARTITION BY p ORDER BY id')
    await ch.command('SYSTEM STOP MERGES parts_t')
    for (let i = 0; i < 4; i++)
      await ch.insert('parts_t', [
        { p: 1, id: i },
        { p: 1, id: i + 100 },
      ])
    await ch.insert('parts_t', [{ p: 2, id: 1 }])
    const { parts } = await run(collector('parts'), context())
    const mine = parts!
      .filter((p) => p.table === 'parts_t')
      .sort((a, b) => a.partition_id.localeCompare(b.partition_id))
    expect(mine).toEqual([
      {
        database: 'default',
        table: 'parts_t',
        partition_id: '1',
        active_parts: 4,
        rows: 8,
        bytes_on_disk: expect.any(Number),
        parts_to_delay_insert: 1000,
        parts_to_throw_insert: 3000,
      },
      {
        database: 'default',
        table: 'parts_t',
        partition_id: '2',
        active_parts: 1,
        rows: 1,
        bytes_on_disk: expect.any(Number),
        parts_to_delay_insert: 1000,
        parts_to_throw_insert: 3000,
      },
    ])
    expect(mine[0]!.bytes_on_disk).toBeGreaterThan(mine[1]!.bytes_on_disk)
    expect(parts![0]!.active_parts).toBe(4) // the worst partition first
  })

  test("a table's own parts_to_delay_insert / parts_to_throw_insert replace the server defaults", async () => {
    await ch.command(
      'CREATE TABLE parts_own (id UInt64) ENGINE = MergeTree ORDER BY id SETTINGS parts_to_delay_insert = 20, parts_to_throw_insert = 40, inactive_parts_to_delay_insert = 5',
    )
    await ch.command('CREATE TABLE parts_altered (id UInt64) ENGINE = MergeTree ORDER BY id')
    await ch.command('ALTER TABLE parts_altered MODIFY SETTING parts_to_throw_insert = 500')
    for (const table of ['parts_own', 'parts_altered']) await ch.insert(table, [{ id: 1 }])
    const { parts } = await run(collector('parts'), context())
    const thresholds = (table: string) =>
      parts!.filter((p) => p.table === table).map((p) => [p.parts_to_delay_insert, p.parts_to_throw_insert])
    expect(thresholds('parts_own')).toEqual([[20, 40]])
    expect(thresholds('parts_altered')).toEqual([[1000, 500]])
    expect(thresholds('parts_t')).toEqual([
      [1000, 3000],
      [1000, 3000],
    ])
  })

  test('merges: an idle server has none, and the empty section is valid', async () => {
    expect(await run(collector('merges'), context())).toEqual({ merges: [] })
  })

  test('a failing ALTER ... UPDATE is a stuck mutation with the throwIf message; a finished one is not stuck', async () => {
    await ch.command('CREATE TABLE mut_t (id UInt64, s String) ENGINE = MergeTree ORDER BY id')
    await ch.insert('mut_t', [{ id: 1, s: 'a' }])
    await ch.command("ALTER TABLE mut_t UPDATE s = 'x' WHERE id = 1", undefined, { mutations_sync: 0 })
    await ch.command("ALTER TABLE mut_t UPDATE s = 'b' WHERE throwIf(1)", undefined, { mutations_sync: 0 })
    const ctx = context()
    const found = await until(
      'the failing mutation',
      async () => {
        const { mutations } = await run(collector('mutations'), ctx)
        const mine = mutations!.filter((m) => m.table === 'mut_t')
        return mine.length === 2 && mine.some((m) => m.latest_fail_reason !== '') && mine.some((m) => m.is_done)
          ? mine
          : undefined
      },
      { everyMs: 50, timeoutMs: 10_000 },
    )
    const failing = found.find((m) => m.command.includes('throwIf'))!
    expect(failing).toMatchObject({
      database: 'default',
      table: 'mut_t',
      is_done: false,
      parts_to_do: 1,
      stuck: true,
    } satisfies Partial<MutationEntry>)
    expect(failing.latest_fail_reason).toContain('FUNCTION_THROW_IF_VALUE_IS_NON_ZERO')
    expect(failing.latest_fail_reason).toContain("Value passed to 'throwIf' function is non-zero")
    expect(failing.latest_fail_time).toBeGreaterThan(0)
    expect(Math.abs(failing.create_time - Date.now())).toBeLessThan(60_000)
    const done = found.find((m) => !m.command.includes('throwIf'))!
    expect(done).toMatchObject({
      is_done: true,
      parts_to_do: 0,
      stuck: false,
      latest_fail_reason: '',
      latest_fail_time: null,
    })
  })
})

describe('activity', () => {
  test("a running SELECT sleep(3) is listed with its duration; the agent's own query is not", async () => {
    const other = ch.createClient()
    const long = other.query({ query: 'SELECT sleep(3) AS slept', format: 'JSONEachRow' }).then((r) => r.json())
    const ctx = context()
    try {
      const { activity, all } = await until(
        'the sleeping query',
        async () => {
          const { activity } = await run(collector('activity'), ctx)
          const mine = activity!.filter((a) => a.query_text.startsWith('SELECT sleep(3)'))
          return mine.length > 0 && mine[0]!.duration_ms! > 0 ? { activity: mine, all: activity! } : undefined
        },
        { everyMs: 50, timeoutMs: 10_000 },
      )
      expect(activity).toHaveLength(1)
      // The rig runs every request as chdb's own user, so the user is not the HTTP one here.
      expect(activity[0]).toMatchObject({
        state: 'active',
        user: expect.any(String),
        blocking_pids: [],
        database: 'default',
        memory_usage: expect.any(Number),
        read_bytes: expect.any(Number),
        read_rows: expect.any(Number),
      })
      expect(typeof activity[0]!.pid).toBe('string')
      expect(activity[0]!.duration_ms).toBeGreaterThan(0)
      expect(all.some((a) => a.query_text.includes('system.processes'))).toBe(false)
    } finally {
      expect(await long).toEqual([{ slept: 0 }])
    }
  })
})

describe('server_metrics', () => {
  test('uptime, memory against the limit, disks, connections; query counters as deltas after a baseline', async () => {
    await createSystemLogTables(ch)
    await seedAsynchronousMetrics(ch, [
      { metric: 'MemoryResident', value: 123_456_789 },
      { metric: 'OSMemoryTotal', value: 8e9 },
      { metric: 'Uptime', value: 3600 },
    ])
    const c = collector('server_metrics')
    const ctx = context()
    const first = (await run(c, ctx)).server_metrics!
    const [disk] = await ch.query<{ name: string; total_space: number }>(
      "SELECT name, total_space FROM system.disks WHERE name = 'default'",
    )
    expect(first).toMatchObject({
      memory_resident_bytes: 123_456_789,
      os_memory_total_bytes: 8e9,
      tcp_connections: 0,
      'disk.default.total_bytes': disk!.total_space,
    })
    expect(first.uptime_s).toBeGreaterThan(0)
    expect(first['disk.default.free_bytes']).toBeGreaterThan(0)
    expect(first.memory_limit_bytes).toBeGreaterThan(0)
    expect(first.http_connections).toBeGreaterThanOrEqual(0)
    expect('queries_total' in first || 'queries_failed' in first).toBe(false) // the baseline

    const quiet = ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
    for (let i = 0; i < 2; i++) await quiet.query({ query: 'SELECT throwIf(1)' }).catch(() => {})
    const second = (await run(c, ctx)).server_metrics!
    expect(second.queries_failed).toBe(2)
    expect(second.queries_total).toBeGreaterThanOrEqual(2)
  })

  test('delayed and rejected inserts, detached parts; no replica keys without Replicated tables', async () => {
    await ch.command(
      'CREATE TABLE delayed_t (id UInt64) ENGINE = MergeTree ORDER BY id SETTINGS parts_to_delay_insert = 2, parts_to_throw_insert = 3',
    )
    await ch.command('SYSTEM STOP MERGES delayed_t')
    const c = collector('server_metrics')
    const ctx = context()
    const first = (await run(c, ctx)).server_metrics!
    expect(first.detached_parts).toBe(0)
    expect('delayed_inserts' in first).toBe(false) // the baseline
    // The third insert finds 2 parts (delayed: max_delay_to_insert, 1 s); the fourth finds 3 (refused).
    for (let i = 0; i < 3; i++) await ch.insert('delayed_t', [{ id: i }])
    const quiet = ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
    expect(
      await quiet.insert({ table: 'delayed_t', values: [{ id: 9 }], format: 'JSONEachRow' }).catch((e) => e.type),
    ).toBe('TOO_MANY_PARTS')
    const [part] = await ch.query<{ name: string }>(
      "SELECT name FROM system.parts WHERE table = 'delayed_t' AND active ORDER BY name LIMIT 1",
    )
    await ch.command(`ALTER TABLE delayed_t DETACH PART '${part!.name}'`)
    const second = (await run(c, ctx)).server_metrics!
    expect(second).toMatchObject({ delayed_inserts: 1, rejected_inserts: 1, detached_parts: 1 })
    for (const key of ['replicas_readonly', 'replication_queue_size', 'max_replica_delay_s'])
      expect(key in second).toBe(false)
    await ch.command('DROP TABLE delayed_t SYNC')
    expect((await run(c, ctx)).server_metrics).toMatchObject({
      delayed_inserts: 0,
      rejected_inserts: 0,
      detached_parts: 0,
    })
  })

  test("queries_logged, queries_logged_failed and query_p99_ms: the queries query_log recorded since the previous cycle, without the agent's", async () => {
    await createSystemLogTables(ch)
    const c = collector('server_metrics')
    const ctx = context()
    await seedQueryLog(ch, [
      { query: 'SELECT 0', query_duration_ms: 99_999, event_time: new Date(Date.now() - 60_000) },
    ])
    const baseline = (await run(c, ctx)).server_metrics!
    expect('queries_logged' in baseline || 'query_p99_ms' in baseline).toBe(false)
    await Bun.sleep(5)
    const at = new Date(Date.now() + 1)
    const durations = Array.from({ length: 200 }, (_, i) => (i + 1) * 10) // 10 ms .. 2000 ms
    const agents = { event_time: at, query: 'SELECT agent', query_duration_ms: 60_000, log_comment: AGENT_LOG_COMMENT }
    await seedQueryLog(ch, [
      agents,
      ...durations.map((ms) => ({ event_time: at, query: `SELECT ${ms}`, query_duration_ms: ms })),
      {
        event_time: at,
        query: 'SELECT 1',
        query_duration_ms: 1,
        type: 'ExceptionWhileProcessing' as const,
        exception_code: 395,
      },
      {
        event_time: at,
        query: 'SELEC 1',
        query_duration_ms: 90_000,
        type: 'ExceptionBeforeStart' as const,
        exception_code: 62,
      }, // failed, never ran: no duration
      { event_time: at, query: 'SELECT big', query_duration_ms: 60_000, type: 'QueryStart' as const },
      { event_time: at, query: 'SELECT sub', query_duration_ms: 60_000, is_initial_query: 0 as const },
    ])
    const [expected] = await ch.query<{ p: number }>(
      `SELECT quantileExact(0.99)(x) AS p FROM (SELECT arrayJoin([${[...durations, 1].join(',')}]) AS x)`,
    )
    const second = (await run(c, ctx)).server_metrics!
    expect(second).toMatchObject({ queries_logged: 202, queries_logged_failed: 2, query_p99_ms: expected!.p })
    expect(second.query_p99_ms).toBe(1980) // quantileExact: the value at floor(0.99 × 201) of the sorted 201
    // Nothing new: counts of 0 and no p99.
    const third = (await run(c, ctx)).server_metrics!
    expect(third).toMatchObject({ queries_logged: 0, queries_logged_failed: 0 })
    expect('query_p99_ms' in third).toBe(false)
  })

  test('without system.asynchronous_metrics its keys are left out, not an error', async () => {
    await dropSystemLogTables(ch)
    const ctx = context()
    await run(collector('server_metrics'), ctx)
    const metrics = (await run(collector('server_metrics'), ctx)).server_metrics!
    expect('memory_resident_bytes' in metrics).toBe(false)
    expect('queries_logged' in metrics || 'query_p99_ms' in metrics).toBe(false)
    expect(metrics.uptime_s).toBeGreaterThan(0)
    expect(Object.keys(metrics).some((k) => k.startsWith('disk.'))).toBe(true)
  })
})

describe('server_metrics: error signals', () => {
  /** The engine's own system.events counters, by name (0 for one that never moved). */
  const engineEvents = async (names: string[]) => {
    const rows = await ch.query<{ event: string; value: string }>(
      'SELECT event, toString(value) AS value FROM system.events WHERE event IN {names:Array(String)}',
      { names },
    )
    return Object.fromEntries(names.map((n) => [n, Number(rows.find((r) => r.event === n)?.value ?? 0)]))
  }

  test('a refused remote(): DistributedConnectionFailTry and FailAtAll, as the engine counts them', async () => {
    const c = collector('server_metrics')
    const ctx = context()
    const names = ['DistributedConnectionFailTry', 'DistributedConnectionFailAtAll']
    const first = (await run(c, ctx)).server_metrics!
    expect('distributed_connection_fail_try' in first).toBe(false) // the baseline
    const before = await engineEvents(names)
    const quiet = ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
    expect(
      await quiet.query({ query: "SELECT * FROM remote('127.0.0.1:1', system.one)" }).catch((e) => e.type),
    ).toMatch(/^(NETWORK_ERROR|NO_REMOTE_SHARD_AVAILABLE)$/)
    const after = await engineEvents(names)
    const second = (await run(c, ctx)).server_metrics!
    // connections_with_failover_max_tries = 3 refused tries, then one failure of them all.
    expect(second).toMatchObject({ distributed_connection_fail_try: 3, distributed_connection_fail_at_all: 1 })
    expect([second.distributed_connection_fail_try, second.distributed_connection_fail_at_all]).toEqual(
      names.map((n) => after[n]! - before[n]!),
    )
    // The gauges are read every cycle: no Keeper, nothing queued, nothing preempted on the rig.
    expect(second).toMatchObject({
      zookeeper_sessions: 0,
      distributed_files_to_insert: 0,
      queries_preempted: 0,
      buffer_flush_errors: 0,
      dns_errors: 0,
    })
  })

  test('a Buffer table whose flush breaks a constraint of its destination: StorageBufferErrorOnFlush, exactly', async () => {
    const c = collector('server_metrics')
    const ctx = context()
    await run(c, ctx)
    const before = await engineEvents(['StorageBufferErrorOnFlush'])
    await ch.command(
      'CREATE TABLE buffer_dst (id UInt64, CONSTRAINT big CHECK id > 100) ENGINE = MergeTree ORDER BY id',
    )
    // Flushed after 1 to 2 s; each failed flush is retried (the rows stay in the buffer).
    await ch.command(
      'CREATE TABLE buffer_src (id UInt64) ENGINE = Buffer(default, buffer_dst, 1, 1, 2, 1000000, 1000000, 1000000000, 1000000000)',
    )
    await ch.insert('buffer_src', [{ id: 1 }])
    await until(
      'a failed flush',
      async () =>
        (await engineEvents(['StorageBufferErrorOnFlush'])).StorageBufferErrorOnFlush! >
        before.StorageBufferErrorOnFlush!
          ? true
          : undefined,
      {
        everyMs: 100,
        timeoutMs: 20_000,
      },
    )
    await ch.command('DROP TABLE buffer_src SYNC').catch(() => {})
    await ch.command('DROP TABLE buffer_dst SYNC')
    const after = await engineEvents(['StorageBufferErrorOnFlush'])
    const { server_metrics } = await run(c, ctx)
    expect(server_metrics!.buffer_flush_errors).toBe(
      after.StorageBufferErrorOnFlush! - before.StorageBufferErrorOnFlush!,
    )
    expect(server_metrics!.buffer_flush_errors).toBeGreaterThanOrEqual(1)
  })

  test('120 one-row INSERTs: insert_queries and inserted_rows of 120, as InsertQuery and InsertedRows count them', async () => {
    await ch.command('CREATE TABLE small_inserts_t (id UInt64) ENGINE = MergeTree ORDER BY id')
    const c = collector('server_metrics')
    const ctx = context()
    await run(c, ctx)
    const names = ['InsertQuery', 'InsertedRows']
    const before = await engineEvents(names)
    for (let i = 0; i < 120; i++) await ch.command(`INSERT INTO small_inserts_t VALUES (${i})`)
    const after = await engineEvents(names)
    const { server_metrics } = await run(c, ctx)
    expect(server_metrics).toMatchObject({ insert_queries: 120, inserted_rows: 120 })
    expect([server_metrics!.insert_queries, server_metrics!.inserted_rows]).toEqual(
      names.map((n) => after[n]! - before[n]!),
    )
    await ch.command('DROP TABLE small_inserts_t SYNC')
  })

  test("recorded rows of other versions: NetworkErrors (DNSError's name before 20.3) adds to dns_errors; a reset counts from zero", () => {
    // system.events rows of a 20.1 server, two cycles apart.
    const previous = {
      NetworkErrors: 7,
      ReplicatedPartFailedFetches: 10,
      ReplicatedDataLoss: 1,
      ZooKeeperHardwareExceptions: 4,
      SlowRead: 2,
    }
    const current = {
      NetworkErrors: 12,
      ReplicatedPartFailedFetches: 13,
      ReplicatedDataLoss: 1,
      ZooKeeperHardwareExceptions: 1,
      SlowRead: 9,
      ReadBufferFromFileDescriptorReadFailed: 2,
    }
    const deltas = signalDeltas(previous, current, counterDelta)
    expect(deltas).toMatchObject({
      dns_errors: 5,
      replicated_part_failed_fetches: 3,
      replicated_data_loss: 0,
      zookeeper_hardware_exceptions: 1, // went down: the server restarted, 1 since
      slow_reads: 7,
      file_read_failures: 2,
      file_write_failures: 0,
    })
    // Both names on one server (never seen, but harmless): their deltas add up.
    expect(
      signalDeltas({ DNSError: 1, NetworkErrors: 1 }, { DNSError: 3, NetworkErrors: 2 }, counterDelta).dns_errors,
    ).toBe(3)
    expect(new Set(Object.values(SIGNAL_EVENTS)).size).toBe(Object.keys(SIGNAL_EVENTS).length - 1)
  })
})

describe('host', () => {
  test("CPU, load and memory from asynchronous_metrics; disks as system.disks says, read once with server_metrics'", async () => {
    await createSystemLogTables(ch)
    await seedAsynchronousMetrics(ch, [
      { metric: 'OSUserTimeNormalized', value: 0.25 },
      { metric: 'OSSystemTimeNormalized', value: 0.1 },
      { metric: 'OSIOWaitTimeNormalized', value: 0.05 },
      { metric: 'OSStealTimeNormalized', value: 0.01 },
      { metric: 'OSIdleTimeNormalized', value: 0.59 },
      { metric: 'LoadAverage1', value: 1.5 },
      { metric: 'LoadAverage5', value: 1.25 },
      { metric: 'LoadAverage15', value: 1 },
      { metric: 'OSMemoryTotal', value: 8e9 },
      { metric: 'OSMemoryAvailable', value: 2e9 },
      { metric: 'NumberOfCPUCores', value: 4 },
      { metric: 'AsynchronousMetricsUpdateInterval', value: 1 },
      { metric: 'BlockReadBytes_sda', value: 4096 },
      { metric: 'BlockWriteBytes_sda', value: 8192 },
      { metric: 'BlockReadOps_sda', value: 1 },
      { metric: 'BlockWriteOps_sda', value: 2 },
      { metric: 'BlockActiveTime_sda', value: 0.01 },
    ])
    const ctx = context()
    const query = ctx.client.query.bind(ctx.client)
    let diskReads = 0
    ctx.client = Object.assign(Object.create(ctx.client), {
      query: (params: Parameters<typeof query>[0]) => {
        if (params.query.includes('system.disks')) diskReads++
        return query(params)
      },
    })
    ctx.now = Date.now()
    const metrics = (await collector('server_metrics').collect(ctx)).server_metrics!
    const first = (await collector('host').collect(ctx)).host!
    expect(diskReads).toBe(1)
    const disks = await ch.query<{ name: string; path: string; total_space: number }>(
      'SELECT name, path, total_space FROM system.disks ORDER BY name',
    )
    expect(first.filesystems.map((f) => [f.roles, f.path, f.total_bytes])).toEqual(
      disks.map((d) => [[`disk:${d.name}`], d.path, d.total_space]),
    )
    expect(first.filesystems[0]!.available_bytes).toBe(metrics['disk.default.free_bytes']!)
    expect(first).toMatchObject({
      source: 'clickhouse',
      cpu_count: 4,
      cpu: { user: 25, system: 10, iowait: 5, steal: 1, idle: 59 },
      load: { load1: 1.5, load5: 1.25, load15: 1 },
      memory: { total_bytes: 8e9, available_bytes: 2e9, swap_total_bytes: null, swap_used_bytes: null },
      devices: [],
    })
    // The next cycle, 10 s later: the block figures (per 1 s update interval) scaled to the 10 s.
    ctx.now += 10_000
    const second = (await collector('host').collect(ctx)).host!
    expect(second.devices).toEqual([
      { device: 'sda', reads: 10, writes: 20, read_bytes: 40_960, write_bytes: 81_920, busy_ms: 100 },
    ])
  })
})
