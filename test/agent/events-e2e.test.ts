// The events timeline end to end: the real agent against a real PostgreSQL 17, read back through
// GET /databases/{id}/events. Each change is made on the server and its event waited for, with the
// values PostgreSQL itself reports: an index created invalid (a failed CREATE UNIQUE INDEX CONCURRENTLY),
// made valid by REINDEX and dropped; a table and an index with hostile names (quotes, a newline,
// non-ASCII) named exactly; ALTER SYSTEM + pg_reload_conf (old and new value as SHOW prints them);
// pg_stat_statements_reset() (at pg_stat_statements_info.stats_reset); the agent stopped for a gap and
// started again (disconnect and connect); a PostgreSQL restart (at the new pg_postmaster_start_time()).
// Another organization's token gets 404, a bad window 400 with {"error"}.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { agentAccount } from '../support/server.ts'
import { until } from '../support/wait.ts'

interface Event {
  ts: string
  kind: string
  severity?: string
  title: string
  detail?: string
  object?: string
  link?: string
}

const HOSTILE_TABLE = `orders "it's"\nλ ☃`
const HOSTILE_INDEX = `idx "x"\n'; DROP TABLE t; -- ü`

let pg: PostgresServer
let dsn: string
let setup: postgres.Sql
let dir: string
let rig: AgentRig
let agent: Agent

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`
/** Epoch ms of a timestamptz expression as the agent computes it (truncated to the millisecond). */
const msOf = async (expression: string) =>
  Number((await setup.unsafe(`SELECT floor(extract(epoch FROM ${expression}) * 1000)::int8 AS ms`))[0]!.ms)

beforeAll(async () => {
  pg = await startPostgres(17, ['-c', 'shared_preload_libraries=pg_stat_statements'])
  dsn = await pg.freshDatabase()
  setup = postgres(dsn, { max: 1, onnotice: () => {} })
  await setup`CREATE EXTENSION pg_stat_statements`
  await setup`CREATE TABLE t (id int PRIMARY KEY, v int)`
  await setup`INSERT INTO t SELECT g, g % 10 FROM generate_series(1, 100) g`
  dir = mkdtempSync(join(tmpdir(), 'dbm-events-e2e-'))
  rig = await startAgentRig(dsn, 'timeline', dir)
  agent = rig.agent
})

afterAll(async () => {
  await agent?.stop()
  await rig?.server.stop()
  await setup?.end()
  await pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const events = (): Promise<Event[]> => rig.api('/events')

/** The first event matching `pick`, once the API lists it. */
function eventually(what: string, pick: (e: Event) => boolean, timeoutMs = 30_000): Promise<Event> {
  return until(what, async () => (await events()).find(pick), { timeoutMs, everyMs: 200 })
}

describe('events timeline (PostgreSQL 17)', () => {
  test("the agent's first batch is a connection; indexes and tables the agent has seen are not news", async () => {
    const first = await eventually('the first connection', (e) => e.kind === 'agent_connected')
    expect(first).toMatchObject({
      kind: 'agent_connected',
      severity: 'info',
      title: 'Agent connected',
      detail: 'first batch from the agent',
    })
    // a second tables sample has been compared with the first: t and its primary key stay quiet
    await until('two index samples', async () => ((await rig.api('/indexes')).length > 0 ? true : undefined))
    const list = await events()
    expect(list.filter((e) => e.kind.startsWith('index_') || e.kind.startsWith('table_'))).toEqual([])
  })

  test('an index created invalid, made valid, then dropped: three events naming it exactly', async () => {
    // duplicates in v: the concurrent unique build fails and leaves the index invalid
    await setup.unsafe('CREATE UNIQUE INDEX CONCURRENTLY t_v_unique ON t (v)').catch(() => {})
    const valid = await setup`SELECT indisvalid FROM pg_index WHERE indexrelid = 't_v_unique'::regclass`
    expect(valid[0]!.indisvalid).toBe(false)
    const created = await eventually(
      't_v_unique created',
      (e) => e.kind === 'index_created' && e.object === 'public.t_v_unique',
    )
    expect(created.title).toBe('Index created: public.t_v_unique')
    expect(created.detail).toBe(
      `${(await setup`SELECT pg_get_indexdef('t_v_unique'::regclass) AS d`)[0]!.d} (not valid yet: being built, or its build failed)`,
    )
    expect(created.link).toBe(`#/databases/${rig.dbId}/indexes/${encodeURIComponent('public/t_v_unique')}`)

    await setup`DELETE FROM t WHERE id > 10`
    await setup.unsafe('REINDEX INDEX t_v_unique')
    expect(
      (await setup`SELECT indisvalid FROM pg_index WHERE indexrelid = 't_v_unique'::regclass`)[0]!.indisvalid,
    ).toBe(true)
    const madeValid = await eventually(
      't_v_unique valid',
      (e) => e.kind === 'index_valid' && e.object === 'public.t_v_unique',
    )
    expect(madeValid.title).toBe('Index became valid: public.t_v_unique')

    await setup.unsafe('DROP INDEX t_v_unique')
    const dropped = await eventually(
      't_v_unique dropped',
      (e) => e.kind === 'index_dropped' && e.object === 'public.t_v_unique',
    )
    expect(dropped).toMatchObject({ title: 'Index dropped: public.t_v_unique', detail: 'on public.t' })
    // newest first
    const order = (await events()).filter((e) => e.object === 'public.t_v_unique').map((e) => e.kind)
    expect(order).toEqual(['index_dropped', 'index_valid', 'index_created'])
  })

  test('hostile table and index names come back intact as JSON strings', async () => {
    await setup.unsafe(`CREATE TABLE ${ident(HOSTILE_TABLE)} (id int)`)
    await setup.unsafe(`CREATE INDEX ${ident(HOSTILE_INDEX)} ON ${ident(HOSTILE_TABLE)} (id)`)
    const table = await eventually(
      'the hostile table',
      (e) => e.kind === 'table_created' && e.object === `public.${HOSTILE_TABLE}`,
    )
    expect(table.title).toBe(`Table created: public.${HOSTILE_TABLE}`)
    const index = await eventually(
      'the hostile index',
      (e) => e.kind === 'index_created' && e.object === `public.${HOSTILE_INDEX}`,
    )
    expect(index.title).toBe(`Index created: public.${HOSTILE_INDEX}`)
    expect(index.link).toBe(`#/databases/${rig.dbId}/indexes/${encodeURIComponent(`public/${HOSTILE_INDEX}`)}`)
    // the raw body holds them as JSON strings (escaped newline and quotes)
    const res = await fetch(`${rig.server.base}/api/v1/databases/${rig.dbId}/events`, {
      headers: { authorization: `Bearer ${rig.account.token}` },
    })
    const text = await res.text()
    expect(text).toContain(JSON.stringify(`Index created: public.${HOSTILE_INDEX}`))
  })

  test('ALTER SYSTEM and pg_reload_conf: a setting change with its old and new value', async () => {
    const before = String((await setup`SHOW work_mem`)[0]!.work_mem)
    await setup`ALTER SYSTEM SET work_mem = '7MB'`
    await setup`SELECT pg_reload_conf()`
    const fresh = postgres(dsn, { max: 1, onnotice: () => {} })
    const after = await until('the reload', async () => {
      const v = String((await fresh`SHOW work_mem`)[0]!.work_mem)
      return v === before ? undefined : v
    }).finally(() => fresh.end())
    expect(after).toBe('7MB')
    const change = await eventually('work_mem changed', (e) => e.kind === 'setting_change' && e.object === 'work_mem')
    expect(change).toMatchObject({ title: 'work_mem changed', detail: `${before} → ${after}`, severity: 'info' })
  })

  test('settings that may hold a secret never leave the database host: a conninfo password and a custom api_key', async () => {
    await setup`ALTER SYSTEM SET primary_conninfo = 'host=replica user=rep password=hunter2-conninfo'`
    await setup.unsafe(`ALTER SYSTEM SET "dbmtest.api_key" = 'sk-hunter2-custom'`)
    await setup`ALTER SYSTEM SET work_mem = '9MB'`
    await setup`SELECT pg_reload_conf()`
    // work_mem's change is in the same batch as the secrets': once it is listed, that batch was applied.
    const change = await eventually(
      'work_mem changed to 9MB',
      (e) => e.kind === 'setting_change' && e.object === 'work_mem' && String(e.detail).endsWith('→ 9MB'),
    )
    expect(change.title).toBe('work_mem changed')
    const res = await fetch(`${rig.server.base}/api/v1/databases/${rig.dbId}/events`, {
      headers: { authorization: `Bearer ${rig.account.token}` },
    })
    const text = await res.text()
    expect(text).not.toContain('hunter2')
    // Hidden before and after: no change is reported for them (the custom setting is new: it appears hidden).
    const list = JSON.parse(text) as { object?: string; detail?: string }[]
    expect(list.filter((e) => e.object === 'primary_conninfo')).toEqual([])
    for (const e of list.filter((e) => e.object === 'dbmtest.api_key')) expect(e.detail).not.toContain('sk-')
    await setup`ALTER SYSTEM RESET primary_conninfo`
    await setup.unsafe('ALTER SYSTEM RESET "dbmtest.api_key"')
    await setup`SELECT pg_reload_conf()`
  })

  test('pg_stat_statements_reset(): a reset event at its stats_reset time', async () => {
    await setup`SELECT pg_stat_statements_reset()`
    const at = await msOf('(SELECT stats_reset FROM pg_stat_statements_info)')
    const reset = await eventually(
      'the pg_stat_statements reset',
      (e) => e.kind === 'stats_reset' && e.object === 'pg_stat_statements',
    )
    expect(reset.title).toBe('Statistics reset: pg_stat_statements')
    expect(Date.parse(reset.ts)).toBe(at)
  })

  test('the agent stopped for a gap and started again: disconnected at its last batch, connected after', async () => {
    const lastBefore = Date.parse((await rig.api('')).last_seen_at)
    await agent.stop()
    // the gap must exceed 3 poll intervals (1 s each) of real time
    await until(
      'a gap of more than 3 poll intervals',
      async () => (Date.now() - lastBefore > 4_500 ? true : undefined),
      { timeoutMs: 10_000 },
    )
    agent = new Agent({ configPath: join(dir, 'config.yaml'), bufferDir: dir, log: createLogger('error', () => {}) })
    await agent.start()
    // (a loaded machine may delay a cycle past 3 intervals too: the restart's events are the ones naming it)
    const connected = await eventually(
      'the reconnection',
      (e) => e.kind === 'agent_connected' && / started at /.test(e.detail ?? ''),
    )
    expect(connected.detail).toMatch(/^after a gap of \d+ s; agent .+ started at \d{4}-\d\d-\d\dT/)
    const disconnected = await eventually(
      'the disconnection',
      (e) => e.kind === 'agent_disconnected' && (e.detail ?? '').endsWith(` to ${connected.ts})`),
    )
    expect(disconnected.severity).toBe('warning')
    expect(Date.parse(disconnected.ts)).toBeLessThan(Date.parse(connected.ts))
    expect(Date.parse(connected.ts) - Date.parse(disconnected.ts)).toBeGreaterThan(3_000)
  })

  test('a PostgreSQL restart: a restart event at the new pg_postmaster_start_time()', async () => {
    const previous = await msOf('pg_postmaster_start_time()')
    await setup.end()
    await pg.restart()
    setup = postgres(dsn, { max: 1, onnotice: () => {} })
    const started = await msOf('pg_postmaster_start_time()')
    expect(started).toBeGreaterThan(previous)
    const restart = await eventually('the restart', (e) => e.kind === 'restart', 60_000)
    expect(restart).toMatchObject({
      severity: 'warning',
      title: 'PostgreSQL restarted',
      detail: `started at ${new Date(started).toISOString()} (previous start ${new Date(previous).toISOString()})`,
    })
    expect(Date.parse(restart.ts)).toBe(started)
  })

  test("another organization's token gets 404; a bad window 400 with an error", async () => {
    const other = await agentAccount(rig.server)
    const res = await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/events`, { token: other.account.token })
    expect(res.status).toBe(404)
    expect(typeof (res.body as { error: unknown }).error).toBe('string')
    const bad = await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/events?since=yesterday`, {
      token: rig.account.token,
    })
    expect(bad.status).toBe(400)
    expect(bad.body).toEqual({ error: 'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z' })
    const limited = await rig.api('/events?limit=2')
    expect(limited.length).toBe(2)
  })
})
