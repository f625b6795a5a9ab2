// Custom metrics (migration 23): the operator's own SQL checks that agents send in the custom_metrics
// section. Ingest keeps each metric's latest definition and error (custom_metrics), one row per series
// (metric, value column, label set) with its last raw reading and latest value (custom_metric_series),
// and the values over time as metric_gauges rows of source 'custom' (subject: the series key), in the
// same minute and hour buckets, compaction and retention as the built-in gauges. A gauge is stored as
// read; a counter as its rate per second since the series' previous reading, where a reading below the
// previous one is a reset (the counter restarted from zero: its rate is the reading over the time), so
// no rate is ever negative. A reading no newer than the stored one (a late batch from the agent's
// buffer) leaves the series as it is. Reads apart from the ingest writes.
import { createHash } from 'node:crypto'
import type { CustomMetricDefinition, CustomMetricSample, IngestBatch } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import { type MetricPoint, type MetricValue, type Intervals, metricSeries, writeMetrics } from '../internals/internals.ts'
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
  /** Registers the read the batch's counters need; returns the function adding its writes (nothing without the section). */
  plan(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes) => void
}

export interface CustomMetricStore extends CustomMetricReads, CustomMetricWrites {}

/** The source of the custom samples in metric_gauges. */
export const CUSTOM_SOURCE = 'custom' as const

/** A series' key: a digest of its metric, column and labels (sorted), short enough for a key column. */
export function seriesKey(name: string, column: string, labels: Record<string, string>): string {
  const sorted = Object.keys(labels)
    .sort()
    .map((k) => [k, labels[k]])
  return createHash('sha256').update(JSON.stringify([name, column, sorted])).digest('hex').slice(0, 32)
}

/** A counter's rate per second between two readings; a reading below the previous one is a reset. */
export function counterRate(previous: { value: number; at: number }, current: { value: number; at: number }): number | undefined {
  const seconds = (current.at - previous.at) / 1000
  if (!(seconds > 0)) return undefined
  const increase = current.value >= previous.value ? current.value - previous.value : current.value
  return Math.max(0, increase) / seconds
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v))

function parseJson<T>(text: unknown, fallback: T): T {
  try {
    return typeof text === 'string' ? (JSON.parse(text) as T) : fallback
  } catch {
    return fallback
  }
}

function toMetric(r: Record<string, unknown>): CustomMetric {
  return {
    database_id: String(r.database_id),
    name: String(r.name),
    kind: r.kind === 'counter' ? 'counter' : 'gauge',
    labels: parseJson<string[]>(r.labels, []),
    values: parseJson<string[]>(r.value_columns, []),
    interval_seconds: Number(r.interval_s),
    description: (r.description as string | null) ?? null,
    alert: parseJson<CustomMetricAlert | null>(r.alert, null),
    last_error: (r.last_error as string | null) ?? null,
    last_error_at: num(r.last_error_at),
    error_count: Number(r.error_count ?? 0),
    updated_at: Number(r.updated_at),
  }
}

function toSeries(r: Record<string, unknown>): CustomSeries {
  return {
    database_id: String(r.database_id),
    series_key: String(r.series_key),
    name: String(r.name),
    column: String(r.column_name),
    labels: parseJson<Record<string, string>>(r.labels, {}),
    value: num(r.value),
    value_at: num(r.value_at),
    raw_value: num(r.raw_value),
    seen_at: Number(r.seen_at),
  }
}

const SERIES_COLUMNS = 'database_id, series_key, name, column_name, labels, value, value_at, raw_value, seen_at'

export class SqlCustomMetrics implements CustomMetricStore {
  constructor(private readonly driver: SqlDriver) {}

  async listCustomMetrics(databaseId: string): Promise<CustomMetric[]> {
    const rows = await this.driver.all('SELECT * FROM custom_metrics WHERE database_id = $1 ORDER BY name', [databaseId])
    return rows.map(toMetric)
  }

  async customSeries(databaseId: string, name?: string): Promise<CustomSeries[]> {
    const rows =
      name === undefined
        ? await this.driver.all(`SELECT ${SERIES_COLUMNS} FROM custom_metric_series WHERE database_id = $1`, [databaseId])
        : await this.driver.all(`SELECT ${SERIES_COLUMNS} FROM custom_metric_series WHERE database_id = $1 AND name = $2`, [databaseId, name])
    return rows.map(toSeries).sort(bySeries)
  }

  async latestCustomSeries(databaseIds: readonly string[]): Promise<CustomSeries[]> {
    const out: CustomSeries[] = []
    for (const id of databaseIds) {
      const rows = await this.driver.all(`SELECT ${SERIES_COLUMNS} FROM custom_metric_series WHERE database_id = $1 AND (value IS NOT NULL OR raw_value IS NOT NULL)`, [id])
      out.push(...rows.map(toSeries))
    }
    return out.sort(bySeries)
  }

  customPoints(databaseId: string, intervals: Intervals): Promise<MetricPoint[]> {
    return metricSeries(this.driver, databaseId, CUSTOM_SOURCE, intervals)
  }

  plan(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes) => void {
    return planCustomMetrics(reads, databaseId, batch)
  }
}

function bySeries(a: CustomSeries, b: CustomSeries): number {
  const ka = JSON.stringify([a.name, a.column, Object.entries(a.labels).sort()])
  const kb = JSON.stringify([b.name, b.column, Object.entries(b.labels).sort()])
  return ka < kb ? -1 : ka > kb ? 1 : 0
}

/** The batch's custom_metrics section as planned writes (see the header). */
export function planCustomMetrics(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes) => void {
  const section = batch.custom_metrics
  if (!section) return () => {}
  const at = batch.collected_at
  const kinds = new Map(section.definitions.map((d) => [d.name, d.kind]))
  // A sample of a metric the batch does not define, or a label set twice in one batch, is left out.
  const samples = new Map<string, CustomMetricSample>()
  for (const s of section.samples) {
    if (!kinds.has(s.name)) continue
    samples.set(seriesKey(s.name, s.column, s.labels), s)
  }
  const counterKeys = [...samples].filter(([, s]) => kinds.get(s.name) === 'counter').map(([key]) => key)
  const previous =
    counterKeys.length > 0
      ? reads.add({ sql: 'SELECT series_key, raw_value, raw_at FROM custom_metric_series WHERE database_id = $1 AND raw_at IS NOT NULL', params: [databaseId] })
      : () => []
  return (writes) => {
    writes.upsert(
      'custom_metrics',
      ['database_id', 'name', 'kind', 'labels', 'value_columns', 'interval_s', 'description', 'alert', 'updated_at'],
      section.definitions.map((d) => [
        databaseId,
        d.name,
        d.kind,
        JSON.stringify(d.labels),
        JSON.stringify(d.values),
        d.interval_seconds,
        d.description ?? null,
        d.alert ? JSON.stringify(d.alert) : null,
        at,
      ]),
      {
        key: ['database_id', 'name'],
        update: {
          kind: 'excluded.kind',
          labels: 'excluded.labels',
          value_columns: 'excluded.value_columns',
          interval_s: 'excluded.interval_s',
          description: 'excluded.description',
          alert: 'excluded.alert',
          updated_at: 'excluded.updated_at',
        },
        onlyIf: 'excluded.updated_at >= custom_metrics.updated_at',
      },
    )
    for (const e of section.errors) {
      if (!kinds.has(e.name)) continue
      writes.add(
        'UPDATE custom_metrics SET last_error = $3, last_error_at = $4, error_count = error_count + 1 WHERE database_id = $1 AND name = $2',
        [databaseId, e.name, e.message, at],
      )
    }
    const failed = new Set(section.errors.map((e) => e.name))
    const cleared = [...new Set([...samples.values()].map((s) => s.name))].filter((n) => !failed.has(n))
    for (const name of cleared) {
      writes.add('UPDATE custom_metrics SET last_error = NULL WHERE database_id = $1 AND name = $2 AND last_error_at <= $3', [databaseId, name, at])
    }
    const before = new Map(previous().map((r) => [String(r.series_key), { value: Number(r.raw_value), at: Number(r.raw_at) }]))
    const rows: unknown[][] = []
    const gauges: MetricValue[] = []
    for (const [key, s] of samples) {
      let value: number | null = s.value
      if (kinds.get(s.name) === 'counter') {
        const prior = before.get(key)
        value = prior ? (counterRate(prior, { value: s.value, at }) ?? null) : null
      }
      if (value !== null) gauges.push({ source: CUSTOM_SOURCE, subject: key, metric: s.name, value })
      rows.push([databaseId, key, s.name, s.column, JSON.stringify(s.labels), s.value, at, value, value === null ? null : at, at])
    }
    writes.upsert('custom_metric_series', ['database_id', 'series_key', 'name', 'column_name', 'labels', 'raw_value', 'raw_at', 'value', 'value_at', 'seen_at'], rows, {
      key: ['database_id', 'series_key'],
      update: {
        raw_value: 'excluded.raw_value',
        raw_at: 'excluded.raw_at',
        value: 'COALESCE(excluded.value, custom_metric_series.value)',
        value_at: 'COALESCE(excluded.value_at, custom_metric_series.value_at)',
        seen_at: 'excluded.seen_at',
      },
      onlyIf: 'excluded.raw_at > custom_metric_series.raw_at',
    })
    writeMetrics(writes, databaseId, at, [], gauges)
  }
}
