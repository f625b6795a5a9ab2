// agent_disconnected on a real PostgreSQL watched by the real agent: no finding while batches arrive;
// when the agent stops and the silence passes the threshold, a critical finding names the silence;
// a new batch clears it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'

let rig: PostgresDoctorRig

beforeAll(async () => {
  rig = await postgresDoctorRig(17)
})
afterAll(async () => {
  await rig?.stop()
})

test('connected: no finding; silent past the threshold: critical with the silence; a new batch clears it', async () => {
  await rig.cycle()
  expect(await rig.findings('agent_disconnected')).toEqual([])
  const doctor = await rig.api('/doctor')
  expect(doctor.top_issues.filter((f: any) => f.severity === 'critical')).toEqual([])

  // The health status rule: disconnected after max(3 × poll interval, 60 s); move the server's clock.
  rig.server.advance(3 * 3600_000 + 1000)
  const [finding] = await rig.findings('agent_disconnected')
  expect(finding).toMatchObject({
    severity: 'critical',
    title: 'The agent has stopped sending data',
    metrics: { poll_interval_seconds: 3600 },
  })
  expect(finding.metrics.last_seen_s_ago).toBeGreaterThanOrEqual(3 * 3600 + 1)
  expect((await rig.api('/doctor')).status).toBe('unhealthy')
  rig.server.advance(-(3 * 3600_000 + 1000))
  await rig.cycle()
  expect(await rig.findings('agent_disconnected')).toEqual([])
})
