// The custom metrics of an organization's databases in the Prometheus text format, appended to its
// GET /metrics: a family per metric, dbm_custom_<name> (dbm_custom_<name>_<column> for a metric of several
// value columns), with the label `database` (the database's name) and the metric's own label columns.
// Gauges carry the value as the query returned it; counters the raw reading, typed counter (Prometheus
// takes the rate itself). Only the series of each metric's latest run are shown: a label set the query
// no longer returns is gone. Label values come from the monitored database (any text): escaped here.
import { escapeLabelValue, formatValue } from '../shared/prometheus.ts'
import type { CustomMetric, CustomSeries } from './store/custom-metrics/types.ts'

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/

const escapeHelp = (help: string) => help.replace(/[\\\n]/g, (c) => (c === '\\' ? '\\\\' : '\\n'))

/** The family name of a metric's value column. */
export function customFamily(metric: Pick<CustomMetric, 'name' | 'values'>, column: string): string {
  return metric.values.length === 1 ? `dbm_custom_${metric.name}` : `dbm_custom_${metric.name}_${column}`
}

export interface CustomExpositionInput {
  database: { id: string; name: string }
  metrics: CustomMetric[]
  series: CustomSeries[]
}

export function customExposition(inputs: readonly CustomExpositionInput[]): string {
  const families = new Map<string, { help: string; type: 'gauge' | 'counter'; lines: string[] }>()
  for (const { database, metrics, series } of inputs) {
    for (const metric of metrics) {
      const own = series.filter((s) => s.name === metric.name)
      const latest = own.reduce((max, s) => Math.max(max, s.seen_at), 0)
      for (const s of own) {
        if (s.seen_at !== latest || !metric.values.includes(s.column)) continue
        const value = metric.kind === 'counter' ? s.raw_value : s.value
        if (value === null || !Number.isFinite(value)) continue
        const name = customFamily(metric, s.column)
        let family = families.get(name)
        if (!family) {
          const help =
            metric.description ??
            `custom metric ${metric.name} (${metric.kind}) from the agent config${metric.values.length > 1 ? `, column ${s.column}` : ''}`
          family = { help, type: metric.kind, lines: [] }
          families.set(name, family)
        }
        const labels = [`database="${escapeLabelValue(database.name)}"`]
        for (const [key, text] of Object.entries(s.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
          if (!LABEL_NAME.test(key) || key === 'database') continue
          labels.push(`${key}="${escapeLabelValue(text)}"`)
        }
        family.lines.push(`${name}{${labels.join(',')}} ${formatValue(value)}`)
      }
    }
  }
  const out: string[] = []
  for (const [name, family] of [...families].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    out.push(`# HELP ${name} ${escapeHelp(family.help)}`, `# TYPE ${name} ${family.type}`, ...family.lines)
  }
  return out.length > 0 ? `${out.join('\n')}\n` : ''
}
