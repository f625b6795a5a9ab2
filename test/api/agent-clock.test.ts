// Skewed agent clocks (issue 29 d6), on both stores, through the real ingest route with the server's
// clock frozen so receipt times are exact: the latest sessions are the snapshot received last, even
// after one dated 9 minutes ahead, while a batch sent late from the agent's buffer (X-Dbm-Batch-Age)
// never replaces a newer one; and the doctor reports a clock more than 30 s ahead, judging by the
// largest offset measured lately (a clock behind is measured but not reported: a late batch reads the same).
import { describe, expect, test } from 'bun:test'
import { BATCH_AGE_HEADER } from '../../src/shared/ingest-path.ts'
import type { ActiveQuery, IngestBatch } from '../../src/shared/wire.ts'
import { agentSession, pgBatch } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const SECOND = 1000
const MINUTE = 60 * SECOND

const session = (pid: number): ActiveQuery => ({
  pid,
  query_text: `SELECT ${pid}`,
  state: 'active',
  wait_event_type: null,
  wait_event: null,
  duration_ms: 100,
  blocking_pids: [],
  user: 'app',
  application_name: 'web',
  client_addr: null,
  database: 'shop',
  backend_type: 'client backend',
  xact_start: null,
})

for (const kind of storeKinds) {
  describe(`agent clocks (${kind})`, () => {
    const agent = agentSession(kind)

    /** Posts the batch (from the buffer when `ageS` is given) and returns its database id. */
    async function post(batch: IngestBatch, ageS?: number): Promise<string> {
      const res = await agent.server.call('POST', '/api/v1/ingest', {
        apiKey: agent.key,
        body: batch,
        headers: ageS === undefined ? {} : { [BATCH_AGE_HEADER]: String(ageS) },
      })
      expect(res.status).toBe(200)
      return res.body.database_id
    }
    const activePids = async (id: string) => ((await agent.ok(id, '/active')) as { pid: number }[]).map((s) => s.pid)
    const clockFindings = async (id: string) =>
      ((await agent.ok(id, '/doctor')).top_issues as { rule: string; title: string; metrics: unknown }[]).filter(
        (f) => f.rule === 'agent_clock_skew',
      )

    test('the snapshot received last is the latest whatever its date; a late one from the buffer replaces none newer', async () => {
      const server = agent.server
      server.freeze(true)
      try {
        const t0 = server.deps.clock()
        // A clock 9 minutes fast, then set right (or another agent on the same database).
        const id = await post(pgBatch('skewed', t0 + 9 * MINUTE, { activity: [session(1)] }))
        expect(await activePids(id)).toEqual([1])
        server.advance(10 * SECOND)
        await post(pgBatch('skewed', t0 + 10 * SECOND, { activity: [session(2)], locks: [] }))
        expect(await activePids(id)).toEqual([2])
        // Buffered by the agent 15 s ago, collected before the snapshot above: it stays.
        server.advance(10 * SECOND)
        await post(pgBatch('skewed', t0 + 5 * SECOND, { activity: [session(3)] }), 15)
        expect(await activePids(id)).toEqual([2])
        // Buffered during an outage but collected after it: it replaces it.
        server.advance(40 * SECOND)
        await post(pgBatch('skewed', t0 + 30 * SECOND, { activity: [session(4)] }), 30)
        expect(await activePids(id)).toEqual([4])
      } finally {
        server.freeze(false)
      }
    })

    test('the doctor reports a clock 90 s ahead; one behind or a slow cycle is no finding', async () => {
      const server = agent.server
      server.freeze(true)
      try {
        const now = server.deps.clock()
        const ahead = await post(pgBatch('ahead', now + 90 * SECOND))
        // Buffered 20 s ago and collected 65 s before the server's time of that: 45 s behind.
        const behind = await post(pgBatch('behind', now - 65 * SECOND), 20)
        const steady = await post(pgBatch('steady', now))
        // A cycle whose batch came 40 s after it began (a slow collector, a busy server): the offset
        // measured is -40 s, but the largest of the window (0) is the clock's.
        server.advance(10 * SECOND)
        await post(pgBatch('steady', now - 30 * SECOND))
        expect(await clockFindings(ahead)).toEqual([
          expect.objectContaining({
            title: "The agent's clock is 90 s ahead of the server's",
            metrics: { offset_s: 90, max_offset_s: 30 },
          }),
        ])
        // Measured (45 s behind), not reported.
        expect(await agent.server.store.agentClocks.agentClock(behind)).toEqual({
          offset_ms: -45_000,
          measured_at: now,
        })
        expect(await clockFindings(behind)).toEqual([])
        expect(await clockFindings(steady)).toEqual([])
        // Set right: the window's largest measure (90 s) holds for a window, then the next batch's is kept.
        server.advance(6 * MINUTE)
        await post(pgBatch('ahead', server.deps.clock()))
        expect(await clockFindings(ahead)).toEqual([])
      } finally {
        server.freeze(false)
      }
    })
  })
}
