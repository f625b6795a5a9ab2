// Responses of /api/v1/databases/{id}/recommendations and /alerts (what the health monitor keeps of the
// doctor's findings) and of /api/v1/organization/webhook.
import { t } from 'elysia'
import { Nullable, Severity, Timestamp, Uuid } from './common.ts'

const findingFields = {
  id: Uuid(),
  key: t.String({ description: 'what the finding is about (rule and object): one open record per key' }),
  rule: t.String({ description: 'the doctor rule that found it' }),
  severity: Severity,
}

export const Recommendation = t.Object(
  {
    ...findingFields,
    category: t.String(),
    title: t.String(),
    detail: t.String(),
    recommendation: t.String(),
    remediation_sql: t.String({ description: 'the fix commands, one per line (empty when there are none)' }),
    cause: Nullable(
      t.String({
        description:
          "the key of its finding's cause (the doctor's groups[].key, an alert's key); null for one kept before causes were",
      }),
    ),
    first_seen_at: Timestamp(),
    last_seen_at: Timestamp(),
    resolved_at: Nullable(Timestamp()),
  },
  { title: 'Recommendation' },
)

const sentAt = Nullable(Timestamp('when the notification was sent; null: not sent, or no such channel then'))
const channels = t.Object({
  email: sentAt,
  webhook: sentAt,
  destinations: t.Array(
    t.Object({
      id: t.String(),
      kind: t.String({ description: 'email, webhook, slack, teams, pagerduty, opsgenie or alertmanager' }),
      name: t.String(),
      sent_at: sentAt,
    }),
    {
      description:
        'the alert destinations this change was queued for (by its routes), each with when it was sent; a removed destination is left out',
    },
  ),
})

export const AlertConsequence = t.Object(
  {
    key: t.String({ description: "the finding's key" }),
    rule: t.String(),
    severity: Severity,
    title: t.String(),
  },
  { title: 'AlertConsequence' },
)

export const SilenceAuthor = t.Object(
  {
    kind: t.Union([t.Literal('user'), t.Literal('api_key')]),
    id: t.String({ description: "the user's id, or the API key's (as in GET /api-keys)" }),
    name: Nullable(
      t.String({ description: "who that is: the user's name and email, or the API key's name; null once removed" }),
    ),
  },
  { title: 'SilenceAuthor' },
)

export const SilencedMark = t.Object(
  {
    id: Uuid('the silence'),
    ends_at: Timestamp(),
    comment: t.String(),
    by: SilenceAuthor,
  },
  { title: 'SilencedMark', description: 'the silence that holds back its notifications' },
)

export const Alert = t.Object(
  {
    ...findingFields,
    key: t.String({
      description:
        "the cause (the doctor's groups[].key: session:pid 3161, index:public.orders(customer_id), ..., or a finding's own key): one open alert per cause",
    }),
    rule: t.String({ description: 'the rule of the finding that leads the cause' }),
    title: t.String(),
    detail: t.String(),
    opened_at: Timestamp(),
    last_seen_at: Timestamp(),
    resolved_at: Nullable(Timestamp()),
    notified: t.Object({ opened: channels, resolved: channels }),
    consequences: t.Array(AlertConsequence, {
      description:
        "the cause's findings at its last evaluation, the lead first; empty for an alert opened before causes were",
    }),
    silenced: Nullable(SilencedMark),
  },
  { title: 'Alert' },
)

const webhookFields = {
  url: t.String(),
  created_at: Timestamp(),
  updated_at: Timestamp(),
  last_success_at: Nullable(Timestamp('the last alert notification delivered')),
  last_failure_at: Nullable(Timestamp('the last alert notification not delivered')),
  last_error: Nullable(t.String()),
}

export const Webhook = t.Object(webhookFields, { title: 'Webhook' })

export const CreatedWebhook = t.Object(
  {
    ...webhookFields,
    secret: t.String({ description: 'signs every delivery (HMAC-SHA256); shown in this response only' }),
  },
  { title: 'CreatedWebhook' },
)

export const WebhookTestResult = t.Object(
  {
    delivered: t.Boolean(),
    reason: t.Optional(t.String({ description: 'why not, when not delivered (the same words whatever happened)' })),
  },
  { title: 'WebhookTestResult' },
)
