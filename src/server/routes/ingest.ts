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
// The route receives the body's bytes; applyIngest (src/server/ingest-writer/apply.ts) parses, checks and
// applies them, in the ingest writer's thread when `dbm serve` runs one (the event loop keeps the HTTP).
import { Type as T } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { INGEST_PATH, IngestBatch, type IngestResponse } from '../../shared/wire.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { ingestBatchResults, serverMetrics } from '../metrics.ts'
import { IngestResult } from '../../shared/api/ingest.ts'
import { errorAnswers } from '../openapi.ts'
import { WIRE_VERSION, WIRE_VERSION_HEADER } from '../../shared/wire-contract.ts'
import { applyIngest } from '../ingest-writer/apply.ts'
import { batchAgeMs, sentAtMs } from '../batch-age.ts'

/**
 * The body as the API's document shows it. The route receives the body's bytes (app.ts's parse hook)
 * and applyIngest parses and validates them, in the ingest writer's thread when one runs: Elysia does
 * not validate it (`noValidate`), and the document shows what applyIngest accepts.
 */
const DocumentedBody = T.Object(IngestBatch.properties, { additionalProperties: true, noValidate: true })

export function ingestRoutes(deps: Deps) {
  const { store } = deps
  return new Elysia()
    .derive(async ({ request, set }) => {
      set.headers[WIRE_VERSION_HEADER] = String(WIRE_VERSION)
      return { principal: await authenticate(deps, request) }
    })
    .post(
      INGEST_PATH,
      async ({ principal, body, request }): Promise<IngestResponse> => {
        const bytes = body as unknown as ArrayBuffer
        const ageMs = batchAgeMs(request.headers)
        const sentAt = sentAtMs(request.headers)
        const writer = deps.ingestWriter?.running ? deps.ingestWriter : undefined
        const outcome = writer
          ? await writer.ingest(principal.orgId, bytes, ageMs, sentAt)
          : await applyIngest(deps, principal.orgId, bytes, ageMs, sentAt)
        if (outcome.kind === 'applied') {
          // Applied by the writer's own connection: this process's caches learn it here.
          if (writer) store.ingestCommitted(outcome.response.database_id, outcome.closedHoursChanged)
          serverMetrics.ingestRows.inc(outcome.rows)
        }
        ingestBatchResults[outcome.kind].inc()
        return outcome.response
      },
      {
        body: DocumentedBody,
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
