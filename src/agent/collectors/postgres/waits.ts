// waits: what active sessions wait on, sampled once a second between polls from pg_stat_activity and
// counted per minute of sampling: each sample in which a session waits on an event adds 1 to its count
// and the sampling interval to its total_duration_ms, in the entry of the minute the sample was taken
// in (a poll's samples may straddle two minutes; the server buckets each entry by its own minute, so a
// minute's count over 60 is the average number of sessions waiting).
import type { WaitSample } from '../../../shared/wire.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'

export const WAIT_SAMPLE_INTERVAL_MS = 1000

interface State {
  counts: Map<string, WaitSample>
}

function stateOf(ctx: PostgresContext): State {
  let state = ctx.state.get('waits') as State | undefined
  if (!state) {
    state = { counts: new Map() }
    ctx.state.set('waits', state)
  }
  return state
}

/**
 * One sample: adds the sessions waiting right now to the counts of the current minute. A session idle in
 * a transaction waits for its client (ClientRead) between statements: it is idle, not waiting, and left
 * out as idle sessions are.
 */
export async function sampleWaits(
  ctx: PostgresContext,
  intervalMs: number,
  now: () => number = Date.now,
): Promise<void> {
  const rows = await ctx.sql`
    SELECT wait_event_type, wait_event, count(*)::int AS n
    FROM pg_stat_activity
    WHERE backend_type = 'client backend' AND datname = current_database() AND state NOT IN ('idle', 'idle in transaction', 'idle in transaction (aborted)')
      AND wait_event IS NOT NULL AND pid <> pg_backend_pid()
    GROUP BY 1, 2`
  const { counts } = stateOf(ctx)
  const minute = Math.floor(now() / 60_000) * 60_000
  for (const r of rows) {
    const key = `${minute}/${r.wait_event_type}/${r.wait_event}`
    const entry = counts.get(key) ?? {
      wait_event_type: r.wait_event_type,
      wait_event: r.wait_event,
      count: 0,
      total_duration_ms: 0,
      minute,
    }
    entry.count += r.n
    entry.total_duration_ms += r.n * intervalMs
    counts.set(key, entry)
  }
}

export const waits = registerCollector<PostgresContext>({
  name: 'waits',
  engine: 'postgres',
  defaultEnabled: true,

  start(ctx) {
    let busy = false
    const timer = setInterval(async () => {
      if (busy) return
      busy = true
      try {
        await sampleWaits(ctx, WAIT_SAMPLE_INTERVAL_MS)
      } catch (e) {
        ctx.log.debug('wait sample failed', { database: ctx.name, cause: (e as Error).message })
        ctx.sampleFailed?.(e)
      } finally {
        busy = false
      }
    }, WAIT_SAMPLE_INTERVAL_MS)
    return () => clearInterval(timer)
  },

  async collect(ctx) {
    const state = stateOf(ctx)
    const out = [...state.counts.values()]
    state.counts = new Map()
    return { waits: out }
  },
})
