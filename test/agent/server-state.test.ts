// The agent's server_state (src/agent/server-state.ts): on each tested PostgreSQL major, the server's start
// as PostgreSQL prints pg_postmaster_start_time(), the settings as SHOW prints them without the ones the
// session set, and the reset times of the statistics views that version has; the settings travel with
// the first cycle and when their digest changes, and again after a lost batch.
import { afterAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { SettingsCache, SettingsTracker, postgresFacts, settingsHash } from '../../src/agent/server-state.ts'
import { postgresMajors, sharedPostgres } from '../support/postgres.ts'

const open: postgres.Sql[] = []
afterAll(async () => {
  for (const sql of open) await sql.end()
})

describe('SettingsTracker', () => {
  test('the settings go with the first cycle and when they change; the digest always; again after a lost batch', () => {
    const tracker = new SettingsTracker()
    const a = { work_mem: '4MB', jit: 'on' }
    const b = { work_mem: '8MB', jit: 'on' }
    expect(tracker.section({ started_at: 5, settings: a }, 1)).toEqual({
      agent_started_at: 1,
      started_at: 5,
      settings_hash: settingsHash(a),
      settings: a,
    })
    expect(tracker.section({ started_at: 5, settings: { jit: 'on', work_mem: '4MB' } }, 1)).toEqual({
      agent_started_at: 1,
      started_at: 5,
      settings_hash: settingsHash(a),
    })
    expect(tracker.section({ settings: b }, 1)).toEqual({
      agent_started_at: 1,
      settings_hash: settingsHash(b),
      settings: b,
    })
    tracker.lost()
    expect(tracker.section({ settings: b }, 1).settings).toEqual(b)
    expect(settingsHash(a)).not.toBe(settingsHash(b))
  })

  test('the details go with the first cycle and when they change (a pending restart with the value unchanged), again after a lost batch', () => {
    const tracker = new SettingsTracker()
    const settings = { shared_buffers: '128MB' }
    const before = {
      shared_buffers: {
        unit: '8kB',
        source: 'configuration file',
        boot_value: '16384',
        pending_restart: false,
        changed: false,
      },
    }
    const pending = { shared_buffers: { ...before.shared_buffers, pending_restart: true } }
    expect(tracker.section({ settings, details: before }, 1).settings_detail).toEqual(before)
    expect(
      tracker.section(
        {
          settings,
          details: {
            shared_buffers: {
              changed: false,
              pending_restart: false,
              boot_value: '16384',
              source: 'configuration file',
              unit: '8kB',
            },
          },
        },
        1,
      ),
    ).toEqual({
      agent_started_at: 1,
      settings_hash: settingsHash(settings),
    })
    const next = tracker.section({ settings, details: pending }, 1)
    expect(next.settings).toBeUndefined()
    expect(next.settings_detail).toEqual(pending)
    tracker.lost()
    expect(tracker.section({ settings, details: pending }, 1).settings_detail).toEqual(pending)
  })
})

for (const major of postgresMajors) {
  test(`PostgreSQL ${major}: start, settings and reset times as PostgreSQL reports them`, async () => {
    const pg = await sharedPostgres(major)
    const sql = postgres(await pg.freshDatabase(), {
      max: 1,
      onnotice: () => {},
      connection: { application_name: 'probe', statement_timeout: 4321 },
    })
    open.push(sql)
    const facts = await postgresFacts(sql, major)
    const [truth] =
      await sql`SELECT to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS started, current_setting('work_mem') AS work_mem`
    expect(new Date(facts.started_at!).toISOString()).toBe(truth!.started)
    expect(facts.settings.work_mem).toBe(truth!.work_mem)
    // set by the session's startup options: not the server's
    expect(facts.settings.application_name).toBeUndefined()
    expect(facts.settings.statement_timeout).toBeUndefined()
    // the reading transaction's own state, not the server's: it made events flap (off, then not set)
    for (const own of ['transaction_isolation', 'transaction_read_only', 'transaction_deferrable'])
      expect(facts.settings[own]).toBeUndefined()
    expect(facts.settings.default_transaction_read_only).toBe('off')
    const views = [
      'pg_stat_bgwriter',
      'pg_stat_database',
      ...(major >= 14 ? ['pg_stat_wal'] : []),
      ...(major >= 17 ? ['pg_stat_checkpointer'] : []),
    ]
    expect(Object.keys(facts.stats_resets!).sort()).toEqual(views.sort())
    const [reset] =
      await sql`SELECT to_char(stats_reset AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at FROM pg_stat_bgwriter`
    const got = facts.stats_resets!.pg_stat_bgwriter ?? null
    expect(got === null ? null : new Date(got).toISOString()).toBe(reset!.at)
  }, 120_000)
}

test('PostgreSQL 17: settings read again only for a new session, after a configuration reload, or when kept 10 minutes', async () => {
  const pg = await sharedPostgres(17)
  const url = await pg.freshDatabase()
  const cache = new SettingsCache()
  // The rows of each settings read: one (name null) when the kept settings were used.
  const rows: number[] = []
  const pool = () => {
    const sql = postgres(url, { max: 1, onnotice: () => {} })
    open.push(sql)
    return new Proxy(sql, {
      get(target, key) {
        if (key !== 'unsafe') return Reflect.get(target, key)
        return async (query: string, params?: unknown[], options?: object) => {
          const result = await target.unsafe(query, params as never, options)
          if (query.includes('FROM pg_settings')) rows.push(result.length)
          return result
        }
      },
    })
  }
  let sql = pool()
  const t0 = Date.now()
  const first = await postgresFacts(sql, 17, cache, t0)
  expect(rows.at(-1)).toBeGreaterThan(100)
  expect(await postgresFacts(sql, 17, cache, t0 + 1000)).toEqual(first)
  expect(rows.at(-1)).toBe(1)

  // ALTER DATABASE ... SET applies to new sessions: a new session (pid) reads its settings.
  await sql.unsafe(`ALTER DATABASE ${new URL(url).pathname.slice(1)} SET work_mem = '7MB'`)
  expect((await postgresFacts(sql, 17, cache, t0 + 2000)).settings.work_mem).toBe(first.settings.work_mem)
  await sql.end()
  sql = pool()
  const fresh = await postgresFacts(sql, 17, cache, t0 + 3000)
  expect(rows.at(-1)).toBeGreaterThan(100)
  expect(fresh.settings.work_mem).toBe('7MB')

  // A reload (no change here) is read again once the session has taken it.
  await sql`SELECT pg_reload_conf()`
  const deadline = Date.now() + 10_000
  for (let at = t0 + 4000; ; at += 1000) {
    expect(await postgresFacts(sql, 17, cache, at)).toEqual(fresh)
    if (rows.at(-1)! > 1) break
    if (Date.now() > deadline) throw new Error('the reload was never seen')
    await Bun.sleep(50)
  }
  await postgresFacts(sql, 17, cache, t0 + 100_000)
  expect(rows.at(-1)).toBe(1)
  await postgresFacts(sql, 17, cache, t0 + 100_000 + SettingsCache.MAX_AGE_MS)
  expect(rows.at(-1)).toBeGreaterThan(100)
})
