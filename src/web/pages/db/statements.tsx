// Statements: statistics per statement over a time window (pg_stat_statements / system.query_log),
// sorted by the server (total time, calls, mean time, rows), with a limit; each links to its page.
import type { QueryStatsRow } from '../../../server/store/sql-telemetry.ts'
import { Async, Empty, fmtBytes, fmtMs, fmtNum, useApi } from '../../components/ui.tsx'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { NoDataYet, SelectField, TimeRangePicker, apiPath, dbHref, fmtRatio, useWindow } from './common.tsx'
import type { Database, PageProps } from './types.ts'

/** A statement's totals over the window, as the API sends them (queryView). */
export type StatementRow = Omit<QueryStatsRow, 'first_bucket'>

const SORTS = ['total_time', 'calls', 'mean_time', 'rows']
const LIMITS = ['25', '50', '100']

function columns(db: Database, query: string): Column<StatementRow>[] {
  const link = (r: StatementRow) => `${dbHref(db, `queries/${encodeURIComponent(r.query_hash)}`)}${query ? `?${query}` : ''}`
  const common: Column<StatementRow>[] = [
    {
      key: 'text',
      label: 'Statement',
      cellClass: 'stmt-cell',
      render: (r) => (
        <a class="stmt-text mono" href={link(r)} title={r.query_text}>
          {r.query_text || r.query_hash}
        </a>
      ),
    },
    { key: 'total', label: 'Total time', num: true, sortBy: 'total_time', render: (r) => fmtMs(r.total_time_ms) },
    { key: 'calls', label: 'Calls', num: true, sortBy: 'calls', render: (r) => fmtNum(r.total_calls) },
    { key: 'mean', label: 'Mean', num: true, sortBy: 'mean_time', render: (r) => fmtMs(r.mean_time_ms) },
    { key: 'rows', label: 'Rows', num: true, sortBy: 'rows', render: (r) => fmtNum(r.total_rows) },
  ]
  if (db.engine === 'postgres') {
    return [
      ...common,
      { key: 'hit', label: 'Cache hits', num: true, render: (r) => fmtRatio(r.cache_hit_ratio), title: 'shared_blks_hit / (hit + read)' },
      { key: 'read', label: 'Blocks read', num: true, render: (r) => fmtNum(r.shared_blks_read) },
      { key: 'temp', label: 'Temp written', num: true, render: (r) => fmtNum(r.temp_blks_written), title: 'temp_blks_written' },
    ]
  }
  return [
    ...common,
    { key: 'p99', label: 'p99', num: true, render: (r) => fmtMs(r.p99_ms) },
    { key: 'bytes', label: 'Read', num: true, render: (r) => fmtBytes(r.read_bytes) },
    { key: 'memory', label: 'Memory', num: true, render: (r) => fmtBytes(r.memory_bytes) },
    { key: 'errors', label: 'Errors', num: true, render: (r) => <span class={r.errors > 0 ? 'sev-critical' : undefined}>{fmtNum(r.errors)}</span> },
  ]
}

export function StatementsPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const sort = SORTS.includes(query.get('sort') ?? '') ? query.get('sort')! : 'total_time'
  const limit = LIMITS.includes(query.get('limit') ?? '') ? query.get('limit')! : '25'
  const list = useApi<StatementRow[]>(db.last_seen_at ? apiPath(db, `/queries?${tw.params}&sort_by=${sort}&limit=${limit}`) : null)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  // Statement links keep the window (a custom one as it is).
  const keep = new URLSearchParams()
  for (const k of ['range', 'since', 'until']) if (query.get(k)) keep.set(k, query.get(k)!)
  return (
    <section>
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
        <SelectField
          label="Sort by"
          value={sort}
          options={[
            ['total_time', 'Total time'],
            ['calls', 'Calls'],
            ['mean_time', 'Mean time'],
            ['rows', 'Rows'],
          ]}
          onChange={(v) => setQuery({ sort: v })}
        />
        <SelectField label="Show" value={limit} options={LIMITS.map((l) => [l, `${l} statements`])} onChange={(v) => setQuery({ limit: v })} />
      </div>
      <Async loaded={list}>
        {(rows) =>
          rows.length === 0 ? (
            <Empty title="No statements in this time range">
              <p>Pick a longer time range. {db.engine === 'postgres' ? 'The query_stats collector needs the pg_stat_statements extension; ' : 'The query_stats collector reads system.query_log; '}
                <code>dbm agent --check</code> tells whether it runs.</p>
            </Empty>
          ) : (
            <DataTable
              caption="Statements"
              columns={columns(db, keep.toString())}
              rows={rows}
              rowKey={(r) => r.query_hash}
              serverSort={{ value: sort, onChange: (s) => setQuery({ sort: s }) }}
            />
          )
        }
      </Async>
    </section>
  )
}
