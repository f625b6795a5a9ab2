// Tables and indexes at ingest: each section's minute bucket rows for the objects that moved, the
// latest rows brought up to the batch, and the record that the batch sampled the section (the layout
// and why: buckets.ts). Hourly rows are rolled up later by rollups/rollups.ts (objects/hours.ts).
import { INDEX_COUNTERS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_GAUGES } from '../../../shared/families.ts'
import type { IndexStat, IngestBatch, TableStat } from '../../../shared/wire.ts'
import { int64Counter, saturatingAdd } from '../sums.ts'
import type { RollupMarks } from '../rollups/rollups.ts'
import { ident, sql } from '../sql.ts'
import { HOUR_MS, MINUTE_MS, floorTo } from '../window.ts'
import { INGEST_COLUMN_TYPES, type Reads, type Writes } from '../ingest/batch.ts'
import {
  type BucketTable,
  INDEX_BUCKETS,
  KEY_COLUMNS,
  LATEST_TABLES,
  SAMPLED_SOURCE,
  TABLE_BUCKETS,
  TABLE_TIMES,
} from './buckets.ts'
import type { ObjectWrites } from './types.ts'

/** Counts are integers in the store; a fractional one from the wire is rounded, not refused by BIGINT. */
const int = (v: number | null | undefined): number | null => (v === null || v === undefined ? null : Math.round(v))

/** A sum that stays null only while both sides are (a bucket of first samples has no delta), saturating at BIGINT's maximum (sums.ts). */
const sumSql = (table: string, c: string) =>
  `COALESCE(${saturatingAdd(`${table}.${c}`, `excluded.${c}`)}, ${table}.${c}, excluded.${c})`
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
function mergeBucketRows(
  rows: BucketRow[],
): (Omit<BucketRow, 'counters'> & { counters: (number | bigint | null)[] })[] {
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
  return [...merged.values()].map((row) =>
    repeated.has(row) ? { ...row, counters: row.counters.map((c) => (c === null ? c : int64Counter(c))) } : row,
  )
}

/** A latest column's value as the store gives it back (SQLite's booleans are 0 and 1), for comparing. */
function normalized(column: string, v: unknown): unknown {
  if (v === null || v === undefined) return null
  const type = INGEST_COLUMN_TYPES[column]
  return type === 'boolean' ? Boolean(v) : type === 'text' ? String(v) : Number(v)
}

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
function isNews(
  row: { key: string[]; first: boolean; counters: (number | bigint | null)[]; gauges: (number | null)[] },
  stored: StoredState,
  collectedAt: number,
): boolean {
  const before = stored.latest.get(JSON.stringify(row.key))
  if (!before || floorTo(before.ts, HOUR_MS) < floorTo(collectedAt, HOUR_MS)) return true
  // An unknown counter (null) is not news, or a table without indexes (idx_scan null) or a counter its
  // PostgreSQL lacks would be written every batch.
  return (
    row.first ||
    row.counters.some((c) => c !== null && c !== 0) ||
    row.gauges.some((g, i) => g !== null && g !== before.gauges[i])
  )
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
  const update: Record<string, string> = {
    sampled_at: writes.sqlDialect.greatest(`${spec.table}.sampled_at`, 'excluded.sampled_at'),
  }
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
  const columns = [
    'database_id',
    'schema_name',
    name,
    'resolution',
    'bucket',
    'sampled_at',
    ...spec.counters,
    ...spec.gauges,
  ]
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
      [MINUTE_MS, HOUR_MS].map((r) => [
        databaseId,
        r / 1000,
        floorTo(batch.collected_at, r),
        SAMPLED_SOURCE,
        '',
        section,
        1,
        batch.collected_at,
      ]),
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
function updateLatest(
  writes: Writes,
  spec: BucketTable,
  databaseId: string,
  collectedAt: number,
  stored: StoredState,
  bucketed: Set<string>,
  entries: LatestEntry[],
) {
  const unique = new Map(entries.map((e) => [JSON.stringify(e.key), e]))
  const written: unknown[][] = []
  for (const [id, entry] of unique) {
    const before = stored.latest.get(id)
    if (!before || bucketed.has(id) || latestChanged(spec, entry, before))
      written.push([databaseId, ...entry.key, collectedAt, ...entry.values])
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
const INTEGER_COLUMNS: ReadonlySet<string> = new Set([
  ...TABLE_COUNTERS,
  ...TABLE_GAUGES,
  ...TABLE_TIMES,
  ...INDEX_COUNTERS,
  ...INDEX_GAUGES,
])

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
        return {
          key: keyOf(o),
          first: !delta,
          counters: spec.counters.map((c) => (delta ? int(delta[c]) : null)),
          gauges: spec.gauges.map((g) => int(o[g] as number | null)),
        }
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
      objects.map((o) => ({
        key: keyOf(o),
        values: spec.latestColumns.map((c) => (INTEGER_COLUMNS.has(c) ? int(o[c] as number | null) : (o[c] ?? null))),
      })),
    )
  }
}

/**
 * The batch's tables and indexes sections (activity and locks are kept as snapshots by snapshots.ts):
 * registers the reads they depend on and returns the function that adds their writes once those are
 * sent, after the batch's rollup (planRollup, which runs for every batch carrying either section) with
 * the marks it left.
 */
export function applyObjects(
  reads: Reads,
  databaseId: string,
  batch: IngestBatch,
): (writes: Writes, marks: RollupMarks | undefined) => void {
  const writeTables = batch.tables
    ? applySection(reads, TABLE_BUCKETS, databaseId, batch.collected_at, batch.tables as ObjectSample[])
    : undefined
  const writeIndexes = batch.indexes
    ? applySection(reads, INDEX_BUCKETS, databaseId, batch.collected_at, batch.indexes as ObjectSample[])
    : undefined
  return (writes, marks) => {
    // Without marks (no section to write) no hour is rolled up.
    const hoursUntil = marks?.hours ?? Number.NEGATIVE_INFINITY
    writeTables?.(writes, hoursUntil)
    writeIndexes?.(writes, hoursUntil)
    markSampled(writes, databaseId, batch)
  }
}

export const objectWrites = { applyObjects } satisfies ObjectWrites
