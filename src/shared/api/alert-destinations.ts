// Requests and responses of /api/v1/organization/alert-destinations: an organization's alert
// destinations (email, webhook, Slack, Teams, PagerDuty, Opsgenie, Alertmanager). A destination's secret
// (signing secret, routing key, API key, or a Slack or Teams URL) is never returned in full: secret_hint
// shows its last four characters; a webhook's signing secret is shown once, when it is created.
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'

export const DestinationKind = t.Union(
  [
    t.Literal('email'),
    t.Literal('webhook'),
    t.Literal('slack'),
    t.Literal('teams'),
    t.Literal('pagerduty'),
    t.Literal('opsgenie'),
    t.Literal('alertmanager'),
  ],
  {
    description:
      'email: mails to `to`; webhook: signed JSON as /organization/webhook; slack: incoming webhook (Block Kit); teams: workflow webhook (Adaptive Card); pagerduty: Events API v2; opsgenie: Alert API; alertmanager: POST /api/v2/alerts',
  },
)

const destinationFields = {
  id: Uuid(),
  kind: DestinationKind,
  name: t.String(),
  enabled: t.Boolean({ description: 'only enabled destinations are sent alerts' }),
  url: Nullable(
    t.String({
      description:
        'where it posts (to a member, only its origin, then …); null for email, and for slack and teams, whose URL is the secret (see secret_hint)',
    }),
  ),
  to: Nullable(t.Array(t.String(), { description: 'the addresses an email destination mails; null for other kinds' })),
  secret_hint: Nullable(
    t.String({
      description:
        'the last four characters of its secret (signing secret, routing key, API key, or the URL after its origin); null when it has none',
    }),
  ),
  created_at: Timestamp(),
  updated_at: Timestamp(),
  last_success_at: Nullable(Timestamp('the last alert notification delivered')),
  last_failure_at: Nullable(Timestamp('the last delivery attempt that failed')),
  last_error: Nullable(t.String()),
  sent: t.Integer({ description: 'alert notifications delivered' }),
  failed: t.Integer({ description: 'delivery attempts that failed (each retry counts)' }),
}

export const AlertDestination = t.Object(destinationFields, { title: 'AlertDestination' })

export const CreatedAlertDestination = t.Object(
  {
    ...destinationFields,
    secret: t.Optional(
      t.String({
        description:
          "a webhook destination's signing secret (HMAC-SHA256, X-DBM-Signature); shown in this response only",
      }),
    ),
  },
  { title: 'CreatedAlertDestination' },
)

export const DestinationTestResult = t.Object(
  {
    delivered: t.Boolean({ description: 'both the test alert and its resolution were delivered' }),
    reason: t.Optional(t.String({ description: 'why not, when not delivered (the same words whatever happened)' })),
  },
  { title: 'DestinationTestResult' },
)
