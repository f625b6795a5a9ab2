// A small Prometheus registry shared by `dbm serve` and `dbm agent`: counters, gauges and histograms
// with fixed buckets, and their text exposition (format 0.0.4). Names are checked when a metric is
// registered (the `dbm_` conventions: counters end in `_total`, units in base units are the caller's
// part). An observation on a child that the caller resolved once costs a few number operations and no
// allocation; `labels(...)` looks a child up by its values (one string join) and creates it on first use.
// Metrics whose values live elsewhere (a buffer's size, the process's memory) are read at scrape time by
// a collect hook.

export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/

/** A sample value as the text format writes it. */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Number.POSITIVE_INFINITY) return '+Inf'
  if (value === Number.NEGATIVE_INFINITY) return '-Inf'
  return String(value)
}

/** A label value escaped as the text format requires: backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\\' ? '\\\\' : c === '"' ? '\\"' : '\\n'))
}

/** HELP text escaped: backslash and line feed. */
function escapeHelp(help: string): string {
  return help.replace(/[\\\n]/g, (c) => (c === '\\' ? '\\\\' : '\\n'))
}

interface MetricOptions<L extends string> {
  name: string
  help: string
  labelNames?: readonly L[]
}

abstract class Metric<L extends string, Child> {
  readonly name: string
  readonly help: string
  readonly labelNames: readonly L[]
  protected readonly children = new Map<string, { values: readonly string[]; child: Child }>()

  constructor(options: MetricOptions<L>) {
    if (!METRIC_NAME.test(options.name)) throw new Error(`invalid metric name: ${options.name}`)
    for (const label of options.labelNames ?? []) {
      if (!LABEL_NAME.test(label) || label.startsWith('__'))
        throw new Error(`invalid label name ${label} of ${options.name}`)
    }
    this.name = options.name
    this.help = options.help
    this.labelNames = options.labelNames ?? []
  }

  abstract readonly type: 'counter' | 'gauge' | 'histogram'
  protected abstract create(): Child

  /** The child of these label values (in labelNames' order), created on first use. */
  labels(...values: string[]): Child {
    if (values.length !== this.labelNames.length)
      throw new Error(`${this.name} takes ${this.labelNames.length} label values, got ${values.length}`)
    const key = values.length === 1 ? values[0]! : values.join('\u0000')
    let entry = this.children.get(key)
    if (!entry) this.children.set(key, (entry = { values: [...values], child: this.create() }))
    return entry.child
  }

  /** Forgets every child (a gauge filled by a collect hook starts each scrape empty). */
  reset(): void {
    this.children.clear()
  }

  protected labelText(values: readonly string[], extra?: string): string {
    const parts = this.labelNames.map((name, i) => `${name}="${escapeLabelValue(values[i]!)}"`)
    if (extra) parts.push(extra)
    return parts.length === 0 ? '' : `{${parts.join(',')}}`
  }

  protected abstract samples(out: string[]): void

  expose(out: string[]): void {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`)
    // A metric without labels shows its one sample (0 until something happens).
    if (this.labelNames.length === 0 && this.children.size === 0) this.labels()
    this.samples(out)
  }
}

export class CounterChild {
  value = 0
  inc(by = 1): void {
    this.value += by
  }
  /** For counters mirrored from a total kept elsewhere (collect hooks): never lower than before. */
  setTotal(total: number): void {
    if (total > this.value) this.value = total
  }
}

export class Counter<L extends string = never> extends Metric<L, CounterChild> {
  readonly type = 'counter'
  constructor(options: MetricOptions<L>) {
    super(options)
    if (!options.name.endsWith('_total')) throw new Error(`counter ${options.name} must end in _total`)
  }
  protected create(): CounterChild {
    return new CounterChild()
  }
  /** The counter without labels. */
  inc(by = 1): void {
    this.labels().inc(by)
  }
  get value(): number {
    return this.labels().value
  }
  protected samples(out: string[]): void {
    for (const { values, child } of this.children.values())
      out.push(`${this.name}${this.labelText(values)} ${formatValue(child.value)}`)
  }
}

export class GaugeChild {
  value = 0
  set(value: number): void {
    this.value = value
  }
  inc(by = 1): void {
    this.value += by
  }
  dec(by = 1): void {
    this.value -= by
  }
}

export class Gauge<L extends string = never> extends Metric<L, GaugeChild> {
  readonly type = 'gauge'
  protected create(): GaugeChild {
    return new GaugeChild()
  }
  set(value: number): void {
    this.labels().set(value)
  }
  get value(): number {
    return this.labels().value
  }
  protected samples(out: string[]): void {
    for (const { values, child } of this.children.values())
      out.push(`${this.name}${this.labelText(values)} ${formatValue(child.value)}`)
  }
}

export class HistogramChild {
  /** Observations per bucket (not cumulative; the last is above the highest bound). */
  readonly counts: Float64Array
  sum = 0
  count = 0
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1)
  }
  observe(value: number): void {
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    this.counts[i]!++
    this.sum += value
    this.count++
  }
  /** Observes the seconds since `startMs` (a performance.now() reading). */
  since(startMs: number): void {
    this.observe((performance.now() - startMs) / 1000)
  }
}

/** Seconds, from a millisecond to a minute: requests, queries, collector runs. */
export const DURATION_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
] as const

export class Histogram<L extends string = never> extends Metric<L, HistogramChild> {
  readonly type = 'histogram'
  readonly buckets: readonly number[]
  constructor(options: MetricOptions<L> & { buckets: readonly number[] }) {
    super(options)
    if ((options.labelNames ?? []).includes('le' as L))
      throw new Error(`histogram ${options.name} cannot have a label named le`)
    const sorted = [...options.buckets].filter((b) => Number.isFinite(b)).sort((a, b) => a - b)
    if (sorted.length === 0 || new Set(sorted).size !== sorted.length)
      throw new Error(`histogram ${options.name} needs distinct finite buckets`)
    this.buckets = sorted
  }
  protected create(): HistogramChild {
    return new HistogramChild(this.buckets)
  }
  observe(value: number): void {
    this.labels().observe(value)
  }
  protected samples(out: string[]): void {
    for (const { values, child } of this.children.values()) {
      let cumulative = 0
      for (let i = 0; i < this.buckets.length; i++) {
        cumulative += child.counts[i]!
        out.push(
          `${this.name}_bucket${this.labelText(values, `le="${formatValue(this.buckets[i]!)}"`)} ${formatValue(cumulative)}`,
        )
      }
      out.push(`${this.name}_bucket${this.labelText(values, 'le="+Inf"')} ${formatValue(child.count)}`)
      out.push(`${this.name}_sum${this.labelText(values)} ${formatValue(child.sum)}`)
      out.push(`${this.name}_count${this.labelText(values)} ${formatValue(child.count)}`)
    }
  }
}

export class Registry {
  private readonly metrics = new Map<string, Metric<string, unknown>>()
  private readonly hooks: (() => void)[] = []

  private add<M extends Metric<string, unknown>>(metric: M): M {
    if (this.metrics.has(metric.name)) throw new Error(`metric ${metric.name} is registered already`)
    this.metrics.set(metric.name, metric)
    return metric
  }

  counter<L extends string = never>(options: MetricOptions<L>): Counter<L> {
    return this.add(new Counter<L>(options))
  }
  gauge<L extends string = never>(options: MetricOptions<L>): Gauge<L> {
    return this.add(new Gauge<L>(options))
  }
  histogram<L extends string = never>(options: MetricOptions<L> & { buckets: readonly number[] }): Histogram<L> {
    return this.add(new Histogram<L>(options))
  }

  /** Runs before each exposition: sets the metrics whose values are read from elsewhere. */
  onCollect(hook: () => void): void {
    this.hooks.push(hook)
  }

  /** Every metric in the text format 0.0.4, in registration order. */
  expose(): string {
    for (const hook of this.hooks) hook()
    const out: string[] = []
    for (const metric of this.metrics.values()) metric.expose(out)
    return `${out.join('\n')}\n`
  }
}

/**
 * The process's own figures, named as the Prometheus client libraries name them: resident memory, CPU
 * seconds, start time, and the JavaScript heap (Bun reports it as Node does).
 */
export function registerProcessMetrics(registry: Registry): void {
  const resident = registry.gauge({ name: 'process_resident_memory_bytes', help: 'Resident memory size in bytes.' })
  const cpu = registry.counter({
    name: 'process_cpu_seconds_total',
    help: 'Total user and system CPU time spent in seconds.',
  })
  const start = registry.gauge({
    name: 'process_start_time_seconds',
    help: 'Start time of the process since unix epoch in seconds.',
  })
  const heapUsed = registry.gauge({ name: 'nodejs_heap_size_used_bytes', help: 'JavaScript heap in use, in bytes.' })
  const heapTotal = registry.gauge({ name: 'nodejs_heap_size_total_bytes', help: 'JavaScript heap size, in bytes.' })
  const startedAt = (performance.timeOrigin + 0) / 1000
  registry.onCollect(() => {
    const memory = process.memoryUsage()
    resident.set(memory.rss)
    heapUsed.set(memory.heapUsed)
    heapTotal.set(memory.heapTotal)
    const usage = process.cpuUsage()
    cpu.labels().setTotal((usage.user + usage.system) / 1e6)
    start.set(Math.round(startedAt * 1000) / 1000)
  })
}
