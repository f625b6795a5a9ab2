// `enabled_exporter: true` on a database (issue 15 deliverable 3): the monitored database's own key
// figures from each cycle's batch as Prometheus series on the agent's GET /metrics, so that Grafana can
// graph what dbm collects without a second exporter. The figures are the metric records of
// src/shared/metrics.ts that name a series (`exported`): their section and key, the series name by the
// Prometheus conventions, their type and help from the record, milliseconds scaled to seconds. The
// batch carries counters as deltas since the previous cycle: their series add them up from the agent's
// start (a counter reset when the agent restarts, which rate() handles). A gauge keeps the last value a
// cycle reported.
import type { EngineName } from '../shared/collectors.ts'
import { METRIC_SECTIONS, type MetricKind, type MetricRecord } from '../shared/metrics.ts'
import type { IngestBatch } from '../shared/wire.ts'
import type { CounterChild, GaugeChild, Registry } from '../shared/prometheus.ts'

type Section = 'database_stats' | 'wal_stats' | 'bgwriter' | 'server_metrics'

interface Figure {
  section: Section
  key: string
  name: string
  help: string
  type: MetricKind
  /** Multiplies the batch's value into the series' unit (milliseconds to seconds). */
  scale?: number
}

/** The sections exported per engine, in the order their series are registered (and printed). */
const EXPORTED_SECTIONS: Record<EngineName, Section[]> = {
  postgres: ['database_stats', 'wal_stats', 'bgwriter'],
  clickhouse: ['server_metrics'],
}

/** A metric record's series: its help closed the Prometheus way (a counter adds up since the agent started), times in seconds. */
function figureOf(section: Section, record: MetricRecord): Figure {
  return {
    section,
    key: record.key,
    name: record.exported!,
    help: record.kind === 'counter' ? `${record.help}, since the agent started.` : `${record.help}.`,
    type: record.kind,
    scale: record.unit === 'ms' ? 0.001 : undefined,
  }
}

/** The series of each engine: every metric record with an `exported` name (src/shared/metrics.ts). */
export const EXPORTED_FIGURES: Record<EngineName, Figure[]> = {
  postgres: exportedOf('postgres'),
  clickhouse: exportedOf('clickhouse'),
}

function exportedOf(engine: EngineName): Figure[] {
  return EXPORTED_SECTIONS[engine].flatMap((section) =>
    (METRIC_SECTIONS[section] as readonly MetricRecord[])
      .filter((r) => r.exported !== undefined)
      .map((r) => figureOf(section, r)),
  )
}

type Family = { figure: Figure; labels(database: string): CounterChild | GaugeChild }

/** The exporter's families in `registry`, registered per engine on first use. */
export class Exporter {
  private readonly families = new Map<EngineName, Family[]>()

  constructor(private readonly registry: Registry) {}

  private familiesOf(engine: EngineName): Family[] {
    let families = this.families.get(engine)
    if (!families) {
      families = EXPORTED_FIGURES[engine].map((figure) => {
        const options = { name: figure.name, help: figure.help, labelNames: ['database'] as const }
        const metric = figure.type === 'counter' ? this.registry.counter(options) : this.registry.gauge(options)
        return { figure, labels: (database: string) => metric.labels(database) }
      })
      this.families.set(engine, families)
    }
    return families
  }

  /** Records the figures of each batch of `database`. */
  recorder(database: string, engine: EngineName): (batch: IngestBatch) => void {
    const series = this.familiesOf(engine).map(({ figure, labels }) => ({ figure, child: labels(database) }))
    return (batch) => {
      for (const { figure, child } of series) {
        const value = (batch[figure.section] as Record<string, number> | undefined)?.[figure.key]
        if (typeof value !== 'number' || !Number.isFinite(value)) continue
        const scaled = figure.scale === undefined ? value : value * figure.scale
        if (figure.type === 'gauge') (child as GaugeChild).set(scaled)
        else if (scaled > 0) (child as CounterChild).inc(scaled)
      }
    }
  }
}
