// Reads of custom metrics: definitions, series with their latest values, and the values over time
// (metric_gauges of source 'custom', read by internals/reads.ts).
import type { SqlDriver } from '../driver.ts'
import type { Intervals, MetricPoint } from '../internals/types.ts'
import { metricSeries } from '../internals/reads.ts'
import {
  CUSTOM_SOURCE,
  type CustomMetric,
  type CustomMetricAlert,
  type CustomMetricReads,
  type CustomSeries,
} from './types.ts'
import { numOrNull } from '../rows.ts'

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
    last_error_at: numOrNull(r.last_error_at),
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
    value: numOrNull(r.value),
    value_at: numOrNull(r.value_at),
    raw_value: numOrNull(r.raw_value),
    seen_at: Number(r.seen_at),
  }
}

const SERIES_COLUMNS = 'database_id, series_key, name, column_name, labels, value, value_at, raw_value, seen_at'

export class SqlCustomMetricReads implements CustomMetricReads {
  constructor(private readonly driver: SqlDriver) {}

  async listCustomMetrics(databaseId: string): Promise<CustomMetric[]> {
    const rows = await this.driver.all('SELECT * FROM custom_metrics WHERE database_id = $1 ORDER BY name', [
      databaseId,
    ])
    return rows.map(toMetric)
  }

  async customSeries(databaseId: string, name?: string): Promise<CustomSeries[]> {
    const rows =
      name === undefined
        ? await this.driver.all(`SELECT ${SERIES_COLUMNS} FROM custom_metric_series WHERE database_id = $1`, [
            databaseId,
          ])
        : await this.driver.all(
            `SELECT ${SERIES_COLUMNS} FROM custom_metric_series WHERE database_id = $1 AND name = $2`,
            [databaseId, name],
          )
    return rows.map(toSeries).sort(bySeries)
  }

  async latestCustomSeries(databaseIds: readonly string[]): Promise<CustomSeries[]> {
    const out: CustomSeries[] = []
    for (const id of databaseIds) {
      const rows = await this.driver.all(
        `SELECT ${SERIES_COLUMNS} FROM custom_metric_series WHERE database_id = $1 AND (value IS NOT NULL OR raw_value IS NOT NULL)`,
        [id],
      )
      out.push(...rows.map(toSeries))
    }
    return out.sort(bySeries)
  }

  customPoints(databaseId: string, intervals: Intervals): Promise<MetricPoint[]> {
    return metricSeries(this.driver, databaseId, CUSTOM_SOURCE, intervals)
  }
}

function bySeries(a: CustomSeries, b: CustomSeries): number {
  const ka = JSON.stringify([a.name, a.column, Object.entries(a.labels).sort()])
  const kb = JSON.stringify([b.name, b.column, Object.entries(b.labels).sort()])
  return ka < kb ? -1 : ka > kb ? 1 : 0
}
