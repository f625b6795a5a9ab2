// Responses of /api/v1/databases/{id}/events: what changed, newest first.
import { t } from 'elysia'
import { Severity, Timestamp } from './common.ts'

/** The kinds of events, as the store derives and keeps them (src/server/store/events/). */
export const EVENT_KINDS = [
  'restart',
  'version_change',
  'table_created',
  'table_dropped',
  'index_created',
  'index_valid',
  'index_invalid',
  'index_dropped',
  'setting_change',
  'stats_reset',
  'agent_connected',
  'agent_disconnected',
  'alert_opened',
  'alert_resolved',
  'plan_change',
  /** A server log entry of an important kind (src/shared/log-kinds.ts TIMELINE_LOG_KINDS): crash, out of memory, disk full, ... */
  'log_event',
  /** The agent reported the database unreachable (an outage starts; its cause in the title, the driver's message in the detail). */
  'database_down',
  /** The database answered the agent again (the outage ends; how long it lasted in the detail). */
  'database_up',
  /** A cancel or terminate the dashboard asked of the agent: asked, then run, refused, failed or expired (routes/actions.ts). */
  'session_action',
] as const

/** An event; the optional fields are left out when empty. */
export const DbEvent = t.Object(
  {
    ts: Timestamp('when it happened (as the agent or the server saw it)'),
    kind: t.UnionEnum(EVENT_KINDS),
    severity: t.Optional(Severity),
    title: t.String({ description: 'one line, at most 500 characters' }),
    detail: t.Optional(t.String({ description: 'at most 2,000 characters' })),
    object: t.Optional(
      t.String({
        description: "what it is about: a table's or index's schema.name, a setting's name, a statement's hash",
      }),
    ),
    link: t.Optional(t.String({ description: "the dashboard's page about it (a hash route, #/...)" })),
  },
  { title: 'DbEvent' },
)
