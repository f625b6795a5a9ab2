// Telemetry in the store: applying an ingest batch (once per batch_id) and reading it back.
// Counter deltas accumulate into 60-second and 1-hour buckets at ingest; reads over a window take
// whole hours from the hourly buckets and the partial hours at its edges from the minute buckets, so
// a 24-hour list reads ~24 rows per statement instead of 1,440, and stays exact to the minute.
import { QUERY_COUNTER_KEYS } from '../../shared/metrics.ts'
import type { ExplainPlan, IngestBatch, QueryStatDelta } from '../../shared/wire.ts'
import type { SqlDriver } from './driver.ts'
import { retentionLimits } from '../limits.ts'
import { applyClickHouse } from './sql-clickhouse.ts'
import { applyInternals } from './sql-internals.ts'
import { applyObjects } from './sql-objects.ts'

export const MINUTE_MS = 60_000
export const HOUR_MS = 3_600_000

const floorTo = (t: number, step: number) => Math.floor(t / step) * step

/** The larger of two nullable values, in the store's dialect (SQLite's MAX(a, NULL) is NULL). */
function greatest(dialect: SqlDriver['dialect'], a: string, b: string): string {
  const fn = dialect === 'sqlite' ? 'MAX' : 'GREATEST'
  return `${fn}(COALESCE(${a}, ${b}), COALESCE(${b}, ${a}))`
}

/**
 * Rows per statement of upsertMany, largest first. Batches are cut into these sizes so that only a few
 * statement texts exist per table: each is built once and prepared once (the drivers keep prepared
 * statements by text), instead of one text of a new length for every batch.
 */
const CHUNK_SIZES = [256, 64, 16, 4, 1] as const

/** Statement texts of upsertMany by their shape. */
const upsertTexts = new Map<string, string>()

function upsertText(table: string, columns: readonly string[], rows: number, conflict: readonly string[], update: Record<string, string>, onlyIf?: string): string {
  const key = JSON.stringify([table, columns, rows, conflict, update, onlyIf])
  let text = upsertTexts.get(key)
  if (text === undefined) {
    const set = Object.entries(update)
      .map(([column, expression]) => `${column} = ${expression}`)
      .join(', ')
    const tuples: string[] = []
    for (let r = 0; r < rows; r++) tuples.push(`(${columns.map((_, c) => `$${r * columns.length + c + 1}`).join(', ')})`)
    text = `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT (${conflict.join(', ')}) DO ${
      set ? `UPDATE SET ${set}${onlyIf ? ` WHERE ${onlyIf}` : ''}` : 'NOTHING'
    }`
    if (upsertTexts.size < 1000) upsertTexts.set(key, text)
  }
  return text
}

/**
 * INSERT ... ON CONFLICT DO UPDATE for many rows, in chunks of CHUNK_SIZES rows (within both stores'
 * parameter limits). `update` maps a column to its SQL on conflict (`excluded.<col>` is the incoming value).
 */
export async function upsertMany(
  tx: SqlDriver,
  table: string,
  columns: readonly string[],
  rows: unknown[][],
  conflict: readonly string[],
  update: Record<string, string>,
  /** Condition for the update on conflict (e.g. only when the incoming row is newer). */
  onlyIf?: string,
): Promise<void> {
  const maxRows = Math.max(1, Math.floor(30_000 / columns.length))
  let start = 0
  for (const size of CHUNK_SIZES) {
    if (size > maxRows) continue
    while (rows.length - start >= size) {
      const params = new Array<unknown>(size * columns.length)
      let i = 0
      for (let r = start; r < start + size; r++) for (const value of rows[r]!) params[i++] = value
      await tx.run(upsertText(table, columns, size, conflict, update, onlyIf), params)
      start += size
    }
  }
}

const QUERY_COUNTERS = QUERY_COUNTER_KEYS
type QueryCounter = (typeof QUERY_COUNTERS)[number]

/** Sums the batch's rows per statement (a batch may carry one statement more than once). */
function mergeQueryStats(rows: QueryStatDelta[]): Map<string, { text: string; counters: Record<QueryCounter, number>; p99: number | null }> {
  const merged = new Map<string, { text: string; counters: Record<QueryCounter, number>; p99: number | null }>()
  for (const row of rows) {
    let entry = merged.get(row.query_hash)
    if (!entry) {
      entry = { text: row.query_text, counters: Object.fromEntries(QUERY_COUNTERS.map((c) => [c, 0])) as Record<QueryCounter, number>, p99: null }
      merged.set(row.query_hash, entry)
    }
    for (const c of QUERY_COUNTERS) entry.counters[c] += Number(row[c] ?? 0)
    if (row.p99_ms !== undefined) entry.p99 = Math.max(entry.p99 ?? 0, row.p99_ms)
  }
  return merged
}

async function applyQueryStats(tx: SqlDriver, databaseId: string, collectedAt: number, rows: QueryStatDelta[]) {
  const merged = mergeQueryStats(rows)
  if (merged.size === 0) return
  await upsertMany(
    tx,
    'query_texts',
    ['database_id', 'query_hash', 'query_text', 'first_seen', 'last_seen'],
    [...merged].map(([hash, e]) => [databaseId, hash, e.text, collectedAt, collectedAt]),
    ['database_id', 'query_hash'],
    { query_text: 'excluded.query_text', last_seen: greatest(tx.dialect, 'query_texts.last_seen', 'excluded.last_seen') },
    // A statement's text and last_seen are rewritten at most once a minute: the same 500 statements
    // arrive every poll, and rewriting their texts each time was a third of the ingest's SQL time.
    `query_texts.last_seen < excluded.last_seen - ${MINUTE_MS}`,
  )
  const columns = ['database_id', 'resolution', 'bucket', 'query_hash', ...QUERY_COUNTERS, 'p99_ms']
  const update: Record<string, string> = Object.fromEntries(QUERY_COUNTERS.map((c) => [c, `query_stats.${c} + excluded.${c}`]))
  update.p99_ms = greatest(tx.dialect, 'query_stats.p99_ms', 'excluded.p99_ms')
  const rowsFor = (resolution: number) =>
    [...merged].map(([hash, e]) => [
      databaseId,
      resolution / 1000,
      floorTo(collectedAt, resolution),
      hash,
      ...QUERY_COUNTERS.map((c) => e.counters[c]),
      e.p99,
    ])
  await upsertMany(tx, 'query_stats', columns, [...rowsFor(MINUTE_MS), ...rowsFor(HOUR_MS)], ['database_id', 'resolution', 'bucket', 'query_hash'], update)
}

/** Sections kept as the latest snapshot only (replaced by each newer batch that carries them); tables,
 * indexes and the internals sections keep theirs in sql-objects.ts and sql-internals.ts. */
const SNAPSHOT_KINDS = ['activity', 'locks', 'sequences', 'unindexed_foreign_keys', 'collector_notes'] as const
export type SnapshotKind = (typeof SNAPSHOT_KINDS)[number]

const PLAN_COLUMNS = ['database_id', 'query_hash', 'ts', 'plan_hash', 'source', 'total_cost', 'actual_time_ms', 'seq_scans', 'index_scans', 'rows_estimated', 'rows_actual', 'plan_json'] as const

async function applyExplainPlans(tx: SqlDriver, databaseId: string, plans: ExplainPlan[]) {
  const perChunk = Math.floor(30_000 / PLAN_COLUMNS.length)
  for (let start = 0; start < plans.length; start += perChunk) {
    const chunk = plans.slice(start, start + perChunk)
    const params: unknown[] = []
    const tuples = chunk.map((p) => {
      params.push(databaseId, p.query_hash, p.ts, p.plan_hash, p.source, p.total_cost, p.actual_time_ms, p.seq_scans, p.index_scans, p.rows_estimated, p.rows_actual, JSON.stringify(p.plan_json))
      const base = params.length - PLAN_COLUMNS.length
      return `(${PLAN_COLUMNS.map((_, i) => `$${base + i + 1}`).join(', ')})`
    })
    await tx.run(`INSERT INTO explain_plans (${PLAN_COLUMNS.join(', ')}) VALUES ${tuples.join(', ')}`, params)
  }
}

/** Applies every section of the batch that this server version stores. */
export async function applyBatch(tx: SqlDriver, databaseId: string, batch: IngestBatch): Promise<void> {
  if (batch.query_stats) await applyQueryStats(tx, databaseId, batch.collected_at, batch.query_stats)
  if (batch.explain_plans?.length) await applyExplainPlans(tx, databaseId, batch.explain_plans)
  await applyObjects(tx, databaseId, batch)
  await applyInternals(tx, databaseId, batch)
  await applyClickHouse(tx, databaseId, batch)
  const snapshots = SNAPSHOT_KINDS.filter((kind) => batch[kind] !== undefined).map((kind) => [
    databaseId,
    kind,
    batch.collected_at,
    JSON.stringify(batch[kind]),
  ])
  if (snapshots.length > 0) {
    // A batch delivered late (from the agent's buffer) never replaces a newer snapshot.
    await upsertMany(
      tx,
      'snapshots',
      ['database_id', 'kind', 'ts', 'payload'],
      snapshots,
      ['database_id', 'kind'],
      { ts: 'excluded.ts', payload: 'excluded.payload' },
      'excluded.ts >= snapshots.ts',
    )
  }
}

// ---- reads ----

export interface Window {
  since: number
  until: number
  /**
   * Minute buckets before this time (a whole hour) may have been compacted away (retentionLimits): the
   * part of the window before it is read from the hourly buckets, whole hours. Absent: minute rows throughout.
   */
  minuteFloor?: number
}

/** The minuteFloor of reads at `now`: minute rows are kept retentionLimits.minuteRowsMs, then only hourly ones. */
export function minuteFloor(now: number): number {
  return floorTo(now - retentionLimits.minuteRowsMs, HOUR_MS)
}

/** A timeseries' resolution: minute points for windows up to 24 hours whose minute rows are kept, else hourly. */
export function seriesResolution(window: Window): 60 | 3600 {
  const minutesKept = window.minuteFloor === undefined || window.since >= window.minuteFloor
  return window.until - window.since <= 24 * HOUR_MS && minutesKept ? 60 : 3600
}

/**
 * The bucket ranges that cover [since, until): whole hours from the hourly buckets, the edges
 * from the minute buckets. Returns SQL for a WHERE clause and its parameters, numbered from `first`.
 */
/** The bucket ranges that cover [since, until): whole hours from the hourly buckets, the edges from the minute buckets. */
export function windowRanges(window: Window): { resolution: 60 | 3600; from: number; to: number }[] {
  const floor = window.minuteFloor
  if (floor !== undefined && window.since < floor) {
    // Before the floor only hourly rows are kept: the hours that overlap that part of the window.
    const old = { resolution: 3600 as const, from: floorTo(window.since, HOUR_MS), to: Math.min(window.until, floor) }
    return window.until > floor ? [old, ...windowRanges({ since: floor, until: window.until })] : [old]
  }
  const since = floorTo(window.since, MINUTE_MS)
  const until = window.until
  const hourStart = Math.ceil(since / HOUR_MS) * HOUR_MS
  const hourEnd = floorTo(until, HOUR_MS)
  if (hourEnd - hourStart < HOUR_MS) return [{ resolution: 60, from: since, to: until }]
  return [
    { resolution: 3600, from: hourStart, to: hourEnd },
    { resolution: 60, from: since, to: hourStart },
    { resolution: 60, from: hourEnd, to: until },
  ]
}

/**
 * windowRanges as a WHERE clause and its parameters, numbered from `first`.
 */
export function windowClause(window: Window, first: number): { sql: string; params: number[] } {
  const ranges = windowRanges(window)
  const params: number[] = []
  const parts = ranges.map((r) => {
    params.push(r.from, r.to)
    return `(resolution = ${r.resolution} AND bucket >= $${first + params.length - 2} AND bucket < $${first + params.length - 1})`
  })
  return { sql: `(${parts.join(' OR ')})`, params }
}

export type QuerySort = 'total_time' | 'calls' | 'mean_time' | 'rows'

const SORT_SQL: Record<QuerySort, string> = {
  total_time: 'total_time_ms DESC',
  calls: 'total_calls DESC',
  mean_time: 'mean_time_ms DESC',
  rows: 'total_rows DESC',
}

export interface QueryStatsRow {
  query_hash: string
  query_text: string
  total_calls: number
  total_time_ms: number
  mean_time_ms: number
  total_rows: number
  shared_blks_hit: number
  shared_blks_read: number
  cache_hit_ratio: number | null
  temp_blks_read: number
  temp_blks_written: number
  blk_read_time_ms: number
  blk_write_time_ms: number
  read_bytes: number
  memory_bytes: number
  errors: number
  p99_ms: number | null
  /** Start (epoch ms) of the statement's earliest bucket in the window: how much of it the data covers. */
  first_bucket: number | null
}

const SUMS = `SUM(calls) AS total_calls, SUM(total_time_ms) AS total_time_ms,
  CASE WHEN SUM(calls) > 0 THEN SUM(total_time_ms) / SUM(calls) ELSE 0 END AS mean_time_ms,
  SUM(rows) AS total_rows, SUM(shared_blks_hit) AS shared_blks_hit, SUM(shared_blks_read) AS shared_blks_read,
  SUM(temp_blks_read) AS temp_blks_read, SUM(temp_blks_written) AS temp_blks_written,
  SUM(blk_read_time_ms) AS blk_read_time_ms, SUM(blk_write_time_ms) AS blk_write_time_ms,
  SUM(read_bytes) AS read_bytes, SUM(memory_bytes) AS memory_bytes, SUM(errors) AS errors, MAX(p99_ms) AS p99_ms`

function toQueryRow(r: Record<string, unknown>): QueryStatsRow {
  const hit = Number(r.shared_blks_hit ?? 0)
  const read = Number(r.shared_blks_read ?? 0)
  return {
    query_hash: String(r.query_hash),
    query_text: String(r.query_text ?? ''),
    total_calls: Number(r.total_calls ?? 0),
    total_time_ms: Number(r.total_time_ms ?? 0),
    mean_time_ms: Number(r.mean_time_ms ?? 0),
    total_rows: Number(r.total_rows ?? 0),
    shared_blks_hit: hit,
    shared_blks_read: read,
    cache_hit_ratio: hit + read > 0 ? hit / (hit + read) : null,
    temp_blks_read: Number(r.temp_blks_read ?? 0),
    temp_blks_written: Number(r.temp_blks_written ?? 0),
    blk_read_time_ms: Number(r.blk_read_time_ms ?? 0),
    blk_write_time_ms: Number(r.blk_write_time_ms ?? 0),
    read_bytes: Number(r.read_bytes ?? 0),
    memory_bytes: Number(r.memory_bytes ?? 0),
    errors: Number(r.errors ?? 0),
    p99_ms: r.p99_ms === null || r.p99_ms === undefined ? null : Number(r.p99_ms),
    first_bucket: r.first_bucket === null || r.first_bucket === undefined ? null : Number(r.first_bucket),
  }
}

export async function listQueryStats(
  driver: SqlDriver,
  databaseId: string,
  window: Window,
  sort: QuerySort,
  limit: number,
): Promise<QueryStatsRow[]> {
  // SQLite cannot use the primary key for an OR of bucket ranges and reads every row of the
  // database; one range scan per range, glued with UNION ALL, reads only the window (359 -> 137 ms
  // in bench:queries). PostgreSQL plans the OR well (a BitmapOr) and misplans the UNION ALL.
  let source: string
  let params: unknown[]
  if (driver.dialect === 'sqlite') {
    params = [databaseId]
    source = windowRanges(window)
      .map((r) => {
        params.push(r.from, r.to)
        return `SELECT * FROM query_stats WHERE database_id = $1 AND resolution = ${r.resolution} AND bucket >= $${params.length - 1} AND bucket < $${params.length}`
      })
      .join(' UNION ALL ')
  } else {
    const where = windowClause(window, 2)
    params = [databaseId, ...where.params]
    source = `SELECT * FROM query_stats WHERE database_id = $1 AND ${where.sql}`
  }
  params.push(limit)
  const rows = await driver.all(
    `SELECT t.query_text, s.* FROM (
       SELECT query_hash, MIN(bucket) AS first_bucket, ${SUMS} FROM (${source}) w
       GROUP BY query_hash
     ) s JOIN query_texts t ON t.database_id = $1 AND t.query_hash = s.query_hash
     ORDER BY ${SORT_SQL[sort]}, s.query_hash
     LIMIT $${params.length}`,
    params,
  )
  return rows.map(toQueryRow)
}

export interface QueryPoint {
  ts: number
  calls: number
  total_time_ms: number
  mean_time_ms: number
  rows: number
  shared_blks_hit: number
  shared_blks_read: number
  cache_hit_ratio: number | null
  temp_blks_read: number
  temp_blks_written: number
  p99_ms: number | null
  /** ClickHouse's counters (0 for PostgreSQL statements). */
  read_bytes: number
  memory_bytes: number
  errors: number
}

/** The detail of one statement: totals over the window and a timeseries at a resolution that fits it. */
export async function queryDetail(
  driver: SqlDriver,
  databaseId: string,
  hash: string,
  window: Window,
): Promise<{ stats: QueryStatsRow; first_seen: number; last_seen: number; resolution: number; points: QueryPoint[] } | undefined> {
  const text = await driver.get<{ query_text: string; first_seen: number; last_seen: number }>(
    'SELECT query_text, first_seen, last_seen FROM query_texts WHERE database_id = $1 AND query_hash = $2',
    [databaseId, hash],
  )
  if (!text) return undefined
  const where = windowClause(window, 3)
  const totals = await driver.get(
    `SELECT ${SUMS} FROM query_stats WHERE database_id = $1 AND query_hash = $2 AND ${where.sql}`,
    [databaseId, hash, ...where.params],
  )
  const resolution = seriesResolution(window)
  const points = await driver.all(
    `SELECT bucket, calls, total_time_ms, rows, shared_blks_hit, shared_blks_read, temp_blks_read, temp_blks_written, p99_ms,
            read_bytes, memory_bytes, errors
     FROM query_stats WHERE database_id = $1 AND query_hash = $2 AND resolution = $3 AND bucket >= $4 AND bucket < $5
     ORDER BY bucket`,
    [databaseId, hash, resolution, floorTo(window.since, resolution * 1000), window.until],
  )
  return {
    stats: toQueryRow({ ...totals, query_hash: hash, query_text: text.query_text }),
    first_seen: Number(text.first_seen),
    last_seen: Number(text.last_seen),
    resolution,
    points: points.map((p) => {
      const calls = Number(p.calls)
      const hit = Number(p.shared_blks_hit)
      const read = Number(p.shared_blks_read)
      return {
        ts: Number(p.bucket),
        calls,
        total_time_ms: Number(p.total_time_ms),
        mean_time_ms: calls > 0 ? Number(p.total_time_ms) / calls : 0,
        rows: Number(p.rows),
        shared_blks_hit: hit,
        shared_blks_read: read,
        cache_hit_ratio: hit + read > 0 ? hit / (hit + read) : null,
        temp_blks_read: Number(p.temp_blks_read),
        temp_blks_written: Number(p.temp_blks_written),
        p99_ms: p.p99_ms === null ? null : Number(p.p99_ms),
        read_bytes: Number(p.read_bytes),
        memory_bytes: Number(p.memory_bytes),
        errors: Number(p.errors),
      }
    }),
  }
}

export async function latestSnapshot(driver: SqlDriver, databaseId: string, kind: SnapshotKind): Promise<{ ts: number; payload: unknown } | undefined> {
  const row = await driver.get<{ ts: number; payload: string }>('SELECT ts, payload FROM snapshots WHERE database_id = $1 AND kind = $2', [databaseId, kind])
  return row ? { ts: Number(row.ts), payload: JSON.parse(row.payload) } : undefined
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
  source: string
  /** The plan differs from the one before it for this statement. */
  plan_changed: boolean
}

const nullableNumber = (v: unknown) => (v === null || v === undefined ? null : Number(v))

/** A statement's plans in the window, newest first, each marked when its shape differs from the previous plan. */
export async function listPlans(driver: SqlDriver, databaseId: string, hash: string, window: Window, limit: number): Promise<StoredPlan[]> {
  const rows = await driver.all(
    `SELECT * FROM explain_plans WHERE database_id = $1 AND query_hash = $2 AND ts >= $3 AND ts < $4 ORDER BY ts DESC LIMIT $5`,
    [databaseId, hash, window.since, window.until, limit + 1],
  )
  // The plan just before the oldest returned one decides whether that one changed.
  const before = rows.length <= limit ? await driver.get<{ plan_hash: string }>(
    'SELECT plan_hash FROM explain_plans WHERE database_id = $1 AND query_hash = $2 AND ts < $3 ORDER BY ts DESC LIMIT 1',
    [databaseId, hash, window.since],
  ) : undefined
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
      source: String(r.source),
      plan_changed: older !== undefined && older !== r.plan_hash,
    }
  })
}
