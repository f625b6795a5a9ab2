// Tables and indexes (PostgreSQL): the latest statistics, sorted by the server (sort_by) with a limit;
// indexes also as the unused-index view (never scanned, neither primary nor unique, over 1 MB). Each
// row links to the object's page (object-detail.tsx), keeping the time window. A table's last vacuum and
// analyze are the later of the manual and the automatic one, the other in the cell's title.
import type { Static } from '@sinclair/typebox'
import type { IndexEntry, TableEntry } from '../../../shared/api/objects.ts'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, ago, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { NoDataYet, SelectField, apiPath, dbHref, fmtRatio, withWindow } from './common.tsx'
import type { Database, PageProps } from './types.ts'
import { SIZE_HINTS, SIZE_LABELS, SIZE_PARTS } from './table-size.ts'

/** What pg_stat_user_tables.seq_scan counts, for the tables list and a table's page. */
export const SEQ_SCAN_TITLE =
  'pg_stat_user_tables.seq_scan: PostgreSQL counts a scan in each process that begins one, so a parallel scan counts once for the leader and once per worker'

/** How many times the table's rows were read by sequential scans (seq_tup_read / n_live_tup), parallel or not; null without live rows. */
export const fullReads = (t: Pick<TableRow, 'seq_tup_read' | 'n_live_tup'>) =>
  t.seq_tup_read !== null && t.n_live_tup !== null && t.n_live_tup > 0
    ? Math.round(t.seq_tup_read / t.n_live_tup)
    : null

/** A table's latest entry as GET /tables answers it. */
export type TableRow = Static<typeof TableEntry>

/** An index's latest entry as GET /indexes answers it. */
export type IndexRow = Static<typeof IndexEntry>

/** The route item of a schema-qualified object: `schema/name` in one segment. */
export const objectItem = (schema: string, name: string) => encodeURIComponent(`${schema}/${name}`)

const LIMITS = ['50', '100', '500']

function LimitSelect({ value, setQuery }: { value: string; setQuery: PageProps['setQuery'] }) {
  return (
    <SelectField
      label="Show"
      value={value}
      options={LIMITS.map((l) => [l, l])}
      onChange={(v) => setQuery({ limit: v })}
    />
  )
}

const epoch = (t: string | number | null | undefined) =>
  t === null || t === undefined ? null : typeof t === 'number' ? t : Date.parse(t)

/** The later of a manual and an automatic run (RFC 3339 or epoch ms), saying which; undefined when neither ran. */
export function latestRun(
  manual: string | number | null,
  auto: string | number | null,
): { at: string | number; kind: 'manual' | 'auto' } | undefined {
  const m = epoch(manual)
  const a = epoch(auto)
  if ((m === null || Number.isNaN(m)) && (a === null || Number.isNaN(a))) return undefined
  if (a === null || Number.isNaN(a) || (m !== null && m >= a)) return { at: manual!, kind: 'manual' }
  return { at: auto!, kind: 'auto' }
}

/** "3 h ago (auto)", with both runs' times in the title; "never" when neither ran. */
function LastRun({
  what,
  manual,
  auto,
}: {
  what: string
  manual: string | number | null
  auto: string | number | null
}) {
  const last = latestRun(manual, auto)
  const title = `manual ${what}: ${manual === null ? 'never' : fmtTime(manual)}; auto${what}: ${auto === null ? 'never' : fmtTime(auto)}`
  if (!last) {
    return (
      <span class="muted" title={title}>
        never
      </span>
    )
  }
  return (
    <span title={title}>
      {ago(last.at)} <span class="muted small">{last.kind}</span>
    </span>
  )
}

const deadTone = (r: number | null) =>
  r === null ? undefined : r > 0.5 ? 'sev-critical' : r > 0.2 ? 'sev-warning' : undefined

function tableColumns(db: Database, query: URLSearchParams): Column<TableRow>[] {
  return [
    {
      key: 'name',
      label: 'Table',
      render: (t) => (
        <a href={withWindow(dbHref(db, `tables/${objectItem(t.schema_name, t.table_name)}`), query)}>
          <span class="muted">
            <DbText text={t.schema_name} />.
          </span>
          <DbText text={t.table_name} />
        </a>
      ),
    },
    ...SIZE_PARTS.map(
      ({ part, field, sort }): Column<TableRow> => ({
        key: sort,
        label: SIZE_LABELS[part],
        title: SIZE_HINTS[part],
        num: true,
        sortBy: sort,
        render: (t) => fmtBytes(t[field]),
      }),
    ),
    { key: 'live', label: 'Live rows', num: true, sortBy: 'live_tuples', render: (t) => fmtNum(t.n_live_tup) },
    {
      key: 'dead',
      label: 'Dead rows',
      num: true,
      sortBy: 'dead_tuples',
      render: (t) => (
        <span class={deadTone(t.dead_tuple_ratio)}>
          {fmtNum(t.n_dead_tup)} <span class="small">({fmtRatio(t.dead_tuple_ratio)})</span>
        </span>
      ),
    },
    {
      key: 'seq',
      label: 'Seq scans',
      num: true,
      sortBy: 'seq_scans',
      title: SEQ_SCAN_TITLE,
      render: (t) => fmtNum(t.seq_scan),
    },
    { key: 'idx', label: 'Index scans', num: true, render: (t) => fmtNum(t.idx_scan) },
    {
      key: 'vacuum',
      label: 'Last vacuum',
      title: 'The later of the last manual VACUUM and the last autovacuum',
      render: (t) => (
        <>
          <LastRun what="vacuum" manual={t.last_vacuum} auto={t.last_autovacuum} />
          {t.autovacuum_enabled === false && (
            <>
              {' '}
              <span class="badge badge-warning" title="autovacuum_enabled = off in the table's storage parameters">
                autovacuum off
              </span>
            </>
          )}
        </>
      ),
    },
    {
      key: 'analyze',
      label: 'Last analyze',
      title: 'The later of the last manual ANALYZE and the last autoanalyze',
      render: (t) => <LastRun what="analyze" manual={t.last_analyze} auto={t.last_autoanalyze} />,
    },
    {
      key: 'pk',
      label: 'Primary key',
      render: (t) =>
        t.has_primary_key === false ? <span class="badge badge-warning">none</span> : t.has_primary_key ? 'yes' : '—',
    },
  ]
}

export function TablesPage({ db, query, setQuery }: PageProps) {
  const sort = query.get('sort') ?? 'total_size'
  const limit = LIMITS.includes(query.get('limit') ?? '') ? query.get('limit')! : '50'
  const tables = useApi(
    db.last_seen_at ? apiPath(db, `/tables?sort_by=${encodeURIComponent(sort)}&limit=${limit}`) : null,
  )
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <div class="toolbar">
        <SelectField
          label="Sort by"
          value={sort}
          options={[
            ...SIZE_PARTS.map(({ part, sort }): [string, string] => [sort, `Size: ${SIZE_LABELS[part]}`]),
            ['size', 'Size: pg_table_size'],
            ['live_tuples', 'Live rows'],
            ['dead_tuples', 'Dead rows'],
            ['seq_scans', 'Sequential scans'],
          ]}
          onChange={(v) => setQuery({ sort: v })}
        />
        <LimitSelect value={limit} setQuery={setQuery} />
      </div>
      <Async loaded={tables}>
        {(rows) =>
          rows.length === 0 ? (
            <Empty title="No tables yet">
              <p>
                The tables collector sends pg_stat_user_tables of the connected database; check that it is not disabled
                in Settings.
              </p>
            </Empty>
          ) : (
            <DataTable
              caption="Tables"
              columns={tableColumns(db, query)}
              rows={rows}
              rowKey={(t) => `${t.schema_name}.${t.table_name}`}
              serverSort={{ value: sort, onChange: (s) => setQuery({ sort: s }) }}
              compact
            />
          )
        }
      </Async>
    </section>
  )
}

function indexColumns(db: Database, query: URLSearchParams): Column<IndexRow>[] {
  return [
    {
      key: 'name',
      label: 'Index',
      render: (i) => (
        <a href={withWindow(dbHref(db, `indexes/${objectItem(i.schema_name, i.index_name)}`), query)}>
          <span class="muted">
            <DbText text={i.schema_name} />.
          </span>
          <DbText text={i.index_name} />
        </a>
      ),
    },
    { key: 'table', label: 'Table', render: (i) => i.table_name },
    { key: 'size', label: 'Size', num: true, sortBy: 'size', render: (i) => fmtBytes(i.size_bytes) },
    {
      key: 'scans',
      label: 'Scans',
      num: true,
      sortBy: 'scans',
      render: (i) => <span class={i.idx_scan === 0 ? 'sev-warning' : undefined}>{fmtNum(i.idx_scan)}</span>,
    },
    { key: 'read', label: 'Tuples read', num: true, sortBy: 'tuples_read', render: (i) => fmtNum(i.idx_tup_read) },
    { key: 'fetch', label: 'Tuples fetched', num: true, render: (i) => fmtNum(i.idx_tup_fetch) },
    {
      key: 'kind',
      label: 'Kind',
      render: (i) => (
        <span class="row">
          {i.is_primary && <span class="badge badge-info">primary</span>}
          {i.is_unique && !i.is_primary && <span class="badge badge-muted">unique</span>}
          {!i.is_valid && <span class="badge badge-critical">invalid</span>}
        </span>
      ),
    },
    {
      key: 'def',
      label: 'Definition',
      render: (i) => (
        <span class="mono small index-def">
          <DbText text={i.index_def} />
        </span>
      ),
    },
  ]
}

export function IndexesPage({ db, query, setQuery }: PageProps) {
  const sort = query.get('sort') ?? 'size'
  const limit = LIMITS.includes(query.get('limit') ?? '') ? query.get('limit')! : '50'
  const unused = query.get('view') === 'unused'
  const indexes = useApi(
    db.last_seen_at
      ? apiPath(db, `/indexes${unused ? '/unused' : ''}?sort_by=${encodeURIComponent(sort)}&limit=${limit}`)
      : null,
  )
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <div class="toolbar">
        <div class="segmented" role="group" aria-label="Which indexes">
          <button type="button" aria-pressed={!unused} onClick={() => setQuery({ view: undefined })}>
            All indexes
          </button>
          <button type="button" aria-pressed={unused} onClick={() => setQuery({ view: 'unused' })}>
            Unused
          </button>
        </div>
        <SelectField
          label="Sort by"
          value={sort}
          options={[
            ['size', 'Size'],
            ['scans', 'Scans'],
            ['tuples_read', 'Tuples read'],
          ]}
          onChange={(v) => setQuery({ sort: v })}
        />
        <LimitSelect value={limit} setQuery={setQuery} />
      </div>
      {unused && (
        <p class="muted small">
          Never scanned since the statistics were reset, neither primary nor unique, larger than 1 MB: candidates to
          drop.
        </p>
      )}
      <Async loaded={indexes}>
        {(rows) =>
          rows.length === 0 ? (
            unused ? (
              <Empty title="No unused indexes">
                <p>Every index larger than 1 MB has been scanned.</p>
              </Empty>
            ) : (
              <Empty title="No indexes yet">
                <p>
                  The indexes collector sends pg_stat_user_indexes of the connected database; check that it is not
                  disabled in Settings.
                </p>
              </Empty>
            )
          ) : (
            <DataTable
              caption="Indexes"
              columns={indexColumns(db, query)}
              rows={rows}
              rowKey={(i) => `${i.schema_name}.${i.index_name}`}
              serverSort={{ value: sort, onChange: (s) => setQuery({ sort: s }) }}
              compact
            />
          )
        }
      </Async>
    </section>
  )
}
