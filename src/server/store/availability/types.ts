// Whether each database answers its agent (migration 16). Ingest (AvailabilityWrites.plan, called by
// planBatch in the batch's transaction) follows the batch's `availability` section: a database reported
// down opens an outage (with a `database_down` event on the timeline) and keeps its state row current at
// every report; reported up again, the outage is closed (a `database_up` event saying for how long and
// why). A batch that carries nothing but the header and availability (the agent's report while down) is
// a report only: it moves heard_at, never the database's last_seen_at (the time of its latest data). A
// report older than the one stored (delivered late from the agent's buffer) changes nothing. Batches of
// up databases write nothing here once the row says up (the normal batches say it is up). A report's
// `since` is hostile input: it is bounded by the batch's time and the server's clock, and by the state
// before it (boundedSince). Flapping is damped: down again with the same cause within a minute of an
// outage's end reopens that outage (no new row, no new event; its database_up event is withdrawn).
// Reads: the state of one database or of an organization's, and the outages and agent silences that
// overlap a window (availability per day: src/server/uptime.ts). Records, interfaces and the helpers on
// them here; reads.ts implements AvailabilityReads, writes.ts AvailabilityWrites (ingest).
import type { AvailabilityCause, IngestBatch } from '../../../shared/wire.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import type { RegisteredDatabase } from '../databases/types.ts'

export interface AvailabilityState {
  state: 'up' | 'down'
  /** Since when (the agent's clock). */
  since: number
  cause: AvailabilityCause | null
  message: string | null
  /** The latest report's collected_at (the agent's clock). */
  reported_at: number
  /** When the server received a report last (its own clock); batches with data move last_seen_at instead. */
  heard_at: number
  /** While down: when the data the server holds was collected (the last batch before the outage); null otherwise. */
  data_as_of: number | null
}

/** When the agent was last heard from about the database: its latest batch or availability report; null: never. */
export function lastHeardAt(
  db: { last_seen_at: number | null },
  state: Pick<AvailabilityState, 'heard_at'> | undefined,
): number | null {
  return state ? Math.max(db.last_seen_at ?? 0, state.heard_at) : db.last_seen_at
}

export interface Outage {
  started_at: number
  /** Null while it lasts. */
  ended_at: number | null
  cause: AvailabilityCause
  message: string | null
}

export interface AgentSilence {
  started_at: number
  ended_at: number
}

export interface AvailabilitySpans {
  outages: Outage[]
  silences: AgentSilence[]
}

export interface AvailabilityReads {
  /** The database's latest reported state; undefined before its agent reported any. */
  state(databaseId: string): Promise<AvailabilityState | undefined>
  /** The states of the organization's databases, by database id. */
  states(orgId: string): Promise<Map<string, AvailabilityState>>
  /** The outages and agent silences of the database that end after `since` (or have not ended), oldest first. */
  spans(databaseId: string, since: number): Promise<AvailabilitySpans>
  /** The same for every database of the organization, by database id. */
  orgSpans(orgId: string, since: number): Promise<Map<string, AvailabilitySpans>>
}

export interface AvailabilityWrites {
  /**
   * Registers the read the batch's availability depends on and returns what adds its writes once sent
   * (told the database's row as it was before the batch, and the server's clock).
   */
  plan(
    reads: Reads,
    databaseId: string,
    batch: IngestBatch,
  ): (writes: Writes, database: RegisteredDatabase, now: number) => void
}

const HEADER_KEYS = new Set([
  'batch_id',
  'collected_at',
  'interval_seconds',
  'agent_version',
  'database',
  'availability',
])

/** True for the agent's report while a database is down: the header and availability, nothing else. */
export function isReportOnly(batch: IngestBatch): boolean {
  return batch.availability !== undefined && Object.keys(batch).every((key) => HEADER_KEYS.has(key))
}

const CAUSE_TEXT: Record<AvailabilityCause, string> = {
  refused: 'connection refused',
  timeout: 'timed out',
  name_resolution: 'host name not resolved',
  tls: 'TLS failure',
  authentication: 'authentication failed',
  too_many_connections: 'too many connections',
  permission: 'permission denied',
  other: 'connection failed',
}

/** A cause as a phrase ("connection refused"). */
export const causeText = (cause: AvailabilityCause | null) => (cause === null ? 'unknown cause' : CAUSE_TEXT[cause])
