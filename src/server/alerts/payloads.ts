// What each destination kind receives when an alert opens and when it resolves, in the receiver's
// published format: Slack (incoming webhook, Block Kit), Microsoft Teams (workflow webhook, an Adaptive
// Card), PagerDuty (Events API v2: trigger and resolve by dedup_key), Opsgenie (Alert API: create, and
// close by alias), Prometheus Alertmanager (POST /api/v2/alerts, endsAt on resolve). The signed webhook's
// body is alerts/messages.ts's webhookPayload, unchanged. The texts come from a monitored database
// (hostile): Slack gets them as plain_text in the blocks and escaped in its one mrkdwn field (`text`), so
// no link or mention can be made of them; Teams with its markdown's characters escaped, the others as JSON
// strings; every text is cut to the receiver's limit.
import type { Severity } from '../doctor/types.ts'
import type { AlertConsequence } from '../store/alerts/types.ts'

/** One alert state change, as every kind's payload is made from it. */
export interface AlertMessage {
  /** Unique per delivery (a notification's id, or a test's). */
  delivery_id: string
  event: 'opened' | 'resolved'
  /** An open alert sent again after its route's repeat interval (event `opened`). */
  repeat?: boolean
  /** A test sent by POST .../alert-destinations/{id}/test, not a real alert. */
  test: boolean
  org_id: string
  alert: {
    id: string
    key: string
    rule: string
    severity: Severity
    title: string
    detail: string
    opened_at: number
    resolved_at: number | null
    consequences: AlertConsequence[]
  }
  database: { id: string; name: string; engine: string; host: string; port: number }
  /** The dashboard's page of the alert's database. */
  link: string
  /** When the message is sent. */
  now: number
}

const iso = (ms: number) => new Date(ms).toISOString()

/** Text for a Slack mrkdwn field: `&`, `<` and `>` as the entities Slack's formatting asks for, nothing else read as markup. */
export function slackEscape(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')
}

/** Cut to `max` characters (whole code points), with an ellipsis when cut. */
export function cut(text: string, max: number): string {
  const points = Array.from(text)
  return points.length <= max ? text : `${points.slice(0, max - 1).join('')}…`
}

/** The stable key of one alert at PagerDuty (dedup_key) and Opsgenie (alias): its id, which never changes. */
export const alertIdentity = (m: AlertMessage) => `dbm-${m.alert.id}`

const where = (m: AlertMessage) => `${m.database.name} (${m.database.engine}, ${m.database.host}:${m.database.port})`
const headline = (m: AlertMessage) =>
  `${m.test ? '[test] ' : ''}${m.event === 'opened' ? (m.repeat ? 'Still open' : 'Alert') : 'Resolved'}: ${m.alert.title}`

// ---- Slack: an incoming webhook's message with Block Kit blocks ----

export function slackPayload(m: AlertMessage) {
  const opened = m.event === 'opened'
  const others = m.alert.consequences.slice(1)
  const facts = [
    `Database: ${where(m)}`,
    `Severity: ${m.alert.severity}`,
    `Rule: ${m.alert.rule}`,
    `Opened: ${iso(m.alert.opened_at)}`,
    ...(m.alert.resolved_at !== null ? [`Resolved: ${iso(m.alert.resolved_at)}`] : []),
  ]
  return {
    // The notification's text (and the fallback where blocks are not shown).
    // Slack reads this field as mrkdwn (the notification's and the fallback's text): its control
    // characters escaped, so a name like `<!channel>` or `<http://x|y>` stays text.
    text: slackEscape(cut(`${headline(m)} on ${m.database.name}`, 3000)),
    blocks: [
      { type: 'header', text: { type: 'plain_text', text: cut(headline(m), 150), emoji: false } },
      {
        type: 'section',
        text: {
          type: 'plain_text',
          text: cut(opened ? m.alert.detail || m.alert.title : `No longer found: ${m.alert.title}`, 3000),
          emoji: false,
        },
      },
      ...(others.length > 0
        ? [
            {
              type: 'section',
              text: {
                type: 'plain_text',
                text: cut(
                  `What it causes (${others.length}):\n${others.map((c) => `- ${c.severity}: ${c.title}`).join('\n')}`,
                  3000,
                ),
                emoji: false,
              },
            },
          ]
        : []),
      { type: 'context', elements: [{ type: 'plain_text', text: cut(facts.join(' · '), 2000), emoji: false }] },
      {
        type: 'actions',
        elements: [
          { type: 'button', text: { type: 'plain_text', text: 'Open in dbm', emoji: false }, url: cut(m.link, 3000) },
        ],
      },
    ],
  }
}

// ---- Microsoft Teams: a workflow webhook's message carrying one Adaptive Card ----

/** Text with Adaptive Card markdown's characters escaped, so a monitored name makes no link or emphasis. */
export function teamsText(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!<>~|]/g, (c) => `\\${c}`)
}

export function teamsPayload(m: AlertMessage) {
  const opened = m.event === 'opened'
  const facts = [
    { title: 'Database', value: teamsText(where(m)) },
    { title: 'Severity', value: m.alert.severity },
    { title: 'Rule', value: teamsText(m.alert.rule) },
    { title: 'Opened', value: iso(m.alert.opened_at) },
    ...(m.alert.resolved_at !== null ? [{ title: 'Resolved', value: iso(m.alert.resolved_at) }] : []),
  ]
  return {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body: [
            {
              type: 'TextBlock',
              text: teamsText(cut(headline(m), 300)),
              weight: 'Bolder',
              size: 'Medium',
              wrap: true,
              color: opened ? 'Attention' : 'Good',
            },
            {
              type: 'TextBlock',
              text: teamsText(
                cut(opened ? m.alert.detail || m.alert.title : `No longer found: ${m.alert.title}`, 3000),
              ),
              wrap: true,
            },
            { type: 'FactSet', facts },
          ],
          actions: [{ type: 'Action.OpenUrl', title: 'Open in dbm', url: m.link }],
        },
      },
    ],
  }
}

// ---- PagerDuty: Events API v2 ----

const pagerdutySeverity = { critical: 'critical', warning: 'warning', info: 'info' } as const

export function pagerdutyPayload(m: AlertMessage, routingKey: string) {
  if (m.event === 'resolved') return { routing_key: routingKey, event_action: 'resolve', dedup_key: alertIdentity(m) }
  return {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key: alertIdentity(m),
    payload: {
      summary: cut(`${headline(m)} on ${m.database.name}`, 1024),
      source: cut(`${m.database.host}:${m.database.port}`, 255),
      severity: pagerdutySeverity[m.alert.severity],
      timestamp: iso(m.alert.opened_at),
      component: cut(m.database.name, 255),
      group: m.database.engine,
      class: cut(m.alert.rule, 255),
      custom_details: {
        detail: cut(m.alert.detail, 4000),
        cause: cut(m.alert.key, 1000),
        database_id: m.database.id,
        consequences: m.alert.consequences.slice(0, 20).map((c) => `${c.severity}: ${cut(c.title, 300)}`),
        test: m.test,
      },
    },
    links: [{ href: m.link, text: 'Open in dbm' }],
    client: 'dbm',
    client_url: m.link,
  }
}

// ---- Opsgenie: Alert API (create; close by alias) ----

const opsgeniePriority = { critical: 'P1', warning: 'P3', info: 'P5' } as const

/** The request for the alert's state change: the path under the API's base URL and the JSON body. */
export function opsgenieRequest(m: AlertMessage): { path: string; body: Record<string, unknown> } {
  const alias = alertIdentity(m)
  if (m.event === 'resolved') {
    return {
      path: `/v2/alerts/${encodeURIComponent(alias)}/close?identifierType=alias`,
      body: { source: 'dbm', note: cut(`Resolved: ${m.alert.title}`, 25000) },
    }
  }
  return {
    path: '/v2/alerts',
    body: {
      message: cut(`${headline(m)} on ${m.database.name}`, 130),
      alias,
      description: cut(m.alert.detail, 15000),
      entity: cut(m.database.name, 512),
      source: 'dbm',
      priority: opsgeniePriority[m.alert.severity],
      tags: ['dbm', m.database.engine, m.alert.severity, ...(m.test ? ['test'] : [])],
      details: {
        database: cut(where(m), 1000),
        database_id: m.database.id,
        rule: cut(m.alert.rule, 1000),
        cause: cut(m.alert.key, 1000),
        link: m.link,
      },
    },
  }
}

// ---- Prometheus Alertmanager: POST /api/v2/alerts ----

/** One postable alert: labels per database and rule (and the cause, which tells two alerts of a rule apart). */
export function alertmanagerPayload(m: AlertMessage) {
  return [
    {
      labels: {
        alertname: m.test ? 'dbm_test' : `dbm_${m.alert.rule}`,
        source: 'dbm',
        database: m.database.name,
        database_id: m.database.id,
        engine: m.database.engine,
        rule: m.alert.rule,
        severity: m.alert.severity,
        cause: m.alert.key,
      },
      annotations: { summary: cut(m.alert.title, 1000), description: cut(m.alert.detail, 4000), link: m.link },
      startsAt: iso(m.alert.opened_at),
      ...(m.event === 'resolved' ? { endsAt: iso(m.alert.resolved_at ?? m.now) } : {}),
      generatorURL: m.link,
    },
  ]
}
