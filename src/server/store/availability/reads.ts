// Reads of the databases' availability: the state of one database or of an organization's, and the
// outages and agent silences that overlap a window.
import type { AvailabilityCause } from '../../../shared/wire.ts'
import { num, numOrNull } from '../rows.ts'
import type { SqlDriver } from '../driver.ts'
import type { AgentSilence, AvailabilityReads, AvailabilitySpans, AvailabilityState, Outage } from './types.ts'

/** A database_availability row as its record (the writer reads the state before a report with it too). */
export function toState(r: Record<string, unknown>): AvailabilityState {
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

const toSilence = (r: Record<string, unknown>): AgentSilence => ({
  started_at: num(r.started_at),
  ended_at: num(r.ended_at),
})

function toSpans(outages: Record<string, unknown>[], silences: Record<string, unknown>[]): AvailabilitySpans {
  return { outages: outages.map(toOutage), silences: silences.map(toSilence) }
}

/** Rows of many databases (each list oldest first) as spans by database id, in one pass over each list. */
export function groupSpans(
  outages: Record<string, unknown>[],
  silences: Record<string, unknown>[],
): Map<string, AvailabilitySpans> {
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

/** The availability reads over a driver. */
export function availabilityReads(driver: SqlDriver): AvailabilityReads {
  return {
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
        driver.all(
          'SELECT started_at, ended_at, cause, message FROM outages WHERE database_id = $1 AND (ended_at IS NULL OR ended_at > $2) ORDER BY started_at',
          [databaseId, since],
        ),
        driver.all(
          'SELECT started_at, ended_at FROM agent_silences WHERE database_id = $1 AND ended_at > $2 ORDER BY started_at',
          [databaseId, since],
        ),
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
