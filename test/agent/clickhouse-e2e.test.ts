// ClickHouse end to end: the real agent (its ClickHouse runner, over @clickhouse/client and HTTP)
// against the real ClickHouse engine (the chdb rig), shipping to a real server, read back through the
// API. Seeded query_log rows come back as exact calls, time and p99; a running query shows in /active
// with its ClickHouse fields; `--check` names the server and its collectors; a collector disabled on the
// server stops from the next cycle; a server that goes away is reported and comes back on its own.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkConfig } from '../../src/agent/check.ts'
import { loadAgentConfig } from '../../src/agent/config.ts'
import { type AgentRig, startAgentRig, waitForCycles } from '../support/agent.ts'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'
import { createSystemLogTables, dropSystemLogTables, seedQueryLog } from '../support/clickhouse-system-tables.ts'
import { until } from '../support/wait.ts'

let ch: ClickHouseRig
let dir: string

beforeAll(async () => {
  ch = await startClickHouse({ user: 'dbm_agent', password: 'secret' })
  await createSystemLogTables(ch)
  dir = mkdtempSync(join(tmpdir(), 'dbm-clickhouse-e2e-'))
})

afterAll(async () => {
  await ch?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('ClickHouse through the agent', () => {
  let rig: AgentRig

  beforeAll(async () => {
    rig = await startAgentRig(ch.dsn, 'events', dir, { pingIntervalMs: 200 })
  })
  afterAll(async () => {
    await rig?.stop()
  })

  test('the database registers as ClickHouse with the server version and the HTTP port; healthz shows every collector ok', async () => {
    const db = await rig.api('')
    expect(db).toMatchObject({
      name: 'events',
      engine: 'clickhouse',
      engine_version: ch.version,
      host: '127.0.0.1',
      port: ch.port,
    })
    const status = await until('a cycle with every collector run', async () => {
      const s = rig.agent.status().databases[0]!
      return Object.keys(s.collectors).length === 10 ? s : undefined
    })
    expect(status).toMatchObject({
      name: 'events',
      engine: 'clickhouse',
      state: 'connected',
      server_version: ch.version,
      last_error: null,
    })
    expect(Object.keys(status.collectors)).toEqual([
      'query_stats',
      'activity',
      'parts',
      'merges',
      'mutations',
      'server_metrics',
      'log_events',
      'host',
      'security',
      'custom_metrics',
    ])
    expect(status.collectors.custom_metrics).toBe('skipped: no custom_metrics in the config')
    for (const [name, state] of Object.entries(status.collectors))
      if (name !== 'custom_metrics')
        expect(state).toMatch(
          /^ok in \d+ ms(; system\.text_log is disabled: .*|; security: user default cannot read system\.users, .*)?$/,
        )
  })

  test('seeded query_log rows come back through /queries with exact calls, time, rows, bytes and p99', async () => {
    // Wait for query_stats' baseline, so that the rows below are after it.
    await until('the query_stats baseline', async () =>
      rig.agent.status().databases[0]!.collectors.query_stats?.startsWith('ok') ? true : undefined,
    )
    const at = new Date(Date.now() + 1000)
    const row = (id: number, ms: number) => ({
      event_time: at,
      query: `SELECT count() FROM hits WHERE user_id = ${id}`,
      query_duration_ms: ms,
      result_rows: 1,
      read_bytes: 4096,
      memory_usage: 1 << 20,
    })
    await seedQueryLog(ch, [
      row(1, 12),
      row(2, 30),
      row(3, 8),
      row(4, 950),
      { ...row(5, 40), type: 'ExceptionWhileProcessing', exception_code: 241 },
    ])
    const hash = (
      await ch.query<{ hash: string }>(
        "SELECT toString(normalizedQueryHash('SELECT count() FROM hits WHERE user_id = 1')) AS hash",
      )
    )[0]!.hash
    const p99 = (
      await ch.query<{ p99: number }>(
        'SELECT quantileExact(0.99)(x) AS p99 FROM (SELECT arrayJoin([12, 30, 8, 950, 40]) AS x)',
      )
    )[0]!.p99
    const stat = await until('the statement in /queries', async () =>
      ((await rig.api('/queries')) as any[]).find((q) => q.query_hash === hash),
    )
    expect(stat).toMatchObject({
      query_hash: hash,
      total_calls: 5,
      total_time_ms: 12 + 30 + 8 + 950 + 40,
      mean_time_ms: 208,
      total_rows: 5,
    })
    expect(stat.query_text).toMatch(/^SELECT count\(\) FROM hits WHERE user_id = [1-5]$/)
    const detail = await rig.api(`/queries/${hash}`)
    expect(detail).toMatchObject({
      query_hash: hash,
      total_calls: 5,
      read_bytes: 5 * 4096,
      memory_bytes: 5 << 20,
      errors: 1,
      p99_ms: p99,
    })
    // Later cycles add nothing: the rows are counted once.
    await waitForCycles(rig.agent, 'events', 2)
    expect(((await rig.api('/queries')) as any[]).find((q) => q.query_hash === hash)).toMatchObject({ total_calls: 5 })
  })

  test("a running query shows in /active with its ClickHouse fields; the agent's own queries do not", async () => {
    const other = ch.createClient()
    const long = other.query({ query: 'SELECT sleep(3) AS slept', format: 'JSONEachRow' }).then((r) => r.json())
    try {
      const active = await until(
        'the sleeping query in /active',
        async () => {
          const list = (await rig.api('/active')) as any[]
          return list.find((a) => a.query_text.startsWith('SELECT sleep(3)'))
        },
        { timeoutMs: 10_000 },
      )
      expect(active).toMatchObject({
        state: 'active',
        blocking_pids: [],
        memory_usage: expect.any(Number),
        read_bytes: expect.any(Number),
        read_rows: expect.any(Number),
        written_bytes: expect.any(Number),
      })
      expect(active.duration_ms).toBeGreaterThan(0)
      expect(((await rig.api('/active')) as any[]).some((a) => a.query_text.includes('system.processes'))).toBe(false)
    } finally {
      expect(await long).toEqual([{ slept: 0 }])
      await other.close()
    }
  })

  test('inserts with merges stopped: /parts shows exactly that many active parts in the partition', async () => {
    await ch.command('CREATE TABLE clicks (day UInt8, id UInt64) ENGINE = MergeTree PARTITION BY day ORDER BY id')
    await ch.command('SYSTEM STOP MERGES clicks')
    for (let i = 0; i < 7; i++)
      await ch.insert('clicks', [
        { day: 1, id: i },
        { day: 1, id: i + 100 },
      ])
    await ch.insert('clicks', [{ day: 2, id: 1 }])
    const parts = await until('the new table in /parts', async () => {
      const body = await rig.api('/parts?table=clicks')
      return body.partitions?.length === 2 ? body : undefined
    })
    const partitions = parts.partitions.map((p: any) => [p.partition_id, p.active_parts, p.rows])
    expect(partitions).toEqual([
      ['1', 7, 14],
      ['2', 1, 1],
    ])
    expect(parts.tables).toEqual([
      expect.objectContaining({
        database: 'default',
        table: 'clicks',
        active_parts: 8,
        partition_count: 2,
        worst_partition_id: '1',
        max_partition_parts: 7,
        parts_to_delay_insert: 1000,
        parts_to_throw_insert: 3000,
      }),
    ])
  })

  test('a failing ALTER ... UPDATE shows as a stuck mutation in /mutations with the throwIf message', async () => {
    await ch.command('CREATE TABLE profiles (id UInt64, s String) ENGINE = MergeTree ORDER BY id')
    await ch.insert('profiles', [{ id: 1, s: 'a' }])
    await ch.command("ALTER TABLE profiles UPDATE s = 'b' WHERE throwIf(1)", undefined, { mutations_sync: 0 })
    const body = await until(
      'the stuck mutation in /mutations',
      async () => {
        const b = await rig.api('/mutations?stuck=true')
        return b.mutations?.some((m: any) => m.table === 'profiles' && m.latest_fail_reason) ? b : undefined
      },
      { timeoutMs: 15_000 },
    )
    const mutation = body.mutations.find((m: any) => m.table === 'profiles')
    expect(mutation).toMatchObject({
      database: 'default',
      table: 'profiles',
      is_done: false,
      parts_to_do: 1,
      stuck: true,
    })
    expect(mutation.command).toContain('throwIf(1)')
    expect(mutation.latest_fail_reason).toContain('FUNCTION_THROW_IF_VALUE_IS_NON_ZERO')
    expect(body.stuck_mutations).toBeGreaterThanOrEqual(1)
    await ch.command('KILL MUTATION WHERE table = {t:String}', { t: 'profiles' })
  })

  test('/server-metrics shows the disks, memory and the query counters after the baseline cycle', async () => {
    const [disk] = await ch.query<{ total_space: number | string }>(
      "SELECT total_space FROM system.disks WHERE name = 'default'",
    )
    const metrics = await until('query counters in /server-metrics', async () => {
      const m = await rig.api('/server-metrics')
      return m.queries_total !== null && m.queries_total !== undefined ? m : undefined
    })
    expect(metrics.disks).toContainEqual(
      expect.objectContaining({ name: 'default', total_bytes: Number(disk!.total_space) }),
    )
    expect(metrics.memory_used_bytes).toBeGreaterThan(0)
    expect(metrics.queries_total).toBeGreaterThanOrEqual(0)
    expect(metrics.timeseries.length).toBeGreaterThan(0)
  })

  test('a collector disabled on the server is skipped from the next cycle, and runs again when enabled', async () => {
    const patch = (disabled: string[]) =>
      rig.server.call('PATCH', `/api/v1/databases/${rig.dbId}`, {
        token: rig.account.token,
        body: { disabled_collectors: disabled },
      })
    expect((await patch(['merges'])).status).toBe(200)
    await until('merges skipped', async () =>
      rig.agent.status().databases[0]!.collectors.merges === 'skipped: disabled on the server' ? true : undefined,
    )
    expect((await patch([])).status).toBe(200)
    await until('merges back', async () =>
      rig.agent.status().databases[0]!.collectors.merges?.startsWith('ok') ? true : undefined,
    )
  })

  test("query_log disabled: the overview carries the agent's note saying so, and loses it once query_log is back", async () => {
    const note = { collector: 'query_stats', message: 'query_log is disabled: enable <query_log> in the server config' }
    // The rig has no text_log: log_events says so all along, as information (a choice of the server's configuration).
    const textLog = {
      collector: 'log_events',
      level: 'info',
      message:
        'system.text_log is disabled: ClickHouse errors come from system.errors only (enable <text_log> in the server config for warnings and fatal entries)',
    }
    // Nor may its user read system.users: the security collector says so, as information too.
    const users = {
      collector: 'security',
      level: 'info',
      message:
        'security: user default cannot read system.users, so users without a password or open to every network are not checked (GRANT SHOW USERS ON *.* TO default)',
    }
    expect((await rig.api('/overview')).agent_notes).toEqual([textLog, users])
    await dropSystemLogTables(ch)
    try {
      await until('the note in /overview', async () =>
        (await rig.api('/overview')).agent_notes.length > 2 ? true : undefined,
      )
      expect((await rig.api('/overview')).agent_notes).toEqual(expect.arrayContaining([note, textLog, users]))
    } finally {
      await createSystemLogTables(ch)
    }
    await until('the note gone', async () => ((await rig.api('/overview')).agent_notes.length === 2 ? true : undefined))
  })

  test('PostgreSQL-only endpoints answer 400 for this ClickHouse database', async () => {
    const res = await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/locks`, { token: rig.account.token })
    expect(res.status).toBe(400)
    expect(res.body).toEqual({ error: 'this endpoint serves postgres databases; "events" is a clickhouse database' })
  })
})

describe('--check with ClickHouse', () => {
  test('names the server version and the collectors, and notes missing query_log, text_log and crash_log without querying them; an unreachable server fails', async () => {
    const path = join(dir, 'check.yaml')
    writeFileSync(
      path,
      `api:\n  key: dbm_ak_0123456789abcdef_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ\ndatabases:\n  - name: events\n    dsn: ${ch.dsn}\n  - name: gone\n    dsn: clickhouse://u:hunter2@127.0.0.1:1/default\n`,
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
    const collectors =
      'collectors: query_stats, activity, parts, merges, mutations, server_metrics, log_events, host, security'
    const textLog =
      "system.text_log is missing: log_events reads errors from system.errors only, without the server's warnings and fatal messages, until <text_log> is enabled in the server config"
    const crashLog =
      'system.crash_log is missing: no crash recorded yet, or <crash_log> is not configured (it is by default); crashes are reported once it exists (SYSTEM FLUSH LOGS creates it when configured)'
    // The rig's engine runs as its `default` user, which has no SHOW USERS grant.
    const users =
      'security: user default cannot read system.users, so users without a password or open to every network are not checked (GRANT SHOW USERS ON *.* TO default)'
    const lines = await checkConfig(loadAgentConfig(path), 5)
    // The rig has query_log (created by the test) but neither text_log nor crash_log.
    expect(lines[0]).toEqual({
      ok: true,
      line: `ok    events: clickhouse ${ch.version}; ${collectors}; note: ${textLog}; ${crashLog}; ${users}`,
    })
    expect(lines[1]!.ok).toBe(false)
    expect(lines[1]!.line).toStartWith('FAIL  gone: clickhouse: ')
    expect(lines[1]!.line).not.toContain('hunter2')

    await dropSystemLogTables(ch)
    try {
      const [events] = await checkConfig(loadAgentConfig(path), 5)
      expect(events!.line).toEndWith(
        `; note: system.query_log is missing: query_stats stays empty until <query_log> is enabled; ${textLog}; ${crashLog}; ${users}`,
      )
    } finally {
      await createSystemLogTables(ch)
    }
    // With log_events off, its tables are not its business: no note about them.
    writeFileSync(
      path,
      `api:\n  key: dbm_ak_0123456789abcdef_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ\ndatabases:\n  - name: events\n    dsn: ${ch.dsn}\n    enabled_collectors: [query_stats]\n`,
    )
    expect((await checkConfig(loadAgentConfig(path), 5))[0]!.line).toEndWith(
      'collectors: query_stats; skipped: activity (not in enabled_collectors), parts (not in enabled_collectors), merges (not in enabled_collectors), mutations (not in enabled_collectors), server_metrics (not in enabled_collectors), log_events (not in enabled_collectors), host (not in enabled_collectors), security (not in enabled_collectors)',
    )
    // The missing tables were looked up, never queried: no UNKNOWN_TABLE error on the server from --check.
    expect(await unknownTables()).toBe(errorsBefore)
  })
})
