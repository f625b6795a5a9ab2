// An agent's batch from its body's bytes to its committed answer, without Elysia: parsed (json-body.ts),
// validated against the ingest schema with the same messages as the app's validation (400), its unknown
// fields left out (unknown-fields.ts), its clock and tag keys checked, applied by store.ingest and
// answered with the database's settings. The ingest writer's thread runs it (worker.ts); the route runs
// it itself when no writer runs (an app built without one: tests, a writer that cannot start).
import { Type as T } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import type { Logger } from '../../shared/log.ts'
import { IngestBatch, type IngestResponse } from '../../shared/wire.ts'
import { HttpError, badRequest, conflict, forbidden } from '../http-error.ts'
import { parseJsonText } from '../json-body.ts'
import { fieldLimits, ingestClockSkewMs, unknownIngestFields, unverifiedDatabaseLimit } from '../limits.ts'
import type { Store } from '../store/types.ts'
import { stripUnknownFields } from '../unknown-fields.ts'
import { customErrorOf, validationMessage } from '../validation-message.ts'

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

/** A committed (or replayed) batch: the agent's answer, and what the main thread's metrics and caches learn. */
export interface IngestOutcome {
  response: IngestResponse
  kind: 'applied' | 'duplicate'
  /** Applied: the batch's rows (batchRows), for dbm_ingest_rows_total. */
  rows: number
  /** Applied: the batch changed closed hours' statement sums (Store.ingestCommitted). */
  closedHoursChanged: boolean
}

export interface ApplyContext {
  store: Store
  clock: () => number
  log: Logger
}

let check: TypeCheck<typeof IngestBody> | undefined

/** The body as an IngestBatch, or the 400 the app's validation answers for it. */
function validate(value: unknown): IngestBatch {
  check ??= TypeCompiler.Compile(IngestBody)
  if (check.Check(value)) return value as IngestBatch
  const first = check.Errors(value).First()
  throw badRequest(validationMessage({ type: 'body', valueError: first, customError: customErrorOf(first?.schema) }))
}

/**
 * `body`: the request's bytes (empty or absent: no body); `ageMs`: how long the agent held the batch
 * (batch-age.ts, from its header); `sentAt`: the agent's clock as it sent it (X-Dbm-Sent-At, batch-age.ts;
 * undefined from an older agent). Throws an HttpError for a refused batch.
 */
export async function applyIngest(
  ctx: ApplyContext,
  orgId: string,
  body: ArrayBuffer | Uint8Array | undefined,
  ageMs?: number,
  sentAt?: number,
): Promise<IngestOutcome> {
  const { store, clock, log } = ctx
  const text = body && body.byteLength > 0 ? new TextDecoder().decode(body) : undefined
  const received = validate(parseJsonText(text))
  const { value: batch, paths, more } = stripUnknownFields(IngestBatch, received, unknownIngestFields)
  if (paths.length > 0 && log.enabled('debug')) {
    log.debug('ingest: unknown fields ignored', {
      batch_id: batch.batch_id,
      database: batch.database.name,
      agent_version: batch.agent_version,
      fields: paths.map((f) => f.slice(0, unknownIngestFields.namedChars)).join(','),
      more: more > 0 ? more : undefined,
    })
  }
  const ahead = batch.collected_at - clock()
  if (ahead > ingestClockSkewMs) {
    const by = ahead < 48 * 3_600_000 ? `${Math.ceil(ahead / 60_000)} min` : `${Math.floor(ahead / 86_400_000)} days`
    throw badRequest(
      `invalid collected_at: ${new Date(batch.collected_at).toISOString()} is ${by} ahead of the server's clock (at most ${ingestClockSkewMs / 60_000} min allowed); check the clock of the agent's host`,
    )
  }
  // TypeBox does not apply a Record's key schema to lengths: tag keys are checked here.
  for (const key of Object.keys(batch.database.tags ?? {})) {
    if (key.length === 0 || key.length > fieldLimits.tagKey || key.includes('\0')) {
      throw badRequest(`database.tags: keys must be 1 to ${fieldLimits.tagKey} characters`)
    }
  }
  const org = await store.getOrganization(orgId)
  const result = await store.ingest(
    orgId,
    batch,
    clock(),
    org?.verified ? undefined : unverifiedDatabaseLimit,
    ageMs,
    sentAt,
  )
  if (result.kind === 'limit') {
    throw forbidden(
      `unverified organizations can register ${unverifiedDatabaseLimit} database; verify your email address to register more`,
    )
  }
  if (result.kind === 'engine_mismatch') {
    throw conflict(
      `database "${result.database.name}" is registered as ${result.database.engine}, but the agent reports ${batch.database.engine}`,
    )
  }
  const db = result.database
  const pending = db.engine === 'postgres' ? await store.actions.pendingActions(db.id, clock()) : 0
  return {
    kind: result.kind,
    rows: result.kind === 'applied' ? batchRows(batch) : 0,
    closedHoursChanged: result.closedHoursChanged ?? false,
    response: {
      database_id: db.id,
      duplicate: result.kind === 'duplicate',
      ...(pending > 0 ? { actions_pending: pending } : {}),
      settings: {
        poll_interval_seconds: db.poll_interval_seconds,
        collect_explain_plans: db.collect_explain_plans,
        collect_replication: db.collect_replication,
        disabled_collectors: db.disabled_collectors,
      },
    },
  }
}

/** An HttpError as it crosses a thread: status, message, headers. */
export interface RefusalMessage {
  status: number
  message: string
  headers: Record<string, string>
}

export function toRefusal(e: HttpError): RefusalMessage {
  return { status: e.status, message: e.message, headers: e.headers }
}

export function fromRefusal(m: RefusalMessage): HttpError {
  return new HttpError(m.status, m.message, m.headers)
}
