// Host: the database host's CPU, load, memory and swap, each filesystem the database uses (with its
// roles) with free space over the window and the forecast line drawn to the day it fills (the axis
// reaching it when it is near, else the line drawn to the window's end with the date in its label), and the I/O
// of the devices behind them. Without host figures it says why (the agent's note) and shows the
// database's growth from its size, which every agent sends.
import { Chart, type ChartSeries, formatValue } from '../../components/chart.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { Card, Meter, NoDataYet, TimeRangePicker, apiPath, fmtDuration, useWindow } from './common.tsx'
import { SeriesChart, type SeriesSpec } from './series-chart.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { Host as HostSchema } from '../../../shared/api/host.ts'

type Host = Static<typeof HostSchema>
type Filesystem = Host['filesystems'][number]

const CHARTS: SeriesSpec[] = [
  {
    name: 'host-cpu',
    title: 'CPU',
    unit: 'pct',
    keys: [
      ['cpu_user', 'user'],
      ['cpu_system', 'system'],
      ['cpu_iowait', 'iowait'],
      ['cpu_steal', 'steal'],
    ],
  },
  {
    name: 'host-memory',
    title: 'Memory',
    unit: 'bytes',
    keys: [
      ['memory_available_bytes', 'available'],
      ['swap_used_bytes', 'swap used'],
    ],
  },
  { name: 'host-load', title: 'Load (1 min)', unit: 'count', keys: [['load1', 'load']] },
]

/** The forecast is drawn to the fill time when it comes within this many windows past the window's end. */
export const FORECAST_REACH = 2

/**
 * Free space over the window and, when the filesystem fills, a forecast series from the latest sample:
 * straight to zero at the fill time when that comes within FORECAST_REACH windows after the window's end
 * (the axis then ends there), else along the trend to the window's end, with the fill time in its label.
 * Samples after the last known one are left out (a null between the two points would break the line).
 * `range` is the window [from, to] (epoch ms); the answer's range is the axis to draw.
 */
export function forecastLine(
  fs: Pick<Filesystem, 'series' | 'forecast'>,
  range?: [number, number],
): { times: number[]; series: ChartSeries[]; range?: [number, number] } {
  const times = fs.series.map((p) => Date.parse(p.ts))
  const free = fs.series.map((p) => p.available_bytes)
  const fills = fs.forecast.fills_at === null ? null : Date.parse(fs.forecast.fills_at)
  const lastIndex = free.findLastIndex((v) => v !== null)
  if (fills === null || lastIndex < 0 || fills <= times[lastIndex]!)
    return { times, series: [{ label: 'free', values: free }], range }
  const lastAt = times[lastIndex]!
  const lastFree = free[lastIndex]!
  const known = free.slice(0, lastIndex + 1)
  const windowEnd = Math.max(range?.[1] ?? lastAt, lastAt)
  const span = range ? range[1] - range[0] : windowEnd - (times[0] ?? lastAt)
  const within = fills <= windowEnd + FORECAST_REACH * span
  // Within reach: to zero at the fill time. Further: along the same straight line to the window's end.
  const endAt = within ? fills : windowEnd
  const endFree = within ? 0 : Math.max(0, lastFree - (lastFree * (endAt - lastAt)) / (fills - lastAt))
  const label = `forecast: fills ${fmtTime(new Date(fills).toISOString())}`
  if (endAt <= lastAt) return { times, series: [{ label: 'free', values: free }], range }
  return {
    times: [...times.slice(0, lastIndex + 1), endAt],
    series: [
      { label: 'free', values: [...known, null] },
      { label, values: [...known.map((v, i) => (i === lastIndex ? v : null)), endFree] },
    ],
    range: range ? [range[0], Math.max(range[1], endAt)] : undefined,
  }
}

/** The free-space trend in words: shrinking with its fill time, steady, or growing. */
export function trendWords(fs: Pick<Filesystem, 'forecast'>): string {
  const trend = fs.forecast.trend
  if (trend === null) return 'Too little history for a forecast (it needs 10 minutes).'
  const over = `fitted over ${fmtDuration(trend.basis_seconds * 1000)}`
  if (fs.forecast.fills_at !== null)
    return `Fills ${fmtTime(fs.forecast.fills_at)}: free space shrinks by ${formatValue('bytes/s', -trend.rate_bytes_per_s)} (${over}).`
  if (trend.rate_bytes_per_s > 0)
    return `Free space grows by ${formatValue('bytes/s', trend.rate_bytes_per_s)} (${over}): no fill date.`
  if (trend.rate_bytes_per_s < 0)
    return `Free space shrinks by ${formatValue('bytes/s', -trend.rate_bytes_per_s)} (${over}), too slowly for a fill date.`
  return `Free space is steady (${over}).`
}

/** The roles as words: data, WAL, log, tablespace "x", disk "y". */
const roleWords = (roles: string[]) =>
  roles
    .map((r) =>
      r
        .replace(/^tablespace:(.*)$/s, 'tablespace $1')
        .replace(/^disk:(.*)$/s, 'disk $1')
        .replace(/^wal$/, 'WAL'),
    )
    .join(', ')

function FilesystemCard({ fs, range }: { fs: Filesystem; range: [number, number] }) {
  const used = fs.total_bytes > 0 ? 100 * (1 - fs.available_bytes / fs.total_bytes) : null
  const line = forecastLine(fs, range)
  return (
    <div class="card host-fs" data-path={fs.path}>
      <div class="label">
        <DbText text={roleWords(fs.roles)} /> — <DbText text={fs.mount ?? fs.path} />
      </div>
      <div class="value">{formatValue('pct', used)} used</div>
      <Meter pct={used} warn={90} crit={95} label="Space used" />
      <div class="sub">
        {fmtBytes(fs.available_bytes)} free of {fmtBytes(fs.total_bytes)}
        {fs.inodes_available !== null && fs.inodes_total
          ? `; ${fmtNum(fs.inodes_available)} of ${fmtNum(fs.inodes_total)} inodes free`
          : ''}
        {fs.device ? (
          <>
            {' '}
            on <DbText text={fs.device} />
          </>
        ) : null}
      </div>
      <p class="host-fs-trend">{trendWords(fs)}</p>
      {line.times.length > 1 ? (
        <Chart
          name="host-filesystem"
          title="Free space"
          unit="bytes"
          times={line.times}
          series={line.series}
          range={line.range}
        />
      ) : null}
    </div>
  )
}

export function HostPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const host = useApi(db.last_seen_at ? apiPath(db, `/host?${tw.params}&bucket=${tw.bucket}`) : null)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <Async loaded={host}>
      {(h) => (
        <section>
          {!h.on_host ? (
            <Empty title="No host figures">
              <p>
                {h.note ? (
                  <DbText text={h.note} />
                ) : (
                  'The host collector sends CPU, memory and free disk space only when the agent runs on the database host (or for ClickHouse, which reports its own host).'
                )}
              </p>
              <p>
                Run the agent on the database host, with read access to the data directory, to see free space and the
                day the disk fills.
              </p>
            </Empty>
          ) : (
            <>
              <div class="cards">
                <Card
                  label="CPU busy"
                  value={h.cpu ? formatValue('pct', 100 - h.cpu.idle) : '—'}
                  sub={
                    h.cpu
                      ? `iowait ${formatValue('pct', h.cpu.iowait)}, steal ${formatValue('pct', h.cpu.steal)}`
                      : 'from the second poll on'
                  }
                />
                <Card
                  label="Load"
                  value={h.load ? h.load.load1.toFixed(2) : '—'}
                  sub={
                    h.load
                      ? `${h.load.load5.toFixed(2)} (5 min), ${h.load.load15.toFixed(2)} (15 min); ${fmtNum(h.cpu_count)} CPUs`
                      : ''
                  }
                />
                <Card
                  label="Memory available"
                  value={h.memory ? fmtBytes(h.memory.available_bytes) : '—'}
                  sub={
                    h.memory
                      ? `of ${fmtBytes(h.memory.total_bytes)}; swap ${h.memory.swap_used_bytes === null ? 'not reported' : `${fmtBytes(h.memory.swap_used_bytes)} used of ${fmtBytes(h.memory.swap_total_bytes)}`}`
                      : ''
                  }
                />
              </div>
              <p class="muted small">
                Collected {fmtTime(h.ts)}
                {h.evidence ? (
                  <>
                    ; the agent is on the database host: <DbText text={h.evidence} />
                  </>
                ) : null}
              </p>
              <div class="host-fs-grid">
                {h.filesystems.map((fs) => (
                  <FilesystemCard key={fs.path} fs={fs} range={tw.bounds} />
                ))}
              </div>
              {h.devices.length > 0 ? (
                <div class="table-wrap">
                  <table class="data">
                    <thead>
                      <tr>
                        <th>Device</th>
                        <th>Reads</th>
                        <th>Read</th>
                        <th>Writes</th>
                        <th>Written</th>
                        <th>Busy</th>
                      </tr>
                    </thead>
                    <tbody>
                      {h.devices.map((d) => (
                        <tr key={d.device}>
                          <td>
                            <DbText text={d.device} />
                          </td>
                          <td>{fmtNum(d.reads)}</td>
                          <td>{fmtBytes(d.read_bytes)}</td>
                          <td>{fmtNum(d.writes)}</td>
                          <td>{fmtBytes(d.write_bytes)}</td>
                          <td>{fmtDuration(d.busy_ms)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              ) : null}
              <div class="toolbar">
                <TimeRangePicker tw={tw} setQuery={setQuery} />
              </div>
              <div class="chart-grid">
                {CHARTS.map((s) => (
                  <SeriesChart key={s.name} points={h.series} spec={s} bucketSeconds={tw.bucket} range={tw.bounds} />
                ))}
              </div>
            </>
          )}
          {h.database_size?.trend ? (
            <p class="muted small">
              Database size {fmtBytes(h.database_size.latest_bytes)}, growing{' '}
              {formatValue('bytes/s', h.database_size.trend.rate_bytes_per_s)} (over{' '}
              {fmtDuration(h.database_size.trend.basis_seconds * 1000)}).
            </p>
          ) : null}
        </section>
      )}
    </Async>
  )
}
