// /api/v1/databases/{id}/recommendations and /alerts (what the monitor keeps from the doctor's
// findings), and /api/v1/organization/webhook (where alert notifications are POSTed, signed with a
// secret the server generates and shows once). Recommendations are for verified organizations only.
// Webhook URLs to internal addresses are refused unless the server allows them (webhook-target.ts); a
// test delivery answers only whether it was delivered.
import { Elysia, t } from 'elysia'
import { authenticate, requireOwner } from '../auth/principal.ts'
import { randomToken } from '../auth/secrets.ts'
import type { Deps } from '../context.ts'
import { postWebhook, webhookTarget } from '../monitor/index.ts'
import { badRequest, forbidden, notFound, tooManyRequests } from '../http-error.ts'
import { healthMonitorDefaults, webhookPutLimit, webhookTestCooldownMs, webhookUrlMaxLength } from '../limits.ts'
import type {
  Alert,
  NotificationChannel,
  NotificationEvent,
  Recommendation,
  Webhook,
} from '../store/monitor/evaluations.ts'
import { rfc3339 } from '../views.ts'
import { type Silence, silenceOf } from '../alerts/routing.ts'
import { type NamedAuthor, authorNames } from './silences.ts'
import { WebhookUrlError, checkWebhookUrl, namesAHost, strictPolicy } from '../webhook-target.ts'
import {
  Alert as AlertSchema,
  CreatedWebhook,
  Recommendation as RecommendationSchema,
  Webhook as WebhookSchema,
  WebhookTestResult,
} from '../../shared/api/alerts.ts'
import { NoContent } from '../../shared/api/common.ts'
import { errorAnswers, ownersOnly } from '../openapi.ts'

const WEBHOOK_OWNERS = ownersOnly('manage the webhook')
/** GET, test and DELETE of a webhook that is not set: 404 is how the API says there is none. */
const NO_WEBHOOK = errorAnswers({ 404: 'no webhook is set' })
import { body, oneOf, query, requiredString } from './schema.ts'
import { clampLimit, databaseFor, limitQuery } from './telemetry-params.ts'

const statuses = ['open', 'resolved', 'all'] as const

export const RECOMMENDATIONS_LOCKED =
  'recommendations are available to verified organizations; verify your email address to see them'

function recommendationView(r: Recommendation) {
  return {
    id: r.id,
    key: r.key,
    rule: r.rule,
    severity: r.severity,
    category: r.category,
    title: r.title,
    detail: r.detail,
    recommendation: r.recommendation,
    remediation_sql: r.remediation_sql,
    cause: r.cause,
    first_seen_at: rfc3339(r.first_seen_at),
    last_seen_at: rfc3339(r.last_seen_at),
    resolved_at: rfc3339(r.resolved_at),
  }
}

/** An organization's alert destinations by id, as an alert names those it was queued for. */
type DestinationNames = Map<string, { kind: string; name: string }>

/** When each state change was notified on each channel (null: not sent, or no such channel then). */
function notifiedView(a: Alert, destinations: DestinationNames) {
  const sent = (event: NotificationEvent, channel: NotificationChannel) =>
    rfc3339(a.notifications.find((n) => n.event === event && n.channel === channel)?.sent_at ?? null)
  const queued = (event: NotificationEvent) =>
    a.notifications.flatMap((n) => {
      const id =
        n.event === event && n.channel.startsWith('destination:') ? n.channel.slice('destination:'.length) : undefined
      const d = id === undefined ? undefined : destinations.get(id)
      return d ? [{ id: id!, kind: d.kind, name: d.name, sent_at: rfc3339(n.sent_at) }] : []
    })
  const of = (event: NotificationEvent) => ({
    email: sent(event, 'email'),
    webhook: sent(event, 'webhook'),
    destinations: queued(event),
  })
  return { opened: of('opened'), resolved: of('resolved') }
}

/** The silence that holds back an open alert's notifications, as the alert shows it. */
function silencedView(s: Silence | undefined, by: NamedAuthor | undefined) {
  return s && by ? { id: s.id, ends_at: rfc3339(s.ends_at), comment: s.comment, by } : null
}

function alertView(a: Alert, destinations: DestinationNames, silence?: Silence, by?: NamedAuthor) {
  return {
    id: a.id,
    key: a.key,
    rule: a.rule,
    severity: a.severity,
    title: a.title,
    detail: a.detail,
    opened_at: rfc3339(a.opened_at),
    last_seen_at: rfc3339(a.last_seen_at),
    resolved_at: rfc3339(a.resolved_at),
    notified: notifiedView(a, destinations),
    consequences: a.consequences,
    silenced: silencedView(silence, by),
  }
}

function webhookView(w: Webhook) {
  return {
    url: w.url,
    created_at: rfc3339(w.created_at),
    updated_at: rfc3339(w.updated_at),
    last_success_at: rfc3339(w.last_success_at),
    last_failure_at: rfc3339(w.last_failure_at),
    last_error: w.last_error,
  }
}

/** The webhook URL as stored, or a 400 saying why not (its form, or an internal address: webhook-target.ts). */
async function webhookUrl(deps: Deps, value: string): Promise<string> {
  try {
    return await checkWebhookUrl(value, deps.webhooks ?? strictPolicy)
  } catch (e) {
    if (e instanceof WebhookUrlError) throw badRequest(e.message)
    throw e
  }
}

/**
 * Why a test delivery failed, as the API answers it: the same words whatever happened (refused address,
 * no such name, closed port, timeout, non-2xx answer), so the endpoint tells nothing about the network
 * it reached or did not reach. The cause is in the server's log.
 */
export const TEST_NOT_DELIVERED =
  'the receiver could not be reached, its address is not allowed, or it did not answer with a 2xx status in time'

const listQuery = (endpoint: 'recommendations' | 'alerts') =>
  query({ status: t.Optional(oneOf('status', statuses)), limit: limitQuery(endpoint) })

export function alertRoutes(deps: Deps) {
  const { store, clock } = deps
  const health = store.monitor
  return new Elysia()
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/api/v1/databases/:id/recommendations',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const org = await store.getOrganization(principal.orgId)
        if (!org?.verified) throw forbidden(RECOMMENDATIONS_LOCKED)
        const rows = await health.listRecommendations(
          db.id,
          query.status ?? 'open',
          clampLimit('recommendations', query.limit),
        )
        return rows.map(recommendationView)
      },
      {
        query: listQuery('recommendations'),
        response: { 200: t.Array(RecommendationSchema) },
        detail: {
          summary: "A database's recommendations with their fix commands (verified organizations only)",
          responses: errorAnswers({ 403: 'the organization is not verified' }),
        },
      },
    )
    .get(
      '/api/v1/databases/:id/alerts',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const rows = await health.listAlerts(db.id, query.status ?? 'open', clampLimit('alerts', query.limit))
        const now = clock()
        const silences = rows.some((a) => a.resolved_at === null)
          ? await store.alertRouting.silencesInEffect(principal.orgId, now)
          : []
        const destinations: DestinationNames = rows.some((a) =>
          a.notifications.some((n) => n.channel.startsWith('destination:')),
        )
          ? new Map(
              (await store.alertDestinations.listDestinations(principal.orgId)).map((d) => [
                d.id,
                { kind: d.kind, name: d.name },
              ]),
            )
          : new Map()
        const named = authorNames(deps, principal.orgId)
        return Promise.all(
          rows.map(async (a) => {
            const silence = a.resolved_at === null ? silenceOf(silences, a, db, now) : undefined
            return alertView(a, destinations, silence, silence ? await named(silence.created_by) : undefined)
          }),
        )
      },
      {
        query: listQuery('alerts'),
        response: { 200: t.Array(AlertSchema) },
        detail: {
          summary:
            "A database's alerts (one per cause with a critical finding, with the cause's findings), when each was notified, and the silence holding an open one back",
        },
      },
    )
    .get(
      '/api/v1/organization/webhook',
      async ({ principal }) => {
        requireOwner(principal, 'manage the webhook')
        const webhook = await health.getWebhook(principal.orgId)
        if (!webhook) throw notFound('webhook')
        return webhookView(webhook)
      },
      {
        response: { 200: WebhookSchema },
        detail: { summary: "The organization's alert webhook", responses: { ...WEBHOOK_OWNERS, ...NO_WEBHOOK } },
      },
    )
    .put(
      '/api/v1/organization/webhook',
      async ({ principal, body, set }) => {
        requireOwner(principal, 'manage the webhook')
        // A URL with a host name is counted before it is judged: whether the name resolves to an internal
        // address is all a refusal tells, and this keeps an organization from asking it of many names.
        if (namesAHost(body.url)) {
          const hit = await deps.store.hitRateLimit(
            `rate:webhook_put:${principal.orgId}`,
            webhookPutLimit.limit,
            webhookPutLimit.windowMs,
            clock(),
          )
          if (!hit.allowed) throw tooManyRequests(hit.retryAfterMs)
        }
        const url = await webhookUrl(deps, body.url)
        const { webhook, created } = await health.putWebhook(
          principal.orgId,
          url,
          `dbm_whsec_${randomToken(32)}`,
          clock(),
        )
        if (!created) return webhookView(webhook)
        set.status = 201
        return { ...webhookView(webhook), secret: webhook.secret }
      },
      {
        body: body(
          { url: requiredString('url', webhookUrlMaxLength) },
          { examples: [{ url: 'https://hooks.example.com/dbm' }] },
        ),
        response: { 200: WebhookSchema, 201: CreatedWebhook },
        detail: {
          summary: 'Set the alert webhook URL: 201 with the signing secret when created, 200 when its URL changed',
          responses: { ...WEBHOOK_OWNERS, ...errorAnswers({ 429: 'too many URLs with a host name set this hour' }) },
        },
      },
    )
    .post(
      '/api/v1/organization/webhook/test',
      async ({ principal }) => {
        requireOwner(principal, 'manage the webhook')
        const webhook = await health.getWebhook(principal.orgId)
        if (!webhook) throw notFound('webhook')
        const now = clock()
        const cooldown = await deps.store.takeCooldown(
          `cooldown:webhook-test:${principal.orgId}`,
          webhookTestCooldownMs,
          now,
        )
        if (!cooldown.allowed) throw tooManyRequests(cooldown.retryAfterMs)
        // Signed and sent as a notification is, so the receiver's signature check is tested too; not
        // recorded as the webhook's last success or failure, which describe alert deliveries.
        const deliveryId = Bun.randomUUIDv7()
        const payload = {
          event: 'test',
          delivery_id: deliveryId,
          sent_at: rfc3339(now),
          organization_id: principal.orgId,
          message: 'A test delivery from dbm: the webhook is reachable.',
        }
        const attempt = await postWebhook(webhook, 'test', deliveryId, JSON.stringify(payload), {
          timeoutMs: healthMonitorDefaults.webhookTimeoutMs,
          policy: deps.webhooks,
        })
        if (attempt.error === null) return { delivered: true }
        deps.log.info('webhook test not delivered', {
          org: principal.orgId,
          target: webhookTarget(webhook.url),
          cause: attempt.error,
        })
        return { delivered: false, reason: TEST_NOT_DELIVERED }
      },
      {
        response: { 200: WebhookTestResult },
        detail: {
          summary: 'Send a signed test delivery to the webhook',
          responses: {
            ...WEBHOOK_OWNERS,
            ...NO_WEBHOOK,
            ...errorAnswers({ 429: 'a test was sent within the cooldown (see Retry-After)' }),
          },
        },
      },
    )
    .delete(
      '/api/v1/organization/webhook',
      async ({ principal, set }) => {
        requireOwner(principal, 'manage the webhook')
        if (!(await health.deleteWebhook(principal.orgId))) throw notFound('webhook')
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: { summary: 'Remove the alert webhook', responses: { ...WEBHOOK_OWNERS, ...NO_WEBHOOK } },
      },
    )
}
