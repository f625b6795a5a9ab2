// The store's contract for tables and indexes (their latest rows and series): records and interfaces
// (the latest active sessions and locks are sessions/). reads.ts implements ObjectReads, writes.ts ObjectWrites
// (ingest); buckets.ts says how the rows are kept.
import type { IndexCounter, IndexGauge, TableCounter, TableGauge } from '../../../shared/families.ts'
import { INDEX_COUNTERS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_GAUGES } from '../../../shared/families.ts'
import type { IngestBatch } from '../../../shared/wire.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import type { RollupMarks } from '../rollups/rollups.ts'
import type { Window } from '../window.ts'

// size is pg_table_size (heap, maps and TOAST); total_size pg_total_relation_size (with the indexes).
export const TABLE_SORTS = [
  'size',
  'dead_tuples',
  'seq_scans',
  'live_tuples',
  'index_size',
  'heap_size',
  'toast_size',
  'total_size',
] as const
export type TableSort = (typeof TABLE_SORTS)[number]
export const INDEX_SORTS = ['size', 'scans', 'tuples_read'] as const
export type IndexSort = (typeof INDEX_SORTS)[number]

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

/** One bucket of an object's timeseries: `ts` is the bucket's start; null where nothing was known. */
export type Point<C extends string> = { ts: number } & Record<C, number | null>

export interface Series<C extends string> {
  resolution: number
  points: Point<C>[]
}

/** The values of a table's and an index's series points: their family's counters and gauges. */
export const TABLE_POINT_FIELDS = [...TABLE_COUNTERS, ...TABLE_GAUGES] as const
export const INDEX_POINT_FIELDS = [...INDEX_COUNTERS, ...INDEX_GAUGES] as const
export type TablePointField = (typeof TABLE_POINT_FIELDS)[number]
export type IndexPointField = (typeof INDEX_POINT_FIELDS)[number]

/** Reads of tables and indexes. */
export interface ObjectReads {
  listTables(databaseId: string, sort: TableSort, limit: number): Promise<TableRow[]>
  table(databaseId: string, schema: string, name: string): Promise<TableRow | undefined>
  tableSeries(databaseId: string, schema: string, name: string, window: Window): Promise<Series<TablePointField>>
  /** Indexes by `sort`; with `unusedOnly`, only those the spec calls unused (never scanned, neither primary nor unique, over 1 MB). */
  listIndexes(databaseId: string, sort: IndexSort, limit: number, unusedOnly?: boolean): Promise<IndexRow[]>
  index(databaseId: string, schema: string, name: string): Promise<IndexRow | undefined>
  indexSeries(databaseId: string, schema: string, name: string, window: Window): Promise<Series<IndexPointField>>
}

/** Tables and indexes at ingest. */
export interface ObjectWrites {
  /**
   * The batch's tables and indexes sections: registers the reads they depend on and returns what adds
   * their writes once those are sent, after the batch's rollup with the marks it left.
   */
  applyObjects(
    reads: Reads,
    databaseId: string,
    batch: IngestBatch,
  ): (writes: Writes, marks: RollupMarks | undefined) => void
}
