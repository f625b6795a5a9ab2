// Custom metrics: the operator's own SQL checks (custom_metrics in the agent config, docs/custom-metrics.md "Checks of
// your own"), one panel each: its name, kind, description, last error, latest value per value column and
// label set (GET /custom-metrics), and a chart of its series over the page's window (GET
// /custom-metrics/{name}), a counter as a rate per second. Names, labels, descriptions and errors come
// from the database or the agent config: they show through DbText. No metric yet: the config to add one.
import { useMemo } from 'preact/hooks'
import { Chart, type ChartSeries } from '../../components/chart.tsx'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Code, Empty, fmtClock, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { NoDataYet, TimeRangePicker, type TimeWindow, apiPath, fmtDuration, useWindow } from './common.tsx'
import type { Database, PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type {
  CustomMetricLatest as CustomMetricLatestSchema,
  CustomMetricSeries as CustomMetricSeriesSchema,
  CustomMetricView as CustomMetricViewSchema,
} from '../../../shared/api/custom-metrics.ts'

type CustomMetric = Static<typeof CustomMetricViewSchema>
type CustomMetricSeries = Static<typeof CustomMetricSeriesSchema>
type Latest = Static<typeof CustomMetricLatestSchema>

/** Label sets listed per metric (the largest values first) and series drawn in its chart. */
const MAX_ROWS = 50
const MAX_SERIES = 10

/** The README's example, for the empty state. */
const EXAMPLE = `databases:
  - name: shop
    dsn: postgres://dbm_agent@db1:5432/shop
    custom_metrics:
      - name: outbox_rows
        sql: SELECT count(*) AS rows FROM outbox
        values: [rows]
        interval: 1m
        description: Rows waiting in the outbox
        alert: {above: 10000, for: 5m, severity: warning}
      - name: orders_by_state
        sql: SELECT state, count(*) AS n FROM orders GROUP BY state
        labels: [state]
        values: [n]
      - name: orders_created
        sql: SELECT last_value AS v FROM orders_id_seq
        values: [v]
        kind: counter`

/** A number as the query returned it (to 15 significant digits, a double's precision), in the reader's locale. */
export function fmtExact(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—'
  return n.toLocaleString(undefined, { maximumSignificantDigits: 15 })
}

/** The name of one series: its label set (`state=open, queue=mail`), with the value column when the metric has several. */
function seriesName(
  metric: Pick<CustomMetric, 'name' | 'values'>,
  column: string,
  labels: Record<string, string>,
): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}=${v}`)
  if (metric.values.length > 1) parts.unshift(column)
  return parts.length ? parts.join(', ') : metric.name
}

function alertText(alert: NonNullable<CustomMetric['alert']>, kind: CustomMetric['kind']): string {
  const window = alert.for_seconds === 0 ? 'the latest value' : `for ${fmtDuration(alert.for_seconds * 1000)}`
  return `alert (${alert.severity}) when ${alert.op} ${fmtExact(alert.threshold)}${kind === 'counter' ? '/s' : ''} ${window}`
}

/** "every 1 min", "every 30 s", "every 1 h"; an odd interval in minutes and seconds. */
function everyText(seconds: number): string {
  if (seconds < 60) return `every ${seconds} s`
  if (seconds % 3600 === 0) return `every ${seconds / 3600} h`
  if (seconds % 60 === 0) return `every ${seconds / 60} min`
  return `every ${fmtDuration(seconds * 1000)}`
}

function latestColumns(metric: CustomMetric): Column<Latest>[] {
  const counter = metric.kind === 'counter'
  // The definition's label columns, and any other a stored value carries (a definition changed since).
  const labels = [...new Set([...metric.labels, ...metric.latest.flatMap((r) => Object.keys(r.labels))])]
  return [
    ...(metric.values.length > 1
      ? [{ key: 'column', label: 'Column', render: (r: Latest) => r.column, sort: (r: Latest) => r.column }]
      : []),
    ...labels.map((name) => ({
      key: `label:${name}`,
      label: name,
      render: (r: Latest) => (
        <span class="custom-label" data-label={name}>
          <DbText text={r.labels[name] ?? ''} />
        </span>
      ),
      sort: (r: Latest) => r.labels[name] ?? '',
    })),
    {
      key: 'value',
      label: counter ? 'Rate per second' : 'Value',
      num: true,
      render: (r: Latest) => (
        <span data-value>
          {counter ? (r.value === null ? 'after the next reading' : `${fmtNum(r.value)}/s`) : fmtExact(r.value)}
        </span>
      ),
      sort: (r: Latest) => r.value,
    },
    ...(counter
      ? [
          {
            key: 'raw',
            label: 'Last reading',
            num: true,
            render: (r: Latest) => fmtExact(r.raw_value),
            sort: (r: Latest) => r.raw_value,
          },
        ]
      : []),
    {
      key: 'ts',
      label: 'Collected',
      render: (r: Latest) => <span title={fmtTime(r.ts)}>{fmtClock(r.ts)}</span>,
      sort: (r: Latest) => (r.ts ? Date.parse(r.ts) : null),
    },
  ]
}

/** One metric's series over the window, on one time axis; the series with the largest latest values when there are many. */
function chartData(
  metric: CustomMetric,
  answer: CustomMetricSeries,
): { times: number[]; series: ChartSeries[]; left: number } {
  const drawn = answer.series.filter((s) => s.points.length > 0)
  const last = (s: CustomMetricSeries['series'][number]) => s.points[s.points.length - 1]?.value ?? -Infinity
  const shown = [...drawn].sort((a, b) => last(b) - last(a)).slice(0, MAX_SERIES)
  const times = [...new Set(shown.flatMap((s) => s.points.map((p) => Date.parse(p.ts))))].sort((a, b) => a - b)
  const index = new Map(times.map((t, i) => [t, i]))
  const series = shown.map((s) => {
    const values: (number | null)[] = times.map(() => null)
    for (const p of s.points) values[index.get(Date.parse(p.ts))!] = p.value
    return { label: seriesName(metric, s.column, s.labels), values }
  })
  return { times, series, left: drawn.length - shown.length }
}

function MetricChart({ db, metric, tw }: { db: Database; metric: CustomMetric; tw: TimeWindow }) {
  const answer = useApi(
    apiPath(db, `/custom-metrics/${encodeURIComponent(metric.name)}?${tw.params}&bucket=${tw.bucket}`),
  )
  const data = useMemo(() => (answer.data ? chartData(metric, answer.data) : undefined), [answer.data, metric])
  const counter = metric.kind === 'counter'
  return (
    <Async loaded={answer}>
      {(a) =>
        data!.times.length === 0 ? (
          <p class="muted small">No values in this time range.</p>
        ) : (
          <>
            <Chart
              name={`custom-${metric.name}`}
              title={counter ? `${metric.name}, rate per second` : metric.name}
              unit={counter ? 'per_s' : 'count'}
              times={data!.times}
              series={data!.series}
              stepMs={a.bucket_seconds * 1000}
              range={tw.bounds}
              height={200}
            />
            <p class="muted small">
              Each interval's latest value{counter ? ', as a rate per second between two readings' : ''}.
              {data!.left > 0
                ? ` ${data!.left} more label ${data!.left === 1 ? 'set is' : 'sets are'} not drawn (the largest values are).`
                : ''}
            </p>
          </>
        )
      }
    </Async>
  )
}

function MetricPanel({ db, metric, tw }: { db: Database; metric: CustomMetric; tw: TimeWindow }) {
  const rows = useMemo(
    () => [...metric.latest].sort((a, b) => (b.value ?? -Infinity) - (a.value ?? -Infinity)).slice(0, MAX_ROWS),
    [metric],
  )
  const columns = useMemo(() => latestColumns(metric), [metric])
  return (
    <article class="panel custom-metric" data-metric={metric.name}>
      <div class="custom-metric-head">
        <h2>
          <code>
            <DbText text={metric.name} />
          </code>
        </h2>
        <span class="badge badge-info">{metric.kind}</span>
        <span class="muted small">{everyText(metric.interval_seconds)}</span>
      </div>
      {metric.description && (
        <p data-description>
          <DbText text={metric.description} />
        </p>
      )}
      {metric.alert && <p class="muted small">{alertText(metric.alert, metric.kind)}</p>}
      {metric.last_error && (
        <div class="banner banner-warning" role="status" data-error>
          <p>
            <strong>Last error</strong>{' '}
            {metric.last_error_at ? (
              <span title={fmtTime(metric.last_error_at)}>at {fmtClock(metric.last_error_at)}</span>
            ) : (
              ''
            )}{' '}
            ({fmtNum(metric.error_count)} {metric.error_count === 1 ? 'error' : 'errors'} since it was defined):{' '}
            <span class="custom-error">
              <DbText text={metric.last_error} />
            </span>
          </p>
        </div>
      )}
      {metric.latest.length === 0 ? (
        <p class="muted small">
          {metric.last_error
            ? 'No value: its query has not succeeded yet.'
            : 'No value yet: the agent sends one after its first run.'}
        </p>
      ) : (
        <>
          <DataTable
            caption={`Latest values of ${metric.name}`}
            columns={columns}
            rows={rows}
            rowKey={(r) => `${r.column}\u0000${JSON.stringify(r.labels)}`}
            compact
          />
          {metric.latest.length > rows.length && (
            <p class="muted small">
              The {rows.length} largest of {fmtNum(metric.latest.length)} label sets.
            </p>
          )}
        </>
      )}
      {metric.latest.length > 0 && <MetricChart db={db} metric={metric} tw={tw} />}
    </article>
  )
}

function NoCustomMetrics() {
  return (
    <Empty title="No custom metric yet">
      <p>
        Add SQL checks of your own to this database's entry in the agent config, under <code>custom_metrics</code>: each
        runs at its interval, its values are kept like the built-in ones, charted here, exported on{' '}
        <code>/metrics</code> and may raise an alert. docs/custom-metrics.md says what each key does; the{' '}
        <a href="#/settings/agent">agent setup page</a> gives the config to start from.
      </p>
      <Code text={EXAMPLE} />
    </Empty>
  )
}

export function CustomMetricsPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const list = useApi(db.last_seen_at ? apiPath(db, '/custom-metrics') : null)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <Async loaded={list}>
        {(l) =>
          l.metrics.length === 0 ? (
            <NoCustomMetrics />
          ) : (
            <>
              <div class="toolbar">
                <TimeRangePicker tw={tw} setQuery={setQuery} />
              </div>
              {l.metrics.map((m) => (
                <MetricPanel key={m.name} db={db} metric={m} tw={tw} />
              ))}
            </>
          )
        }
      </Async>
    </section>
  )
}
