// Recommendations, alert notifications and each organization's webhook (migration 6), written by the
// monitor (monitor/) from the doctor's findings and read by routes/alerts.ts; the
// alerts themselves, one per cause, are in alerts/alerts.ts. A finding's key identifies what it is about:
// at most one open recommendation per database and key (a partial unique index), updated while the
// finding stays and resolved when it goes, with the key of its cause (migration 19). The outbox of
// notifications that alerts queue is delivered by the monitor, claimed row by row (several `serve`
// processes may share a PostgreSQL store), and retried until sent or given up. Each database's evaluation
// lease and the summary of its latest evaluation are rows of database_health (a released table name; the
// methods say evaluation: claimEvaluation, recordDiagnosis, releaseEvaluation).
import type { Static } from '@sinclair/typebox'
import type { Severity } from '../../../shared/api/common.ts'
import type { SqlDriver } from '../driver.ts'
import { alertReads, alertWrites, consequencesOf, evaluationLockFor } from '../alerts/alerts.ts'
import type { Alert, AlertReads, AlertWrites, NotificationChannel, NotificationEvent } from '../alerts/types.ts'
import { num, numOrNull, type DbRow } from '../rows.ts'

export type {
  Alert,
  AlertConsequence,
  AlertInput,
  AlertNotification,
  NotificationChannel,
  NotificationEvent,
} from '../alerts/types.ts'
/** A finding's severity: the API's (src/shared/api/doctor.ts), not a copy of it. */
export type FindingSeverity = Static<typeof Severity>
export type RecordStatus = 'open' | 'resolved' | 'all'

/** What is kept of a doctor finding. */
export interface FindingRecord {
  key: string
  rule: string
  severity: FindingSeverity
  category: string
  title: string
  detail: string
  recommendation: string
  /** The finding's fix commands, one per line. */
  remediation_sql: string
  /** The key of its cause (doctor/grouping.ts); null for a recommendation kept before migration 19. */
  cause: string | null
}

export interface Recommendation extends FindingRecord {
  id: string
  database_id: string
  first_seen_at: number
  last_seen_at: number
  resolved_at: number | null
}

/** A notification to deliver, with what its message says. */
export interface PendingNotification {
  id: string
  event: NotificationEvent
  channel: NotificationChannel
  attempts: number
  created_at: number
  org_id: string
  alert: Omit<Alert, 'notifications' | 'database_id' | 'last_seen_at'>
  database: { id: string; name: string; engine: string; host: string; port: number }
  /** The silence that held it back at an earlier attempt, else null or absent (alerts/routing.ts). */
  silenced_by?: string | null
}

export interface Webhook {
  org_id: string
  url: string
  /** The signing secret (kept as it is: it must be, to sign). */
  secret: string
  created_at: number
  updated_at: number
  last_success_at: number | null
  last_failure_at: number | null
  last_error: string | null
}

/** A database the monitor evaluates, with what it needs to know of the organization. */
export interface MonitoredDatabase {
  id: string
  org_id: string
  org_verified: boolean
  /** When the monitor last diagnosed it (null: never). */
  evaluated_at: number | null
  /** Since when the agent reports the database up or down (availability/); null before any report. */
  state_since: number | null
}

/** One database of an organization as GET /metrics shows it to that organization (organizationFigures). */
export interface DatabaseFigures {
  id: string
  name: string
  engine: string
  poll_interval_seconds: number
  last_seen_at: number | null
  /** The latest diagnosis' score and findings by severity; null: not diagnosed yet. */
  score: number | null
  findings: { critical: number; warning: number; info: number } | null
  /** Open alerts by severity. */
  open_alerts: { critical: number; warning: number; info: number }
}

/** What the monitor records of one diagnosis. */
export interface DiagnosisSummary {
  status: string
  score: number
  findings: { critical: number; warning: number; info: number }
  active_queries: number | null
}

const lockFor = evaluationLockFor

const STATUS_SQL: Record<RecordStatus, string> = {
  open: 'AND resolved_at IS NULL',
  resolved: 'AND resolved_at IS NOT NULL',
  all: '',
}
/** Open first, worst first and then oldest; then resolved, the latest resolved first. */
const ORDER_SQL = `ORDER BY CASE WHEN resolved_at IS NULL THEN 0 ELSE 1 END,
  CASE WHEN resolved_at IS NOT NULL THEN 0 WHEN severity = 'critical' THEN 0 WHEN severity = 'warning' THEN 1 ELSE 2 END,
  resolved_at DESC, first_seen_at, id`

function toRecommendation(r: DbRow): Recommendation {
  return {
    id: r.id,
    database_id: r.database_id,
    key: r.key,
    rule: r.rule,
    severity: r.severity,
    category: r.category,
    title: r.title,
    detail: r.detail,
    recommendation: r.recommendation,
    remediation_sql: r.remediation_sql,
    cause: r.cause ?? null,
    first_seen_at: num(r.first_seen_at),
    last_seen_at: num(r.last_seen_at),
    resolved_at: numOrNull(r.resolved_at),
  }
}

function toWebhook(r: DbRow): Webhook {
  return {
    org_id: r.org_id,
    url: r.url,
    secret: r.secret,
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
    last_success_at: numOrNull(r.last_success_at),
    last_failure_at: numOrNull(r.last_failure_at),
    last_error: r.last_error ?? null,
  }
}

/** Keeps the first finding of each key (findings come worst first). */
function byKey(findings: FindingRecord[]): Map<string, FindingRecord> {
  const found = new Map<string, FindingRecord>()
  for (const f of findings) if (!found.has(f.key)) found.set(f.key, f)
  return found
}

async function syncRecommendations(
  driver: SqlDriver,
  databaseId: string,
  findings: FindingRecord[],
  failedRules: string[],
  now: number,
) {
  const current = byKey(findings)
  return driver.transaction(async (tx) => {
    const open = await tx.all<{ id: string; key: string; rule: string }>(
      'SELECT id, key, rule FROM recommendations WHERE database_id = $1 AND resolved_at IS NULL',
      [databaseId],
    )
    const openByKey = new Map(open.map((r) => [r.key, r]))
    let opened = 0
    let resolved = 0
    for (const f of current.values()) {
      const row = openByKey.get(f.key)
      const values = [
        f.rule,
        f.severity,
        f.category,
        f.title,
        f.detail,
        f.recommendation,
        f.remediation_sql,
        now,
        f.cause,
      ]
      if (row) {
        await tx.run(
          `UPDATE recommendations SET rule = $1, severity = $2, category = $3, title = $4, detail = $5, recommendation = $6,
             remediation_sql = $7, last_seen_at = $8, cause = $9 WHERE id = $10`,
          [...values, row.id],
        )
      } else {
        await tx.run(
          `INSERT INTO recommendations (rule, severity, category, title, detail, recommendation, remediation_sql, last_seen_at, cause,
             first_seen_at, id, database_id, key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $8, $10, $11, $12)`,
          [...values, Bun.randomUUIDv7(), databaseId, f.key],
        )
        opened++
      }
    }
    const failed = new Set(failedRules)
    for (const row of open) {
      if (current.has(row.key) || failed.has(row.rule)) continue
      await tx.run('UPDATE recommendations SET resolved_at = $1 WHERE id = $2', [now, row.id])
      resolved++
    }
    return { opened, resolved }
  }, lockFor(databaseId))
}

async function pendingNotifications(driver: SqlDriver, now: number, limit: number): Promise<PendingNotification[]> {
  const rows = await driver.all(
    `SELECT n.id, n.event, n.channel, n.attempts, n.created_at, n.silenced_by, d.org_id,
            a.id AS alert_id, a.key, a.rule, a.severity, a.title, a.detail, a.opened_at, a.resolved_at, a.consequences,
            d.id AS database_id, d.name AS database_name, d.engine, d.host, d.port
     FROM alert_notifications n JOIN alerts a ON a.id = n.alert_id JOIN databases d ON d.id = a.database_id
     WHERE n.sent_at IS NULL AND n.gave_up_at IS NULL AND n.next_attempt_at <= $1
     ORDER BY n.created_at, n.id LIMIT $2`,
    [now, limit],
  )
  return rows.map((r: DbRow) => ({
    id: r.id,
    event: r.event,
    channel: r.channel,
    attempts: num(r.attempts),
    created_at: num(r.created_at),
    org_id: r.org_id,
    alert: {
      id: r.alert_id,
      key: r.key,
      rule: r.rule,
      severity: r.severity,
      title: r.title,
      detail: r.detail,
      opened_at: num(r.opened_at),
      resolved_at: numOrNull(r.resolved_at),
      consequences: consequencesOf(r.consequences),
    },
    database: { id: r.database_id, name: r.database_name, engine: r.engine, host: r.host, port: num(r.port) },
    silenced_by: r.silenced_by ?? null,
  }))
}

/** The monitor's per-database state: evaluation claims, diagnosis summaries, recommendations, the organization webhook. */
export interface MonitorState {
  /** Databases that sent data (or were registered) since `since`, with their organization's verification. */
  monitoredDatabases(since: number): Promise<MonitoredDatabase[]>
  /**
   * Takes the database's evaluation for `by` until `leaseUntil`, unless another process holds it
   * (claimed_until after `now`), and, when `dueBefore` is given, only if its latest diagnosis is older
   * than that. False when not taken, or when the database was deleted meanwhile. Several `dbm serve`
   * processes on one store so split the monitor's work instead of each doing all of it.
   */
  claimEvaluation(databaseId: string, by: string, now: number, leaseUntil: number, dueBefore?: number): Promise<boolean>
  /** Records the diagnosis of a database evaluated by `by` and gives up its lease. */
  recordDiagnosis(databaseId: string, by: string, summary: DiagnosisSummary, now: number): Promise<void>
  /** Gives up `by`'s lease on the database's evaluation without a diagnosis (it failed). */
  releaseEvaluation(databaseId: string, by: string): Promise<void>
  /**
   * Every database of the organization with its latest diagnosis and its open alerts by severity, in
   * one query (GET /metrics, at each scrape): the databases by org_id, their diagnosis by key, their
   * open alerts through alerts_database.
   */
  organizationFigures(orgId: string): Promise<DatabaseFigures[]>
  /** Opens or updates a recommendation per finding key and resolves the open ones whose key is gone (unless their rule failed). */
  syncRecommendations: (
    databaseId: string,
    findings: FindingRecord[],
    failedRules: string[],
    now: number,
  ) => Promise<{
    opened: number
    resolved: number
  }>
  listRecommendations(databaseId: string, status: RecordStatus, limit: number): Promise<Recommendation[]>
  /** Notifications due at `now`, oldest first (so an alert's opening goes out before its resolution). */
  pendingNotifications: (now: number, limit: number) => Promise<PendingNotification[]>
  /** Takes a due notification for this process until `leaseUntil`; false when another took it or it is done. */
  claimNotification(id: string, now: number, leaseUntil: number): Promise<boolean>
  notificationSent(id: string, now: number): Promise<void>
  /** Records a failed attempt; the notification is due again from `retryAt`. */
  notificationFailed(id: string, error: string, retryAt: number): Promise<void>
  giveUpNotification(id: string, reason: string, now: number): Promise<void>
  /** Gives up the undelivered notifications created before `before`; returns how many. */
  /** Gives up notifications queued before `before` and not sent; one a silence holds that was never attempted waits for the silence's end. */
  giveUpNotificationsBefore(before: number, now: number): Promise<number>
  /** The addresses alert mails go to: the organization's users who verified theirs. */
  alertRecipients(orgId: string): Promise<string[]>
  getWebhook(orgId: string): Promise<Webhook | undefined>
  /** Sets the URL; a new webhook gets `newSecret` (`created` tells which happened). */
  putWebhook(
    orgId: string,
    url: string,
    newSecret: string,
    now: number,
  ): Promise<{
    webhook: Webhook
    created: boolean
  }>
  deleteWebhook(orgId: string): Promise<boolean>
  /** Records the outcome of a delivery: `error` null for a success. */
  recordWebhookResult(orgId: string, now: number, error: string | null): Promise<void>
}

/** Reads and writes of this part, for the monitor and the routes. */
export function monitorStore(driver: SqlDriver): MonitorStore {
  return {
    ...alertReads(driver),
    ...alertWrites(driver),
    /** Databases that sent data (or were registered) since `since`, with their organization's verification. */
    async monitoredDatabases(since: number): Promise<MonitoredDatabase[]> {
      // Least recently diagnosed first: a pass cut short by time leaves the freshest ones for later.
      // A database whose agent keeps reporting it down is monitored however old its last data.
      const rows = await driver.all<{
        id: string
        org_id: string
        verified: unknown
        evaluated_at: unknown
        state_since: unknown
      }>(
        `SELECT d.id, d.org_id, o.verified, h.evaluated_at, a.since AS state_since FROM databases d JOIN organizations o ON o.id = d.org_id
         LEFT JOIN database_health h ON h.database_id = d.id
         LEFT JOIN database_availability a ON a.database_id = d.id
         WHERE COALESCE(d.last_seen_at, d.created_at) >= $1 OR a.heard_at >= $1 ORDER BY COALESCE(h.evaluated_at, 0), d.id`,
        [since],
      )
      return rows.map((r) => ({
        id: r.id,
        org_id: r.org_id,
        org_verified: Boolean(r.verified),
        evaluated_at: numOrNull(r.evaluated_at),
        state_since: numOrNull(r.state_since),
      }))
    },
    /**
     * Takes the database's evaluation for `by` until `leaseUntil`, unless another process holds it
     * (claimed_until after `now`), and, when `dueBefore` is given, only if its latest diagnosis is older
     * than that. False when not taken, or when the database was deleted meanwhile. Several `dbm serve`
     * processes on one store so split the monitor's work instead of each doing all of it.
     */
    async claimEvaluation(
      databaseId: string,
      by: string,
      now: number,
      leaseUntil: number,
      dueBefore?: number,
    ): Promise<boolean> {
      const due =
        dueBefore === undefined
          ? ''
          : ' AND (database_health.evaluated_at IS NULL OR database_health.evaluated_at < $5)'
      const changed = await driver.run(
        `INSERT INTO database_health (database_id, claimed_by, claimed_until) SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM databases WHERE id = $1)
         ON CONFLICT (database_id) DO UPDATE SET claimed_by = excluded.claimed_by, claimed_until = excluded.claimed_until
         WHERE (database_health.claimed_until <= $4 OR database_health.claimed_by = $2)${due}`,
        dueBefore === undefined ? [databaseId, by, leaseUntil, now] : [databaseId, by, leaseUntil, now, dueBefore],
      )
      return changed > 0
    },
    /** Records the diagnosis of a database evaluated by `by` and gives up its lease. */
    async recordDiagnosis(databaseId: string, by: string, summary: DiagnosisSummary, now: number): Promise<void> {
      await driver.run(
        `UPDATE database_health SET evaluated_at = $3, status = $4, score = $5, critical = $6, warning = $7, info = $8, active_queries = $9, claimed_until = 0
         WHERE database_id = $1 AND claimed_by = $2`,
        [
          databaseId,
          by,
          now,
          summary.status,
          summary.score,
          summary.findings.critical,
          summary.findings.warning,
          summary.findings.info,
          summary.active_queries,
        ],
      )
    },
    /** Gives up `by`'s lease on the database's evaluation without a diagnosis (it failed). */
    async releaseEvaluation(databaseId: string, by: string): Promise<void> {
      await driver.run('UPDATE database_health SET claimed_until = 0 WHERE database_id = $1 AND claimed_by = $2', [
        databaseId,
        by,
      ])
    },
    /**
     * Every database of the organization with its latest diagnosis and its open alerts by severity, in
     * one query (GET /metrics, at each scrape): the databases by org_id, their diagnosis by key, their
     * open alerts through alerts_database.
     */
    async organizationFigures(orgId: string): Promise<DatabaseFigures[]> {
      const rows = await driver.all<Record<string, unknown>>(
        `SELECT d.id, d.name, d.engine, d.poll_interval_seconds, d.last_seen_at, h.evaluated_at, h.score, h.critical, h.warning, h.info,
           a.critical AS alerts_critical, a.warning AS alerts_warning, a.info AS alerts_info
         FROM databases d LEFT JOIN diagnoses h ON h.database_id = d.id
         LEFT JOIN (
           SELECT al.database_id,
             SUM(CASE WHEN al.severity = 'critical' THEN 1 ELSE 0 END) AS critical,
             SUM(CASE WHEN al.severity = 'warning' THEN 1 ELSE 0 END) AS warning,
             SUM(CASE WHEN al.severity = 'info' THEN 1 ELSE 0 END) AS info
           FROM alerts al JOIN databases ad ON ad.id = al.database_id
           WHERE ad.org_id = $1 AND al.resolved_at IS NULL GROUP BY al.database_id
         ) a ON a.database_id = d.id
         WHERE d.org_id = $1 ORDER BY d.name, d.id`,
        [orgId],
      )
      return rows.map((r) => {
        const evaluated = r.evaluated_at !== null && r.evaluated_at !== undefined
        return {
          id: String(r.id),
          name: String(r.name),
          engine: String(r.engine),
          poll_interval_seconds: num(r.poll_interval_seconds),
          last_seen_at: numOrNull(r.last_seen_at),
          score: evaluated ? num(r.score) : null,
          findings: evaluated ? { critical: num(r.critical), warning: num(r.warning), info: num(r.info) } : null,
          open_alerts: {
            critical: num(r.alerts_critical ?? 0),
            warning: num(r.alerts_warning ?? 0),
            info: num(r.alerts_info ?? 0),
          },
        }
      })
    },
    /** Opens or updates a recommendation per finding key and resolves the open ones whose key is gone (unless their rule failed). */
    syncRecommendations: (databaseId: string, findings: FindingRecord[], failedRules: string[], now: number) =>
      syncRecommendations(driver, databaseId, findings, failedRules, now),
    async listRecommendations(databaseId: string, status: RecordStatus, limit: number): Promise<Recommendation[]> {
      const rows = await driver.all(
        `SELECT * FROM recommendations WHERE database_id = $1 ${STATUS_SQL[status]} ${ORDER_SQL} LIMIT $2`,
        [databaseId, limit],
      )
      return rows.map(toRecommendation)
    },

    // ---- notifications ----
    /** Notifications due at `now`, oldest first (so an alert's opening goes out before its resolution). */
    pendingNotifications: (now: number, limit: number) => pendingNotifications(driver, now, limit),
    /** Takes a due notification for this process until `leaseUntil`; false when another took it or it is done. */
    async claimNotification(id: string, now: number, leaseUntil: number): Promise<boolean> {
      const changed = await driver.run(
        'UPDATE alert_notifications SET next_attempt_at = $1 WHERE id = $2 AND sent_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= $3',
        [leaseUntil, id, now],
      )
      return changed > 0
    },
    async notificationSent(id: string, now: number): Promise<void> {
      await driver.run(
        'UPDATE alert_notifications SET sent_at = $1, attempts = attempts + 1, last_error = NULL WHERE id = $2',
        [now, id],
      )
    },
    /** Records a failed attempt; the notification is due again from `retryAt`. */
    async notificationFailed(id: string, error: string, retryAt: number): Promise<void> {
      await driver.run(
        'UPDATE alert_notifications SET attempts = attempts + 1, last_error = $1, next_attempt_at = $2 WHERE id = $3',
        [error, retryAt, id],
      )
    },
    async giveUpNotification(id: string, reason: string, now: number): Promise<void> {
      await driver.run(
        'UPDATE alert_notifications SET gave_up_at = $1, last_error = COALESCE(last_error, $2) WHERE id = $3',
        [now, reason, id],
      )
    },
    /** Gives up the undelivered notifications created before `before`; returns how many. */
    /** Gives up notifications queued before `before` and not sent; one a silence holds that was never attempted waits for the silence's end. */
    async giveUpNotificationsBefore(before: number, now: number): Promise<number> {
      return driver.run(
        `UPDATE alert_notifications SET gave_up_at = $1 WHERE sent_at IS NULL AND gave_up_at IS NULL AND created_at < $2 AND (silenced_by IS NULL OR attempts > 0)`,
        [now, before],
      )
    },
    /** The addresses alert mails go to: the organization's users who verified theirs. */
    async alertRecipients(orgId: string): Promise<string[]> {
      const rows = await driver.all<{ email: string }>(
        'SELECT email FROM users WHERE org_id = $1 AND email_verified_at IS NOT NULL ORDER BY email',
        [orgId],
      )
      return rows.map((r) => r.email)
    },

    // ---- the organization's webhook ----
    async getWebhook(orgId: string): Promise<Webhook | undefined> {
      const r = await driver.get('SELECT * FROM organization_webhooks WHERE org_id = $1', [orgId])
      return r ? toWebhook(r) : undefined
    },
    /** Sets the URL; a new webhook gets `newSecret` (`created` tells which happened). */
    async putWebhook(
      orgId: string,
      url: string,
      newSecret: string,
      now: number,
    ): Promise<{ webhook: Webhook; created: boolean }> {
      return driver.transaction(async (tx) => {
        const changed = await tx.run('UPDATE organization_webhooks SET url = $1, updated_at = $2 WHERE org_id = $3', [
          url,
          now,
          orgId,
        ])
        if (changed === 0) {
          await tx.run(
            'INSERT INTO organization_webhooks (org_id, url, secret, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)',
            [orgId, url, newSecret, now],
          )
        }
        const row = await tx.get('SELECT * FROM organization_webhooks WHERE org_id = $1', [orgId])
        return { webhook: toWebhook(row!), created: changed === 0 }
      }, `dbm:webhook:${orgId}`)
    },
    async deleteWebhook(orgId: string): Promise<boolean> {
      return (await driver.run('DELETE FROM organization_webhooks WHERE org_id = $1', [orgId])) > 0
    },
    /** Records the outcome of a delivery: `error` null for a success. */
    async recordWebhookResult(orgId: string, now: number, error: string | null): Promise<void> {
      if (error === null)
        await driver.run('UPDATE organization_webhooks SET last_success_at = $1 WHERE org_id = $2', [now, orgId])
      else
        await driver.run('UPDATE organization_webhooks SET last_failure_at = $1, last_error = $2 WHERE org_id = $3', [
          now,
          error,
          orgId,
        ])
    },
  }
}
/** The store's `monitor` member: the monitor's state with the alerts it opens and resolves (alerts/). */
export type MonitorStore = MonitorState & AlertReads & AlertWrites
