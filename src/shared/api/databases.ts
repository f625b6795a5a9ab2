// Responses of /api/v1/databases: a registered database as the API shows it (src/server/views.ts databaseView).
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'
import { AVAILABILITY_CAUSES } from '../wire.ts'

/**
 * Why a database shows disconnected, and what is known of it (src/server/views.ts availabilityView): the
 * agent reports it down (reason database_down, with since when and the failure's class and message), or
 * the agent itself has been silent for max(3 × poll interval, 60 s) (agent_silent), or no data ever came.
 */
export const AvailabilityFields = {
  reason: Nullable(
    t.UnionEnum(['database_down', 'agent_silent', 'no_data'], {
      description: 'why the status is disconnected; null while connected',
    }),
  ),
  down_since: Nullable(
    Timestamp('while the agent reports the database down: since when (its first failed ping or connection)'),
  ),
  cause: Nullable(
    t.UnionEnum(AVAILABILITY_CAUSES, { description: "while down: the failure's class, from the driver's error code" }),
  ),
  cause_message: Nullable(t.String({ description: "while down: the driver's message, without passwords" })),
  agent_last_heard_at: Nullable(
    Timestamp('when the agent was last heard from: a batch, or its report that the database is down'),
  ),
  data_as_of: Nullable(
    Timestamp('when the latest data shown was collected (while down: the last batch before the outage)'),
  ),
}

/** Up time over a period: up / (up + down); time the agent was silent counts as neither (src/server/uptime.ts). */
export const UptimeFigures = t.Object(
  {
    up_ms: t.Number(),
    down_ms: t.Number(),
    unknown_ms: t.Number({
      description: 'the agent sent nothing, since the registration (time before it counts in none of the figures)',
    }),
    watched_ms: t.Number({ description: 'up_ms + down_ms: the time the ratio stands on' }),
    ratio: Nullable(t.Number({ minimum: 0, maximum: 1, description: 'up / (up + down); null when neither is known' })),
  },
  { title: 'UptimeFigures' },
)

export const Engine = t.Union([t.Literal('postgres'), t.Literal('clickhouse')])

export const Database = t.Object(
  {
    id: Uuid(),
    name: t.String({ description: "the name the agent's config gives it, unique in the organization" }),
    engine: Engine,
    engine_version: Nullable(t.String({ description: 'as the server reports it; null until the first batch' })),
    host: t.String(),
    port: t.Integer(),
    tags: t.Record(t.String(), t.String()),
    poll_interval_seconds: t.Integer(),
    collect_explain_plans: t.Boolean(),
    collect_replication: t.Boolean(),
    disabled_collectors: t.Array(t.String()),
    status: t.Union([t.Literal('connected'), t.Literal('disconnected')], {
      description: 'connected while a batch arrived within max(3 × poll interval, 60 s)',
    }),
    last_seen_at: Nullable(
      Timestamp('when the last batch arrived (reports that the database is down excepted: agent_last_heard_at)'),
    ),
    ...AvailabilityFields,
    availability_30d: t.Optional(
      Nullable(
        t.Number({
          minimum: 0,
          maximum: 1,
          description: 'up time ratio over 30 days (GET /databases and /databases/{id})',
        }),
      ),
    ),
    availability_30d_watched_ms: t.Optional(
      t.Number({ description: 'the time (up + down, of the last 30 days) availability_30d stands on' }),
    ),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { title: 'Database' },
)

/** GET /databases/{id}/health. */
export const DatabaseStatus = t.Object(
  {
    id: Uuid(),
    status: Database.properties.status,
    last_seen_at: Database.properties.last_seen_at,
    ...AvailabilityFields,
  },
  { title: 'DatabaseStatus' },
)

/** One entry of GET /databases/health: connection status and the health monitor's latest diagnosis. */
export const DatabaseHealth = t.Object(
  {
    id: Uuid(),
    name: t.String(),
    status: Database.properties.status,
    last_seen_at: Database.properties.last_seen_at,
    ...AvailabilityFields,
    availability_30d: Nullable(t.Number({ minimum: 0, maximum: 1, description: 'up time ratio over 30 days' })),
    availability_30d_watched_ms: t.Number({
      description: 'the time (up + down, of the last 30 days) availability_30d stands on',
    }),
    health_score: Nullable(t.Number({ description: '0 to 100; null until the health monitor diagnosed the database' })),
    doctor_status: Nullable(t.String({ description: 'healthy, degraded or unhealthy; null until diagnosed' })),
    findings: Nullable(
      t.Object(
        { critical: t.Integer(), warning: t.Integer(), info: t.Integer() },
        { description: 'counts by severity' },
      ),
    ),
    active_queries: Nullable(t.Integer()),
    evaluated_at: Nullable(Timestamp('when the latest diagnosis was made (about once a minute)')),
  },
  { title: 'DatabaseHealth' },
)

/** GET /databases/{id}/availability: its status, up time per UTC day and in all, and its outages. */
export const DatabaseAvailability = t.Object(
  {
    id: Uuid(),
    status: Database.properties.status,
    ...AvailabilityFields,
    days: t.Array(
      t.Composite([
        t.Object({ date: t.String({ description: 'UTC day, YYYY-MM-DD (the first one partial)' }) }),
        UptimeFigures,
      ]),
    ),
    total: UptimeFigures,
    outages: t.Array(
      t.Object({
        started_at: Timestamp(),
        ended_at: Nullable(Timestamp('null while it lasts')),
        cause: t.UnionEnum(AVAILABILITY_CAUSES),
        message: Nullable(t.String()),
      }),
      { description: 'the outages that overlap the period, oldest first' },
    ),
  },
  { title: 'DatabaseAvailability' },
)
