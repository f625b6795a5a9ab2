// Ingest's writer of the agent's clock offset (types.ts says how it is measured and why the largest
// measure of a window is kept): one upsert per batch that says when it was sent, nothing read.
import { agentClockLimits } from '../../limits.ts'
import type { Writes } from '../ingest/batch.ts'

/**
 * The offset measured by a batch the agent sent at `sentAt` (its clock; X-Dbm-Sent-At) and the server
 * received at `now`. A time of sending before the batch's collected_at, or more than a buffered batch's
 * longest life after it, is not the agent's clock (hostile or broken input): nothing is measured. The
 * stored offset is replaced by a larger one, or by any once it is older than the window.
 */
export function applyAgentClock(
  writes: Writes,
  databaseId: string,
  collectedAt: number,
  sentAt: number,
  now: number,
): void {
  if (!(sentAt >= collectedAt && sentAt - collectedAt <= agentClockLimits.maxBatchAgeMs)) return
  const offset = Math.round(sentAt - now)
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
