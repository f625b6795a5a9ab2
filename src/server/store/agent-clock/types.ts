// How far each database's agent's clock is from the server's (issue 29 d6), measured at every batch
// applied that says when the agent sent it (X-Dbm-Sent-At, the agent's clock at sending; an older
// agent's batches say nothing and measure nothing): offset = sent at − receipt time. Neither the
// cycle's run nor the buffer enters it (a slow cycle or a resent batch is not a clock behind); only the
// network and the server's queue delay the receipt, which makes the measure smaller than the true
// offset, never larger, so the stored value is the largest measure of a window
// (agentClockLimits.windowMs, src/server/limits.ts), and a clock set right is seen within one window. Reads: the doctor's agent_clock_skew rule.
// writes.ts: ingest's writer (planBatch); reads.ts: AgentClockReads (Store.agentClocks).

export interface AgentClock {
  /** The agent's clock less the server's, in ms (positive: the agent's is ahead). */
  offset_ms: number
  /** When (the server's clock) the batch that measured it arrived. */
  measured_at: number
}

export interface AgentClockReads {
  /** The database's agent's clock offset as last measured; undefined: no batch since this was kept. */
  agentClock(databaseId: string): Promise<AgentClock | undefined>
}
