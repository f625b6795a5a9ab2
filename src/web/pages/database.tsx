// One database: its header (name, engine, status, last seen, health score), the sections of its engine
// (grouped: Overview · Activity · Storage · Server · Issues · Settings) and the section's page
// (pages/db/*). The database record and the doctor's answer are loaded here once and
// refreshed every minute; its status and last batch (/health, one row read) at the agent's own poll
// interval, so that "last seen" moves with each batch and counts the seconds in between. A database
// whose agent stopped sending gets a red "data from HH:MM" banner above every page. The pages get the
// database with its latest status, the route's item and query. The sections are a sidebar on a wide
// screen and a "Sections" menu on a narrow one, and keep the chosen time window (?range=…) from page to
// page. Past them, a heading naming the section (read by screen readers, shown when focused) is where
// "Skip to content" lands.
import type { FunctionComponent } from 'preact'
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { DEFAULT_POLL_INTERVAL_SECONDS } from '../../shared/database-limits.ts'
import { ApiError } from '../api.ts'
import { DbText, escapeInvisible } from '../components/invisible.tsx'
import { ErrorBox, Loading, ago, fmtClock, fmtTime, useApi, useEscape } from '../components/ui.tsx'
import { navigate, replaceRoute } from '../router.ts'
import { ActivePage } from './db/active.tsx'
import { StatusBadge, dbHref, engineName, isStale, statusClass, useEvery, withWindow } from './db/common.tsx'
import { ConfigurationPage } from './db/configuration.tsx'
import { ConnectionsPage } from './db/connections.tsx'
import { CustomMetricsPage } from './db/custom-metrics.tsx'
import { ISSUES_ALIASES, IssuesPage } from './db/issues.tsx'
import { EventsPage } from './db/events.tsx'
import { InternalsPage } from './db/internals.tsx'
import { HostPage } from './db/host.tsx'
import { LocksPage } from './db/locks.tsx'
import { LogsPage } from './db/logs.tsx'
import { MaintenancePage } from './db/maintenance.tsx'
import { MergesPage, MutationsPage } from './db/merges.tsx'
import { IndexDetailPage, TableDetailPage } from './db/object-detail.tsx'
import { IndexesPage, TablesPage } from './db/objects.tsx'
import { OverviewPage } from './db/overview.tsx'
import { PartsPage } from './db/parts.tsx'
import { ReplicationPage } from './db/replication.tsx'
import { ServerPage } from './db/server.tsx'
import { SettingsPage } from './db/settings.tsx'
import { StatementPage } from './db/statement.tsx'
import { StatementsPage } from './db/statements.tsx'
import type { Database, Doctor, Engine, PageProps } from './db/types.ts'
import { WaitsPage } from './db/waits.tsx'
import './db/pages.css'

export interface Tab {
  slug: string
  label: string
  page: FunctionComponent<PageProps>
  /** The page of one item of the tab (`queries/<hash>`). */
  itemPage?: FunctionComponent<PageProps>
}

/** A heading of the sections' navigation and its tabs; a group of one tab of the same name is a plain link. */
export interface TabGroup {
  label: string
  tabs: Tab[]
}

const overview: Tab = { slug: 'overview', label: 'Overview', page: OverviewPage }
const events: Tab = { slug: 'events', label: 'Events', page: EventsPage }
const statements: Tab = { slug: 'queries', label: 'Statements', page: StatementsPage, itemPage: StatementPage }
const active: Tab = { slug: 'active', label: 'Active', page: ActivePage }
/** Doctor, Recommendations and Alerts in one page; their old slugs open it (ISSUES_ALIASES). */
const issues: Tab = { slug: 'issues', label: 'Issues', page: IssuesPage }
const settings: Tab = { slug: 'settings', label: 'Settings', page: SettingsPage }
const logs: Tab = { slug: 'logs', label: 'Logs', page: LogsPage }
const host: Tab = { slug: 'host', label: 'Host', page: HostPage }
const configuration: Tab = { slug: 'configuration', label: 'Configuration', page: ConfigurationPage }
/** The operator's own SQL checks (custom_metrics in the agent config), beside the built-in server metrics. */
const customMetrics: Tab = { slug: 'custom-metrics', label: 'Custom metrics', page: CustomMetricsPage }

/**
 * The sections of a database of each engine, grouped as the navigation shows them: adding a page is one
 * line in its group. Every tab's slug is unique within its engine (the route is /databases/<id>/<slug>).
 */
export const TABS: Record<Engine, TabGroup[]> = {
  postgres: [
    { label: 'Overview', tabs: [overview] },
    {
      label: 'Activity',
      tabs: [
        statements,
        active,
        { slug: 'connections', label: 'Connections', page: ConnectionsPage },
        { slug: 'locks', label: 'Locks', page: LocksPage },
        { slug: 'waits', label: 'Waits', page: WaitsPage },
      ],
    },
    {
      label: 'Storage',
      tabs: [
        { slug: 'tables', label: 'Tables', page: TablesPage, itemPage: TableDetailPage },
        { slug: 'indexes', label: 'Indexes', page: IndexesPage, itemPage: IndexDetailPage },
        { slug: 'maintenance', label: 'Maintenance', page: MaintenancePage },
      ],
    },
    {
      label: 'Server',
      tabs: [
        { slug: 'replication', label: 'Replication', page: ReplicationPage },
        { slug: 'internals', label: 'Internals', page: InternalsPage },
        host,
        customMetrics,
        logs,
        events,
        configuration,
      ],
    },
    { label: 'Issues', tabs: [issues] },
    { label: 'Settings', tabs: [settings] },
  ],
  clickhouse: [
    { label: 'Overview', tabs: [overview] },
    { label: 'Activity', tabs: [statements, active] },
    {
      label: 'Storage',
      tabs: [
        { slug: 'parts', label: 'Parts', page: PartsPage },
        { slug: 'merges', label: 'Merges', page: MergesPage },
        { slug: 'mutations', label: 'Mutations', page: MutationsPage },
      ],
    },
    {
      label: 'Server',
      tabs: [{ slug: 'server', label: 'Metrics', page: ServerPage }, customMetrics, host, logs, events, configuration],
    },
    { label: 'Issues', tabs: [issues] },
    { label: 'Settings', tabs: [settings] },
  ],
}

/** Every tab of an engine, in the navigation's order. */
export const tabsOf = (engine: Engine): Tab[] => TABS[engine].flatMap((g) => g.tabs)

/** The group holding the tab `slug`, if any. */
const groupOf = (engine: Engine, slug: string): TabGroup | undefined =>
  TABS[engine].find((g) => g.tabs.some((t) => t.slug === slug))

/** A group shown as one link: it holds one tab, of its own name. */
const single = (group: TabGroup) => group.tabs.length === 1 && group.tabs[0]!.label === group.label

/** "12 s ago", counted again every second. */
function LiveAgo({ at }: { at: string | null }) {
  const [, setTick] = useState(0)
  useEvery(
    1000,
    useCallback(() => setTick((t) => t + 1), []),
  )
  return <>{ago(at)}</>
}

/** How often the header asks for the database's status: at the agent's poll interval, from 1 s to 30 s. */
export const healthPollMs = (pollIntervalSeconds: number) =>
  1000 * Math.min(30, Math.max(1, pollIntervalSeconds || DEFAULT_POLL_INTERVAL_SECONDS))

/** What GET /databases/{id}/health answers: the status, the last batch and the availability. */
type LiveHealth = Pick<
  Database,
  'status' | 'last_seen_at' | 'reason' | 'down_since' | 'cause' | 'cause_message' | 'agent_last_heard_at' | 'data_as_of'
>

/** The database's status and last batch, read every poll interval (one row read on the server). */
function useLiveHealth(db: Database | undefined): LiveHealth | undefined {
  const health = useApi(db ? `/databases/${encodeURIComponent(db.id)}/health` : null)
  useEvery(healthPollMs(db?.poll_interval_seconds ?? DEFAULT_POLL_INTERVAL_SECONDS), health.reload)
  return health.data
}

/** The notice over the pages of a database whose agent stopped sending: what they show is from then. */
function StaleBanner({ db }: { db: Database }) {
  return (
    <div class="banner banner-critical" role="status" data-stale>
      <p>
        <strong>Data from {fmtClock(db.last_seen_at)}</strong>: the agent's last batch came{' '}
        <LiveAgo at={db.last_seen_at} />, and it reports every {db.poll_interval_seconds} s. These pages show the
        database as it was then, not now; check that <code>dbm agent</code> is running and can reach the database and
        this server.
      </p>
    </div>
  )
}

/**
 * The notice over the pages of a database its agent reports down: since when, why, and that what the
 * pages show is as of the last data before it (never as current).
 */
function DownBanner({ db }: { db: LiveHealth }) {
  return (
    <div class="banner banner-critical" role="status" data-down>
      <p>
        <strong>Down since {fmtClock(db.down_since)}</strong>:{' '}
        <DbText text={db.cause_message ?? db.cause ?? 'unreachable'} />
        {db.data_as_of ? <>; data below as of {fmtClock(db.data_as_of)}</> : <>; no data was collected before it</>}.
        The agent is running and reports at every ping (last heard <LiveAgo at={db.agent_last_heard_at} />
        ).
      </p>
    </div>
  )
}

function Header({ db, doctor }: { db: Database; doctor: Doctor | undefined }) {
  return (
    <>
      <p class="small crumbs">
        <a href="#/databases">Databases</a> <span aria-hidden="true">/</span>{' '}
        <span aria-current="page">
          <DbText text={db.name} />
        </span>
      </p>
      <div class="page-head db-head">
        <h1>
          <DbText text={db.name} />
        </h1>
        <span class="badge badge-info">
          {engineName(db.engine)}
          {db.engine_version ? (
            <>
              {' '}
              <DbText text={db.engine_version} />
            </>
          ) : (
            ''
          )}
        </span>
        <StatusBadge status={db.status} stale={isStale(db)} />
        <span class="muted small" title={fmtTime(db.last_seen_at)} data-last-seen>
          last seen <LiveAgo at={db.last_seen_at} />
        </span>
        <span class="spacer" />
        <a
          class={`health-score ${statusClass(doctor?.status)}`}
          href={dbHref(db, 'issues')}
          title="Health score (100 is best): open the issues"
        >
          <span class="label">Health</span> <strong>{doctor ? doctor.score : '…'}</strong>
          {doctor && <span class="small"> {doctor.status}</span>}
        </a>
      </div>
      <p class="muted small db-sub">
        <DbText text={db.host} />:{db.port}
        {Object.entries(db.tags).map(([k, v]) => (
          <span key={k} class="badge badge-muted tag">
            <DbText text={k} />=<DbText text={v} />
          </span>
        ))}
      </p>
    </>
  )
}

/**
 * The sections of a database, grouped: a sidebar on a wide screen; on a narrower one (under 1000 px, see
 * pages.css) a "Sections" button naming where the user is opens the same list, and Esc or a choice closes
 * it again (Esc gives the focus back to the button). Every link is in the document either way.
 */
function SectionsNav({ db, tab, query }: { db: Database; tab: string; query: URLSearchParams }) {
  const [open, setOpen] = useState(false)
  const button = useRef<HTMLButtonElement>(null)
  useEffect(() => setOpen(false), [tab])
  useEscape(open, () => {
    setOpen(false)
    button.current?.focus()
  })
  const groups = TABS[db.engine]
  const group = groupOf(db.engine, tab)
  const current = group?.tabs.find((t) => t.slug === tab)
  const link = (t: Tab) => (
    <a href={withWindow(dbHref(db, t.slug), query)} aria-current={t.slug === tab ? 'page' : undefined}>
      {t.label}
    </a>
  )
  return (
    <div class="sections">
      <button
        type="button"
        ref={button}
        class="ghost sections-toggle"
        aria-expanded={open}
        aria-controls="db-sections"
        onClick={() => setOpen((o) => !o)}
      >
        <span class="sections-icon" aria-hidden="true" />
        Sections{' '}
        {current && (
          <span class="sections-where">
            {group && !single(group) ? `${group.label} › ` : ''}
            {current.label}
          </span>
        )}
      </button>
      <nav id="db-sections" class={`tabs${open ? ' open' : ''}`} aria-label={`Sections of ${escapeInvisible(db.name)}`}>
        <ul>
          {groups.map((g) =>
            single(g) ? (
              <li key={g.label} class="sections-single">
                {link(g.tabs[0]!)}
              </li>
            ) : (
              <li key={g.label} class={`sections-group${g === group ? ' current' : ''}`}>
                <span class="sections-label" id={`sections-${g.label.toLowerCase()}`}>
                  {g.label}
                </span>
                <ul aria-labelledby={`sections-${g.label.toLowerCase()}`}>
                  {g.tabs.map((t) => (
                    <li key={t.slug}>{link(t)}</li>
                  ))}
                </ul>
              </li>
            ),
          )}
        </ul>
      </nav>
    </div>
  )
}

interface LayoutProps {
  id: string
  tab: string
  item?: string
  query: URLSearchParams
}

/** Keyed by the database id, so that nothing of one database shows while another one loads. */
export function DatabaseLayout(props: LayoutProps) {
  return <DatabaseView key={props.id} {...props} />
}

function DatabaseView({ id, tab, item, query }: LayoutProps) {
  const db = useApi(`/databases/${encodeURIComponent(id)}`)
  const diagnosis = useApi(db.data ? `/databases/${encodeURIComponent(id)}/doctor` : null)
  const reloadAll = useCallback(() => {
    db.reload()
    diagnosis.reload()
  }, [db.reload, diagnosis.reload])
  useEvery(60_000, reloadAll)
  const health = useLiveHealth(db.data)
  // The record with the status and last batch read last (the record's own are up to a minute old).
  const record = db.data
  const shown = useMemo(
    () => (record && health ? { ...record, ...health } : record),
    [record, health?.status, health?.last_seen_at, health?.reason, health?.cause_message, health?.agent_last_heard_at],
  )

  // The old Doctor, Recommendations and Alerts links open Issues, with their query (?finding=...).
  useEffect(() => {
    if (ISSUES_ALIASES.has(tab))
      replaceRoute(`/databases/${encodeURIComponent(id)}/issues${query.toString() ? `?${query}` : ''}`)
  }, [id, tab])
  const tabs = db.data ? tabsOf(db.data.engine) : []
  const current = tabs.find((t) => t.slug === tab)
  useEffect(() => {
    if (db.data) document.title = `${escapeInvisible(db.data.name)} · ${current?.label ?? 'Not found'} · dbm`
  }, [db.data?.name, current])

  const setQuery = useCallback(
    (patch: Record<string, string | undefined>, options?: { replace?: boolean }) => {
      const next = new URLSearchParams(query)
      for (const [k, v] of Object.entries(patch)) {
        if (v === undefined || v === '') next.delete(k)
        else next.set(k, v)
      }
      const search = next.toString()
      const route = `/databases/${encodeURIComponent(id)}/${tab}${item ? `/${encodeURIComponent(item)}` : ''}${search ? `?${search}` : ''}`
      if (options?.replace) replaceRoute(route)
      else navigate(route)
    },
    [id, tab, item, query],
  )

  if (db.error) {
    return (
      <main>
        {db.error instanceof ApiError && db.error.status === 404 ? (
          <>
            <h1>Database not found</h1>
            <p>
              No database of your organization has this id. <a href="#/databases">Go to your databases</a>.
            </p>
          </>
        ) : (
          <ErrorBox error={db.error} />
        )}
      </main>
    )
  }
  if (!db.data) {
    return (
      <main>
        <Loading what="Loading the database" />
      </main>
    )
  }

  const page = current ? (item && current.itemPage ? current.itemPage : current.page) : undefined
  const Page = page
  const live = shown ?? db.data
  return (
    <main class="db-page">
      <Header db={live} doctor={diagnosis.data} />
      {live.reason === 'database_down' ? <DownBanner db={live} /> : isStale(live) && <StaleBanner db={live} />}
      <div class="db-body">
        <SectionsNav db={db.data} tab={tab} query={query} />
        <div class="db-content">
          <h2 class="content-heading" data-main-heading>
            {current ? current.label : 'No such section'}
          </h2>
          {Page ? (
            <Page db={live} item={item} query={query} setQuery={setQuery} doctor={diagnosis} reloadDb={db.reload} />
          ) : (
            <div class="empty">
              <p>
                <strong>No such section</strong>
              </p>
              <p>
                {engineName(db.data.engine)} databases have no{' '}
                <code>
                  <DbText text={tab} />
                </code>{' '}
                tab. <a href={dbHref(db.data, 'overview')}>Open the overview</a>.
              </p>
            </div>
          )}
        </div>
      </div>
    </main>
  )
}
