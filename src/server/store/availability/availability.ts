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
// overlap a window (availability per day: src/server/uptime.ts).
import type { AvailabilityCause, IngestBatch } from '../../../shared/wire.ts'
import { num, numOrNull } from '../accounts/rows.ts'
import type { SqlDriver } from '../driver.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import type { RegisteredDatabase } from '../databases/types.ts'
import { availabilityLimits } from '../../limits.ts'

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
export function lastHeardAt(db: { last_seen_at: number | null }, state: Pick<AvailabilityState, 'heard_at'> | undefined): number | null {
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
  plan(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes, database: RegisteredDatabase, now: number) => void
}

export interface AvailabilityStore extends AvailabilityReads, AvailabilityWrites {}

const HEADER_KEYS = new Set(['batch_id', 'collected_at', 'interval_seconds', 'agent_version', 'database', 'availability'])

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

const engineLabel = (engine: string) => (engine === 'clickhouse' ? 'ClickHouse' : 'PostgreSQL')

function toState(r: Record<string, unknown>): AvailabilityState {
  return {
    state: r.state === 'down' ? 'down' : 'up',
    since: num(r.since),
    cause: (r.cause ?? null) as AvailabilityCause | null,
    message: r.message === null || r.message === undefined ? null : String(r.message),
    reported_at: num(r.reported_at),
    heard_at: num(r.heard_at),
    data_as_of: numOrNull(r.data_as_of),
  }
}

const toOutage = (r: Record<string, unknown>): Outage => ({
  started_at: num(r.started_at),
  ended_at: numOrNull(r.ended_at),
  cause: String(r.cause) as AvailabilityCause,
  message: r.message === null || r.message === undefined ? null : String(r.message),
})

const toSilence = (r: Record<string, unknown>): AgentSilence => ({ started_at: num(r.started_at), ended_at: num(r.ended_at) })

function toSpans(outages: Record<string, unknown>[], silences: Record<string, unknown>[]): AvailabilitySpans {
  return { outages: outages.map(toOutage), silences: silences.map(toSilence) }
}

/** Rows of many databases (each list oldest first) as spans by database id, in one pass over each list. */
export function groupSpans(outages: Record<string, unknown>[], silences: Record<string, unknown>[]): Map<string, AvailabilitySpans> {
  const byId = new Map<string, AvailabilitySpans>()
  const of = (r: Record<string, unknown>) => {
    const id = String(r.database_id)
    let spans = byId.get(id)
    if (!spans) byId.set(id, (spans = { outages: [], silences: [] }))
    return spans
  }
  for (const r of outages) of(r).outages.push(toOutage(r))
  for (const r of silences) of(r).silences.push(toSilence(r))
  return byId
}

const spanText = (ms: number) => {
  const s = Math.round(ms / 1000)
  if (s < 120) return `${s} s`
  const m = Math.round(s / 60)
  return m < 120 ? `${m} min` : `${Math.floor(m / 60)} h ${m % 60} min`
}

const EVENT_SQL = `INSERT INTO events (database_id, ts, kind, object, severity, title, detail, link) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (database_id, ts, kind, object) DO NOTHING`
const STATE_SQL = `INSERT INTO database_availability (database_id, state, since, cause, message, reported_at, heard_at, data_as_of)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (database_id) DO UPDATE SET state = excluded.state, since = excluded.since, cause = excluded.cause, message = excluded.message,
    reported_at = excluded.reported_at, heard_at = excluded.heard_at, data_as_of = excluded.data_as_of`

/**
 * The report's `since`, bounded: never after the batch's collected_at nor the server's clock (an agent's
 * clock ahead, or a forged year 9999), never before the state it follows, the database's registration or
 * the epoch (a forged 0 would put the outage where retention deletes it).
 */
export function boundedSince(since: number, collectedAt: number, now: number, floor: number): number {
  return Math.max(1, floor, Math.min(since, collectedAt, now))
}

const DOWN_EVENT = (engine: string, cause: AvailabilityCause) => `${engine} unreachable: ${causeText(cause)}`

/** The ingest side: needs no driver (its statements join the batch's writes). */
export const availabilityWrites: AvailabilityWrites = {
  plan(reads, databaseId, batch) {
    const report = batch.availability
    if (!report) return () => {}
    const stored = reads.add({ sql: 'SELECT * FROM database_availability WHERE database_id = $1', params: [databaseId] })
    // A down report may reopen the latest outage (flapping): read it.
    const latest =
      report.state === 'down'
        ? reads.add({ sql: 'SELECT started_at, ended_at, cause FROM outages WHERE database_id = $1 ORDER BY started_at DESC LIMIT 1', params: [databaseId] })
        : () => []
    return (writes, database, now) => {
      const row = stored()[0]
      const before = row ? toState(row) : undefined
      // Delivered late from the agent's buffer: a later report was applied already.
      if (before && batch.collected_at < before.reported_at) return
      const engine = engineLabel(database.engine)
      const link = `#/databases/${encodeURIComponent(databaseId)}/overview`
      const since = boundedSince(report.since, batch.collected_at, now, Math.max(before?.since ?? 0, database.created_at))
      if (report.state === 'down') {
        const cause = report.cause ?? 'other'
        const message = report.message ?? null
        if (before?.state === 'down') {
          writes.add(STATE_SQL, [databaseId, 'down', before.since, cause, message, batch.collected_at, now, before.data_as_of])
          return
        }
        // The data shown while down: what the last batch before the outage carried.
        const dataAsOf = database.last_seen_at
        const last = latest()[0]
        const lastEnded = last ? numOrNull(last.ended_at) : null
        if (last && lastEnded !== null && String(last.cause) === cause && since - lastEnded <= availabilityLimits.reopenWithinMs) {
          // Flapping: down again with the same cause within a minute of the end, so the outage goes on.
          // Its end and the database_up event that said so are withdrawn; no new row, no new event.
          const started = num(last.started_at)
          writes.add('UPDATE outages SET ended_at = NULL, message = $1 WHERE database_id = $2 AND started_at = $3', [message, databaseId, started])
          writes.add("DELETE FROM events WHERE database_id = $1 AND ts = $2 AND kind = 'database_up' AND object = ''", [databaseId, lastEnded])
          writes.add(STATE_SQL, [databaseId, 'down', started, cause, message, batch.collected_at, now, dataAsOf])
          return
        }
        writes.add('INSERT INTO outages (database_id, started_at, ended_at, cause, message) VALUES ($1, $2, NULL, $3, $4) ON CONFLICT DO NOTHING', [
          databaseId,
          since,
          cause,
          message,
        ])
        writes.add(EVENT_SQL, [databaseId, since, 'database_down', '', 'critical', DOWN_EVENT(engine, cause), message, link])
        writes.add(STATE_SQL, [databaseId, 'down', since, cause, message, batch.collected_at, now, dataAsOf])
        return
      }
      if (before?.state === 'down') {
        const ended = since
        writes.add('UPDATE outages SET ended_at = $1 WHERE database_id = $2 AND started_at = $3 AND ended_at IS NULL', [ended, databaseId, before.since])
        writes.add(EVENT_SQL, [
          databaseId,
          ended,
          'database_up',
          '',
          'info',
          `${engine} reachable again`,
          `down for ${spanText(ended - before.since)} (${causeText(before.cause)}) since ${new Date(before.since).toISOString()}`,
          link,
        ])
        writes.add(STATE_SQL, [databaseId, 'up', since, null, null, batch.collected_at, now, null])
        return
      }
      // Up, and known up: nothing to write (the batch moves last_seen_at). First report: the row is made.
      if (!before) writes.add(STATE_SQL, [databaseId, 'up', since, null, null, batch.collected_at, now, null])
      else if (isReportOnly(batch)) writes.add('UPDATE database_availability SET reported_at = $1, heard_at = $2 WHERE database_id = $3', [batch.collected_at, now, databaseId])
    }
  },
}

/** The availability store over a driver. */
export function availabilityStore(driver: SqlDriver): AvailabilityStore {
  return {
    ...availabilityWrites,
    async state(databaseId) {
      const row = await driver.get('SELECT * FROM database_availability WHERE database_id = $1', [databaseId])
      return row ? toState(row) : undefined
    },
    async states(orgId) {
      const rows = await driver.all(
        'SELECT a.* FROM database_availability a JOIN databases d ON d.id = a.database_id WHERE d.org_id = $1',
        [orgId],
      )
      return new Map(rows.map((r) => [String(r.database_id), toState(r)]))
    },
    async spans(databaseId, since) {
      const [outages, silences] = await Promise.all([
        driver.all('SELECT started_at, ended_at, cause, message FROM outages WHERE database_id = $1 AND (ended_at IS NULL OR ended_at > $2) ORDER BY started_at', [databaseId, since]),
        driver.all('SELECT started_at, ended_at FROM agent_silences WHERE database_id = $1 AND ended_at > $2 ORDER BY started_at', [databaseId, since]),
      ])
      return toSpans(outages, silences)
    },
    async orgSpans(orgId, since) {
      const [outages, silences] = await Promise.all([
        driver.all(
          `SELECT o.database_id, o.started_at, o.ended_at, o.cause, o.message FROM outages o JOIN databases d ON d.id = o.database_id
           WHERE d.org_id = $1 AND (o.ended_at IS NULL OR o.ended_at > $2) ORDER BY o.started_at`,
          [orgId, since],
        ),
        driver.all(
          `SELECT s.database_id, s.started_at, s.ended_at FROM agent_silences s JOIN databases d ON d.id = s.database_id
           WHERE d.org_id = $1 AND s.ended_at > $2 ORDER BY s.started_at`,
          [orgId, since],
        ),
      ])
      return groupSpans(outages, silences)
    },
  }
}
