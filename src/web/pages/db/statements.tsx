// Statements: statistics per statement over a time window (pg_stat_statements / system.query_log),
// sorted by the server (total time, calls, mean time, rows), with a limit; each links to its page. A text
// filter (kept in the route as ?q=, without a history entry per key) narrows the loaded list, each
// statement's share of the listed statements' total time is a column, and what the agent and the doctor
// say about missing statements or plans shows above it. dbm counts a statement's calls from the agent's
// first cycle on, so where that is inside the window the page says "counted since 14:02" (the totals
// then read lower than pg_stat_statements', which counts since its last reset). PostgreSQL statements
// have an I/O time column (blk_read_time + blk_write_time, sortable by the server as io_time); when it is
// 0 for every statement although blocks were read, the page says track_io_timing is off (or probably
// off, where the agent does not report the setting).
import { useEffect, useRef, useState } from 'preact/hooks'
import type { Static } from '@sinclair/typebox'
import type { QueryStats } from '../../../shared/api/queries.ts'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Async, Empty, fmtBytes, fmtClock, fmtMs, fmtNum, useApi } from '../../components/ui.tsx'
import { type Column, DataTable } from '../../components/data-table.tsx'
import {
  AgentNotes,
  Field,
  NoDataYet,
  SelectField,
  TimeRangePicker,
  apiPath,
  dbHref,
  fmtRatio,
  issuesHref,
  useWindow,
  windowQuery,
} from './common.tsx'
import type { Database, Finding, PageProps } from './types.ts'

/**
 * A statement's totals over the window, as the API sends them (queryView). `first_bucket`, the start of
 * its earliest bucket in the window, is read when the API sends it (epoch ms or RFC 3339).
 */
/** Temp blocks in bytes: pg_stat_statements counts blocks of block_size, 8 kB unless the server was built otherwise. */
export const tempBytes = (blocks: number | null | undefined) =>
  blocks === null || blocks === undefined ? null : blocks * 8192

/** A statement's sums over the window, as GET /queries answers them. */
export type StatementRow = Static<typeof QueryStats>

/** Epoch ms of an API time (epoch ms or RFC 3339), undefined when absent or unreadable. */
export function epochOf(value: number | string | null | undefined): number | undefined {
  if (value === null || value === undefined || value === '') return undefined
  const ms = typeof value === 'number' ? value : Date.parse(value)
  return Number.isFinite(ms) ? ms : undefined
}

/**
 * When counting started, if that is inside the window: `start` (a statement's first bucket, or the
 * earliest of them) later than the window's start by more than a minute; otherwise undefined. A bucket
 * starts at its 10-minute or hour boundary, before the agent may have sent anything: `notBefore` (when
 * the agent first sent for the database, its registration) is the earliest time counting can have
 * started, so an agent started at 05:18 reads "since 05:18", never the 05:10 of its first bucket.
 */
export function countedSince(
  start: number | string | null | undefined,
  windowSince: number,
  notBefore?: number | string | null,
): number | undefined {
  const bucket = epochOf(start)
  if (bucket === undefined) return undefined
  const floor = epochOf(notBefore)
  const at = floor === undefined ? bucket : Math.max(bucket, floor)
  return at > windowSince + 60_000 ? at : undefined
}

/** The route's query for a statement's link and the way back: the window and the filter. */
export function listQuery(query: URLSearchParams): string {
  const keep = new URLSearchParams(windowQuery(query))
  const q = query.get('q')
  if (q) keep.set('q', q)
  return keep.toString()
}

const SORTS: [string, string][] = [
  ['total_time', 'Total time'],
  ['calls', 'Calls'],
  ['mean_time', 'Mean time'],
  ['rows', 'Rows'],
  ['io_time', 'I/O time'],
]
/** The sorts of an engine: I/O time is PostgreSQL's (ClickHouse statements have none). */
const sortsOf = (engine: Database['engine']) => (engine === 'postgres' ? SORTS : SORTS.filter(([v]) => v !== 'io_time'))

/** A statement's time reading and writing blocks (pg_stat_statements' blk_read_time + blk_write_time). */
export const ioTime = (r: Pick<StatementRow, 'blk_read_time_ms' | 'blk_write_time_ms'>) =>
  (r.blk_read_time_ms ?? 0) + (r.blk_write_time_ms ?? 0)

/**
 * Why every statement's I/O time is 0, when that needs saying: blocks were read from outside shared
 * buffers yet no time was counted. 'off': the agent reports track_io_timing off; 'probably off': the
 * setting is not reported; undefined: some I/O time was counted, nothing was read, or the setting is on.
 */
export function ioTimingOff(
  rows: Pick<StatementRow, 'blk_read_time_ms' | 'blk_write_time_ms' | 'shared_blks_read'>[],
  setting: number | null | undefined,
): 'off' | 'probably off' | undefined {
  if (rows.length === 0 || rows.some((r) => ioTime(r) > 0) || !rows.some((r) => (r.shared_blks_read ?? 0) > 0))
    return undefined
  if (setting === 1) return undefined
  return setting === 0 ? 'off' : 'probably off'
}

function IoTimingNote({ state }: { state: 'off' | 'probably off' }) {
  return (
    <p class="muted small" data-io-timing>
      I/O time is 0 for every statement although they read blocks from disk:{' '}
      {state === 'off'
        ? 'track_io_timing is off on this server'
        : 'track_io_timing is probably off (SHOW track_io_timing tells)'}
      , so PostgreSQL does not time reads and writes. Turn it on to see how long statements wait for them:{' '}
      <code>ALTER SYSTEM SET track_io_timing = on;</code> then <code>SELECT pg_reload_conf();</code> (pg_test_timing
      measures its cost, small on most systems).
    </p>
  )
}
const LIMITS = ['25', '50', '100']
/** The collectors whose notes explain missing statements or plans. */
const STATEMENT_COLLECTORS = ['query_stats', 'explain_plans']

/** The rows whose text (or hash) contains `text`, ignoring case; all of them for an empty filter. */
export function filterStatements<R extends Pick<StatementRow, 'query_text' | 'query_hash'>>(
  rows: R[],
  text: string,
): R[] {
  const needle = text.trim().toLowerCase()
  if (!needle) return rows
  return rows.filter(
    (r) => (r.query_text ?? '').toLowerCase().includes(needle) || r.query_hash.toLowerCase().includes(needle),
  )
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

/** `counted` is when the page says counting started (or the window's start): a row says its own only when later. */
function columns(
  db: Database,
  query: string,
  share: (ms: number | null) => number | null,
  listed: number,
  counted: number,
): Column<StatementRow>[] {
  const link = (r: StatementRow) =>
    `${dbHref(db, `queries/${encodeURIComponent(r.query_hash)}`)}${query ? `?${query}` : ''}`
  const common: Column<StatementRow>[] = [
    {
      key: 'text',
      label: 'Statement',
      cellClass: 'stmt-cell',
      render: (r) => (
        <a class="stmt-text mono" href={link(r)} title={escapeInvisible(r.query_text)}>
          <DbText text={r.query_text || r.query_hash} />
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
    {
      key: 'calls',
      label: 'Calls',
      num: true,
      sortBy: 'calls',
      render: (r) => {
        const since = countedSince(r.first_bucket, counted)
        return since === undefined ? (
          fmtNum(r.total_calls)
        ) : (
          <span title={`Counted since ${fmtClock(since)}: dbm counts from the agent's first cycle on`}>
            {fmtNum(r.total_calls)}
            <span class="muted small nowrap"> since {fmtClock(since)}</span>
          </span>
        )
      },
    },
    { key: 'mean', label: 'Mean', num: true, sortBy: 'mean_time', render: (r) => fmtMs(r.mean_time_ms) },
    { key: 'rows', label: 'Rows', num: true, sortBy: 'rows', render: (r) => fmtNum(r.total_rows) },
  ]
  if (db.engine === 'postgres') {
    return [
      ...common,
      {
        key: 'io',
        label: 'I/O time',
        num: true,
        sortBy: 'io_time',
        title:
          'Time spent reading and writing blocks: blk_read_time + blk_write_time (counted only with track_io_timing on)',
        render: (r) => fmtMs(ioTime(r)),
      },
      {
        key: 'hit',
        label: 'Cache hits',
        num: true,
        render: (r) => fmtRatio(r.cache_hit_ratio),
        title: 'shared_blks_hit / (hit + read)',
      },
      { key: 'read', label: 'Blocks read', num: true, render: (r) => fmtNum(r.shared_blks_read) },
      {
        key: 'temp',
        label: 'Temp written',
        num: true,
        render: (r) => fmtBytes(tempBytes(r.temp_blks_written)),
        title: 'Bytes written to temporary files over the window: temp_blks_written × 8 kB blocks',
      },
    ]
  }
  return [
    ...common,
    { key: 'p99', label: 'p99', num: true, render: (r) => fmtMs(r.p99_ms) },
    { key: 'bytes', label: 'Read', num: true, render: (r) => fmtBytes(r.read_bytes) },
    { key: 'memory', label: 'Memory', num: true, render: (r) => fmtBytes(r.memory_bytes) },
    {
      key: 'errors',
      label: 'Errors',
      num: true,
      render: (r) => <span class={r.errors > 0 ? 'sev-critical' : undefined}>{fmtNum(r.errors)}</span>,
    },
  ]
}

/** The notes box's title, by what its notes are about: missing statements, plans, or both. */
export function notesTitle(collectors: string[], statementFindings: number): string {
  const statements = statementFindings > 0 || collectors.includes('query_stats')
  const plans = collectors.includes('explain_plans')
  if (statements && plans) return 'Notes on statements and plans'
  return plans ? 'Notes on plans' : 'Why statements may be missing'
}

/** The agent's notes about statements and plans, and the doctor's finding that pg_stat_statements is missing. */
function StatementNotes({ db, doctor }: { db: Database; doctor: PageProps['doctor'] }) {
  const overview = useApi(apiPath(db, '/overview'))
  const notes = (overview.data?.agent_notes ?? []).filter((n) => STATEMENT_COLLECTORS.includes(n.collector))
  const findings = (doctor.data?.top_issues ?? []).filter(
    (f: Finding) => f.key.endsWith(':pg_stat_statements') || f.objects.includes('pg_stat_statements'),
  )
  const extra = findings.length
    ? findings.map((f) => (
        <li key={f.key}>
          The doctor: <DbText text={f.title} />. <a href={issuesHref(db, f.key)}>How to fix it</a>
        </li>
      ))
    : undefined
  return (
    <AgentNotes
      notes={notes}
      extra={extra}
      count={findings.length}
      title={notesTitle(
        notes.map((n) => n.collector),
        findings.length,
      )}
    />
  )
}

/** "Counted since 14:02": where the window starts before dbm began counting this database's statements. */
function CountedSince({ since, engine }: { since: number; engine: Database['engine'] }) {
  return (
    <p class="muted small" data-counted-since>
      Counted since {fmtClock(since)}: dbm counts statements from the agent's first cycle on, so these totals cover less
      than the time range
      {engine === 'postgres' ? ' (pg_stat_statements counts since its last reset)' : ''}.
    </p>
  )
}

export function StatementsPage({ db, query, setQuery, doctor }: PageProps) {
  const tw = useWindow(query)
  const sorts = sortsOf(db.engine)
  const sort = sorts.some(([v]) => v === query.get('sort')) ? query.get('sort')! : 'total_time'
  const limit = LIMITS.includes(query.get('limit') ?? '') ? query.get('limit')! : '25'
  const list = useApi(db.last_seen_at ? apiPath(db, `/queries?${tw.params}&sort_by=${sort}&limit=${limit}`) : null)
  // track_io_timing, where the agent reports it (database_stats' track_io_timing_on gauge).
  const stats = useApi(db.last_seen_at && db.engine === 'postgres' ? apiPath(db, '/database-stats') : null)
  // The filter is kept in the route (?q=) by replacing it: a reload or a link keeps it, typing adds no
  // history entry per key. The field has its own state so that typing never waits for the route.
  const routeFilter = query.get('q') ?? ''
  const [filter, setFilterState] = useState(routeFilter)
  const written = useRef(routeFilter)
  useEffect(() => {
    // Back, forward or a link changed the route's filter (not this field): show it.
    if (routeFilter !== written.current) setFilterState((written.current = routeFilter))
  }, [routeFilter])
  const setFilter = (value: string) => {
    written.current = value
    setFilterState(value)
    setQuery({ q: value || undefined }, { replace: true })
  }
  const filterInput = useRef<HTMLInputElement>(null)
  const clearFilter = () => {
    setFilter('')
    filterInput.current?.focus()
  }
  if (!db.last_seen_at) return <NoDataYet db={db} />
  const sortLabel = sorts.find(([v]) => v === sort)![1].toLowerCase()
  return (
    <section class="stack">
      <StatementNotes db={db} doctor={doctor} />
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
        <SelectField label="Sort by" value={sort} options={sorts} onChange={(v) => setQuery({ sort: v })} />
        <SelectField
          label="Show"
          value={limit}
          options={LIMITS.map((l) => [l, `${l} statements`])}
          onChange={(v) => setQuery({ limit: v })}
        />
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
                  {db.engine === 'postgres'
                    ? 'The query_stats collector needs the pg_stat_statements extension; '
                    : 'The query_stats collector reads system.query_log; '}
                  <code>dbm agent --check</code> tells whether it runs.
                </p>
              </Empty>
            )
          }
          const shown = filterStatements(rows, filter)
          // Counting started at the statements' first bucket, not before the agent first sent (the database's registration).
          const firsts = rows.map((r) => epochOf(r.first_bucket)).filter((t): t is number => t !== undefined)
          const since = countedSince(
            firsts.length > 0 ? Math.min(...firsts) : db.created_at,
            tw.bounds[0],
            db.created_at,
          )
          // Once the setting is read (or known not to be reported): no "probably" while it loads.
          const timing =
            db.engine === 'postgres' && (stats.data || stats.error)
              ? ioTimingOff(rows, stats.data?.track_io_timing_on)
              : undefined
          return (
            <>
              {since !== undefined && <CountedSince since={since} engine={db.engine} />}
              {timing && <IoTimingNote state={timing} />}
              {filter.trim() && (
                <p class="muted small" role="status">
                  {shown.length} of the {rows.length} statements listed match “<DbText text={filter.trim()} />
                  ”.
                </p>
              )}
              {shown.length === 0 ? (
                <Empty title={`No statement matches “${escapeInvisible(filter.trim())}”`}>
                  <p>
                    The filter searches the text of the {rows.length} statements listed (the top {limit} by {sortLabel}{' '}
                    in this time range). Show more statements or pick a longer time range to search further.
                  </p>
                  <button type="button" onClick={clearFilter}>
                    Clear the filter
                  </button>
                </Empty>
              ) : (
                <DataTable
                  caption={`Statements; “% of total time” is each statement's share of the total time of the ${rows.length} statements listed`}
                  columns={columns(db, listQuery(query), timeShare(rows), rows.length, since ?? tw.bounds[0])}
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
