// /api/v1/databases/{id}/overview and /doctor: the database's key figures with its health score, and
// the doctor's diagnosis (status, score, findings worst first, metrics_summary). Both engines.
import { Elysia } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { DiagnosisBusy } from '../doctor/diagnosis-worker.ts'
import { diagnoseRecent, findingView } from '../doctor/index.ts'
import { HttpError } from '../http-error.ts'
import { rfc3339, healthStatus } from '../views.ts'
import { minuteFloor } from '../store/window.ts'
import { databaseFor } from './telemetry-params.ts'

const DAY = 86_400_000
/** Statements in the overview: the costliest of the last 24 hours by total time. */
const TOP_QUERIES = 5
/** Findings in one doctor answer, worst first. */
const MAX_ISSUES = 100

const round = (n: number, digits = 3) => Number(n.toFixed(digits))

/** diagnoseRecent, with a busy diagnosis worker answered 503 (Retry-After 5) instead of a 500. */
async function diagnosisFor(deps: Deps, db: Parameters<typeof diagnoseRecent>[1], now: number) {
  try {
    return await diagnoseRecent(deps, db, now)
  } catch (e) {
    if (e instanceof DiagnosisBusy) throw new HttpError(503, e.message, { 'retry-after': '5' })
    throw e
  }
}

export function healthRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get('/overview', async ({ principal, params }) => {
      const db = await databaseFor(deps, principal, params.id)
      const now = clock()
      const [diagnosis, top] = await Promise.all([
        diagnosisFor(deps, db, now),
        store.listQueryStats(db.id, { since: now - DAY, until: now, minuteFloor: minuteFloor(now) }, 'total_time', TOP_QUERIES),
      ])
      const notes = await store.latestSnapshot(db.id, 'collector_notes')
      const { findings: _counts, rules_evaluated: _rules, last_autovacuum, ...figures } = diagnosis.metrics_summary as Record<string, unknown>
      return {
        engine: db.engine,
        status: healthStatus(db, now),
        last_seen_at: rfc3339(db.last_seen_at),
        health_score: diagnosis.score,
        ...figures,
        ...(db.engine === 'postgres' ? { last_autovacuum: rfc3339(last_autovacuum as number | null) } : {}),
        // What the agent's collectors reported in its latest batch (e.g. query_log disabled).
        agent_notes: Array.isArray(notes?.payload) ? notes.payload : [],
        top_queries: top.map((q) => ({
          query_hash: q.query_hash,
          query_text: q.query_text,
          total_calls: q.total_calls,
          total_time_ms: round(q.total_time_ms),
          mean_time_ms: round(q.mean_time_ms),
        })),
      }
    })
    .get('/doctor', async ({ principal, params }) => {
      const db = await databaseFor(deps, principal, params.id)
      const org = await store.getOrganization(principal.orgId)
      const diagnosis = await diagnosisFor(deps, db, clock())
      const summary = diagnosis.metrics_summary as Record<string, unknown>
      return {
        status: diagnosis.status,
        score: diagnosis.score,
        evaluated_at: rfc3339(diagnosis.evaluated_at),
        top_issues: diagnosis.findings.slice(0, MAX_ISSUES).map((f) => findingView(f, org?.verified ?? false)),
        metrics_summary: db.engine === 'postgres' ? { ...summary, last_autovacuum: rfc3339(summary.last_autovacuum as number | null) } : summary,
      }
    })
}
