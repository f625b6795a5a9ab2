// Custom metrics at ingest: each metric's latest definition and error, each series' last reading and
// value, and the values as metric_gauges rows of source 'custom' (a counter as its reset-aware rate per
// second); a reading no newer than the stored one leaves the series as it is (types.ts says more).
import { createHash } from 'node:crypto'
import type { CustomMetricSample, IngestBatch } from '../../../shared/wire.ts'
import type { MetricValue } from '../internals/types.ts'
import { writeMetrics } from '../internals/writes.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import { CUSTOM_SOURCE, type CustomMetricWrites } from './types.ts'

/** A series' key: a digest of its metric, column and labels (sorted), short enough for a key column. */
export function seriesKey(name: string, column: string, labels: Record<string, string>): string {
  const sorted = Object.keys(labels)
    .sort()
    .map((k) => [k, labels[k]])
  return createHash('sha256')
    .update(JSON.stringify([name, column, sorted]))
    .digest('hex')
    .slice(0, 32)
}

/** A counter's rate per second between two readings; a reading below the previous one is a reset. */
export function counterRate(
  previous: { value: number; at: number },
  current: { value: number; at: number },
): number | undefined {
  const seconds = (current.at - previous.at) / 1000
  if (!(seconds > 0)) return undefined
  const increase = current.value >= previous.value ? current.value - previous.value : current.value
  return Math.max(0, increase) / seconds
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
      ? reads.add({
          sql: 'SELECT series_key, raw_value, raw_at FROM custom_metric_series WHERE database_id = $1 AND raw_at IS NOT NULL',
          params: [databaseId],
        })
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
      writes.add(
        'UPDATE custom_metrics SET last_error = NULL WHERE database_id = $1 AND name = $2 AND last_error_at <= $3',
        [databaseId, name, at],
      )
    }
    const before = new Map(
      previous().map((r) => [String(r.series_key), { value: Number(r.raw_value), at: Number(r.raw_at) }]),
    )
    const rows: unknown[][] = []
    const gauges: MetricValue[] = []
    for (const [key, s] of samples) {
      let value: number | null = s.value
      if (kinds.get(s.name) === 'counter') {
        const prior = before.get(key)
        value = prior ? (counterRate(prior, { value: s.value, at }) ?? null) : null
      }
      if (value !== null) gauges.push({ source: CUSTOM_SOURCE, subject: key, metric: s.name, value })
      rows.push([
        databaseId,
        key,
        s.name,
        s.column,
        JSON.stringify(s.labels),
        s.value,
        at,
        value,
        value === null ? null : at,
        at,
      ])
    }
    writes.upsert(
      'custom_metric_series',
      [
        'database_id',
        'series_key',
        'name',
        'column_name',
        'labels',
        'raw_value',
        'raw_at',
        'value',
        'value_at',
        'seen_at',
      ],
      rows,
      {
        key: ['database_id', 'series_key'],
        update: {
          raw_value: 'excluded.raw_value',
          raw_at: 'excluded.raw_at',
          value: 'COALESCE(excluded.value, custom_metric_series.value)',
          value_at: 'COALESCE(excluded.value_at, custom_metric_series.value_at)',
          seen_at: 'excluded.seen_at',
        },
        onlyIf: 'excluded.raw_at > custom_metric_series.raw_at',
      },
    )
    writeMetrics(writes, databaseId, at, [], gauges)
  }
}

export const customMetricWrites = { plan: planCustomMetrics } satisfies CustomMetricWrites
