// A chart of some fields of a timeseries answer (internals, server metrics, parts): counters become
// rates per second over the bucket when `rate` is set, gauges are drawn as they are.
import { useMemo } from 'preact/hooks'
import { Chart, type Unit } from '../../components/chart.tsx'
import { seriesFrom } from './common.tsx'

export interface SeriesSpec {
  name: string
  title: string
  unit: Unit
  keys: [string, string][]
  /** Counters summed over each bucket: divide by the bucket to draw a rate per second. */
  rate?: boolean
  stacked?: boolean
}

export function SeriesChart<P extends { ts: string }>({ points, spec, bucketSeconds }: { points: P[]; spec: SeriesSpec; bucketSeconds: number }) {
  const data = useMemo(() => seriesFrom(points, spec.keys, spec.rate ? 1 / bucketSeconds : 1), [points, spec, bucketSeconds])
  return <Chart name={spec.name} title={spec.title} unit={spec.unit} times={data.times} series={data.series} stacked={spec.stacked} stepMs={bucketSeconds * 1000} />
}
