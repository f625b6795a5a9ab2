// Ingest and the statement endpoints on both stores: auto-registration by name, settings in the
// response, each batch applied once, exact sums over windows that mix hourly and minute buckets.
import { describe, expect, test } from 'bun:test'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { BATCH_AGE_HEADER } from '../../src/shared/ingest-path.ts'
import { HOUR, agentSession, iso, pgBatch } from '../support/batches.ts'
import { createApiKey, signup, storeKinds } from '../support/server.ts'

function batch(
  name: string,
  collectedAt: number,
  stats: { hash: string; calls: number; time: number; rows?: number; hit?: number; read?: number }[],
  extra: Partial<IngestBatch> = {},
): IngestBatch {
  return pgBatch(name, collectedAt, {
    query_stats: stats.map((s) => ({
      query_hash: s.hash,
      query_text: `SELECT ${s.hash}`,
      calls: s.calls,
      total_time_ms: s.time,
      rows: s.rows ?? s.calls,
      shared_blks_hit: s.hit ?? 0,
      shared_blks_read: s.read ?? 0,
    })),
    ...extra,
  })
}

for (const kind of storeKinds) {
  describe(`ingest and queries (${kind})`, () => {
    const session = agentSession(kind, { ingestWriter: true })
    const ingest = (b: unknown) => session.server.call('POST', '/api/v1/ingest', { apiKey: session.key, body: b })

    test('the first batch registers the database and the response carries its settings', async () => {
      const res = await ingest(batch('auto-registered', Date.now(), [{ hash: 'q1', calls: 1, time: 1 }]))
      expect(res.status).toBe(200)
      expect(res.body).toEqual({
        database_id: expect.any(String),
        duplicate: false,
        settings: {
          poll_interval_seconds: 10,
          collect_explain_plans: true,
          collect_replication: true,
          disabled_collectors: [],
        },
      })
      const db = await session.server.call('GET', `/api/v1/databases/${res.body.database_id}`, { apiKey: session.key })
      expect(db.body).toMatchObject({
        name: 'auto-registered',
        engine: 'postgres',
        engine_version: '17.2',
        host: 'db.internal',
        port: 5432,
        status: 'connected',
      })

      await session.server.call('PATCH', `/api/v1/databases/${res.body.database_id}`, {
        apiKey: session.key,
        body: { poll_interval_seconds: 30, disabled_collectors: ['locks'] },
      })
      const next = await ingest(batch('auto-registered', Date.now(), []))
      expect(next.body.settings).toEqual({
        poll_interval_seconds: 30,
        collect_explain_plans: true,
        collect_replication: true,
        disabled_collectors: ['locks'],
      })
      expect(next.body.database_id).toBe(res.body.database_id)
    })

    test("the agent config's tags apply when the database registers; later API edits stay; bad tags are 400", async () => {
      const tagged = (tags: Record<string, string>) => {
        const b = batch('tagged', Date.now(), [])
        return { ...b, database: { ...b.database, tags } }
      }
      const first = await ingest(tagged({ env: 'prod', team: 'core' }))
      expect(first.status).toBe(200)
      const id = first.body.database_id
      const get = async () =>
        (await session.server.call('GET', `/api/v1/databases/${id}`, { apiKey: session.key })).body.tags
      expect(await get()).toEqual({ env: 'prod', team: 'core' })
      await session.server.call('PATCH', `/api/v1/databases/${id}`, {
        apiKey: session.key,
        body: { tags: { env: 'staging' } },
      })
      expect((await ingest(tagged({ env: 'prod', team: 'core' }))).status).toBe(200)
      expect(await get()).toEqual({ env: 'staging' })
      // Untagged batches register with no tags.
      const plain = await ingest(batch('untagged', Date.now(), []))
      expect(
        (await session.server.call('GET', `/api/v1/databases/${plain.body.database_id}`, { apiKey: session.key })).body
          .tags,
      ).toEqual({})
      const tooLongKey = await ingest({
        ...tagged({ ['k'.repeat(101)]: 'v' }),
        database: { ...tagged({}).database, name: 'bad-tags', tags: { ['k'.repeat(101)]: 'v' } },
      })
      expect(tooLongKey.status).toBe(400)
      const tooMany = await ingest({
        ...tagged({}),
        database: {
          ...tagged({}).database,
          name: 'bad-tags',
          tags: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])),
        },
      })
      expect(tooMany.status).toBe(400)
      const list = (await session.server.call('GET', '/api/v1/databases', { apiKey: session.key })).body as any[]
      expect(list.some((d) => d.name === 'bad-tags')).toBe(false)
    })

    test('a replayed batch is acknowledged as duplicate and counted once', async () => {
      const b = batch('replay', Date.now(), [{ hash: 'once', calls: 7, time: 70 }])
      expect((await ingest(b)).body.duplicate).toBe(false)
      expect((await ingest(b)).body.duplicate).toBe(true)
      const id = (await ingest(batch('replay', Date.now(), []))).body.database_id
      const list = await session.server.call('GET', `/api/v1/databases/${id}/queries`, { apiKey: session.key })
      expect(list.body.map((q: any) => [q.query_hash, q.total_calls])).toEqual([['once', 7]])
    })

    test('sums are exact over a window mixing hourly and minute buckets', async () => {
      const base = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR
      const at = (ms: number) => base + ms
      // q: 1 call per batch at 30 min past each of 4 hours, plus 2 batches in the current partial hour.
      const times = [
        at(30 * 60_000),
        at(HOUR + 30 * 60_000),
        at(2 * HOUR + 30 * 60_000),
        at(3 * HOUR + 30 * 60_000),
        at(4 * HOUR + 5 * 60_000),
        at(4 * HOUR + 6 * 60_000),
      ]
      let id = ''
      for (const [i, t] of times.entries()) {
        const res = await ingest(
          batch('window', t, [
            { hash: 'q', calls: 1, time: 10 * (i + 1), rows: 2, hit: 9, read: 1 },
            { hash: 'other', calls: 100, time: 1 },
          ]),
        )
        id = res.body.database_id
      }
      const get = async (query: string) =>
        (await session.server.call('GET', `/api/v1/databases/${id}/queries${query}`, { apiKey: session.key })).body
      // Whole window: 6 calls, 10+20+...+60 = 210 ms.
      const all = await get(`?since=${iso(base)}&until=${iso(base + 5 * HOUR)}`)
      const q = all.find((r: any) => r.query_hash === 'q')
      expect(q).toMatchObject({
        total_calls: 6,
        total_time_ms: 210,
        mean_time_ms: 35,
        total_rows: 12,
        shared_blks_hit: 54,
        shared_blks_read: 6,
        cache_hit_ratio: 0.9,
        query_text: 'SELECT q',
      })
      // A window starting at 0:31 and ending at 4:05:30: skips the first batch, takes the 4:05 one.
      const edge = await get(`?since=${iso(at(31 * 60_000))}&until=${iso(at(4 * HOUR + 5 * 60_000 + 30_000))}`)
      expect(edge.find((r: any) => r.query_hash === 'q')).toMatchObject({
        total_calls: 4,
        total_time_ms: 20 + 30 + 40 + 50,
      })
      // Sorting and limits.
      expect((await get(`?since=${iso(base)}&sort_by=calls`)).map((r: any) => r.query_hash)).toEqual(['other', 'q'])
      expect((await get(`?since=${iso(base)}&sort_by=mean_time`)).map((r: any) => r.query_hash)).toEqual(['q', 'other'])
      expect(await get(`?since=${iso(base)}&limit=1`)).toHaveLength(1)
      expect(await get(`?since=${iso(base)}&limit=5000`)).toHaveLength(2)

      const detail = (
        await session.server.call('GET', `/api/v1/databases/${id}/queries/q?since=${iso(base)}`, {
          apiKey: session.key,
        })
      ).body
      expect(detail).toMatchObject({
        query_hash: 'q',
        query_text: 'SELECT q',
        total_calls: 6,
        total_time_ms: 210,
        resolution_seconds: 60,
      })
      expect(detail.timeseries.map((p: any) => [p.ts, p.calls, p.total_time_ms])).toEqual(
        times.map((t, i) => [iso(t), 1, 10 * (i + 1)]),
      )
      expect(detail.timeseries[0]).toEqual({
        ts: iso(times[0]!),
        calls: 1,
        total_time_ms: 10,
        mean_time_ms: 10,
        rows: 2,
        shared_blks_hit: 9,
        shared_blks_read: 1,
        shared_blks_dirtied: 0,
        shared_blks_written: 0,
        cache_hit_ratio: 0.9,
        temp_blks_read: 0,
        temp_blks_written: 0,
        blk_read_time_ms: 0,
        blk_write_time_ms: 0,
        p99_ms: null,
      })
      const missing = await session.server.call('GET', `/api/v1/databases/${id}/queries/nope`, { apiKey: session.key })
      expect({ status: missing.status, body: missing.body }).toEqual({
        status: 404,
        body: { error: 'query not found' },
      })
    })

    test('query parameters: clamped limits, 400 for bad values', async () => {
      const id = (await ingest(batch('params', Date.now(), []))).body.database_id
      const cases: [string, string][] = [
        ['?sort_by=speed', 'sort_by must be one of: total_time, calls, mean_time, rows, io_time'],
        ['?limit=0', 'limit must be a whole number from 1 (at most 100 are returned)'],
        ['?limit=ten', 'limit must be a whole number from 1 (at most 100 are returned)'],
        ['?since=yesterday', 'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z'],
        ['?until=2026-13-45T00:00:00Z', 'until must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z'],
        ['?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z', 'since must be before until'],
      ]
      for (const [query, error] of cases) {
        const res = await session.server.call('GET', `/api/v1/databases/${id}/queries${query}`, { apiKey: session.key })
        expect({ query, status: res.status, body: res.body }).toEqual({ query, status: 400, body: { error } })
      }
    })

    test('ingest validation, engine mismatch, unverified limit and organization isolation', async () => {
      const bad = await ingest({
        ...batch('v', Date.now(), []),
        database: { name: 'v', engine: 'mysql', host: 'h', port: 1 },
      })
      expect(bad.status).toBe(400)
      expect(bad.body.error).toStartWith('invalid database.engine')
      const noId = await ingest({ ...batch('v', Date.now(), []), batch_id: undefined })
      expect(noId.status).toBe(400)

      await ingest(batch('engine-fixed', Date.now(), []))
      const ch = batch('engine-fixed', Date.now(), [])
      ch.database.engine = 'clickhouse'
      const mismatch = await ingest(ch)
      expect({ status: mismatch.status, body: mismatch.body }).toEqual({
        status: 409,
        body: { error: 'database "engine-fixed" is registered as postgres, but the agent reports clickhouse' },
      })

      const fresh = await signup(session.server)
      const freshKey = (await createApiKey(session.server, fresh)).key
      const first = await session.server.call('POST', '/api/v1/ingest', {
        apiKey: freshKey,
        body: batch('one', Date.now(), []),
      })
      expect(first.status).toBe(200)
      const second = await session.server.call('POST', '/api/v1/ingest', {
        apiKey: freshKey,
        body: batch('two', Date.now(), []),
      })
      expect({ status: second.status, body: second.body }).toEqual({
        status: 403,
        body: { error: 'unverified organizations can register 1 database; verify your email address to register more' },
      })
      // The other organization's batches never reach this organization's database of the same name.
      const other = await session.server.call('POST', '/api/v1/ingest', {
        apiKey: freshKey,
        body: batch('one', Date.now(), [{ hash: 'theirs', calls: 1, time: 1 }]),
      })
      const mine = await ingest(batch('one', Date.now(), []))
      expect(mine.body.database_id).not.toBe(other.body.database_id)
      expect(
        (
          await session.server.call('GET', `/api/v1/databases/${mine.body.database_id}/queries`, {
            apiKey: session.key,
          })
        ).body,
      ).toEqual([])
      expect(
        (
          await session.server.call('GET', `/api/v1/databases/${other.body.database_id}/queries`, {
            apiKey: session.key,
          })
        ).status,
      ).toBe(404)
    })

    test('explain plans: newest first, marked where the plan changed, limit clamped to 50', async () => {
      const t0 = Date.now() - 10 * 60_000
      const plan = (ts: number, planHash: string, cost: number) => ({
        query_hash: 'qp',
        ts,
        plan_json: { Plan: { 'Node Type': planHash === 'aaaa' ? 'Index Scan' : 'Seq Scan', 'Total Cost': cost } },
        plan_hash: planHash,
        total_cost: cost,
        actual_time_ms: null,
        seq_scans: planHash === 'aaaa' ? 0 : 1,
        index_scans: planHash === 'aaaa' ? 1 : 0,
        rows_estimated: 10,
        rows_actual: null,
        source: 'sampled' as const,
      })
      const plans = [plan(t0, 'aaaa', 8.3), plan(t0 + 60_000, 'aaaa', 8.4), plan(t0 + 120_000, 'bbbb', 1900)]
      const res = await ingest(
        batch('plans', t0 + 120_000, [{ hash: 'qp', calls: 1, time: 1 }], { explain_plans: plans }),
      )
      const id = res.body.database_id
      const list = await session.server.call('GET', `/api/v1/databases/${id}/queries/qp/explain`, {
        apiKey: session.key,
      })
      expect(list.status).toBe(200)
      expect(list.body.map((p: any) => [p.plan_hash, p.plan_changed, p.total_cost, p.seq_scans])).toEqual([
        ['bbbb', true, 1900, 1],
        ['aaaa', false, 8.4, 0],
        ['aaaa', false, 8.3, 0],
      ])
      expect(list.body[0]).toEqual({
        ts: new Date(t0 + 120_000).toISOString(),
        plan_json: { Plan: { 'Node Type': 'Seq Scan', 'Total Cost': 1900 } },
        plan_hash: 'bbbb',
        total_cost: 1900,
        actual_time_ms: null,
        seq_scans: 1,
        index_scans: 0,
        rows_estimated: 10,
        rows_actual: null,
        source: 'sampled',
        plan_changed: true,
      })
      const one = await session.server.call('GET', `/api/v1/databases/${id}/queries/qp/explain?limit=1`, {
        apiKey: session.key,
      })
      expect(one.body.map((p: any) => p.plan_hash)).toEqual(['bbbb'])
      expect(
        (
          await session.server.call('GET', `/api/v1/databases/${id}/queries/qp/explain?limit=9999`, {
            apiKey: session.key,
          })
        ).body,
      ).toHaveLength(3)
      // The oldest plan of a narrower window still knows what came before it.
      const narrow = await session.server.call(
        'GET',
        `/api/v1/databases/${id}/queries/qp/explain?since=${new Date(t0 + 90_000).toISOString()}`,
        { apiKey: session.key },
      )
      expect(narrow.body.map((p: any) => [p.plan_hash, p.plan_changed])).toEqual([['bbbb', true]])
    })

    test('ingest takes batches beyond the 1 MiB account cap, up to 16 MiB', async () => {
      const big = batch(
        'big',
        Date.now(),
        Array.from({ length: 60 }, (_, i) => ({ hash: `big${i}`, calls: 1, time: 1 })),
      )
      for (const q of big.query_stats!) q.query_text = 'x'.repeat(50_000) // 3 MB in all
      expect((await ingest(big)).status).toBe(200)
      const huge = JSON.stringify({ ...big, padding: 'y'.repeat(17 * 1024 * 1024) })
      const res = await session.server.call('POST', '/api/v1/ingest', {
        apiKey: session.key,
        rawBody: huge,
        headers: { 'content-type': 'application/json' },
      })
      expect({ status: res.status, body: res.body }).toEqual({
        status: 413,
        body: { error: 'request body is larger than the 16384 KiB limit' },
      })
    })

    test('a batch delivered late from the agent buffer does not replace a newer activity snapshot', async () => {
      const active = (pid: number) => ({
        pid,
        query_text: `q${pid}`,
        state: 'active',
        wait_event_type: null,
        wait_event: null,
        duration_ms: 5,
        blocking_pids: [],
      })
      const now = Date.now()
      const newer = await ingest(batch('late', now, [], { activity: [active(2)] }))
      // As the agent sends a batch from its buffer: with its age, which dates it on the server's clock.
      const late = await session.server.call('POST', '/api/v1/ingest', {
        apiKey: session.key,
        body: batch('late', now - 60_000, [], { activity: [active(1)] }),
        headers: { [BATCH_AGE_HEADER]: '60' },
      })
      expect(late.status).toBe(200)
      const list = await session.server.call('GET', `/api/v1/databases/${newer.body.database_id}/active`, {
        apiKey: session.key,
      })
      expect(list.body.map((a: any) => a.pid)).toEqual([2])
    })

    test('deleting a database removes its telemetry', async () => {
      const res = await ingest(batch('to-delete', Date.now(), [{ hash: 'gone', calls: 1, time: 1 }]))
      const id = res.body.database_id
      expect((await session.server.call('DELETE', `/api/v1/databases/${id}`, { apiKey: session.key })).status).toBe(204)
      for (const table of ['query_stats', 'query_texts', 'ingest_batches', 'snapshots', 'explain_plans']) {
        expect({ table, n: await session.rowCount(table, id) }).toEqual({ table, n: 0 })
      }
    })
  })
}
