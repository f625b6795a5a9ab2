// The health monitor at fleet scale, on both stores: every diagnosis is recorded in database_health and
// GET /databases/health answers every database's status and score in one request (an organization sees its
// own only); two monitors on one store (two `dbm serve` processes) share the databases instead of each
// diagnosing all of them, a database leased by one is left alone by the other, and a scheduled monitor
// diagnoses each database about once per interval, not once per tick; and, on SQLite (whose reads are
// synchronous), a pass over many databases lets a request through while it runs.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHealthMonitor } from '../../src/server/health-monitor.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer, storeKinds } from '../support/server.ts'
import { until } from '../support/wait.ts'

/** 50 % of block reads from shared buffers: one critical finding (score 70). */
const critical = (name: string, at: number) => pgBatch(name, at, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })
const healthy = (name: string, at: number) => pgBatch(name, at, { database_stats: { blks_hit: 100_000, blks_read: 0 } })

for (const kind of storeKinds) {
  describe(`health monitor across many databases (${kind})`, () => {
    let server: TestServer
    let key = ''
    let token = ''
    const ids: string[] = []
    beforeAll(async () => {
      server = await startTestServer(kind)
      const org = await agentAccount(server, { verified: true })
      key = org.key
      token = org.account.token
      const now = Date.now()
      for (let i = 0; i < 12; i++) {
        const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: (i % 3 === 0 ? critical : healthy)(`fleet-${String(i).padStart(2, '0')}`, now - 20_000) })
        expect(res.status).toBe(200)
        ids.push(res.body.database_id)
      }
    })
    afterAll(async () => {
      await server?.stop()
    })

    const evaluations = async () =>
      new Map((await server.store.driver.all<{ database_id: string; evaluated_at: number | null }>('SELECT database_id, evaluated_at FROM database_health')).map((r) => [r.database_id, r.evaluated_at === null ? null : Number(r.evaluated_at)]))

    test('GET /databases/health: null scores before the first diagnosis, then every database with its own', async () => {
      const before = await server.call('GET', '/api/v1/databases/health', { token })
      expect(before.status).toBe(200)
      expect(before.body.length).toBe(12)
      expect(before.body[0]).toEqual({
        id: ids[0],
        name: 'fleet-00',
        status: 'connected',
        last_seen_at: expect.any(String),
        // reachability (GET /health's fields): connected, no outage, up all the time it was watched
        reason: null,
        down_since: null,
        cause: null,
        cause_message: null,
        agent_last_heard_at: expect.any(String),
        data_as_of: expect.any(String),
        availability_30d: 1,
        health_score: null,
        doctor_status: null,
        findings: null,
        active_queries: null,
        evaluated_at: null,
      })
      const now = server.deps.clock()
      const summary = await createHealthMonitor(server.deps, { retentionDays: 30 }).runOnce(now)
      expect(summary.databases).toBe(12)
      const after = await server.call('GET', '/api/v1/databases/health', { apiKey: key })
      expect(after.status).toBe(200)
      expect(after.body.map((d: any) => [d.name, d.health_score, d.doctor_status, d.findings, d.evaluated_at])).toEqual(
        ids.map((_, i) => [
          `fleet-${String(i).padStart(2, '0')}`,
          i % 3 === 0 ? 70 : 100,
          i % 3 === 0 ? 'unhealthy' : 'healthy',
          { critical: i % 3 === 0 ? 1 : 0, warning: 0, info: 0 },
          new Date(now).toISOString(),
        ]),
      )
      // The same score the database's own overview computes.
      const overview = await server.call('GET', `/api/v1/databases/${ids[0]}/overview`, { apiKey: key })
      expect(overview.body.health_score).toBe(70)
    })

    test('another organization sees only its own databases; no credentials is a 401', async () => {
      const other = await agentAccount(server, { verified: true })
      const res = await server.call('GET', '/api/v1/databases/health', { apiKey: other.key })
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: [] })
      const anonymous = await server.call('GET', '/api/v1/databases/health')
      expect(anonymous.status).toBe(401)
      expect(anonymous.body.error).toEqual(expect.any(String))
    })

    test('two monitors on one store split a pass: each database is diagnosed once, by one of them', async () => {
      const now = server.deps.clock() + 120_000
      const a = createHealthMonitor(server.deps, { retentionDays: 30 })
      const b = createHealthMonitor(server.deps, { retentionDays: 30 })
      // Both run the due databases at once, as two processes would (due: diagnosed before `now`).
      const due = now - 1
      const [ra, rb] = await Promise.all([a.runDue(now, due), b.runDue(now, due)])
      expect(ra.databases + rb.databases).toBe(12)
      if (kind === 'postgres') {
        // Concurrent for real (each waits on the server between databases): both did some.
        expect(ra.databases).toBeGreaterThan(0)
        expect(rb.databases).toBeGreaterThan(0)
      }
      expect([...(await evaluations()).values()].filter((t) => t === now).length).toBe(12)
      // Nothing is due again at the same time.
      expect((await a.runDue(now, due)).databases).toBe(0)
    })

    test("a database leased by another process is left alone until its lease ends", async () => {
      const now = server.deps.clock() + 240_000
      // Another process took fleet-00 (for a minute) and has not finished it.
      await server.store.health.claimEvaluation(ids[0]!, 'another-process', now, now + 60_000)
      const monitor = createHealthMonitor(server.deps, { retentionDays: 30 })
      expect((await monitor.runOnce(now)).databases).toBe(11)
      expect((await evaluations()).get(ids[0]!)).not.toBe(now)
      // After the lease, the next pass takes it.
      expect((await monitor.runOnce(now + 61_000)).databases).toBe(12)
      expect((await evaluations()).get(ids[0]!)).toBe(now + 61_000)
    })

    test('the scheduled monitor diagnoses each database once per interval, not once per tick', async () => {
      // Each diagnosis reads the database's active queries once: the count of diagnoses per database.
      const objects = server.store.objects
      const activeQueries = objects.activeQueries
      const diagnosed = new Map<string, number>()
      objects.activeQueries = (databaseId, limit) => {
        diagnosed.set(databaseId, (diagnosed.get(databaseId) ?? 0) + 1)
        return activeQueries.call(objects, databaseId, limit)
      }
      // Past the times the tests above diagnosed at.
      server.advance(400_000)
      const everyMs = 1_000
      const tickMs = 100
      const monitor = createHealthMonitor(server.deps, { retentionDays: 30, evaluateEveryMs: everyMs, tickMs })
      const started = Date.now()
      monitor.start()
      let elapsed = 0
      try {
        await until('every database to be diagnosed twice by the schedule', async () => (ids.every((id) => (diagnosed.get(id) ?? 0) >= 2) ? true : undefined), {
          timeoutMs: 20_000,
          everyMs: 20,
        })
      } finally {
        await monitor.stop()
        elapsed = Date.now() - started
        objects.activeQueries = activeQueries
      }
      // Due again once diagnosed at least everyMs - tickMs before a tick: never more often than that,
      // however many ticks ran (a busy machine only makes it fewer).
      const most = Math.floor(elapsed / (everyMs - tickMs)) + 1
      for (const id of ids) expect(diagnosed.get(id)!).toBeLessThanOrEqual(most)
      expect(elapsed / tickMs).toBeGreaterThan(most)
    })

    test('a database its agent reports down is due at once, not at the next interval, and so is its return', async () => {
      server.advance(400_000)
      const now = server.deps.clock()
      const monitor = createHealthMonitor(server.deps, { retentionDays: 30 })
      expect((await monitor.runOnce(now)).databases).toBe(12)
      // Diagnosed a second ago: nothing is due for another minute...
      const due = now + 1_000 - 60_000
      expect((await monitor.runDue(now + 1_000, due)).databases).toBe(0)
      // ...but the agent reports fleet-01 unreachable: it alone is due, and its alert opens in that pass.
      const report = { ...healthy('fleet-01', now + 500), availability: { state: 'down' as const, since: now + 500, cause: 'refused' as const, message: 'connection refused' } }
      expect((await server.call('POST', '/api/v1/ingest', { apiKey: key, body: report })).status).toBe(200)
      const pass = await monitor.runDue(now + 2_000, now + 2_000 - 60_000)
      expect(pass.databases).toBe(1)
      expect((await evaluations()).get(ids[1]!)).toBe(now + 2_000)
      const alerts = await server.call('GET', `/api/v1/databases/${ids[1]}/alerts`, { apiKey: key })
      expect(alerts.body.map((a: any) => a.rule)).toContain('database_unreachable')
      // Diagnosed since the report: not due again until the interval, while the outage goes on.
      expect((await monitor.runDue(now + 3_000, now + 3_000 - 60_000)).databases).toBe(0)
      // It answers again: due at once, and the alert resolves.
      const back = { ...healthy('fleet-01', now + 3_500), availability: { state: 'up' as const, since: now + 3_500 } }
      expect((await server.call('POST', '/api/v1/ingest', { apiKey: key, body: back })).status).toBe(200)
      expect((await monitor.runDue(now + 4_000, now + 4_000 - 60_000)).databases).toBe(1)
      const after = await server.call('GET', `/api/v1/databases/${ids[1]}/alerts?status=open`, { apiKey: key })
      expect(after.body.map((a: any) => a.rule)).not.toContain('database_unreachable')
    })

    if (kind === 'sqlite') {
      test('a pass lets requests through between databases (SQLite reads hold the event loop while they run)', async () => {
        const monitor = createHealthMonitor(server.deps, { retentionDays: 30 })
        const order: string[] = []
        const pass = monitor.runOnce(server.deps.clock() + 360_000).then(() => order.push('pass'))
        const request = fetch(`${server.base}/healthz`).then(async (r) => {
          await r.text()
          order.push('request')
        })
        await Promise.all([pass, request])
        expect(order).toEqual(['request', 'pass'])
      })
    }
  })
}
