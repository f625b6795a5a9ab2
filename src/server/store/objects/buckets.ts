// How tables and indexes are kept, shared by their writer (writes.ts) and their reader (reads.ts): the
// bucket tables, the latest-row tables and which of their columns an unknown value leaves alone, and the
// metric_gauges rows that record which minutes and hours a batch sampled each section.
//
// Tables and indexes: the latest statistics, and per-interval timeseries in 60-second buckets, rolled
// up into hourly ones.
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
import { INDEX_COUNTERS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_GAUGES } from '../../../shared/families.ts'
import { INDEX_HOURS, type ObjectHours, TABLE_HOURS } from './hours.ts'
import type { MetricSource } from '../internals/types.ts'

// The counters and gauges are the table and index families' (src/shared/families.ts).
export const TABLE_TIMES = ['last_vacuum', 'last_autovacuum', 'last_analyze', 'last_autoanalyze'] as const

export type ObjectSection = 'tables' | 'indexes'

/** The tables of objects' latest statistics, and the columns naming an object in them. */
export const LATEST_TABLES = ['latest_tables', 'latest_indexes'] as const
export const KEY_COLUMNS = ['schema_name', 'table_name', 'index_name'] as const

export interface BucketTable {
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

export const TABLE_BUCKETS: BucketTable = {
  section: 'tables',
  table: 'table_stats',
  hours: TABLE_HOURS,
  latest: 'latest_tables',
  keyColumns: ['schema_name', 'table_name'],
  counters: TABLE_COUNTERS,
  gauges: TABLE_GAUGES,
  latestColumns: [...TABLE_COUNTERS, ...TABLE_GAUGES, ...TABLE_TIMES, 'has_primary_key', 'autovacuum_enabled'],
  keep: Object.fromEntries(
    ['table_size_bytes', 'index_size_bytes', 'heap_bytes', 'toast_bytes'].map((c) => [c, keepSize('latest_tables', c)]),
  ),
}
export const INDEX_BUCKETS: BucketTable = {
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
    index_def: {
      unknown: (v) => v === '',
      sql: `CASE WHEN excluded.index_def = '' THEN latest_indexes.index_def ELSE excluded.index_def END`,
    },
  },
}

/** metric_gauges rows of this source record, per bucket, that a batch carried an object section (see the header). */
export const SAMPLED_SOURCE: MetricSource = 'ingest'
