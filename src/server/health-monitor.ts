// The health monitor that `dbm serve` runs. Each database that sent data (or was registered) in the last
// 7 days is diagnosed about once a minute, and from the findings:
//   - recommendations (verified organizations): one per finding key, updated while the finding stays,
//     resolved when it goes, with the finding's fix commands as remediation_sql;
//   - alerts: one per cause with a critical finding (the doctor groups findings by cause: one session,
//     index, statement, table...; doctor/grouping.ts), opened when the cause appears, kept with its
//     findings (the consequences) while it stays, and resolved when it goes;
//   - notifications, once per alert state change: a mail to each of the organization's users who
//     verified their address, and a POST of signed JSON to the organization's webhook, retried at each
//     evaluation until the receiver answers 2xx (for up to a day). The POST goes only to addresses the
//     server's webhook policy allows (webhook-target.ts: no internal ones unless DBM_WEBHOOK_ALLOW_PRIVATE).
//     Each enabled alert destination of the organization (alerts/destinations.ts: email, webhook, Slack,
//     Teams, PagerDuty, Opsgenie, Alertmanager) is one more channel, delivered and retried the same way;
//     Alertmanagers are also told again of the organization's open alerts once a minute, as Prometheus
//     re-sends firing alerts (else they resolve them after their resolve_timeout).
//   - routing, repeats and silences (alerts/routing.ts): an alert's opening is queued for the destinations
//     its organization's routes choose (every enabled one when it has none); an alert still open is
//     queued again (`repeated`) for a route's destinations once its repeat interval has passed since the
//     last send there; a notification of an alert that a silence in effect matches is held back (not
//     sent, looked at again within a minute or when the silence ends) and goes once the silence is over,
//     if the alert is still open. Alertmanagers are told again only of the open alerts routed to them
//     and not silenced.
//   - the diagnosis's summary (status, score, findings by severity) in database_health, which the
//     database list reads for every database at once.
// Every ten minutes it applies retention and compacts minute buckets (sql-retention.ts).
//
// It shares the event loop with the API, so no part of it holds the loop for long: it wakes every few
// seconds (TICK_MS) and diagnoses the databases that are due (last diagnosed a minute ago or more),
// least recently diagnosed first, one at a time, letting the loop serve requests between databases and
// between the rules of one diagnosis; retention does the same between databases. Each database's
// evaluation is leased in database_health, so several `dbm serve` processes on one PostgreSQL store
// share the work instead of each doing all of it. Once a minute it logs what it did (`health monitor`:
// databases diagnosed, time spent, and the oldest diagnosis, which says whether it keeps up).
// Everything takes the time as a parameter: tests call runOnce(now) and runRetention(now) directly.
import type { Deps } from './context.ts'
import { breathe, diagnose } from './doctor/index.ts'
import type { FindingGroup } from './doctor/grouping.ts'
import type { Finding } from './doctor/types.ts'
import { healthMonitorDefaults, logEventLimits, retentionLimits, sessionHistoryLimits } from './limits.ts'
import { serverMetrics } from './metrics.ts'
import type { AlertInput, DiagnosisSummary, FindingRecord, MonitoredDatabase, NotificationChannel, PendingNotification, Webhook } from './store/monitor/evaluations.ts'
import { isStoreUnreachable } from './store/reachability.ts'
import { minuteFloor } from './store/window.ts'
import { type PostAttempt, type PostOptions, postJson, targetOrigin } from './alerts/post.ts'
import { alertMail, webhookPayload, webhookSignature } from './alerts/messages.ts'
import { deliverTo, destinationUrl, messageOf, refreshAlertmanager } from './alerts/destinations.ts'
import { destinationChannel } from './store/alerts/destinations.ts'
import { type AlertRoute, type RoutableDatabase, type Silence, destinationsFor, silenceOf } from './alerts/routing.ts'

export { alertMail, webhookPayload, webhookSignature }

const HOUR = 3_600_000
const DAY = 24 * HOUR
const webhookOutcomes = { delivered: serverMetrics.webhookDeliveries.labels('delivered'), failed: serverMetrics.webhookDeliveries.labels('failed') }
const diagnosisOutcomes = { ok: serverMetrics.healthMonitorDiagnoses.labels('ok'), failed: serverMetrics.healthMonitorDiagnoses.labels('failed') }
const retentionKinds = { telemetry: serverMetrics.retentionDeletedRows.labels('telemetry'), batch_ids: serverMetrics.retentionDeletedRows.labels('batch_ids') }

/** Notifications delivered per evaluation at most (the rest wait for the next one). */
const NOTIFICATIONS_PER_RUN = 500
/** How often the scheduled monitor wakes to diagnose the databases that are due (at most evaluateEveryMs). */
const TICK_MS = 5_000
/** A process diagnosing a database holds it this long at most; another process may take it after. */
const EVALUATION_LEASE_MS = 60_000

export interface HealthMonitorOptions {
  /** Telemetry retention of verified organizations (DBM_RETENTION_DAYS). */
  retentionDays: number
  evaluateEveryMs?: number
  /** How often the schedule wakes to diagnose the databases due (default TICK_MS, at most evaluateEveryMs). */
  tickMs?: number
  retentionEveryMs?: number
  webhookTimeoutMs?: number
}

export interface EvaluationSummary {
  /** Databases diagnosed. */
  databases: number
  /** Milliseconds spent diagnosing them (the pass's duration, from its first database to its last). */
  duration_ms: number
  /** Databases whose evaluation failed (logged). */
  failed: number
  recommendations: { opened: number; resolved: number }
  alerts: { opened: number; resolved: number }
  notifications: { sent: number; failed: number; given_up: number }
}

export interface RetentionSummary {
  databases: number
  rows_deleted: number
  batch_ids_deleted: number
}

export interface HealthMonitor {
  /** One evaluation of every monitored database at `now`, then the due notifications. */
  runOnce(now?: number): Promise<EvaluationSummary>
  /** One evaluation of the monitored databases last diagnosed before `dueBefore` (what a scheduled tick does). */
  runDue(now: number, dueBefore: number): Promise<EvaluationSummary>
  /** Retention and compaction at `now`. */
  runRetention(now?: number): Promise<RetentionSummary>
  /** Runs both on their schedule (evaluation first, retention with the first evaluation and then every retentionEveryMs). */
  start(): void
  /** Stops the schedule and waits for a pass in progress. */
  stop(): Promise<void>
}

/** Where a webhook goes, for logs: the origin only (paths and query strings may carry tokens). */
export const webhookTarget = targetOrigin

function toRecord(f: Finding): FindingRecord {
  return {
    key: f.key,
    rule: f.rule,
    severity: f.severity,
    category: f.category,
    title: f.title,
    detail: f.detail,
    recommendation: f.recommendation,
    remediation_sql: f.how_to_fix.join('\n'),
    cause: f.cause,
  }
}

/** The alert of a cause with a critical finding: the lead's title and detail, and every finding of the cause. */
function causeAlert(g: FindingGroup, byKey: Map<string, Finding>): AlertInput {
  const lead = byKey.get(g.lead)!
  return {
    key: g.key,
    rule: lead.rule,
    severity: g.severity,
    title: g.title,
    detail: lead.detail,
    consequences: g.findings.map((k) => byKey.get(k)!).map((f) => ({ key: f.key, rule: f.rule, severity: f.severity, title: f.title })),
  }
}

/** The outcome of one POST to a webhook: `error` is null on a 2xx answer. */
export type WebhookAttempt = PostAttempt
export type WebhookSendOptions = PostOptions

/**
 * POSTs `body` to the webhook, signed with its secret, without following redirects, within `timeoutMs`,
 * to an address the policy allows (alerts/post.ts).
 */
export async function postWebhook(webhook: Pick<Webhook, 'url' | 'secret'>, event: string, deliveryId: string, body: string, options: WebhookSendOptions): Promise<WebhookAttempt> {
  const attempt = await postJson(webhook.url, body, { 'x-dbm-event': event, 'x-dbm-delivery': deliveryId, 'x-dbm-signature': webhookSignature(webhook.secret, body) }, options)
  webhookOutcomes[attempt.error === null ? 'delivered' : 'failed'].inc()
  return attempt
}

export function createHealthMonitor(deps: Deps, options: HealthMonitorOptions): HealthMonitor {
  const { store, log } = deps
  const health = store.monitor
  const evaluateEveryMs = options.evaluateEveryMs ?? healthMonitorDefaults.evaluateEveryMs
  const retentionEveryMs = options.retentionEveryMs ?? healthMonitorDefaults.retentionEveryMs
  const webhookTimeoutMs = options.webhookTimeoutMs ?? healthMonitorDefaults.webhookTimeoutMs

  /** Logs a failed pass, unless the store could not be reached: the outage itself is logged once by the app. */
  function failed(what: string, error: unknown, fields: Record<string, unknown> = {}) {
    if (!isStoreUnreachable(error)) log.error(what, { ...fields, cause: (error as Error).message })
  }

  /** POSTs the notification; null on a 2xx answer, else why not. */
  async function post(webhook: Webhook, n: PendingNotification, now: number): Promise<string | null> {
    const body = JSON.stringify(webhookPayload(n, deps.publicUrl, now))
    return (await postWebhook(webhook, `alert.${n.event}`, n.id, body, { timeoutMs: webhookTimeoutMs, policy: deps.webhooks })).error
  }

  /** Delivers a notification to its alert destination (claimed already) and records the outcome. */
  async function deliverToDestination(n: PendingNotification, now: number): Promise<'sent' | 'failed' | 'given_up'> {
    const id = n.channel.slice('destination:'.length)
    const destination = await store.alertDestinations.getDestination(n.org_id, id)
    if (!destination || !destination.enabled) {
      await health.giveUpNotification(n.id, destination ? 'destination disabled' : 'destination deleted', now)
      return 'given_up'
    }
    const error = await deliverTo(destination, messageOf(n, deps.publicUrl, now), { mailer: deps.mailer, publicUrl: deps.publicUrl, policy: deps.webhooks, timeoutMs: webhookTimeoutMs })
    await store.alertDestinations.recordDelivery(destination.id, now, error)
    serverMetrics.alertDestinationDeliveries.labels(destination.kind, error === null ? 'delivered' : 'failed').inc()
    // The destination's id, kind and origin only: its URL's path and its secret are never logged.
    const url = destinationUrl(destination)
    const fields = { org: n.org_id, database: n.database.id, alert: n.alert.key, event: n.event, destination: destination.id, kind: destination.kind, ...(url ? { target: targetOrigin(url) } : {}) }
    if (error === null) {
      await health.notificationSent(n.id, now)
      log.info('alert destination delivered', fields)
      return 'sent'
    }
    // Due again at once: the next evaluation retries it.
    await health.notificationFailed(n.id, error, now)
    log.warn('alert destination delivery failed', { ...fields, attempt: n.attempts + 1, cause: error })
    return 'failed'
  }

  /** What routing looks at of an organization during one pass: its routes, enabled destinations and silences in effect. */
  interface OrgRouting {
    routes: AlertRoute[]
    enabled: string[]
    silences: Silence[]
  }
  async function orgRouting(orgId: string, now: number): Promise<OrgRouting> {
    return {
      routes: await store.alertRouting.listRoutes(orgId),
      enabled: (await store.alertDestinations.enabledDestinations(orgId)).map((d) => d.id),
      silences: await store.alertRouting.silencesInEffect(orgId, now),
    }
  }
  /** A database as routing and silences see it (its id and tags), through a per-pass cache; a deleted one has no tags. */
  function databaseTags(cache: Map<string, Promise<RoutableDatabase>>, orgId: string, databaseId: string): Promise<RoutableDatabase> {
    let found = cache.get(databaseId)
    if (!found) {
      found = store.getDatabase(orgId, databaseId).then((d) => ({ id: databaseId, tags: d?.tags ?? {} }))
      cache.set(databaseId, found)
    }
    return found
  }

  /** When each organization's Alertmanagers were last told of its open alerts. */
  const alertmanagerRefreshed = new Map<string, number>()

  /** Once a minute per organization, tells its Alertmanagers again of its open alerts (alerts/destinations.ts). */
  async function refreshAlertmanagers(now: number) {
    const deliveryDeps = { mailer: deps.mailer, publicUrl: deps.publicUrl, policy: deps.webhooks, timeoutMs: webhookTimeoutMs }
    for (const orgId of await store.alertDestinations.organizationsWith('alertmanager')) {
      // First seen: a minute from now (its alerts' openings are notifications of their own).
      const last = alertmanagerRefreshed.get(orgId)
      if (last === undefined) alertmanagerRefreshed.set(orgId, now)
      if (last === undefined || now - last < evaluateEveryMs) continue
      alertmanagerRefreshed.set(orgId, now)
      const open = await store.alertDestinations.openAlerts(orgId, NOTIFICATIONS_PER_RUN)
      if (open.length === 0) continue
      const routing = await orgRouting(orgId, now)
      const tags = new Map<string, Promise<RoutableDatabase>>()
      for (const d of await store.alertDestinations.enabledDestinations(orgId)) {
        if (d.kind !== 'alertmanager') continue
        // Only the alerts routed to it and not silenced: a silenced alert is left to resolve there.
        const mine: typeof open = []
        for (const o of open) {
          const db = await databaseTags(tags, orgId, o.database.id)
          if (silenceOf(routing.silences, o.alert, db, now) || !destinationsFor(routing.routes, routing.enabled, o.alert, db).has(d.id)) continue
          mine.push(o)
        }
        if (mine.length === 0) continue
        const error = await refreshAlertmanager(d, mine, orgId, deliveryDeps, now)
        serverMetrics.alertDestinationDeliveries.labels(d.kind, error === null ? 'delivered' : 'failed').inc()
        // An alert it heard of only here (routed to it since it opened) is sent its resolution too.
        if (error === null) await store.alertDestinations.recordRefreshedOpenings(d.id, mine.map((o) => o.alert.id), now)
        if (error !== null) log.warn('alertmanager refresh failed', { org: orgId, destination: d.id, target: targetOrigin(destinationUrl(d) ?? ''), alerts: open.length, cause: error })
      }
    }
  }

  async function deliver(now: number): Promise<EvaluationSummary['notifications']> {
    const result = { sent: 0, failed: 0, given_up: 0 }
    result.given_up = await health.giveUpNotificationsBefore(now - healthMonitorDefaults.notificationMaxAgeMs, now)
    if (result.given_up > 0) log.warn('alert notifications given up', { count: result.given_up, after: '24h' })
    const pending = await health.pendingNotifications(now, NOTIFICATIONS_PER_RUN)
    const silencesByOrg = new Map<string, Promise<Silence[]>>()
    const tags = new Map<string, Promise<RoutableDatabase>>()
    /** The silence in effect that holds this notification's alert back, if one does. */
    const silenceFor = async (n: PendingNotification) => {
      let silences = silencesByOrg.get(n.org_id)
      if (!silences) silencesByOrg.set(n.org_id, (silences = store.alertRouting.silencesInEffect(n.org_id, now)))
      const inEffect = await silences
      return inEffect.length === 0 ? undefined : silenceOf(inEffect, n.alert, await databaseTags(tags, n.org_id, n.database.id), now)
    }
    /** Organizations whose webhook (and destination channels) that failed in this run: their later notifications wait, so they arrive in order. */
    const webhookDown = new Set<string>()
    for (const n of pending) {
      if ((n.channel === 'webhook' && webhookDown.has(n.org_id)) || webhookDown.has(n.channel)) continue
      const fields = { org: n.org_id, database: n.database.id, alert: n.alert.key, event: n.event }
      if (n.event !== 'resolved') {
        const silence = await silenceFor(n)
        if (n.alert.resolved_at !== null && (silence || n.silenced_by)) {
          // Opened and resolved while silenced: its receivers never hear of it.
          await health.giveUpNotification(n.id, 'resolved while silenced', now)
          result.given_up++
          continue
        }
        if (silence) {
          // Looked at again when the silence ends, or within a minute (it may be expired early).
          if (await store.alertRouting.holdNotification(n.id, silence.id, now, Math.min(silence.ends_at, now + evaluateEveryMs))) {
            log.info('alert notification held by a silence', { ...fields, channel: n.channel.startsWith('destination:') ? 'destination' : n.channel, silence: silence.id })
          }
          continue
        }
      }
      if (!(await health.claimNotification(n.id, now, now + healthMonitorDefaults.deliveryLeaseMs))) continue
      if (n.channel === 'email') {
        const recipients = await health.alertRecipients(n.org_id)
        const mail = alertMail(n, deps.publicUrl)
        for (const to of recipients) deps.mailer.send({ to, ...mail })
        await health.notificationSent(n.id, now)
        result.sent++
        continue
      }
      if (n.channel.startsWith('destination:')) {
        const outcome = await deliverToDestination(n, now)
        if (outcome === 'failed') webhookDown.add(n.channel)
        result[outcome]++
        continue
      }
      const webhook = await health.getWebhook(n.org_id)
      if (!webhook) {
        await health.giveUpNotification(n.id, 'no webhook configured', now)
        result.given_up++
        continue
      }
      const error = await post(webhook, n, now)
      await health.recordWebhookResult(n.org_id, now, error)
      if (error === null) {
        await health.notificationSent(n.id, now)
        log.info('webhook delivered', { ...fields, target: webhookTarget(webhook.url) })
        result.sent++
      } else {
        // Due again at once: the next evaluation retries it.
        await health.notificationFailed(n.id, error, now)
        log.warn('webhook delivery failed', { ...fields, target: webhookTarget(webhook.url), attempt: n.attempts + 1, cause: error })
        webhookDown.add(n.org_id)
        result.failed++
      }
    }
    return result
  }

  /** This monitor's name in database_health's leases. */
  const instance = Bun.randomUUIDv7()
  /** How old the least recently diagnosed database's diagnosis was at the latest pass. */
  let oldestDiagnosisMs = 0

  /**
   * Queues a repeat of each open, unsilenced alert of the database to each destination its routes repeat
   * to, when the interval has passed since its last send there (the store decides: sql-alert-routing.ts).
   */
  async function queueRepeats(databaseId: string, routing: OrgRouting, target: RoutableDatabase, now: number) {
    for (const a of await health.listAlerts(databaseId, 'open', NOTIFICATIONS_PER_RUN)) {
      if (silenceOf(routing.silences, a, target, now)) continue
      for (const [id, repeatMs] of destinationsFor(routing.routes, routing.enabled, a, target)) {
        if (repeatMs === null) continue
        if (await store.alertRouting.queueRepeat(a.id, destinationChannel(id), now - repeatMs, now)) log.info('alert repeat queued', { database: databaseId, alert: a.key, destination: id })
      }
    }
  }

  /** Diagnoses one database (leased to this monitor) and applies what it found. */
  async function evaluate(monitored: MonitoredDatabase, now: number, summary: EvaluationSummary, channelsByOrg: Map<string, NotificationChannel[]>, routingByOrg: Map<string, OrgRouting>) {
    const db = await store.getDatabase(monitored.org_id, monitored.id)
    if (!db) return // deleted meanwhile
    summary.databases++
    // In the diagnosis worker when `dbm serve` runs one (another core), else here between turns of the loop.
    const diagnosis = deps.diagnoser?.running ? await deps.diagnoser.diagnose(db, now) : await diagnose(deps, db, now, { between: breathe })
    const records = diagnosis.findings.map(toRecord)
    if (monitored.org_verified) {
      const r = await health.syncRecommendations(db.id, records, diagnosis.failed_rules, now)
      summary.recommendations.opened += r.opened
      summary.recommendations.resolved += r.resolved
    }
    let channels = channelsByOrg.get(db.org_id)
    if (!channels) {
      // Mail goes to users who verified their address, so only verified organizations have any.
      channels = [
        ...(monitored.org_verified ? ['email' as const] : []),
        ...((await health.getWebhook(db.org_id)) ? ['webhook' as const] : []),
      ]
      channelsByOrg.set(db.org_id, channels)
    }
    let routing = routingByOrg.get(db.org_id)
    if (!routing) routingByOrg.set(db.org_id, (routing = await orgRouting(db.org_id, now)))
    const target: RoutableDatabase = { id: db.id, tags: db.tags }
    // The users' mail and the webhook, and the destinations the organization's routes choose for the cause.
    const channelsFor = (cause: AlertInput): NotificationChannel[] => [...channels, ...[...destinationsFor(routing.routes, routing.enabled, cause, target).keys()].map(destinationChannel)]
    const byKey = new Map(diagnosis.findings.map((f) => [f.key, f]))
    const critical = diagnosis.groups.filter((g) => g.severity === 'critical').map((g) => causeAlert(g, byKey))
    const changes = await health.syncAlerts(db.id, critical, diagnosis.failed_rules, channelsFor, now)
    if (routing.routes.some((r) => r.repeat_interval_s !== null)) await queueRepeats(db.id, routing, target, now)
    for (const key of changes.opened) log.info('alert opened', { database: db.id, alert: key })
    for (const key of changes.resolved) log.info('alert resolved', { database: db.id, alert: key })
    summary.alerts.opened += changes.opened.length
    summary.alerts.resolved += changes.resolved.length
    const counts = diagnosis.metrics_summary.findings as DiagnosisSummary['findings']
    const active = diagnosis.metrics_summary.active_queries
    await health.recordDiagnosis(db.id, instance, { status: diagnosis.status, score: diagnosis.score, findings: counts, active_queries: typeof active === 'number' ? active : null }, now)
  }

  /**
   * Diagnoses the monitored databases this process can lease, least recently diagnosed first, with the
   * event loop free between them; with `dueBefore`, only those last diagnosed before it. Then delivers
   * the notifications that are due.
   */
  async function evaluateDatabases(now: number, dueBefore?: number): Promise<EvaluationSummary> {
    const summary: EvaluationSummary = {
      databases: 0,
      duration_ms: 0,
      failed: 0,
      recommendations: { opened: 0, resolved: 0 },
      alerts: { opened: 0, resolved: 0 },
      notifications: { sent: 0, failed: 0, given_up: 0 },
    }
    const started = performance.now()
    const channelsByOrg = new Map<string, NotificationChannel[]>()
    const routingByOrg = new Map<string, OrgRouting>()
    const monitored = await health.monitoredDatabases(now - healthMonitorDefaults.silentDatabaseMs)
    // The list is least recently diagnosed first: the first one's age is the oldest diagnosis's.
    const oldest = monitored[0]?.evaluated_at
    oldestDiagnosisMs = oldest === null || oldest === undefined ? 0 : Math.max(0, now - oldest)
    for (const m of monitored) {
      // A database that went down or came back since its diagnosis is due at once: its alert opens (or
      // resolves) within a tick of the agent's report, not at the next minute's pass. Ingest keeps
      // state_since at or before the server's clock when the report came, so a forged or fast clock cannot
      // keep it "changed"; and not within changedFloorMs of the previous diagnosis, so a flapping database
      // is diagnosed at most twice a minute.
      const changed =
        m.state_since !== null && m.evaluated_at !== null && m.state_since > m.evaluated_at && now - m.evaluated_at >= healthMonitorDefaults.changedFloorMs
      if (dueBefore !== undefined && m.evaluated_at !== null && m.evaluated_at >= dueBefore && !changed) continue
      let claimed = false
      try {
        claimed = await health.claimEvaluation(m.id, instance, now, now + EVALUATION_LEASE_MS, changed ? undefined : dueBefore)
        if (claimed) {
          await evaluate(m, now, summary, channelsByOrg, routingByOrg)
          diagnosisOutcomes.ok.inc()
        }
      } catch (e) {
        summary.failed++
        diagnosisOutcomes.failed.inc()
        failed('health evaluation failed', e, { database: m.id })
        // Another process (or the next pass) may try it at once.
        if (claimed) await health.releaseEvaluation(m.id, instance).catch(() => {})
      }
      if (claimed) await breathe()
    }
    summary.duration_ms = Math.round(performance.now() - started)
    summary.notifications = await deliver(now)
    await refreshAlertmanagers(now).catch((e) => failed('alertmanager refresh failed', e))
    serverMetrics.healthMonitorRunDuration.labels().since(started)
    if (log.enabled('debug')) {
      log.debug('health evaluation', {
        databases: summary.databases,
        duration_ms: summary.duration_ms,
        failed: summary.failed,
        alerts_opened: summary.alerts.opened,
        alerts_resolved: summary.alerts.resolved,
        notifications_sent: summary.notifications.sent,
      })
    }
    return summary
  }

  /** Diagnoses every monitored database at `now` (but those another process holds), then delivers due notifications. */
  function runOnce(now = deps.clock()): Promise<EvaluationSummary> {
    return evaluateDatabases(now)
  }

  async function runRetention(now = deps.clock()): Promise<RetentionSummary> {
    const summary: RetentionSummary = { databases: 0, rows_deleted: 0, batch_ids_deleted: 0 }
    const minutesBefore = minuteFloor(now)
    const batch = retentionLimits.deleteBatchRows
    for (const db of await store.retention.databases()) {
      const keepMs = db.org_verified ? options.retentionDays * DAY : retentionLimits.unverifiedMs
      try {
        // Statement statistics closed over an hour ago are rolled up (ingest rolls up an active database's
        // itself; an agent's clock or buffer up to an hour behind then never lands before the marks).
        const deleted = await store.retention.sweepDatabase(
          db.id,
          { before: now - keepMs, minutesBefore, rollUpTo: now - HOUR, everyPollBefore: now - sessionHistoryLimits.everyPollMs, logEntriesBefore: now - logEventLimits.entriesMs },
          batch,
        )
        summary.rows_deleted += deleted
        retentionKinds.telemetry.inc(deleted)
        summary.databases++
      } catch (e) {
        failed('retention failed', e, { database: db.id })
      }
      await breathe()
    }
    summary.batch_ids_deleted = await store.retention.sweepBatchIds(now - retentionLimits.batchIdsMs, batch)
    retentionKinds.batch_ids.inc(summary.batch_ids_deleted)
    if (summary.rows_deleted > 0) log.info('retention', { databases: summary.databases, rows_deleted: summary.rows_deleted })
    return summary
  }

  let timer: ReturnType<typeof setInterval> | undefined
  let running: Promise<void> | undefined
  let lastRetention = Number.NEGATIVE_INFINITY
  const tickMs = Math.min(options.tickMs ?? TICK_MS, evaluateEveryMs)
  /** What the scheduled ticks did since the last `health monitor` log line. */
  let period = { since: deps.clock(), databases: 0, busy_ms: 0, failed: 0, oldest_ms: 0 }

  const tick = async () => {
    const now = deps.clock()
    try {
      // Due: last diagnosed at least a minute ago, less one tick (so each is diagnosed every 55 to 60 s).
      const done = await evaluateDatabases(now, now - evaluateEveryMs + tickMs)
      period.oldest_ms = Math.max(period.oldest_ms, oldestDiagnosisMs)
      period.databases += done.databases
      period.busy_ms += done.duration_ms
      period.failed += done.failed
    } catch (e) {
      failed('health evaluation failed', e)
    }
    if (now - period.since >= evaluateEveryMs) {
      // The oldest diagnosis seen at a tick: above evaluateEveryMs + a tick, the monitor is falling behind.
      if (period.databases > 0) {
        log.info('health monitor', { diagnoses: period.databases, busy_ms: period.busy_ms, failed: period.failed, oldest_diagnosis_s: Math.round(period.oldest_ms / 1000) })
      }
      period = { since: now, databases: 0, busy_ms: 0, failed: 0, oldest_ms: 0 }
    }
    if (now - lastRetention < retentionEveryMs) return
    lastRetention = now
    try {
      await runRetention(now)
    } catch (e) {
      failed('retention failed', e)
    }
  }

  return {
    runOnce,
    runDue: evaluateDatabases,
    runRetention,
    start() {
      if (timer) return
      timer = setInterval(() => {
        if (running) return // the previous tick is still going: this one is skipped
        running = tick().finally(() => {
          running = undefined
        })
      }, tickMs)
    },
    async stop() {
      if (timer) clearInterval(timer)
      timer = undefined
      await running
    },
  }
}
