// What the telemetry routes share: the database in the caller's organization (404 otherwise, 400 when
// the endpoint serves the other engine), the since/until window, and limits clamped to their maximum.
import { t } from 'elysia'
import type { Principal } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, notFound } from '../http-error.ts'
import { resultLimits, telemetryDefaults } from '../limits.ts'
import type { Engine, RegisteredDatabase } from '../store/types.ts'

export async function databaseFor(deps: Deps, principal: Principal, id: string, engine?: Engine): Promise<RegisteredDatabase> {
  const db = await deps.store.getDatabase(principal.orgId, id)
  if (!db) throw notFound('database')
  if (engine && db.engine !== engine) {
    throw badRequest(`this endpoint serves ${engine} databases; "${db.name}" is a ${db.engine} database`)
  }
  return db
}

export const windowQuery = {
  since: t.Optional(t.String({ maxLength: 64, error: 'since must be an RFC 3339 timestamp' })),
  until: t.Optional(t.String({ maxLength: 64, error: 'until must be an RFC 3339 timestamp' })),
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})$/

function parseTime(value: string | undefined, field: string): number | undefined {
  if (value === undefined) return undefined
  const ms = RFC3339.test(value) ? Date.parse(value) : Number.NaN
  if (!Number.isFinite(ms)) throw badRequest(`${field} must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z`)
  return ms
}

/** since (default 24 h before until) and until (default now). */
export function parseWindow(query: { since?: string; until?: string }, now: number): { since: number; until: number } {
  const until = parseTime(query.until, 'until') ?? now
  const since = parseTime(query.since, 'since') ?? until - telemetryDefaults.windowMs
  if (since >= until) throw badRequest('since must be before until')
  return { since, until }
}

export const limitQuery = (endpoint: keyof typeof resultLimits) =>
  t.Optional(t.Integer({ minimum: 1, error: `limit must be a whole number from 1 (at most ${resultLimits[endpoint].max} are returned)` }))

export function clampLimit(endpoint: keyof typeof resultLimits, value: number | undefined): number {
  const { default: fallback, max } = resultLimits[endpoint]
  return Math.min(value ?? fallback, max)
}
