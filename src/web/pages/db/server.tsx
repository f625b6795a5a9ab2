// Server (ClickHouse): memory against the server's limit and the machine, disks, connections and
// queries now, as gauges, and over the window as charts.
import { useMemo } from 'preact/hooks'
import { Chart, type ChartSeries, formatValue } from '../../components/chart.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { SERVER_METRICS, legends } from '../../../shared/metrics.ts'
import { Card, Meter, NoDataYet, TimeRangePicker, apiPath, fmtDuration, fmtRatio, useWindow } from './common.tsx'
import { SeriesChart, type SeriesSpec } from './series-chart.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { ServerMetrics as ServerMetricsSchema } from '../../../shared/api/clickhouse.ts'

type ServerMetrics = Static<typeof ServerMetricsSchema>

const CHARTS: SeriesSpec[] = [
  // Used against the limit as a share: bytes of used and a limit 100× larger would draw used as a flat zero line.
  {
    name: 'server-memory',
    title: 'Memory used',
    unit: 'pct',
    keys: [
      ['memory_used_pct', 'ClickHouse, of max_server_memory_usage'],
      ['os_memory_used_pct', 'machine'],
    ],
  },
  {
    name: 'server-queries',
    title: 'Queries per second',
    unit: 'per_s',
    perBucket: true,
    keys: [
      ['queries_per_s', 'queries'],
      ['failed_queries_per_s', 'failed'],
    ],
  },
  {
    name: 'server-connections',
    title: 'Connections',
    unit: 'count',
    keys: legends(SERVER_METRICS, 'tcp_connections', 'http_connections'),
  },
]

function DiskChart({
  points,
  step,
  range,
}: {
  points: ServerMetrics['timeseries']
  step: number
  range: [number, number]
}) {
  const data = useMemo(() => {
    const names = [...new Set(points.flatMap((p) => p.disks.map((d) => d.name)))].sort()
    return {
      times: points.map((p) => Date.parse(p.ts)),
      series: names.map(
        (name): ChartSeries => ({
          label: name,
          values: points.map((p) => p.disks.find((d) => d.name === name)?.used_pct ?? null),
        }),
      ),
    }
  }, [points])
  if (data.series.length === 0) return null
  return (
    <Chart
      name="server-disks"
      title="Disk space used"
      unit="pct"
      times={data.times}
      series={data.series}
      stepMs={step}
      range={range}
    />
  )
}

export function ServerPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const metrics = useApi(db.last_seen_at ? apiPath(db, `/server-metrics?${tw.params}&bucket=${tw.bucket}`) : null)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <Async loaded={metrics}>
      {(m) =>
        m.ts === null ? (
          <Empty title="No server metrics yet">
            <p>
              The server_metrics collector sends memory, disks, connections and query counts every poll; check that it
              is not disabled in Settings.
            </p>
          </Empty>
        ) : (
          <section>
            <div class="cards">
              <div class="card">
                <div class="label">Memory</div>
                <div class="value">{fmtBytes(m.memory_used_bytes)}</div>
                <Meter pct={m.memory_used_pct} warn={80} crit={90} label="Memory used of max_server_memory_usage" />
                <div class="sub">
                  {m.memory_limit_bytes === null
                    ? 'no max_server_memory_usage set'
                    : `of ${fmtBytes(m.memory_limit_bytes)} (max_server_memory_usage)`}
                </div>
              </div>
              <div class="card">
                <div class="label">Machine memory</div>
                <div class="value">{formatValue('pct', m.os_memory_used_pct)}</div>
                <Meter pct={m.os_memory_used_pct} warn={80} crit={90} label="Machine memory used" />
                <div class="sub">
                  {fmtBytes(m.os_memory_available_bytes)} free of {fmtBytes(m.os_memory_total_bytes)}
                </div>
              </div>
              {m.disks.map((d) => (
                <div class="card" key={d.name}>
                  <div class="label">
                    Disk <DbText text={d.name} />
                  </div>
                  <div class="value">{formatValue('pct', d.used_pct)}</div>
                  <Meter pct={d.used_pct} warn={80} crit={90} label={`Disk ${d.name} used`} />
                  <div class="sub">
                    {fmtBytes(d.free_bytes)} free of {fmtBytes(d.total_bytes)}
                  </div>
                </div>
              ))}
              <Card
                label="Connections"
                value={fmtNum(m.connections)}
                sub={`${fmtNum(m.tcp_connections)} TCP, ${fmtNum(m.http_connections)} HTTP`}
              />
              <Card
                label="Queries"
                value={formatValue('per_s', m.queries_per_s)}
                sub={`${fmtRatio(m.failed_query_ratio, 2)} failed`}
                tone={
                  (m.failed_query_ratio ?? 0) >= 0.2
                    ? 'critical'
                    : (m.failed_query_ratio ?? 0) >= 0.05
                      ? 'warning'
                      : undefined
                }
              />
              <Card label="Uptime" value={m.uptime_s === null ? '—' : fmtDuration(m.uptime_s * 1000)} />
            </div>
            <p class="muted small">
              Collected {fmtTime(m.ts)}; query counts over the latest poll ({m.interval_seconds ?? '?'} s).
            </p>
            <div class="toolbar">
              <TimeRangePicker tw={tw} setQuery={setQuery} />
            </div>
            <div class="chart-grid">
              {CHARTS.map((s) => (
                <SeriesChart
                  key={s.name}
                  points={m.timeseries}
                  spec={s}
                  bucketSeconds={m.bucket_seconds}
                  range={tw.bounds}
                />
              ))}
              <DiskChart points={m.timeseries} step={m.bucket_seconds * 1000} range={tw.bounds} />
            </div>
          </section>
        )
      }
    </Async>
  )
}
