// POST /api/v1/ingest: one agent batch for one database. The batch names the database by its agent
// config name; the organization's database of that name receives it (registered on first sight).
// A batch_id already applied is acknowledged and ignored, so agent retries never double-count.
// Fields this server does not know, at any level, are ignored (a newer agent may send them): the known
// ones are validated as always, the unknown ones left out before the store sees the batch and named in
// one debug line; a batch with more distinct unknown paths than unknownIngestFields allows is a 400.
// A batch collected further ahead of the server's clock than ingestClockSkewMs is a 400 (the reads would
// otherwise show it as the latest sample until the clock caught up).
// Every answer, refusals included, carries the wire version this server speaks (X-Dbm-Wire-Version,
// src/shared/wire-contract.ts): an agent sends only the fields that version knows.
import { Type as T } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { INGEST_PATH, IngestBatch, type IngestResponse } from '../../shared/wire.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, conflict, forbidden } from '../http-error.ts'
import { ingestBatchResults, serverMetrics } from '../metrics.ts'
import { fieldLimits, ingestClockSkewMs, unknownIngestFields, unverifiedDatabaseLimit } from '../limits.ts'
import { stripUnknownFields } from '../unknown-fields.ts'
import { batchAgeMs, sentAtMs } from '../batch-age.ts'
import { IngestResult } from '../../shared/api/ingest.ts'
import { errorAnswers } from '../openapi.ts'
import { WIRE_VERSION, WIRE_VERSION_HEADER } from '../../shared/wire-contract.ts'

/**
 * The batch as the route validates it: unknown top-level fields allowed, as TypeBox allows them at
 * every nested level (Elysia otherwise refuses them at the top level of a body).
 */
export const IngestBody = T.Object(IngestBatch.properties, { additionalProperties: true })

/** The entries of a batch's lists (statements, tables, activity...), its collector errors and notes left out. */
export function batchRows(batch: IngestBatch): number {
  let rows = 0
  for (const [key, value] of Object.entries(batch)) {
    if (Array.isArray(value) && key !== 'collector_errors' && key !== 'collector_notes') rows += value.length
  }
  return rows
}

export function ingestRoutes(deps: Deps) {
  const { store, clock, log } = deps
  return new Elysia()
    .derive(async ({ request, set }) => {
      set.headers[WIRE_VERSION_HEADER] = String(WIRE_VERSION)
      return { principal: await authenticate(deps, request) }
    })
    .post(
      INGEST_PATH,
      async ({ principal, body: received, request }): Promise<IngestResponse> => {
        const { value: body, paths, more } = stripUnknownFields(IngestBatch, received, unknownIngestFields)
        if (paths.length > 0 && log.enabled('debug')) {
          log.debug('ingest: unknown fields ignored', {
            batch_id: body.batch_id,
            database: body.database.name,
            agent_version: body.agent_version,
            fields: paths.map((f) => f.slice(0, unknownIngestFields.namedChars)).join(','),
            more: more > 0 ? more : undefined,
          })
        }
        const ahead = body.collected_at - clock()
        if (ahead > ingestClockSkewMs) {
          const by =
            ahead < 48 * 3_600_000 ? `${Math.ceil(ahead / 60_000)} min` : `${Math.floor(ahead / 86_400_000)} days`
          throw badRequest(
            `invalid collected_at: ${new Date(body.collected_at).toISOString()} is ${by} ahead of the server's clock (at most ${ingestClockSkewMs / 60_000} min allowed); check the clock of the agent's host`,
          )
        }
        // TypeBox does not apply a Record's key schema to lengths: tag keys are checked here.
        for (const key of Object.keys(body.database.tags ?? {})) {
          if (key.length === 0 || key.length > fieldLimits.tagKey || key.includes('\0')) {
            throw badRequest(`database.tags: keys must be 1 to ${fieldLimits.tagKey} characters`)
          }
        }
        const org = await store.getOrganization(principal.orgId)
        const result = await store.ingest(
          principal.orgId,
          body,
          clock(),
          org?.verified ? undefined : unverifiedDatabaseLimit,
          batchAgeMs(request.headers),
          sentAtMs(request.headers),
        )
        if (result.kind === 'limit') {
          throw forbidden(
            `unverified organizations can register ${unverifiedDatabaseLimit} database; verify your email address to register more`,
          )
        }
        if (result.kind === 'engine_mismatch') {
          throw conflict(
            `database "${result.database.name}" is registered as ${result.database.engine}, but the agent reports ${body.database.engine}`,
          )
        }
        const db = result.database
        ingestBatchResults[result.kind].inc()
        if (result.kind === 'applied') serverMetrics.ingestRows.inc(batchRows(body))
        const pending = db.engine === 'postgres' ? await store.actions.pendingActions(db.id, clock()) : 0
        return {
          database_id: db.id,
          duplicate: result.kind === 'duplicate',
          ...(pending > 0 ? { actions_pending: pending } : {}),
          settings: {
            poll_interval_seconds: db.poll_interval_seconds,
            collect_explain_plans: db.collect_explain_plans,
            collect_replication: db.collect_replication,
            disabled_collectors: db.disabled_collectors,
          },
        }
      },
      {
        body: IngestBody,
        response: { 200: IngestResult },
        detail: {
          summary: "An agent's batch for one database and cycle (an API key); registers the database on first sight",
          responses: errorAnswers({
            403: 'an unverified organization has its one database already',
            409: "the batch's engine is not the registered database's",
          }),
        },
      },
    )
}
