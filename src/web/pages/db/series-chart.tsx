// A chart of some fields of a timeseries answer (internals, server metrics, parts): counters become
// rates per second over the bucket when `rate` is set, totals per bucket say their bucket ("per hour"),
// gauges are drawn as they are. The bucket still running at the window's end is left out of rates and totals.
import { useMemo } from 'preact/hooks'
import { Chart, type ChartMark, type Unit } from '../../components/chart.tsx'
import { perBucket, seriesFrom } from './common.tsx'

export interface SeriesSpec {
  name: string
  title: string
  unit: Unit
  keys: [string, string][]
  /** Counters summed over each bucket: divide by the bucket to draw a rate per second. */
  rate?: boolean
  /** Counters summed over each bucket, drawn as totals: the title gets "per minute", "per hour"… */
  total?: boolean
  /** Values over each bucket as the API gives them (e.g. its rates): only the running bucket is left out. */
  perBucket?: boolean
  stacked?: boolean
}

export function SeriesChart<P extends { ts: string }>({
  points,
  spec,
  bucketSeconds,
  range,
  marks,
}: {
  points: P[]
  spec: SeriesSpec
  bucketSeconds: number
  range?: [number, number]
  /** The database's events to mark (pages/db/events.tsx useEventMarks). */
  marks?: ChartMark[]
}) {
  const data = useMemo(
    () => seriesFrom(points, spec.keys, spec.rate ? 1 / bucketSeconds : 1),
    [points, spec, bucketSeconds],
  )
  const title = spec.total ? `${spec.title} ${perBucket(bucketSeconds)}` : spec.title
  return (
    <Chart
      name={spec.name}
      title={title}
      unit={spec.unit}
      times={data.times}
      series={data.series}
      stacked={spec.stacked}
      stepMs={bucketSeconds * 1000}
      range={range}
      perBucket={spec.rate || spec.total || spec.perBucket}
      marks={marks}
    />
  )
}
