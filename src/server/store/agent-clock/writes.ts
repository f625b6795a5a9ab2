// Ingest's writer of the agent's clock offset (types.ts says how it is measured and why the largest
// measure of a window is kept): one upsert per batch, nothing read.
import { agentClockLimits } from '../../limits.ts'
import type { Writes } from '../ingest/batch.ts'

/**
 * The offset measured by a batch collected at `collectedAt` (the agent's clock) whose cycle began, on
 * the server's clock, at `receivedAt` (its receipt time less the age the agent gave it); measured at `now`.
 * The stored offset is replaced by a larger one, or by any once it is older than the window.
 */
export function applyAgentClock(
  writes: Writes,
  databaseId: string,
  collectedAt: number,
  receivedAt: number,
  now: number,
): void {
  const offset = Math.round(collectedAt - receivedAt)
  if (!Number.isFinite(offset)) return
  const replace = `excluded.offset_ms >= agent_clocks.offset_ms OR agent_clocks.measured_at < excluded.measured_at - ${agentClockLimits.windowMs}`
  writes.upsert('agent_clocks', ['database_id', 'offset_ms', 'measured_at'], [[databaseId, offset, now]], {
    key: ['database_id'],
    update: {
      // (every SET expression reads the stored row, so both CASEs judge the same condition)
      offset_ms: `CASE WHEN ${replace} THEN excluded.offset_ms ELSE agent_clocks.offset_ms END`,
      measured_at: `CASE WHEN ${replace} THEN excluded.measured_at ELSE agent_clocks.measured_at END`,
    },
  })
}
