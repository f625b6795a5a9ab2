// The one module that writes the `events` table: every producer of a timeline event calls it. Ingest
// (events.ts: derived from a batch, and the server log's important entries) adds its events to the
// batch's writes with recordEvents; alert openings and resolutions (alerts/alerts.ts, in the transaction
// that changes the alert) and the dashboard's actions (actions/writes.ts) store theirs at once with
// recordEventsNow. Both give the rows one shape, cut the same way, and keep an event already stored (the
// same time, kind and object) as it is.
// Three kinds are still derived when the timeline is read (events.ts listEvents), not stored here: plan
// changes (the plans are kept in explain_plans already; a copy would only drift from them), the open
// "agent stopped sending" (it is about the absence of batches, so no write could record it when it
// starts), and the alert events of alerts opened before alert events were stored (migration 11 did not
// backfill them).
import type { SqlDriver } from '../driver.ts'
import type { Writes } from '../ingest/batch.ts'
import type { DbEvent } from './types.ts'

const MAX_TITLE = 500
const MAX_DETAIL = 2_000
const cut = (text: string | null, max: number) =>
  text !== null && text.length > max ? `${text.slice(0, max - 1)}…` : text

export const iso = (ms: number) => new Date(ms).toISOString()
/** The dashboard's page of the database (a hash route). */
export const dbLink = (databaseId: string, rest: string) => `#/databases/${encodeURIComponent(databaseId)}/${rest}`

const COLUMNS = ['database_id', 'ts', 'kind', 'object', 'severity', 'title', 'detail', 'link']

function row(databaseId: string, e: DbEvent): unknown[] {
  return [
    databaseId,
    e.ts,
    e.kind,
    e.object ?? '',
    e.severity,
    cut(e.title, MAX_TITLE),
    cut(e.detail, MAX_DETAIL),
    e.link,
  ]
}

/**
 * Adds the events to an ingest batch's writes, one statement for all of them. Of the events that
 * `sameEvent` says are one (by default: the same time, kind and object), the last is kept.
 */
export function recordEvents(
  writes: Writes,
  databaseId: string,
  events: DbEvent[],
  sameEvent: (e: DbEvent) => unknown[] = (e) => [e.ts, e.kind, e.object ?? ''],
): void {
  const rows = new Map(events.map((e) => [JSON.stringify(sameEvent(e)), row(databaseId, e)]))
  writes.upsert('events', COLUMNS, [...rows.values()], { key: ['database_id', 'ts', 'kind', 'object'], update: {} })
}

/** Stores events written outside ingest (alert openings and resolutions, actions) now, on `driver`. */
export async function recordEventsNow(driver: SqlDriver, databaseId: string, events: DbEvent[]): Promise<void> {
  for (const e of events) {
    await driver.run(
      `INSERT INTO events (database_id, ts, kind, object, severity, title, detail, link) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (database_id, ts, kind, object) DO NOTHING`,
      row(databaseId, e),
    )
  }
}

/** An alert's event; `object` is the alert's key (its rule and object), so two alerts of one rule opening together are two events. */
export function alertEvent(
  databaseId: string,
  kind: 'alert_opened' | 'alert_resolved',
  alert: { key: string; severity: string; title: string; detail: string },
  ts: number,
  /** When the text was written, if not at `ts`: a resolution's (and an opening derived at query time's) last evaluation while open. */
  textAsOf?: number,
): DbEvent {
  const opened = kind === 'alert_opened'
  return {
    ts,
    kind,
    severity: opened ? (alert.severity as DbEvent['severity']) : 'info',
    title: `${opened ? 'Alert opened' : 'Alert resolved'}: ${alert.title}`,
    // Text of another time than the event's says which: its relative phrases ("1.4 min ago") are of that time.
    detail:
      textAsOf === undefined || textAsOf === ts
        ? alert.detail
        : `${alert.detail} (as of ${iso(textAsOf)}, its last evaluation while open)`,
    object: alert.key,
    link: dbLink(databaseId, 'alerts'),
  }
}
