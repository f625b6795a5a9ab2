// Alert destinations' kinds in one table: which settings each takes, which of them is its secret, and how
// an alert state change is delivered to it. `url` is checked as the webhook's is (webhook-target.ts:
// internal addresses refused unless DBM_WEBHOOK_ALLOW_PRIVATE), when set and again at each delivery.
// Secrets (the webhook's signing secret, PagerDuty's routing key, Opsgenie's API key, and the URL of a
// Slack or Teams webhook, which is itself the credential) are kept apart and shown only as a hint: the
// last four characters. Nothing here logs; the caller logs the destination's id, kind and origin only.
import { randomToken } from '../auth/secrets.ts'
import { alertMail, alertsLink, webhookPayload, webhookSignature } from './messages.ts'
import type { Mailer } from '../mail.ts'
import type {
  AlertDestination,
  AlertDestinationKind,
  AlertDestinationSettings,
  OpenAlert,
} from '../store/alerts/destinations.ts'
import type { PendingNotification } from '../store/monitor/evaluations.ts'
import type { WebhookPolicy } from '../webhook-target.ts'
import {
  type AlertMessage,
  alertmanagerPayload,
  opsgenieRequest,
  pagerdutyPayload,
  slackPayload,
  teamsPayload,
} from './payloads.ts'
import { postJson } from './post.ts'

export const DESTINATION_KINDS = [
  'email',
  'webhook',
  'slack',
  'teams',
  'pagerduty',
  'opsgenie',
  'alertmanager',
] as const satisfies readonly AlertDestinationKind[]

type Setting = 'url' | 'to' | 'routing_key' | 'api_key'

interface KindRule {
  /** Settings the kind requires. */
  required: Setting[]
  /** Settings the kind may be given besides. */
  optional: Setting[]
  /** Where its secret comes from: a setting given, one the server makes (the webhook's), or none. */
  secret: 'url' | 'routing_key' | 'api_key' | 'generated' | null
  /** The URL used when none is given. */
  defaultUrl?: string
}

export const KIND_RULES: Record<AlertDestinationKind, KindRule> = {
  email: { required: ['to'], optional: [], secret: null },
  webhook: { required: ['url'], optional: [], secret: 'generated' },
  slack: { required: ['url'], optional: [], secret: 'url' },
  teams: { required: ['url'], optional: [], secret: 'url' },
  pagerduty: {
    required: ['routing_key'],
    optional: ['url'],
    secret: 'routing_key',
    defaultUrl: 'https://events.pagerduty.com/v2/enqueue',
  },
  opsgenie: { required: ['api_key'], optional: ['url'], secret: 'api_key', defaultUrl: 'https://api.opsgenie.com' },
  alertmanager: { required: ['url'], optional: [], secret: null },
}

/** Settings as a request gives them (the route's schema has checked their types and lengths). */
export interface DestinationInput {
  url?: string
  to?: string[]
  routing_key?: string
  api_key?: string
}

/** What the store keeps of an input: the settings and the secret (undefined: unchanged). */
export interface DestinationParts {
  settings: AlertDestinationSettings
  secret: string | null | undefined
}

/** A request's settings that the kind does not take or lacks; the message is the 400 answer. */
export class DestinationInputError extends Error {}

/**
 * Splits a request's settings into what is stored, for a new destination (`current` absent) or a
 * change of one. The URL must have been checked already (checkWebhookUrl) when given.
 */
export function destinationParts(
  kind: AlertDestinationKind,
  input: DestinationInput,
  current?: AlertDestination,
): DestinationParts {
  const rule = KIND_RULES[kind]
  for (const name of ['url', 'to', 'routing_key', 'api_key'] as const) {
    if (input[name] !== undefined && !rule.required.includes(name) && !rule.optional.includes(name)) {
      throw new DestinationInputError(
        `${name} is not a setting of ${kind} destinations (they take ${[...rule.required, ...rule.optional].join(', ')})`,
      )
    }
    if (!current && input[name] === undefined && rule.required.includes(name))
      throw new DestinationInputError(`${name} is required for ${kind} destinations`)
  }
  const settings: AlertDestinationSettings = { ...(current?.settings ?? {}) }
  if (input.to !== undefined) settings.to = [...new Set(input.to.map((a) => a.trim().toLowerCase()))]
  if (input.url !== undefined && rule.secret !== 'url') settings.url = input.url
  let secret: string | null | undefined = current ? undefined : null
  if (rule.secret === 'generated' && !current) secret = `dbm_whsec_${randomToken(32)}`
  else if (rule.secret === 'url' && input.url !== undefined) secret = input.url
  else if ((rule.secret === 'routing_key' || rule.secret === 'api_key') && input[rule.secret] !== undefined)
    secret = input[rule.secret]!
  return { settings, secret }
}

/** Where the destination posts (null for email). */
export function destinationUrl(d: Pick<AlertDestination, 'kind' | 'settings' | 'secret'>): string | null {
  const rule = KIND_RULES[d.kind]
  if (d.kind === 'email') return null
  if (rule.secret === 'url') return d.secret
  return d.settings.url ?? rule.defaultUrl ?? null
}

/** The last four characters of a secret (a URL's after its origin), the rest left out. */
export function secretHint(d: Pick<AlertDestination, 'kind' | 'secret'>): string | null {
  if (d.secret === null) return null
  const tail = (s: string) => (Array.from(s).length >= 12 ? `…${Array.from(s).slice(-4).join('')}` : '…')
  if (KIND_RULES[d.kind].secret === 'url') {
    try {
      const url = new URL(d.secret)
      return `${url.origin}/${tail(url.pathname + url.search)}`
    } catch {
      return tail(d.secret)
    }
  }
  return tail(d.secret)
}

export interface DeliveryDeps {
  mailer: Mailer
  publicUrl: string
  policy?: WebhookPolicy
  timeoutMs: number
}

/** The signed webhook's body for a message: the organization webhook's (alert.opened / alert.resolved), a test marked. */
function webhookBody(m: AlertMessage): string {
  const n: PendingNotification = {
    id: m.delivery_id,
    event: m.repeat ? 'repeated' : m.event,
    channel: 'webhook',
    attempts: 0,
    created_at: m.now,
    org_id: m.org_id,
    alert: m.alert,
    database: m.database,
    silenced_by: null,
  }
  const payload = webhookPayload(n, '', m.now)
  return JSON.stringify({ ...payload, link: m.link, ...(m.test ? { test: true } : {}) })
}

/** Delivers one message to one destination; null when delivered, else why not (no URL path, query or secret in it). */
export async function deliverTo(d: AlertDestination, m: AlertMessage, deps: DeliveryDeps): Promise<string | null> {
  const options = { timeoutMs: deps.timeoutMs, policy: deps.policy }
  const url = destinationUrl(d)
  switch (d.kind) {
    case 'email': {
      const n: PendingNotification = {
        id: m.delivery_id,
        event: m.repeat ? 'repeated' : m.event,
        channel: 'email',
        attempts: 0,
        created_at: m.now,
        org_id: m.org_id,
        alert: m.alert,
        database: m.database,
        silenced_by: null,
      }
      const mail = alertMail(n, deps.publicUrl)
      const subject = m.test ? `[test] ${mail.subject}` : mail.subject
      for (const to of d.settings.to ?? []) deps.mailer.send({ to, subject, text: mail.text, link: m.link })
      return null
    }
    case 'webhook': {
      const body = webhookBody(m)
      const event = `alert.${m.repeat ? 'repeated' : m.event}`
      return (
        await postJson(
          url!,
          body,
          {
            'x-dbm-event': event,
            'x-dbm-delivery': m.delivery_id,
            'x-dbm-signature': webhookSignature(d.secret ?? '', body),
          },
          options,
        )
      ).error
    }
    case 'slack':
      return (await postJson(url!, JSON.stringify(slackPayload(m)), {}, options)).error
    case 'teams':
      return (await postJson(url!, JSON.stringify(teamsPayload(m)), {}, options)).error
    case 'pagerduty':
      return (await postJson(url!, JSON.stringify(pagerdutyPayload(m, d.secret ?? '')), {}, options)).error
    case 'opsgenie': {
      const request = opsgenieRequest(m)
      return (
        await postJson(
          `${url!.replace(/\/+$/, '')}${request.path}`,
          JSON.stringify(request.body),
          { authorization: `GenieKey ${d.secret ?? ''}` },
          options,
        )
      ).error
    }
    case 'alertmanager':
      return (
        await postJson(`${url!.replace(/\/+$/, '')}/api/v2/alerts`, JSON.stringify(alertmanagerPayload(m)), {}, options)
      ).error
  }
}

/**
 * Tells an Alertmanager again of the organization's open alerts (one POST, the alerts as they were
 * opened, no endsAt): Alertmanager resolves an alert it is not sent again within its resolve_timeout,
 * as Prometheus re-sends its firing alerts. Null when delivered, else why not.
 */
export async function refreshAlertmanager(
  d: AlertDestination,
  open: OpenAlert[],
  orgId: string,
  deps: DeliveryDeps,
  now: number,
): Promise<string | null> {
  if (d.kind !== 'alertmanager' || open.length === 0) return null
  const alerts = open.flatMap((o) =>
    alertmanagerPayload({
      delivery_id: '',
      event: 'opened',
      test: false,
      org_id: orgId,
      alert: o.alert,
      database: o.database,
      link: alertsLink(deps.publicUrl, o.database.id),
      now,
    }),
  )
  return (
    await postJson(
      `${destinationUrl(d)!.replace(/\/+$/, '')}/api/v2/alerts`,
      JSON.stringify(alerts),
      {},
      { timeoutMs: deps.timeoutMs, policy: deps.policy },
    )
  ).error
}

/** The message of a queued notification. */
export function messageOf(n: PendingNotification, publicUrl: string, now: number): AlertMessage {
  return {
    delivery_id: n.id,
    event: n.event === 'repeated' ? 'opened' : n.event,
    ...(n.event === 'repeated' ? { repeat: true } : {}),
    test: false,
    org_id: n.org_id,
    alert: n.alert,
    database: n.database,
    link: alertsLink(publicUrl, n.database.id),
    now,
  }
}

/** The test alert POST .../test sends (opened, then resolved), about no database of the organization's. */
export function testMessage(
  orgId: string,
  publicUrl: string,
  event: 'opened' | 'resolved',
  alertId: string,
  openedAt: number,
  now: number,
): AlertMessage {
  return {
    delivery_id: Bun.randomUUIDv7(),
    event,
    test: true,
    org_id: orgId,
    alert: {
      id: alertId,
      key: 'dbm-test',
      rule: 'dbm_test',
      severity: 'info',
      title: 'Test alert from dbm',
      // The destination's name is the owner's text: a test mail carries none of it to the addresses it reaches.
      detail: "A test of one of your organization's alert destinations in dbm: this alert resolves at once.",
      opened_at: openedAt,
      resolved_at: event === 'resolved' ? now : null,
      consequences: [],
    },
    database: {
      id: '00000000-0000-0000-0000-000000000000',
      name: 'dbm-test',
      engine: 'postgres',
      host: 'dbm-test',
      port: 5432,
    },
    link: `${publicUrl}/`,
    now,
  }
}
