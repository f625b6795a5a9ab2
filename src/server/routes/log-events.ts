// /api/v1/databases/{id}/log-events: the server log's entries as the agent classified them, newest
// first, a page at a time (an opaque cursor on (ts, id)), filtered by kind, category, minimum severity,
// window and a case-insensitive substring of the message, statement or detail; and
// /log-events/summary: the exact counts per kind and bucket over a window (from the count table, so
// entries the agent counted but did not send whole are in them), with the same kind, category and
// severity filters as the list. The severity filter matches an entry's importance: its logged severity
// raised to its kind's (LOG_KIND_IMPORTANCE: archive failures are logged at LOG yet are errors).
// Shapes: src/shared/api/log-events.ts.
import { Elysia, t } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest } from '../http-error.ts'
import { internalsLimits, logEventLimits } from '../limits.ts'
import type { StoredLogEntry } from '../store/logs/types.ts'
import { severitiesFrom } from '../store/logs/reads.ts'
import { rfc3339 } from '../views.ts'
import {
  LOG_CATEGORIES,
  LOG_KINDS,
  LOG_KIND_NAMES,
  LOG_SEVERITIES,
  type LogCategory,
  type LogKind,
  importanceOf,
} from '../../shared/log-kinds.ts'
import { LogEventList, LogEventSummary } from '../../shared/api/log-events.ts'
import { query } from './schema.ts'
import { clampLimit, databaseFor, limitQuery, parseWindow, windowQuery } from './telemetry-params.ts'

const isKind = (k: string): k is LogKind => Object.hasOwn(LOG_KINDS, k)
const categoryOf = (kind: string): LogCategory => (isKind(kind) ? LOG_KINDS[kind].category : 'other')

/** A comma-separated list of names, each one of `known`; a 400 naming the first unknown one. */
function nameList(value: string | undefined, field: string, known: readonly string[]): string[] | undefined {
  if (value === undefined) return undefined
  const names = [
    ...new Set(
      value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
  ]
  if (names.length === 0) throw badRequest(`${field} must name at least one of: ${known.join(', ')}`)
  for (const name of names) {
    if (!known.includes(name))
      throw badRequest(
        `${field}: unknown value ${JSON.stringify(name.slice(0, 40))}; expected one of: ${known.join(', ')}`,
      )
  }
  return names
}

/** Text with no NUL (PostgreSQL refuses it in a parameter). */
const text = (description: string, maxLength: number, error: string) =>
  t.Optional(t.String({ maxLength, pattern: '^[^\\u0000]*$', error, description }))
/** The kinds (kind and category, both when both are given) and importances a request filters on. */
function kindAndSeverityFilter(query: { kind?: string; category?: string; severity?: string }): {
  kinds?: string[]
  importances?: string[]
} {
  const kinds = nameList(query.kind, 'kind', LOG_KIND_NAMES)
  const categories = nameList(query.category, 'category', LOG_CATEGORIES)
  let selected: string[] | undefined = kinds
  if (categories) {
    const ofCategories = LOG_KIND_NAMES.filter((k) => categories.includes(LOG_KINDS[k].category))
    selected = selected ? selected.filter((k) => ofCategories.includes(k as LogKind)) : ofCategories
  }
  const importances = query.severity === undefined ? undefined : severitiesFrom(query.severity)
  if (query.severity !== undefined && !importances)
    throw badRequest(`severity must be one of: ${LOG_SEVERITIES.join(', ')} (that severity and above)`)
  return { kinds: selected, importances }
}

/** The kind, category and severity filters, the same on the list and the summary. */
const filterQuery = {
  kind: text(
    `log event kinds, comma-separated (${LOG_KIND_NAMES.join(', ')})`,
    2000,
    'kind must be a comma-separated list of log event kinds',
  ),
  category: text(
    `categories, comma-separated (${LOG_CATEGORIES.join(', ')}); with kind: the kinds in both`,
    500,
    'category must be a comma-separated list of categories',
  ),
  severity: text(
    `the lowest severity shown (${LOG_SEVERITIES.join(' < ')}): that one and above, by importance (the logged severity raised to its kind's: archive_failed, server_crash, could_not_fork, out_of_memory and disk_full count as error, recovery and checkpoints_too_frequent as warning)`,
    16,
    'severity must be a severity name',
  ),
}

/** The cursor of the page after `e`: its (ts, id), opaque to the caller. */
const cursorOf = (e: StoredLogEntry) => Buffer.from(JSON.stringify([e.ts, e.id])).toString('base64url')

function parseCursor(value: string | undefined): { ts: number; id: string } | undefined {
  if (value === undefined) return undefined
  try {
    const parsed: unknown = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'))
    if (
      Array.isArray(parsed) &&
      parsed.length === 2 &&
      Number.isSafeInteger(parsed[0]) &&
      typeof parsed[1] === 'string' &&
      parsed[1].length <= 64
    ) {
      return { ts: parsed[0], id: parsed[1] }
    }
  } catch {
    // answered below
  }
  throw badRequest('cursor must be the next_cursor of a previous page')
}

export function logEntryView(e: StoredLogEntry) {
  return {
    id: e.id,
    ts: rfc3339(e.ts),
    kind: e.kind,
    category: categoryOf(e.kind),
    severity: e.severity,
    importance: importanceOf(e.kind, e.severity),
    sqlstate: e.sqlstate,
    message: e.message,
    fingerprint: e.fingerprint,
    pid: e.pid,
    user: e.user,
    database: e.database,
    application: e.application,
    client: e.client,
    detail: e.detail,
    statement: e.statement,
    query_id: e.query_id,
    query_hash: e.query_hash,
    fields: e.fields,
    count: e.count,
  }
}

/** Automatic summary buckets: the smallest of these that cuts the window into at most maxAutoBuckets. */
const AUTO_BUCKETS_S = [60, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400]

export function logEventRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/log-events',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const window = parseWindow(query, clock())
        const { kinds, importances } = kindAndSeverityFilter(query)
        const limit = clampLimit('log_events', query.limit)
        const filter = {
          since: window.since,
          until: window.until,
          kinds,
          importances,
          q: query.q,
          before: parseCursor(query.cursor),
        }
        // One more than the page: whether an older page exists.
        const [found, dropped] = await Promise.all([
          store.logEvents.entries(db.id, filter, limit + 1),
          store.logEvents.dropped(db.id, window),
        ])
        const page = found.slice(0, limit)
        return {
          entries: page.map(logEntryView),
          next_cursor: found.length > limit ? cursorOf(page[page.length - 1]!) : null,
          dropped,
        }
      },
      {
        query: query({
          ...windowQuery,
          ...filterQuery,
          q: text(
            'a text the message, statement or detail contains (case-insensitive; % and _ match themselves)',
            logEventLimits.maxQueryText,
            `q must be a text of at most ${logEventLimits.maxQueryText} characters`,
          ),
          cursor: text('next_cursor of the previous page', 200, 'cursor must be the next_cursor of a previous page'),
          limit: limitQuery('log_events'),
        }),
        response: { 200: LogEventList },
        detail: { summary: "The server log's entries, newest first, a page at a time" },
      },
    )
    .get(
      '/log-events/summary',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const window = parseWindow(query, clock())
        const filter = kindAndSeverityFilter(query)
        const span = window.until - window.since
        // Minute counts are kept 48 hours, hour counts for the retention: a window reaching further back is counted in whole hours.
        const hoursOnly = window.since < window.minuteFloor
        let bucketS: number
        if (query.bucket === undefined) {
          bucketS =
            AUTO_BUCKETS_S.find((b) => span / (b * 1000) <= logEventLimits.maxAutoBuckets) ??
            Math.ceil(span / 1000 / logEventLimits.maxAutoBuckets / 86_400) * 86_400
          if (hoursOnly) bucketS = Math.max(3600, Math.ceil(bucketS / 3600) * 3600)
        } else {
          bucketS = Math.min(Number(query.bucket), internalsLimits.maxBucketSeconds)
          const unit = hoursOnly ? 3600 : 60
          if (bucketS % unit !== 0) {
            throw badRequest(
              hoursOnly
                ? 'bucket must be a multiple of 3600 seconds for a window that starts more than 48 hours ago (counts are kept per hour there)'
                : 'bucket must be a multiple of 60 seconds (counts are kept per minute)',
            )
          }
          if (Math.ceil(span / (bucketS * 1000)) > internalsLimits.maxIntervals) {
            throw badRequest(
              `bucket too small for this window: at most ${internalsLimits.maxIntervals} buckets per request`,
            )
          }
        }
        const rows = await store.logEvents.counts(db.id, window, bucketS * 1000, filter)
        const kinds = new Map<string, { total: number; by_severity: Record<string, number> }>()
        const buckets = new Map<number, Record<string, number>>()
        let total = 0
        for (const r of rows) {
          const k = kinds.get(r.kind) ?? { total: 0, by_severity: {} }
          k.total += r.count
          k.by_severity[r.severity] = (k.by_severity[r.severity] ?? 0) + r.count
          kinds.set(r.kind, k)
          const b = buckets.get(r.bucket) ?? {}
          b[r.kind] = (b[r.kind] ?? 0) + r.count
          buckets.set(r.bucket, b)
          total += r.count
        }
        return {
          from: rfc3339(window.since),
          to: rfc3339(window.until),
          bucket_seconds: bucketS,
          kinds: [...kinds]
            .map(([kind, k]) => ({
              kind,
              category: categoryOf(kind),
              label: isKind(kind) ? LOG_KINDS[kind].label : kind,
              total: k.total,
              by_severity: k.by_severity,
            }))
            .sort((a, b) => b.total - a.total || (a.kind < b.kind ? -1 : 1)),
          buckets: [...buckets].sort((a, b) => a[0] - b[0]).map(([ts, counts]) => ({ ts: rfc3339(ts), counts })),
          total,
        }
      },
      {
        query: query({
          ...windowQuery,
          ...filterQuery,
          bucket: t.Optional(
            t.String({
              pattern: '^0*[1-9][0-9]{0,19}$',
              error: 'bucket must be a whole number of seconds, a multiple of 60',
              description:
                'bucket length in seconds, a multiple of 60 (3600 when the window starts over 48 hours ago); default: chosen to give at most 120 buckets',
            }),
          ),
        }),
        response: { 200: LogEventSummary },
        detail: { summary: 'Exact counts of the server log entries per kind and bucket' },
      },
    )
}
