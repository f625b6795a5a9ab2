// A delta covers the interval it was measured over (issue 29 d6), on both stores: after a 3-minute gap
// the agent's batch says covered_seconds 180 (its poll interval, interval_seconds, stays 60), and its 3,510 calls (1,170 a minute) are spread over the
// minutes 58:30 to 61:30 cover (585, 1,170, 1,170, 585) instead of standing as one spike in minute 61;
// the 10-minute and hourly buckets that were rolled up before it get their minutes' shares, and the
// totals stay exact (/queries: 100 + 3,510 = 3,610 calls, 7,220 ms).
import { describe, expect, test } from 'bun:test'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { agentSession, at, iso, pgBatch, range } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const statement = (calls: number): Partial<IngestBatch> => ({
  query_stats: [
    {
      query_hash: 'q1',
      query_text: 'SELECT * FROM orders',
      calls,
      total_time_ms: 2 * calls,
      rows: calls,
      shared_blks_hit: 0,
      shared_blks_read: 0,
    },
  ],
})

for (const kind of storeKinds) {
  describe(`a gap's deltas spread over the minutes they cover (${kind})`, () => {
    const agent = agentSession(kind)

    test('3,510 calls over 180 s: each minute its share, rollups and totals exact', async () => {
      const id = await agent.ingest(pgBatch('gap', at(57), statement(100)))
      await agent.ingest({
        ...pgBatch('gap', at(61, 30), statement(3510)),
        interval_seconds: 60,
        covered_seconds: 180,
      })
      const rows = async (resolution: number) =>
        (
          await agent.server.store.driver.all<{ bucket: unknown; calls: unknown; total_time_ms: unknown }>(
            'SELECT bucket, calls, total_time_ms FROM query_stats WHERE database_id = $1 AND resolution = $2 ORDER BY bucket',
            [id, resolution],
          )
        ).map((r) => [Number(r.bucket), Number(r.calls), Number(r.total_time_ms)])
      expect(await rows(60)).toEqual([
        [at(57), 100, 200],
        [at(58), 585, 1170],
        [at(59), 1170, 2340],
        [at(60), 1170, 2340],
        [at(61), 585, 1170],
      ])
      // The batch at 61:30 rolled up the span from :50 and the hour before :60 first: those took the
      // minutes 57 to 59 that fall in them.
      expect(await rows(600)).toEqual([[at(50), 1855, 3710]])
      expect(await rows(3600)).toEqual([[at(0), 1855, 3710]])
      const list = await agent.ok(id, `/queries?${range(at(0), at(120))}`)
      expect(list.map((q: any) => [q.query_hash, q.total_calls, q.total_time_ms])).toEqual([['q1', 3610, 7220]])
      const detail = await agent.ok(id, `/queries/q1?${range(at(57), at(62))}&bucket=60`)
      expect(detail.total_calls).toBe(3610)
      expect(detail.timeseries.map((p: any) => [p.ts, p.calls])).toEqual([
        [iso(at(57)), 100],
        [iso(at(58)), 585],
        [iso(at(59)), 1170],
        [iso(at(60)), 1170],
        [iso(at(61)), 585],
      ])
    })

    test('many statements after an hour: the rows a batch writes are bounded, spread in steps, totals exact', async () => {
      // 1,000 statements over 3,600 s: 20,000 rows allowed, so at most 20 buckets a statement: the 61
      // minutes 100:30 to 160:30 touch go in 16 steps of 4 minutes, not 61 rows of one.
      const n = 1000
      const many = (calls: number): Partial<IngestBatch> => ({
        query_stats: Array.from({ length: n }, (_, i) => ({
          query_hash: `m${i}`,
          query_text: `SELECT ${i}`,
          calls,
          total_time_ms: calls,
          rows: calls,
          shared_blks_hit: 0,
          shared_blks_read: 0,
        })),
      })
      const id = await agent.ingest(pgBatch('many', at(100), many(1)))
      await agent.ingest({ ...pgBatch('many', at(160, 30), many(3601)), interval_seconds: 60, covered_seconds: 3600 })
      const minuteRows = await agent.server.store.driver.all<{ bucket: unknown; calls: unknown }>(
        'SELECT bucket, SUM(calls) AS calls FROM query_stats WHERE database_id = $1 AND resolution = 60 GROUP BY bucket ORDER BY bucket',
        [id],
      )
      // Steps counted back from the batch's own minute (160); the first (100) is also the first batch's.
      expect(minuteRows.map((r) => (Number(r.bucket) - at(0)) / 60_000)).toEqual(
        Array.from({ length: 16 }, (_, k) => 100 + 4 * k),
      )
      expect(minuteRows.reduce((a, r) => a + Number(r.calls), 0)).toBe(n * (1 + 3601))
      const list = await agent.ok(id, `/queries?${range(at(80), at(200))}&limit=100`)
      expect(list.length).toBe(100)
      expect(list.every((q: any) => q.total_calls === 3602)).toBe(true)
    })
  })
}
