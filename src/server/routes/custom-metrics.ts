// GET /api/v1/databases/{id}/custom-metrics: the database's own SQL checks (custom_metrics in its agent's
// config) with their definitions, latest error and latest value per value column and label set; and
// GET /api/v1/databases/{id}/custom-metrics/{name}?since=&until=&bucket=: one metric's series over the
// window, per value column and label set (a counter's values are rates per second). Another
// organization's database, or a metric the database does not have: 404.
import { Elysia } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, notFound } from '../http-error.ts'
import { rfc3339 } from '../views.ts'
import { CustomMetricList, CustomMetricSeries } from '../../shared/api/custom-metrics.ts'
import { databaseFor, intervalsFor, seriesQuery } from './telemetry-params.ts'

const NAME = /^[a-z_][a-z0-9_]{0,99}$/

export function customMetricRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/custom-metrics',
      async ({ principal, params }) => {
        const db = await databaseFor(deps, principal, params.id)
        const [metrics, series] = await Promise.all([
          store.customMetrics.listCustomMetrics(db.id),
          store.customMetrics.customSeries(db.id),
        ])
        return {
          metrics: metrics.map((m) => ({
            name: m.name,
            kind: m.kind,
            labels: m.labels,
            values: m.values,
            interval_seconds: m.interval_seconds,
            description: m.description,
            alert: m.alert,
            last_error: m.last_error,
            last_error_at: m.last_error === null || m.last_error_at === null ? null : rfc3339(m.last_error_at),
            error_count: m.error_count,
            updated_at: rfc3339(m.updated_at),
            latest: series
              .filter((s) => s.name === m.name)
              .map((s) => ({
                column: s.column,
                labels: s.labels,
                value: s.value,
                raw_value: s.raw_value,
                ts: s.value_at === null ? null : rfc3339(s.value_at),
              })),
          })),
        }
      },
      {
        response: { 200: CustomMetricList },
        detail: {
          summary: "The database's own SQL checks (custom_metrics in the agent config) with their latest values",
        },
      },
    )
    .get(
      '/custom-metrics/:name',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        if (!NAME.test(params.name)) throw badRequest('name must be a custom metric name ([a-z_][a-z0-9_]*)')
        const intervals = intervalsFor(query, clock())
        const metric = (await store.customMetrics.listCustomMetrics(db.id)).find((m) => m.name === params.name)
        if (!metric) throw notFound('custom metric')
        const [series, points] = await Promise.all([
          store.customMetrics.customSeries(db.id, metric.name),
          store.customMetrics.customPoints(db.id, intervals),
        ])
        const bySubject = new Map<string, { ts: string; value: number }[]>()
        for (const p of points) {
          const value = p.values[metric.name]
          if (value === undefined) continue
          const list = bySubject.get(p.subject) ?? []
          list.push({ ts: rfc3339(p.ts), value })
          bySubject.set(p.subject, list)
        }
        return {
          name: metric.name,
          kind: metric.kind,
          unit: metric.kind === 'counter' ? ('per_second' as const) : null,
          since: rfc3339(intervals.since),
          until: rfc3339(intervals.until),
          bucket_seconds: intervals.bucketSeconds,
          series: series.map((s) => ({
            column: s.column,
            labels: s.labels,
            points: bySubject.get(s.series_key) ?? [],
          })),
        }
      },
      {
        query: seriesQuery,
        response: { 200: CustomMetricSeries },
        detail: {
          summary:
            "One custom metric's values over the window, per value column and label set (counters as rates per second)",
        },
      },
    )
}
