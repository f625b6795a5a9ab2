// /api/v1/organization/alert-destinations: where an organization's alerts go besides its users' mail
// and its webhook. Each destination has a kind (email, webhook, slack, teams, pagerduty, opsgenie,
// alertmanager: alerts/destinations.ts), a name unique in the organization and its kind's settings;
// every enabled one is sent each alert's opening and resolution. Owners (and API keys with the admin
// scope) manage them; members may read them (the dashboard's read-only list) and get 403 on a change;
// another organization's destination is a 404. URLs pass the
// webhook's address checks (no internal addresses unless DBM_WEBHOOK_ALLOW_PRIVATE); secrets are
// answered only as a hint. POST .../{id}/test sends a test alert and then its resolution.
// The organization's /organization/webhook stays as it is, beside these (not listed here): its alerts
// keep their own channel, so an upgrade changes nothing for its receiver.
import { Elysia, t } from 'elysia'
import { type Principal, authenticate, requireOwner } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import {
  DESTINATION_KINDS,
  type DestinationInput,
  DestinationInputError,
  KIND_RULES,
  deliverTo,
  destinationParts,
  destinationUrl,
  secretHint,
  testMessage,
} from '../alerts/destinations.ts'
import { targetOrigin } from '../alerts/post.ts'
import { badRequest, conflict, forbidden, notFound, tooManyRequests } from '../http-error.ts'
import {
  alertDestinationLimits,
  fieldLimits,
  healthMonitorDefaults,
  webhookPutLimit,
  webhookUrlMaxLength,
} from '../limits.ts'
import { serverMetrics } from '../metrics.ts'
import { type AlertDestination, DestinationNameTaken } from '../store/alerts/destinations.ts'
import { rfc3339 } from '../views.ts'
import { WebhookUrlError, checkWebhookUrl, namesAHost, strictPolicy } from '../webhook-target.ts'
import {
  AlertDestination as DestinationSchema,
  CreatedAlertDestination,
  DestinationTestResult,
} from '../../shared/api/alert-destinations.ts'
import { NoContent } from '../../shared/api/common.ts'
import { errorAnswers, ownersOnly } from '../openapi.ts'
import { TEST_NOT_DELIVERED } from './alerts.ts'
import { body, boolean, email, oneOf, pathId, requiredString } from './schema.ts'

const OWNERS = ownersOnly('manage alert destinations')
const READERS = errorAnswers({ 403: "an API key without the 'admin' scope" })
const NOT_FOUND = errorAnswers({ 404: 'no such destination in the organization' })
export const EMAIL_LOCKED =
  'email destinations are available to verified organizations; verify your email address first'

/**
 * Who may see a destination's URL in full: owners and API keys (which manage it). A member reads only its
 * origin (`https://hooks.example.com/…`): a path or query may carry a token, as the log's lines assume.
 */
const seesUrls = (p: Principal) => p.kind === 'api_key' || p.role === 'owner'

const originOnly = (url: string | null) => (url === null ? null : `${targetOrigin(url)}/…`)

function destinationView(d: AlertDestination, principal?: Principal) {
  const url = d.kind === 'email' || KIND_RULES[d.kind].secret === 'url' ? null : destinationUrl(d)
  return {
    id: d.id,
    kind: d.kind,
    name: d.name,
    enabled: d.enabled,
    url: principal === undefined || seesUrls(principal) ? url : originOnly(url),
    to: d.kind === 'email' ? (d.settings.to ?? []) : null,
    secret_hint: secretHint(d),
    created_at: rfc3339(d.created_at),
    updated_at: rfc3339(d.updated_at),
    last_success_at: rfc3339(d.last_success_at),
    last_failure_at: rfc3339(d.last_failure_at),
    last_error: d.last_error,
    sent: d.sent,
    failed: d.failed,
  }
}

const settingFields = {
  url: t.Optional(requiredString('url', webhookUrlMaxLength)),
  to: t.Optional(
    t.Array(email('to'), {
      minItems: 1,
      maxItems: alertDestinationLimits.emails,
      error: `to must be a list of 1 to ${alertDestinationLimits.emails} email addresses`,
    }),
  ),
  routing_key: t.Optional(requiredString('routing_key', alertDestinationLimits.keyMaxLength)),
  api_key: t.Optional(requiredString('api_key', alertDestinationLimits.keyMaxLength)),
}

/** The request's settings, its URL checked as the webhook's is; a 400 naming what is wrong. */
async function checkedInput(deps: Deps, orgId: string, input: DestinationInput): Promise<DestinationInput> {
  if (input.to !== undefined) {
    // A list of addresses to mail is counted before it is taken: the server's mail is not a way to reach many.
    const { limit, windowMs } = alertDestinationLimits.emailListsPerOrganization
    const hit = await deps.store.hitRateLimit(`rate:destination_emails:${orgId}`, limit, windowMs, deps.clock())
    if (!hit.allowed) throw tooManyRequests(hit.retryAfterMs)
  }
  if (input.url === undefined) return input
  // A URL with a host name is counted before it is judged, with the webhook's URLs: whether a name
  // resolves to an internal address is all a refusal tells, and this keeps anyone from asking it of many names.
  if (namesAHost(input.url)) {
    const hit = await deps.store.hitRateLimit(
      `rate:webhook_put:${orgId}`,
      webhookPutLimit.limit,
      webhookPutLimit.windowMs,
      deps.clock(),
    )
    if (!hit.allowed) throw tooManyRequests(hit.retryAfterMs)
  }
  try {
    return { ...input, url: await checkWebhookUrl(input.url, deps.webhooks ?? strictPolicy) }
  } catch (e) {
    if (e instanceof WebhookUrlError) throw badRequest(e.message)
    throw e
  }
}

function partsOrBadRequest(...args: Parameters<typeof destinationParts>) {
  try {
    return destinationParts(...args)
  } catch (e) {
    if (e instanceof DestinationInputError) throw badRequest(e.message)
    throw e
  }
}

async function nameOrConflict<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (e) {
    if (e instanceof DestinationNameTaken) throw conflict(e.message)
    throw e
  }
}

export function alertDestinationRoutes(deps: Deps) {
  const { store, clock } = deps
  const destinations = store.alertDestinations
  const owner = (principal: Parameters<typeof requireOwner>[0]) => requireOwner(principal, 'manage alert destinations')
  const find = async (orgId: string, id: string) => {
    const d = await destinations.getDestination(orgId, pathId(id, 'alert destination'))
    if (!d) throw notFound('alert destination')
    return d
  }
  const requireVerifiedForEmail = async (orgId: string) => {
    if (!(await store.getOrganization(orgId))?.verified) throw forbidden(EMAIL_LOCKED)
  }
  return new Elysia()
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/api/v1/organization/alert-destinations',
      async ({ principal }) =>
        (await destinations.listDestinations(principal.orgId)).map((d) => destinationView(d, principal)),
      {
        response: { 200: t.Array(DestinationSchema) },
        detail: {
          summary: "The organization's alert destinations, oldest first (secrets as hints); members may read them",
          responses: READERS,
        },
      },
    )
    .post(
      '/api/v1/organization/alert-destinations',
      async ({ principal, body, set }) => {
        owner(principal)
        if (body.kind === 'email') await requireVerifiedForEmail(principal.orgId)
        if ((await destinations.countDestinations(principal.orgId)) >= alertDestinationLimits.perOrganization) {
          throw conflict(`an organization has at most ${alertDestinationLimits.perOrganization} alert destinations`)
        }
        const { kind, name, enabled, ...settings } = body
        partsOrBadRequest(kind, settings) // the kind's settings before the URL is looked up
        const parts = partsOrBadRequest(kind, await checkedInput(deps, principal.orgId, settings))
        const created = await nameOrConflict(() =>
          destinations.createDestination({
            id: Bun.randomUUIDv7(),
            org_id: principal.orgId,
            kind,
            name,
            enabled: enabled ?? true,
            settings: parts.settings,
            secret: parts.secret ?? null,
            created_at: clock(),
          }),
        )
        set.status = 201
        return { ...destinationView(created), ...(kind === 'webhook' ? { secret: created.secret! } : {}) }
      },
      {
        body: body(
          {
            kind: oneOf('kind', DESTINATION_KINDS),
            name: requiredString('name', fieldLimits.name),
            enabled: t.Optional(boolean('enabled')),
            ...settingFields,
          },
          { examples: [{ kind: 'webhook', name: 'on-call receiver', url: 'https://hooks.example.com/dbm' }] },
        ),
        response: { 201: CreatedAlertDestination },
        detail: {
          summary:
            'Add an alert destination: url for webhook, slack, teams, alertmanager (and optionally pagerduty, opsgenie); to for email; routing_key for pagerduty; api_key for opsgenie',
          responses: {
            ...OWNERS,
            ...errorAnswers({
              409: 'a destination of that name exists, or the organization has the most it may',
              429: 'too many URLs with a host name set this hour',
            }),
          },
        },
      },
    )
    .get(
      '/api/v1/organization/alert-destinations/:id',
      async ({ principal, params }) => destinationView(await find(principal.orgId, params.id), principal),
      {
        response: { 200: DestinationSchema },
        detail: {
          summary: 'One alert destination (its secret as a hint); members may read it',
          responses: { ...READERS, ...NOT_FOUND },
        },
      },
    )
    .patch(
      '/api/v1/organization/alert-destinations/:id',
      async ({ principal, params, body }) => {
        owner(principal)
        const current = await find(principal.orgId, params.id)
        const { name, enabled, ...settings } = body
        partsOrBadRequest(current.kind, settings, current)
        const parts = partsOrBadRequest(current.kind, await checkedInput(deps, principal.orgId, settings), current)
        const updated = await nameOrConflict(() =>
          destinations.updateDestination(
            principal.orgId,
            current.id,
            { name, enabled, settings: parts.settings, secret: parts.secret },
            clock(),
          ),
        )
        if (!updated) throw notFound('alert destination')
        return destinationView(updated)
      },
      {
        body: body(
          {
            name: t.Optional(requiredString('name', fieldLimits.name)),
            enabled: t.Optional(boolean('enabled')),
            ...settingFields,
          },
          { examples: [{ enabled: false }] },
        ),
        response: { 200: DestinationSchema },
        detail: {
          summary: "Change an alert destination's name, enabled, or its kind's settings (its kind stays)",
          responses: {
            ...OWNERS,
            ...NOT_FOUND,
            ...errorAnswers({
              409: 'a destination of that name exists',
              429: 'too many URLs with a host name set this hour',
            }),
          },
        },
      },
    )
    .delete(
      '/api/v1/organization/alert-destinations/:id',
      async ({ principal, params, set }) => {
        owner(principal)
        const current = await find(principal.orgId, params.id)
        if (!(await destinations.deleteDestination(principal.orgId, current.id, clock())))
          throw notFound('alert destination')
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: {
          summary: 'Remove an alert destination (its undelivered notifications are given up)',
          responses: { ...OWNERS, ...NOT_FOUND },
        },
      },
    )
    .post(
      '/api/v1/organization/alert-destinations/:id/test',
      async ({ principal, params }) => {
        owner(principal)
        const d = await find(principal.orgId, params.id)
        const now = clock()
        const cooldown = await store.takeCooldown(
          `cooldown:destination-test:${d.id}`,
          alertDestinationLimits.testCooldownMs,
          now,
        )
        if (!cooldown.allowed) throw tooManyRequests(cooldown.retryAfterMs)
        // and per organization: deleting a destination and making it again starts no new cooldown
        const { limit, windowMs } = alertDestinationLimits.testsPerOrganization
        const tests = await store.hitRateLimit(`rate:destination_test:${principal.orgId}`, limit, windowMs, now)
        if (!tests.allowed) throw tooManyRequests(tests.retryAfterMs)
        // Sent as alerts are, but not recorded as the destination's last success or failure, which describe alert deliveries.
        const alertId = Bun.randomUUIDv7()
        const sendOptions = {
          mailer: deps.mailer,
          publicUrl: deps.publicUrl,
          policy: deps.webhooks,
          timeoutMs: healthMonitorDefaults.webhookTimeoutMs,
        }
        let error: string | null = null
        for (const event of ['opened', 'resolved'] as const) {
          error = await deliverTo(
            d,
            testMessage(principal.orgId, deps.publicUrl, event, alertId, now, clock()),
            sendOptions,
          )
          serverMetrics.alertDestinationDeliveries.labels(d.kind, error === null ? 'delivered' : 'failed').inc()
          if (error !== null) break
        }
        if (error === null) return { delivered: true }
        const url = destinationUrl(d)
        deps.log.info('alert destination test not delivered', {
          org: principal.orgId,
          destination: d.id,
          kind: d.kind,
          ...(url ? { target: targetOrigin(url) } : {}),
          cause: error,
        })
        return { delivered: false, reason: TEST_NOT_DELIVERED }
      },
      {
        response: { 200: DestinationTestResult },
        detail: {
          summary: 'Send the destination a test alert, then its resolution',
          responses: {
            ...OWNERS,
            ...NOT_FOUND,
            ...errorAnswers({ 429: 'a test of this destination was sent within the cooldown (see Retry-After)' }),
          },
        },
      },
    )
}
