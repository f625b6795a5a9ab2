// /queries?sort_by=io_time on both stores: statements ordered by blk_read_time_ms + blk_write_time_ms
// summed over the window (the dashboard's I/O time column), ties by hash, and the other sorts unchanged.
import { describe, expect, test } from 'bun:test'
import { STATEMENT_COUNTERS } from '../../src/shared/families.ts'
import { agentSession, at, pgBatch, range } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

/** A statement's delta: every counter 0 but those given. */
function stat(hash: string, values: Record<string, number>) {
  const counters = Object.fromEntries(STATEMENT_COUNTERS.map((c) => [c, 0]))
  return { query_hash: hash, query_text: `SELECT ${hash}`, ...counters, calls: 1, ...values } as never
}

for (const kind of storeKinds) {
  describe(`statements sorted by I/O time (${kind})`, () => {
    const session = agentSession(kind)

    test('the sum of read and write time over the window, largest first', async () => {
      // a: 5 + 1 = 6 ms of I/O in two cycles; b: 4 ms of writes; c: none but the most total time.
      await session.ingest(
        pgBatch('io', at(10, 5), {
          query_stats: [stat('a', { blk_read_time_ms: 2, total_time_ms: 10 }), stat('c', { total_time_ms: 500 })],
        }),
      )
      const id = await session.ingest(
        pgBatch('io', at(11, 5), {
          query_stats: [
            stat('a', { blk_read_time_ms: 3, blk_write_time_ms: 1, total_time_ms: 10 }),
            stat('b', { blk_write_time_ms: 4.5, total_time_ms: 30 }),
          ],
        }),
      )
      const window = range(at(0), at(30))
      const byIo = await session.ok(id, `/queries?${window}&sort_by=io_time`)
      expect(byIo.map((q: any) => [q.query_hash, q.blk_read_time_ms + q.blk_write_time_ms])).toEqual([
        ['a', 6],
        ['b', 4.5],
        ['c', 0],
      ])
      expect((await session.ok(id, `/queries?${window}&sort_by=total_time`)).map((q: any) => q.query_hash)).toEqual([
        'c',
        'b',
        'a',
      ])
      expect(
        (await session.ok(id, `/queries?${window}&sort_by=io_time&limit=1`)).map((q: any) => q.query_hash),
      ).toEqual(['a'])
    })
  })
}
