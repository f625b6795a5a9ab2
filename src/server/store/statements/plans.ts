// Statements' execution plans in explain_plans: written from each batch's explain_plans section, read
// back per statement over a window with each plan marked where its shape changed.
import type { ExplainPlan, IngestBatch } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import type { Writes } from '../ingest/batch.ts'
import type { Window } from '../window.ts'

const PLAN_COLUMNS = [
  'database_id',
  'query_hash',
  'ts',
  'plan_hash',
  'source',
  'total_cost',
  'actual_time_ms',
  'seq_scans',
  'index_scans',
  'rows_estimated',
  'rows_actual',
  'plan_json',
] as const

/** The batch's explain_plans section, if any. */
export function applyExplainPlans(writes: Writes, databaseId: string, batch: IngestBatch): void {
  const plans = batch.explain_plans
  if (!plans?.length) return
  writes.upsert(
    'explain_plans',
    PLAN_COLUMNS,
    plans.map((p) => [
      databaseId,
      p.query_hash,
      p.ts,
      p.plan_hash,
      p.source,
      p.total_cost,
      p.actual_time_ms,
      p.seq_scans,
      p.index_scans,
      p.rows_estimated,
      p.rows_actual,
      JSON.stringify(p.plan_json),
    ]),
  )
}

export interface StoredPlan {
  ts: number
  plan_json: unknown
  plan_hash: string
  total_cost: number | null
  actual_time_ms: number | null
  seq_scans: number
  index_scans: number
  rows_estimated: number | null
  rows_actual: number | null
  source: ExplainPlan['source']
  /** The plan differs from the one before it for this statement. */
  plan_changed: boolean
}

const nullableNumber = (v: unknown) => (v === null || v === undefined ? null : Number(v))

/** A statement's plans in the window, newest first, each marked when its shape differs from the previous plan. */
export async function listPlans(
  driver: SqlDriver,
  databaseId: string,
  hash: string,
  window: Window,
  limit: number,
): Promise<StoredPlan[]> {
  const rows = await driver.all(
    `SELECT * FROM explain_plans WHERE database_id = $1 AND query_hash = $2 AND ts >= $3 AND ts < $4 ORDER BY ts DESC LIMIT $5`,
    [databaseId, hash, window.since, window.until, limit + 1],
  )
  // The plan just before the oldest returned one decides whether that one changed.
  const before =
    rows.length <= limit
      ? await driver.get<{ plan_hash: string }>(
          'SELECT plan_hash FROM explain_plans WHERE database_id = $1 AND query_hash = $2 AND ts < $3 ORDER BY ts DESC LIMIT 1',
          [databaseId, hash, window.since],
        )
      : undefined
  return rows.slice(0, limit).map((r, i) => {
    const older = rows[i + 1]?.plan_hash ?? before?.plan_hash
    return {
      ts: Number(r.ts),
      plan_json: JSON.parse(String(r.plan_json)),
      plan_hash: String(r.plan_hash),
      total_cost: nullableNumber(r.total_cost),
      actual_time_ms: nullableNumber(r.actual_time_ms),
      seq_scans: Number(r.seq_scans),
      index_scans: Number(r.index_scans),
      rows_estimated: nullableNumber(r.rows_estimated),
      rows_actual: nullableNumber(r.rows_actual),
      source: String(r.source) as ExplainPlan['source'],
      plan_changed: older !== undefined && older !== r.plan_hash,
    }
  })
}
