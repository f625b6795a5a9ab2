// One table or index (`tables/<schema/name>`, `indexes/<schema/name>`): its latest statistics and
// charts over the window of sizes, rows and scans.
import type { Static } from '@sinclair/typebox'
import { type ComponentChildren, Fragment } from 'preact'
import { useMemo } from 'preact/hooks'
import { SIZE_HINTS, SIZE_LABELS, SIZE_PARTS } from './table-size.ts'
import { ApiError } from '../../api.ts'
import { Chart, type ChartSeries, type Unit } from '../../components/chart.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Code, Empty, type Loaded, ago, fmtBytes, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { TimeRangePicker, apiPath, dbHref, fmtRatio, perBucket, useWindow, withWindow } from './common.tsx'
import type { IndexDetail, TableDetail } from '../../../shared/api/objects.ts'
import { SEQ_SCAN_TITLE, fullReads } from './objects.tsx'
import type { PageProps } from './types.ts'

type Detail = Static<typeof TableDetail> | Static<typeof IndexDetail>
type PointOf<D extends Detail> = D['timeseries'][number]

interface Spec<D extends Detail> {
  name: string
  title: string
  unit: Unit
  /** The point's fields charted, with their labels. */
  keys: [Exclude<keyof PointOf<D>, 'ts'>, string][]
  /** Counter deltas summed per interval: the title says the interval, the running one is left out. */
  total?: boolean
}

const TABLE_CHARTS: Spec<Static<typeof TableDetail>>[] = [
  {
    name: 'table-size',
    title: 'Size: heap, indexes and TOAST',
    unit: 'bytes',
    keys: [
      ['heap_bytes', SIZE_LABELS.heap.toLowerCase()],
      ['index_size_bytes', SIZE_LABELS.indexes.toLowerCase()],
      ['toast_bytes', SIZE_LABELS.toast],
    ],
  },
  {
    name: 'table-rows',
    title: 'Live and dead rows',
    unit: 'count',
    keys: [
      ['n_live_tup', 'live'],
      ['n_dead_tup', 'dead'],
    ],
  },
  {
    name: 'table-scans',
    title: 'Scans',
    unit: 'count',
    total: true,
    keys: [
      ['seq_scan', 'sequential'],
      ['idx_scan', 'index'],
    ],
  },
  {
    name: 'table-writes',
    title: 'Rows written',
    unit: 'count',
    total: true,
    keys: [
      ['n_tup_ins', 'inserted'],
      ['n_tup_upd', 'updated'],
      ['n_tup_del', 'deleted'],
    ],
  },
  // HOT updates stay on their page; those that moved to a new page (PostgreSQL 16+) need index entries and bloat.
  {
    name: 'table-updates',
    title: 'Updates: in place (HOT) and to a new page',
    unit: 'count',
    total: true,
    keys: [
      ['n_tup_upd', 'all'],
      ['n_tup_hot_upd', 'HOT'],
      ['n_tup_newpage_upd', 'to a new page'],
    ],
  },
]

const INDEX_CHARTS: Spec<Static<typeof IndexDetail>>[] = [
  { name: 'index-scans', title: 'Scans', unit: 'count', total: true, keys: [['idx_scan', 'scans']] },
  {
    name: 'index-tuples',
    title: 'Tuples',
    unit: 'count',
    total: true,
    keys: [
      ['idx_tup_read', 'read'],
      ['idx_tup_fetch', 'fetched'],
    ],
  },
  { name: 'index-size', title: 'Size', unit: 'bytes', keys: [['size_bytes', 'size']] },
]

function Charts<D extends Detail>({ detail, specs, range }: { detail: D; specs: Spec<D>[]; range: [number, number] }) {
  const data = useMemo(() => {
    const points = detail.timeseries as PointOf<D>[]
    const times = points.map((p) => Date.parse(p.ts))
    return specs
      .map((s) => ({
        spec: s,
        series: s.keys.map(
          ([k, label]): ChartSeries => ({ label, values: points.map((p) => (p[k] as number | null) ?? null) }),
        ),
      }))
      .map((c) => ({ ...c, times }))
  }, [detail, specs])
  return (
    <div class="chart-grid">
      {data.map(({ spec, series, times }) => (
        <Chart
          key={spec.name}
          name={spec.name}
          title={spec.total ? `${spec.title} ${perBucket(detail.resolution_seconds)}` : spec.title}
          unit={spec.unit}
          times={times}
          series={series}
          stepMs={detail.resolution_seconds * 1000}
          range={range}
          perBucket={spec.total}
        />
      ))}
    </div>
  )
}

function splitItem(item: string | undefined): [string, string] {
  const at = (item ?? '').indexOf('/')
  return at === -1 ? ['public', item ?? ''] : [item!.slice(0, at), item!.slice(at + 1)]
}

function NotFound({ what, back }: { what: string; back: string }) {
  return (
    <Empty title={`No such ${what}`}>
      <p>
        The agent has not reported it. <a href={back}>Back to the list</a>.
      </p>
    </Empty>
  )
}

/** What a table's and an index's pages share: the way back, the title, "no such" for a 404, and the charts under the facts. */
function ObjectDetail<D extends Detail>({
  db,
  item,
  query,
  setQuery,
  kind,
  specs,
  facts,
}: PageProps & { kind: 'table' | 'index'; specs: Spec<D>[]; facts(row: D): ComponentChildren }) {
  const [schema, name] = splitItem(item)
  const tw = useWindow(query)
  const list = kind === 'table' ? 'tables' : 'indexes'
  // The route's answer is a table's or an index's detail (`list`); D is the one this page was given.
  const detail = useApi(
    apiPath(db, `/${list}/${encodeURIComponent(schema)}/${encodeURIComponent(name)}?${tw.params}`),
  ) as Loaded<D>
  const back = withWindow(dbHref(db, list), query)
  if (detail.error instanceof ApiError && detail.error.status === 404) return <NotFound what={kind} back={back} />
  return (
    <section class="stack">
      <p class="small">
        <a href={back}>← All {list}</a>
      </p>
      <h2 class="object-title">
        <span class="muted">
          <DbText text={schema} />.
        </span>
        <DbText text={name} />
      </h2>
      <Async loaded={detail}>
        {(row) => (
          <>
            {facts(row)}
            <div class="toolbar">
              <TimeRangePicker tw={tw} setQuery={setQuery} />
            </div>
            <Charts detail={row} specs={specs} range={tw.bounds} />
          </>
        )}
      </Async>
    </section>
  )
}

export function TableDetailPage(props: PageProps) {
  return (
    <ObjectDetail<Static<typeof TableDetail>>
      {...props}
      kind="table"
      specs={TABLE_CHARTS}
      facts={(t) => (
        <dl class="kv">
          <dt>Size</dt>
          <dd>
            {SIZE_PARTS.map(({ part, field }, i) => (
              <Fragment key={part}>
                {i > 0 && ' · '}
                <span title={SIZE_HINTS[part]}>
                  {SIZE_LABELS[part]} {fmtBytes(t[field])}
                </span>
              </Fragment>
            ))}
          </dd>
          <dt>Rows</dt>
          <dd>
            {fmtNum(t.n_live_tup)} live, {fmtNum(t.n_dead_tup)} dead ({fmtRatio(t.dead_tuple_ratio)})
          </dd>
          <dt>Scans</dt>
          <dd>
            <span title={SEQ_SCAN_TITLE}>{fmtNum(t.seq_scan)} sequential</span> ({fmtNum(t.seq_tup_read)} rows read
            {fullReads(t) === null ? '' : `, the table's rows about ${fmtNum(fullReads(t))} times over`}),{' '}
            {fmtNum(t.idx_scan)} by index
          </dd>
          <dt>Vacuum</dt>
          <dd>
            manual {ago(t.last_vacuum)}, auto {ago(t.last_autovacuum)}{' '}
            <span class="muted small">{fmtTime(t.last_autovacuum)}</span>
          </dd>
          <dt>Analyze</dt>
          <dd>
            manual {ago(t.last_analyze)}, auto {ago(t.last_autoanalyze)}
          </dd>
          <dt>Primary key</dt>
          <dd>
            {t.has_primary_key === false ? (
              <span class="badge badge-warning">none</span>
            ) : t.has_primary_key ? (
              'yes'
            ) : (
              '—'
            )}
          </dd>
        </dl>
      )}
    />
  )
}

export function IndexDetailPage(props: PageProps) {
  const { db, query } = props
  return (
    <ObjectDetail<Static<typeof IndexDetail>>
      {...props}
      kind="index"
      specs={INDEX_CHARTS}
      facts={(i) => (
        <>
          <Code text={i.index_def} />
          <dl class="kv">
            <dt>Table</dt>
            <dd>
              <a
                href={withWindow(dbHref(db, `tables/${encodeURIComponent(`${i.schema_name}/${i.table_name}`)}`), query)}
              >
                <DbText text={i.table_name} />
              </a>
            </dd>
            <dt>Size</dt>
            <dd>{fmtBytes(i.size_bytes)}</dd>
            <dt>Scans</dt>
            <dd>
              {fmtNum(i.idx_scan)} ({fmtNum(i.idx_tup_read)} tuples read, {fmtNum(i.idx_tup_fetch)} fetched)
            </dd>
            <dt>Kind</dt>
            <dd>
              {[i.is_primary && 'primary', i.is_unique && 'unique', !i.is_valid && 'invalid']
                .filter(Boolean)
                .join(', ') || 'plain'}
            </dd>
          </dl>
        </>
      )}
    />
  )
}
