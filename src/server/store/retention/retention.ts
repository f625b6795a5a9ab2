// Retention: deletes each database's telemetry once it is older than its organization's retention, and
// compacts the minute buckets (the hourly buckets hold the same sums; reads take the hours instead, see
// windowRanges in window.ts and statRanges in rollups/rollups.ts). Statement statistics, tables and
// indexes are rolled up first (rollups/rollups.ts), so no minute row goes before its hour holds it. Every delete goes in batches of a bounded number of rows, each its
// own statement, so a large store is never held for long and requests run in between. A batch is picked
// by row identity: the ctid on PostgreSQL, the rowid on SQLite, or on SQLite's WITHOUT ROWID tables
// (migration 10) the primary key.
// A bucket row goes when its whole bucket is older than the cutoff.
import type { SqlDialect } from '../dialect.ts'
import type { SqlDriver } from '../driver.ts'
import type { MetricSource } from '../internals/types.ts'
import { sweptActions } from '../actions/writes.ts'
import { rollUpQuietDatabase } from '../rollups/rollups.ts'
import { SESSION_HISTORY_TABLES, compactSessionHistory } from '../sessions/writes.ts'
import { TEXT_REFRESH_MS } from '../statements/writes.ts'
import { HOUR_MS, MINUTE_MS, floorTo } from '../window.ts'

/** Tables of 60-second and hourly buckets whose key starts (database_id, resolution, bucket), or has an index that does. */
const BUCKET_TABLES = [
  'query_stats',
  'wait_stats',
  'replication_lag',
  'replication_slot_lag',
  'table_stats',
  'index_stats',
  'log_counts',
] as const
/** Bucket tables keyed (database_id, source, resolution, bucket, ...): swept source by source to use that key. */
const METRIC_TABLES = ['metric_counters', 'metric_gauges'] as const
/** Every metric source (a new source fails to compile until it is listed here). */
const METRIC_SOURCES: Record<MetricSource, true> = {
  bgwriter: true,
  wal: true,
  database: true,
  io: true,
  server: true,
  disk: true,
  parts: true,
  ingest: true,
  host: true,
  custom: true,
}
/** Tables of timestamped rows and their time column: plans, and the latest sections and snapshots (gone when that old). */
const TIMED_TABLES = {
  explain_plans: 'ts',
  snapshots: 'ts',
  latest_tables: 'ts',
  latest_indexes: 'ts',
  internals_latest: 'ts',
  clickhouse_latest: 'ts',
  // the events timeline's derived events (events/events.ts)
  events: 'ts',
  // custom metrics' series no batch carried since (custom-metrics/)
  custom_metric_series: 'seen_at',
} as const
/** Derived from telemetry and kept as long: resolved recommendations and alerts. */
const RESOLVED_TABLES = ['recommendations', 'alerts'] as const
/** Actions asked of agents (actions/): kept as long as the events that audit them, then gone once over. */
const ACTION_TABLES = ['actions'] as const
/** Periods that end (availability/): they go once ended before the cutoff; an open outage stays. */
const ENDED_TABLES = ['outages', 'agent_silences'] as const
/**
 * Alert silences (alerts/routing.ts) that name a database: they go once ended before its cutoff. One that
 * names no database (a rule, a tag) is the organization's, created by hand, and stays listed as expired.
 */
const SILENCE_TABLES = ['alert_silences'] as const

/** Every table with per-database rows that retention covers (the retention test checks none is missing). */
export const RETAINED_TABLES: readonly string[] = [
  ...BUCKET_TABLES,
  ...METRIC_TABLES,
  ...Object.keys(TIMED_TABLES),
  'log_entries',
  'query_texts',
  'ingest_batches',
  ...RESOLVED_TABLES,
  ...ACTION_TABLES,
  ...ENDED_TABLES,
  ...SILENCE_TABLES,
  ...SESSION_HISTORY_TABLES,
]

/** Per-database state that is not telemetry: one row per database, gone with it (ON DELETE CASCADE). */
export const KEPT_WITH_DATABASE: readonly string[] = [
  'query_rollups',
  'database_health',
  'diagnoses',
  'event_baselines',
  'database_availability',
  'agent_clocks',
  'server_settings',
  'action_listeners',
  'custom_metrics',
  'database_thresholds',
]

/**
 * The primary key of each table retention deletes from that SQLite stores WITHOUT ROWID (migration 10):
 * such a table has no rowid, so its rows are picked by key. The retention test checks this against the
 * store's own tables.
 */
export const WITHOUT_ROWID_KEYS: Readonly<Record<string, readonly string[]>> = {
  query_stats: ['database_id', 'resolution', 'bucket', 'query_hash'],
  wait_stats: ['database_id', 'resolution', 'bucket', 'wait_event_type', 'wait_event'],
  replication_lag: ['database_id', 'resolution', 'bucket'],
  replication_slot_lag: ['database_id', 'resolution', 'bucket', 'slot_name'],
  table_stats: ['database_id', 'schema_name', 'table_name', 'resolution', 'bucket'],
  index_stats: ['database_id', 'schema_name', 'index_name', 'resolution', 'bucket'],
  metric_counters: ['database_id', 'source', 'resolution', 'bucket', 'subject', 'metric'],
  metric_gauges: ['database_id', 'source', 'resolution', 'bucket', 'subject', 'metric'],
  latest_tables: ['database_id', 'schema_name', 'table_name'],
  ingest_batches: ['database_id', 'batch_id'],
  log_counts: ['database_id', 'resolution', 'bucket', 'kind', 'severity'],
  outages: ['database_id', 'started_at'],
  agent_silences: ['database_id', 'started_at'],
}

/**
 * The statement deleting up to `batch` rows of `table` matching `where` (the dialect's deleteSome: by
 * ctid on PostgreSQL, on SQLite by rowid or, in a WITHOUT ROWID table, by primary key).
 */
export function batchDeleteSql(dialect: SqlDialect, table: string, where: string, batch: number): string {
  return dialect.deleteSome(table, where, batch, WITHOUT_ROWID_KEYS[table])
}

/** Deletes the rows of `table` matching `where`, `batch` rows per statement; returns how many went. */
async function deleteInBatches(
  driver: SqlDriver,
  table: string,
  where: string,
  params: unknown[],
  batch: number,
): Promise<number> {
  const sql = batchDeleteSql(driver.sqlDialect, table, where, batch)
  let total = 0
  for (;;) {
    const deleted = await driver.run(sql, params)
    total += deleted
    if (deleted < batch) return total
  }
}

export interface SweepCutoffs {
  /** Telemetry older than this goes (the organization's retention). */
  before: number
  /** Minute buckets older than this go too (the compaction horizon; a whole hour). */
  minutesBefore: number
  /** Statements, tables and indexes are rolled up to this time first (and at least to minutesBefore: minute rows never go unrolled). */
  rollUpTo: number
  /** Session snapshots older than this are compacted (sessions/writes.ts); absent: only the retention applies. */
  everyPollBefore?: number
  /**
   * Server log entries older than this go (logEventLimits.entriesMs: a week), or at `before` when that is
   * later; their counts stay as long as other buckets (minute rows 48 h, hour rows the retention).
   */
  logEntriesBefore?: number
}

async function sweepDatabase(
  driver: SqlDriver,
  databaseId: string,
  cutoffs: SweepCutoffs,
  batch: number,
): Promise<number> {
  await rollUpQuietDatabase(driver, databaseId, Math.max(cutoffs.rollUpTo, cutoffs.minutesBefore))
  const hoursBefore = floorTo(cutoffs.before, HOUR_MS)
  const minutesBefore = Math.max(floorTo(cutoffs.before, MINUTE_MS), cutoffs.minutesBefore)
  let deleted = 0
  for (const table of BUCKET_TABLES) {
    // 10-minute buckets (statement statistics) serve only reads within the minute rows' horizon.
    for (const resolution of table === 'query_stats' ? [60, 600] : [60]) {
      // A bucket goes when it is wholly older than the cutoff (a 10-minute bucket may straddle it).
      const cutoff = resolution === 600 ? floorTo(minutesBefore, 600_000) : minutesBefore
      deleted += await deleteInBatches(
        driver,
        table,
        'database_id = $1 AND resolution = $2 AND bucket < $3',
        [databaseId, resolution, cutoff],
        batch,
      )
    }
    deleted += await deleteInBatches(
      driver,
      table,
      'database_id = $1 AND resolution = 3600 AND bucket < $2',
      [databaseId, hoursBefore],
      batch,
    )
  }
  for (const table of METRIC_TABLES) {
    for (const source of Object.keys(METRIC_SOURCES)) {
      const where = 'database_id = $1 AND source = $2 AND resolution = $3 AND bucket < $4'
      deleted += await deleteInBatches(driver, table, where, [databaseId, source, 60, minutesBefore], batch)
      deleted += await deleteInBatches(driver, table, where, [databaseId, source, 3600, hoursBefore], batch)
    }
  }
  for (const [table, column] of Object.entries(TIMED_TABLES)) {
    deleted += await deleteInBatches(
      driver,
      table,
      `database_id = $1 AND ${column} < $2`,
      [databaseId, cutoffs.before],
      batch,
    )
  }
  const logBefore = Math.max(cutoffs.before, cutoffs.logEntriesBefore ?? cutoffs.before)
  deleted += await deleteInBatches(
    driver,
    'log_entries',
    'database_id = $1 AND ts < $2',
    [databaseId, logBefore],
    batch,
  )
  // A statement's text goes with its last bucket: its last_seen is rewritten once in TEXT_REFRESH_MS,
  // so the statement's last batch may be that much later (and its hour kept).
  deleted += await deleteInBatches(
    driver,
    'query_texts',
    'database_id = $1 AND last_seen < $2',
    [databaseId, hoursBefore - TEXT_REFRESH_MS],
    batch,
  )
  for (const table of RESOLVED_TABLES) {
    deleted += await deleteInBatches(
      driver,
      table,
      'database_id = $1 AND resolved_at < $2',
      [databaseId, cutoffs.before],
      batch,
    )
  }
  const actions = sweptActions(databaseId, cutoffs.before)
  deleted += await deleteInBatches(driver, 'actions', actions.where, actions.params, batch)
  for (const table of ENDED_TABLES) {
    deleted += await deleteInBatches(
      driver,
      table,
      'database_id = $1 AND ended_at < $2',
      [databaseId, cutoffs.before],
      batch,
    )
  }
  for (const table of SILENCE_TABLES) {
    deleted += await deleteInBatches(
      driver,
      table,
      'database_id = $1 AND ends_at < $2',
      [databaseId, cutoffs.before],
      batch,
    )
  }
  deleted += await compactSessionHistory(
    databaseId,
    { before: cutoffs.before, everyPollBefore: cutoffs.everyPollBefore ?? cutoffs.before },
    (table, where, params) => deleteInBatches(driver, table, where, params, batch),
  )
  return deleted
}

/** Retention and minute-bucket compaction, for the monitor's retention pass. */
export interface RetentionStore {
  /** Every database with its organization's verification (which decides its retention). */
  databases(): Promise<
    {
      id: string
      org_verified: boolean
    }[]
  >
  /**
   * Rolls up the database's statement statistics, tables and indexes, then deletes its telemetry past the cutoffs;
   * returns the number of rows deleted.
   */
  sweepDatabase(databaseId: string, cutoffs: SweepCutoffs, batch: number): Promise<number>
  /** Forgets applied batch ids received before `before`. */
  sweepBatchIds: (before: number, batch: number) => Promise<number>
}

/** Reads and deletes of retention, for the monitor. `swept` hears of each database swept. */
export function retentionStore(driver: SqlDriver, swept: (databaseId: string) => void = () => {}): RetentionStore {
  return {
    /** Every database with its organization's verification (which decides its retention). */
    async databases(): Promise<{ id: string; org_verified: boolean }[]> {
      const rows = await driver.all<{ id: string; verified: unknown }>(
        'SELECT d.id, o.verified FROM databases d JOIN organizations o ON o.id = d.org_id ORDER BY d.id',
      )
      return rows.map((r) => ({ id: r.id, org_verified: Boolean(r.verified) }))
    },
    /**
     * Rolls up the database's statement statistics, tables and indexes, then deletes its telemetry past the cutoffs;
     * returns the number of rows deleted.
     */
    async sweepDatabase(databaseId: string, cutoffs: SweepCutoffs, batch: number): Promise<number> {
      try {
        return await sweepDatabase(driver, databaseId, cutoffs, batch)
      } finally {
        swept(databaseId)
      }
    },
    /** Forgets applied batch ids received before `before`. */
    sweepBatchIds: (before: number, batch: number) =>
      deleteInBatches(driver, 'ingest_batches', 'received_at < $1', [before], batch),
  }
}
