// Responses of /api/v1/databases: a registered database as the API shows it (src/server/views.ts databaseView).
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'

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
    last_seen_at: Nullable(Timestamp('when the last batch arrived')),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { title: 'Database' },
)

/** GET /databases/{id}/health. */
export const DatabaseStatus = t.Object(
  { id: Uuid(), status: Database.properties.status, last_seen_at: Database.properties.last_seen_at },
  { title: 'DatabaseStatus' },
)

/** One entry of GET /databases/health: connection status and the health monitor's latest diagnosis. */
export const DatabaseHealth = t.Object(
  {
    id: Uuid(),
    name: t.String(),
    status: Database.properties.status,
    last_seen_at: Database.properties.last_seen_at,
    health_score: Nullable(t.Number({ description: '0 to 100; null until the health monitor diagnosed the database' })),
    doctor_status: Nullable(t.String({ description: 'healthy, degraded or unhealthy; null until diagnosed' })),
    findings: Nullable(t.Object({ critical: t.Integer(), warning: t.Integer(), info: t.Integer() }, { description: 'counts by severity' })),
    active_queries: Nullable(t.Integer()),
    evaluated_at: Nullable(Timestamp('when the latest diagnosis was made (about once a minute)')),
  },
  { title: 'DatabaseHealth' },
)
