// Telemetry about a database's objects and sessions: tables and indexes (the latest statistics, and
// per-interval timeseries in 60-second buckets, rolled up into hourly ones), active queries and locks (the latest
// snapshot, kept by snapshots.ts in `snapshots`).
// Buckets sum the counters' deltas (null while a bucket holds only first samples, which carry no delta)
// and keep the gauges' last known value. The latest tables and indexes are rows of their own, brought up
// to each newer batch that carries the section, so listing, sorting and filtering happen in SQL: only
// the rows of objects that are new, changed or moved are written (and every one once an hour), objects
// the batch no longer names are deleted by key, and reads give every row the section's last sampled
// time as its "as of" time (updateLatest and latestRowsSql say why that is right).
//
// Ingest writes minute rows only; the hourly rows are rolled up from them once their hour closed, by the
// statements' rollup (rollups/rollups.ts, objects/hours.ts), and reads compute the hours not rolled up
// yet from the minute rows. So a batch where every one of 100 tables and 150 indexes moved writes 250
// bucket rows, not 500 (the hourly row was upserted again by every batch).
// Only objects that moved get minute rows: a table or index whose deltas are all zero and whose gauges
// are those of its latest row (or unmeasured, null) adds nothing to its buckets, unless it is its first
// report of the hour. So an idle database's batch writes no table or index bucket rows but once an hour
// (it wrote two per object per batch: ~500 rows for 100 tables and 150 indexes, 360 times an hour).
// Reads stay exact because each section also records, per minute and hour, that a batch carried it
// (metric_gauges rows of source 'ingest', subject '', metric 'tables' or 'indexes', value 1, sampled_at
// the latest such batch's time: one row per database-minute and section, upserted by every
// batch that carries the section, swept with the other bucket rows):
// a sampled minute without an object's row reads as zero deltas with the gauges carried forward from
// the object's latest earlier row of the same hour, and a minute no batch sampled (the agent down) stays
// a gap. Why those rows: ingest_batches (one row per batch) is kept a day only, not the 48 hours of
// minute rows; no table written by every batch has a row per minute (query_rollups has one per
// database); metric_gauges is keyed (database_id, source, resolution, bucket, ...), so a window's
// sampled minutes are one range of its key, its sampled_at tells a late batch whether a later sample of
// its bucket exists, and no new table (no migration) is needed.
// Each object's first report of an hour (its latest row is from an earlier hour) writes its minute row
// whether it moved or not: the hour's rollup gives every object reported in the hour its hourly row, as
// before, and the gauges a minute reads are never carried across an hour, so an object no
// longer reported (dropped) reads as zero deltas for the rest of that hour at most (and has no latest
// row: its series is not served), and an object idle for longer than retention keeps rows still has
// its gauges.
// A late batch (collected before the stored latest rows) cannot be compared with them: it writes all its
// rows, with its gauges only in buckets where no later batch was sampled (skipped samples left the
// bucket's gauges as they are), and pins the gauges of the next sampled minute of its hour (pinLaterMinute),
// so the hour's rollup (its last minute row's gauges) reads what it read before the late batch. A late
// batch into an hour rolled up already adds to its hourly row too (addToBuckets).
import {
  INDEX_COUNTERS,
  INDEX_GAUGES,
  type IndexCounter,
  type IndexGauge,
  TABLE_COUNTERS,
  TABLE_GAUGES,
  type TableCounter,
  type TableGauge,
} from '../../../shared/families.ts'
import type { ActiveQuery, IndexStat, IngestBatch, LockEntry, TableStat } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import { unusedIndexMinBytes } from '../../limits.ts'
import { int64Counter, saturatingAdd } from '../sums.ts'
import { latestSnapshot } from '../snapshots.ts'
import { INDEX_HOURS, type ObjectHours, TABLE_HOURS, hourlyRowsSql } from './hours.ts'
import { type RollupMarks, readMarks } from '../rollups/rollups.ts'
import { ident, sql } from '../sql.ts'
import { HOUR_MS, MINUTE_MS, type Window, floorTo, seriesResolution } from '../window.ts'
import type { MetricSource } from '../internals/internals.ts'
import { INGEST_COLUMN_TYPES, type Reads, type Writes } from '../ingest/batch.ts'


// The counters and gauges are the table and index families' (src/shared/families.ts).
const TABLE_TIMES = ['last_vacuum', 'last_autovacuum', 'last_analyze', 'last_autoanalyze'] as const

// ---- ingest ----

/** Counts are integers in the store; a fractional one from the wire is rounded, not refused by BIGINT. */
const int = (v: number | null | undefined): number | null => (v === null || v === undefined ? null : Math.round(v))

/** A sum that stays null only while both sides are (a bucket of first samples has no delta), saturating at BIGINT's maximum (sums.ts). */
const sumSql = (table: string, c: string) => `COALESCE(${saturatingAdd(`${table}.${c}`, `excluded.${c}`)}, ${table}.${c}, excluded.${c})`
/** The newer sample's value, or the other's when the newer one is unknown (e.g. a size not measured that cycle). */
const lastSql = (table: string, c: string) =>
  `CASE WHEN excluded.sampled_at >= ${table}.sampled_at THEN COALESCE(excluded.${c}, ${table}.${c}) ELSE COALESCE(${table}.${c}, excluded.${c}) END`

interface BucketRow {
  key: string[]
  /** The object's first sample (no delta at all): news, whatever its counters. */
  first: boolean
  /** Deltas; null in a delta: a counter not known (e.g. idx_scan of a table without indexes, a field the server has and the agent or its PostgreSQL not). */
  counters: (number | null)[]
  gauges: (number | null)[]
}

/** One row per object: deltas summed, gauges the last non-null (a batch may repeat an object). */
function mergeBucketRows(rows: BucketRow[]): (Omit<BucketRow, 'counters'> & { counters: (number | bigint | null)[] })[] {
  const merged = new Map<string, BucketRow>()
  const repeated = new Set<BucketRow>()
  for (const row of rows) {
    const id = JSON.stringify(row.key)
    const seen = merged.get(id)
    if (!seen) {
      merged.set(id, { key: row.key, first: row.first, counters: [...row.counters], gauges: [...row.gauges] })
      continue
    }
    seen.first ||= row.first
    seen.counters = seen.counters.map((c, i) => (c === null ? row.counters[i]! : c + (row.counters[i] ?? 0)))
    repeated.add(seen)
    seen.gauges = seen.gauges.map((g, i) => row.gauges[i] ?? g)
  }
  // An object named ~1,000 times at the wire's maximum sums past BIGINT in JS: bound as its maximum.
  return [...merged.values()].map((row) => (repeated.has(row) ? { ...row, counters: row.counters.map((c) => (c === null ? c : int64Counter(c))) } : row))
}

type ObjectSection = 'tables' | 'indexes'

/** The tables of objects' latest statistics, and the columns naming an object in them. */
const LATEST_TABLES = ['latest_tables', 'latest_indexes'] as const
const KEY_COLUMNS = ['schema_name', 'table_name', 'index_name'] as const

interface BucketTable {
  section: ObjectSection
  table: 'table_stats' | 'index_stats'
  /** How its hourly rows are rolled up from its minute rows. */
  hours: ObjectHours
  latest: (typeof LATEST_TABLES)[number]
  keyColumns: readonly [(typeof KEY_COLUMNS)[number], (typeof KEY_COLUMNS)[number]]
  counters: readonly string[]
  gauges: readonly string[]
  /** The latest row's columns after its key and ts, in the order updateLatest's values come. */
  latestColumns: readonly string[]
  /**
   * Latest columns whose stored value an incoming one does not replace when it says nothing (a size
   * not measured this cycle: null; an index definition not deparsed yet: ''), with the SQL that keeps it.
   */
  keep: Readonly<Record<string, { unknown: (v: unknown) => boolean; sql: string }>>
}

const isNull = (v: unknown) => v === null
const keepSize = (table: string, c: string) => ({ unknown: isNull, sql: `COALESCE(excluded.${c}, ${table}.${c})` })

const TABLE_BUCKETS: BucketTable = {
  section: 'tables',
  table: 'table_stats',
  hours: TABLE_HOURS,
  latest: 'latest_tables',
  keyColumns: ['schema_name', 'table_name'],
  counters: TABLE_COUNTERS,
  gauges: TABLE_GAUGES,
  latestColumns: [...TABLE_COUNTERS, ...TABLE_GAUGES, ...TABLE_TIMES, 'has_primary_key', 'autovacuum_enabled'],
  keep: Object.fromEntries(['table_size_bytes', 'index_size_bytes', 'heap_bytes', 'toast_bytes'].map((c) => [c, keepSize('latest_tables', c)])),
}
const INDEX_BUCKETS: BucketTable = {
  section: 'indexes',
  table: 'index_stats',
  hours: INDEX_HOURS,
  latest: 'latest_indexes',
  keyColumns: ['schema_name', 'index_name'],
  counters: INDEX_COUNTERS,
  gauges: INDEX_GAUGES,
  latestColumns: ['table_name', ...INDEX_COUNTERS, ...INDEX_GAUGES, 'index_def', 'is_unique', 'is_primary', 'is_valid'],
  keep: {
    size_bytes: keepSize('latest_indexes', 'size_bytes'),
    // The agent sends an empty definition for an index it could not deparse yet (its table was locked).
    index_def: { unknown: (v) => v === '', sql: `CASE WHEN excluded.index_def = '' THEN latest_indexes.index_def ELSE excluded.index_def END` },
  },
}

/** A latest column's value as the store gives it back (SQLite's booleans are 0 and 1), for comparing. */
function normalized(column: string, v: unknown): unknown {
  if (v === null || v === undefined) return null
  const type = INGEST_COLUMN_TYPES[column]
  return type === 'boolean' ? Boolean(v) : type === 'text' ? String(v) : Number(v)
}

/** metric_gauges rows of this source record, per bucket, that a batch carried an object section (see the header). */
export const SAMPLED_SOURCE: MetricSource = 'ingest'

/** What a batch's section is compared with before its bucket rows are written. */
interface StoredState {
  /** No newer batch has set the latest rows (a late batch only adds to the buckets). */
  newest: boolean
  /**
   * The batch is newer than every one that carried the section (not a later part of a split cycle):
   * the stored objects it does not name are gone.
   */
  newCycle: boolean
  /** The latest rows by object key: their key, when they were written, their gauges and all their other columns (normalized). */
  latest: Map<string, { key: string[]; ts: number; gauges: (number | null)[]; values: unknown[] }>
  /** The latest time a batch carrying the section was collected in the batch's minute and hour, by resolution in seconds. */
  lastSampled: Map<number, number>
}

/**
 * Registers the reads the section's writes depend on (the latest rows, when its minute and hour and
 * the hours after were last sampled); the returned function answers them once the reads are sent.
 * The section was last carried at the latest of those hours' sampled_at (the rows' ts, written only
 * when an object changed or once an hour, may be older; a store from before the sampled rows has only them).
 */
function storedState(reads: Reads, spec: BucketTable, databaseId: string, collectedAt: number): () => StoredState {
  const rows = reads.add({
    sql: `SELECT ${spec.keyColumns.join(', ')}, ts, ${spec.latestColumns.join(', ')} FROM ${spec.latest} WHERE database_id = $1`,
    params: [databaseId],
  })
  const minute = floorTo(collectedAt, MINUTE_MS)
  const hour = floorTo(collectedAt, HOUR_MS)
  const sampled = reads.add({
    sql: `SELECT resolution, bucket, sampled_at FROM metric_gauges
     WHERE database_id = $1 AND source = $2 AND ((resolution = 60 AND bucket = $3) OR (resolution = 3600 AND bucket >= $4)) AND subject = '' AND metric = $5`,
    params: [databaseId, SAMPLED_SOURCE, minute, hour, spec.section],
  })
  const gaugeAt = spec.gauges.map((g) => spec.latestColumns.indexOf(g))
  return () => {
    let lastCarried = Number.NEGATIVE_INFINITY
    const latest: StoredState['latest'] = new Map()
    for (const r of rows()) {
      const ts = Number(r.ts)
      lastCarried = Math.max(lastCarried, ts)
      const key = spec.keyColumns.map((c) => String(r[c]))
      const values = spec.latestColumns.map((c) => normalized(c, r[c]))
      latest.set(JSON.stringify(key), { key, ts, gauges: gaugeAt.map((i) => values[i] as number | null), values })
    }
    const lastSampled = new Map<number, number>()
    for (const r of sampled()) {
      const [resolution, bucket, sampledAt] = [Number(r.resolution), Number(r.bucket), Number(r.sampled_at)]
      if (resolution === 3600) lastCarried = Math.max(lastCarried, sampledAt)
      if (bucket === (resolution === 60 ? minute : hour)) lastSampled.set(resolution, sampledAt)
    }
    return { newest: collectedAt >= lastCarried, newCycle: collectedAt > lastCarried, latest, lastSampled }
  }
}

/**
 * Whether an object's rows are written: it is new or first reported this hour, or it moved since its
 * latest row: a delta that is not zero (a first sample's unknown one included), or a measured gauge that
 * differs from the latest row's (an unmeasured one, null, is not news).
 */
function isNews(row: { key: string[]; first: boolean; counters: (number | bigint | null)[]; gauges: (number | null)[] }, stored: StoredState, collectedAt: number): boolean {
  const before = stored.latest.get(JSON.stringify(row.key))
  if (!before || floorTo(before.ts, HOUR_MS) < floorTo(collectedAt, HOUR_MS)) return true
  // An unknown counter (null) is not news, or a table without indexes (idx_scan null) or a counter its
  // PostgreSQL lacks would be written every batch.
  return row.first || row.counters.some((c) => c !== null && c !== 0) || row.gauges.some((g, i) => g !== null && g !== before.gauges[i])
}

/**
 * Adds the rows to the minute bucket of `collectedAt`: only the objects that are news (isNews), or
 * every object of a late batch (it cannot be compared). The hourly bucket is rolled up from the minute
 * rows once the hour closed (rollups/rollups.ts); a batch into an hour rolled up already (`hoursUntil` past
 * it: delivered late from an agent's buffer, or after retention rolled a quiet database up) adds to the
 * hourly row as well, as it always did, so the hour's sums stay exact.
 */
function addToBuckets(
  writes: Writes,
  databaseId: string,
  collectedAt: number,
  spec: BucketTable,
  stored: StoredState,
  rows: BucketRow[],
  hoursUntil: number,
): Set<string> {
  const merged = mergeBucketRows(rows)
  if (!stored.newest) pinLaterMinute(writes, databaseId, collectedAt, spec)
  const written = stored.newest ? merged.filter((r) => isNews(r, stored, collectedAt)) : merged
  const update: Record<string, string> = { sampled_at: writes.sqlDialect.greatest(`${spec.table}.sampled_at`, 'excluded.sampled_at') }
  for (const c of spec.counters) update[c] = sumSql(spec.table, c)
  for (const g of spec.gauges) update[g] = lastSql(spec.table, g)
  const rowsFor = (resolutionMs: number) => {
    // A late batch's gauges are not news in a bucket sampled after it (nulls keep the bucket's).
    const keepGauges = (stored.lastSampled.get(resolutionMs / 1000) ?? Number.NEGATIVE_INFINITY) > collectedAt
    return written.map((r) => [
      databaseId,
      ...r.key,
      resolutionMs / 1000,
      floorTo(collectedAt, resolutionMs),
      collectedAt,
      ...r.counters,
      ...(keepGauges ? r.gauges.map(() => null) : r.gauges),
    ])
  }
  writes.upsert(
    spec.table,
    ['database_id', ...spec.keyColumns, 'resolution', 'bucket', 'sampled_at', ...spec.counters, ...spec.gauges],
    floorTo(collectedAt, HOUR_MS) < hoursUntil ? [...rowsFor(MINUTE_MS), ...rowsFor(HOUR_MS)] : rowsFor(MINUTE_MS),
    { key: ['database_id', ...spec.keyColumns, 'resolution', 'bucket'], update },
  )
  return new Set(written.map((r) => JSON.stringify(r.key)))
}

/**
 * Before a late batch's rows land in their minute: the next minute of that hour a batch sampled read
 * each object's gauges from its latest row before it, which the late row would now replace. Each such
 * object gets, in that next minute, a row of zero deltas and those gauges (unless it has a row there),
 * so the minutes after keep reading what they did.
 */
function pinLaterMinute(writes: Writes, databaseId: string, collectedAt: number, spec: BucketTable) {
  const [, name] = spec.keyColumns
  const minute = floorTo(collectedAt, MINUTE_MS)
  const hour = floorTo(collectedAt, HOUR_MS)
  const columns = ['database_id', 'schema_name', name, 'resolution', 'bucket', 'sampled_at', ...spec.counters, ...spec.gauges]
  writes.add(
    `INSERT INTO ${spec.table} (${columns.join(', ')})
     SELECT t.database_id, t.schema_name, t.${name}, 60, n.bucket, t.sampled_at, ${spec.counters.map(() => '0').join(', ')}, ${spec.gauges.map((g) => `t.${g}`).join(', ')}
     FROM ${spec.table} t, (
       SELECT MIN(bucket) AS bucket FROM metric_gauges
       WHERE database_id = $1 AND source = $2 AND resolution = 60 AND bucket > $4 AND bucket < $5 AND subject = '' AND metric = $6
     ) n
     WHERE n.bucket IS NOT NULL AND t.database_id = $1 AND t.resolution = 60 AND t.bucket >= $3 AND t.bucket <= $4
       AND t.bucket = (SELECT MAX(l.bucket) FROM ${spec.table} l WHERE l.database_id = $1 AND l.schema_name = t.schema_name
                       AND l.${name} = t.${name} AND l.resolution = 60 AND l.bucket >= $3 AND l.bucket <= $4)
     ON CONFLICT (database_id, schema_name, ${name}, resolution, bucket) DO NOTHING`,
    [databaseId, SAMPLED_SOURCE, hour, minute, hour + HOUR_MS, spec.section],
  )
}

/**
 * Records, in the minute and hour of the batch, each object section it carried (see the header): value 1
 * (a batch split into parts writes the same rows as the whole one), sampled_at the latest batch's time.
 */
function markSampled(writes: Writes, databaseId: string, batch: IngestBatch) {
  const newer = 'excluded.sampled_at >= metric_gauges.sampled_at'
  const sections = (['tables', 'indexes'] as const).filter((section) => batch[section] !== undefined)
  writes.upsert(
    'metric_gauges',
    ['database_id', 'resolution', 'bucket', 'source', 'subject', 'metric', 'value', 'sampled_at'],
    sections.flatMap((section) =>
      [MINUTE_MS, HOUR_MS].map((r) => [databaseId, r / 1000, floorTo(batch.collected_at, r), SAMPLED_SOURCE, '', section, 1, batch.collected_at]),
    ),
    {
      key: ['database_id', 'source', 'resolution', 'bucket', 'subject', 'metric'],
      update: {
        value: `CASE WHEN ${newer} THEN excluded.value ELSE metric_gauges.value END`,
        sampled_at: `CASE WHEN ${newer} THEN excluded.sampled_at ELSE metric_gauges.sampled_at END`,
      },
    },
  )
}

/** An object's latest row as the batch has it: its key, and its values in the order of spec.latestColumns. */
interface LatestEntry {
  key: string[]
  values: unknown[]
}

/** Whether the entry says something its stored latest row does not (an unknown size or definition keeps the stored one). */
function latestChanged(spec: BucketTable, entry: LatestEntry, before: { values: unknown[] }): boolean {
  return spec.latestColumns.some((c, i) => {
    const incoming = normalized(c, entry.values[i])
    return incoming !== before.values[i] && !spec.keep[c]?.unknown(incoming)
  })
}

/**
 * Brings the latest rows up to the batch (a batch no older than the stored ones): an object's row is
 * written, with ts = collected_at, when it is new, changed (latestChanged), or got bucket rows
 * (`bucketed`: it moved, or its first report of the hour); the rows of unchanged objects stay as they
 * are, so an idle database's batch writes none of its ~250. A row's ts is therefore when it was last
 * written, within the hour of the object's latest report: retention (which deletes latest rows older
 * than its cutoff) never reaches a reported object, and reads show the section's last sampled time as
 * each row's "as of" (readers below). The first batch of a newer cycle removes, by key, the stored
 * objects it does not name; later parts of a split cycle (the same collected_at) remove nothing.
 */
function updateLatest(writes: Writes, spec: BucketTable, databaseId: string, collectedAt: number, stored: StoredState, bucketed: Set<string>, entries: LatestEntry[]) {
  const unique = new Map(entries.map((e) => [JSON.stringify(e.key), e]))
  const written: unknown[][] = []
  for (const [id, entry] of unique) {
    const before = stored.latest.get(id)
    if (!before || bucketed.has(id) || latestChanged(spec, entry, before)) written.push([databaseId, ...entry.key, collectedAt, ...entry.values])
  }
  const update = Object.fromEntries(['ts', ...spec.latestColumns].map((c) => [c, spec.keep[c]?.sql ?? `excluded.${c}`]))
  const key = ['database_id', ...spec.keyColumns]
  writes.upsert(spec.latest, [...key, 'ts', ...spec.latestColumns], written, { key, update })
  if (!stored.newCycle) return
  const gone = [...stored.latest].filter(([id]) => !unique.has(id)).map(([, before]) => before.key)
  if (gone.length > 0) removeLatest(writes, spec, databaseId, gone)
}

/**
 * Deletes the latest rows of the given objects, in one statement whatever their number (the keys travel
 * as the dialect's pairsIn parameters).
 */
function removeLatest(writes: Writes, spec: BucketTable, databaseId: string, keys: string[][]) {
  const [schema, name] = spec.keyColumns.map((c) => ident(c, KEY_COLUMNS))
  const q = sql`DELETE FROM ${ident(spec.latest, LATEST_TABLES)} WHERE database_id = ${databaseId} AND ${writes.sqlDialect.pairsIn(schema!, name!, keys)}`
  writes.add(q.sql, q.params)
}

/** A table's or an index's sample, as the section's BucketTable reads it by column name. */
type ObjectSample = (TableStat | IndexStat) & Record<string, unknown>

/** The integer columns of the latest rows (counters, gauges, times); the others are kept as sent (text, booleans). */
const INTEGER_COLUMNS: ReadonlySet<string> = new Set([...TABLE_COUNTERS, ...TABLE_GAUGES, ...TABLE_TIMES, ...INDEX_COUNTERS, ...INDEX_GAUGES])

/** One section (tables or indexes): its bucket rows for the objects that moved, then its latest rows. */
function applySection(
  reads: Reads,
  spec: BucketTable,
  databaseId: string,
  collectedAt: number,
  objects: readonly ObjectSample[],
): (writes: Writes, hoursUntil: number) => void {
  const state = storedState(reads, spec, databaseId, collectedAt)
  const keyOf = (o: ObjectSample) => spec.keyColumns.map((c) => String(o[c]))
  return (writes, hoursUntil) => {
    const stored = state()
    const bucketed = addToBuckets(
      writes,
      databaseId,
      collectedAt,
      spec,
      stored,
      objects.map((o) => {
        const delta = o.delta as Record<string, number | null | undefined> | null
        return { key: keyOf(o), first: !delta, counters: spec.counters.map((c) => (delta ? int(delta[c]) : null)), gauges: spec.gauges.map((g) => int(o[g] as number | null)) }
      }),
      hoursUntil,
    )
    if (!stored.newest) return
    updateLatest(
      writes,
      spec,
      databaseId,
      collectedAt,
      stored,
      bucketed,
      objects.map((o) => ({ key: keyOf(o), values: spec.latestColumns.map((c) => (INTEGER_COLUMNS.has(c) ? int(o[c] as number | null) : (o[c] ?? null))) })),
    )
  }
}

/**
 * The batch's tables and indexes sections (activity and locks are kept as snapshots by snapshots.ts):
 * registers the reads they depend on and returns the function that adds their writes once those are
 * sent, after the batch's rollup (planRollup, which runs for every batch carrying either section) with
 * the marks it left.
 */
export function applyObjects(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes, marks: RollupMarks | undefined) => void {
  const writeTables = batch.tables ? applySection(reads, TABLE_BUCKETS, databaseId, batch.collected_at, batch.tables as ObjectSample[]) : undefined
  const writeIndexes = batch.indexes ? applySection(reads, INDEX_BUCKETS, databaseId, batch.collected_at, batch.indexes as ObjectSample[]) : undefined
  return (writes, marks) => {
    // Without marks (no section to write) no hour is rolled up.
    const hoursUntil = marks?.hours ?? Number.NEGATIVE_INFINITY
    writeTables?.(writes, hoursUntil)
    writeIndexes?.(writes, hoursUntil)
    markSampled(writes, databaseId, batch)
  }
}

// ---- reads ----

// size is pg_table_size (heap, maps and TOAST); total_size pg_total_relation_size (with the indexes).
export const TABLE_SORTS = ['size', 'dead_tuples', 'seq_scans', 'live_tuples', 'index_size', 'heap_size', 'toast_size', 'total_size'] as const
export type TableSort = (typeof TABLE_SORTS)[number]
export const INDEX_SORTS = ['size', 'scans', 'tuples_read'] as const
export type IndexSort = (typeof INDEX_SORTS)[number]

/** Largest first; unknown values last; ties by name, so the order is stable. */
const TABLE_ORDER: Record<TableSort, string> = {
  size: 'table_size_bytes',
  dead_tuples: 'n_dead_tup',
  seq_scans: 'seq_scan',
  live_tuples: 'n_live_tup',
  index_size: 'index_size_bytes',
  heap_size: 'heap_bytes',
  toast_size: 'toast_bytes',
  total_size: '(table_size_bytes + index_size_bytes)',
}
const INDEX_ORDER: Record<IndexSort, string> = { size: 'size_bytes', scans: 'idx_scan', tuples_read: 'idx_tup_read' }

const orderBy = (column: string, names: string) => `ORDER BY ${column} IS NULL, ${column} DESC, ${names}`

const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))
const boolOrNull = (v: unknown): boolean | null => (v === null || v === undefined ? null : Boolean(v))

/** A table's latest row: the table family's counters and gauges (src/shared/families.ts), its times and flags. */
export type TableRow = Record<TableCounter | TableGauge, number | null> & {
  schema_name: string
  table_name: string
  ts: number
  last_vacuum: number | null
  last_autovacuum: number | null
  last_analyze: number | null
  last_autoanalyze: number | null
  has_primary_key: boolean | null
  /** False when autovacuum is turned off for the table (or its TOAST table); null from agents that do not send it. */
  autovacuum_enabled: boolean | null
}

/**
 * The latest rows of a section with the time the section was last carried (`carried_at`), which is
 * every row's "as of" time: each stored row was named by that batch (the first batch of a cycle removes
 * the others), whereas its own ts says when it was last written (an unchanged object's row is not).
 * From the latest hour's sampled row (kept as long as the latest rows, see the header).
 */
function latestRowsSql(spec: BucketTable): string {
  return `${spec.latest} LEFT JOIN (
       SELECT sampled_at AS carried_at FROM metric_gauges
       WHERE database_id = $1 AND source = '${SAMPLED_SOURCE}' AND resolution = 3600 AND subject = '' AND metric = '${spec.section}'
       ORDER BY bucket DESC LIMIT 1
     ) carried ON 1 = 1`
}

/** A latest row's "as of" time (see latestRowsSql). */
const asOf = (r: Record<string, unknown>) => Math.max(Number(r.ts), numOrNull(r.carried_at) ?? Number.NEGATIVE_INFINITY)

function toTableRow(r: Record<string, unknown>): TableRow {
  const numbers = Object.fromEntries([...TABLE_COUNTERS, ...TABLE_GAUGES, ...TABLE_TIMES].map((c) => [c, numOrNull(r[c])]))
  return {
    schema_name: String(r.schema_name),
    table_name: String(r.table_name),
    ts: asOf(r),
    ...numbers,
    has_primary_key: boolOrNull(r.has_primary_key),
    autovacuum_enabled: boolOrNull(r.autovacuum_enabled),
  } as TableRow
}

/** An index's latest row: the index family's counters and gauges (src/shared/families.ts), its definition and flags. */
export type IndexRow = Record<IndexCounter | IndexGauge, number | null> & {
  schema_name: string
  table_name: string
  index_name: string
  ts: number
  index_def: string
  is_unique: boolean
  is_primary: boolean
  is_valid: boolean
}

function toIndexRow(r: Record<string, unknown>): IndexRow {
  return {
    schema_name: String(r.schema_name),
    table_name: String(r.table_name),
    index_name: String(r.index_name),
    ts: asOf(r),
    ...Object.fromEntries([...INDEX_COUNTERS, ...INDEX_GAUGES].map((c) => [c, numOrNull(r[c])])),
    index_def: String(r.index_def),
    is_unique: Boolean(r.is_unique),
    is_primary: Boolean(r.is_primary),
    is_valid: Boolean(r.is_valid),
  } as IndexRow
}

/** One bucket of an object's timeseries: `ts` is the bucket's start; null where nothing was known. */
export type Point<C extends string> = { ts: number } & Record<C, number | null>

export interface Series<C extends string> {
  resolution: number
  points: Point<C>[]
}

/**
 * The buckets of one object in the window: minute buckets up to 24 hours, hourly beyond. Hourly points
 * exist for every hour the object was reported: the rolled-up rows of the hours before the database's
 * hourly mark, and the hours from it on (the current one, or closed ones not rolled up yet) computed
 * from the minute rows the same way (objects/hours.ts), so an hour reads the same before and after
 * its rollup. A sampled minute without the object's row (it did not move) reads as zero deltas with the
 * gauges carried forward from its latest earlier row of that hour (see the header).
 */
async function series<C extends string>(
  driver: SqlDriver,
  spec: BucketTable,
  key: { databaseId: string; schema: string; name: string },
  values: readonly C[],
  window: Window,
): Promise<Series<C>> {
  const resolution = seriesResolution(window)
  const from = floorTo(window.since, resolution * 1000)
  const object = `database_id = $1 AND schema_name = $2 AND ${spec.keyColumns[1]} = $3`
  const pointOf = (r: Record<string, unknown>) => ({ ts: Number(r.bucket), ...Object.fromEntries(values.map((v) => [v, numOrNull(r[v])])) }) as Point<C>
  const bucketRows = (until: number) =>
    driver.all(
      `SELECT bucket, ${values.join(', ')} FROM ${spec.table}
       WHERE ${object} AND resolution = $4 AND bucket >= $5 AND bucket < $6
       ORDER BY bucket`,
      [key.databaseId, key.schema, key.name, resolution, from, until],
    )
  if (resolution === 3600) {
    // A database without marks wrote no table or index rows since hourly rows are rolled up: its
    // hourly rows are all complete (rollups/rollups.ts).
    const marks = await readMarks(driver, key.databaseId)
    const rolledUntil = marks ? Math.min(Math.max(marks.hours, from), window.until) : window.until
    const rolled = rolledUntil > from ? await bucketRows(rolledUntil) : []
    if (rolledUntil >= window.until) return { resolution, points: rolled.map(pointOf) }
    // The window's last hour whole, as its hourly row would hold it.
    const computed = await driver.all(`SELECT bucket, ${values.join(', ')} FROM (${hourlyRowsSql(driver.sqlDialect, spec.hours, true)}) h ORDER BY bucket`, [
      key.databaseId,
      rolledUntil,
      Math.ceil(window.until / HOUR_MS) * HOUR_MS,
      key.schema,
      key.name,
    ])
    return { resolution, points: [...rolled, ...computed].map(pointOf) }
  }
  const rows = await bucketRows(window.until)

  const sampled = await driver.all<{ bucket: unknown }>(
    `SELECT bucket FROM metric_gauges
     WHERE database_id = $1 AND source = $2 AND resolution = 60 AND bucket >= $3 AND bucket < $4 AND subject = '' AND metric = $5`,
    [key.databaseId, SAMPLED_SOURCE, from, window.until, spec.section],
  )
  const carried = await driver.get(
    `SELECT ${[...spec.counters, ...spec.gauges].join(', ')} FROM ${spec.table} WHERE ${object} AND resolution = 60 AND bucket >= $4 AND bucket < $5 ORDER BY bucket DESC LIMIT 1`,
    [key.databaseId, key.schema, key.name, floorTo(from, HOUR_MS), from],
  )
  // The gauges as of the bucket being read; undefined while no row of the object is known in its hour.
  let gauges: (number | null)[] | undefined = carried ? spec.gauges.map((g) => numOrNull(carried[g])) : undefined
  // Which counters the latest row knows: a null one (idx_scan of a table without indexes, a counter the
  // object's PostgreSQL lacks) stays null in an idle minute, a known one reads 0. A row of all nulls is a
  // first sample (no deltas yet) and says nothing of which are known.
  const knownIn = (r: Record<string, unknown>, before: boolean[]) => {
    const known = spec.counters.map((c) => r[c] !== null && r[c] !== undefined)
    return known.some(Boolean) ? known : before
  }
  let known: boolean[] = knownIn(carried ?? {}, spec.counters.map(() => true))
  const byBucket = new Map(rows.map((r) => [Number(r.bucket), r]))
  const buckets = [...new Set([...byBucket.keys(), ...sampled.map((r) => Number(r.bucket))])].sort((a, b) => a - b)
  const points: Point<C>[] = []
  let hour = floorTo(from, HOUR_MS)
  for (const bucket of buckets) {
    if (floorTo(bucket, HOUR_MS) !== hour) {
      hour = floorTo(bucket, HOUR_MS)
      gauges = undefined
    }
    const row = byBucket.get(bucket)
    if (row) {
      const point = pointOf(row)
      gauges = spec.gauges.map((g, i) => numOrNull(row[g]) ?? gauges?.[i] ?? null)
      known = knownIn(row, known)
      points.push(point)
    } else if (gauges) {
      const point: Record<string, number | null> = { ts: bucket }
      spec.counters.forEach((c, i) => (point[c] = known[i] ? 0 : null))
      spec.gauges.forEach((g, i) => (point[g] = gauges![i]!))
      points.push(point as Point<C>)
    }
  }
  return { resolution, points }
}

export const TABLE_POINT_FIELDS = [...TABLE_COUNTERS, ...TABLE_GAUGES] as const
export const INDEX_POINT_FIELDS = [...INDEX_COUNTERS, ...INDEX_GAUGES] as const

export interface Snapshot<T> {
  /** When the agent took it; null when no batch carried the section yet. */
  ts: number | null
  entries: T[]
}

/** Longest first; unknown durations last. */
function byDurationDesc(a: { duration_ms: number | null }, b: { duration_ms: number | null }): number {
  return (b.duration_ms ?? -1) - (a.duration_ms ?? -1)
}

async function snapshot<T>(driver: SqlDriver, databaseId: string, kind: 'activity' | 'locks'): Promise<Snapshot<T>> {
  const found = await latestSnapshot(driver, databaseId, kind)
  return found ? { ts: found.ts, entries: Array.isArray(found.payload) ? (found.payload as T[]) : [] } : { ts: null, entries: [] }
}

/** Reads of tables, indexes, active queries and locks. */
export interface ObjectsReader {

  /** The latest active sessions, longest running first. */
  activeQueries(databaseId: string, limit: number): Promise<Snapshot<ActiveQuery>>;
  /** The latest locks, the ones waited for first, then the longest held. */
  locks(databaseId: string, limit: number): Promise<Snapshot<LockEntry>>;
  listTables(databaseId: string, sort: TableSort, limit: number): Promise<TableRow[]>;
  table(databaseId: string, schema: string, name: string): Promise<TableRow | undefined>;
  tableSeries(databaseId: string, schema: string, name: string, window: Window): Promise<Series<TableCounter | TableGauge>>;
  /** Indexes by `sort`; with `unusedOnly`, only those the spec calls unused (never scanned, neither primary nor unique, over 1 MB). */
  listIndexes(databaseId: string, sort: IndexSort, limit: number, unusedOnly?: boolean): Promise<IndexRow[]>;
  index(databaseId: string, schema: string, name: string): Promise<IndexRow | undefined>;
  indexSeries(databaseId: string, schema: string, name: string, window: Window): Promise<Series<IndexCounter | IndexGauge>>;
}

/** Reads for the routes of this part. */
export function objectsReader(driver: SqlDriver): ObjectsReader {
  return {
    /** The latest active sessions, longest running first. */
    async activeQueries(databaseId: string, limit: number): Promise<Snapshot<ActiveQuery>> {
      const found = await snapshot<ActiveQuery>(driver, databaseId, 'activity')
      return { ts: found.ts, entries: found.entries.sort(byDurationDesc).slice(0, limit) }
    },

    /** The latest locks, the ones waited for first, then the longest held. */
    async locks(databaseId: string, limit: number): Promise<Snapshot<LockEntry>> {
      const found = await snapshot<LockEntry>(driver, databaseId, 'locks')
      const order = (a: LockEntry, b: LockEntry) => Number(a.granted) - Number(b.granted) || byDurationDesc(a, b) || a.pid - b.pid
      return { ts: found.ts, entries: found.entries.sort(order).slice(0, limit) }
    },

    async listTables(databaseId: string, sort: TableSort, limit: number): Promise<TableRow[]> {
      const rows = await driver.all(
        `SELECT * FROM ${latestRowsSql(TABLE_BUCKETS)} WHERE database_id = $1 ${orderBy(TABLE_ORDER[sort], 'schema_name, table_name')} LIMIT $2`,
        [databaseId, limit],
      )
      return rows.map(toTableRow)
    },

    async table(databaseId: string, schema: string, name: string): Promise<TableRow | undefined> {
      const row = await driver.get(`SELECT * FROM ${latestRowsSql(TABLE_BUCKETS)} WHERE database_id = $1 AND schema_name = $2 AND table_name = $3`, [
        databaseId,
        schema,
        name,
      ])
      return row ? toTableRow(row) : undefined
    },

    tableSeries(databaseId: string, schema: string, name: string, window: Window) {
      return series(driver, TABLE_BUCKETS, { databaseId, schema, name }, TABLE_POINT_FIELDS, window)
    },

    /** Indexes by `sort`; with `unusedOnly`, only those the spec calls unused (never scanned, neither primary nor unique, over 1 MB). */
    async listIndexes(databaseId: string, sort: IndexSort, limit: number, unusedOnly = false): Promise<IndexRow[]> {
      const unused = 'AND idx_scan = 0 AND is_primary = $3 AND is_unique = $3 AND size_bytes > $4'
      const rows = await driver.all(
        `SELECT * FROM ${latestRowsSql(INDEX_BUCKETS)} WHERE database_id = $1 ${unusedOnly ? unused : ''}
         ${orderBy(INDEX_ORDER[sort], 'schema_name, index_name')} LIMIT $2`,
        unusedOnly ? [databaseId, limit, false, unusedIndexMinBytes] : [databaseId, limit],
      )
      return rows.map(toIndexRow)
    },

    async index(databaseId: string, schema: string, name: string): Promise<IndexRow | undefined> {
      const row = await driver.get(`SELECT * FROM ${latestRowsSql(INDEX_BUCKETS)} WHERE database_id = $1 AND schema_name = $2 AND index_name = $3`, [
        databaseId,
        schema,
        name,
      ])
      return row ? toIndexRow(row) : undefined
    },

    indexSeries(databaseId: string, schema: string, name: string, window: Window) {
      return series(driver, INDEX_BUCKETS, { databaseId, schema, name }, INDEX_POINT_FIELDS, window)
    },
  }
}
