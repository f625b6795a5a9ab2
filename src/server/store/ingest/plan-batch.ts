// Applying an ingest batch to the store (once per batch_id, in the caller's transaction): each section
// goes to the module that keeps it. Counter deltas accumulate into buckets at ingest. Statement
// statistics and tables and indexes go to 60-second buckets, rolled up into coarser ones after their
// span (statements/writes.ts, objects/writes.ts, rollups/rollups.ts: the rollup runs first among the
// batch's writes); the other bucketed sections (internals/writes.ts, clickhouse/writes.ts) go to 60-second
// and 1-hour buckets at once; plans to statements/plans.ts; the latest-only sections to snapshots.ts, and
// activity and locks also to their history (sessions/writes.ts); the events it makes to events/events.ts;
// the server log's entries and counts to logs/writes.ts; the database's availability (its outages) to
// availability/writes.ts; the settings' details to server-settings/writes.ts; custom metrics to custom-metrics/writes.ts;
// the agent's clock offset to agent-clock/writes.ts.
import type { IngestBatch } from '../../../shared/wire.ts'
import type { SqlDialect } from '../dialect.ts'
import type { SqlDriver } from '../driver.ts'
import type { SqlStatement } from '../sql.ts'
import { applyClickHouse } from '../clickhouse/writes.ts'
import { hostWrites } from '../host/writes.ts'
import { applyEvents, applyLogTimeline } from '../events/events.ts'
import { availabilityWrites } from '../availability/writes.ts'
import { planCustomMetrics } from '../custom-metrics/writes.ts'
import { applyInternals } from '../internals/writes.ts'
import { logEventWrites } from '../logs/writes.ts'
import { applyObjects } from '../objects/writes.ts'
import { applyExplainPlans } from '../statements/plans.ts'
import { applySessionHistory } from '../sessions/writes.ts'
import { planRollup } from '../rollups/rollups.ts'
import { serverSettingsWrites } from '../server-settings/writes.ts'
import { applySnapshots } from '../snapshots.ts'
import { applyAgentClock } from '../agent-clock/writes.ts'
import { type IngestEffects, type KnownTexts, applyQueryStats } from '../statements/writes.ts'
import { coveredSeconds } from '../spread.ts'
import { Reads, Writes } from './batch.ts'
import type { RegisteredDatabase } from '../databases/types.ts'

/** A batch's statements for one database: the reads its writes depend on, then the writes once those are sent. */
export interface PlannedBatch {
  /** Sent by the caller (Reads.send), alone or after statements of its own in the same exchange. */
  reads: Reads
  /**
   * Adds and runs every write, then `also` (the caller's statements of the same transaction), in one
   * exchange; with `last`, the transaction's last statements, its COMMIT in that exchange (runLast) where the driver can.
   * `database`: the database's row as it was before the batch (the events compare the batch with it).
   */
  write(
    tx: SqlDriver,
    database: RegisteredDatabase,
    also?: readonly SqlStatement[],
    last?: boolean,
  ): Promise<IngestEffects>
}

/**
 * Plans every section of the batch that this server version stores, for the database `databaseId`:
 * registers the reads (nothing is sent; a plan whose reads are never sent is simply dropped). `now`:
 * the server's time of receipt; `ageMs`: how long ago the agent says it collected the batch (from its
 * buffer; 0 for a current batch); `sentAt`: the agent's clock when it sent it (undefined: not said).
 */
export function planBatch(
  sqlDialect: SqlDialect,
  databaseId: string,
  batch: IngestBatch,
  known?: KnownTexts,
  now = Date.now(),
  ageMs = 0,
  sentAt?: number,
  rollupSpreadMs = 0,
): PlannedBatch {
  // When the batch's cycle ran, on the server's clock: orders the latest snapshots (snapshots.ts).
  const receivedAt = now - ageMs
  const effects: IngestEffects = { closedHoursChanged: false, texts: [], textsAt: 0 }
  const reads = new Reads()
  const writeQueryStats = batch.query_stats
    ? applyQueryStats(
        sqlDialect,
        databaseId,
        batch.collected_at,
        coveredSeconds(batch),
        batch.query_stats,
        known,
        effects,
      )
    : undefined
  // Rolled up by the batches that carry statements, tables or indexes (before the reads of the sections).
  const rolls = writeQueryStats !== undefined || batch.tables !== undefined || batch.indexes !== undefined
  const rollup = rolls ? planRollup(reads, sqlDialect, databaseId, batch.collected_at, now, rollupSpreadMs) : undefined
  const writeObjects = applyObjects(reads, databaseId, batch)
  const writeInternals = applyInternals(reads, databaseId, batch)
  const writeEvents = applyEvents(reads, databaseId, batch)
  const writeAvailability = availabilityWrites.plan(reads, databaseId, batch)
  const writeCustom = planCustomMetrics(reads, databaseId, batch)
  return {
    reads,
    async write(tx, database, also = [], last = false) {
      const writes = new Writes(tx.sqlDialect)
      const rolled = rollup?.(writes)
      // Hourly statement buckets were written: cached closed-hour sums are stale.
      if (rolled && rolled.marks.hours !== rolled.before.hours) effects.closedHoursChanged = true
      if (rolled) writeQueryStats?.(writes, rolled)
      applyExplainPlans(writes, databaseId, batch)
      writeObjects(writes, rolled?.marks)
      writeInternals(writes)
      applyClickHouse(writes, databaseId, batch)
      applySnapshots(writes, databaseId, batch, receivedAt)
      hostWrites.applyHost(writes, databaseId, batch, receivedAt)
      if (sentAt !== undefined) applyAgentClock(writes, databaseId, batch.collected_at, sentAt, now)
      serverSettingsWrites.applySettingDetails(writes, databaseId, batch)
      writeEvents(writes, database)
      writeAvailability(writes, database, now)
      applySessionHistory(writes, databaseId, batch)
      logEventWrites.apply(writes, databaseId, batch)
      applyLogTimeline(writes, databaseId, batch)
      writeCustom(writes)
      writes.statements.push(...also)
      await (last && tx.runLast ? tx.runLast(writes.statements) : tx.runAll(writes.statements))
      return effects
    },
  }
}
