// One outage, one alert, whatever the agent does meanwhile (issue 33's operator): the database goes down,
// its agent is killed, comes back while the database is still down, and the database comes up. Exactly one
// database_unreachable alert is opened and resolved once, at the end; while the agent is silent the alert
// stays open saying its state is as last reported, and agent_disconnected does not open a second one.
import { afterAll, beforeAll, expect, test } from 'bun:test'
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

const iso = (ms: number) => new Date(ms).toISOString()

/** The agent's report while the database is down: the header and availability only. */
const report = (name: string, availability: Record<string, unknown>) => ({
  batch_id: crypto.randomUUID(),
  collected_at: server.deps.clock(),
  interval_seconds: 10,
  agent_version: 'test',
  database: { name, engine: 'postgres', host: 'h', port: 5432 },
  availability,
})

test('down → agent killed → agent back (still down) → database up: one unreachable alert, resolved once at the end', async () => {
  const monitor = createMonitor(server.deps, { retentionDays: 30 })
  const ingest = async (body: unknown) => {
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body })
    expect(res.status).toBe(200)
    return res.body.database_id as string
  }
  const diagnose = () => monitor.runOnce(server.deps.clock())
  const alerts = async (id: string) =>
    (await server.call('GET', `/api/v1/databases/${id}/alerts?status=all`, { apiKey: key })).body as any[]
  const events = async (id: string) =>
    server.store.driver.all<{ kind: string; object: string }>(
      "SELECT kind, object FROM events WHERE database_id = $1 AND kind IN ('alert_opened', 'alert_resolved') ORDER BY ts",
      [id],
    )

  const id = await ingest(pgBatch('orders', server.deps.clock()))
  server.advance(10_000)
  const downAt = server.deps.clock()
  await ingest(report('orders', { state: 'down', since: downAt, cause: 'refused', message: 'connection refused' }))
  await diagnose()
  const [opened] = await alerts(id)
  expect(opened).toMatchObject({
    rule: 'database_unreachable',
    title: 'PostgreSQL is unreachable: connection refused',
    resolved_at: null,
  })

  // The agent is killed: 5 minutes without a word from it.
  const lastHeard = server.deps.clock()
  server.advance(5 * 60_000)
  await diagnose()
  const silent = await alerts(id)
  expect(silent.map((a) => [a.id, a.rule, a.resolved_at])).toEqual([[opened.id, 'database_unreachable', null]])
  expect(silent[0].title).toBe('PostgreSQL is unreachable: connection refused (as last reported; the agent is silent)')
  expect(silent[0].detail).toContain(
    `The agent went silent while the database was down: nothing heard from it since ${iso(lastHeard)} (5.0 min)`,
  )
  const doctor = (await server.call('GET', `/api/v1/databases/${id}/doctor`, { apiKey: key })).body
  expect(
    doctor.top_issues
      .map((f: any) => f.rule)
      .filter((r: string) => r === 'database_unreachable' || r === 'agent_disconnected'),
  ).toEqual(['database_unreachable'])
  expect(doctor.top_issues.find((f: any) => f.rule === 'database_unreachable').metrics).toMatchObject({
    agent_silent_s: 300,
    down_s: 300,
  })
  // /health says why it is disconnected now (the agent is silent) and still since when the database is down.
  const [health] = (await server.call('GET', '/api/v1/databases/health', { apiKey: key })).body
  expect(health).toMatchObject({
    status: 'disconnected',
    reason: 'agent_silent',
    down_since: iso(downAt),
    cause: 'refused',
    agent_last_heard_at: iso(lastHeard),
  })

  // The agent comes back; the database is still down (with another cause now).
  server.advance(10_000)
  await ingest(report('orders', { state: 'down', since: downAt, cause: 'timeout', message: 'timed out' }))
  await diagnose()
  const back = await alerts(id)
  expect(back.map((a) => [a.id, a.resolved_at])).toEqual([[opened.id, null]])
  expect(back[0].title).toBe('PostgreSQL is unreachable: timed out')

  // The database answers again.
  server.advance(10_000)
  const upAt = server.deps.clock()
  await ingest({ ...pgBatch('orders', upAt), availability: { state: 'up', since: upAt } })
  await diagnose()
  const after = await alerts(id)
  expect(after.map((a) => [a.id, a.rule, a.resolved_at])).toEqual([[opened.id, 'database_unreachable', iso(upAt)]])
  expect(await events(id)).toEqual([
    { kind: 'alert_opened', object: 'database_unreachable' },
    { kind: 'alert_resolved', object: 'database_unreachable' },
  ])
})

test('an agent that stops while the database is up is agent_disconnected, as before', async () => {
  const monitor = createMonitor(server.deps, { retentionDays: 30 })
  const res = await server.call('POST', '/api/v1/ingest', {
    apiKey: key,
    body: { ...pgBatch('billing', server.deps.clock()), availability: { state: 'up', since: server.deps.clock() } },
  })
  const id = res.body.database_id as string
  server.advance(5 * 60_000)
  await monitor.runOnce(server.deps.clock())
  const alerts = (await server.call('GET', `/api/v1/databases/${id}/alerts?status=all`, { apiKey: key })).body as any[]
  expect(alerts.map((a) => [a.rule, a.title])).toEqual([['agent_disconnected', 'The agent has stopped sending data']])
})

test('two minutes watched: the 30-day figures start at the registration and say how much time the ratio stands on', async () => {
  const registered = server.deps.clock()
  const send = async (body: unknown) =>
    expect((await server.call('POST', '/api/v1/ingest', { apiKey: key, body })).status).toBe(200)
  const res = await server.call('POST', '/api/v1/ingest', {
    apiKey: key,
    body: { ...pgBatch('new', registered), availability: { state: 'up', since: registered } },
  })
  const id = res.body.database_id as string
  // Up for 50 s (a batch every 10 s), then the password is changed: down for 70 s (a report every 10 s).
  for (let i = 1; i <= 4; i++) {
    server.advance(10_000)
    await send({ ...pgBatch('new', server.deps.clock()), availability: { state: 'up', since: registered } })
  }
  server.advance(10_000)
  const downAt = server.deps.clock()
  for (let i = 0; i <= 7; i++) {
    await send(
      report('new', {
        state: 'down',
        since: downAt,
        cause: 'authentication',
        message: 'password authentication failed',
      }),
    )
    if (i < 7) server.advance(10_000)
  }
  const { total, days } = (await server.call('GET', `/api/v1/databases/${id}/availability?days=30`, { apiKey: key }))
    .body
  // Nothing before the registration counts, not even as unknown; authentication failures count as down.
  expect(total).toEqual({ up_ms: 50_000, down_ms: 70_000, unknown_ms: 0, watched_ms: 120_000, ratio: 0.4167 })
  expect(days.reduce((sum: number, d: any) => sum + d.up_ms + d.down_ms + d.unknown_ms, 0)).toBe(120_000)
  const listed = ((await server.call('GET', '/api/v1/databases', { apiKey: key })).body as any[]).find(
    (d) => d.id === id,
  )
  expect({ ratio: listed.availability_30d, watched: listed.availability_30d_watched_ms }).toEqual({
    ratio: 0.4167,
    watched: 120_000,
  })
  const overview = (await server.call('GET', `/api/v1/databases/${id}/overview`, { apiKey: key })).body
  expect([overview.uptime_30d, overview.uptime_30d_watched_ms, overview.uptime_24h_watched_ms]).toEqual([
    0.4167, 120_000, 120_000,
  ])
})
