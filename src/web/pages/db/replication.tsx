// Replication (PostgreSQL): the role and lag now, the replicas and slots of a primary, and charts of
// the lag (a replica's, /replication/history) and of each slot's retained WAL (/replication/slots/history).
import { useMemo } from 'preact/hooks'
import { Chart, type ChartSeries, formatValue } from '../../components/chart.tsx'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, ErrorBox, Loading, fmtBytes, fmtMs, fmtTime, useApi } from '../../components/ui.tsx'
import { Card, NoDataYet, TimeRangePicker, apiPath, useWindow } from './common.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { Replication, ReplicationLagPoint, SlotLagPoint } from '../../../shared/api/internals.ts'

type Status = Static<typeof Replication>
type Replica = Status['replicas'][number]
type Slot = Status['slots'][number]
type LagPoint = Static<typeof ReplicationLagPoint>
type SlotPoint = Static<typeof SlotLagPoint>

const REPLICAS: Column<Replica>[] = [
  { key: 'name', label: 'Application', render: (r) => r.application_name || '—', sort: (r) => r.application_name },
  { key: 'client', label: 'Client', render: (r) => r.client_addr ?? '—', sort: (r) => r.client_addr },
  { key: 'state', label: 'State', render: (r) => r.state ?? '—', sort: (r) => r.state },
  { key: 'sync', label: 'Sync', render: (r) => r.sync_state ?? '—', sort: (r) => r.sync_state },
  { key: 'lag', label: 'Lag', num: true, render: (r) => fmtBytes(r.lag_bytes), sort: (r) => r.lag_bytes },
  { key: 'write', label: 'Write lag', num: true, render: (r) => fmtMs(r.write_lag_ms), sort: (r) => r.write_lag_ms },
  { key: 'flush', label: 'Flush lag', num: true, render: (r) => fmtMs(r.flush_lag_ms), sort: (r) => r.flush_lag_ms },
  {
    key: 'replay',
    label: 'Replay lag',
    num: true,
    render: (r) => fmtMs(r.replay_lag_ms),
    sort: (r) => r.replay_lag_ms,
  },
]

const SLOTS: Column<Slot>[] = [
  {
    key: 'name',
    label: 'Slot',
    render: (s) => (
      <code>
        <DbText text={s.slot_name} />
      </code>
    ),
    sort: (s) => s.slot_name,
  },
  { key: 'type', label: 'Type', render: (s) => s.slot_type, sort: (s) => s.slot_type },
  {
    key: 'active',
    label: 'Active',
    render: (s) => (s.active ? 'yes' : <span class="badge badge-warning">inactive</span>),
    sort: (s) => (s.active ? 1 : 0),
  },
  { key: 'lag', label: 'Retained WAL', num: true, render: (s) => fmtBytes(s.lag_bytes), sort: (s) => s.lag_bytes },
  { key: 'wal', label: 'WAL status', render: (s) => s.wal_status ?? '—', sort: (s) => s.wal_status },
]

function LagCharts({
  points,
  slots,
  step,
  range,
}: {
  points: LagPoint[]
  slots: SlotPoint[]
  step: number
  range: [number, number]
}) {
  const lag = useMemo(() => {
    const withValues = points.filter((p) => p.replication_lag_bytes !== null || p.replication_lag_seconds !== null)
    if (withValues.length === 0) return undefined
    const times = withValues.map((p) => Date.parse(p.ts))
    return {
      times,
      seconds: [{ label: 'lag', values: withValues.map((p) => p.replication_lag_seconds) }] as ChartSeries[],
      bytes: [{ label: 'lag', values: withValues.map((p) => p.replication_lag_bytes) }] as ChartSeries[],
    }
  }, [points])
  const slotChart = useMemo(() => {
    if (slots.length === 0) return undefined
    const times = [...new Set(slots.map((p) => Date.parse(p.ts)))].sort((a, b) => a - b)
    const index = new Map(times.map((t, i) => [t, i]))
    const names = [...new Set(slots.map((p) => p.slot_name))].sort()
    const series = names.map((label): ChartSeries => ({ label, values: times.map(() => null) }))
    for (const p of slots) series[names.indexOf(p.slot_name)]!.values[index.get(Date.parse(p.ts))!] = p.lag_bytes
    return { times, series }
  }, [slots])
  if (!lag && !slotChart) return <p class="muted">No lag recorded in this time range.</p>
  return (
    <div class="chart-grid">
      {lag && (
        <Chart
          name="replication-lag-seconds"
          title="Replica lag (time)"
          unit="s"
          times={lag.times}
          series={lag.seconds}
          stepMs={step}
          range={range}
        />
      )}
      {lag && (
        <Chart
          name="replication-lag-bytes"
          title="Replica lag (WAL bytes)"
          unit="bytes"
          times={lag.times}
          series={lag.bytes}
          stepMs={step}
          range={range}
        />
      )}
      {slotChart && (
        <Chart
          name="replication-slots"
          title="WAL retained by each slot"
          unit="bytes"
          times={slotChart.times}
          series={slotChart.series}
          stepMs={step}
          range={range}
        />
      )}
    </div>
  )
}

export function ReplicationPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const status = useApi(db.last_seen_at ? apiPath(db, '/replication') : null)
  const history = useApi(db.last_seen_at ? apiPath(db, `/replication/history?${tw.params}&bucket=${tw.bucket}`) : null)
  const slots = useApi(
    db.last_seen_at ? apiPath(db, `/replication/slots/history?${tw.params}&bucket=${tw.bucket}`) : null,
  )
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <Async loaded={status}>
        {(s) =>
          s.ts === null ? (
            <Empty title="No replication data yet">
              <p>
                The replication collector sends the role, replicas and slots every poll; check that replication
                collection is on in Settings.
              </p>
            </Empty>
          ) : (
            <>
              <div class="cards">
                <div class="card">
                  <div class="label">Role</div>
                  <div class="value">{s.is_replica ? 'replica' : 'primary'}</div>
                  <div class="sub">
                    {s.is_replica ? (
                      <>
                        upstream <DbText text={s.upstream_host ?? 'unknown'} />
                      </>
                    ) : (
                      `${s.replicas.length} replicas`
                    )}
                  </div>
                </div>
                {s.is_replica && (
                  <Card
                    label="Lag"
                    value={formatValue('s', s.replication_lag_seconds)}
                    sub={fmtBytes(s.replication_lag_bytes)}
                  />
                )}
                <Card
                  label="Slots"
                  value={s.slots.length}
                  sub={`${s.slots.filter((x) => !x.active).length} inactive`}
                  tone={s.slots.some((x) => !x.active) ? 'warning' : undefined}
                />
              </div>
              <p class="muted small">Collected {fmtTime(s.ts)}.</p>
              {s.replicas.length > 0 && (
                <>
                  <h2>Replicas</h2>
                  <DataTable
                    caption="Replicas"
                    columns={REPLICAS}
                    rows={s.replicas}
                    rowKey={(r, i) => `${r.application_name}-${r.client_addr}-${i}`}
                    compact
                  />
                </>
              )}
              {s.slots.length > 0 && (
                <>
                  <h2>Replication slots</h2>
                  <DataTable
                    caption="Replication slots"
                    columns={SLOTS}
                    rows={s.slots}
                    rowKey={(x) => x.slot_name}
                    initialSort={{ key: 'lag' }}
                    rowClass={(x) => (x.active ? undefined : 'warn-row')}
                    compact
                  />
                </>
              )}
            </>
          )
        }
      </Async>
      <h2>Over time</h2>
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
      </div>
      {history.error ? (
        <ErrorBox error={history.error} />
      ) : slots.error ? (
        <ErrorBox error={slots.error} />
      ) : !history.data || !slots.data ? (
        <Loading />
      ) : (
        <LagCharts points={history.data} slots={slots.data} step={tw.bucket * 1000} range={tw.bounds} />
      )}
    </section>
  )
}
