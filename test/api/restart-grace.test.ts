// A planned restart of `dbm serve` raises no alert (issue 29): its agents buffered while it was down, so
// their silence that began before the start is not judged until the restart grace has passed. An agent
// that comes back in time never alerts; one that does not is reported once the grace and the usual
// silence have passed; an alert opened before the stop stays open instead of resolving and reopening.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { restartGraceMs, silentAfterMs } from '../../src/server/limits.ts'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'

let server: TestServer
let key = ''

beforeAll(async () => {
  server = await startTestServer('sqlite')
  key = (await agentAccount(server, { verified: true })).key
  server.freeze(true)
})
afterAll(async () => {
  await server?.stop()
})

const MINUTE = 60_000

test('serve down 5 minutes, then started: no agent_disconnected for agents that come back; a dead agent after the grace; an open alert stays open', async () => {
  const monitor = createMonitor(server.deps, { retentionDays: 30 })
  const clock = server.deps.clock
  const ingest = async (name: string, collectedAt = clock()) => {
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch(name, collectedAt) })
    expect(res.status).toBe(200)
    return res.body.database_id as string
  }
  const open = async (id: string) =>
    ((await server.call('GET', `/api/v1/databases/${id}/alerts?status=all`, { apiKey: key })).body as any[]).filter(
      (a) => a.rule === 'agent_disconnected',
    )
  const findings = async (id: string) =>
    ((await server.call('GET', `/api/v1/databases/${id}/doctor`, { apiKey: key })).body.top_issues as any[]).map(
      (f) => f.rule,
    )

  // Long dead before the stop: judged by the serve that ran then (its alert is open).
  const dead = await ingest('dead-before')
  server.advance(5 * MINUTE)
  const planned = await ingest('planned')
  const lost = await ingest('lost-in-the-gap')
  await monitor.runOnce(clock())
  const [deadAlert] = await open(dead)
  expect(deadAlert).toMatchObject({ resolved_at: null })
  expect(await open(planned)).toEqual([])

  // serve stops for 5 minutes while the agents buffer, then starts.
  const stoppedAt = clock()
  server.advance(5 * MINUTE)
  server.deps.servingSince = clock()
  await monitor.runOnce(clock())
  expect(await open(planned)).toEqual([])
  expect(await open(lost)).toEqual([])
  expect(await findings(planned)).not.toContain('agent_disconnected')
  // The alert opened before the stop is not resolved by the grace.
  expect((await open(dead)).map((a) => [a.id, a.resolved_at])).toEqual([[deadAlert.id, null]])

  // The planned agent's buffer arrives: its batches fill the gap, oldest first.
  for (let t = stoppedAt + 10_000; t <= clock(); t += 10_000) await ingest('planned', t)
  const cycles = async (ms: number) => {
    for (let done = 0; done < ms; done += 10_000) {
      server.advance(10_000)
      await ingest('planned')
    }
  }
  await cycles(MINUTE)
  await monitor.runOnce(clock())
  expect(await open(planned)).toEqual([])
  expect(await open(lost)).toEqual([])

  // The grace and the usual silence after it: the agent that never came back is reported, once.
  await cycles(restartGraceMs(10) + silentAfterMs(10) - MINUTE)
  server.advance(1_000)
  await monitor.runOnce(clock())
  expect(await open(planned)).toEqual([])
  const [lostAlert] = await open(lost)
  expect(lostAlert).toMatchObject({ resolved_at: null, title: 'The agent has stopped sending data' })
  expect((await open(dead)).map((a) => [a.id, a.resolved_at])).toEqual([[deadAlert.id, null]])
  // No gap recorded for the planned agent: its buffered batches covered the time serve was down.
  const silences = await server.store.driver.all<{ started_at: number }>(
    'SELECT started_at FROM agent_silences WHERE database_id = $1',
    [planned],
  )
  expect(silences).toEqual([])
})

test('without a start time (servingSince unset) the silence is judged as before', async () => {
  server.deps.servingSince = undefined
  const monitor = createMonitor(server.deps, { retentionDays: 30 })
  const id = (
    await server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch('no-grace', server.deps.clock()) })
  ).body.database_id as string
  server.advance(silentAfterMs(10) + 1_000)
  await monitor.runOnce(server.deps.clock())
  const alerts = (await server.call('GET', `/api/v1/databases/${id}/alerts`, { apiKey: key })).body as any[]
  expect(alerts.map((a) => a.rule)).toEqual(['agent_disconnected'])
})
