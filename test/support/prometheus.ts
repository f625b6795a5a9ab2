// Reading a /metrics answer in tests: parsed by a Prometheus text-format parser (a devDependency, not a
// regex of ours), checked against the naming conventions, and looked up by name and labels.
import { expect } from 'bun:test'
import parsePrometheusTextFormat, { type ParsedFamily, type ParsedSample } from 'parse-prometheus-text-format'

/** The families of an exposition by name, and the text they were parsed from. */
export type Scrape = Map<string, ParsedFamily> & { text: string }

export function parseScrape(text: string): Scrape {
  return Object.assign(new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family] as const)), {
    text,
  })
}

/** Units a dbm metric may end in (base units), after which a counter adds `_total`. */
const UNITS = ['seconds', 'bytes']

/**
 * The conventions: dbm's own metrics under `dbm_` (or `prefix`), the client libraries' process_ and
 * nodejs_ figures; HELP on every family; counters end in `_total`, other types never do; histograms of
 * a base unit; no name with a non-base unit (milliseconds, kilobytes...).
 */
export function checkConventions(scrape: Scrape, prefix = 'dbm_'): void {
  expect(scrape.size).toBeGreaterThan(0)
  for (const family of scrape.values()) {
    const { name, type } = family
    expect(name.startsWith(prefix) || name.startsWith('process_') || name.startsWith('nodejs_')).toBe(true)
    expect(family.help.length).toBeGreaterThan(0)
    expect(['COUNTER', 'GAUGE', 'HISTOGRAM']).toContain(type)
    expect(name.endsWith('_total')).toBe(type === 'COUNTER')
    if (type === 'HISTOGRAM') expect(UNITS.some((unit) => name.endsWith(`_${unit}`))).toBe(true)
    expect(
      /_(milli|micro|nano)?(ms|us|millis|milliseconds|minutes|hours|kb|mb|gb|kib|mib|percent)(_|$)/.test(name),
    ).toBe(false)
  }
}

function matches(sample: ParsedSample, labels: Record<string, string>): boolean {
  return Object.entries(labels).every(([k, v]) => sample.labels?.[k] === v)
}

/** The sample of `name` with these labels (others ignored); undefined when none. */
export function sample(scrape: Scrape, name: string, labels: Record<string, string> = {}): ParsedSample | undefined {
  return scrape.get(name)?.metrics.find((s) => matches(s, labels))
}

/** The value of a counter or gauge sample (0 when the sample is absent: a labelled child not created yet). */
export function value(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  const found = sample(scrape, name, labels)
  return found?.value === undefined ? 0 : Number(found.value)
}

export interface HistogramSeries {
  /** Cumulative counts by upper bound, in the order of the bounds (+Inf last). */
  buckets: [number, number][]
  sum: number
  count: number
}

/**
 * One series of histogram `name` in `text` (undefined when absent). The parser package merges the
 * buckets of every label set of a histogram into one, so the histogram's TYPE line is read as untyped
 * here: the package then parses its _bucket, _sum and _count lines as samples with their labels.
 */
export function histogram(
  scrape: Scrape,
  name: string,
  labels: Record<string, string> = {},
): HistogramSeries | undefined {
  // Each label set's lines come out as families of their own, several of the same name.
  const untyped = parsePrometheusTextFormat(
    scrape.text.replace(`# TYPE ${name} histogram\n`, `# TYPE ${name} untyped\n`),
  )
  const of = (suffix: string) =>
    untyped.filter((f) => f.name === `${name}_${suffix}`).flatMap((f) => f.metrics.filter((s) => matches(s, labels)))
  const count = of('count')
  if (count.length === 0) return undefined
  if (count.length > 1) throw new Error(`${name}: ${count.length} series match ${JSON.stringify(labels)}`)
  const buckets = of('bucket').map(
    (s) =>
      [s.labels!.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(s.labels!.le), Number(s.value)] as [number, number],
  )
  return {
    buckets: buckets.sort((a, b) => a[0] - b[0]),
    sum: Number(of('sum')[0]?.value),
    count: Number(count[0]!.value),
  }
}

/** A histogram series' count (0 when absent). */
export function histogramCount(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  return histogram(scrape, name, labels)?.count ?? 0
}
