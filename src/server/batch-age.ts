// A batch's age as its agent gives it (X-Dbm-Batch-Age, whole seconds, sent with a batch from the
// agent's buffer), for ingest: it takes the batch's receipt time back to when it was collected on the
// server's clock (store/snapshots.ts). Hostile input: anything but a plain number is 0 (a current
// batch), and it is bounded by agentClockLimits.maxBatchAgeMs. Also the agent's clock at sending
// (X-Dbm-Sent-At, epoch ms), which store/agent-clock/ measures the agent's clock by: anything but a
// plain number is none.
import { BATCH_AGE_HEADER, SENT_AT_HEADER } from '../shared/ingest-path.ts'
import { agentClockLimits } from './limits.ts'

/** The batch's age in ms from the request's headers (absent or unreadable: 0). */
export function batchAgeMs(headers: Headers): number {
  const text = headers.get(BATCH_AGE_HEADER)
  if (text === null || !/^\d{1,12}$/.test(text.trim())) return 0
  return Math.min(Number(text.trim()) * 1000, agentClockLimits.maxBatchAgeMs)
}

/** The agent's clock when it sent the batch, in epoch ms (absent or unreadable: undefined). */
export function sentAtMs(headers: Headers): number | undefined {
  const text = headers.get(SENT_AT_HEADER)?.trim()
  return text !== undefined && /^\d{1,15}$/.test(text) ? Number(text) : undefined
}
