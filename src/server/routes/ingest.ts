// POST /api/v1/ingest: one agent batch for one database. The batch names the database by its agent
// config name; the organization's database of that name receives it (registered on first sight).
// A batch_id already applied is acknowledged and ignored, so agent retries never double-count.
import { Elysia } from 'elysia'
import { IngestBatch, type IngestResponse } from '../../shared/wire.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, conflict, forbidden } from '../http-error.ts'
import { fieldLimits, unverifiedDatabaseLimit } from '../limits.ts'

export function ingestRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia()
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .post(
      '/api/v1/ingest',
      async ({ principal, body }): Promise<IngestResponse> => {
        // TypeBox does not apply a Record's key schema to lengths: tag keys are checked here.
        for (const key of Object.keys(body.database.tags ?? {})) {
          if (key.length === 0 || key.length > fieldLimits.tagKey || key.includes('\0')) {
            throw badRequest(`database.tags: keys must be 1 to ${fieldLimits.tagKey} characters`)
          }
        }
        const org = await store.getOrganization(principal.orgId)
        const result = await store.ingest(principal.orgId, body, clock(), org?.verified ? undefined : unverifiedDatabaseLimit)
        if (result.kind === 'limit') {
          throw forbidden(
            `unverified organizations can register ${unverifiedDatabaseLimit} database; verify your email address to register more`,
          )
        }
        if (result.kind === 'engine_mismatch') {
          throw conflict(`database "${result.database.name}" is registered as ${result.database.engine}, but the agent reports ${body.database.engine}`)
        }
        const db = result.database
        return {
          database_id: db.id,
          duplicate: result.kind === 'duplicate',
          settings: {
            poll_interval_seconds: db.poll_interval_seconds,
            collect_explain_plans: db.collect_explain_plans,
            collect_replication: db.collect_replication,
            disabled_collectors: db.disabled_collectors,
          },
        }
      },
      { body: IngestBatch },
    )
}
