// ClickHouse internals in the store: parts per partition, running merges, mutations and server metrics.
// The latest parts, merges, mutations and server_metrics sections are kept whole, one row per kind,
// and a batch collected before the stored one (a late delivery from the agent's buffer) never
// replaces it. Over time, in the 60-second and 1-hour buckets of metric_gauges / metric_counters
// (written and read by internals/internals.ts): the server's gauges (source 'server'), each disk's free and
// total bytes (source 'disk', the disk's name as subject), the query counters' deltas (source 'server')
// and, from each parts section, the total of active parts, the partitions and the largest partition's
// part count (source 'parts'), so a chart or the doctor can see parts pile up.
import { SERVER_COUNTER_KEYS, SERVER_GAUGE_KEYS, parseDiskMetricKey } from '../../../shared/metrics.ts'
import type { IngestBatch, MergeEntry, MutationEntry, PartStat } from '../../../shared/wire.ts'
import type { Latest, MetricPoint } from '../internals/internals.ts'
import type { SqlDriver } from '../driver.ts'
import { type Intervals, type MetricSource, type MetricValue, metricSeries, readLatest, writeLatest, writeMetrics } from '../internals/internals.ts'
import type { Writes } from '../ingest/batch.ts'

/** Gauges derived from each parts section. */
export const PARTS_GAUGE_KEYS = ['active_parts', 'partition_count', 'max_partition_parts'] as const

/** Metric families of this part in metric_gauges / metric_counters. */
export type ClickHouseSource = Extract<MetricSource, 'server' | 'disk' | 'parts'>

/** Sections kept whole as the latest of their kind. */
const LATEST_KINDS = ['parts', 'merges', 'mutations', 'server_metrics'] as const
type LatestKind = (typeof LATEST_KINDS)[number]

// ---- ingest ----

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)

/** The gauges of the batch: server gauges, disks, and the parts section's totals. */
function batchGauges(batch: IngestBatch): MetricValue[] {
  const gauges: MetricValue[] = []
  const metrics = batch.server_metrics ?? {}
  for (const metric of SERVER_GAUGE_KEYS) {
    const value = metrics[metric]
    if (isNumber(value)) gauges.push({ source: 'server', subject: '', metric, value })
  }
  for (const [key, value] of Object.entries(metrics)) {
    const disk = parseDiskMetricKey(key)
    if (disk && isNumber(value)) gauges.push({ source: 'disk', subject: disk.disk, metric: disk.key, value })
  }
  if (batch.parts) {
    const totals = partsTotals(batch.parts)
    for (const metric of PARTS_GAUGE_KEYS) gauges.push({ source: 'parts', subject: '', metric, value: totals[metric] })
  }
  return gauges
}

/** Active parts, partitions and the largest partition's part count of a parts section. */
export function partsTotals(parts: PartStat[]): Record<(typeof PARTS_GAUGE_KEYS)[number], number> {
  let active = 0
  let max = 0
  for (const p of parts) {
    active += p.active_parts
    max = Math.max(max, p.active_parts)
  }
  return { active_parts: active, partition_count: parts.length, max_partition_parts: max }
}

/** The query counters' deltas of the batch. */
function batchCounters(batch: IngestBatch): MetricValue[] {
  const metrics = batch.server_metrics ?? {}
  return SERVER_COUNTER_KEYS.filter((k) => isNumber(metrics[k])).map((metric) => ({ source: 'server', subject: '', metric, value: metrics[metric]! }))
}

/** Applies the batch's parts, merges, mutations and server_metrics sections. */
export function applyClickHouse(writes: Writes, databaseId: string, batch: IngestBatch): void {
  if (batch.parts === undefined && batch.merges === undefined && batch.mutations === undefined && batch.server_metrics === undefined) return
  writeMetrics(writes, databaseId, batch.collected_at, batchCounters(batch), batchGauges(batch))
  writeLatest(writes, 'clickhouse_latest', databaseId, batch, LATEST_KINDS)
}

// ---- reads ----

const latest = <T>(driver: SqlDriver, databaseId: string, kind: LatestKind) => readLatest<T>(driver, 'clickhouse_latest', databaseId, kind)

/** Reads of ClickHouse parts, merges, mutations and server metrics. */
export interface ClickHouseReader {

  latestParts: (databaseId: string) => Promise<Latest<{
    database: string;
    table: string;
    partition_id: string;
    active_parts: number;
    rows: number;
    bytes_on_disk: number;
    parts_to_delay_insert?: number | null | undefined;
    parts_to_throw_insert?: number | null | undefined;
  }[]> | undefined>;
  latestMerges: (databaseId: string) => Promise<Latest<{
    database: string;
    table: string;
    elapsed_s: number;
    progress: number;
    num_parts: number;
    total_size_bytes_compressed: number;
    result_part_name: string;
    is_mutation: boolean;
  }[]> | undefined>;
  latestMutations: (databaseId: string) => Promise<Latest<{
    database: string;
    table: string;
    mutation_id: string;
    command: string;
    create_time: number;
    is_done: boolean;
    parts_to_do: number;
    latest_fail_reason: string;
    latest_fail_time: number | null;
    stuck: boolean;
  }[]> | undefined>;
  latestServerMetrics: (databaseId: string) => Promise<Latest<Record<string, number | null>> | undefined>;
  metricSeries: (databaseId: string, source: ClickHouseSource, intervals: Intervals) => Promise<MetricPoint[]>;
}

/** Reads for the ClickHouse routes. */
export function clickhouseReader(driver: SqlDriver): ClickHouseReader {
  return {
    latestParts: (databaseId: string) => latest<PartStat[]>(driver, databaseId, 'parts'),
    latestMerges: (databaseId: string) => latest<MergeEntry[]>(driver, databaseId, 'merges'),
    latestMutations: (databaseId: string) => latest<MutationEntry[]>(driver, databaseId, 'mutations'),
    latestServerMetrics: (databaseId: string) => latest<Record<string, number | null>>(driver, databaseId, 'server_metrics'),
    metricSeries: (databaseId: string, source: ClickHouseSource, intervals: Intervals) => metricSeries(driver, databaseId, source, intervals),
  }
}
