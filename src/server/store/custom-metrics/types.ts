// Custom metrics (migration 23): the operator's own SQL checks that agents send in the custom_metrics
// section. Ingest keeps each metric's latest definition and error (custom_metrics), one row per series
// (metric, value column, label set) with its last raw reading and latest value (custom_metric_series),
// and the values over time as metric_gauges rows of source 'custom' (subject: the series key), in the
// same minute and hour buckets, compaction and retention as the built-in gauges. A gauge is stored as
// read; a counter as its rate per second since the series' previous reading, where a reading below the
// previous one is a reset (the counter restarted from zero: its rate is the reading over the time), so
// no rate is ever negative. A reading no newer than the stored one (a late batch from the agent's
// buffer) leaves the series as it is. Records and interfaces here; reads.ts implements CustomMetricReads,
// writes.ts CustomMetricWrites (ingest).
import type { CustomMetricDefinition, IngestBatch } from '../../../shared/wire.ts'
import type { Intervals, MetricPoint } from '../internals/types.ts'
import type { Reads, Writes } from '../ingest/batch.ts'

export type CustomMetricAlert = NonNullable<CustomMetricDefinition['alert']>

/** A metric as its database's agent last defined it, with its latest error. */
export interface CustomMetric {
  database_id: string
  name: string
  kind: 'gauge' | 'counter'
  labels: string[]
  values: string[]
  interval_seconds: number
  description: string | null
  alert: CustomMetricAlert | null
  last_error: string | null
  last_error_at: number | null
  /** Errors the agent reported for this metric since it was first defined. */
  error_count: number
  updated_at: number
}

/** One series: a metric's value column for one label set, with its latest stored value. */
export interface CustomSeries {
  database_id: string
  series_key: string
  name: string
  column: string
  labels: Record<string, string>
  /** The latest value stored (a counter's rate per second); null for a counter read once only. */
  value: number | null
  value_at: number | null
  /** The last raw reading (a counter's cumulative value). */
  raw_value: number | null
  seen_at: number
}

export interface CustomMetricReads {
  /** The database's metrics by name. */
  listCustomMetrics(databaseId: string): Promise<CustomMetric[]>
  /** The database's series (of one metric, when named), by metric, column and labels. */
  customSeries(databaseId: string, name?: string): Promise<CustomSeries[]>
  /** Every series of the given databases with a stored value or reading (for /metrics). */
  latestCustomSeries(databaseIds: readonly string[]): Promise<CustomSeries[]>
  /** The values over the window, per interval and series (subject: the series key; values keyed by metric name). */
  customPoints(databaseId: string, intervals: Intervals): Promise<MetricPoint[]>
}

export interface CustomMetricWrites {
  /** The batch's custom_metrics section: registers the read the batch's counters need; returns the function adding its writes (nothing without the section). */
  plan(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes) => void
}

/** The source of the custom samples in metric_gauges. */
export const CUSTOM_SOURCE = 'custom' as const
