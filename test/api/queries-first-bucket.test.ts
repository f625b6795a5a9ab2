// GET /queries' first_bucket over a window that starts before the statement's first minute bucket, the
// part where it ran read from an hourly bucket (statements/reads.ts): first_bucket is the minute its
// data start (05:18 for a statement first sent at 05:18), not the 05:00 the hourly bucket starts at. Both
// stores.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { HOUR, MINUTE, iso, pgBatch, range } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer, storeKinds } from '../support/server.ts'

const statement = (calls: number): Partial<IngestBatch> => ({
  query_stats: [
    {
      query_hash: 'q1',
      query_text: 'SELECT * FROM orders',
      calls,
      total_time_ms: 2 * calls,
      rows: calls,
      shared_blks_hit: 10 * calls,
      shared_blks_read: 0,
    },
  ],
})

for (const kind of storeKinds) {
  describe(`first_bucket from an hourly bucket (${kind})`, () => {
    let server: TestServer
    let key = ''
    beforeAll(async () => {
      server = await startTestServer(kind)
      key = (await agentAccount(server)).key
    })
    afterAll(async () => {
      await server?.stop()
    })

    test('the statement’s first minute in the hour, on the list and on its page', async () => {
      const now = server.deps.clock()
      const hour = Math.floor((now - 4 * HOUR) / HOUR) * HOUR
      const first = hour + 18 * MINUTE
      let id = ''
      // Sent first at :18 and :19 of that hour, then five minutes ago: that batch rolls the hour up.
      for (const [at, calls] of [
        [first, 1],
        [first + MINUTE, 2],
        [now - 5 * MINUTE, 4],
      ] as const) {
        const res = await server.call('POST', '/api/v1/ingest', {
          apiKey: key,
          body: pgBatch('orders', at, statement(calls)),
        })
        expect(res.status).toBe(200)
        id = res.body.database_id
      }
      const hourly = await server.store.driver.all<{ bucket: number | string; calls: number | string }>(
        'SELECT bucket, calls FROM query_stats WHERE database_id = $1 AND resolution = 3600 ORDER BY bucket',
        [id],
      )
      expect(hourly.map((r) => [Number(r.bucket), Number(r.calls)])).toEqual([[hour, 3]])
      // The window starts an hour before any bucket of the statement.
      const window = range(hour - HOUR, now)
      const list = await server.call('GET', `/api/v1/databases/${id}/queries?${window}`, { apiKey: key })
      expect(list.status).toBe(200)
      expect(list.body.map((q: any) => [q.query_hash, q.total_calls, q.first_bucket])).toEqual([['q1', 7, iso(first)]])
      const detail = await server.call('GET', `/api/v1/databases/${id}/queries/q1?${window}`, { apiKey: key })
      expect(detail.status).toBe(200)
      expect([detail.body.total_calls, detail.body.first_bucket]).toEqual([7, iso(first)])
      // A window from :30 of that hour reads it from minute buckets: its own first minute there.
      const later = await server.call('GET', `/api/v1/databases/${id}/queries?${range(hour + 30 * MINUTE, now)}`, {
        apiKey: key,
      })
      expect(later.body.map((q: any) => [q.total_calls, q.first_bucket])).toEqual([
        [4, iso(Math.floor((now - 5 * MINUTE) / MINUTE) * MINUTE)],
      ])
    })
  })
}
