// The monitor's delivery of alert notifications: the outbox rows that alert state changes queued (store
// monitor/evaluations.ts) are claimed one by one and sent, to the organization's users by mail, to its webhook as
// signed JSON, and to each alert destination its routes chose (alerts/destinations.ts). A failed send is
// due again at the next pass, for up to a day; a webhook or destination that failed in a pass gets no
// more of that pass's notifications, so they arrive in order. A silence in effect holds a notification
// back until it ends (alerts/routing.ts). Alertmanagers are also told again of their open alerts once a
// minute, as Prometheus re-sends firing alerts. This module decides when and to whom; alerts/ says what
// a message holds and how each kind of destination takes it.
import type { Deps } from '../context.ts'
import { healthMonitorDefaults } from '../limits.ts'
import { serverMetrics } from '../metrics.ts'
import type { PendingNotification, Webhook } from '../store/monitor/evaluations.ts'
import { type PostAttempt, type PostOptions, postJson, targetOrigin } from '../alerts/post.ts'
import { alertMail, webhookPayload, webhookSignature } from '../alerts/messages.ts'
import { deliverTo, destinationUrl, messageOf, refreshAlertmanager } from '../alerts/destinations.ts'
import { type AlertRoute, type RoutableDatabase, type Silence, destinationsFor, silenceOf } from '../alerts/routing.ts'

/** Notifications delivered per pass at most (the rest wait for the next one). */
export const NOTIFICATIONS_PER_RUN = 500

const webhookOutcomes = {
  delivered: serverMetrics.webhookDeliveries.labels('delivered'),
  failed: serverMetrics.webhookDeliveries.labels('failed'),
}

/** What one pass's deliveries came to. */
export interface DeliverySummary {
  sent: number
  failed: number
  given_up: number
}

/** Where a webhook goes, for logs: the origin only (paths and query strings may carry tokens). */
export const webhookTarget = targetOrigin

/** The outcome of one POST to a webhook: `error` is null on a 2xx answer. */
export type WebhookAttempt = PostAttempt
export type WebhookSendOptions = PostOptions

/**
 * POSTs `body` to the webhook, signed with its secret, without following redirects, within `timeoutMs`,
 * to an address the policy allows (alerts/post.ts).
 */
export async function postWebhook(
  webhook: Pick<Webhook, 'url' | 'secret'>,
  event: string,
  deliveryId: string,
  body: string,
  options: WebhookSendOptions,
): Promise<WebhookAttempt> {
  const attempt = await postJson(
    webhook.url,
    body,
    { 'x-dbm-event': event, 'x-dbm-delivery': deliveryId, 'x-dbm-signature': webhookSignature(webhook.secret, body) },
    options,
  )
  webhookOutcomes[attempt.error === null ? 'delivered' : 'failed'].inc()
  return attempt
}

/** What routing looks at of an organization during one pass: its routes, enabled destinations and silences in effect. */
export interface OrgRouting {
  routes: AlertRoute[]
  enabled: string[]
  silences: Silence[]
}

export async function orgRouting(store: Deps['store'], orgId: string, now: number): Promise<OrgRouting> {
  return {
    routes: await store.alertRouting.listRoutes(orgId),
    enabled: (await store.alertDestinations.enabledDestinations(orgId)).map((d) => d.id),
    silences: await store.alertRouting.silencesInEffect(orgId, now),
  }
}

export interface Notifier {
  /** Delivers the notifications that are due at `now` (at most NOTIFICATIONS_PER_RUN). */
  deliver(now: number): Promise<DeliverySummary>
  /** Once a minute per organization, tells its Alertmanagers again of its open alerts. */
  refreshAlertmanagers(now: number): Promise<void>
}

export function createNotifier(deps: Deps, options: { evaluateEveryMs: number; webhookTimeoutMs: number }): Notifier {
  const { store, log } = deps
  const health = store.monitor
  const { evaluateEveryMs, webhookTimeoutMs } = options

  /** POSTs the notification; null on a 2xx answer, else why not. */
  async function post(webhook: Webhook, n: PendingNotification, now: number): Promise<string | null> {
    const body = JSON.stringify(webhookPayload(n, deps.publicUrl, now))
    return (
      await postWebhook(webhook, `alert.${n.event}`, n.id, body, { timeoutMs: webhookTimeoutMs, policy: deps.webhooks })
    ).error
  }

  /** Delivers a notification to its alert destination (claimed already) and records the outcome. */
  async function deliverToDestination(n: PendingNotification, now: number): Promise<'sent' | 'failed' | 'given_up'> {
    const id = n.channel.slice('destination:'.length)
    const destination = await store.alertDestinations.getDestination(n.org_id, id)
    if (!destination?.enabled) {
      await health.giveUpNotification(n.id, destination ? 'destination disabled' : 'destination deleted', now)
      return 'given_up'
    }
    const error = await deliverTo(destination, messageOf(n, deps.publicUrl, now), {
      mailer: deps.mailer,
      publicUrl: deps.publicUrl,
      policy: deps.webhooks,
      timeoutMs: webhookTimeoutMs,
    })
    await store.alertDestinations.recordDelivery(destination.id, now, error)
    serverMetrics.alertDestinationDeliveries.labels(destination.kind, error === null ? 'delivered' : 'failed').inc()
    // The destination's id, kind and origin only: its URL's path and its secret are never logged.
    const url = destinationUrl(destination)
    const fields = {
      org: n.org_id,
      database: n.database.id,
      alert: n.alert.key,
      event: n.event,
      destination: destination.id,
      kind: destination.kind,
      ...(url ? { target: targetOrigin(url) } : {}),
    }
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

  /** A database as routing and silences see it (its id and tags), through a per-pass cache; a deleted one has no tags. */
  function databaseTags(
    cache: Map<string, Promise<RoutableDatabase>>,
    orgId: string,
    databaseId: string,
  ): Promise<RoutableDatabase> {
    let found = cache.get(databaseId)
    if (!found) {
      found = store.getDatabase(orgId, databaseId).then((d) => ({ id: databaseId, tags: d?.tags ?? {} }))
      cache.set(databaseId, found)
    }
    return found
  }

  /** When each organization's Alertmanagers were last told of its open alerts. */
  const alertmanagerRefreshed = new Map<string, number>()

  async function refreshAlertmanagers(now: number) {
    const deliveryDeps = {
      mailer: deps.mailer,
      publicUrl: deps.publicUrl,
      policy: deps.webhooks,
      timeoutMs: webhookTimeoutMs,
    }
    for (const orgId of await store.alertDestinations.organizationsWith('alertmanager')) {
      // First seen: a minute from now (its alerts' openings are notifications of their own).
      const last = alertmanagerRefreshed.get(orgId)
      if (last === undefined) alertmanagerRefreshed.set(orgId, now)
      if (last === undefined || now - last < evaluateEveryMs) continue
      alertmanagerRefreshed.set(orgId, now)
      const open = await store.alertDestinations.openAlerts(orgId, NOTIFICATIONS_PER_RUN)
      if (open.length === 0) continue
      const routing = await orgRouting(store, orgId, now)
      const tags = new Map<string, Promise<RoutableDatabase>>()
      for (const d of await store.alertDestinations.enabledDestinations(orgId)) {
        if (d.kind !== 'alertmanager') continue
        // Only the alerts routed to it and not silenced: a silenced alert is left to resolve there.
        const mine: typeof open = []
        for (const o of open) {
          const db = await databaseTags(tags, orgId, o.database.id)
          if (
            silenceOf(routing.silences, o.alert, db, now) ||
            !destinationsFor(routing.routes, routing.enabled, o.alert, db).has(d.id)
          )
            continue
          mine.push(o)
        }
        if (mine.length === 0) continue
        const error = await refreshAlertmanager(d, mine, orgId, deliveryDeps, now)
        serverMetrics.alertDestinationDeliveries.labels(d.kind, error === null ? 'delivered' : 'failed').inc()
        // An alert it heard of only here (routed to it since it opened) is sent its resolution too.
        if (error === null)
          await store.alertDestinations.recordRefreshedOpenings(
            d.id,
            mine.map((o) => o.alert.id),
            now,
          )
        if (error !== null)
          log.warn('alertmanager refresh failed', {
            org: orgId,
            destination: d.id,
            target: targetOrigin(destinationUrl(d) ?? ''),
            alerts: open.length,
            cause: error,
          })
      }
    }
  }

  async function deliver(now: number): Promise<DeliverySummary> {
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
      return inEffect.length === 0
        ? undefined
        : silenceOf(inEffect, n.alert, await databaseTags(tags, n.org_id, n.database.id), now)
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
          if (
            await store.alertRouting.holdNotification(
              n.id,
              silence.id,
              now,
              Math.min(silence.ends_at, now + evaluateEveryMs),
            )
          ) {
            log.info('alert notification held by a silence', {
              ...fields,
              channel: n.channel.startsWith('destination:') ? 'destination' : n.channel,
              silence: silence.id,
            })
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
        log.warn('webhook delivery failed', {
          ...fields,
          target: webhookTarget(webhook.url),
          attempt: n.attempts + 1,
          cause: error,
        })
        webhookDown.add(n.org_id)
        result.failed++
      }
    }
    return result
  }

  return { deliver, refreshAlertmanagers }
}
