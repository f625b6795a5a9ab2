// The overview and the doctor as a whole, on both stores, from crafted batches: the score and status
// follow the documented formula, findings carry their numbers, unverified organizations get the prose
// without the fix commands, and the overview has every field of the spec for each engine. The rules
// themselves are tested against real databases under test/doctor/.
import { describe, expect, test } from 'bun:test'
import { chBatch, pgBatch } from '../support/batches.ts'
import { createApiKey, signup, startTestServer, storeKinds } from '../support/server.ts'
import { agentSession } from '../support/batches.ts'

const counters = (hit: number, read: number) => ({ blks_hit: hit, blks_read: read })

for (const kind of storeKinds) {
  describe(`overview and doctor (${kind})`, () => {
    const session = agentSession(kind)

    test('a registered database without data: one warning (no data yet), score 90, degraded', async () => {
      const res = await session.server.call('POST', '/api/v1/databases', {
        apiKey: session.key,
        body: { name: 'quiet', engine: 'postgres', host: 'h' },
      })
      const doctor = await session.ok(res.body.id, '/doctor')
      expect(doctor).toMatchObject({ status: 'degraded', score: 90, evaluated_at: expect.any(String) })
      expect(doctor.top_issues).toEqual([
        expect.objectContaining({
          rule: 'agent_disconnected',
          key: 'agent_disconnected',
          severity: 'warning',
          category: 'availability',
          title: 'No data from the agent yet',
        }),
      ])
      const overview = await session.ok(res.body.id, '/overview')
      expect(overview).toEqual({
        engine: 'postgres',
        status: 'disconnected',
        last_seen_at: null,
        reason: 'no_data',
        down_since: null,
        cause: null,
        cause_message: null,
        agent_last_heard_at: null,
        data_as_of: null,
        uptime_24h: null,
        uptime_30d: null,
        uptime_24h_watched_ms: 0,
        uptime_30d_watched_ms: 0,
        health_score: 90,
        active_queries: 0,
        longest_query_ms: null,
        server_started_at: null,
        uptime_s: null,
        blocked_queries: 0,
        cache_hit_ratio: null,
        dead_tuple_ratio: null,
        last_autovacuum: null,
        as_of: null,
        agent_notes: [],
        top_queries: [],
      })
      expect(doctor.top_issues[0].as_of).toBeNull()
    })

    test('findings and figures carry as_of: when the data they were drawn from was collected', async () => {
      const now = Date.now()
      const running = {
        pid: 7,
        query_text: 'SELECT pg_sleep(1000)',
        state: 'active',
        wait_event_type: 'Timeout',
        wait_event: 'PgSleep',
        duration_ms: 400_000,
        blocking_pids: [],
      }
      const id = await session.ingest(
        pgBatch('dated', now - 90_000, { activity: [running], database_stats: counters(50_000, 0) }),
      )
      // A later batch without the activity section: the long-running query's finding is of the earlier one.
      await session.ingest(pgBatch('dated', now - 30_000, { database_stats: counters(50_000, 0) }))
      const doctor = await session.ok(id, '/doctor')
      const overview = await session.ok(id, '/overview')
      const [long] = doctor.top_issues.filter((f: { rule: string }) => f.rule === 'pg_long_running_queries')
      // RFC 3339, as every time the API writes.
      expect(long).toMatchObject({ key: 'pg_long_running_queries:pid 7', as_of: new Date(now - 90_000).toISOString() })
      // The figures read the activity snapshot and the last hour's counters, which run to the latest batch (its arrival).
      expect(doctor.metrics_summary.as_of).toBe(overview.last_seen_at)
      expect(overview.as_of).toBe(doctor.metrics_summary.as_of)
    })

    test('a low cache hit ratio is a finding with its numbers; score and status follow the formula', async () => {
      const now = Date.now()
      const id = await session.ingest(pgBatch('cold', now - 60_000, { database_stats: counters(94_000, 6_000) }))
      await session.ingest(pgBatch('cold', now - 30_000, { database_stats: counters(0, 0) }))
      const doctor = await session.ok(id, '/doctor')
      // 94 % is below 99 % (warning) and above 90 % (critical).
      expect(doctor.status).toBe('degraded')
      expect(doctor.score).toBe(90)
      const [finding] = doctor.top_issues
      expect(finding).toMatchObject({
        rule: 'pg_cache_hit_ratio',
        severity: 'warning',
        category: 'performance',
        metrics: { cache_hit_ratio: 0.94, blks_hit: 94_000, blks_read: 6_000 },
        objects: [],
      })
      expect(finding.detail).toContain('94.00 %')
      expect(finding.how_to_investigate.length).toBeGreaterThan(0)
      expect(finding.how_to_fix.length).toBeGreaterThan(0)
      expect(doctor.metrics_summary).toMatchObject({
        cache_hit_ratio: 0.94,
        findings: { critical: 0, warning: 1, info: 0 },
      })
      // Summed counters of the last hour: as of the latest batch, the time it arrived.
      expect(finding.as_of).toBe((await session.ok(id, '/overview')).last_seen_at)

      await session.ingest(pgBatch('cold', now - 20_000, { database_stats: counters(0, 30_000) }))
      const worse = await session.ok(id, '/doctor')
      // 94,000 / 130,000 = 72 %: critical, score 100 - 30.
      expect(worse).toMatchObject({ status: 'unhealthy', score: 70 })
      expect(worse.top_issues[0]).toMatchObject({ severity: 'critical', metrics: { cache_hit_ratio: 0.7231 } })
      expect((await session.ok(id, '/overview')).health_score).toBe(70)
    })

    test('a ClickHouse overview has the ClickHouse fields from the latest merges, mutations and server metrics', async () => {
      const now = Date.now()
      const merge = (progress: number) => ({
        database: 'db',
        table: 't',
        elapsed_s: 5,
        progress,
        num_parts: 3,
        total_size_bytes_compressed: 1000,
        result_part_name: 'all_1_3_1',
        is_mutation: false,
      })
      const mutation = (id: string, done: boolean, stuck: boolean) => ({
        database: 'db',
        table: 't',
        mutation_id: id,
        command: 'UPDATE x = 1 WHERE 1',
        create_time: now - 60_000,
        is_done: done,
        parts_to_do: done ? 0 : 2,
        latest_fail_reason: stuck ? 'boom' : '',
        latest_fail_time: null,
        stuck,
      })
      const id = await session.ingest(
        chBatch('events', now - 5_000, {
          activity: [
            {
              pid: 'q1',
              query_text: 'SELECT 1',
              state: 'active',
              wait_event_type: null,
              wait_event: null,
              duration_ms: 1500,
              blocking_pids: [],
              memory_usage: 10,
              read_bytes: 1,
              written_bytes: 0,
              read_rows: 1,
            },
            {
              pid: 'q2',
              query_text: 'SELECT 2',
              state: 'active',
              wait_event_type: null,
              wait_event: null,
              duration_ms: 250,
              blocking_pids: [],
              memory_usage: 10,
              read_bytes: 1,
              written_bytes: 0,
              read_rows: 1,
            },
          ],
          merges: [merge(0.25), merge(0.75)],
          mutations: [mutation('m1', false, true), mutation('m2', false, false), mutation('m3', true, false)],
          // The statement's p99 (199) is not the server's (197, the agent's p99 over all of the cycle's logged queries).
          query_stats: [
            {
              query_hash: '42',
              query_text: 'SELECT x FROM t',
              calls: 4,
              total_time_ms: 400,
              rows: 4,
              shared_blks_hit: 0,
              shared_blks_read: 0,
              p99_ms: 199,
            },
          ],
          server_metrics: { queries_logged: 4, query_p99_ms: 197 },
        }),
      )
      const overview = await session.ok(id, '/overview')
      expect(overview).toMatchObject({
        engine: 'clickhouse',
        status: 'connected',
        active_queries: 2,
        longest_query_ms: 1500,
        active_merges: 2,
        merge_progress_pct: 50,
        active_mutations: 2,
        stuck_mutations: 1,
        query_p99_ms: 197,
        top_queries: [
          { query_hash: '42', query_text: 'SELECT x FROM t', total_calls: 4, total_time_ms: 400, mean_time_ms: 100 },
        ],
      })
      expect(overview).not.toHaveProperty('cache_hit_ratio')
      expect((await session.ok(id, '/server-metrics')).query_p99_ms).toBe(197)
      // A cycle that logged no query: null, never the statement's 199 (what the overview showed before).
      await session.ingest(chBatch('events', now - 1_000, { server_metrics: { queries_logged: 0 } }))
      expect((await session.ok(id, '/overview')).query_p99_ms).toBeNull()
      expect(await session.ok(id, '/server-metrics')).toMatchObject({ query_p99_ms: null, queries_logged: 0 })
    })

    test("a diagnosis is reused for a few seconds until the database's next batch; another database's batch does not invalidate it", async () => {
      // Times on a 5-second boundary with room to spare, so the reuse window cannot end between the reads.
      const clock = session.server.deps.clock
      const now = Math.floor(Date.now() / 5_000) * 5_000 + 1_000
      session.server.deps.clock = () => now
      // Each diagnosis reads the database's active queries once: the count of diagnoses made.
      const sessions = session.server.store.sessions
      const activeQueries = sessions.activeQueries
      const diagnosed = new Map<string, number>()
      sessions.activeQueries = (databaseId, limit) => {
        diagnosed.set(databaseId, (diagnosed.get(databaseId) ?? 0) + 1)
        return activeQueries.call(sessions, databaseId, limit)
      }
      try {
        const id = await session.ingest(pgBatch('reused', now - 1000, { database_stats: counters(99_000, 1_000) }))
        const first = await session.ok(id, '/doctor')
        await session.ok(id, '/overview')
        expect(diagnosed.get(id)).toBe(1)
        // A batch of another database, in the same organization.
        await session.ingest(pgBatch('reused-other', now - 900, { database_stats: counters(0, 50_000) }))
        expect(await session.ok(id, '/doctor')).toEqual(first)
        expect(diagnosed.get(id)).toBe(1)
        // The database's own batch (at the same clock time, so last_seen_at does not move).
        await session.ingest(pgBatch('reused', now - 500, { database_stats: counters(0, 50_000) }))
        const third = await session.ok(id, '/doctor')
        expect(diagnosed.get(id)).toBe(2)
        expect(third.top_issues[0]).toMatchObject({ rule: 'pg_cache_hit_ratio', severity: 'critical' })
      } finally {
        session.server.deps.clock = clock
        sessions.activeQueries = activeQueries
      }
    })

    test('another organization gets 404 for overview and doctor', async () => {
      const res = await session.server.call('POST', '/api/v1/databases', {
        apiKey: session.key,
        body: { name: 'private', engine: 'postgres', host: 'h' },
      })
      const other = await signup(session.server)
      for (const path of ['overview', 'doctor']) {
        const r = await session.server.call('GET', `/api/v1/databases/${res.body.id}/${path}`, { token: other.token })
        expect({ status: r.status, body: r.body }).toEqual({ status: 404, body: { error: 'database not found' } })
      }
    })
  })
}

describe('doctor for an unverified organization', () => {
  test('keeps the prose and investigation queries, leaves out the fix commands and says why', async () => {
    const server = await startTestServer('sqlite')
    try {
      const account = await signup(server)
      const key = (await createApiKey(server, account, 'agent')).key
      const now = Date.now()
      const res = await server.call('POST', '/api/v1/ingest', {
        apiKey: key,
        body: pgBatch('cold', now - 1000, { database_stats: counters(50_000, 50_000) }),
      })
      const doctor = await server.call('GET', `/api/v1/databases/${res.body.database_id}/doctor`, {
        token: account.token,
      })
      expect(doctor.status).toBe(200)
      const [finding] = doctor.body.top_issues
      expect(finding).toMatchObject({
        rule: 'pg_cache_hit_ratio',
        severity: 'critical',
        how_to_fix: [],
        how_to_fix_locked: 'Verify your email address to unlock the commands that fix this.',
      })
      expect(finding.recommendation.length).toBeGreaterThan(0)
      expect(finding.how_to_investigate.length).toBeGreaterThan(0)
    } finally {
      await server.stop()
    }
  })
})
