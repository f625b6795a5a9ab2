// One statement (`queries/<hash>`): its text and totals over the window, charts of calls, time, rows and
// block I/O (PostgreSQL) or bytes, memory and errors (ClickHouse), and for PostgreSQL its plans over time:
// a list with a "plan changed" badge where plan_hash changed (also a marker on the charts), and the
// selected plan as a tree.
import { useMemo } from 'preact/hooks'
import type { QueryPoint, StoredPlan } from '../../../server/store/sql-telemetry.ts'
import { ApiError } from '../../api.ts'
import { Chart, type ChartMark, type ChartSeries, type Unit } from '../../components/chart.tsx'
import { Async, Code, Empty, ErrorBox, Loading, fmtBytes, fmtMs, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { TimeRangePicker, apiPath, dbHref, fmtRatio, perBucket, useWindow, withWindow } from './common.tsx'
import { PlanTree } from './plan-tree.tsx'
import type { StatementRow } from './statements.tsx'
import type { Database, PageProps } from './types.ts'

type ClickHouseCounters = 'read_bytes' | 'memory_bytes' | 'errors'

/** One bucket of the timeseries as the API sends it (pointView): ClickHouse's counters only for ClickHouse. */
interface Point extends Omit<QueryPoint, 'ts' | ClickHouseCounters>, Partial<Pick<QueryPoint, ClickHouseCounters>> {
  ts: string
}

interface Detail extends StatementRow {
  first_seen: string
  last_seen: string
  since: string
  until: string
  resolution_seconds: number
  timeseries: Point[]
}

/** A stored plan as the API sends it. */
interface Plan extends Omit<StoredPlan, 'ts' | 'source'> {
  ts: string
  source: 'sampled' | 'auto_explain'
}

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
    { name: 'statement-calls', title: 'Calls', unit: 'count', total: true, series: [{ label: 'calls', values: pick((p) => p.calls) }] },
    { name: 'statement-mean-time', title: db.engine === 'clickhouse' ? 'Mean time and p99' : 'Mean time', unit: 'ms', series: mean },
    { name: 'statement-total-time', title: 'Total time', unit: 'ms', total: true, series: [{ label: 'total time', values: pick((p) => p.total_time_ms) }] },
    { name: 'statement-rows', title: 'Rows', unit: 'count', total: true, series: [{ label: 'rows', values: pick((p) => p.rows) }] },
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
  } else {
    specs.push(
      { name: 'statement-read-bytes', title: 'Bytes read', unit: 'bytes', total: true, series: [{ label: 'read', values: pick((p) => p.read_bytes) }] },
      { name: 'statement-memory', title: 'Memory (summed over calls)', unit: 'bytes', total: true, series: [{ label: 'memory', values: pick((p) => p.memory_bytes) }] },
      { name: 'statement-errors', title: 'Errors', unit: 'count', total: true, series: [{ label: 'errors', values: pick((p) => p.errors) }] },
    )
  }
  return specs
}

function Totals({ db, d }: { db: Database; d: Detail }) {
  return (
    <dl class="kv">
      <dt>Hash</dt>
      <dd class="mono">{d.query_hash}</dd>
      <dt>Seen</dt>
      <dd>
        {fmtTime(d.first_seen)} – {fmtTime(d.last_seen)}
      </dd>
      <dt>Calls</dt>
      <dd>{fmtNum(d.total_calls)}</dd>
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
          <dt>Temp blocks written</dt>
          <dd>{fmtNum(d.temp_blks_written)}</dd>
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

function Plans({ plans, selected, select }: { plans: Plan[]; selected: number; select(i: number): void }) {
  if (plans.length === 0) {
    return (
      <Empty title="No plans in this time range">
        <p>
          The agent explains the costliest statements every 5 minutes (the <code>explain_plans</code> collector, while plan collection is on in
          Settings), and reads <code>auto_explain</code> plans from <code>pg_log_dir</code>.
        </p>
      </Empty>
    )
  }
  const index = selected < plans.length ? selected : 0
  const plan = plans[index]!
  return (
    <>
      <div class="table-wrap">
        <table class="compact">
          <caption class="sr-only">Plans, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Plan</th>
              <th scope="col">Source</th>
              <th class="num" scope="col">Cost</th>
              <th class="num" scope="col">Time</th>
              <th class="num" scope="col">Seq / index scans</th>
              <th class="num" scope="col">Rows est. / actual</th>
            </tr>
          </thead>
          <tbody>
            {plans.map((p, i) => (
              <tr key={`${p.ts}-${i}`} class={i === index ? 'selected' : undefined}>
                <td>
                  <button type="button" class="link" aria-pressed={i === index} onClick={() => select(i)}>
                    {fmtTime(p.ts)}
                  </button>
                </td>
                <td>
                  <span class="mono small">{p.plan_hash.slice(0, 12)}</span> {p.plan_changed && <span class="badge badge-warning">plan changed</span>}
                </td>
                <td>{p.source}</td>
                <td class="num">{p.total_cost === null ? '—' : p.total_cost.toFixed(2)}</td>
                <td class="num">{fmtMs(p.actual_time_ms)}</td>
                <td class="num">
                  {p.seq_scans} / {p.index_scans}
                </td>
                <td class="num">
                  {fmtNum(p.rows_estimated)} / {fmtNum(p.rows_actual)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <h3>
        Plan of {fmtTime(plan.ts)} {plan.plan_changed && <span class="badge badge-warning">plan changed</span>}
      </h3>
      <PlanTree planJson={plan.plan_json} />
      <details class="raw-plan">
        <summary>EXPLAIN JSON</summary>
        <Code text={JSON.stringify(plan.plan_json, null, 2)} />
      </details>
    </>
  )
}

export function StatementPage({ db, item, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const base = apiPath(db, `/queries/${encodeURIComponent(item ?? '')}`)
  const detail = useApi<Detail>(`${base}?${tw.params}`)
  const plans = useApi<Plan[]>(db.engine === 'postgres' ? `${base}/explain?${tw.params}&limit=50` : null)
  const selected = Number(query.get('plan') ?? 0) || 0
  const marks = useMemo<ChartMark[]>(
    () => (plans.data ?? []).filter((p) => p.plan_changed).map((p) => ({ ts: Date.parse(p.ts), label: 'plan changed' })),
    [plans.data],
  )
  const charts = useMemo(() => {
    if (!detail.data) return undefined
    return { times: detail.data.timeseries.map((p) => Date.parse(p.ts)), specs: chartSpecs(db, detail.data.timeseries) }
  }, [detail.data, db.engine])
  const back = withWindow(dbHref(db, 'queries'), query)

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
            <Totals db={db} d={d} />
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
                />
              ))}
            </div>
          </>
        )}
      </Async>
      {db.engine === 'postgres' && (
        <section>
          <h2>Plans</h2>
          {plans.error ? (
            <ErrorBox error={plans.error} />
          ) : !plans.data ? (
            <Loading what="Loading the plans" />
          ) : (
            <Plans plans={plans.data} selected={selected} select={(i) => setQuery({ plan: String(i) })} />
          )}
        </section>
      )}
    </section>
  )
}
