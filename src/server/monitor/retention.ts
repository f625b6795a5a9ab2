// The monitor's retention pass: per database, telemetry older than its organization's retention is
// deleted and minute buckets are compacted (store retention/retention.ts), with the event loop free between
// databases; then the applied batch ids past their keeping time. schedule.ts runs it every ten minutes.
import type { Deps } from '../context.ts'
import { breathe } from '../doctor/index.ts'
import { logEventLimits, retentionLimits, sessionHistoryLimits } from '../limits.ts'
import { serverMetrics } from '../metrics.ts'
import { isStoreFault } from '../store-outages.ts'
import { minuteFloor } from '../store/window.ts'

const HOUR = 3_600_000
const DAY = 24 * HOUR
const retentionKinds = {
  telemetry: serverMetrics.retentionDeletedRows.labels('telemetry'),
  batch_ids: serverMetrics.retentionDeletedRows.labels('batch_ids'),
}

export interface RetentionSummary {
  databases: number
  rows_deleted: number
  batch_ids_deleted: number
}

/** Retention and compaction at `now`; `retentionDays` is verified organizations' (DBM_RETENTION_DAYS). */
export async function runRetention(deps: Deps, retentionDays: number, now: number): Promise<RetentionSummary> {
  const { store, log } = deps
  const summary: RetentionSummary = { databases: 0, rows_deleted: 0, batch_ids_deleted: 0 }
  const minutesBefore = minuteFloor(now)
  const batch = retentionLimits.deleteBatchRows
  for (const db of await store.retention.databases()) {
    const keepMs = db.org_verified ? retentionDays * DAY : retentionLimits.unverifiedMs
    try {
      // Statement statistics closed over an hour ago are rolled up (ingest rolls up an active database's
      // itself; an agent's clock or buffer up to an hour behind then never lands before the marks).
      const deleted = await store.retention.sweepDatabase(
        db.id,
        {
          before: now - keepMs,
          minutesBefore,
          rollUpTo: now - HOUR,
          everyPollBefore: now - sessionHistoryLimits.everyPollMs,
          logEntriesBefore: now - logEventLimits.entriesMs,
        },
        batch,
      )
      summary.rows_deleted += deleted
      retentionKinds.telemetry.inc(deleted)
      summary.databases++
    } catch (e) {
      // The store's outage itself is logged once by the app.
      if (!isStoreFault(e)) log.error('retention failed', { database: db.id, cause: (e as Error).message })
    }
    await breathe()
  }
  summary.batch_ids_deleted = await store.retention.sweepBatchIds(now - retentionLimits.batchIdsMs, batch)
  retentionKinds.batch_ids.inc(summary.batch_ids_deleted)
  if (summary.rows_deleted > 0)
    log.info('retention', { databases: summary.databases, rows_deleted: summary.rows_deleted })
  return summary
}
