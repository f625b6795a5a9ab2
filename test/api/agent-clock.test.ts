// Skewed agent clocks (issue 29 d6), on both stores, through the real ingest route with the server's
// clock frozen so receipt times are exact: the latest sessions are the snapshot received last, even
// after one dated 9 minutes ahead, while a batch sent late from the agent's buffer (X-Dbm-Batch-Age)
// never replaces a newer one; and the doctor reports a clock more than 30 s ahead or behind, measured
// by the agent's clock at sending (X-Dbm-Sent-At) and judging by the largest offset measured lately: a
// slow cycle or a late batch is no clock behind, and a batch that does not say when it was sent
// (an older agent's) measures nothing.
import { describe, expect, test } from 'bun:test'
import { BATCH_AGE_HEADER, SENT_AT_HEADER } from '../../src/shared/ingest-path.ts'
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

    /**
     * Posts the batch (from the buffer when `ageS` is given; sent at `sentAt` by the agent's clock when
     * given) and returns its database id.
     */
    async function post(batch: IngestBatch, ageS?: number, sentAt?: number): Promise<string> {
      const res = await agent.server.call('POST', '/api/v1/ingest', {
        apiKey: agent.key,
        body: batch,
        headers: {
          ...(ageS === undefined ? {} : { [BATCH_AGE_HEADER]: String(ageS) }),
          ...(sentAt === undefined ? {} : { [SENT_AT_HEADER]: String(sentAt) }),
        },
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

    test('the doctor reports a clock 90 s ahead and one 45 s behind; a slow cycle, a late batch or an older agent is no finding', async () => {
      const server = agent.server
      server.freeze(true)
      try {
        const now = server.deps.clock()
        const ahead = await post(pgBatch('ahead', now + 90 * SECOND), undefined, now + 90 * SECOND)
        // Collected 65 s before the server's time of sending by a clock 45 s behind, sent from the buffer.
        const behind = await post(pgBatch('behind', now - 65 * SECOND), 20, now - 45 * SECOND)
        const steady = await post(pgBatch('steady', now), undefined, now)
        // A cycle that took 40 s, and a batch sent 5 min late from the buffer: the clock is right.
        server.advance(10 * SECOND)
        await post(pgBatch('steady', now - 30 * SECOND), undefined, now + 10 * SECOND)
        await post(pgBatch('steady', now - 5 * MINUTE), 300, now + 10 * SECOND)
        // An older agent says nothing of its clock: a late batch of it measures nothing.
        const older = await post(pgBatch('older', now - 65 * SECOND))
        // A time of sending before the batch was collected is not a clock: nothing measured.
        const broken = await post(pgBatch('broken', now), undefined, now - 1)
        expect(await clockFindings(ahead)).toEqual([
          expect.objectContaining({
            title: "The agent's clock is 90 s ahead of the server's",
            metrics: { offset_s: 90, max_offset_s: 30 },
          }),
        ])
        expect(await agent.server.store.agentClocks.agentClock(behind)).toEqual({
          offset_ms: -45_000,
          measured_at: now,
        })
        expect(await clockFindings(behind)).toEqual([
          expect.objectContaining({
            title: "The agent's clock is 45 s behind the server's",
            metrics: { offset_s: -45, max_offset_s: 30 },
          }),
        ])
        // (an equal measure replaces the stored one: measured last by the late batch)
        expect(await agent.server.store.agentClocks.agentClock(steady)).toEqual({
          offset_ms: 0,
          measured_at: now + 10 * SECOND,
        })
        expect(await clockFindings(steady)).toEqual([])
        expect(await agent.server.store.agentClocks.agentClock(older)).toBeUndefined()
        expect(await agent.server.store.agentClocks.agentClock(broken)).toBeUndefined()
        // Set right: the window's largest measure (90 s) holds for a window, then the next batch's is kept.
        server.advance(6 * MINUTE)
        const later = server.deps.clock()
        await post(pgBatch('ahead', later), undefined, later)
        expect(await clockFindings(ahead)).toEqual([])
        await post(pgBatch('behind', later), undefined, later)
        expect(await clockFindings(behind)).toEqual([])
      } finally {
        server.freeze(false)
      }
    })
  })
}
