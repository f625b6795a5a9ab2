// Response of POST /api/v1/ingest (the agent's batches): the database the batch went to and its
// server-side settings, which the agent applies from its next cycle.
import { t } from 'elysia'
import { Uuid } from './common.ts'

export const IngestResult = t.Object(
  {
    database_id: Uuid(),
    duplicate: t.Boolean({ description: 'this batch_id had been applied before: the replay was ignored' }),
    settings: t.Object({
      poll_interval_seconds: t.Integer(),
      collect_explain_plans: t.Boolean(),
      collect_replication: t.Boolean(),
      disabled_collectors: t.Array(t.String()),
    }),
    actions_pending: t.Optional(
      t.Integer({
        minimum: 1,
        description:
          'actions asked of this database wait for the agent: it fetches them at once (GET /api/v1/agent/actions)',
      }),
    ),
  },
  { title: 'IngestResult' },
)
