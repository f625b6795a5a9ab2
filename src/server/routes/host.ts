// GET /api/v1/databases/{id}/host: the database host's latest figures (CPU, load, memory and swap,
// filesystems with their roles, devices), each filesystem's free space over the window with the fill
// forecast of the last day, the host's series over the window (since/until/bucket as the other
// series), and the database's size trend from database_stats, which an agent anywhere sends: what
// growth dbm can show when no agent runs beside the database (then `note` says why, as the agent did).
import { Elysia } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { type Trend, filesystemForecasts, fitTrend, forecastIntervals } from '../doctor/disk-forecast.ts'
import { HOST_GAUGE_KEYS, type HostGaugeKey, filesystemSubject } from '../store/host/types.ts'
import { rfc3339 } from '../views.ts'
import { Host } from '../../shared/api/host.ts'
import { databaseFor, intervalsFor, seriesQuery } from './telemetry-params.ts'

const round = (n: number, digits = 3) => Number(n.toFixed(digits))

function trendView(trend: Trend | null) {
  if (!trend) return null
  return {
    rate_bytes_per_s: round(trend.rate_per_s),
    samples: trend.samples,
    since: rfc3339(trend.since),
    until: rfc3339(trend.until),
    basis_seconds: Math.round((trend.until - trend.since) / 1000),
  }
}

export function hostRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/host',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const now = clock()
        const intervals = intervalsFor(query, now)
        const [latest, points, notes] = await Promise.all([
          store.host.latestHost(db.id),
          store.host.hostSeries(db.id, intervals),
          store.latestSnapshot(db.id, 'collector_notes'),
        ])
        const forecasts = latest ? await filesystemForecasts(store.host, db.id, latest, now) : []
        const note =
          ((notes?.payload ?? []) as { collector: string; message: string }[]).find((n) => n.collector === 'host')
            ?.message ?? null
        const hostPoints = points.filter((p) => p.subject === '')
        const s = latest?.status
        let databaseSize: { latest_bytes: number | null; trend: ReturnType<typeof trendView> } | null = null
        if (db.engine === 'postgres') {
          const sizes = (await store.internals.metricSeries(db.id, 'database', forecastIntervals(now)))
            .filter((p) => typeof p.values.database_size_bytes === 'number')
            .map((p) => ({ t: p.ts, v: p.values.database_size_bytes! }))
          databaseSize = { latest_bytes: sizes.at(-1)?.v ?? null, trend: trendView(fitTrend(sizes)) }
        }
        return {
          on_host: s !== undefined,
          ts: latest ? rfc3339(latest.ts) : null,
          source: s?.source ?? null,
          evidence: s?.evidence ?? null,
          note,
          cpu_count: s?.cpu_count ?? null,
          cpu: s?.cpu ?? null,
          load: s?.load ?? null,
          memory: s?.memory ?? null,
          filesystems: (s?.filesystems ?? []).map((fs, i) => {
            const subject = filesystemSubject(fs)
            const forecast = forecasts[i]!
            return {
              ...fs,
              forecast: {
                trend: trendView(forecast.trend),
                fills_at: forecast.fills_at === null ? null : rfc3339(forecast.fills_at),
              },
              series: points
                .filter((p) => p.subject === subject)
                .map((p) => ({
                  ts: rfc3339(p.ts),
                  available_bytes: p.values.available_bytes ?? null,
                  total_bytes: p.values.total_bytes ?? null,
                })),
            }
          }),
          devices: s?.devices ?? [],
          series: hostPoints.map((p) => ({
            ts: rfc3339(p.ts),
            ...(Object.fromEntries(HOST_GAUGE_KEYS.map((k) => [k, p.values[k] ?? null])) as Record<
              HostGaugeKey,
              number | null
            >),
          })),
          database_size: databaseSize,
        }
      },
      {
        query: seriesQuery,
        response: { 200: Host },
        detail: {
          summary:
            "The database host: CPU, memory, filesystems with free space over time and the day each fills, and the database's growth",
        },
      },
    )
}
