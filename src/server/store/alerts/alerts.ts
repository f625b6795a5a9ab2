// Alerts (migrations 6 and 19): one per cause the doctor groups its findings by (doctor/grouping.ts),
// opened when a cause has a critical finding, kept up to date while it has, resolved when it has none.
// An alert keeps the cause's findings (its consequences) as they were at its last evaluation. Opening
// or resolving one queues its notifications (one per channel: an outbox the monitor delivers)
// and writes its event for the events timeline, in the same transaction, which holds the database's
// lock (an advisory lock on PostgreSQL); alerts_open allows one open alert per key, so of several
// `serve` processes one opens (and one resolves) an alert and notifies once. Reads apart from writes.
import type { SqlDriver } from '../driver.ts'
import { alertEvent, recordEventsNow } from '../events/record.ts'
import { sql } from '../sql.ts'
import type {
  AlertChanges,
  AlertConsequence,
  AlertInput,
  AlertNotification,
  AlertReads,
  AlertStatus,
  AlertWrites,
  NotificationChannel,
  NotificationEvent,
} from './types.ts'
import { num, numOrNull, type DbRow } from '../rows.ts'

/**
 * The monitor's lock of one database's evaluation (shared with monitor/evaluations.ts's recommendations).
 * Its key keeps its released spelling: `serve` processes of two versions sharing a store take the same lock.
 */
export const evaluationLockFor = (databaseId: string) => `dbm:health:${databaseId}`

/** An alert's consequences as stored: a JSON array; anything else (or an older row's '[]') reads as none. */
export function consequencesOf(text: unknown): AlertConsequence[] {
  if (typeof text !== 'string') return []
  try {
    const parsed: unknown = JSON.parse(text)
    if (!Array.isArray(parsed)) return []
    return parsed.filter(
      (c): c is AlertConsequence =>
        typeof c?.key === 'string' &&
        typeof c?.rule === 'string' &&
        typeof c?.title === 'string' &&
        typeof c?.severity === 'string',
    )
  } catch {
    return []
  }
}

function toNotification(r: DbRow): AlertNotification {
  return {
    event: r.event,
    channel: r.channel,
    created_at: num(r.created_at),
    attempts: num(r.attempts),
    sent_at: numOrNull(r.sent_at),
    gave_up_at: numOrNull(r.gave_up_at),
    last_error: r.last_error ?? null,
  }
}

async function addNotifications(
  tx: SqlDriver,
  alertId: string,
  event: NotificationEvent,
  channels: NotificationChannel[],
  now: number,
) {
  for (const channel of channels) {
    await tx.run(
      `INSERT INTO alert_notifications (id, alert_id, event, channel, created_at, next_attempt_at, attempts) VALUES ($1, $2, $3, $4, $5, $5, 0)`,
      [Bun.randomUUIDv7(), alertId, event, channel, now],
    )
  }
}

/**
 * Where an alert's resolution goes: the channels its opening was queued for, but those where a silence
 * held the opening back unsent (that opening is given up: the receiver never heard of the alert). Its
 * repeats still waiting are given up.
 */
async function resolutionChannels(tx: SqlDriver, alertId: string, now: number): Promise<NotificationChannel[]> {
  const opened = await tx.all<{
    id: string
    channel: NotificationChannel
    sent_at: unknown
    gave_up_at: unknown
    silenced_by: unknown
  }>(
    `SELECT id, channel, sent_at, gave_up_at, silenced_by FROM alert_notifications WHERE alert_id = $1 AND event = 'opened' ORDER BY created_at, id`,
    [alertId],
  )
  const channels: NotificationChannel[] = []
  for (const n of opened) {
    const heldUnsent = n.sent_at === null && n.silenced_by !== null
    if (!heldUnsent) {
      channels.push(n.channel)
      continue
    }
    if (n.gave_up_at === null)
      await tx.run(
        `UPDATE alert_notifications SET gave_up_at = $1, last_error = 'resolved while silenced' WHERE id = $2`,
        [now, n.id],
      )
  }
  await tx.run(
    `UPDATE alert_notifications SET gave_up_at = $1, last_error = 'resolved' WHERE alert_id = $2 AND event = 'repeated' AND sent_at IS NULL AND gave_up_at IS NULL`,
    [now, alertId],
  )
  return channels
}

/** Open first, worst first and then oldest; then resolved, the latest resolved first. */
const ORDER_SQL = `ORDER BY CASE WHEN resolved_at IS NULL THEN 0 ELSE 1 END,
  CASE WHEN resolved_at IS NOT NULL THEN 0 WHEN severity = 'critical' THEN 0 WHEN severity = 'warning' THEN 1 ELSE 2 END,
  resolved_at DESC, opened_at, id`
const STATUS_SQL: Record<AlertStatus, string> = {
  open: 'AND resolved_at IS NULL',
  resolved: 'AND resolved_at IS NOT NULL',
  all: '',
}

export function alertReads(driver: SqlDriver): AlertReads {
  return {
    async listAlerts(databaseId, status, limit) {
      const rows = await driver.all(
        `SELECT * FROM alerts WHERE database_id = $1 ${STATUS_SQL[status]} ${ORDER_SQL} LIMIT $2`,
        [databaseId, limit],
      )
      if (rows.length === 0) return []
      const q = sql`SELECT * FROM alert_notifications WHERE alert_id IN ${rows.map((r) => String(r.id))} ORDER BY created_at, id`
      const byAlert = new Map<string, AlertNotification[]>()
      for (const n of await driver.all(q.sql, q.params)) {
        const list = byAlert.get(String(n.alert_id)) ?? []
        list.push(toNotification(n))
        byAlert.set(String(n.alert_id), list)
      }
      return rows.map((r: DbRow) => ({
        id: r.id,
        database_id: r.database_id,
        key: r.key,
        rule: r.rule,
        severity: r.severity,
        title: r.title,
        detail: r.detail,
        opened_at: num(r.opened_at),
        last_seen_at: num(r.last_seen_at),
        resolved_at: numOrNull(r.resolved_at),
        consequences: consequencesOf(r.consequences),
        notifications: byAlert.get(r.id) ?? [],
      }))
    },
  }
}

export function alertWrites(driver: SqlDriver): AlertWrites {
  return {
    syncAlerts(databaseId, causes, failedRules, channels, now) {
      const current = new Map<string, AlertInput>()
      for (const c of causes) if (!current.has(c.key)) current.set(c.key, c)
      return driver.transaction(async (tx) => {
        const open = await tx.all<{
          id: string
          key: string
          rule: string
          severity: string
          title: string
          detail: string
          last_seen_at: unknown
          consequences: unknown
        }>(
          'SELECT id, key, rule, severity, title, detail, last_seen_at, consequences FROM alerts WHERE database_id = $1 AND resolved_at IS NULL',
          [databaseId],
        )
        const openByKey = new Map(open.map((r) => [r.key, r]))
        const changes: AlertChanges = { opened: [], resolved: [] }
        for (const c of current.values()) {
          const consequences = JSON.stringify(c.consequences ?? [])
          const row = openByKey.get(c.key)
          if (row) {
            await tx.run(
              'UPDATE alerts SET rule = $1, severity = $2, title = $3, detail = $4, last_seen_at = $5, consequences = $6 WHERE id = $7',
              [c.rule, c.severity, c.title, c.detail, now, consequences, row.id],
            )
            continue
          }
          const id = Bun.randomUUIDv7()
          await tx.run(
            `INSERT INTO alerts (id, database_id, key, rule, severity, title, detail, opened_at, last_seen_at, consequences) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)`,
            [id, databaseId, c.key, c.rule, c.severity, c.title, c.detail, now, consequences],
          )
          await addNotifications(tx, id, 'opened', typeof channels === 'function' ? channels(c) : channels, now)
          await recordEventsNow(tx, databaseId, [alertEvent(databaseId, 'alert_opened', c, now)])
          changes.opened.push(c.key)
        }
        const failed = new Set(failedRules)
        for (const row of open) {
          if (current.has(row.key)) continue
          // A cause none of whose rules answered this time is not known to be gone.
          const rules = new Set([row.rule, ...consequencesOf(row.consequences).map((c) => c.rule)])
          if ([...rules].some((r) => failed.has(r))) continue
          await tx.run('UPDATE alerts SET resolved_at = $1 WHERE id = $2', [now, row.id])
          await addNotifications(tx, row.id, 'resolved', await resolutionChannels(tx, row.id, now), now)
          // The text of its last evaluation while open (the one before this).
          await recordEventsNow(tx, databaseId, [
            alertEvent(databaseId, 'alert_resolved', row, now, num(row.last_seen_at)),
          ])
          changes.resolved.push(row.key)
        }
        return changes
      }, evaluationLockFor(databaseId))
    },
  }
}
