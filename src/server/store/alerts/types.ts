// The alerts resource's records and interfaces: alerts and their notifications (alerts.ts), alert
// destinations (destinations.ts), routes and silences (routing.ts). Declared here, so that the rest of
// the server (the monitor, src/server/alerts/, the routes) names them without importing the SQL.
import type { Static } from '@sinclair/typebox'
import type { Severity } from '../../../shared/api/common.ts'

/** An alert's severity: the API's (src/shared/api/alerts.ts), not a copy of it. */
export type AlertSeverity = Static<typeof Severity>
export type AlertStatus = 'open' | 'resolved' | 'all'
/** `repeated`: an open alert sent again after its route's repeat interval (alerts/routing.ts). */
export type NotificationEvent = 'opened' | 'resolved' | 'repeated'
/** The users' mail, the organization's webhook, or one alert destination (alerts/destinations.ts). */
export type NotificationChannel = 'email' | 'webhook' | `destination:${string}`

/** One finding of an alert's cause, as the alert keeps it. */
export interface AlertConsequence {
  key: string
  rule: string
  severity: AlertSeverity
  title: string
}

/** What the monitor raises an alert from: a cause with a critical finding. */
export interface AlertInput {
  /** The cause's key (one open alert per key). */
  key: string
  /** The rule of the finding that leads the cause. */
  rule: string
  severity: AlertSeverity
  title: string
  detail: string
  /** The cause's findings, the lead first (none when left out). */
  consequences?: AlertConsequence[]
}

export interface AlertNotification {
  event: NotificationEvent
  channel: NotificationChannel
  created_at: number
  attempts: number
  sent_at: number | null
  gave_up_at: number | null
  last_error: string | null
}

export interface Alert {
  id: string
  database_id: string
  key: string
  rule: string
  severity: AlertSeverity
  title: string
  detail: string
  opened_at: number
  last_seen_at: number
  resolved_at: number | null
  consequences: AlertConsequence[]
  notifications: AlertNotification[]
}

export interface AlertChanges {
  /** Keys of the alerts opened. */
  opened: string[]
  /** Keys of the alerts resolved. */
  resolved: string[]
}

export interface AlertReads {
  /** The database's alerts: open first (worst, then oldest), then resolved (the latest first). */
  listAlerts(databaseId: string, status: AlertStatus, limit: number): Promise<Alert[]>
}

export interface AlertWrites {
  /**
   * Opens an alert per cause not open yet, updates the open ones still raised, resolves those whose
   * cause is gone (unless one of its rules failed this time); each change queues its notifications.
   * An opening goes to `channels` (or those it names for the cause: its routes); a resolution goes
   * where the opening was queued, but not where a silence held the opening back and it was never
   * sent (given up then, as are repeats still waiting).
   */
  syncAlerts(
    databaseId: string,
    causes: AlertInput[],
    failedRules: string[],
    channels: NotificationChannel[] | ((cause: AlertInput) => NotificationChannel[]),
    now: number,
  ): Promise<AlertChanges>
}

/** A route's matchers; each one given must match (a list: any of its values; tag: every pair). */
export interface RouteMatch {
  severity?: AlertSeverity[]
  rule?: string[]
  database_id?: string[]
  tag?: Record<string, string>
}

export interface AlertRoute {
  id: string
  org_id: string
  position: number
  name: string
  match: RouteMatch
  /** Destination ids (of the organization's). */
  destinations: string[]
  continue: boolean
  /** Seconds between sends of an alert still open; null: sent once. */
  repeat_interval_s: number | null
  created_at: number
  updated_at: number
}

/** Who created a silence: a user or an API key of the organization. */
export interface SilenceAuthor {
  kind: 'user' | 'api_key'
  id: string
}

/** A silence's matchers (null: not set); at least one is set. */
export interface SilenceMatchers {
  database_id: string | null
  rule: string | null
  /** An alert's key (its cause) or its lead finding's key. */
  key: string | null
  tag: { key: string; value: string } | null
}

export interface Silence extends SilenceMatchers {
  id: string
  org_id: string
  comment: string
  created_by: SilenceAuthor
  created_at: number
  starts_at: number
  ends_at: number
  /** When it was expired early (DELETE), else null. */
  expired_early_at: number | null
}
