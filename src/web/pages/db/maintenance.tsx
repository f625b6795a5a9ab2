// Maintenance (PostgreSQL): what runs now (VACUUM, ANALYZE, CREATE INDEX, CLUSTER with their phase and
// progress, /progress), the estimated bloat of tables and indexes (/bloat: a statistics-based estimate,
// said so on the page), and constraints added NOT VALID with the command that validates each
// (/constraints/invalid). Progress is reloaded every 15 s; a command that waits names what it waits on
// (its wait event, and the session holding it: pid, application, state and for how long, its statement).
import { useCallback } from 'preact/hooks'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Async, Code, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { Meter, NoDataYet, apiPath, fmtDuration, fmtRatio, useEvery } from './common.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type {
  Bloat as BloatSchema,
  InvalidConstraints as InvalidConstraintsSchema,
  Progress as ProgressSchema,
} from '../../../shared/api/pg-checks.ts'

type Progress = Static<typeof ProgressSchema>
type Operation = Progress['operations'][number]
type Bloat = Static<typeof BloatSchema>
type Estimate = Bloat['entries'][number]
type InvalidConstraints = Static<typeof InvalidConstraintsSchema>

const qualified = (schema: string | null, name: string | null) =>
  name === null ? '—' : schema === null ? name : `${schema}.${name}`

const OPERATIONS: Column<Operation>[] = [
  { key: 'pid', label: 'PID', num: true, render: (o) => o.pid, sort: (o) => o.pid },
  { key: 'command', label: 'Command', render: (o) => o.command, sort: (o) => o.command },
  { key: 'table', label: 'Table', render: (o) => qualified(o.schema_name, o.table_name), sort: (o) => o.table_name },
  { key: 'index', label: 'Index', render: (o) => o.index_name ?? '—', sort: (o) => o.index_name },
  { key: 'phase', label: 'Phase', render: (o) => o.phase, sort: (o) => o.phase },
  {
    key: 'progress',
    label: 'Progress',
    render: (o) =>
      o.percent === null ? (
        <span class="muted">no counter in this phase</span>
      ) : (
        <>
          <Meter pct={o.percent} warn={101} crit={101} label={`${o.command} progress`} />
          <span class="muted small">
            {fmtNum(o.done)} of {fmtNum(o.total)} <DbText text={o.unit} />
          </span>
        </>
      ),
    sort: (o) => o.percent,
  },
  {
    key: 'running',
    label: 'Running for',
    num: true,
    render: (o) => (o.started_at ? fmtDuration(Date.now() - Date.parse(o.started_at)) : '—'),
    sort: (o) => o.started_at,
  },
  { key: 'waits', label: 'Waits on', render: (o) => <WaitsOn o={o} />, sort: (o) => o.blocker?.pid ?? null },
]

/** "idle in transaction for 11 min", "active for 3 s": the blocker's state (the database's words) and how long it has been in it. */
function BlockerState({ b }: { b: NonNullable<Operation['blocker']> }) {
  const state = b.state === null ? 'state not visible to the agent' : <DbText text={b.state} />
  return b.state_age_ms === null ? (
    state
  ) : (
    <>
      {state} for {fmtDuration(b.state_age_ms)}
    </>
  )
}

/**
 * What a running command waits on: the session that holds it, e.g. "pid 4711 (billing, idle in transaction
 * for 11 min) holds it", with the lockers count of an index build's waiting phase and the backend's wait event.
 */
function WaitsOn({ o }: { o: Operation }) {
  const b = o.blocker
  const lockers =
    o.lockers_total !== null && o.lockers_total > 0
      ? `${fmtNum(o.lockers_done)} of ${fmtNum(o.lockers_total)} lockers waited for`
      : null
  // the wait event's names are the database's: shown through DbText like every other text of it
  const event =
    o.wait_event === null ? null : (
      <>
        {o.wait_event_type ? (
          <>
            <DbText text={o.wait_event_type} />:{' '}
          </>
        ) : null}
        <DbText text={o.wait_event} />
      </>
    )
  if (!b && !event) return <span class="muted">not waiting</span>
  return (
    <div class="waits-on">
      {b ? (
        <div>
          pid <strong>{b.pid}</strong> (<DbText text={b.application_name || 'no application name'} />,{' '}
          <BlockerState b={b} />) holds it
          {b.transaction_age_ms !== null ? (
            <span class="muted small"> · its transaction is {fmtDuration(b.transaction_age_ms)} old</span>
          ) : null}
        </div>
      ) : null}
      {b?.query_text ? (
        <div class="muted small mono clamp" title={escapeInvisible(b.query_text)}>
          <DbText text={b.query_text} />
        </div>
      ) : null}
      <div class="muted small">
        {event ? <>waits on {event}</> : null}
        {event && lockers ? ' · ' : null}
        {lockers}
        {b?.user ? (
          <>
            {event || lockers ? ' · ' : ''}user <DbText text={b.user} />
          </>
        ) : null}
      </div>
    </div>
  )
}

const BLOAT: Column<Estimate>[] = [
  {
    key: 'name',
    label: 'Relation',
    render: (b) => qualified(b.schema_name, b.index_name ?? b.table_name),
    sort: (b) => b.index_name ?? b.table_name,
  },
  {
    key: 'kind',
    label: 'Kind',
    render: (b) => (b.kind === 'index' ? `index on ${b.table_name}` : 'table'),
    sort: (b) => b.kind,
  },
  {
    key: 'size',
    label: 'Pages at last ANALYZE',
    title:
      "pg_class.relpages × 8 kB of the heap (or index) alone, as of its last VACUUM, ANALYZE or build: the estimate's basis, not the Tables page's size (pg_table_size, sampled now)",
    num: true,
    render: (b) => fmtBytes(b.size_bytes),
    sort: (b) => b.size_bytes,
  },
  {
    key: 'bloat',
    label: 'Estimated bloat',
    num: true,
    render: (b) => fmtBytes(b.bloat_bytes),
    sort: (b) => b.bloat_bytes,
  },
  { key: 'ratio', label: 'Share', num: true, render: (b) => fmtRatio(b.bloat_ratio, 0), sort: (b) => b.bloat_ratio },
  { key: 'rows', label: 'Live rows', num: true, render: (b) => fmtNum(b.live_rows), sort: (b) => b.live_rows },
  { key: 'ff', label: 'Fillfactor', num: true, render: (b) => b.fillfactor, sort: (b) => b.fillfactor },
]

function Progress({ db }: { db: PageProps['db'] }) {
  const found = useApi(apiPath(db, '/progress'))
  const reload = useCallback(() => found.reload(), [found.reload])
  useEvery(15_000, reload)
  return (
    <Async loaded={found}>
      {(p) =>
        p.operations.length === 0 ? (
          <p class="muted">
            {p.collected_at === null
              ? 'No progress reported yet (an agent older than this server does not send it).'
              : `Nothing running at ${fmtTime(p.collected_at)}.`}
          </p>
        ) : (
          <>
            <DataTable
              caption="Maintenance running now"
              columns={OPERATIONS}
              rows={p.operations}
              rowKey={(o) => `${o.pid}-${o.command}`}
              compact
            />
            <p class="muted small">From pg_stat_progress_* at {fmtTime(p.collected_at)}.</p>
          </>
        )
      }
    </Async>
  )
}

function Bloat({ db }: { db: PageProps['db'] }) {
  const found = useApi(apiPath(db, '/bloat?limit=100'))
  return (
    <Async loaded={found}>
      {(b) => (
        <>
          <p class="muted small">
            <span class="badge badge-muted">estimate</span> {b.method}
            {b.estimated_at ? ` Estimated ${fmtTime(b.estimated_at)}.` : ''}
          </p>
          {b.entries.length === 0 ? (
            <p class="muted">
              {b.estimated_at === null
                ? 'No estimate yet (an agent older than this server does not send it).'
                : 'No table or index with estimated bloat.'}
            </p>
          ) : (
            <DataTable
              caption="Estimated bloat of tables and indexes"
              columns={BLOAT}
              rows={b.entries}
              rowKey={(e) => `${e.kind}|${e.schema_name}|${e.table_name}|${e.index_name}`}
              initialSort={{ key: 'bloat' }}
              rowClass={(e) => (e.bloat_ratio >= 0.5 && e.bloat_bytes >= 100 * 1024 ** 2 ? 'warn-row' : undefined)}
              compact
            />
          )}
        </>
      )}
    </Async>
  )
}

function Constraints({ db }: { db: PageProps['db'] }) {
  const found = useApi(apiPath(db, '/constraints/invalid'))
  return (
    <Async loaded={found}>
      {(c) =>
        c.constraints.length === 0 ? (
          <p class="muted">
            {c.collected_at === null
              ? 'Not checked yet (an agent older than this server does not send it).'
              : 'Every constraint is validated.'}
          </p>
        ) : (
          <ul class="issue-list">
            {c.constraints.map((x) => (
              <li key={`${x.schema_name}|${x.table_name}|${x.constraint_name}`}>
                <p>
                  <strong>
                    <DbText text={x.constraint_name} />
                  </strong>{' '}
                  (<DbText text={x.constraint_type} />) on <DbText text={qualified(x.schema_name, x.table_name)} />:{' '}
                  <code>
                    <DbText text={x.definition} />
                  </code>
                </p>
                <Code text={x.validate_sql} />
              </li>
            ))}
          </ul>
        )
      }
    </Async>
  )
}

export function MaintenancePage({ db }: PageProps) {
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <h2>Running now</h2>
      <Progress db={db} />
      <h2>Bloat (estimate)</h2>
      <Bloat db={db} />
      <h2>NOT VALID constraints</h2>
      <Constraints db={db} />
    </section>
  )
}
