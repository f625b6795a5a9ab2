// An organization's alert destinations (migration 21): where the monitor sends each alert's
// opening and resolution besides the users' mails and the organization's webhook. Each has a kind, a
// name unique in its organization, its kind's settings (kept as JSON text) and its secret apart (a
// signing secret, routing key, API key, or a URL that is itself the credential), which only the
// delivery reads. Reads (the routes' lists, the monitor's enabled destinations) are apart from writes
// (the routes' changes, and each delivery's outcome and counts).
import { num, numOrNull, type DbRow } from '../rows.ts'
import type { SqlDriver } from '../driver.ts'
import { UniqueViolation } from '../driver.ts'
import { consequencesOf } from './alerts.ts'
import type { AlertConsequence, AlertSeverity } from './types.ts'
import { dropDestinationFromRoutes } from './routing.ts'

export type AlertDestinationKind = 'email' | 'webhook' | 'slack' | 'teams' | 'pagerduty' | 'opsgenie' | 'alertmanager'

/** A kind's settings: `url` for the kinds that post, `to` for email. */
export interface AlertDestinationSettings {
  url?: string
  to?: string[]
}

export interface AlertDestination {
  id: string
  org_id: string
  kind: AlertDestinationKind
  name: string
  enabled: boolean
  settings: AlertDestinationSettings
  /** The kind's secret, as the delivery needs it; null for a kind without one. Never returned in full. */
  secret: string | null
  created_at: number
  updated_at: number
  last_success_at: number | null
  last_failure_at: number | null
  last_error: string | null
  /** Notifications delivered, and attempts that failed (each retry counts). */
  sent: number
  failed: number
}

export type NewAlertDestination = Pick<
  AlertDestination,
  'id' | 'org_id' | 'kind' | 'name' | 'enabled' | 'settings' | 'secret' | 'created_at'
>

export interface AlertDestinationChange {
  name?: string
  enabled?: boolean
  settings?: AlertDestinationSettings
  secret?: string | null
}

/** Raised when the organization has a destination of that name already (the route answers 409). */
export class DestinationNameTaken extends Error {
  constructor(name: string) {
    super(`a destination named "${name}" exists already`)
    this.name = 'DestinationNameTaken'
  }
}

export interface AlertDestinationReads {
  /** The organization's destinations, oldest first. */
  listDestinations(orgId: string): Promise<AlertDestination[]>
  /** One destination of the organization; undefined for another organization's or none. */
  getDestination(orgId: string, id: string): Promise<AlertDestination | undefined>
  /** The organization's enabled destinations, oldest first (the channels an alert's change is queued for). */
  enabledDestinations(orgId: string): Promise<AlertDestination[]>
  /** How many destinations the organization has. */
  countDestinations(orgId: string): Promise<number>
  /** Organizations with an enabled destination of that kind. */
  organizationsWith(kind: AlertDestinationKind): Promise<string[]>
  /** The organization's open alerts with their databases (what Alertmanager is told again while they last). */
  openAlerts(orgId: string, limit: number): Promise<OpenAlert[]>
}

/** An open alert as a destination is sent it again. */
export interface OpenAlert {
  alert: {
    id: string
    key: string
    rule: string
    severity: AlertSeverity
    title: string
    detail: string
    opened_at: number
    resolved_at: null
    consequences: AlertConsequence[]
  }
  database: { id: string; name: string; engine: string; host: string; port: number }
}

export interface AlertDestinationWrites {
  /** Adds a destination; DestinationNameTaken when its name is taken in the organization. */
  createDestination(d: NewAlertDestination): Promise<AlertDestination>
  /** Changes a destination of the organization; undefined when there is none; DestinationNameTaken as above. */
  updateDestination(
    orgId: string,
    id: string,
    change: AlertDestinationChange,
    now: number,
  ): Promise<AlertDestination | undefined>
  /** Removes a destination of the organization; false when there is none. Its undelivered notifications are given up, and routes name it no more. */
  deleteDestination(orgId: string, id: string, now: number): Promise<boolean>
  /** Records one delivery attempt's outcome: null is a success. */
  recordDelivery(id: string, now: number, error: string | null): Promise<void>
  /**
   * Records that an Alertmanager was told of these open alerts by the refresh (sent at `now`), for each
   * that had no opening queued for it (a route changed, or it was added, while the alert was open): their
   * resolution then goes to it too, as to every channel an opening went to.
   */
  recordRefreshedOpenings(destinationId: string, alertIds: readonly string[], now: number): Promise<void>
}

export interface AlertDestinationStore extends AlertDestinationReads, AlertDestinationWrites {}

/** The channel of alert_notifications that delivers to a destination. */
export const destinationChannel = (id: string): `destination:${string}` => `destination:${id}`

function settingsOf(text: unknown): AlertDestinationSettings {
  if (typeof text !== 'string') return {}
  try {
    const parsed = JSON.parse(text)
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as AlertDestinationSettings)
      : {}
  } catch {
    return {}
  }
}

function toDestination(r: DbRow): AlertDestination {
  return {
    id: r.id,
    org_id: r.org_id,
    kind: r.kind,
    name: r.name,
    enabled: r.enabled === true || Number(r.enabled) === 1,
    settings: settingsOf(r.settings),
    secret: r.secret ?? null,
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
    last_success_at: numOrNull(r.last_success_at),
    last_failure_at: numOrNull(r.last_failure_at),
    last_error: r.last_error ?? null,
    sent: num(r.sent),
    failed: num(r.failed),
  }
}

async function nameGuard<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (e) {
    if (e instanceof UniqueViolation) throw new DestinationNameTaken(name)
    throw e
  }
}

export class SqlAlertDestinations implements AlertDestinationStore {
  constructor(private readonly driver: SqlDriver) {}

  async listDestinations(orgId: string): Promise<AlertDestination[]> {
    return (
      await this.driver.all('SELECT * FROM alert_destinations WHERE org_id = $1 ORDER BY created_at, id', [orgId])
    ).map(toDestination)
  }

  async getDestination(orgId: string, id: string): Promise<AlertDestination | undefined> {
    const r = await this.driver.get('SELECT * FROM alert_destinations WHERE org_id = $1 AND id = $2', [orgId, id])
    return r ? toDestination(r) : undefined
  }

  async enabledDestinations(orgId: string): Promise<AlertDestination[]> {
    return (await this.listDestinations(orgId)).filter((d) => d.enabled)
  }

  async countDestinations(orgId: string): Promise<number> {
    const r = await this.driver.get<{ n: unknown }>('SELECT COUNT(*) AS n FROM alert_destinations WHERE org_id = $1', [
      orgId,
    ])
    return num(r?.n ?? 0)
  }

  async organizationsWith(kind: AlertDestinationKind): Promise<string[]> {
    const rows = await this.driver.all<{ org_id: string }>(
      'SELECT DISTINCT org_id FROM alert_destinations WHERE kind = $1 AND enabled = $2',
      [kind, true],
    )
    return rows.map((r) => r.org_id)
  }

  async openAlerts(orgId: string, limit: number): Promise<OpenAlert[]> {
    const rows = await this.driver.all(
      `SELECT a.id, a.key, a.rule, a.severity, a.title, a.detail, a.opened_at, a.consequences,
              d.id AS database_id, d.name AS database_name, d.engine, d.host, d.port
       FROM alerts a JOIN databases d ON d.id = a.database_id
       WHERE d.org_id = $1 AND a.resolved_at IS NULL ORDER BY a.opened_at, a.id LIMIT $2`,
      [orgId, limit],
    )
    return rows.map((r: DbRow) => ({
      alert: {
        id: r.id,
        key: r.key,
        rule: r.rule,
        severity: r.severity,
        title: r.title,
        detail: r.detail,
        opened_at: num(r.opened_at),
        resolved_at: null,
        consequences: consequencesOf(r.consequences),
      },
      database: { id: r.database_id, name: r.database_name, engine: r.engine, host: r.host, port: num(r.port) },
    }))
  }

  async recordRefreshedOpenings(destinationId: string, alertIds: readonly string[], now: number): Promise<void> {
    const channel = destinationChannel(destinationId)
    for (const alertId of alertIds) {
      await this.driver.run(
        `INSERT INTO alert_notifications (id, alert_id, event, channel, created_at, next_attempt_at, attempts, sent_at)
         SELECT $1, $2, 'opened', $3, $4, $4, 1, $4
         WHERE NOT EXISTS (SELECT 1 FROM alert_notifications WHERE alert_id = $2 AND event = 'opened' AND channel = $3)`,
        [Bun.randomUUIDv7(), alertId, channel, now],
      )
    }
  }

  async createDestination(d: NewAlertDestination): Promise<AlertDestination> {
    await nameGuard(d.name, () =>
      this.driver.run(
        `INSERT INTO alert_destinations (id, org_id, kind, name, enabled, settings, secret, created_at, updated_at, sent, failed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, 0, 0)`,
        [d.id, d.org_id, d.kind, d.name, d.enabled, JSON.stringify(d.settings), d.secret, d.created_at],
      ),
    )
    return (await this.getDestination(d.org_id, d.id))!
  }

  async updateDestination(
    orgId: string,
    id: string,
    change: AlertDestinationChange,
    now: number,
  ): Promise<AlertDestination | undefined> {
    const current = await this.getDestination(orgId, id)
    if (!current) return undefined
    const next = {
      name: change.name ?? current.name,
      enabled: change.enabled ?? current.enabled,
      settings: change.settings ?? current.settings,
      secret: change.secret !== undefined ? change.secret : current.secret,
    }
    await nameGuard(next.name, () =>
      this.driver.run(
        'UPDATE alert_destinations SET name = $1, enabled = $2, settings = $3, secret = $4, updated_at = $5 WHERE org_id = $6 AND id = $7',
        [next.name, next.enabled, JSON.stringify(next.settings), next.secret, now, orgId, id],
      ),
    )
    return this.getDestination(orgId, id)
  }

  deleteDestination(orgId: string, id: string, now: number): Promise<boolean> {
    return this.driver.transaction(async (tx) => {
      const removed = (await tx.run('DELETE FROM alert_destinations WHERE org_id = $1 AND id = $2', [orgId, id])) > 0
      if (removed) {
        await tx.run(
          `UPDATE alert_notifications SET gave_up_at = $1, last_error = COALESCE(last_error, 'destination deleted') WHERE channel = $2 AND sent_at IS NULL AND gave_up_at IS NULL`,
          [now, destinationChannel(id)],
        )
        await dropDestinationFromRoutes(tx, orgId, id, now)
      }
      return removed
    })
  }

  async recordDelivery(id: string, now: number, error: string | null): Promise<void> {
    if (error === null)
      await this.driver.run('UPDATE alert_destinations SET last_success_at = $1, sent = sent + 1 WHERE id = $2', [
        now,
        id,
      ])
    else
      await this.driver.run(
        'UPDATE alert_destinations SET last_failure_at = $1, last_error = $2, failed = failed + 1 WHERE id = $3',
        [now, error, id],
      )
  }
}
