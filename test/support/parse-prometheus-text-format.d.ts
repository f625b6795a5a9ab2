// Types of the parse-prometheus-text-format package (a devDependency without its own), as its README
// describes its answer: metric families with their samples, values as the text had them.
declare module 'parse-prometheus-text-format' {
  export interface ParsedSample {
    value?: string
    labels?: Record<string, string>
    /** Histograms: cumulative counts by upper bound. */
    buckets?: Record<string, string>
    count?: string
    sum?: string
  }
  export interface ParsedFamily {
    name: string
    help: string
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED'
    metrics: ParsedSample[]
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[]
}
