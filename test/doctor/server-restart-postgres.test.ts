// server_restarted on a real PostgreSQL 17 watched by the real agent: no finding while the server runs;
// restarted (a fast shutdown and a start on the same data), the next cycles report the new
// pg_postmaster_start_time() and the doctor names that start, as the database gives it, with the uptime
// figure counted from it. The batch-level cases (crashes, ClickHouse, versions, settings) are in
// server-changes.test.ts; this is the path through the agent.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

let rig: PostgresDoctorRig

beforeAll(async () => {
  rig = await postgresDoctorRig(17)
})
afterAll(async () => {
  await rig?.stop()
})

/** pg_postmaster_start_time() in epoch ms, truncated as the agent reads it. */
const startTime = async () =>
  Number((await rig.sql`SELECT floor(extract(epoch FROM pg_postmaster_start_time()) * 1000)::int8 AS at`)[0]!.at)

test('a real restart: the finding names the start PostgreSQL gives, the overview its uptime', async () => {
  await rig.cycle()
  expect(await rig.findings('server_restarted')).toEqual([])
  const before = await startTime()
  expect((await rig.api('/overview')).server_started_at).toBe(new Date(before).toISOString())

  await rig.pg.restart()
  const after = await startTime()
  expect(after).toBeGreaterThan(before)
  // The agent's first cycle after the restart may find its old connection gone: cycle until the start is reported.
  const [finding] = await until('the restart finding', async () => {
    await rig.cycle()
    const found = await rig.findings('server_restarted')
    return found.length > 0 ? found : undefined
  })
  expect(finding).toMatchObject({
    severity: 'warning',
    title: expect.stringMatching(/^PostgreSQL restarted [\d.]+ s ago$/),
    metrics: {
      restarted_at: new Date(after).toISOString(),
      previous_start_at: new Date(before).toISOString(),
      crash_signal: null,
      recovery_entries: 0,
    },
  })
  expect(finding.metrics.uptime_s).toBeLessThan(60)
  const overview = await rig.api('/overview')
  expect(overview.server_started_at).toBe(new Date(after).toISOString())
  expect(overview.uptime_s).toBe(Math.round((Date.parse(overview.last_seen_at) - after) / 1000))
})
