// Overview: the key figures of the database as cards (health score, sessions, and the engine's own:
// blocking, cache hit ratio, dead tuples, autovacuum / merges, mutations, p99), its activity over the last
// 6 hours as two small charts (PostgreSQL: transactions and connections from /database-stats/timeseries;
// ClickHouse: queries and connections from /server-metrics), its costliest statements of the last 24
// hours and the doctor's three worst findings; "no data yet" until the agent sends.
import { useCallback, useState } from 'preact/hooks'
import { Async, ErrorBox, Loading, ago, fmtMs, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import type { Loaded } from '../../components/ui.tsx'
import { type AgentNote, AgentNotes, ApiProblem, Card, NoDataYet, SeverityBadge, apiPath, bucketFor, dbHref, fmtDuration, fmtRatio, statusClass, useEvery } from './common.tsx'
import { useEventMarks } from './events.tsx'
import { SeriesChart, type SeriesSpec } from './series-chart.tsx'
import type { Database, Doctor, PageProps } from './types.ts'

/** The overview's charts span the last 6 hours; its top statements (the API's) the last 24. */
const ACTIVITY_MS = 6 * 3_600_000
const TOP_RANGE = 'range=24h'

interface TopQuery {
  query_hash: string
  query_text: string
  total_calls: number
  total_time_ms: number
  mean_time_ms: number
}

interface Overview {
  engine: string
  status: string
  last_seen_at: string | null
  health_score: number
  active_queries: number
  longest_query_ms: number | null
  top_queries: TopQuery[]
  // PostgreSQL
  blocked_queries?: number
  cache_hit_ratio?: number | null
  dead_tuple_ratio?: number | null
  last_autovacuum?: string | null
  // ClickHouse
  active_merges?: number
  merge_progress_pct?: number | null
  active_mutations?: number
  stuck_mutations?: number
  query_p99_ms?: number | null
  /** What the agent's collectors reported in the latest batch: query_log disabled, statements it may not EXPLAIN… */
  agent_notes?: AgentNote[]
}

type Point = { ts: string } & Record<string, number | null>

const POSTGRES_ACTIVITY: SeriesSpec[] = [
  { name: 'overview-transactions', title: 'Transactions per second', unit: 'per_s', rate: true, keys: [['xact_commit', 'commits'], ['xact_rollback', 'rollbacks']] },
  { name: 'overview-connections', title: 'Connections', unit: 'count', keys: [['numbackends', 'backends']] },
]

const CLICKHOUSE_ACTIVITY: SeriesSpec[] = [
  { name: 'overview-queries', title: 'Queries per second', unit: 'per_s', perBucket: true, keys: [['queries_per_s', 'queries'], ['failed_queries_per_s', 'failed']] },
  { name: 'overview-connections', title: 'Connections', unit: 'count', keys: [['tcp_connections', 'TCP'], ['http_connections', 'HTTP']] },
]

/** The last 6 hours as API parameters, moved to now every minute. */
function useActivityWindow() {
  const [until, setUntil] = useState(() => Date.now())
  useEvery(60_000, useCallback(() => setUntil(Date.now()), []))
  const since = until - ACTIVITY_MS
  const bucket = bucketFor(ACTIVITY_MS)
  return {
    bucket,
    bounds: [since, until] as [number, number],
    params: `since=${encodeURIComponent(new Date(since).toISOString())}&until=${encodeURIComponent(new Date(until).toISOString())}&bucket=${bucket}`,
  }
}

function ActivityCharts({ db, loaded, specs, bucket, bounds }: { db: Database; loaded: Loaded<Point[]>; specs: SeriesSpec[]; bucket: number; bounds: [number, number] }) {
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

function PostgresActivity({ db }: { db: Database }) {
  const w = useActivityWindow()
  const points = useApi<Point[]>(apiPath(db, `/database-stats/timeseries?${w.params}`))
  return <ActivityCharts db={db} loaded={points} specs={POSTGRES_ACTIVITY} bucket={w.bucket} bounds={w.bounds} />
}

function ClickHouseActivity({ db }: { db: Database }) {
  const w = useActivityWindow()
  const metrics = useApi<{ bucket_seconds: number; timeseries: Point[] }>(apiPath(db, `/server-metrics?${w.params}`))
  const loaded: Loaded<Point[]> = { ...metrics, data: metrics.data?.timeseries }
  return <ActivityCharts db={db} loaded={loaded} specs={CLICKHOUSE_ACTIVITY} bucket={metrics.data?.bucket_seconds ?? w.bucket} bounds={w.bounds} />
}

function Activity({ db }: { db: Database }) {
  const more = db.engine === 'postgres' ? 'internals' : 'server'
  return (
    <section>
      <div class="section-head">
        <h2>Activity</h2>
        <a class="small" href={`${dbHref(db, more)}?range=6h`}>
          {db.engine === 'postgres' ? 'All internals' : 'Server metrics'}
        </a>
      </div>
      <p class="muted small">The last 6 hours.</p>
      {db.engine === 'postgres' ? <PostgresActivity db={db} /> : <ClickHouseActivity db={db} />}
    </section>
  )
}

const tone = (bad: boolean, warn: boolean) => (bad ? 'critical' : warn ? 'warning' : undefined)

function Figures({ db, o, doctor }: { db: Database; o: Overview; doctor: Doctor | undefined }) {
  const longest = o.longest_query_ms ?? 0
  const cards = [
    <Card key="score" label="Health score" value={o.health_score} sub={doctor?.status ?? ''} tone={statusClass(doctor?.status)} href={dbHref(db, 'doctor')} />,
    <Card key="active" label="Active queries" value={fmtNum(o.active_queries)} href={dbHref(db, 'active')} />,
    <Card key="longest" label="Longest query" value={fmtDuration(o.longest_query_ms)} tone={tone(longest > 3_600_000, longest > 300_000)} />,
  ]
  if (db.engine === 'postgres') {
    const hit = o.cache_hit_ratio ?? null
    const dead = o.dead_tuple_ratio ?? null
    cards.push(
      <Card key="blocked" label="Blocked queries" value={fmtNum(o.blocked_queries)} tone={tone(false, (o.blocked_queries ?? 0) > 0)} href={dbHref(db, 'locks')} />,
      <Card key="hit" label="Cache hit ratio" value={fmtRatio(hit, 2)} sub="last hour" tone={hit === null ? undefined : tone(hit < 0.9, hit < 0.99)} />,
      <Card key="dead" label="Dead tuples" value={fmtRatio(dead)} sub="of all rows" tone={dead === null ? undefined : tone(dead > 0.5, dead > 0.2)} href={dbHref(db, 'tables')} />,
      <Card key="vacuum" label="Last autovacuum" value={ago(o.last_autovacuum ?? null)} sub={fmtTime(o.last_autovacuum ?? null)} />,
    )
  } else {
    const progress = o.merge_progress_pct
    cards.push(
      <Card key="merges" label="Active merges" value={fmtNum(o.active_merges)} sub={progress === null || progress === undefined ? 'none running' : `${progress} % done on average`} href={dbHref(db, 'merges')} />,
      <Card key="mutations" label="Mutations" value={fmtNum(o.active_mutations)} sub="not done" href={dbHref(db, 'mutations')} />,
      <Card key="stuck" label="Stuck mutations" value={fmtNum(o.stuck_mutations)} tone={tone((o.stuck_mutations ?? 0) > 0, false)} href={dbHref(db, 'mutations')} />,
      <Card key="p99" label="Query p99" value={fmtMs(o.query_p99_ms ?? null)} sub="last hour" tone={tone((o.query_p99_ms ?? 0) > 10_000, (o.query_p99_ms ?? 0) > 1000)} />,
    )
  }
  return <div class="cards">{cards}</div>
}

function TopStatements({ db, rows }: { db: Database; rows: TopQuery[] }) {
  if (rows.length === 0) return <p class="muted">No statements in the last 24 hours.</p>
  return (
    <div class="table-wrap">
      <table class="compact">
        <caption class="sr-only">Top statements by total time</caption>
        <thead>
          <tr>
            <th scope="col">Statement</th>
            <th class="num" scope="col">Total time</th>
            <th class="num" scope="col">Calls</th>
            <th class="num" scope="col">Mean</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((q) => (
            <tr key={q.query_hash}>
              <td class="stmt-cell">
                <a class="stmt-text mono" href={`${dbHref(db, `queries/${encodeURIComponent(q.query_hash)}`)}?${TOP_RANGE}`} title={q.query_text}>
                  {q.query_text || q.query_hash}
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

function TopIssues({ db, doctor }: PageProps) {
  if (doctor.error) return <ErrorBox error={doctor.error} />
  if (!doctor.data) return <Loading what="Running the doctor" />
  const issues = doctor.data.top_issues.slice(0, 3)
  if (issues.length === 0) return <p class="success">The doctor found nothing to fix.</p>
  return (
    <ul class="issue-list">
      {issues.map((f) => (
        <li key={f.key} class={`panel ${f.severity}`}>
          <div class="row">
            <SeverityBadge severity={f.severity} />
            <a href={`${dbHref(db, 'doctor')}?finding=${encodeURIComponent(f.key)}`}>{f.title}</a>
          </div>
          <p class="small muted clamp">{f.detail}</p>
        </li>
      ))}
    </ul>
  )
}

export function OverviewPage(props: PageProps) {
  const { db } = props
  const overview = useApi<Overview>(db.last_seen_at ? apiPath(db, '/overview') : null)
  useEvery(30_000, overview.reload)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <Async loaded={overview}>
      {(o) => (
        <div class="stack">
          <AgentNotes notes={o.agent_notes ?? []} />
          <Figures db={db} o={o} doctor={props.doctor.data} />
          <Activity db={db} />
          <div class="grid-2">
            <section>
              <div class="section-head">
                <h2>Top statements</h2>
                <a class="small" href={`${dbHref(db, 'queries')}?${TOP_RANGE}`}>
                  All statements
                </a>
              </div>
              <p class="muted small">The costliest of the last 24 hours by total time.</p>
              <TopStatements db={db} rows={o.top_queries} />
            </section>
            <section>
              <div class="section-head">
                <h2>Top issues</h2>
                <a class="small" href={dbHref(db, 'doctor')}>
                  Open the doctor
                </a>
              </div>
              <TopIssues {...props} />
            </section>
          </div>
        </div>
      )}
    </Async>
  )
}
