// The server's configuration, its connection slots and what a running maintenance command waits on, as
// the real agent reads them from a real PostgreSQL 17 and the server answers them: every figure checked
// against what pg_settings and pg_stat_activity say at the same moment. One database server of the
// file's own (its tests ALTER SYSTEM, which a shared server must not see) and one agent; each test puts
// the database into a state, runs a cycle and reads the API.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { SETTING_RISKS } from '../../src/server/doctor/rules/setting-risks.ts'
import { HIDDEN } from '../../src/shared/secret-settings.ts'
import { type DoctorRig, watchDatabase } from '../support/doctor.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(60_000)

let pg: PostgresServer
let rig: DoctorRig & { sql: postgres.Sql; dsn: string }
beforeAll(async () => {
  pg = await startPostgres(17)
  const dsn = await pg.freshDatabase()
  const sql = postgres(dsn, { max: 2, onnotice: () => {} })
  // Database settings apply to sessions that start after them: set before the agent connects.
  const dbName = (await sql`SELECT current_database() AS d`)[0]!.d as string
  await sql.unsafe(`ALTER DATABASE "${dbName}" SET work_mem = '12MB'`)
  await sql.unsafe(`ALTER DATABASE "${dbName}" SET search_path = 'we"ird */', "ünï\nx", public`)
  rig = Object.assign(await watchDatabase(dsn), { sql, dsn })
})
afterAll(async () => {
  await rig?.stop()
  await rig?.sql.end({ timeout: 1 })
  await pg?.stop()
})

/** A new session's view of settings (ALTER DATABASE applies to sessions that start after it). */
async function fresh<T>(run: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(rig.dsn, { max: 1, onnotice: () => {} })
  try {
    return await run(sql)
  } finally {
    await sql.end({ timeout: 5 })
  }
}

describe('configuration', () => {
  test('every setting as pg_settings gives it: value, unit, source with file and line, default, context, pending restart; secrets masked', async () => {
    await rig.sql`ALTER SYSTEM SET shared_buffers = '256MB'`
    await rig.sql`ALTER SYSTEM SET autovacuum = off`
    await rig.sql`ALTER SYSTEM SET archive_command = 'PGPASSWORD=sk-live-0123456789 pg_receivewal'`
    await rig.sql`SELECT pg_reload_conf()`
    const truth = await until('the reload to reach a new session', () =>
      fresh(async (sql) => {
        const rows =
          await sql`SELECT name, current_setting(name) AS value, unit, source, sourcefile, sourceline, boot_val, reset_val, context, pending_restart,
            (source NOT IN ('default', 'override') AND setting IS DISTINCT FROM boot_val) AS changed
          FROM pg_settings WHERE source NOT IN ('client', 'session') ORDER BY name`
        const byName = new Map(rows.map((r) => [r.name as string, r]))
        return byName.get('shared_buffers')?.pending_restart === true && byName.get('autovacuum')?.value === 'off'
          ? byName
          : undefined
      }),
    )
    await rig.cycle()
    const config = await rig.api('/configuration')
    const setting = (name: string) => config.settings.find((s: any) => s.name === name)
    expect(config).toMatchObject({ engine: 'postgres', details: true, pending_restart: 1 })
    // A database setting: the value a new session gets, the default in the same form as pg_settings' boot_val with its unit.
    expect(truth.get('work_mem')).toMatchObject({ value: '12MB', unit: 'kB', boot_val: '4096', source: 'database' })
    expect(setting('work_mem')).toMatchObject({
      value: '12MB',
      unit: 'kB',
      default: '4MB',
      source: 'database',
      source_label: 'ALTER DATABASE',
      context: 'user',
      applies: 'session (SET)',
      changed: true,
      pending_restart: false,
    })
    // Changed in postgresql.auto.conf, applied at the next restart: the old value, its file and line, and pending_restart.
    const sb = truth.get('shared_buffers')!
    expect(sb).toMatchObject({
      value: '128MB',
      unit: '8kB',
      boot_val: '16384',
      context: 'postmaster',
      pending_restart: true,
    })
    expect(setting('shared_buffers')).toMatchObject({
      value: '128MB',
      default: '128MB',
      file: sb.sourcefile,
      line: sb.sourceline,
      source_label:
        sb.sourcefile === null ? 'configuration file' : `${sb.sourcefile.split('/').at(-1)}:${sb.sourceline}`,
      applies: 'restart',
      pending_restart: true,
      advice: SETTING_RISKS.find((r) => r.engine === 'postgres' && r.name === 'shared_buffers')!.why,
    })
    // ALTER SYSTEM and reloaded: its source is postgresql.auto.conf; the doctor's finding on it is linked.
    expect(setting('autovacuum')).toMatchObject({
      value: 'off',
      default: 'on',
      source_label: 'ALTER SYSTEM',
      applies: 'reload',
      changed: true,
    })
    expect(setting('autovacuum').findings).toContainEqual(
      expect.objectContaining({ key: 'pg_risky_settings:autovacuum', severity: 'critical' }),
    )
    // Hostile text passes as data.
    expect(setting('search_path').value).toBe(truth.get('search_path')!.value)
    expect(setting('search_path').value).toContain('"ünï\nx"')
    // A setting named like a secret: masked, its reset value too, nowhere in the answer.
    // (SHOW prints "(disabled)" while archive_mode is off; reset_val holds the command.)
    expect(truth.get('archive_command')!.reset_val).toContain('sk-live')
    expect(setting('archive_command')).toMatchObject({
      value: HIDDEN,
      reset_value: HIDDEN,
      default: '',
      source_label: 'ALTER SYSTEM',
    })
    expect(JSON.stringify(config)).not.toContain('sk-live')
    // Changed from the default: exactly the ones pg_settings says, and the filter keeps those.
    const changed = [...truth.values()].filter((r) => r.changed).map((r) => r.name)
    const filtered = await rig.api('/configuration?changed=true')
    expect(filtered.settings.map((s: any) => s.name)).toEqual(changed)
    expect(config.changed).toBe(changed.length)
    // Every setting but the reading transaction's own and those the agent's session sets at connection.
    const left = [...truth.keys()].filter((n) => !config.settings.some((s: any) => s.name === n))
    expect(left).toEqual([
      'idle_in_transaction_session_timeout',
      'lock_timeout',
      'statement_timeout',
      'transaction_deferrable',
      'transaction_isolation',
      'transaction_read_only',
    ])
    expect(config.total).toBe(truth.size - left.length)
    // Search: in names and descriptions, whatever the case.
    const searched = (await rig.api('/configuration?q=WORK_MEM')).settings
    expect(searched.map((s: any) => s.name)).toEqual(
      config.settings
        .filter((s: any) => `${s.name} ${s.description}`.toLowerCase().includes('work_mem'))
        .map((s: any) => s.name),
    )
    expect(searched.map((s: any) => s.name)).toEqual(
      expect.arrayContaining(['work_mem', 'maintenance_work_mem', 'hash_mem_multiplier']),
    )
    await rig.sql`ALTER SYSTEM RESET autovacuum`
    await rig.sql`ALTER SYSTEM RESET archive_command`
    await rig.sql`SELECT pg_reload_conf()`
  })
})

describe('connections', () => {
  test('client connections against the slots max_connections leaves to ordinary roles, per state, with the headroom', async () => {
    const extra = postgres(rig.dsn, { max: 3, onnotice: () => {} })
    try {
      await Promise.all([extra`SELECT pg_sleep(0.01)`, extra`SELECT 1`, extra`SELECT 2`])
      const [limits] =
        await rig.sql`SELECT current_setting('max_connections')::int AS max, current_setting('superuser_reserved_connections')::int AS su,
        current_setting('reserved_connections')::int AS reserved`
      await rig.cycle()
      const c = await rig.api('/connections')
      const usable = limits!.max - limits!.su - limits!.reserved
      expect(c.slots).toMatchObject({
        max_connections: limits!.max,
        superuser_reserved_connections: limits!.su,
        reserved_connections: limits!.reserved,
        usable,
        headroom: usable - c.total,
        used_ratio: Number((c.total / usable).toFixed(4)),
      })
      expect(c.total).toBeGreaterThanOrEqual(3)
      expect(c.slots.by_state).toEqual(
        c.by_state.map((s: any) => ({ ...s, ratio: Number((s.count / usable).toFixed(4)) })),
      )
    } finally {
      await extra.end({ timeout: 5 })
    }
  })
})

describe('maintenance waits', () => {
  test('a CREATE INDEX CONCURRENTLY held by an open transaction names the holder as pg_stat_activity shows it', async () => {
    await rig.sql`CREATE TABLE waits_on (id int, pad text)`
    await rig.sql`INSERT INTO waits_on SELECT g, 'x' FROM generate_series(1, 100) g`
    const holder = postgres(rig.dsn, {
      max: 1,
      onnotice: () => {},
      connection: { application_name: 'billing "nightly"\n*/' },
    })
    const builder = postgres(rig.dsn, { max: 1, onnotice: () => {}, connection: { application_name: 'migrator' } })
    try {
      // A repeatable-read snapshot left open: the build's "waiting for old snapshots" phase waits for it.
      await holder.unsafe('BEGIN ISOLATION LEVEL REPEATABLE READ')
      const holderPid = (await holder.unsafe('SELECT pg_backend_pid() AS pid'))[0]!.pid as number
      await holder.unsafe("SELECT count(*) FROM waits_on WHERE pad = 'it''s */ ünï'")
      const building = builder
        .unsafe('CREATE INDEX CONCURRENTLY waits_on_id_idx ON waits_on (id)')
        .then(() => undefined)
      const view = await until('the build to wait for the old snapshot', async () => {
        const [row] =
          await rig.sql`SELECT p.pid, p.phase, p.current_locker_pid, p.lockers_done, p.lockers_total, a.wait_event_type, a.wait_event
          FROM pg_stat_progress_create_index p JOIN pg_stat_activity a USING (pid) WHERE p.datname = current_database()`
        return row?.phase === 'waiting for old snapshots' && Number(row.current_locker_pid) !== 0 ? row : undefined
      })
      const [session] =
        await rig.sql`SELECT usename, application_name, state, xact_start, state_change, query FROM pg_stat_activity WHERE pid = ${holderPid}`
      await rig.cycle()
      const progress = await rig.api('/progress')
      const build = progress.operations.find((o: any) => o.pid === view.pid)
      expect(Number(view.current_locker_pid)).toBe(holderPid)
      expect(session!.query).toBe("SELECT count(*) FROM waits_on WHERE pad = 'it''s */ ünï'")
      expect(build).toMatchObject({
        command: 'CREATE INDEX CONCURRENTLY',
        phase: 'waiting for old snapshots',
        index_name: 'waits_on_id_idx',
        current_locker_pid: holderPid,
        lockers_done: Number(view.lockers_done),
        lockers_total: Number(view.lockers_total),
        wait_event_type: view.wait_event_type,
        wait_event: view.wait_event,
      })
      expect(build.blocker).toMatchObject({
        pid: holderPid,
        via: 'current_locker_pid',
        user: session!.usename,
        // PostgreSQL escapes the newline (\x0a from 16 on): the name as pg_stat_activity gives it.
        application_name: session!.application_name,
        state: 'idle in transaction',
        xact_start: session!.xact_start.toISOString(),
        state_change: session!.state_change.toISOString(),
        query_text: session!.query,
      })
      // Ages as of the snapshot: the transaction began before it entered its idle state.
      const collected = Date.parse(progress.collected_at)
      expect(build.blocker.transaction_age_ms).toBe(collected - session!.xact_start.getTime())
      expect(build.blocker.state_age_ms).toBe(collected - session!.state_change.getTime())
      await holder.unsafe('COMMIT')
      await building
      await rig.cycle()
      expect((await rig.api('/progress')).operations).toEqual([])
    } finally {
      await holder.end({ timeout: 5 })
      await builder.end({ timeout: 5 })
    }
  })
})
