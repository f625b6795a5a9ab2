// Overview: the key figures of the database as cards (health score, sessions, and the engine's own:
// blocking, cache hit ratio, dead tuples, autovacuum / merges, mutations, p99), its activity over the
// chosen time range (?range=, default 6 hours) as two small charts (PostgreSQL: transactions and
// connections from /database-stats/timeseries; ClickHouse: queries and connections from /server-metrics),
// its costliest statements of that range and the doctor's three worst causes (one line per issue, with
// how many findings it holds, linking to the Issues page); "no data yet" until the
// agent sends; PostgreSQL's connections as a share of the slots max_connections leaves to ordinary roles
// (/connections). A card takes the colour of the doctor's worst finding on its subject when that is worse
// than its own thresholds (two critical dead-row findings make the dead tuples card critical). When the
// agent stopped sending, the figures of the moment (sessions, blocking, the cache hit ratio) show "—"
// with the time of the last data, and the state figures say "as of" that time.
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Async, ErrorBox, Loading, ago, fmtClock, fmtMs, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import type { Loaded } from '../../components/ui.tsx'
import {
  AgentNotes,
  ApiProblem,
  Card,
  NoDataYet,
  RANGES,
  SeverityBadge,
  TimeRangePicker,
  type TimeWindow,
  apiPath,
  dbHref,
  issuesHref,
  fmtDuration,
  fmtRatio,
  isStale,
  statusClass,
  useEvery,
  useWindow,
  warningNotes,
  windowQuery,
} from './common.tsx'
import { slotsTone } from './connections.tsx'
import { AsOf } from './doctor.tsx'
import { useEventMarks } from './events.tsx'
import { SeriesChart, type SeriesSpec } from './series-chart.tsx'
import type { Database, Doctor, Finding, FindingGroup, PageProps } from './types.ts'
import { DATABASE_METRICS, SERVER_METRICS, legends } from '../../../shared/metrics.ts'
import type { Static } from '@sinclair/typebox'
import type { Overview as OverviewSchema, TopQuery as TopQuerySchema } from '../../../shared/api/doctor.ts'

type TopQuery = Static<typeof TopQuerySchema>
type Overview = Static<typeof OverviewSchema>
type Point = { ts: string }

const POSTGRES_ACTIVITY: SeriesSpec[] = [
  {
    name: 'overview-transactions',
    title: 'Transactions per second',
    unit: 'per_s',
    rate: true,
    keys: legends(DATABASE_METRICS, 'xact_commit', 'xact_rollback'),
  },
  { name: 'overview-connections', title: 'Connections', unit: 'count', keys: legends(DATABASE_METRICS, 'numbackends') },
]

const CLICKHOUSE_ACTIVITY: SeriesSpec[] = [
  {
    name: 'overview-queries',
    title: 'Queries per second',
    unit: 'per_s',
    perBucket: true,
    keys: [
      ['queries_per_s', 'queries'],
      ['failed_queries_per_s', 'failed'],
    ],
  },
  {
    name: 'overview-connections',
    title: 'Connections',
    unit: 'count',
    keys: legends(SERVER_METRICS, 'tcp_connections', 'http_connections'),
  },
]

/** The window in words: "the last 6 hours", or "14:00 to 18:00" for a custom one. */
export function rangeWords(tw: Pick<TimeWindow, 'range' | 'bounds'>): string {
  const preset = RANGES.find((r) => r.key === tw.range)
  return preset ? preset.label.replace(/^Last/, 'the last') : `${fmtClock(tw.bounds[0])} to ${fmtClock(tw.bounds[1])}`
}

function ActivityCharts({
  db,
  loaded,
  specs,
  bucket,
  bounds,
}: {
  db: Database
  loaded: Loaded<Point[]>
  specs: SeriesSpec[]
  bucket: number
  bounds: [number, number]
}) {
  const marks = useEventMarks(db, bounds)
  if (loaded.error) return <ApiProblem error={loaded.error} />
  if (!loaded.data) return <Loading what="Loading the activity" />
  return (
    <div class="grid-2">
      {specs.map((s) => (
        <SeriesChart key={s.name} points={loaded.data!} spec={s} bucketSeconds={bucket} range={bounds} marks={marks} />
      ))}
    </div>
  )
}

function PostgresActivity({ db, tw }: { db: Database; tw: TimeWindow }) {
  const points = useApi(apiPath(db, `/database-stats/timeseries?${tw.params}&bucket=${tw.bucket}`))
  return <ActivityCharts db={db} loaded={points} specs={POSTGRES_ACTIVITY} bucket={tw.bucket} bounds={tw.bounds} />
}

function ClickHouseActivity({ db, tw }: { db: Database; tw: TimeWindow }) {
  const metrics = useApi(apiPath(db, `/server-metrics?${tw.params}&bucket=${tw.bucket}`))
  const loaded: Loaded<Point[]> = { ...metrics, data: metrics.data?.timeseries }
  return (
    <ActivityCharts
      db={db}
      loaded={loaded}
      specs={CLICKHOUSE_ACTIVITY}
      bucket={metrics.data?.bucket_seconds ?? tw.bucket}
      bounds={tw.bounds}
    />
  )
}

function Activity({ db, tw, query }: { db: Database; tw: TimeWindow; query: URLSearchParams }) {
  const more = db.engine === 'postgres' ? 'internals' : 'server'
  const keep = windowQuery(query)
  return (
    <section>
      <div class="section-head">
        <h2>Activity</h2>
        <a class="small" href={`${dbHref(db, more)}${keep ? `?${keep}` : ''}`}>
          {db.engine === 'postgres' ? 'All internals' : 'Server metrics'}
        </a>
      </div>
      <p class="muted small">Over {rangeWords(tw)}.</p>
      {db.engine === 'postgres' ? <PostgresActivity db={db} tw={tw} /> : <ClickHouseActivity db={db} tw={tw} />}
    </section>
  )
}

type Tone = 'critical' | 'warning' | undefined

const tone = (bad: boolean, warn: boolean): Tone => (bad ? 'critical' : warn ? 'warning' : undefined)

const upText = (ratio: number) => `${(ratio * 100).toFixed(ratio === 1 ? 0 : 2)} %`

/**
 * "over 30 days" when the ratio stands on (about) the whole period; else how much of it was watched (up or
 * down known: the agent reported), so that a ratio of two minutes does not read as one of a month.
 */
export function watchedWords(watchedMs: number | null | undefined, days: number): string {
  const period = days === 1 ? '24 h' : `${days} days`
  if (watchedMs === null || watchedMs === undefined || watchedMs >= days * 86_400_000 - 3_600_000)
    return `over ${period}`
  return `over ${fmtDuration(watchedMs)} watched of ${period}`
}

/**
 * The availability card: the share of time the agent found the database up over 30 days and 24 hours
 * (time the agent itself was silent counts as neither), with the time it stands on; warning under
 * 99.9 %, critical under 99 %.
 */
export function availabilityCard(o: {
  uptime_24h?: number | null
  uptime_30d?: number | null
  uptime_30d_watched_ms?: number
}): { key: string; label: string; value: string; sub: string; tone: Tone } {
  const up30 = o.uptime_30d ?? null
  const up24 = o.uptime_24h ?? null
  const over = watchedWords(o.uptime_30d_watched_ms, 30)
  return {
    key: 'availability',
    label: 'Available',
    value: up30 === null ? '—' : upText(up30),
    sub: up24 === null ? over : `${over} · ${upText(up24)} in 24 h`,
    tone: up30 === null ? undefined : tone(up30 < 0.99, up30 < 0.999),
  }
}

/** The doctor's rules behind each card: the card is as bad as their worst finding. */
export const CARD_RULES: Record<string, string[]> = {
  connections: ['pg_connections'],
  longest: ['pg_long_running_queries', 'ch_long_running_queries'],
  blocked: ['pg_blocked_sessions'],
  hit: ['pg_cache_hit_ratio'],
  dead: ['pg_dead_tuples'],
  vacuum: ['pg_autovacuum_disabled', 'pg_wraparound'],
  merges: ['ch_long_merges'],
  mutations: ['ch_stuck_mutations'],
  stuck: ['ch_stuck_mutations'],
  p99: ['ch_query_p99'],
  uptime: ['server_restarted'],
  availability: ['database_unreachable'],
}

/**
 * The doctor's word on a card: its worst severity among the findings of `rules` (critical or warning;
 * information leaves a card alone) and how many findings of that severity, e.g. "2 critical findings".
 */
export function doctorVerdict(
  findings: Pick<Finding, 'rule' | 'severity'>[] | undefined,
  rules: string[],
): { tone: Tone; note?: string } {
  const mine = (findings ?? []).filter((f) => rules.includes(f.rule))
  for (const severity of ['critical', 'warning'] as const) {
    const count = mine.filter((f) => f.severity === severity).length
    if (count > 0) return { tone: severity, note: `${count} ${severity} finding${count === 1 ? '' : 's'}` }
  }
  return { tone: undefined }
}

/** The worse of two tones. */
export const worseTone = (a: Tone, b: Tone): Tone => (a === 'critical' || b === 'critical' ? 'critical' : (a ?? b))

interface FigureCard {
  key: string
  label: string
  value: string | number
  sub?: string
  tone?: Tone
  href?: string
  /** A figure of the moment (sessions, blocking, a recent rate): "—" once the data are stale. */
  live?: boolean
}

function Figures({ db, o, doctor, tw }: { db: Database; o: Overview; doctor: Doctor | undefined; tw: TimeWindow }) {
  // The connections against max_connections (PostgreSQL), as the Connections page counts them.
  const connections = useApi(db.engine === 'postgres' ? apiPath(db, '/connections?limit=1') : null)
  const slots = connections.data?.slots ?? null
  const longest = o.longest_query_ms ?? 0
  const cards: FigureCard[] = [
    { key: 'active', label: 'Active queries', value: fmtNum(o.active_queries), href: dbHref(db, 'active'), live: true },
    {
      key: 'longest',
      label: 'Longest query',
      value: fmtDuration(o.longest_query_ms),
      tone: tone(longest > 3_600_000, longest > 300_000),
      live: true,
    },
  ]
  if (db.engine === 'postgres') {
    const hit = o.cache_hit_ratio ?? null
    const dead = o.dead_tuple_ratio ?? null
    cards.push(
      {
        key: 'connections',
        label: 'Connections',
        value: slots ? fmtRatio(slots.used_ratio, 0) : '—',
        sub: slots
          ? `${fmtNum(connections.data!.total)} of ${fmtNum(slots.usable)} usable · ${fmtNum(slots.headroom)} free`
          : 'of max_connections',
        tone: slots ? slotsTone(slots.used_ratio) : undefined,
        href: dbHref(db, 'connections'),
        live: true,
      },
      {
        key: 'blocked',
        label: 'Blocked queries',
        value: fmtNum(o.blocked_queries),
        tone: tone(false, (o.blocked_queries ?? 0) > 0),
        href: dbHref(db, 'locks'),
        live: true,
      },
      {
        key: 'hit',
        label: 'Cache hit ratio',
        value: fmtRatio(hit, 2),
        sub: `over ${rangeWords(tw)}`,
        tone: hit === null ? undefined : tone(hit < 0.9, hit < 0.99),
        live: true,
      },
      {
        key: 'dead',
        label: 'Dead tuples',
        value: fmtRatio(dead),
        sub: 'of all rows',
        tone: dead === null ? undefined : tone(dead > 0.5, dead > 0.2),
        href: dbHref(db, 'tables'),
      },
      {
        key: 'vacuum',
        label: 'Last autovacuum',
        value: ago(o.last_autovacuum ?? null),
        sub: fmtTime(o.last_autovacuum ?? null),
      },
    )
  } else {
    const progress = o.merge_progress_pct
    cards.push(
      {
        key: 'merges',
        label: 'Active merges',
        value: fmtNum(o.active_merges),
        sub: progress === null || progress === undefined ? 'none running' : `${progress} % done on average`,
        href: dbHref(db, 'merges'),
        live: true,
      },
      {
        key: 'mutations',
        label: 'Mutations',
        value: fmtNum(o.active_mutations),
        sub: 'not done',
        href: dbHref(db, 'mutations'),
      },
      {
        key: 'stuck',
        label: 'Stuck mutations',
        value: fmtNum(o.stuck_mutations),
        tone: tone((o.stuck_mutations ?? 0) > 0, false),
        href: dbHref(db, 'mutations'),
      },
      {
        key: 'p99',
        label: 'Query p99',
        value: fmtMs(o.query_p99_ms ?? null),
        sub: 'latest cycle',
        tone: tone((o.query_p99_ms ?? 0) > 10_000, (o.query_p99_ms ?? 0) > 1000),
        live: true,
      },
    )
  }
  // The server's uptime at the latest batch (the restart finding colours it).
  cards.push({
    key: 'uptime',
    label: 'Uptime',
    value: fmtDuration(o.uptime_s === null ? null : o.uptime_s * 1000),
    sub: o.server_started_at ? `since ${fmtTime(o.server_started_at)}` : undefined,
  })
  cards.push({ ...availabilityCard(o), href: dbHref(db, 'events') })
  const stale = isStale(db)
  const asOf = stale ? fmtClock(db.last_seen_at) : ''
  return (
    <div class="cards">
      <Card
        key="score"
        name="score"
        label="Health score"
        value={o.health_score}
        sub={doctor?.status ?? ''}
        tone={statusClass(doctor?.status)}
        href={issuesHref(db)}
      />
      {cards.map((c) => {
        const verdict = doctorVerdict(doctor?.top_issues, CARD_RULES[c.key] ?? [])
        const sub = [stale ? (c.live ? `no data since ${asOf}` : `as of ${asOf}`) : c.sub, verdict.note]
          .filter(Boolean)
          .join(' · ')
        const value = stale && c.live ? '—' : c.value
        return (
          <Card
            key={c.key}
            name={c.key}
            label={c.label}
            value={value}
            sub={sub || undefined}
            tone={stale && c.live ? undefined : worseTone(c.tone, verdict.tone)}
            href={verdict.note ? issuesHref(db) : c.href}
          />
        )
      })}
    </div>
  )
}

function TopStatements({
  db,
  rows,
  tw,
  query,
}: {
  db: Database
  rows: TopQuery[]
  tw: TimeWindow
  query: URLSearchParams
}) {
  const keep = windowQuery(query)
  if (rows.length === 0) return <p class="muted">No statements over {rangeWords(tw)}.</p>
  return (
    <div class="table-wrap">
      <table class="compact">
        <caption class="sr-only">Top statements by total time</caption>
        <thead>
          <tr>
            <th scope="col">Statement</th>
            <th class="num" scope="col">
              Total time
            </th>
            <th class="num" scope="col">
              Calls
            </th>
            <th class="num" scope="col">
              Mean
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((q) => (
            <tr key={q.query_hash}>
              <td class="stmt-cell">
                <a
                  class="stmt-text mono"
                  href={`${dbHref(db, `queries/${encodeURIComponent(q.query_hash)}`)}${keep ? `?${keep}` : ''}`}
                  title={escapeInvisible(q.query_text)}
                >
                  <DbText text={q.query_text || q.query_hash} />
                </a>
              </td>
              <td class="num">{fmtMs(q.total_time_ms)}</td>
              <td class="num">{fmtNum(q.total_calls)}</td>
              <td class="num">{fmtMs(q.mean_time_ms)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/** One line of the overview's top issues: a cause (the doctor's group), its leading finding when sent, and how many findings it holds. */
export interface TopCause {
  group: FindingGroup
  lead: Finding | undefined
  findings: number
}

/** The `n` worst causes, one line each (the doctor sends its groups worst first). */
export function topCauses(groups: FindingGroup[], findings: Finding[], n = 3): TopCause[] {
  const byKey = new Map(findings.map((f) => [f.key, f]))
  return groups.slice(0, n).map((group) => ({ group, lead: byKey.get(group.lead), findings: group.findings.length }))
}

function TopIssues({ db, doctor }: PageProps) {
  if (doctor.error) return <ErrorBox error={doctor.error} />
  if (!doctor.data) return <Loading what="Running the doctor" />
  const causes = topCauses(doctor.data.groups, doctor.data.top_issues)
  if (causes.length === 0) return <p class="success">The doctor found nothing to fix.</p>
  return (
    <ul class="issue-list">
      {causes.map(({ group, lead, findings }) => (
        <li key={group.key} class={`panel ${group.severity}`}>
          <div class="row">
            <SeverityBadge severity={group.severity} />
            <a href={issuesHref(db, group.lead)}>
              <DbText text={group.title} />
            </a>
            <span class="small muted">
              {findings} finding{findings === 1 ? '' : 's'}
            </span>
            {lead && <AsOf at={lead.as_of} stale={isStale(db)} />}
          </div>
          {lead && (
            <p class="small muted clamp">
              <DbText text={lead.detail} />
            </p>
          )}
        </li>
      ))}
    </ul>
  )
}

export function OverviewPage(props: PageProps) {
  const { db, query, setQuery } = props
  const tw = useWindow(query)
  const overview = useApi(db.last_seen_at ? apiPath(db, `/overview?${tw.params}`) : null)
  // A relative range moves to now with each reload; a custom one stays where it is.
  useEvery(30_000, tw.range === 'custom' ? overview.reload : tw.refresh)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  const keep = windowQuery(query)
  return (
    <div class="stack">
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
      </div>
      <Async loaded={overview}>
        {(o) => (
          <div class="stack">
            <AgentNotes notes={warningNotes(o.agent_notes)} />
            <Figures db={db} o={o} doctor={props.doctor.data} tw={tw} />
            <Activity db={db} tw={tw} query={query} />
            <div class="grid-2">
              <section>
                <div class="section-head">
                  <h2>Top statements</h2>
                  <a class="small" href={`${dbHref(db, 'queries')}${keep ? `?${keep}` : ''}`}>
                    All statements
                  </a>
                </div>
                <p class="muted small">The costliest over {rangeWords(tw)} by total time.</p>
                <TopStatements db={db} rows={o.top_queries} tw={tw} query={query} />
              </section>
              <section>
                <div class="section-head">
                  <h2>Top issues</h2>
                  <a class="small" href={issuesHref(db)}>
                    Open the issues
                  </a>
                </div>
                <TopIssues {...props} />
              </section>
            </div>
          </div>
        )}
      </Async>
    </div>
  )
}
