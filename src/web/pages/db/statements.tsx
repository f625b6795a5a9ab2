// Statements: statistics per statement over a time window (pg_stat_statements / system.query_log),
// sorted by the server (total time, calls, mean time, rows), with a limit; each links to its page. A text
// filter narrows the loaded list, each statement's share of the listed statements' total time is a
// column, and what the agent and the doctor say about missing statement statistics shows above it.
import { useRef, useState } from 'preact/hooks'
import type { QueryStatsRow } from '../../../server/store/sql-telemetry.ts'
import { Async, Empty, fmtBytes, fmtMs, fmtNum, useApi } from '../../components/ui.tsx'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { type AgentNote, AgentNotes, Field, NoDataYet, SelectField, TimeRangePicker, apiPath, dbHref, fmtRatio, useWindow, windowQuery } from './common.tsx'
import type { Database, Finding, PageProps } from './types.ts'

/** A statement's totals over the window, as the API sends them (queryView). */
export type StatementRow = Omit<QueryStatsRow, 'first_bucket'>

const SORTS: [string, string][] = [
  ['total_time', 'Total time'],
  ['calls', 'Calls'],
  ['mean_time', 'Mean time'],
  ['rows', 'Rows'],
]
const LIMITS = ['25', '50', '100']
/** The collectors whose notes explain missing statements or plans. */
const STATEMENT_COLLECTORS = ['query_stats', 'explain_plans']

/** The rows whose text (or hash) contains `text`, ignoring case; all of them for an empty filter. */
export function filterStatements<R extends Pick<StatementRow, 'query_text' | 'query_hash'>>(rows: R[], text: string): R[] {
  const needle = text.trim().toLowerCase()
  if (!needle) return rows
  return rows.filter((r) => (r.query_text ?? '').toLowerCase().includes(needle) || r.query_hash.toLowerCase().includes(needle))
}

/** Each statement's total time as a share (0–1) of the sum over `rows`; null when that sum is 0. */
export function timeShare(rows: Pick<StatementRow, 'total_time_ms'>[]): (ms: number | null) => number | null {
  const total = rows.reduce((sum, r) => sum + (r.total_time_ms ?? 0), 0)
  return (ms) => (total > 0 && ms !== null ? ms / total : null)
}

function Share({ share }: { share: number | null }) {
  if (share === null) return <span class="muted">—</span>
  const pct = 100 * share
  return (
    <span class="share">
      <span class="share-bar" aria-hidden="true">
        <span style={{ width: `${Math.min(100, pct)}%` }} />
      </span>
      {pct.toFixed(pct < 10 ? 1 : 0)} %
    </span>
  )
}

function columns(db: Database, query: string, share: (ms: number | null) => number | null, listed: number): Column<StatementRow>[] {
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
    {
      key: 'share',
      label: '% of total time',
      num: true,
      title: `Share of the total time of the ${listed} statements listed (in this time range, before any filter); statements beyond the list are not counted`,
      render: (r) => <Share share={share(r.total_time_ms)} />,
    },
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

/** The agent's notes about statements and plans, and the doctor's finding that pg_stat_statements is missing. */
function StatementNotes({ db, doctor }: { db: Database; doctor: PageProps['doctor'] }) {
  const overview = useApi<{ agent_notes?: AgentNote[] }>(apiPath(db, '/overview'))
  const notes = (overview.data?.agent_notes ?? []).filter((n) => STATEMENT_COLLECTORS.includes(n.collector))
  const findings = (doctor.data?.top_issues ?? []).filter((f: Finding) => f.key.endsWith(':pg_stat_statements') || f.objects.includes('pg_stat_statements'))
  const extra = findings.length
    ? findings.map((f) => (
        <li key={f.key}>
          The doctor: {f.title}. <a href={`${dbHref(db, 'doctor')}?finding=${encodeURIComponent(f.key)}`}>How to fix it</a>
        </li>
      ))
    : undefined
  return <AgentNotes notes={notes} extra={extra} title="Why statements may be missing" />
}

export function StatementsPage({ db, query, setQuery, doctor }: PageProps) {
  const tw = useWindow(query)
  const sort = SORTS.some(([v]) => v === query.get('sort')) ? query.get('sort')! : 'total_time'
  const limit = LIMITS.includes(query.get('limit') ?? '') ? query.get('limit')! : '25'
  const list = useApi<StatementRow[]>(db.last_seen_at ? apiPath(db, `/queries?${tw.params}&sort_by=${sort}&limit=${limit}`) : null)
  // The filter is the page's own (not in the route): typing must not add a history entry per key.
  const [filter, setFilter] = useState('')
  const filterInput = useRef<HTMLInputElement>(null)
  const clearFilter = () => {
    setFilter('')
    filterInput.current?.focus()
  }
  if (!db.last_seen_at) return <NoDataYet db={db} />
  const sortLabel = SORTS.find(([v]) => v === sort)![1].toLowerCase()
  return (
    <section class="stack">
      <StatementNotes db={db} doctor={doctor} />
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
        <SelectField label="Sort by" value={sort} options={SORTS} onChange={(v) => setQuery({ sort: v })} />
        <SelectField label="Show" value={limit} options={LIMITS.map((l) => [l, `${l} statements`])} onChange={(v) => setQuery({ limit: v })} />
        <div class="filter-field">
          <Field label="Filter by text">
            {(id) => (
              <input
                id={id}
                ref={filterInput}
                type="search"
                value={filter}
                placeholder="e.g. orders"
                autoComplete="off"
                spellcheck={false}
                onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
                onKeyDown={(e) => {
                  if (e.key === 'Escape' && filter) {
                    e.preventDefault()
                    setFilter('')
                  }
                }}
              />
            )}
          </Field>
        </div>
      </div>
      <Async loaded={list}>
        {(rows) => {
          if (rows.length === 0) {
            return (
              <Empty title="No statements in this time range">
                <p>
                  Pick a longer time range.{' '}
                  {db.engine === 'postgres' ? 'The query_stats collector needs the pg_stat_statements extension; ' : 'The query_stats collector reads system.query_log; '}
                  <code>dbm agent --check</code> tells whether it runs.
                </p>
              </Empty>
            )
          }
          const shown = filterStatements(rows, filter)
          return (
            <>
              {filter.trim() && (
                <p class="muted small" role="status">
                  {shown.length} of the {rows.length} statements listed match “{filter.trim()}”.
                </p>
              )}
              {shown.length === 0 ? (
                <Empty title={`No statement matches “${filter.trim()}”`}>
                  <p>
                    The filter searches the text of the {rows.length} statements listed (the top {limit} by {sortLabel} in this time range). Show more
                    statements or pick a longer time range to search further.
                  </p>
                  <button type="button" onClick={clearFilter}>
                    Clear the filter
                  </button>
                </Empty>
              ) : (
                <DataTable
                  caption={`Statements; “% of total time” is each statement's share of the total time of the ${rows.length} statements listed`}
                  columns={columns(db, windowQuery(query), timeShare(rows), rows.length)}
                  rows={shown}
                  rowKey={(r) => r.query_hash}
                  serverSort={{ value: sort, onChange: (s) => setQuery({ sort: s }) }}
                />
              )}
            </>
          )
        }}
      </Async>
    </section>
  )
}
