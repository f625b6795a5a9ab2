// When a filesystem fills: the least-squares rate of change of its available bytes over the last day
// of minute samples (over what there is when less, but at least FORECAST_MIN_SPAN_MS), and the time
// the latest available bytes reach zero at that rate. No fill time while free space grows or stays
// flat (a fill further away than FORECAST_HORIZON_MS counts as flat). The same fit gives the growth of
// the database's size for an agent not beside its database. Used by GET /host and the doctor.
import { type HostReads, type LatestHost, filesystemSubject } from '../store/host/types.ts'
import type { Intervals, MetricPoint } from '../store/internals/types.ts'
import { minuteFloor } from '../store/window.ts'

export const FORECAST_WINDOW_MS = 24 * 3_600_000
/** Less than this much history gives no forecast: a few minutes of noise are not a trend. */
export const FORECAST_MIN_SPAN_MS = 10 * 60_000
/** A fill time further away than this is no fill time (a year). */
export const FORECAST_HORIZON_MS = 365 * 24 * 3_600_000

/**
 * The severity of a disk that fills in `leftMs` (null: no fill in sight): critical within
 * `critical_fill_hours`, warning within `warning_fill_days`. The PostgreSQL and ClickHouse disk rules share it.
 */
export function fillSeverity(
  leftMs: number | null,
  t: { critical_fill_hours: number; warning_fill_days: number },
): 'critical' | 'warning' | undefined {
  if (leftMs === null) return undefined
  if (leftMs <= t.critical_fill_hours * 3_600_000) return 'critical'
  return leftMs <= t.warning_fill_days * 86_400_000 ? 'warning' : undefined
}

export interface Trend {
  /** Change per second of the fitted value (bytes/s; negative: shrinking). */
  rate_per_s: number
  /** The samples fitted: how many, and the span they cover. */
  samples: number
  since: number
  until: number
}

/** Least-squares slope of (t, v); null with fewer than two samples or a span under the minimum. */
export function fitTrend(points: readonly { t: number; v: number }[], minSpanMs = FORECAST_MIN_SPAN_MS): Trend | null {
  if (points.length < 2) return null
  const since = Math.min(...points.map((p) => p.t))
  const until = Math.max(...points.map((p) => p.t))
  if (until - since < minSpanMs) return null
  const n = points.length
  // Centred on the means: exact for epoch milliseconds, which squared would lose digits.
  const mt = points.reduce((s, p) => s + (p.t - since), 0) / n
  const mv = points.reduce((s, p) => s + p.v, 0) / n
  let num = 0
  let den = 0
  for (const p of points) {
    const dt = p.t - since - mt
    num += dt * (p.v - mv)
    den += dt * dt
  }
  if (den === 0) return null
  return { rate_per_s: (num / den) * 1000, samples: n, since, until }
}

export interface FillForecast {
  /** The fit of available bytes; null with too little history. */
  trend: Trend | null
  /** When available bytes reach zero at the trend's rate; null when not shrinking (or too far off). */
  fills_at: number | null
}

/** The forecast from the series of one filesystem's available bytes and its latest figure. */
export function forecastFill(
  points: readonly MetricPoint[],
  latest: { ts: number; available_bytes: number },
): FillForecast {
  const samples = points
    .filter((p) => typeof p.values.available_bytes === 'number')
    .map((p) => ({ t: p.ts, v: p.values.available_bytes! }))
  const trend = fitTrend(samples)
  if (!trend || trend.rate_per_s >= 0) return { trend, fills_at: null }
  const msLeft = (latest.available_bytes / -trend.rate_per_s) * 1000
  return { trend, fills_at: msLeft > FORECAST_HORIZON_MS ? null : Math.round(latest.ts + msLeft) }
}

/** The intervals of minute samples over the forecast's day, ending at `now`. */
export function forecastIntervals(now: number): Intervals {
  return { since: now - FORECAST_WINDOW_MS, until: now, minuteFloor: minuteFloor(now), bucketSeconds: 60 }
}

/** The forecast of each filesystem of the latest host section, in its order. */
export async function filesystemForecasts(
  reads: HostReads,
  databaseId: string,
  latest: LatestHost,
  now: number,
): Promise<FillForecast[]> {
  const points = await reads.hostSeries(databaseId, forecastIntervals(now))
  return latest.status.filesystems.map((fs) => {
    const subject = filesystemSubject(fs)
    return forecastFill(
      points.filter((p) => p.subject === subject),
      { ts: latest.ts, available_bytes: fs.available_bytes },
    )
  })
}
