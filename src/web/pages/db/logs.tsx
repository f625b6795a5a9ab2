// Logs: the server log's entries as the agent classified them (GET /log-events, newest first, a page at a
// time) and their exact counts per kind over the window (GET /log-events/summary) as a stacked histogram
// and a table of kinds that filters the list. Each entry opens to its fields, detail and statement, with
// links to where it leads: a lock wait to the lock chains at that moment, an autovacuum run to its table,
// a slow statement to its statement page. Everything from the log is shown as text (DbText).
import type { Static } from '@sinclair/typebox'
import { Fragment } from 'preact'
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks'
import type {
  LogEventEntry as LogEventEntrySchema,
  LogEventSummary as LogEventSummarySchema,
} from '../../../shared/api/log-events.ts'
import { LOG_CATEGORIES, LOG_KINDS } from '../../../shared/log-kinds.ts'
import { get } from '../../api.ts'
import { Chart, type ChartSeries } from '../../components/chart.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import {
  Field,
  NoDataYet,
  SelectField,
  TimeRangePicker,
  apiPath,
  dbHref,
  fmtDuration,
  useEvery,
  useWindow,
  withWindow,
} from './common.tsx'
import type { PageProps } from './types.ts'

type LogEventEntry = Static<typeof LogEventEntrySchema>
type LogEventSummary = Static<typeof LogEventSummarySchema>

const MAX_SERIES = 6
const PAGE = 100

const CATEGORY_LABELS: Record<string, string> = {
  errors: 'Errors',
  connections: 'Connections and logins',
  locks: 'Locks and deadlocks',
  queries: 'Statements',
  vacuum: 'Vacuum and analyze',
  checkpoints: 'Checkpoints',
  resources: 'Memory, disk and I/O',
  archive: 'WAL archiving',
  replication: 'Replication',
  server: 'Starts, shutdowns, crashes',
  other: 'Other',
}

const SEVERITIES: [string, string][] = [
  ['', 'Any severity'],
  ['warning', 'Warnings and worse'],
  ['error', 'Errors and worse'],
  ['fatal', 'Fatal and panic'],
]

const kindLabel = (kind: string) =>
  (LOG_KINDS as Record<string, { label: string }>)[kind]?.label ?? kind.replaceAll('_', ' ')

const SEVERITY_TONE: Record<string, string> = {
  panic: 'critical',
  fatal: 'critical',
  error: 'critical',
  warning: 'warning',
}

/** Counts per bucket as stacked series: the most frequent kinds, the rest as "other kinds". */
function histogram(summary: LogEventSummary): { times: number[]; series: ChartSeries[] } {
  const ranked = summary.kinds.map((k) => k.kind)
  const shown = ranked.length > MAX_SERIES ? ranked.slice(0, MAX_SERIES - 1) : ranked
  const labels = ranked.length > MAX_SERIES ? [...shown.map(kindLabel), 'other kinds'] : shown.map(kindLabel)
  const times = summary.buckets.map((b) => Date.parse(b.ts))
  const values = labels.map(() => times.map(() => 0))
  summary.buckets.forEach((b, i) => {
    for (const [kind, n] of Object.entries(b.counts)) {
      const at = shown.indexOf(kind)
      values[at === -1 ? labels.length - 1 : at]![i]! += n
    }
  })
  return { times, series: labels.map((label, i) => ({ label, values: values[i]! })) }
}

/** A field's value as text, with its unit where the name says it. */
function fieldText(name: string, value: unknown): string {
  if (value === null || value === undefined) return '—'
  if (Array.isArray(value)) return value.map((v) => String(v)).join(', ')
  if (typeof value === 'number') {
    if (name.endsWith('_ms')) return fmtDuration(value)
    if (name.endsWith('_bytes')) return fmtBytes(value)
    return fmtNum(value)
  }
  return String(value)
}

const LOCK_KINDS = new Set(['lock_wait', 'lock_acquired', 'deadlock'])

/** How far after a lock wait's entry the session snapshot showing it is looked for. */
const SNAPSHOT_AFTER_MS = 10 * 60_000

/**
 * The `at` that opens the Locks page on the snapshot showing an entry's wait: the page shows the last
 * snapshot at or before `at` (history.tsx snapshotIndex). A lock wait is logged after deadlock_timeout and
 * goes on, so the first snapshot at or after the entry shows it: its own time. A lock acquired after a
 * wait, or a deadlock, is logged as the wait ends: the last snapshot before it, the entry's own time (as
 * for a lock wait with no snapshot in the SNAPSHOT_AFTER_MS after it).
 */
export function lockMomentAt(e: Pick<LogEventEntry, 'kind' | 'ts'>, snapshots: readonly { at: number }[]): number {
  const ts = Date.parse(e.ts)
  if (e.kind !== 'lock_wait') return ts
  return snapshots.find((s) => s.at >= ts && s.at <= ts + SNAPSHOT_AFTER_MS)?.at ?? ts
}

/**
 * A lock entry's moment on the Locks page, and the name of the relation it names by OID (the log has
 * only `relation 16456 of database 16384`): the waiting session's lock in that snapshot names it.
 */
function LockMoment({ db, e }: { db: PageProps['db']; e: LogEventEntry }) {
  const ts = Date.parse(e.ts)
  const history = useApi(
    e.kind !== 'lock_wait'
      ? null
      : apiPath(
          db,
          `/active/history?since=${encodeURIComponent(new Date(ts).toISOString())}&until=${encodeURIComponent(new Date(ts + SNAPSHOT_AFTER_MS).toISOString())}&limit=1000`,
        ),
  )
  const at = history.data ? lockMomentAt(e, history.data.snapshots) : ts
  const found = e.kind === 'lock_wait' && history.data?.snapshots.some((s) => s.at === at)
  const locks = useApi(
    found && e.pid !== null && typeof e.fields.relation === 'number' ? apiPath(db, `/locks?at=${at}&limit=500`) : null,
  )
  const name = locks.data?.find((l) => l.pid === e.pid && !l.granted && l.relation_name)?.relation_name ?? null
  // The link once the snapshots are known (or could not be read: the entry's own time).
  if (e.kind === 'lock_wait' && !history.data && !history.error) return <span class="muted">Locks at that moment…</span>
  return (
    <>
      <a href={`${dbHref(db, 'locks')}?at=${at}`} data-lock-moment={at}>
        Locks at that moment
      </a>
      {name && (
        <span data-relation-name>
          {' '}
          (relation {String(e.fields.relation)} is <DbText text={name} />, as the session snapshot of{' '}
          {fmtTime(new Date(at).toISOString())} shows)
        </span>
      )}
    </>
  )
}

/** Where an entry leads on the dashboard, when anywhere (the Locks page: LockMoment). */
function entryLinks(db: PageProps['db'], e: LogEventEntry, query: URLSearchParams): { href: string; label: string }[] {
  const links: { href: string; label: string }[] = []
  if (e.query_hash)
    links.push({
      href: withWindow(dbHref(db, `queries/${encodeURIComponent(e.query_hash)}`), query),
      label: 'Statement',
    })
  const table = e.fields.table
  if (typeof table === 'string' && /^(autovacuum|autoanalyze|autovacuum_cancelled)$/.test(e.kind)) {
    // `db.schema.table` as PostgreSQL logs it: the last two parts name the table.
    const parts = table.split('.')
    if (parts.length >= 2) {
      const [schema, name] = parts.slice(-2) as [string, string]
      links.push({
        href: withWindow(dbHref(db, `tables/${encodeURIComponent(`${schema}/${name}`)}`), query),
        label: 'Table',
      })
    }
  }
  return links
}

function EntryRow({ db, e, query }: { db: PageProps['db']; e: LogEventEntry; query: URLSearchParams }) {
  const [open, setOpen] = useState(false)
  const fields = Object.entries(e.fields)
  const who = [
    e.user && `user ${e.user}`,
    e.database && `database ${e.database}`,
    e.client && `from ${e.client}`,
    e.application && `app ${e.application}`,
    e.pid !== null && `pid ${e.pid}`,
  ]
    .filter(Boolean)
    .join(' · ')
  const links = entryLinks(db, e, query)
  const lockMoment = LOCK_KINDS.has(e.kind) && db.engine === 'postgres'
  return (
    <tr data-kind={e.kind} data-log-entry={e.id}>
      <td class="nowrap">
        <time dateTime={e.ts}>{fmtTime(e.ts)}</time>
      </td>
      <td class="nowrap">
        <span
          class={`badge badge-${SEVERITY_TONE[e.importance] ?? 'muted'}`}
          title={
            e.importance !== e.severity ? `logged at ${e.severity.toUpperCase()}; counts as ${e.importance}` : undefined
          }
        >
          {e.importance}
        </span>
        {e.importance !== e.severity && <span class="muted small"> (logged as {e.severity})</span>}{' '}
        <span class="badge badge-muted">{kindLabel(e.kind)}</span>
        {e.count > 1 && <span class="muted small"> ×{fmtNum(e.count)}</span>}
      </td>
      <td>
        <button type="button" class="link log-message" aria-expanded={open} onClick={() => setOpen(!open)}>
          {e.sqlstate && (
            <code class="muted">
              <DbText text={e.sqlstate} />{' '}
            </code>
          )}
          <DbText text={e.message} />
        </button>
        {who && (
          <div class="muted small">
            <DbText text={who} />
          </div>
        )}
        {open && (
          <div class="log-entry-detail">
            {fields.length > 0 && (
              <dl class="kv log-fields">
                {fields.map(([name, value]) => (
                  <Fragment key={name}>
                    <dt>{name.replaceAll('_', ' ')}</dt>
                    <dd>
                      <DbText text={fieldText(name, value)} />
                    </dd>
                  </Fragment>
                ))}
              </dl>
            )}
            {e.detail && (
              <pre class="block log-detail">
                <DbText text={e.detail} />
              </pre>
            )}
            {e.statement && (
              <pre class="block log-statement">
                <DbText text={e.statement} />
              </pre>
            )}
            {(links.length > 0 || lockMoment) && (
              <p class="small">
                {links.map((l, i) => (
                  <Fragment key={l.label}>
                    {i > 0 && ' · '}
                    <a href={l.href}>{l.label}</a>
                  </Fragment>
                ))}
                {lockMoment && (
                  <>
                    {links.length > 0 && ' · '}
                    <LockMoment db={db} e={e} />
                  </>
                )}
              </p>
            )}
          </div>
        )}
      </td>
    </tr>
  )
}

export function LogsPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const kind = query.get('kind') ?? ''
  const category = query.get('category') ?? ''
  const severity = query.get('severity') ?? ''
  const q = query.get('q') ?? ''
  const [text, setText] = useState(q)
  useEffect(() => setText(q), [q])
  const filters = [
    kind && `kind=${encodeURIComponent(kind)}`,
    category && `category=${encodeURIComponent(category)}`,
    severity && `severity=${encodeURIComponent(severity)}`,
    q && `q=${encodeURIComponent(q)}`,
  ]
    .filter(Boolean)
    .join('&')
  // The counts take the same kind, category and severity filters as the list (not q: counts keep no text).
  const countFilters = filters.replace(/(^|&)q=[^&]*/, '').replace(/^&/, '')
  const summary = useApi(
    db.last_seen_at ? apiPath(db, `/log-events/summary?${tw.params}${countFilters ? `&${countFilters}` : ''}`) : null,
  )
  const filteredCounts = [
    kind && kindLabel(kind),
    category && (CATEGORY_LABELS[category] ?? category),
    severity && (SEVERITIES.find(([v]) => v === severity)?.[1] ?? severity).toLowerCase(),
  ].filter(Boolean)
  const first = useApi(
    db.last_seen_at ? apiPath(db, `/log-events?${tw.params}&limit=${PAGE}${filters ? `&${filters}` : ''}`) : null,
  )
  const [older, setOlder] = useState<{
    entries: LogEventEntry[]
    cursor: string | null
    loading: boolean
    error?: string
  }>({ entries: [], cursor: null, loading: false })
  useEffect(() => setOlder({ entries: [], cursor: first.data?.next_cursor ?? null, loading: false }), [first.data])
  useEvery(
    60_000,
    useCallback(() => {
      if (tw.range !== 'custom') tw.refresh()
    }, [tw.range]),
  )
  const chart = useMemo(
    () => (summary.data && summary.data.buckets.length > 0 ? histogram(summary.data) : undefined),
    [summary.data],
  )
  const loadOlder = () => {
    if (!older.cursor) return
    setOlder((o) => ({ ...o, loading: true }))
    get(
      apiPath(
        db,
        `/log-events?${tw.params}&limit=${PAGE}${filters ? `&${filters}` : ''}&cursor=${encodeURIComponent(older.cursor)}`,
      ),
    ).then(
      (page) =>
        setOlder((o) => ({ entries: [...o.entries, ...page.entries], cursor: page.next_cursor, loading: false })),
      (e: Error) => setOlder((o) => ({ ...o, loading: false, error: e.message })),
    )
  }
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section class="stack">
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
        <SelectField
          label="Category"
          value={category}
          options={[
            ['', 'All categories'],
            ...LOG_CATEGORIES.map((c): [string, string] => [c, CATEGORY_LABELS[c] ?? c]),
          ]}
          onChange={(v) => setQuery({ category: v || undefined, kind: undefined })}
        />
        <SelectField
          label="Severity"
          value={severity}
          options={SEVERITIES}
          onChange={(v) => setQuery({ severity: v || undefined })}
        />
        <div class="filter-field">
          <Field label="Search messages">
            {(id) => (
              <form
                onSubmit={(e) => {
                  e.preventDefault()
                  setQuery({ q: text.trim() || undefined })
                }}
              >
                <input
                  id={id}
                  type="search"
                  value={text}
                  placeholder="e.g. duplicate key"
                  autoComplete="off"
                  spellcheck={false}
                  onInput={(e) => setText((e.target as HTMLInputElement).value)}
                />
              </form>
            )}
          </Field>
        </div>
      </div>
      <Async loaded={summary}>
        {(s) =>
          s.total === 0 && filteredCounts.length > 0 ? (
            <Empty title="No log entries of this filter in this time range">
              <p>
                Counted with the filter: {filteredCounts.join(', ')}.{' '}
                <a
                  href="#"
                  onClick={(e) => {
                    e.preventDefault()
                    setQuery({ kind: undefined, category: undefined, severity: undefined })
                  }}
                >
                  Clear these filters
                </a>
              </p>
            </Empty>
          ) : s.total === 0 ? (
            <Empty title="No log entries in this time range">
              <p>
                The agent reads the server log when it can:{' '}
                {db.engine === 'postgres' ? (
                  <>
                    from the files in <code>pg_log_dir</code> when it runs beside the server, or over SQL with{' '}
                    <code>pg_read_binary_file</code> when its role is granted it (docs/server-log.md).{' '}
                    <code>dbm agent --check</code> says which, and what the server's <code>log_line_prefix</code> lacks.
                  </>
                ) : (
                  <>
                    from <code>system.errors</code>, <code>system.crash_log</code> and, when enabled,{' '}
                    <code>system.text_log</code>.
                  </>
                )}{' '}
                Pick a longer time range.
              </p>
            </Empty>
          ) : (
            <>
              {filteredCounts.length > 0 && (
                <p class="small muted log-counts-filtered" data-filtered-counts>
                  Counts of the filtered view ({filteredCounts.join(', ')})
                  {q ? '; the search text filters the entries below only' : ''}.
                </p>
              )}
              {chart && (
                <Chart
                  name="log-events"
                  title="Log entries by kind"
                  times={chart.times}
                  series={chart.series}
                  stacked
                  stepMs={s.bucket_seconds * 1000}
                  range={tw.bounds}
                  perBucket
                  partialStarts="none"
                  sparse
                />
              )}
              <div class="table-wrap">
                <table class="compact log-kinds">
                  <caption class="sr-only">Log entries by kind in the time range</caption>
                  <thead>
                    <tr>
                      <th scope="col">Kind</th>
                      <th scope="col">Category</th>
                      <th scope="col" class="num">
                        Entries
                      </th>
                      <th scope="col">By severity</th>
                    </tr>
                  </thead>
                  <tbody>
                    {s.kinds.map((k) => (
                      <tr key={k.kind} data-kind={k.kind} aria-current={k.kind === kind ? 'true' : undefined}>
                        <td>
                          <a
                            href="#"
                            onClick={(e) => {
                              e.preventDefault()
                              setQuery({ kind: k.kind === kind ? undefined : k.kind, category: undefined })
                            }}
                          >
                            {k.label}
                          </a>
                        </td>
                        <td>{CATEGORY_LABELS[k.category] ?? k.category}</td>
                        <td class="num">{fmtNum(k.total)}</td>
                        <td class="small muted">
                          {Object.entries(k.by_severity)
                            .map(([sev, n]) => `${sev} ${fmtNum(n)}`)
                            .join(' · ')}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </>
          )
        }
      </Async>
      {kind && (
        <p class="small">
          Showing <strong>{kindLabel(kind)}</strong> only.{' '}
          <a
            href="#"
            onClick={(e) => {
              e.preventDefault()
              setQuery({ kind: undefined })
            }}
          >
            Show every kind
          </a>
        </p>
      )}
      <Async loaded={first}>
        {(list) => {
          const entries = [...list.entries, ...older.entries]
          if (entries.length === 0)
            return summary.data && summary.data.total > 0 ? <Empty title="No entries match these filters" /> : null
          return (
            <>
              {list.dropped > 0 && (
                <p class="small muted">
                  {fmtNum(list.dropped)} entries of this range were counted by the agent but not sent whole (too many in
                  one cycle): the counts above include them.
                </p>
              )}
              <div class="table-wrap">
                <table class="compact log-table">
                  <caption class="sr-only">Log entries, newest first</caption>
                  <thead>
                    <tr>
                      <th scope="col">Time</th>
                      <th scope="col">Kind</th>
                      <th scope="col">Message</th>
                    </tr>
                  </thead>
                  <tbody>
                    {entries.map((e) => (
                      <EntryRow key={e.id} db={db} e={e} query={query} />
                    ))}
                  </tbody>
                </table>
              </div>
              {older.cursor && (
                <p>
                  <button type="button" onClick={loadOlder} disabled={older.loading}>
                    {older.loading ? 'Loading…' : 'Older entries'}
                  </button>
                  {older.error && <span class="error small"> {older.error}</span>}
                </p>
              )}
            </>
          )
        }}
      </Async>
    </section>
  )
}
