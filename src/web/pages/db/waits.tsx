// Waits: what sessions waited on over a time window, as stacked areas per wait event type (GET /waits
// in buckets that suit the window) and a table of the events by samples.
import { useMemo } from 'preact/hooks'
import { Chart, type ChartSeries } from '../../components/chart.tsx'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, fmtNum, useApi } from '../../components/ui.tsx'
import { NoDataYet, TimeRangePicker, apiPath, fmtDuration, perBucket, useWindow } from './common.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { WaitPoint as WaitPointSchema } from '../../../shared/api/internals.ts'

type WaitPoint = Static<typeof WaitPointSchema>

interface EventTotal {
  key: string
  type: string
  event: string
  count: number
  duration: number
}

const MAX_SERIES = 6
/** The waits collector samples the sessions every second. */
const SAMPLE_SECONDS = 1

/**
 * Average sessions waiting per wait event type per interval (samples ÷ the interval's seconds, the collector
 * sampling every second: average active sessions waiting, whatever the bucket): the largest types as series,
 * the rest as "other".
 */
function series(points: WaitPoint[], bucketSeconds: number): { times: number[]; series: ChartSeries[] } {
  const times = [...new Set(points.map((p) => Date.parse(p.ts)))].sort((a, b) => a - b)
  const index = new Map(times.map((t, i) => [t, i]))
  const byType = new Map<string, number>()
  for (const p of points) byType.set(p.wait_event_type, (byType.get(p.wait_event_type) ?? 0) + p.count)
  const ranked = [...byType].sort((a, b) => b[1] - a[1]).map(([t]) => t)
  const shown = ranked.length > MAX_SERIES ? ranked.slice(0, MAX_SERIES - 1) : ranked
  const labels = ranked.length > MAX_SERIES ? [...shown, 'other'] : shown
  const values = labels.map(() => times.map(() => 0))
  for (const p of points) {
    const at = shown.indexOf(p.wait_event_type)
    const row = values[at === -1 ? labels.length - 1 : at]!
    row[index.get(Date.parse(p.ts))!]! += p.count
  }
  return {
    times,
    series: labels.map((label, i) => ({ label, values: values[i]!.map((n) => n / (bucketSeconds / SAMPLE_SECONDS)) })),
  }
}

function totals(points: WaitPoint[]): EventTotal[] {
  const map = new Map<string, EventTotal>()
  for (const p of points) {
    const key = `${p.wait_event_type}:${p.wait_event}`
    const t = map.get(key) ?? { key, type: p.wait_event_type, event: p.wait_event, count: 0, duration: 0 }
    t.count += p.count
    t.duration += p.total_duration_ms
    map.set(key, t)
  }
  return [...map.values()]
}

const COLUMNS: Column<EventTotal>[] = [
  { key: 'type', label: 'Type', render: (t) => t.type, sort: (t) => t.type },
  {
    key: 'event',
    label: 'Event',
    render: (t) => (
      <code>
        <DbText text={t.event} />
      </code>
    ),
    sort: (t) => t.event,
  },
  {
    key: 'count',
    label: 'Samples',
    num: true,
    render: (t) => fmtNum(t.count),
    sort: (t) => t.count,
    title: 'sessions seen waiting, sampled every second',
  },
  { key: 'duration', label: 'Time waited', num: true, render: (t) => fmtDuration(t.duration), sort: (t) => t.duration },
]

export function WaitsPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const waits = useApi(db.last_seen_at ? apiPath(db, `/waits?${tw.params}&bucket=${tw.bucket}`) : null)
  const chart = useMemo(() => (waits.data ? series(waits.data, tw.bucket) : undefined), [waits.data, tw.bucket])
  const rows = useMemo(() => (waits.data ? totals(waits.data) : []), [waits.data])
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
      </div>
      <Async loaded={waits}>
        {(points) =>
          points.length === 0 ? (
            <Empty title="No wait events in this time range">
              <p>
                The waits collector samples the sessions every second; pick a longer range, or check that it is not
                disabled in Settings.
              </p>
            </Empty>
          ) : (
            <>
              <Chart
                name="waits"
                title="Average sessions waiting, by wait event type"
                times={chart!.times}
                series={chart!.series}
                stacked
                stepMs={tw.bucket * 1000}
                range={tw.bounds}
                perBucket
                // An interval without waiting sessions has no point: gaps are quiet, not missing.
                partialStarts="first"
                sparse
                dataSince={Date.parse(db.created_at)}
                height={240}
              />
              <p class="muted small">
                Average active sessions waiting in each interval ({perBucket(tw.bucket).replace('per ', '')}): the
                samples, one a second, divided by the interval's seconds.
              </p>
              <h2>Wait events</h2>
              <DataTable
                caption="Wait events"
                columns={COLUMNS}
                rows={rows}
                rowKey={(t) => t.key}
                initialSort={{ key: 'count' }}
                compact
              />
            </>
          )
        }
      </Async>
    </section>
  )
}
