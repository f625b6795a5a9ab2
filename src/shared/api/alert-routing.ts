// Responses of /api/v1/organization/alert-routes and /api/v1/organization/silences (routing, repeats
// and silences of alerts), and the mark a silenced alert carries in GET /databases/{id}/alerts.
import { t } from 'elysia'
import { Nullable, Severity, Timestamp, Uuid } from './common.ts'
import { SilenceAuthor } from './alerts.ts'

export { SilencedMark } from './alerts.ts'

export const RouteMatch = t.Object(
  {
    severity: t.Optional(
      t.Array(Severity, { description: "any of these severities (an alert's is its cause's: critical today)" }),
    ),
    rule: t.Optional(
      t.Array(t.String(), { description: 'any of these rules (the rule of the finding that leads the cause)' }),
    ),
    database_id: t.Optional(t.Array(Uuid(), { description: 'any of these databases' })),
    tag: t.Optional(
      t.Record(t.String(), t.String(), { description: 'database tags: every key given must have this value' }),
    ),
  },
  { title: 'AlertRouteMatch', description: 'every matcher given must match; {} matches every alert' },
)

export const AlertRoute = t.Object(
  {
    id: Uuid(),
    position: t.Integer({
      description:
        "the route's place in the list, from 0: an alert goes to the first route that matches (and later ones while `continue`)",
    }),
    name: t.String(),
    match: RouteMatch,
    destinations: t.Array(Uuid(), {
      description: "ids of the organization's alert destinations it sends to (empty: matched alerts go nowhere)",
    }),
    continue: t.Boolean({ description: 'whether later routes are tried after this one matched' }),
    repeat_interval_s: Nullable(
      t.Integer({ description: 'seconds after which an alert still open is sent again; null: once' }),
    ),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { title: 'AlertRoute' },
)

export const Silence = t.Object(
  {
    id: Uuid(),
    status: t.Union([t.Literal('active'), t.Literal('scheduled'), t.Literal('expired')], {
      description: 'scheduled: starts later (a maintenance window)',
    }),
    database_id: Nullable(Uuid()),
    rule: Nullable(t.String()),
    key: Nullable(t.String({ description: "an alert's key (its cause) or the key of the finding that leads it" })),
    tag: Nullable(t.String({ description: 'a database tag, key=value' })),
    comment: t.String({ description: 'why' }),
    created_by: SilenceAuthor,
    created_at: Timestamp(),
    starts_at: Timestamp(),
    ends_at: Timestamp(),
    expired_early_at: Nullable(Timestamp('when it was expired by DELETE, before its end')),
  },
  { title: 'Silence' },
)
