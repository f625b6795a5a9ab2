// The health monitor at fleet scale, on both stores: every diagnosis is recorded in database_health and
// GET /databases/health answers every database's status and score in one request (an organization sees its
// own only); two monitors on one store (two `dbm serve` processes) share the databases instead of each
// diagnosing all of them, a database leased by one is left alone by the other, and a scheduled monitor
// diagnoses each database about once per interval, not once per tick; and, on SQLite (whose reads are
// synchronous), a pass over many databases lets a request through while it runs.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { TICK_MS, perTickShare } from '../../src/server/monitor/schedule.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer, storeKinds } from '../support/server.ts'
import { until } from '../support/wait.ts'

/** 50 % of block reads from shared buffers: one critical finding (score 70). */
const critical = (name: string, at: number) =>
  pgBatch(name, at, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })
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
        const res = await server.call('POST', '/api/v1/ingest', {
          apiKey: key,
          body: (i % 3 === 0 ? critical : healthy)(`fleet-${String(i).padStart(2, '0')}`, now - 20_000),
        })
        expect(res.status).toBe(200)
        ids.push(res.body.database_id)
      }
    })
    afterAll(async () => {
      await server?.stop()
    })

    const evaluations = async () =>
      new Map(
        (
          await server.store.driver.all<{ database_id: string; evaluated_at: number | null }>(
            'SELECT database_id, evaluated_at FROM database_health',
          )
        ).map((r) => [r.database_id, r.evaluated_at === null ? null : Number(r.evaluated_at)]),
      )

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
        availability_30d_watched_ms: expect.any(Number),
        health_score: null,
        doctor_status: null,
        findings: null,
        active_queries: null,
        evaluated_at: null,
      })
      const now = server.deps.clock()
      const summary = await createMonitor(server.deps, { retentionDays: 30 }).runOnce(now)
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
      const a = createMonitor(server.deps, { retentionDays: 30 })
      const b = createMonitor(server.deps, { retentionDays: 30 })
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

    test('a database leased by another process is left alone until its lease ends', async () => {
      const now = server.deps.clock() + 240_000
      // Another process took fleet-00 (for a minute) and has not finished it.
      await server.store.monitor.claimEvaluation(ids[0]!, 'another-process', now, now + 60_000)
      const monitor = createMonitor(server.deps, { retentionDays: 30 })
      expect((await monitor.runOnce(now)).databases).toBe(11)
      expect((await evaluations()).get(ids[0]!)).not.toBe(now)
      // After the lease, the next pass takes it.
      expect((await monitor.runOnce(now + 61_000)).databases).toBe(12)
      expect((await evaluations()).get(ids[0]!)).toBe(now + 61_000)
    })

    test("a scheduled tick diagnoses at most its share: a start's first pass is spread over the minute", async () => {
      server.advance(400_000)
      server.freeze(true)
      try {
        const now = server.deps.clock()
        const monitor = createMonitor(server.deps, { retentionDays: 30 })
        // 12 databases, all due: a tick of 5 s in a minute takes max(4, 2 × 12 × 5 / 60) = 4 of them...
        expect(perTickShare(12, TICK_MS, 60_000)).toBe(4)
        const tick = (at: number) => monitor.runDue(at, at - 60_000 + TICK_MS, true)
        expect((await tick(now)).databases).toBe(4)
        // ...the least recently diagnosed first, so the next ticks take the others.
        expect((await tick(now + TICK_MS)).databases).toBe(4)
        expect((await tick(now + 2 * TICK_MS)).databases).toBe(4)
        expect((await tick(now + 3 * TICK_MS)).databases).toBe(0)
        expect(new Set((await evaluations()).values()).size).toBe(3)
        // A pass that is not a tick's (runDue without spread, runOnce) still takes every database due.
        expect((await monitor.runOnce(now + 4 * TICK_MS)).databases).toBe(12)
      } finally {
        server.freeze(false)
      }
    })

    test('the scheduled monitor diagnoses each database once per interval, not once per tick', async () => {
      // Each diagnosis reads the database's active queries once: the count of diagnoses per database.
      const sessions = server.store.sessions
      const activeQueries = sessions.activeQueries
      const diagnosed = new Map<string, number>()
      sessions.activeQueries = (databaseId, limit) => {
        diagnosed.set(databaseId, (diagnosed.get(databaseId) ?? 0) + 1)
        return activeQueries.call(sessions, databaseId, limit)
      }
      // Past the times the tests above diagnosed at.
      server.advance(400_000)
      const everyMs = 1_000
      const tickMs = 100
      const monitor = createMonitor(server.deps, { retentionDays: 30, evaluateEveryMs: everyMs, tickMs })
      const started = Date.now()
      monitor.start()
      let elapsed = 0
      try {
        await until(
          'every database to be diagnosed twice by the schedule',
          async () => (ids.every((id) => (diagnosed.get(id) ?? 0) >= 2) ? true : undefined),
          {
            timeoutMs: 20_000,
            everyMs: 20,
          },
        )
      } finally {
        await monitor.stop()
        elapsed = Date.now() - started
        sessions.activeQueries = activeQueries
      }
      // Due again once diagnosed at least everyMs - tickMs before a tick: never more often than that,
      // however many ticks ran (a busy machine only makes it fewer).
      const most = Math.floor(elapsed / (everyMs - tickMs)) + 1
      for (const id of ids) expect(diagnosed.get(id)!).toBeLessThanOrEqual(most)
      expect(elapsed / tickMs).toBeGreaterThan(most)
    })

    test('a database its agent reports down is due at once (30 s after its diagnosis at the soonest), and so is its return', async () => {
      server.advance(400_000)
      server.freeze(true)
      try {
        const now = server.deps.clock()
        const monitor = createMonitor(server.deps, { retentionDays: 30 })
        const runDue = (at: number) => monitor.runDue(at, at - 60_000)
        expect((await monitor.runOnce(now)).databases).toBe(12)
        // Diagnosed a second ago: nothing is due for another minute...
        expect((await runDue(now + 1_000)).databases).toBe(0)
        // ...but the agent reports fleet-01 unreachable: it alone is due, once 30 s have passed since its
        // diagnosis (not at once within them: a flapping database would be diagnosed at every tick).
        server.advance(500)
        const report = {
          ...healthy('fleet-01', now + 500),
          availability: {
            state: 'down' as const,
            since: now + 500,
            cause: 'refused' as const,
            message: 'connection refused',
          },
        }
        expect((await server.call('POST', '/api/v1/ingest', { apiKey: key, body: report })).status).toBe(200)
        expect((await runDue(now + 2_000)).databases).toBe(0)
        expect((await runDue(now + 30_000)).databases).toBe(1)
        expect((await evaluations()).get(ids[1]!)).toBe(now + 30_000)
        const alerts = await server.call('GET', `/api/v1/databases/${ids[1]}/alerts`, { apiKey: key })
        expect(alerts.body.map((a: any) => a.rule)).toContain('database_unreachable')
        // Diagnosed since the report: not due again until the interval, while the outage goes on.
        expect((await runDue(now + 31_000)).databases).toBe(0)
        // It answers again: due 30 s after the last diagnosis, and the alert resolves.
        server.advance(31_000)
        const back = {
          ...healthy('fleet-01', now + 31_500),
          availability: { state: 'up' as const, since: now + 31_500 },
        }
        expect((await server.call('POST', '/api/v1/ingest', { apiKey: key, body: back })).status).toBe(200)
        expect((await runDue(now + 32_000)).databases).toBe(0)
        expect((await runDue(now + 60_000)).databases).toBe(1)
        const after = await server.call('GET', `/api/v1/databases/${ids[1]}/alerts?status=open`, { apiKey: key })
        expect(after.body.map((a: any) => a.rule)).not.toContain('database_unreachable')
      } finally {
        server.freeze(false)
      }
    })

    /** A report of `name` at the server's clock: the header and availability only. */
    const report = (name: string, availability: Record<string, unknown>) => {
      const at = server.deps.clock()
      return {
        batch_id: crypto.randomUUID(),
        collected_at: at,
        interval_seconds: 10,
        agent_version: 'test',
        database: { name, engine: 'postgres', host: 'h', port: 5432 },
        availability,
      }
    }
    const count = async (sql: string, params: unknown[]) =>
      Number((await server.store.driver.get<{ n: unknown }>(sql, params))!.n)

    test("a forged since (year 9999, or 0) is bounded by the server's clock and the registration; no negative figure", async () => {
      server.advance(3_600_000)
      server.freeze(true)
      try {
        const created = server.deps.clock()
        const first = await server.call('POST', '/api/v1/ingest', {
          apiKey: key,
          body: report('forged', { state: 'up', since: 0 }),
        })
        expect(first.status).toBe(200)
        const id = first.body.database_id as string
        // Up since 0: since the registration instead.
        expect((await server.store.databaseAvailability.state(id))!.since).toBe(created)
        server.advance(10_000)
        const at = server.deps.clock()
        const down = await server.call('POST', '/api/v1/ingest', {
          apiKey: key,
          body: report('forged', { state: 'down', since: Date.UTC(9999, 11, 31), cause: 'refused', message: 'x' }),
        })
        expect(down.status).toBe(200)
        const state = (await server.store.databaseAvailability.state(id))!
        expect(state).toMatchObject({ state: 'down', since: at })
        expect(
          await count(
            "SELECT COUNT(*) AS n FROM events WHERE database_id = $1 AND kind = 'database_down' AND ts = $2",
            [id, at],
          ),
        ).toBe(1)
        // The agent reports at every ping (10 s), the forged since each time: the same outage.
        const pings = async (n: number) => {
          for (let i = 0; i < n; i++) {
            server.advance(10_000)
            const res = await server.call('POST', '/api/v1/ingest', {
              apiKey: key,
              body: report('forged', { state: 'down', since: Date.UTC(9999, 11, 31), cause: 'refused', message: 'x' }),
            })
            expect(res.status).toBe(200)
          }
        }
        await pings(4)
        expect((await server.store.databaseAvailability.state(id))!.since).toBe(at)
        // Diagnosed once after the change; 30 s later it is not "changed" again (it was at every tick).
        const monitor = createMonitor(server.deps, { retentionDays: 30 })
        const now = server.deps.clock()
        await monitor.runOnce(now)
        expect((await evaluations()).get(id)).toBe(now)
        await pings(3)
        await monitor.runDue(server.deps.clock(), server.deps.clock() - 60_000)
        expect((await evaluations()).get(id)).toBe(now)
        const doctor = await server.call('GET', `/api/v1/databases/${id}/doctor`, { apiKey: key })
        const finding = doctor.body.top_issues.find((f: any) => f.rule === 'database_unreachable')
        expect(finding.metrics.down_s).toBe(70)
        expect(finding.detail).toContain(`since ${new Date(at).toISOString()} (1.2 min)`)
        const availability = await server.call('GET', `/api/v1/databases/${id}/availability?days=1`, { apiKey: key })
        expect(availability.body.total.down_ms).toBe(70_000)
        expect(availability.body.total.up_ms).toBe(10_000)
        // Up again "since 0": not before the outage began, so it lasted 0 s, not minus 1970 years.
        const up = await server.call('POST', '/api/v1/ingest', {
          apiKey: key,
          body: report('forged', { state: 'up', since: 0 }),
        })
        expect(up.status).toBe(200)
        expect(await server.store.databaseAvailability.spans(id, 0)).toMatchObject({
          outages: [{ started_at: at, ended_at: at }],
        })
      } finally {
        server.freeze(false)
      }
    })

    test('a flapping database: 36 reports 5 s apart make one outage, two events and at most 7 diagnoses', async () => {
      server.advance(3_600_000)
      server.freeze(true)
      try {
        const monitor = createMonitor(server.deps, { retentionDays: 30 })
        let id = ''
        let diagnoses = 0
        for (let i = 0; i < 36; i++) {
          server.advance(5_000)
          const at = server.deps.clock()
          const availability =
            i % 2 === 0
              ? { state: 'down', since: at, cause: 'refused', message: `toggle ${i}` }
              : { state: 'up', since: at }
          const res = await server.call('POST', '/api/v1/ingest', {
            apiKey: key,
            body: report('flapping', availability),
          })
          expect(res.status).toBe(200)
          id = res.body.database_id
          // A scheduled tick every 5 s.
          await monitor.runDue(at, at - 60_000 + 5_000)
          if ((await evaluations()).get(id) === at) diagnoses++
        }
        expect(await count('SELECT COUNT(*) AS n FROM outages WHERE database_id = $1', [id])).toBe(1)
        expect(
          await count(
            "SELECT COUNT(*) AS n FROM events WHERE database_id = $1 AND kind IN ('database_down', 'database_up')",
            [id],
          ),
        ).toBe(2)
        // 175 s from the first diagnosis: at most one every 30 s.
        expect(diagnoses).toBeLessThanOrEqual(7)
        expect(await count('SELECT COUNT(*) AS n FROM alerts WHERE database_id = $1', [id])).toBeLessThanOrEqual(4)
        console.log(
          `flapping: 36 reports, ${diagnoses} diagnoses, ${await count('SELECT COUNT(*) AS n FROM alerts WHERE database_id = $1', [id])} alerts opened`,
        )
        // The outage: from the first down to the last up (175 s), ended.
        const spans = await server.store.databaseAvailability.spans(id, 0)
        expect(spans.outages).toHaveLength(1)
        expect(spans.outages[0]!.ended_at! - spans.outages[0]!.started_at).toBe(175_000)
        // Down again with another cause: a new outage.
        server.advance(5_000)
        await server.call('POST', '/api/v1/ingest', {
          apiKey: key,
          body: report('flapping', { state: 'down', since: server.deps.clock(), cause: 'authentication' }),
        })
        expect(await count('SELECT COUNT(*) AS n FROM outages WHERE database_id = $1', [id])).toBe(2)
      } finally {
        server.freeze(false)
      }
    })

    if (kind === 'sqlite') {
      test('a pass lets requests through between databases (SQLite reads hold the event loop while they run)', async () => {
        const monitor = createMonitor(server.deps, { retentionDays: 30 })
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
