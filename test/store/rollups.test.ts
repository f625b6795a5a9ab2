// Statement statistics rolled up into 10-minute and hourly buckets after their span (rollups/rollups.ts),
// on both stores: the ranges a read takes, answers that equal the sums of the batches sent over any
// window (with late batches into spans and hours already rolled up), the closed-hour sums the SQLite
// store keeps between requests seeing late batches and deletions, and migration 7 rolling up the
// minute rows of a store written by an earlier version.
import { afterEach, describe, expect, test } from 'bun:test'
import { migrations } from '../../src/server/store/migrations.ts'
import { openStore } from '../../src/server/store/open.ts'
import { PostgresDriver } from '../../src/server/store/postgres/driver.ts'
import {
  type RollupMarks,
  type StatRange,
  lockRollups,
  rollupDelayMs,
  statRanges,
} from '../../src/server/store/rollups/rollups.ts'
import { SqliteDriver } from '../../src/server/store/sqlite/driver.ts'
import type { SqlDriver } from '../../src/server/store/driver.ts'
import { join } from 'node:path'
import { HOUR, MINUTE, agentSession, iso, pgBatch, range } from '../support/batches.ts'
import { freshStoreLocation, storeKinds } from '../support/server.ts'

const T = Date.parse('2026-11-20T00:00:00Z')
const hm = (h: number, m = 0) => T + h * HOUR + m * MINUTE
const show = (ranges: StatRange[]) =>
  ranges.map(
    (r) =>
      `${r.resolution} ${new Date(r.from).toISOString().slice(11, 16)}-${new Date(r.to).toISOString().slice(11, 16)}`,
  )

describe('statRanges', () => {
  const marks = (spans: number, hours: number): RollupMarks => ({ spans, hours })

  test('whole hours from hourly buckets, whole spans from 10-minute buckets, the rest from minutes', () => {
    expect(show(statRanges({ since: hm(0, 7), until: hm(3, 23) }, marks(hm(3, 20), hm(3))))).toEqual([
      '60 00:07-00:10',
      '600 00:10-01:00',
      '3600 01:00-03:00',
      '600 03:00-03:20',
      '60 03:20-03:23',
    ])
  })

  test('a level is read only before its mark: finer buckets after it', () => {
    expect(show(statRanges({ since: hm(0), until: hm(3, 23) }, marks(hm(2, 30), hm(2))))).toEqual([
      '3600 00:00-02:00',
      '600 02:00-02:30',
      '60 02:30-03:23',
    ])
    // Nothing rolled up yet: minute buckets throughout.
    expect(show(statRanges({ since: hm(0, 5), until: hm(2, 5) }, marks(hm(0), hm(0))))).toEqual(['60 00:05-02:05'])
  })

  test('before the minute floor whole hours only, merged with the hourly range after it', () => {
    expect(
      show(statRanges({ since: hm(0, 30), until: hm(5, 45), minuteFloor: hm(2) }, marks(hm(5, 40), hm(5)))),
    ).toEqual(['3600 00:00-05:00', '600 05:00-05:40', '60 05:40-05:45'])
  })

  test('a window within one span reads minutes; since is taken to its minute', () => {
    expect(show(statRanges({ since: hm(1, 2) + 30_000, until: hm(1, 8) }, marks(hm(9), hm(9))))).toEqual([
      '60 01:02-01:08',
    ])
  })
})

/** One statement's batches as sent: time, calls and time. */
interface Sent {
  at: number
  hash: string
  calls: number
  time: number
}

const sumOver = (sent: Sent[], hash: string, since: number, until: number) => {
  const from = Math.floor(since / MINUTE) * MINUTE
  const inWindow = sent.filter((s) => s.hash === hash && s.at >= from && Math.floor(s.at / MINUTE) * MINUTE < until)
  return { calls: inWindow.reduce((a, s) => a + s.calls, 0), time: inWindow.reduce((a, s) => a + s.time, 0) }
}

for (const kind of storeKinds) {
  describe(`statement rollups (${kind})`, () => {
    const agent = agentSession(kind)
    const start = Math.floor(Date.now() / HOUR) * HOUR - 27 * HOUR
    const sent: Sent[] = []
    let id = ''

    async function send(at: number, calls: number) {
      const rows = [
        { hash: 'qa', calls, time: calls * 1.5 },
        { hash: 'qb', calls: 2 * calls, time: calls * 0.25 },
      ]
      sent.push(...rows.map((r) => ({ at, ...r })))
      id = await agent.ingest(
        pgBatch('rolled', at, {
          query_stats: rows.map((r) => ({
            query_hash: r.hash,
            query_text: `SELECT ${r.hash}`,
            calls: r.calls,
            total_time_ms: r.time,
            rows: r.calls,
            shared_blks_hit: 1,
            shared_blks_read: 0,
          })),
        }),
      )
    }

    const rowsAt = async (resolution: number) =>
      Number(
        (await agent.server.store.driver.get<{ n: number }>(
          'SELECT COUNT(*) AS n FROM query_stats WHERE database_id = $1 AND resolution = $2',
          [id, resolution],
        ))!.n,
      )

    test('batches over 27 hours: rolled up behind them, and every window answers the sums of the batches in it', async () => {
      // A batch every 13 minutes (not a divisor of 10 or 60: batches fall anywhere in spans and hours).
      for (let k = 0, at = start + 20_000; at < start + 27 * HOUR; k++, at += 13 * MINUTE) await send(at, 1 + (k % 5))
      const last = sent.at(-1)!.at
      const marks = await agent.server.store.driver.get<{ spans_until: number; hours_until: number }>(
        'SELECT spans_until, hours_until FROM query_rollups WHERE database_id = $1',
        [id],
      )
      expect({ spans: Number(marks!.spans_until), hours: Number(marks!.hours_until) }).toEqual({
        spans: Math.floor(last / (10 * MINUTE)) * 10 * MINUTE,
        hours: Math.floor(last / HOUR) * HOUR,
      })
      // One minute row per batch and statement; 10-minute and hourly rows for the closed ones.
      expect(await rowsAt(60)).toBe(sent.length)
      expect(await rowsAt(3600)).toBe(2 * 27 - 2)

      const windows: [number, number][] = [
        [start, start + 27 * HOUR],
        [start + 7 * MINUTE + 12_000, start + 26 * HOUR + 33 * MINUTE],
        [start + 3 * HOUR + 41 * MINUTE, start + 5 * HOUR + 9 * MINUTE],
        [start + 10 * HOUR + 10 * MINUTE, start + 10 * HOUR + 50 * MINUTE],
        [start + 26 * HOUR + 2 * MINUTE, last + MINUTE],
        [start + 2 * HOUR, start + 2 * HOUR + 30_000],
      ]
      for (const [since, until] of windows) {
        const list = (await agent.ok(id, `/queries?${range(since, until)}&sort_by=calls`)) as {
          query_hash: string
          total_calls: number
          total_time_ms: number
        }[]
        const expected = ['qb', 'qa']
          .map((hash) => ({ hash, ...sumOver(sent, hash, since, until) }))
          .filter((e) => e.calls > 0)
        expect({
          window: [iso(since), iso(until)],
          rows: list.map((q) => [q.query_hash, q.total_calls, Number(q.total_time_ms.toFixed(6))]),
        }).toEqual({
          window: [iso(since), iso(until)],
          rows: expected.map((e) => [e.hash, e.calls, Number(e.time.toFixed(6))]),
        })
        const detail = await agent.ok(id, `/queries/qa?${range(since, until)}`)
        const qa = sumOver(sent, 'qa', since, until)
        expect({ window: [iso(since), iso(until)], calls: detail.total_calls }).toEqual({
          window: [iso(since), iso(until)],
          calls: qa.calls,
        })
        // Windows of 24 hours or less have minute points, which add up to the same.
        if (until - since <= 24 * HOUR)
          expect(detail.timeseries.reduce((a: number, p: any) => a + p.calls, 0)).toBe(qa.calls)
      }
      // Over 24 hours the series is hourly: each hour's point is the sum of its batches, the last
      // (not rolled up yet) included.
      const detail = await agent.ok(id, `/queries/qa?${range(start, start + 27 * HOUR)}`)
      expect(detail.resolution_seconds).toBe(3600)
      const hourly = new Map<number, number>()
      for (const s of sent.filter((s) => s.hash === 'qa'))
        hourly.set(Math.floor(s.at / HOUR) * HOUR, (hourly.get(Math.floor(s.at / HOUR) * HOUR) ?? 0) + s.calls)
      expect(detail.timeseries.map((p: any) => [p.ts, p.calls])).toEqual([...hourly].map(([h, c]) => [iso(h), c]))
    })

    test('a late batch into spans and hours already rolled up counts in every window at once', async () => {
      const window = range(start, start + 27 * HOUR)
      const before = (await agent.ok(id, `/queries?${window}&sort_by=calls`)) as {
        query_hash: string
        total_calls: number
      }[]
      // The list again (the SQLite store now answers the closed hours from memory), then a batch from
      // an agent's buffer, 20 hours back.
      expect(await agent.ok(id, `/queries?${window}&sort_by=calls`)).toEqual(before)
      const lateAt = start + 6 * HOUR + 34 * MINUTE + 5_000
      const hours = await rowsAt(3600)
      await send(lateAt, 100)
      expect(await rowsAt(3600)).toBe(hours)
      const after = (await agent.ok(id, `/queries?${window}&sort_by=calls`)) as {
        query_hash: string
        total_calls: number
      }[]
      expect(after.map((q) => [q.query_hash, q.total_calls])).toEqual(
        before.map((q) => [q.query_hash, q.total_calls + (q.query_hash === 'qa' ? 100 : 200)]),
      )
      // Its span and its hour: minute, 10-minute and hourly buckets agree.
      for (const [since, until] of [
        [lateAt - 4 * MINUTE, lateAt + 3 * MINUTE],
        [start + 6 * HOUR + 30 * MINUTE, start + 6 * HOUR + 40 * MINUTE],
        [start + 6 * HOUR, start + 7 * HOUR],
      ]) {
        const list = (await agent.ok(id, `/queries?${range(since!, until!)}&sort_by=calls`)) as {
          query_hash: string
          total_calls: number
        }[]
        expect(list.map((q) => [q.query_hash, q.total_calls])).toEqual(
          ['qb', 'qa'].map((h) => [h, sumOver(sent, h, since!, until!).calls]),
        )
      }
    })

    test("a statement's text row is rewritten once in 10 minutes; its detail's last_seen is still the latest minute", async () => {
      const t0 = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR + 5_000
      let seen = ''
      const at = async (ms: number) => {
        seen = await agent.ingest(
          pgBatch('seen', ms, {
            query_stats: [
              {
                query_hash: 'qs',
                query_text: 'SELECT seen',
                calls: 1,
                total_time_ms: 1,
                rows: 1,
                shared_blks_hit: 0,
                shared_blks_read: 0,
              },
            ],
          }),
        )
      }
      const stored = async () =>
        Number(
          (await agent.server.store.driver.get<{ last_seen: number }>(
            'SELECT last_seen FROM query_texts WHERE database_id = $1',
            [seen],
          ))!.last_seen,
        )
      const detail = async () =>
        (await agent.ok(seen, `/queries/qs?${range(t0 - HOUR, t0 + HOUR)}`)) as {
          first_seen: string
          last_seen: string
          total_calls: number
        }
      // Every 10 s for 7 minutes: one text write, the first.
      for (let k = 0; k < 42; k++) await at(t0 + k * 10_000)
      expect(await stored()).toBe(t0)
      expect(await detail()).toMatchObject({
        first_seen: iso(t0),
        last_seen: iso(Math.floor((t0 + 41 * 10_000) / MINUTE) * MINUTE),
        total_calls: 42,
      })
      // 10 minutes after the write, the next batch rewrites it.
      await at(t0 + 10 * MINUTE)
      expect(await stored()).toBe(t0 + 10 * MINUTE)
      expect(await detail()).toMatchObject({ first_seen: iso(t0), last_seen: iso(t0 + 10 * MINUTE), total_calls: 43 })
    })

    test('a deleted database takes its marks and rows with it', async () => {
      const res = await agent.server.call('DELETE', `/api/v1/databases/${id}`, { apiKey: agent.key })
      expect(res.status).toBe(204)
      const left = await agent.server.store.driver.get<{ n: number }>(
        'SELECT (SELECT COUNT(*) FROM query_rollups WHERE database_id = $1) + (SELECT COUNT(*) FROM query_stats WHERE database_id = $1) AS n',
        [id],
      )
      expect(Number(left!.n)).toBe(0)
    })
  })

  describe(`statement rollups at the edges (${kind})`, () => {
    const agent = agentSession(kind)
    const stmt = (hash: string, calls = 1) => ({
      query_hash: hash,
      query_text: `SELECT ${hash}`,
      calls,
      total_time_ms: calls,
      rows: calls,
      shared_blks_hit: 0,
      shared_blks_read: 0,
    })
    const list = async (id: string, since: number, until: number) =>
      (
        (await agent.ok(id, `/queries?${range(since, until)}&sort_by=calls`)) as {
          query_hash: string
          total_calls: number
        }[]
      ).map((q) => [q.query_hash, q.total_calls])
    /** A retention pass over the database, as the health monitor runs it now, with this retention cutoff. */
    const sweep = async (id: string, before: number) =>
      agent.server.store.retention.sweepDatabase(
        id,
        { before, minutesBefore: Math.floor((Date.now() - 48 * HOUR) / HOUR) * HOUR, rollUpTo: Date.now() - HOUR },
        1000,
      )
    const rows = async (id: string, resolution: number) =>
      Number(
        (await agent.server.store.driver.get<{ n: number }>(
          'SELECT COUNT(*) AS n FROM query_stats WHERE database_id = $1 AND resolution = $2',
          [id, resolution],
        ))!.n,
      )

    test("retention keeps a statement's text while a bucket of its is kept, though its last_seen lags its last batch", async () => {
      const h = Math.floor(Date.now() / HOUR) * HOUR - 3 * HOUR
      // The text is written at h - 5 min; the batch at h + 2 min is within 10 minutes and leaves it.
      const id = await agent.ingest(pgBatch('texts', h - 5 * MINUTE, { query_stats: [stmt('qt')] }))
      await agent.ingest(pgBatch('texts', h + 2 * MINUTE, { query_stats: [stmt('qt')] }))
      await agent.ingest(pgBatch('texts', h + 70 * MINUTE, { query_stats: [stmt('other')] }))
      // Retention up to h + 1 min keeps the hour from h (not wholly older) and so the statement's call in it.
      await sweep(id, h + MINUTE)
      expect(await list(id, h, h + HOUR)).toEqual([['qt', 1]])
    })

    test('retention keeps a 10-minute bucket that straddles a cutoff inside it, as it keeps such hours', async () => {
      const span = Math.floor(Date.now() / HOUR) * HOUR - 4 * HOUR + 20 * MINUTE
      const id = await agent.ingest(pgBatch('straddle', span + 2 * MINUTE, { query_stats: [stmt('qs', 1)] }))
      await agent.ingest(pgBatch('straddle', span + 7 * MINUTE, { query_stats: [stmt('qs', 10)] }))
      await agent.ingest(pgBatch('straddle', span + 2 * HOUR, { query_stats: [stmt('other')] }))
      // An unverified organization's cutoff falls on any minute: here 5 minutes into the span.
      await sweep(id, span + 5 * MINUTE)
      // The span is read whole (the call before the cutoff with it), like the hour at a retention edge.
      expect(await list(id, span, span + 30 * MINUTE)).toEqual([['qs', 11]])
    })

    test('a first batch older than the minute floor is read from its minute row until its hour is rolled up', async () => {
      const at = Date.now() - 50 * HOUR
      const id = await agent.ingest(pgBatch('old', at, { query_stats: [stmt('qo', 3)] }))
      expect({ minutes: await rows(id, 60), hours: await rows(id, 3600) }).toEqual({ minutes: 1, hours: 0 })
      expect(await list(id, at - 24 * HOUR, Date.now())).toEqual([['qo', 3]])
      // Retention rolls it up before it compacts the minute row; the answer stays.
      await sweep(id, Date.now() - 30 * 24 * HOUR)
      expect({ minutes: await rows(id, 60), hours: await rows(id, 3600) }).toEqual({ minutes: 0, hours: 1 })
      expect(await list(id, at - 24 * HOUR, Date.now())).toEqual([['qo', 3]])
    })

    test('a batch from the future does not roll up the present: later batches still write one row per statement', async () => {
      const future = Date.now() + 365 * 24 * HOUR
      // The API refuses such a batch now (more than 10 minutes ahead); one stored before it did is applied here.
      const id = await agent.ingest(pgBatch('future', Date.now()))
      const owner = await agent.server.store.driver.get<{ org_id: string }>(
        'SELECT org_id FROM databases WHERE id = $1',
        [id],
      )
      await agent.server.store.ingest(
        owner!.org_id,
        pgBatch('future', future, { query_stats: [stmt('qf')] }),
        Date.now(),
      )
      const now = Date.now()
      await agent.ingest(pgBatch('future', now, { query_stats: [stmt('qf', 2)] }))
      // Marks set by the future batch would make this one late: written at three resolutions.
      expect({ minutes: await rows(id, 60), spans: await rows(id, 600), hours: await rows(id, 3600) }).toEqual({
        minutes: 2,
        spans: 0,
        hours: 0,
      })
      expect(await list(id, now - HOUR, now + MINUTE)).toEqual([['qf', 2]])
      expect(await list(id, future - HOUR, future + MINUTE)).toEqual([['qf', 1]])
    })
  })

  describe(`rollups spread after the hour (${kind})`, () => {
    // As `dbm serve` runs: each database rolls a closed span or hour up at its own delay after it closes.
    const agent = agentSession(kind, { rollupSpreadMs: 10 * MINUTE })
    const stmt = (calls: number) => ({
      query_hash: 'qs',
      query_text: 'SELECT qs',
      calls,
      total_time_ms: calls,
      rows: calls,
      shared_blks_hit: 0,
      shared_blks_read: 0,
    })
    const marks = async (id: string) => {
      const row = await agent.server.store.driver.get<{ hours_until: number }>(
        'SELECT hours_until FROM query_rollups WHERE database_id = $1',
        [id],
      )
      return Number(row!.hours_until)
    }
    const total = async (id: string, since: number, until: number) =>
      ((await agent.ok(id, `/queries?${range(since, until)}`)) as { total_calls: number }[])[0]!.total_calls

    test("a database's hour is rolled up at its delay after the hour, and every read is exact before and after", async () => {
      const h = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR
      const id = await agent.ingest(pgBatch('spread', h - 30 * MINUTE, { query_stats: [stmt(7)] }))
      const delay = rollupDelayMs(id, 10 * MINUTE)
      expect(delay).toBeGreaterThanOrEqual(0)
      expect(delay).toBeLessThan(10 * MINUTE)
      expect(await marks(id)).toBe(h - HOUR)
      let sent = 7
      if (delay > 1_000) {
        // Within its delay: the hour before stays in minute rows, read exactly from them.
        await agent.ingest(pgBatch('spread', h + Math.floor(delay / 2), { query_stats: [stmt(5)] }))
        sent += 5
        expect(await marks(id)).toBe(h - HOUR)
        expect(await total(id, h - HOUR, h + HOUR)).toBe(sent)
      }
      // Past it: rolled up, the same sums.
      await agent.ingest(pgBatch('spread', h + delay + 1_000, { query_stats: [stmt(3)] }))
      sent += 3
      expect(await marks(id)).toBe(h)
      expect(await total(id, h - HOUR, h + HOUR)).toBe(sent)
      expect(await total(id, h - HOUR, h)).toBe(7)
      // Another id's delay differs: the fleet's rollups are spread, not stacked.
      const delays = new Set(
        Array.from({ length: 50 }, (_, i) => Math.floor(rollupDelayMs(`db-${i}`, 10 * MINUTE) / MINUTE)),
      )
      expect(delays.size).toBeGreaterThanOrEqual(8)
    })
  })

  describe(`migration 7 (${kind})`, () => {
    const cleanups: Array<() => void> = []
    afterEach(() => {
      for (const cleanup of cleanups.splice(0)) cleanup()
    })

    test('a store written by version 6 (minute and hourly rows at ingest) gets 10-minute rows and marks, and answers the same', async () => {
      const where = await freshStoreLocation(kind)
      cleanups.push(where.cleanup)
      const driver: SqlDriver = where.databaseUrl
        ? new PostgresDriver(where.databaseUrl)
        : new SqliteDriver(join(where.dataDir, 'dbm.sqlite'))
      const hour = Math.floor(Date.now() / HOUR) * HOUR - 3 * HOUR
      // Minute rows at 5, 17, 18 and 75 minutes past `hour`, and their hours, as version 6 wrote them.
      const minutes: [number, number][] = [
        [5, 1],
        [17, 2],
        [18, 4],
        [75, 8],
      ]
      await driver.transaction(async (tx) => {
        await tx.exec(
          'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
        )
        for (const m of migrations.filter((m) => m.version <= 6)) {
          await tx.exec(kind === 'sqlite' ? m.sqlite : m.postgres)
          await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
            m.version,
            m.name,
            0,
          ])
        }
        await tx.run(
          "INSERT INTO organizations (id, name, slug, plan, verified, created_at) VALUES ('o1', 'o', 'o', 'free', $1, 0)",
          [true],
        )
        await tx.run(
          `INSERT INTO databases (id, org_id, name, engine, host, port, tags, poll_interval_seconds, collect_explain_plans, collect_replication, disabled_collectors, created_at, updated_at)
           VALUES ('d1', 'o1', 'old', 'postgres', 'h', 5432, '{}', 10, $1, $1, '[]', 0, 0)`,
          [true],
        )
        await tx.run(
          "INSERT INTO query_texts (database_id, query_hash, query_text, first_seen, last_seen) VALUES ('d1', 'q1', 'SELECT 1', $1, $1)",
          [hour],
        )
        const row = (resolution: number, bucket: number, calls: number) =>
          tx.run(
            `INSERT INTO query_stats (database_id, resolution, bucket, query_hash, calls, total_time_ms, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied,
               shared_blks_written, temp_blks_read, temp_blks_written, blk_read_time_ms, blk_write_time_ms, read_bytes, memory_bytes, errors, p99_ms)
             VALUES ('d1', $1, $2, 'q1', $3, $4, $3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, $5)`,
            [resolution, bucket, calls, calls / 2, calls * 3],
          )
        for (const [m, calls] of minutes) await row(60, hour + m * MINUTE, calls)
        await row(3600, hour, 7)
        await row(3600, hour + HOUR, 8)
      })
      await driver.close()

      const { store, applied } = await openStore(where)
      try {
        // Migration 7 and every later one.
        expect(applied).toEqual(migrations.filter((m) => m.version >= 7).map((m) => m.version))
        const spans = await store.driver.all<{ bucket: number; calls: number; p99_ms: number }>(
          "SELECT bucket, calls, p99_ms FROM query_stats WHERE database_id = 'd1' AND resolution = 600 ORDER BY bucket",
        )
        expect(spans.map((s) => [Number(s.bucket) - hour, Number(s.calls), Number(s.p99_ms)])).toEqual([
          [0, 1, 3],
          [10 * MINUTE, 6, 12],
          [70 * MINUTE, 8, 24],
        ])
        const marks = await store.driver.get<{ spans_until: number; hours_until: number }>(
          "SELECT spans_until, hours_until FROM query_rollups WHERE database_id = 'd1'",
        )
        expect({ spans: Number(marks!.spans_until) - hour, hours: Number(marks!.hours_until) - hour }).toEqual({
          spans: 2 * HOUR,
          hours: 2 * HOUR,
        })
        for (const [since, until, calls] of [
          [hour, hour + 2 * HOUR, 15],
          [hour + 6 * MINUTE, hour + 18 * MINUTE, 2],
          [hour + 10 * MINUTE, hour + 76 * MINUTE, 14],
        ] as const) {
          const rows = await store.listQueryStats('d1', { since, until }, 'total_time', 25)
          expect({ since: since - hour, calls: rows.map((r) => r.total_calls) }).toEqual({
            since: since - hour,
            calls: [calls],
          })
        }
      } finally {
        await store.close()
      }
    })
  })
}

describe('the rollup lock (postgres)', () => {
  const agent = agentSession('postgres')
  const stmt = {
    query_hash: 'q',
    query_text: 'SELECT q',
    calls: 1,
    total_time_ms: 1,
    rows: 1,
    shared_blks_hit: 0,
    shared_blks_read: 0,
  }

  test("is the database's, whatever its name: ingest after a rename and retention's rollup both wait for it", async () => {
    const id = await agent.ingest(pgBatch('before', Date.now() - 3 * HOUR, { query_stats: [stmt] }))
    const renamed = await agent.server.call('PATCH', `/api/v1/databases/${id}`, {
      apiKey: agent.key,
      body: { name: 'after' },
    })
    expect(renamed.status).toBe(200)
    const store = agent.server.store
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    let locked!: () => void
    const isLocked = new Promise<void>((r) => (locked = r))
    const holder = store.driver.transaction(async (tx) => {
      await lockRollups(tx, id)
      locked()
      await held
    })
    await isLocked
    const ingest = agent.ingest(pgBatch('after', Date.now() - 2 * HOUR, { query_stats: [stmt] })).then(() => 'ingested')
    const sweep = store.retention
      .sweepDatabase(id, { before: 0, minutesBefore: 0, rollUpTo: Date.now() }, 1000)
      .then(() => 'swept')
    const first = await Promise.race([ingest, sweep, Bun.sleep(1000).then(() => 'both waited')])
    release()
    await holder
    expect({ first, after: [await ingest, await sweep] }).toEqual({
      first: 'both waited',
      after: ['ingested', 'swept'],
    })
  })
})
