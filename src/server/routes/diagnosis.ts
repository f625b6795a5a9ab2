// /api/v1/databases/{id}/overview and /doctor: the database's key figures with its health score, and
// the doctor's diagnosis (status, score, findings worst first, metrics_summary). Both engines. The
// overview takes the dashboard's time range as since/until (both optional, as the telemetry routes take
// them): its top statements and the PostgreSQL cache hit ratio are then of that window; without them they
// are of the last 24 hours and the last hour. The other figures are the latest state either way.
import { Elysia } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { DiagnosisBusy } from '../doctor/diagnosis-worker.ts'
import { type DiagnosisFigures, findingView, groupView, timesAsRfc3339 } from '../doctor/index.ts'
import { currentDiagnosis } from '../doctor/current.ts'
import { HttpError } from '../http-error.ts'
import { availabilityView, rfc3339 } from '../views.ts'
import { type UptimeFigures, uptimeInput, uptimeTotal } from '../uptime.ts'
import { type Window, minuteFloor } from '../store/window.ts'
import { query } from './schema.ts'
import { Doctor, type MetricsSummary, Overview } from '../../shared/api/doctor.ts'
import type { Static } from '@sinclair/typebox'
import { databaseFor, parseWindow, windowQuery } from './telemetry-params.ts'

const DAY = 86_400_000
/** Statements in the overview: the costliest of the last 24 hours by total time. */
const TOP_QUERIES = 5
/** Findings in one doctor answer, worst first. */
const MAX_ISSUES = 100

/** The overview's up time fields: the ratios and the time each stands on. */
const uptimeFields = (day: UptimeFigures, month: UptimeFigures) => ({
  uptime_24h: day.ratio,
  uptime_30d: month.ratio,
  uptime_24h_watched_ms: day.watched_ms,
  uptime_30d_watched_ms: month.watched_ms,
})

const round = (n: number, digits = 3) => Number(n.toFixed(digits))

/** The database's current diagnosis, with a busy diagnosis worker answered 503 (Retry-After 5) instead of a 500. */
async function diagnosisFor(deps: Deps, db: Parameters<typeof currentDiagnosis>[1], now: number) {
  try {
    return await currentDiagnosis(deps, db, now)
  } catch (e) {
    if (e instanceof DiagnosisBusy) throw new HttpError(503, e.message, { 'retry-after': '5' })
    throw e
  }
}

/** The share of block reads found in shared buffers over `window`, from the database family's counters; null without reads. */
async function cacheHitRatio(
  deps: Deps,
  databaseId: string,
  window: Window & { minuteFloor: number },
): Promise<number | null> {
  const bucketSeconds = Math.ceil((window.until - window.since) / 1000)
  const points = await deps.store.internals.metricSeries(databaseId, 'database', { ...window, bucketSeconds })
  let hit = 0
  let read = 0
  for (const p of points) {
    hit += p.values.blks_hit ?? 0
    read += p.values.blks_read ?? 0
  }
  return hit + read > 0 ? round(hit / (hit + read), 4) : null
}

/**
 * The doctor's key figures as the API answers them, times in RFC 3339. The doctor keeps them as a loose
 * map (engine-specific figures, times as epoch ms); the route's response schema checks the result.
 */
/** The figures with their points in time in RFC 3339 (timesAsRfc3339 turns each number under such a key into its string). */
const summaryView = (summary: DiagnosisFigures) => timesAsRfc3339(summary) as unknown as Static<typeof MetricsSummary>

export function diagnosisRoutes(deps: Deps) {
  const { store } = deps
  // The clock is read from deps at each request (not kept here), so a test that sets deps.clock controls
  // the diagnosis' reuse window as well as the answer's times.
  const clock = () => deps.clock()
  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/overview',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const now = clock()
        const ranged = query.since !== undefined || query.until !== undefined
        const window = ranged
          ? parseWindow(query, now)
          : { since: now - DAY, until: now, minuteFloor: minuteFloor(now) }
        const [diagnosis, top, hitRatio, state, spans] = await Promise.all([
          diagnosisFor(deps, db, now),
          store.listQueryStats(db.id, window, 'total_time', TOP_QUERIES),
          ranged && db.engine === 'postgres' ? cacheHitRatio(deps, db.id, window) : undefined,
          store.databaseAvailability.state(db.id),
          store.databaseAvailability.spans(db.id, now - 30 * DAY),
        ])
        // Up time over 24 hours and 30 days; the agent's silences count as neither up nor down (uptime.ts).
        const input = uptimeInput(db, state, spans, now)
        const notes = await store.latestSnapshot(db.id, 'collector_notes')
        const { findings: _counts, rules_evaluated: _rules, ...figures } = summaryView(diagnosis.metrics_summary)
        return {
          engine: db.engine,
          last_seen_at: rfc3339(db.last_seen_at),
          ...availabilityView(db, state, now),
          ...uptimeFields(uptimeTotal(input, 1), uptimeTotal(input, 30)),
          health_score: diagnosis.score,
          ...figures,
          ...(hitRatio !== undefined ? { cache_hit_ratio: hitRatio } : {}),
          // What the agent's collectors reported in its latest batch (e.g. query_log disabled).
          agent_notes: Array.isArray(notes?.payload) ? notes.payload : [],
          top_queries: top.map((q) => ({
            query_hash: q.query_hash,
            query_text: q.query_text,
            total_calls: q.total_calls,
            total_time_ms: round(q.total_time_ms),
            mean_time_ms: round(q.mean_time_ms),
          })),
          // The window asked for, as read (top_queries and cache_hit_ratio are of it).
          ...(ranged ? { since: rfc3339(window.since), until: rfc3339(window.until) } : {}),
        }
      },
      {
        query: query(windowQuery),
        response: { 200: Overview },
        detail: { summary: "The database's key figures, health score, agent notes and costliest statements" },
      },
    )
    .get(
      '/doctor',
      async ({ principal, params }) => {
        const db = await databaseFor(deps, principal, params.id)
        const org = await store.getOrganization(principal.orgId)
        const diagnosis = await diagnosisFor(deps, db, clock())
        return {
          status: diagnosis.status,
          score: diagnosis.score,
          evaluated_at: rfc3339(diagnosis.evaluated_at),
          top_issues: diagnosis.findings.slice(0, MAX_ISSUES).map((f) => findingView(f, org?.verified ?? false)),
          groups: diagnosis.groups.slice(0, MAX_ISSUES).map((g) => groupView(g, org?.verified ?? false)),
          metrics_summary: summaryView(diagnosis.metrics_summary),
        }
      },
      {
        response: { 200: Doctor },
        detail: { summary: "The doctor's diagnosis: status, score, findings worst first and the key figures" },
      },
    )
}
