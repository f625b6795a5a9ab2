// custom_metric_threshold: the operator's own alert on a custom metric (custom_metrics[].alert in the
// agent config: above or below a threshold for a duration). One finding per metric, value column and
// label set whose every sample in the last `for` window crosses the threshold; the series must have been
// sampled since the window's start (a minute's latest value per minute bucket, as stored), so a series
// seen for less than the window does not fire. `for: 0` judges the latest value alone. Labels come from
// the monitored database: they are quoted (JSON) in the title, detail and object, never interpreted.
import type { DoctorContext } from '../context.ts'
import { minuteFloor } from '../../store/window.ts'
import type { Rule } from '../types.ts'

const MINUTE = 60_000

const labelText = (labels: Record<string, string>) =>
  Object.keys(labels).length === 0
    ? ''
    : ` {${Object.entries(labels)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(', ')}}`

const number = (n: number) => (Number.isInteger(n) ? n.toLocaleString('en-US') : String(Number(n.toPrecision(6))))

const duration = (seconds: number) =>
  seconds === 0
    ? 'the latest sample'
    : seconds % 3600 === 0
      ? `${seconds / 3600} h`
      : seconds % 60 === 0
        ? `${seconds / 60} min`
        : `${seconds} s`

export const customMetricThreshold: Rule = {
  id: 'custom_metric_threshold',
  summary:
    'A custom metric past the threshold its own alert sets (custom_metrics[].alert) for the whole window it names.',
  collectors: ['custom_metrics'],
  engine: 'any',
  category: 'reliability',
  thresholds: {},
  async check(ctx: DoctorContext) {
    const metrics = (await ctx.store.customMetrics.listCustomMetrics(ctx.db.id)).filter((m) => m.alert !== null)
    if (metrics.length === 0) return []
    const longest = Math.max(...metrics.map((m) => m.alert!.for_seconds * 1000), MINUTE)
    const since = Math.floor((ctx.now - longest) / MINUTE) * MINUTE - MINUTE
    const points = await ctx.store.customMetrics.customPoints(ctx.db.id, {
      since,
      until: ctx.now + 1,
      minuteFloor: minuteFloor(ctx.now),
      bucketSeconds: 60,
    })
    const drafts = []
    for (const metric of metrics) {
      const alert = metric.alert!
      const windowMs = alert.for_seconds * 1000
      const crosses = (v: number) => (alert.op === 'above' ? v > alert.threshold : v < alert.threshold)
      for (const series of await ctx.store.customMetrics.customSeries(ctx.db.id, metric.name)) {
        const own = points
          .filter((p) => p.subject === series.series_key && p.values[metric.name] !== undefined)
          .sort((a, b) => a.ts - b.ts)
        if (own.length === 0) continue
        // The buckets from the one holding the window's start; that bucket must exist (sampled since then).
        const start = Math.floor((ctx.now - windowMs) / MINUTE) * MINUTE
        const inWindow = windowMs === 0 ? own.slice(-1) : own.filter((p) => p.ts >= start)
        if (inWindow.length === 0 || (windowMs > 0 && inWindow[0]!.ts !== start)) continue
        const values = inWindow.map((p) => p.values[metric.name]!)
        if (!values.every(crosses)) continue
        const latest = values.at(-1)!
        const unit = metric.kind === 'counter' ? '/s' : ''
        const labels = labelText(series.labels)
        const column = metric.values.length > 1 ? `.${series.column}` : ''
        const window = duration(alert.for_seconds)
        drafts.push({
          severity: alert.severity,
          object: `${metric.name}${column}${labels}`,
          title: `${metric.name}${column}${labels} ${alert.op === 'above' ? '>' : '<'} ${number(alert.threshold)}${unit} for ${window}: now ${number(latest)}${unit}`,
          detail:
            `Every sample of ${metric.name}${column}${labels} in the last ${window} was ${alert.op} ${number(alert.threshold)}${unit} ` +
            `(${values.length} minute${values.length === 1 ? '' : 's'}, from ${number(Math.min(...values))} to ${number(Math.max(...values))}${unit}; the latest ${number(latest)}${unit}).` +
            (metric.description ? ` ${JSON.stringify(metric.description)}.` : ''),
          recommendation:
            'This is a check of your own (custom_metrics in the agent config): act as its runbook says, or change its alert threshold there.',
          how_to_investigate: [`GET /api/v1/databases/${ctx.db.id}/custom-metrics/${metric.name}`],
          how_to_fix: [],
          as_of: series.value_at,
          metrics: {
            value: latest,
            threshold: alert.threshold,
            for_seconds: alert.for_seconds,
            samples: values.length,
          },
        })
      }
    }
    return drafts
  },
}
