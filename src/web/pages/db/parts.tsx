// Parts (ClickHouse): active parts per table and partition against the thresholds at which inserts
// slow down (parts_to_delay_insert) and fail (parts_to_throw_insert), the worst partitions first, and
// the part counts over time.
import { useMemo } from 'preact/hooks'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, ErrorBox, Loading, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { Card, Meter, NoDataYet, SelectField, TableName, TimeRangePicker, apiPath, useWindow } from './common.tsx'
import { SeriesChart, type SeriesSpec } from './series-chart.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { Parts as PartsSchema } from '../../../shared/api/clickhouse.ts'

type Parts = Static<typeof PartsSchema>
type TableParts = Parts['tables'][number]
type Partition = Parts['partitions'][number]
/** What a table and a partition both say of the insert thresholds. */
type Thresholds = Pick<
  Partition,
  'parts_to_delay_insert' | 'parts_to_throw_insert' | 'delay_insert_ratio' | 'throw_insert_ratio'
>

const ratioTone = (r: number | null | undefined) =>
  r === null || r === undefined ? undefined : r >= 1 ? 'critical' : r >= 0.5 ? 'warning' : undefined

/** A partition's active parts against the delay threshold, with both thresholds named. */
function AgainstThresholds({ parts, t }: { parts: number; t: Thresholds }) {
  return (
    <div class="threshold">
      <Meter
        pct={t.delay_insert_ratio === null ? null : t.delay_insert_ratio * 100}
        warn={50}
        crit={100}
        label="Active parts against parts_to_delay_insert"
      />
      <span class="small muted">
        {fmtNum(parts)} of {fmtNum(t.parts_to_delay_insert)} (delay) · {fmtNum(t.parts_to_throw_insert)} (throw)
      </span>
    </div>
  )
}

const TABLES: Column<TableParts>[] = [
  {
    key: 'table',
    label: 'Table',
    render: (t) => <TableName database={t.database} table={t.table} />,
    sort: (t) => `${t.database}.${t.table}`,
  },
  {
    key: 'parts',
    label: 'Active parts',
    num: true,
    render: (t) => fmtNum(t.active_parts),
    sort: (t) => t.active_parts,
  },
  {
    key: 'partitions',
    label: 'Partitions',
    num: true,
    render: (t) => fmtNum(t.partition_count),
    sort: (t) => t.partition_count,
  },
  { key: 'rows', label: 'Rows', num: true, render: (t) => fmtNum(t.rows), sort: (t) => t.rows },
  { key: 'bytes', label: 'On disk', num: true, render: (t) => fmtBytes(t.bytes_on_disk), sort: (t) => t.bytes_on_disk },
  {
    key: 'worst',
    label: 'Worst partition',
    render: (t) => (
      <code>
        <DbText text={t.worst_partition_id} />
      </code>
    ),
  },
  {
    key: 'ratio',
    label: 'Its parts vs thresholds',
    render: (t) => <AgainstThresholds parts={t.max_partition_parts} t={t} />,
    sort: (t) => t.delay_insert_ratio,
  },
]

const PARTITIONS: Column<Partition>[] = [
  {
    key: 'table',
    label: 'Table',
    render: (p) => <TableName database={p.database} table={p.table} />,
    sort: (p) => `${p.database}.${p.table}`,
  },
  {
    key: 'partition',
    label: 'Partition',
    render: (p) => (
      <code>
        <DbText text={p.partition_id} />
      </code>
    ),
    sort: (p) => p.partition_id,
  },
  {
    key: 'parts',
    label: 'Active parts',
    num: true,
    render: (p) => fmtNum(p.active_parts),
    sort: (p) => p.active_parts,
  },
  { key: 'rows', label: 'Rows', num: true, render: (p) => fmtNum(p.rows), sort: (p) => p.rows },
  { key: 'bytes', label: 'On disk', num: true, render: (p) => fmtBytes(p.bytes_on_disk), sort: (p) => p.bytes_on_disk },
  {
    key: 'ratio',
    label: 'Parts vs thresholds',
    render: (p) => <AgainstThresholds parts={p.active_parts} t={p} />,
    sort: (p) => p.delay_insert_ratio,
  },
]

const PART_CHARTS: SeriesSpec[] = [
  { name: 'parts-active', title: 'Active parts', unit: 'count', keys: [['active_parts', 'active parts']] },
  {
    name: 'parts-worst-partition',
    title: 'Parts in the worst partition',
    unit: 'count',
    keys: [['max_partition_parts', 'worst partition']],
  },
]

export function PartsPage({ db, query, setQuery }: PageProps) {
  const sort = query.get('sort') ?? 'active_parts'
  const tw = useWindow(query)
  const parts = useApi(db.last_seen_at ? apiPath(db, `/parts?sort_by=${encodeURIComponent(sort)}&limit=200`) : null)
  const history = useApi(db.last_seen_at ? apiPath(db, `/parts/timeseries?${tw.params}&bucket=${tw.bucket}`) : null)
  const specs = useMemo(() => PART_CHARTS, [])
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <Async loaded={parts}>
        {(p) =>
          p.ts === null ? (
            <Empty title="No parts yet">
              <p>The parts collector sends system.parts every poll; check that it is not disabled in Settings.</p>
            </Empty>
          ) : (
            <>
              <div class="cards">
                <Card
                  label="Active parts"
                  value={fmtNum(p.active_parts)}
                  sub={`${fmtNum(p.table_count)} tables, ${fmtNum(p.partition_count)} partitions`}
                />
                <Card
                  label="Worst partition"
                  value={fmtNum(p.max_partition_parts)}
                  sub="active parts"
                  tone={ratioTone(p.max_delay_insert_ratio)}
                />
                <Card
                  label="Towards insert delay"
                  value={p.max_delay_insert_ratio === null ? '—' : `${Math.round(p.max_delay_insert_ratio * 100)} %`}
                  sub="of parts_to_delay_insert"
                  tone={ratioTone(p.max_delay_insert_ratio)}
                />
                <Card
                  label="Towards insert failure"
                  value={p.max_throw_insert_ratio === null ? '—' : `${Math.round(p.max_throw_insert_ratio * 100)} %`}
                  sub="of parts_to_throw_insert"
                  tone={ratioTone(p.max_throw_insert_ratio)}
                />
              </div>
              <p class="muted small">Collected {fmtTime(p.ts)}.</p>
              <div class="toolbar">
                <SelectField
                  label="Sort by"
                  value={sort}
                  options={[
                    ['active_parts', 'Active parts'],
                    ['bytes_on_disk', 'Size on disk'],
                    ['rows', 'Rows'],
                  ]}
                  onChange={(v) => setQuery({ sort: v })}
                />
              </div>
              <h2>Tables</h2>
              <DataTable
                caption="Tables"
                columns={TABLES}
                rows={p.tables}
                rowKey={(t) => `${t.database}.${t.table}`}
                compact
              />
              <h2>Partitions</h2>
              <DataTable
                caption="Partitions"
                columns={PARTITIONS}
                rows={p.partitions}
                rowKey={(x) => `${x.database}.${x.table}.${x.partition_id}`}
                compact
              />
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
      ) : !history.data ? (
        <Loading />
      ) : (
        <div class="chart-grid">
          {specs.map((s) => (
            <SeriesChart key={s.name} points={history.data!} spec={s} bucketSeconds={tw.bucket} range={tw.bounds} />
          ))}
        </div>
      )}
    </section>
  )
}
