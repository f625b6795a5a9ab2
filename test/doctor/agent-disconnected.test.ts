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

test("a silence that began while the store refused writes is the server's: no finding until a grace after", async () => {
  await rig.cycle()
  // The store refuses writes (its disk full): the agent's batches are answered 503 and kept.
  const faults = rig.server.store.writeFaults!
  faults.failed({ code: 'SQLITE_FULL', reason: "the store's disk is full", message: 'database or disk is full' })
  rig.server.advance(3 * 3600_000 + 1000)
  try {
    expect(await rig.findings('agent_disconnected')).toEqual([])
  } finally {
    rig.server.advance(-(3 * 3600_000 + 1000))
  }
  // Writes succeed again; the episode ends after its hold (ended here at once: the test's own tracker).
  faults.wrote()
  ;(faults as unknown as { end(e: unknown): void }).end((faults as unknown as { episode: unknown }).episode)
  expect(faults.refusals()?.endedAt).toBeNumber()
  // Past the grace after the end (agents deliver what they kept), a silence is the agent's again.
  rig.server.advance(12 * 3600_000)
  try {
    expect((await rig.findings('agent_disconnected')).map((f: any) => f.title)).toEqual([
      'The agent has stopped sending data',
    ])
  } finally {
    rig.server.advance(-12 * 3600_000)
  }
})

test("a silence that began while this serve shed batches for want of room is the serve's, until a grace after", async () => {
  await rig.cycle()
  // A fleet catching up after a restart: the admission sheds batches (503 + Retry-After), the agents keep them.
  const admission = rig.server.deps.ingestAdmission!
  ;(admission as unknown as { refused(reason: string, now: number): unknown }).refused('capacity', performance.now())
  expect(admission.shedSpan()).toEqual({ since: expect.any(Number) })
  rig.server.advance(3 * 3600_000 + 1000)
  try {
    expect(await rig.findings('agent_disconnected')).toEqual([])
  } finally {
    rig.server.advance(-(3 * 3600_000 + 1000))
  }
  // Once no batch was shed for the admission's quiet time and a grace passed, a silence is the agent's again.
  const quiet = admission.limits.episodeQuietMs
  expect(admission.shedSpan(Date.now() + quiet)?.endedAt).toBeNumber()
  rig.server.advance(12 * 3600_000)
  try {
    ;(admission as unknown as { shedding: { since: number; last: number } }).shedding.last -= quiet
    expect((await rig.findings('agent_disconnected')).map((f: any) => f.title)).toEqual([
      'The agent has stopped sending data',
    ])
  } finally {
    rig.server.advance(-12 * 3600_000)
  }
})
