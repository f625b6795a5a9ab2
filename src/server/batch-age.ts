// A batch's age as its agent gives it (X-Dbm-Batch-Age, whole seconds, sent with a batch from the
// agent's buffer), for ingest: it takes the batch's receipt time back to when it was collected on the
// server's clock (store/snapshots.ts, store/agent-clock/). Hostile input: anything but a plain number
// is 0 (a current batch), and it is bounded by agentClockLimits.maxBatchAgeMs.
import { BATCH_AGE_HEADER } from '../shared/ingest-path.ts'
import { agentClockLimits } from './limits.ts'

/** The batch's age in ms from the request's headers (absent or unreadable: 0). */
export function batchAgeMs(headers: Headers): number {
  const text = headers.get(BATCH_AGE_HEADER)
  if (text === null || !/^\d{1,12}$/.test(text.trim())) return 0
  return Math.min(Number(text.trim()) * 1000, agentClockLimits.maxBatchAgeMs)
}
