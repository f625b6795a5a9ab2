// What the telemetry routes share: the database in the caller's organization (400 for an id that is not
// a UUID, 404 when it is not theirs, 400 when the endpoint serves the other engine), the since/until
// window, the window cut into `bucket`-second intervals for the timeseries, and limits clamped to their maximum.
import { t } from 'elysia'
import type { Principal } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, notFound } from '../http-error.ts'
import { internalsLimits, resultLimits, telemetryDefaults } from '../limits.ts'
import type { Intervals } from '../store/internals/types.ts'
import { type Window, minuteFloor } from '../store/window.ts'
import type { Engine, RegisteredDatabase } from '../store/types.ts'
import { pathId, query } from './schema.ts'

export async function databaseFor(
  deps: Deps,
  principal: Principal,
  id: string,
  engine?: Engine,
): Promise<RegisteredDatabase> {
  const db = await deps.store.getDatabase(principal.orgId, pathId(id, 'database'))
  if (!db) throw notFound('database')
  if (engine && db.engine !== engine) {
    throw badRequest(`this endpoint serves ${engine} databases; "${db.name}" is a ${db.engine} database`)
  }
  return db
}

/** How the OpenAPI document shows a parameter the route reads from its text (openapi.ts). */
const documentAs = (schema: Record<string, unknown>, description: string) => ({
  description,
  documentAs: { ...schema, description },
})

export const windowQuery = {
  since: t.Optional(
    t.String({
      maxLength: 64,
      error: 'since must be an RFC 3339 timestamp',
      ...documentAs(
        { type: 'string', format: 'date-time' },
        'start of the window, RFC 3339 (default: 24 hours before until)',
      ),
    }),
  ),
  until: t.Optional(
    t.String({
      maxLength: 64,
      error: 'until must be an RFC 3339 timestamp',
      ...documentAs({ type: 'string', format: 'date-time' }, 'end of the window, RFC 3339 (default: now)'),
    }),
  ),
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(?:[Zz]|[+-](\d{2}):?(\d{2}))$/

/**
 * The epoch ms of an RFC 3339 time, NaN when it is not one: a date that does not exist (Date.parse reads
 * 2026-02-30 as 2 March and 24:00 as the next day) or one before 1970 (the API writes none, and years
 * before 0001 have no RFC 3339 form).
 */
function rfc3339Ms(value: string): number {
  const m = RFC3339.exec(value)
  if (!m) return Number.NaN
  const [year, month, day, hour, minute, second, , offHour, offMinute] = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) =>
    m[i] === undefined ? 0 : Number(m[i]),
  )
  const days = new Date(Date.UTC(year!, month!, 0)).getUTCDate()
  if (
    month! < 1 ||
    month! > 12 ||
    day! < 1 ||
    day! > days ||
    hour! > 23 ||
    minute! > 59 ||
    second! > 59 ||
    offHour! > 23 ||
    offMinute! > 59
  )
    return Number.NaN
  const ms = Date.parse(value)
  return ms >= 0 ? ms : Number.NaN
}

function parseTime(value: string | undefined, field: string): number | undefined {
  if (value === undefined) return undefined
  const ms = rfc3339Ms(value)
  if (!Number.isFinite(ms)) throw badRequest(`${field} must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z`)
  return ms
}

const AT_ERROR = 'at must be a time in epoch milliseconds (like 1795644671436) or RFC 3339 (like 2026-01-31T12:00:00Z)'

/** `at` of the history reads: a time as epoch milliseconds or RFC 3339. */
export const atQuery = t.Optional(
  t.String({
    maxLength: 64,
    error: AT_ERROR,
    ...documentAs(
      {
        oneOf: [
          { type: 'string', format: 'date-time' },
          { type: 'string', pattern: '^[0-9]{1,15}$' },
        ],
      },
      'the kept snapshot at or before this time: RFC 3339, or epoch milliseconds (default: the latest)',
    ),
  }),
)

/** The time `at` names, undefined when absent; a 400 when it is neither form (or past the year 9999). */
export function parseAt(value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const ms = /^\d{1,15}$/.test(value) ? Number(value) : rfc3339Ms(value)
  if (!Number.isFinite(ms) || ms > 253_402_300_799_999) throw badRequest(AT_ERROR)
  return ms
}

/** since (default 24 h before until) and until (default now); minute rows are read only where they are kept. */
export function parseWindow(query: { since?: string; until?: string }, now: number): Window & { minuteFloor: number } {
  const until = parseTime(query.until, 'until') ?? now
  const since = parseTime(query.since, 'since') ?? until - telemetryDefaults.windowMs
  if (since >= until) throw badRequest('since must be before until')
  return { since, until, minuteFloor: minuteFloor(now) }
}

/**
 * A positive whole number in decimal digits, as query text. Checked by the schema's pattern rather than
 * by Elysia's numeric coercion, which reads `0x10` as 16 and `1e2` as 100 and does its range checks in a
 * TypeBox Decode step that a minified build skipped (scripts/build.ts); over 20 digits it is refused.
 */
const positiveDigits = (error: string, doc: ReturnType<typeof documentAs>) =>
  t.String({ pattern: '^0*[1-9][0-9]{0,19}$', error, ...doc })

export const limitQuery = (endpoint: keyof typeof resultLimits) =>
  t.Optional(
    positiveDigits(
      `limit must be a whole number from 1 (at most ${resultLimits[endpoint].max} are returned)`,
      documentAs(
        { type: 'integer', minimum: 1, default: resultLimits[endpoint].default },
        `how many to return (default ${resultLimits[endpoint].default}; a larger value returns at most ${resultLimits[endpoint].max})`,
      ),
    ),
  )

export function clampLimit(endpoint: keyof typeof resultLimits, value: string | undefined): number {
  const { default: fallback, max } = resultLimits[endpoint]
  return Math.min(value === undefined ? fallback : Number(value), max)
}

const MIN_BUCKET_SECONDS = 60
const BUCKET_ERROR = `bucket must be a whole number of seconds, at least ${MIN_BUCKET_SECONDS}`

/** since, until and bucket (a whole number of seconds, at least 60, checked to be whole minutes by intervalsFor) of the timeseries endpoints. */
export const seriesQuery = query({
  ...windowQuery,
  bucket: t.Optional(
    positiveDigits(
      BUCKET_ERROR,
      documentAs(
        { type: 'integer', minimum: MIN_BUCKET_SECONDS, multipleOf: MIN_BUCKET_SECONDS },
        'length of each interval in seconds, whole minutes (default: 60 up to a 24-hour window, else 3600)',
      ),
    ),
  ),
})

export type SeriesQuery = { since?: string; until?: string; bucket?: string }

/**
 * The window cut into `bucket`-second intervals (else `fallbackSeconds`, else 60 up to a 24-hour window
 * and 3600 beyond or where minute rows are no longer kept), the bucket clamped to its maximum; a bucket
 * that is not whole minutes, or more than maxIntervals intervals, is a 400.
 */
export function intervalsFor(q: SeriesQuery, now: number, fallbackSeconds?: number): Intervals {
  const requested = q.bucket === undefined ? undefined : Number(q.bucket)
  if (requested !== undefined && requested < MIN_BUCKET_SECONDS) throw badRequest(BUCKET_ERROR)
  const window = parseWindow(q, now)
  const automatic =
    window.until - window.since <= internalsLimits.minuteWindowMs && window.since >= window.minuteFloor ? 60 : 3600
  const bucketSeconds = Math.min(requested ?? fallbackSeconds ?? automatic, internalsLimits.maxBucketSeconds)
  // The data are kept per minute: a bucket of 90 s would hold one minute, then two, by turns.
  if (bucketSeconds % MIN_BUCKET_SECONDS !== 0) {
    const below = Math.floor(bucketSeconds / MIN_BUCKET_SECONDS) * MIN_BUCKET_SECONDS
    throw badRequest(
      `bucket must be a multiple of ${MIN_BUCKET_SECONDS} seconds (the data are kept per minute): use ${below} or ${below + MIN_BUCKET_SECONDS}`,
    )
  }
  const spanSeconds = (window.until - window.since) / 1000
  if (Math.ceil(spanSeconds / bucketSeconds) > internalsLimits.maxIntervals) {
    const fits = Math.ceil(spanSeconds / internalsLimits.maxIntervals)
    const smallest = Math.max(MIN_BUCKET_SECONDS, Math.ceil(fits / MIN_BUCKET_SECONDS) * MIN_BUCKET_SECONDS)
    throw badRequest(
      `bucket too small for this window: at most ${internalsLimits.maxIntervals} intervals per request; use a bucket of at least ${smallest} seconds`,
    )
  }
  return { ...window, bucketSeconds }
}
