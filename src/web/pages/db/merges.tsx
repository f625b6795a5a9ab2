// Merges and mutations (ClickHouse): the running merges with progress bars, and the mutations with the
// stuck ones (failing, or older than an hour) first and highlighted; both refresh every 15 seconds.
import { useState } from 'preact/hooks'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Async, Empty, ago, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { Card, NoDataYet, TableName, apiPath, fmtDuration, useEvery } from './common.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { Merges as MergesSchema, Mutations as MutationsSchema } from '../../../shared/api/clickhouse.ts'

type Merges = Static<typeof MergesSchema>
type Merge = Merges['merges'][number]
type Mutations = Static<typeof MutationsSchema>
type Mutation = Mutations['mutations'][number]

function Progress({ pct, label }: { pct: number; label: string }) {
  return (
    <div class="meter-row">
      <progress class="progress" max={100} value={pct} aria-label={escapeInvisible(label)} />
      <span class="num small">{pct.toFixed(0)} %</span>
    </div>
  )
}

const MERGES: Column<Merge>[] = [
  {
    key: 'table',
    label: 'Table',
    render: (m) => <TableName database={m.database} table={m.table} />,
    sort: (m) => `${m.database}.${m.table}`,
  },
  {
    key: 'progress',
    label: 'Progress',
    render: (m) => <Progress pct={m.progress_pct} label={`Progress of ${m.result_part_name}`} />,
    sort: (m) => m.progress,
  },
  {
    key: 'elapsed',
    label: 'Elapsed',
    num: true,
    render: (m) => fmtDuration(m.elapsed_s * 1000),
    sort: (m) => m.elapsed_s,
  },
  { key: 'parts', label: 'Parts', num: true, render: (m) => fmtNum(m.num_parts), sort: (m) => m.num_parts },
  {
    key: 'size',
    label: 'Size',
    num: true,
    render: (m) => fmtBytes(m.total_size_bytes_compressed),
    sort: (m) => m.total_size_bytes_compressed,
  },
  {
    key: 'result',
    label: 'Result part',
    render: (m) => (
      <code>
        <DbText text={m.result_part_name} />
      </code>
    ),
  },
  {
    key: 'kind',
    label: 'Kind',
    render: (m) => (m.is_mutation ? <span class="badge badge-info">mutation</span> : 'merge'),
  },
]

export function MergesPage({ db }: PageProps) {
  const merges = useApi(db.last_seen_at ? apiPath(db, '/merges?limit=1000') : null)
  useEvery(15_000, merges.reload)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <Async loaded={merges}>
      {(m) =>
        m.ts === null ? (
          <Empty title="No merges reported yet">
            <p>The merges collector sends system.merges every poll; check that it is not disabled in Settings.</p>
          </Empty>
        ) : (
          <section>
            <div class="cards">
              <Card label="Running merges" value={fmtNum(m.active_merges)} sub="mutation rewrites included" />
              <Card label="Mean progress" value={m.merge_progress_pct === null ? '—' : `${m.merge_progress_pct} %`} />
            </div>
            <p class="muted small">Collected {fmtTime(m.ts)}; refreshes every 15 s.</p>
            {m.merges.length === 0 ? (
              <Empty title="No merge is running">
                <p>Merges appear here while ClickHouse combines parts.</p>
              </Empty>
            ) : (
              <DataTable
                caption="Running merges"
                columns={MERGES}
                rows={m.merges}
                rowKey={(x) => `${x.database}.${x.table}.${x.result_part_name}`}
                initialSort={{ key: 'elapsed' }}
                compact
              />
            )}
          </section>
        )
      }
    </Async>
  )
}

const MUTATIONS: Column<Mutation>[] = [
  {
    key: 'state',
    label: 'State',
    render: (m) =>
      m.stuck ? (
        <span class="badge badge-critical">stuck</span>
      ) : m.is_done ? (
        <span class="badge badge-muted">done</span>
      ) : (
        <span class="badge badge-info">running</span>
      ),
  },
  { key: 'table', label: 'Table', render: (m) => <TableName database={m.database} table={m.table} /> },
  {
    key: 'command',
    label: 'Command',
    cellClass: 'stmt-cell',
    render: (m) => (
      <span class="mono small stmt-text" title={escapeInvisible(m.command)}>
        <DbText text={m.command} />
      </span>
    ),
  },
  {
    key: 'age',
    label: 'Age',
    num: true,
    render: (m) => <span title={fmtTime(m.create_time)}>{fmtDuration(m.age_seconds * 1000)}</span>,
  },
  { key: 'parts', label: 'Parts to do', num: true, render: (m) => fmtNum(m.parts_to_do) },
  {
    key: 'fail',
    label: 'Latest failure',
    render: (m) =>
      m.latest_fail_reason ? (
        <span class="small">
          <span class="sev-critical">
            <DbText text={m.latest_fail_reason} />
          </span>{' '}
          <span class="muted">{ago(m.latest_fail_time)}</span>
        </span>
      ) : (
        '—'
      ),
  },
  {
    key: 'id',
    label: 'Mutation',
    render: (m) => (
      <code>
        <DbText text={m.mutation_id} />
      </code>
    ),
  },
]

export function MutationsPage({ db }: PageProps) {
  const [includeDone, setIncludeDone] = useState(true)
  const mutations = useApi(db.last_seen_at ? apiPath(db, `/mutations?limit=1000&include_done=${includeDone}`) : null)
  useEvery(15_000, mutations.reload)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <Async loaded={mutations}>
      {(m) =>
        m.ts === null ? (
          <Empty title="No mutations reported yet">
            <p>The mutations collector sends system.mutations every poll; check that it is not disabled in Settings.</p>
          </Empty>
        ) : (
          <section>
            <div class="cards">
              <Card label="Not done" value={fmtNum(m.active_mutations)} />
              <Card
                label="Stuck"
                value={fmtNum(m.stuck_mutations)}
                sub="failing, or older than 1 hour"
                tone={(m.stuck_mutations ?? 0) > 0 ? 'critical' : undefined}
              />
            </div>
            <div class="toolbar">
              <label class="check">
                <input
                  type="checkbox"
                  checked={includeDone}
                  onChange={(e) => setIncludeDone((e.target as HTMLInputElement).checked)}
                />{' '}
                Show finished mutations of the last day
              </label>
              <span class="muted small">Collected {fmtTime(m.ts)}.</span>
            </div>
            {m.mutations.length === 0 ? (
              <Empty title="No mutations">
                <p>ALTER TABLE … UPDATE / DELETE statements appear here while they run, and for a day after.</p>
              </Empty>
            ) : (
              <DataTable
                caption="Mutations"
                columns={MUTATIONS}
                rows={m.mutations}
                rowKey={(x) => `${x.database}.${x.table}.${x.mutation_id}`}
                rowClass={(x) => (x.stuck ? 'blocked-row' : undefined)}
                compact
              />
            )}
          </section>
        )
      }
    </Async>
  )
}
