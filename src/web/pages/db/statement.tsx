// One statement (`queries/<hash>`): its text and totals over the window, charts of calls, time, rows and
// block I/O and the time spent on it (PostgreSQL) or bytes, memory and errors (ClickHouse), and for PostgreSQL its plans over time,
// grouped by plan (auto_explain logs one per call): one row per plan with its samples, first and last
// seen, min / median / max time or cost, sources and a "plan changed" badge where it replaced another
// (also a marker on the charts); the selected plan's latest sample as a tree, and its samples listed when
// the row is expanded. Where the statement was first counted inside the window, the page says so.
import { Fragment } from 'preact'
import { useEffect, useMemo, useState } from 'preact/hooks'
import type { Static } from '@sinclair/typebox'
import type {
  ClickHouseQueryPoint,
  PostgresQueryDetail,
  PostgresQueryPoint,
  QueryPlan,
} from '../../../shared/api/queries.ts'
import { ApiError, get } from '../../api.ts'
import { Chart, type ChartMark, type ChartSeries, type Unit } from '../../components/chart.tsx'
import { DbText } from '../../components/invisible.tsx'
import {
  Async,
  Code,
  Empty,
  ErrorBox,
  Loading,
  fmtBytes,
  fmtClock,
  fmtMs,
  fmtNum,
  fmtTime,
  useApi,
} from '../../components/ui.tsx'
import { TimeRangePicker, apiPath, dbHref, fmtRatio, perBucket, useWindow } from './common.tsx'
import { type PlanGroup, type Spread, groupPlans } from './plan-groups.ts'
import { PlanTree } from './plan-tree.tsx'
import { ExplainForm } from './explain.tsx'
import { countedSince, ioTime, listQuery, tempBytes } from './statements.tsx'
import type { Database, PageProps } from './types.ts'
import { useSignupMode } from '../auth.tsx'

/** Plans asked for per request: the API's most (src/server/limits.ts explain.max). */
const PLAN_PAGE = 50

type ClickHouseCounters = 'read_bytes' | 'memory_bytes' | 'errors'

/** One bucket of the timeseries as the API sends it: ClickHouse's counters only for ClickHouse. */
type Point = Static<typeof PostgresQueryPoint> & Partial<Pick<Static<typeof ClickHouseQueryPoint>, ClickHouseCounters>>

/** GET /queries/{hash}, of either engine (QueryDetail). */
type Detail = Omit<Static<typeof PostgresQueryDetail>, 'timeseries'> & { timeseries: Point[] }

type Plan = Static<typeof QueryPlan>

interface ChartSpec {
  name: string
  title: string
  unit: Unit
  series: ChartSeries[]
  /** Summed over each interval: the title says the interval, the running one is left out. */
  total?: boolean
}

function chartSpecs(db: Database, points: Point[]): ChartSpec[] {
  const pick = (f: (p: Point) => number | null | undefined) => points.map((p) => f(p) ?? null)
  const mean: ChartSeries[] = [{ label: 'mean', values: pick((p) => p.mean_time_ms) }]
  if (db.engine === 'clickhouse') mean.push({ label: 'p99', values: pick((p) => p.p99_ms) })
  const specs: ChartSpec[] = [
    {
      name: 'statement-calls',
      title: 'Calls',
      unit: 'count',
      total: true,
      series: [{ label: 'calls', values: pick((p) => p.calls) }],
    },
    {
      name: 'statement-mean-time',
      title: db.engine === 'clickhouse' ? 'Mean time and p99' : 'Mean time',
      unit: 'ms',
      series: mean,
    },
    {
      name: 'statement-total-time',
      title: 'Total time',
      unit: 'ms',
      total: true,
      series: [{ label: 'total time', values: pick((p) => p.total_time_ms) }],
    },
    {
      name: 'statement-rows',
      title: 'Rows',
      unit: 'count',
      total: true,
      series: [{ label: 'rows', values: pick((p) => p.rows) }],
    },
  ]
  if (db.engine === 'postgres') {
    specs.push({
      name: 'statement-blocks',
      title: 'Block I/O (shared buffers)',
      unit: 'count',
      total: true,
      series: [
        { label: 'hit', values: pick((p) => p.shared_blks_hit) },
        { label: 'read', values: pick((p) => p.shared_blks_read) },
      ],
    })
    specs.push({
      name: 'statement-io-time',
      title: 'I/O time (block reads and writes)',
      unit: 'ms',
      total: true,
      series: [
        { label: 'read', values: pick((p) => p.blk_read_time_ms) },
        { label: 'write', values: pick((p) => p.blk_write_time_ms) },
      ],
    })
  } else {
    specs.push(
      {
        name: 'statement-read-bytes',
        title: 'Bytes read',
        unit: 'bytes',
        total: true,
        series: [{ label: 'read', values: pick((p) => p.read_bytes) }],
      },
      {
        name: 'statement-memory',
        title: 'Memory (summed over calls)',
        unit: 'bytes',
        total: true,
        series: [{ label: 'memory', values: pick((p) => p.memory_bytes) }],
      },
      {
        name: 'statement-errors',
        title: 'Errors',
        unit: 'count',
        total: true,
        series: [{ label: 'errors', values: pick((p) => p.errors) }],
      },
    )
  }
  return specs
}

function Totals({ db, d, since }: { db: Database; d: Detail; since: number | undefined }) {
  return (
    <dl class="kv">
      <dt>Hash</dt>
      <dd class="mono">
        <DbText text={d.query_hash} />
      </dd>
      <dt>Seen</dt>
      <dd>
        {fmtTime(d.first_seen)} – {fmtTime(d.last_seen)}
      </dd>
      <dt>Calls</dt>
      <dd>
        {fmtNum(d.total_calls)}
        {since !== undefined && (
          <span class="muted small" data-counted-since>
            {' '}
            counted since {fmtClock(since)}, when dbm first saw it: the totals cover less than the time range
            {db.engine === 'postgres' ? ' (pg_stat_statements counts since its last reset)' : ''}
          </span>
        )}
      </dd>
      <dt>Total time</dt>
      <dd>{fmtMs(d.total_time_ms)}</dd>
      <dt>Mean time</dt>
      <dd>{fmtMs(d.mean_time_ms)}</dd>
      <dt>Rows</dt>
      <dd>{fmtNum(d.total_rows)}</dd>
      {db.engine === 'postgres' ? (
        <>
          <dt>Cache hits</dt>
          <dd>
            {fmtRatio(d.cache_hit_ratio, 2)} ({fmtNum(d.shared_blks_hit)} hit, {fmtNum(d.shared_blks_read)} read)
          </dd>
          <dt>I/O time</dt>
          <dd>
            {fmtMs(ioTime(d))} ({fmtMs(d.blk_read_time_ms)} reading, {fmtMs(d.blk_write_time_ms)} writing blocks)
            {ioTime(d) === 0 && (d.shared_blks_read ?? 0) > 0 && (
              <span class="muted small"> · 0 although blocks were read: track_io_timing is probably off</span>
            )}
          </dd>
          <dt>Temp written</dt>
          <dd title="temp_blks_written × 8 kB blocks, over the window">
            {fmtBytes(tempBytes(d.temp_blks_written))}{' '}
            <span class="muted small">({fmtNum(d.temp_blks_written)} blocks of 8 kB)</span>
          </dd>
        </>
      ) : (
        <>
          <dt>p99</dt>
          <dd>{fmtMs(d.p99_ms)}</dd>
          <dt>Bytes read</dt>
          <dd>{fmtBytes(d.read_bytes)}</dd>
          <dt>Memory</dt>
          <dd>{fmtBytes(d.memory_bytes)}</dd>
          <dt>Errors</dt>
          <dd class={d.errors > 0 ? 'sev-critical' : undefined}>{fmtNum(d.errors)}</dd>
        </>
      )}
    </dl>
  )
}

const fmtCost = (n: number | null | undefined) => (n === null || n === undefined ? '—' : n.toFixed(2))

/** "1.2 ms / 3.4 ms / 9.0 ms", or one value when they are all the same. */
function SpreadText({ s, format }: { s: Spread | undefined; format(n: number): string }) {
  if (!s) return <span class="muted">—</span>
  if (s.min === s.max) return <>{format(s.min)}</>
  return (
    <span title="min / median / max">
      {format(s.min)} / {format(s.median)} / {format(s.max)}
    </span>
  )
}

/** The plans of the statement in the window, newest first: PLAN_PAGE at a time, `loadOlder` asks for the ones before. */
function usePlans(
  base: `/databases/${string}/queries/${string}`,
  tw: { since: string; until: string; params: string },
  on: boolean,
) {
  const first = useApi(on ? `${base}/explain?${tw.params}&limit=${PLAN_PAGE}` : null)
  const [older, setOlder] = useState<{ plans: Plan[]; more: boolean; busy?: boolean; error?: string }>({
    plans: [],
    more: true,
  })
  useEffect(() => setOlder({ plans: [], more: true }), [first.data])
  const all = useMemo(() => [...(first.data ?? []), ...older.plans], [first.data, older.plans])
  const more = (first.data?.length ?? 0) >= PLAN_PAGE && older.more
  const loadOlder = async () => {
    const oldest = all[all.length - 1]
    if (!oldest) return
    setOlder((o) => ({ ...o, busy: true, error: undefined }))
    try {
      const page = await get(
        `${base}/explain?since=${encodeURIComponent(tw.since)}&until=${encodeURIComponent(oldest.ts)}&limit=${PLAN_PAGE}`,
      )
      setOlder((o) => ({ plans: [...o.plans, ...page], more: page.length >= PLAN_PAGE }))
    } catch (e) {
      setOlder((o) => ({ ...o, busy: false, error: (e as Error).message }))
    }
  }
  return { loaded: first, all, more, busyOlder: older.busy ?? false, olderError: older.error, loadOlder }
}

function SampleRows({
  group,
  selected,
  select,
}: {
  group: PlanGroup<Plan>
  selected: Plan
  select(sample: Plan): void
}) {
  return (
    <>
      {group.samples.map((p, i) => (
        <tr key={`${p.ts}-${i}`} class={`plan-sample${p === selected ? ' selected' : ''}`}>
          <td colSpan={2} class="muted small num">
            sample {i + 1}
          </td>
          <td class="nowrap">
            <button
              type="button"
              class="link"
              aria-pressed={p === selected}
              title="Show this sample's plan"
              onClick={() => select(p)}
            >
              {fmtTime(p.ts)}
            </button>
          </td>
          <td class="num">{fmtMs(p.actual_time_ms)}</td>
          <td class="num">{fmtCost(p.total_cost)}</td>
          <td class="small" colSpan={2}>
            <DbText text={p.source} /> · {p.seq_scans} seq / {p.index_scans} index scans · rows{' '}
            {fmtNum(p.rows_estimated)} est. / {fmtNum(p.rows_actual)}
          </td>
        </tr>
      ))}
    </>
  )
}

function Plans({
  plans,
  more,
  loadOlder,
  busyOlder,
  olderError,
  query,
  setQuery,
}: {
  plans: Plan[]
  more: boolean
  loadOlder(): void
  busyOlder: boolean
  olderError?: string
  query: URLSearchParams
  setQuery: PageProps['setQuery']
}) {
  const groups = useMemo(() => groupPlans(plans), [plans])
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(() => new Set())
  // `dbm local` has no agent config: its notes name its flag instead.
  const local = useSignupMode() === 'local'
  if (groups.length === 0) {
    return (
      <Empty title="No plans in this time range">
        <p>
          The agent explains the costliest statements every 5 minutes (the <code>explain_plans</code> collector, while
          plan collection is on in Settings), and reads <code>auto_explain</code> plans from <code>pg_log_dir</code>.
        </p>
        {local ? (
          <p data-plans-local>
            It explains only statements run by roles it trusts, reading objects of roles it trusts: under{' '}
            <code>dbm local</code> the database's owner and superusers, and any role you add with{' '}
            <code>--explain-trusted-role NAME</code> when you start it. The Statements page shows its notes on what it
            left out, with the flag to add.
          </p>
        ) : (
          <p>
            It explains only statements run by roles it trusts, reading objects of roles it trusts (
            <code>explain_trusted_roles</code> in its config): the Statements page shows its notes on what it left out,
            with the line to add.
          </p>
        )}
      </Empty>
    )
  }
  const group = groups.find((g) => g.plan_hash === query.get('plan')) ?? groups[0]!
  const sample = group.samples.find((p) => p.ts === query.get('sample')) ?? group.latest
  const toggle = (hash: string) =>
    setExpanded((e) => {
      const next = new Set(e)
      if (next.has(hash)) next.delete(hash)
      else next.add(hash)
      return next
    })
  return (
    <>
      <p class="muted small" role="status">
        {groups.length === 1 ? 'One plan' : `${groups.length} plans`} in the {plans.length}{' '}
        {plans.length === 1 ? 'sample' : 'samples'}
        {more ? ' loaded (the latest)' : ''} of this time range.
      </p>
      <div class="table-wrap">
        <table class="compact plan-groups">
          <caption class="sr-only">Plans of the statement, one row per plan, the one seen last first</caption>
          <thead>
            <tr>
              <th scope="col">Plan</th>
              <th class="num" scope="col">
                Samples
              </th>
              <th scope="col">First – last seen</th>
              <th class="num" scope="col" title="Actual time: min / median / max">
                Time
              </th>
              <th class="num" scope="col" title="Estimated cost: min / median / max">
                Cost
              </th>
              <th scope="col">Source</th>
              <th scope="col">
                <span class="sr-only">Samples listed</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {groups.map((g) => {
              const open = expanded.has(g.plan_hash)
              const on = g === group
              return (
                <Fragment key={g.plan_hash}>
                  <tr class={on ? 'selected' : undefined} data-plan={g.plan_hash}>
                    <td>
                      <button
                        type="button"
                        class="link mono"
                        aria-pressed={on}
                        title="Show this plan"
                        onClick={() => setQuery({ plan: g.plan_hash, sample: undefined }, { replace: true })}
                      >
                        <DbText text={g.plan_hash.slice(0, 12)} />
                      </button>{' '}
                      {g.changedAt.length > 0 && (
                        <span
                          class="badge badge-warning"
                          title={`Replaced another plan at ${g.changedAt.map((t) => fmtTime(t)).join(', ')}`}
                        >
                          plan changed
                        </span>
                      )}
                    </td>
                    <td class="num" data-plan-samples>
                      {fmtNum(g.samples.length)}
                    </td>
                    <td class="nowrap">
                      {g.samples.length === 1
                        ? fmtTime(g.firstSeen)
                        : `${fmtClock(g.firstSeen)} – ${fmtClock(g.lastSeen)}`}
                    </td>
                    <td class="num">
                      <SpreadText s={g.time} format={fmtMs} />
                    </td>
                    <td class="num">
                      <SpreadText s={g.cost} format={fmtCost} />
                    </td>
                    <td>
                      <DbText text={g.sources.join(', ')} />
                    </td>
                    <td>
                      <button
                        type="button"
                        class="link small nowrap"
                        aria-expanded={open}
                        onClick={() => toggle(g.plan_hash)}
                      >
                        {open ? 'Hide samples' : 'List samples'}
                      </button>
                    </td>
                  </tr>
                  {open && (
                    <SampleRows
                      group={g}
                      selected={sample}
                      select={(p) => setQuery({ plan: g.plan_hash, sample: p.ts }, { replace: true })}
                    />
                  )}
                </Fragment>
              )
            })}
          </tbody>
        </table>
      </div>
      {(more || olderError) && (
        <div class="row">
          {more && (
            <button type="button" onClick={loadOlder} disabled={busyOlder}>
              {busyOlder ? 'Loading…' : `Load ${PLAN_PAGE} older samples`}
            </button>
          )}
          {olderError && (
            <span class="error small" role="alert">
              {olderError}
            </span>
          )}
        </div>
      )}
      <h3>
        Plan{' '}
        <span class="mono">
          <DbText text={group.plan_hash.slice(0, 12)} />
        </span>{' '}
        <span class="muted small">
          {sample === group.latest ? 'latest sample' : 'sample'}, {fmtTime(sample.ts)} · <DbText text={sample.source} />
        </span>{' '}
        {group.changedAt.length > 0 && <span class="badge badge-warning">plan changed</span>}
      </h3>
      <PlanTree planJson={sample.plan_json} />
      <details class="raw-plan">
        <summary>EXPLAIN JSON</summary>
        <Code text={JSON.stringify(sample.plan_json, null, 2)} />
      </details>
    </>
  )
}

export function StatementPage({ db, item, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const base = apiPath(db, `/queries/${encodeURIComponent(item ?? '')}`)
  const detail = useApi(`${base}?${tw.params}`)
  const plans = usePlans(base, tw, db.engine === 'postgres')
  const marks = useMemo<ChartMark[]>(
    () => groupPlans(plans.all).flatMap((g) => g.changedAt.map((ts) => ({ ts, label: 'plan changed' }))),
    [plans.all],
  )
  // First seen inside the window: its first bucket may hold part of an interval, and the totals start there.
  const since = detail.data ? countedSince(detail.data.first_seen, tw.bounds[0]) : undefined
  const charts = useMemo(() => {
    if (!detail.data) return undefined
    return { times: detail.data.timeseries.map((p) => Date.parse(p.ts)), specs: chartSpecs(db, detail.data.timeseries) }
  }, [detail.data, db.engine])
  const back = `${dbHref(db, 'queries')}${listQuery(query) ? `?${listQuery(query)}` : ''}`

  if (detail.error instanceof ApiError && detail.error.status === 404) {
    return (
      <section>
        <div class="toolbar">
          <TimeRangePicker tw={tw} setQuery={setQuery} />
        </div>
        <Empty title="No statistics for this statement in this time range">
          <p>
            Pick a longer time range, or go <a href={back}>back to the statements</a>.
          </p>
        </Empty>
      </section>
    )
  }
  return (
    <section class="stack">
      <p class="small">
        <a href={back}>← All statements</a>
      </p>
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
      </div>
      <Async loaded={detail}>
        {(d) => (
          <>
            <div class="stmt-code">
              <Code text={d.query_text || '(no text)'} />
            </div>
            <Totals db={db} d={d} since={since} />
            <div class="chart-grid">
              {charts?.specs.map((s) => (
                <Chart
                  key={s.name}
                  name={s.name}
                  title={s.total ? `${s.title} ${perBucket(d.resolution_seconds)}` : s.title}
                  unit={s.unit}
                  times={charts.times}
                  series={s.series}
                  marks={marks}
                  stepMs={d.resolution_seconds * 1000}
                  range={tw.bounds}
                  perBucket={s.total}
                  // A minute without calls has no bucket: gaps are quiet, not missing. Only a first bucket
                  // that is the statement's first sighting holds part of its interval.
                  partialStarts={since === undefined ? 'none' : 'first'}
                  sparse
                  dataSince={since}
                  sinceLabel="counted since"
                />
              ))}
            </div>
            {db.engine === 'postgres' && <ExplainForm db={db} hash={d.query_hash} text={d.query_text ?? ''} />}
          </>
        )}
      </Async>
      {db.engine === 'postgres' && (
        <section>
          <h2>Plans</h2>
          {plans.loaded.error ? (
            <ErrorBox error={plans.loaded.error} />
          ) : !plans.loaded.data ? (
            <Loading what="Loading the plans" />
          ) : (
            <Plans
              plans={plans.all}
              more={plans.more}
              loadOlder={plans.loadOlder}
              busyOlder={plans.busyOlder}
              olderError={plans.olderError}
              query={query}
              setQuery={setQuery}
            />
          )}
        </section>
      )}
    </section>
  )
}
