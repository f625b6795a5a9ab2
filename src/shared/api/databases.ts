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
