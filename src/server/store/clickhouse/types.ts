// The store's contract for ClickHouse parts, merges, mutations and server metrics: records and
// interfaces. reads.ts implements ClickHouseReads, writes.ts ClickHouseWrites (ingest).
import type { IngestBatch, MergeEntry, MutationEntry, PartStat } from '../../../shared/wire.ts'
import type { Intervals, Latest, MetricPoint, MetricSource } from '../internals/types.ts'
import type { Writes } from '../ingest/batch.ts'

/** Gauges derived from each parts section. */
export const PARTS_GAUGE_KEYS = ['active_parts', 'partition_count', 'max_partition_parts'] as const

/** Metric families of this part in metric_gauges / metric_counters. */
export type ClickHouseSource = Extract<MetricSource, 'server' | 'disk' | 'parts'>

/** Sections kept whole as the latest of their kind. */
export const CLICKHOUSE_LATEST_KINDS = ['parts', 'merges', 'mutations', 'server_metrics'] as const
export type ClickHouseLatestKind = (typeof CLICKHOUSE_LATEST_KINDS)[number]

/** Reads of ClickHouse parts, merges, mutations and server metrics. */
export interface ClickHouseReads {
  latestParts(databaseId: string): Promise<Latest<PartStat[]> | undefined>
  latestMerges(databaseId: string): Promise<Latest<MergeEntry[]> | undefined>
  latestMutations(databaseId: string): Promise<Latest<MutationEntry[]> | undefined>
  latestServerMetrics(databaseId: string): Promise<Latest<Record<string, number | null>> | undefined>
  metricSeries(databaseId: string, source: ClickHouseSource, intervals: Intervals): Promise<MetricPoint[]>
}

/** ClickHouse sections at ingest. */
export interface ClickHouseWrites {
  /** Applies the batch's parts, merges, mutations and server_metrics sections (nothing when it has none). */
  applyClickHouse(writes: Writes, databaseId: string, batch: IngestBatch): void
}
