// Availability at ingest (planned by planBatch, in the batch's transaction): a report of down opens or
// reopens an outage with its event, a report of up closes it; state rows and agent silences (types.ts
// says the rules).
import type { AvailabilityCause } from '../../../shared/wire.ts'
import { num, numOrNull } from '../rows.ts'
import { availabilityLimits } from '../../limits.ts'
import { toState } from './reads.ts'
import { type AvailabilityWrites, causeText, isReportOnly } from './types.ts'

const engineLabel = (engine: string) => (engine === 'clickhouse' ? 'ClickHouse' : 'PostgreSQL')

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
    const stored = reads.add({
      sql: 'SELECT * FROM database_availability WHERE database_id = $1',
      params: [databaseId],
    })
    // A down report may reopen the latest outage (flapping): read it.
    const latest =
      report.state === 'down'
        ? reads.add({
            sql: 'SELECT started_at, ended_at, cause FROM outages WHERE database_id = $1 ORDER BY started_at DESC LIMIT 1',
            params: [databaseId],
          })
        : () => []
    return (writes, database, now) => {
      const row = stored()[0]
      const before = row ? toState(row) : undefined
      // Delivered late from the agent's buffer: a later report was applied already.
      if (before && batch.collected_at < before.reported_at) return
      const engine = engineLabel(database.engine)
      const link = `#/databases/${encodeURIComponent(databaseId)}/overview`
      const since = boundedSince(
        report.since,
        batch.collected_at,
        now,
        Math.max(before?.since ?? 0, database.created_at),
      )
      if (report.state === 'down') {
        const cause = report.cause ?? 'other'
        const message = report.message ?? null
        if (before?.state === 'down') {
          writes.add(STATE_SQL, [
            databaseId,
            'down',
            before.since,
            cause,
            message,
            batch.collected_at,
            now,
            before.data_as_of,
          ])
          return
        }
        // The data shown while down: what the last batch before the outage carried.
        const dataAsOf = database.last_seen_at
        const last = latest()[0]
        const lastEnded = last ? numOrNull(last.ended_at) : null
        if (
          last &&
          lastEnded !== null &&
          String(last.cause) === cause &&
          since - lastEnded <= availabilityLimits.reopenWithinMs
        ) {
          // Flapping: down again with the same cause within a minute of the end, so the outage goes on.
          // Its end and the database_up event that said so are withdrawn; no new row, no new event.
          const started = num(last.started_at)
          writes.add('UPDATE outages SET ended_at = NULL, message = $1 WHERE database_id = $2 AND started_at = $3', [
            message,
            databaseId,
            started,
          ])
          writes.add("DELETE FROM events WHERE database_id = $1 AND ts = $2 AND kind = 'database_up' AND object = ''", [
            databaseId,
            lastEnded,
          ])
          writes.add(STATE_SQL, [databaseId, 'down', started, cause, message, batch.collected_at, now, dataAsOf])
          return
        }
        writes.add(
          'INSERT INTO outages (database_id, started_at, ended_at, cause, message) VALUES ($1, $2, NULL, $3, $4) ON CONFLICT DO NOTHING',
          [databaseId, since, cause, message],
        )
        writes.add(EVENT_SQL, [
          databaseId,
          since,
          'database_down',
          '',
          'critical',
          DOWN_EVENT(engine, cause),
          message,
          link,
        ])
        writes.add(STATE_SQL, [databaseId, 'down', since, cause, message, batch.collected_at, now, dataAsOf])
        return
      }
      if (before?.state === 'down') {
        const ended = since
        writes.add('UPDATE outages SET ended_at = $1 WHERE database_id = $2 AND started_at = $3 AND ended_at IS NULL', [
          ended,
          databaseId,
          before.since,
        ])
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
      else if (isReportOnly(batch))
        writes.add('UPDATE database_availability SET reported_at = $1, heard_at = $2 WHERE database_id = $3', [
          batch.collected_at,
          now,
          databaseId,
        ])
    }
  },
}
