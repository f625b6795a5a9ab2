// The server's configuration, its connection slots and what a running maintenance command waits on, as
// the real agent reads them from a real PostgreSQL 17 and the server answers them: every figure checked
// against what pg_settings and pg_stat_activity say at the same moment. One database server and one
// agent for the file; each test puts the database into a state, runs a cycle and reads the API.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(60_000)

let rig: PostgresDoctorRig
beforeAll(async () => {
  rig = await postgresDoctorRig(17)
})
afterAll(async () => {
  await rig?.stop()
})

describe('maintenance waits', () => {
  test('a CREATE INDEX CONCURRENTLY held by an open transaction names the holder as pg_stat_activity shows it', async () => {
    await rig.sql`CREATE TABLE waits_on (id int, pad text)`
    await rig.sql`INSERT INTO waits_on SELECT g, 'x' FROM generate_series(1, 100) g`
    const holder = postgres(rig.dsn, { max: 1, onnotice: () => {}, connection: { application_name: 'billing "nightly"\n*/' } })
    const builder = postgres(rig.dsn, { max: 1, onnotice: () => {}, connection: { application_name: 'migrator' } })
    try {
      // A repeatable-read snapshot left open: the build's "waiting for old snapshots" phase waits for it.
      await holder.unsafe('BEGIN ISOLATION LEVEL REPEATABLE READ')
      const [{ pid: holderPid }] = await holder.unsafe('SELECT pg_backend_pid() AS pid')
      await holder.unsafe("SELECT count(*) FROM waits_on WHERE pad = 'it''s */ ünï'")
      const building = builder.unsafe('CREATE INDEX CONCURRENTLY waits_on_id_idx ON waits_on (id)').then(() => undefined)
      const view = await until('the build to wait for the old snapshot', async () => {
        const [row] = await rig.sql`SELECT p.pid, p.phase, p.current_locker_pid, p.lockers_done, p.lockers_total, a.wait_event_type, a.wait_event
          FROM pg_stat_progress_create_index p JOIN pg_stat_activity a USING (pid) WHERE p.datname = current_database()`
        return row?.phase === "waiting for old snapshots" && Number(row.current_locker_pid) !== 0 ? row : undefined
      })
      const [session] = await rig.sql`SELECT usename, application_name, state, xact_start, state_change, query FROM pg_stat_activity WHERE pid = ${holderPid}`
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
