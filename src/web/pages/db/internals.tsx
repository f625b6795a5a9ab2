// Internals (PostgreSQL): database counters and gauges (connections, size, wraparound ages,
// transactions, blocks), the background writer and checkpoints, WAL (14+), its archiver and the backups, I/O by backend (16+),
// each as the latest values and charts over the window. PostgreSQL counts a checkpoint's write and sync
// time and its buffers when it ends, so the agent's delta puts a spread checkpoint (written over
// checkpoint_timeout × checkpoint_completion_target, 4.5 minutes by default) into its last minute; the
// charts spread them back over the minutes it ran, which its own write and sync times measure (the
// write time includes the pauses that spread it), ending with the bucket it was seen in.
import { useMemo } from 'preact/hooks'
import { formatValue } from '../../components/chart.tsx'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { Async, Loading, fmtBytes, fmtMs, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import type { Loaded } from '../../components/ui.tsx'
import type { ChartMark } from '../../components/chart.tsx'
import { DbText } from '../../components/invisible.tsx'
import { useEventMarks } from './events.tsx'
import {
  ApiProblem,
  Card,
  Meter,
  NoDataYet,
  TimeRangePicker,
  apiPath,
  fmtDuration,
  fmtRatio,
  useWindow,
} from './common.tsx'
import { SeriesChart, type SeriesSpec } from './series-chart.tsx'
import type { PageProps } from './types.ts'
import { BGWRITER_METRICS, DATABASE_METRICS, IO_METRICS, WAL_METRICS, legends } from '../../../shared/metrics.ts'
import type { Static } from '@sinclair/typebox'
import type {
  Archiver as ArchiverSchema,
  Backups as BackupsSchema,
  BgwriterPoint as BgwriterPointSchema,
  DatabaseStats as DatabaseStatsSchema,
  IoPoint as IoPointSchema,
  IoStats as IoStatsSchema,
  WalStats as WalStatsSchema,
} from '../../../shared/api/internals.ts'

type DatabaseStats = Static<typeof DatabaseStatsSchema>
type WalStats = Static<typeof WalStatsSchema>
type Archiver = Static<typeof ArchiverSchema>
type Backups = Static<typeof BackupsSchema>
type BackupRow = Backups['backups'][number]
type IoStats = Static<typeof IoStatsSchema>
type IoRow = IoStats['stats'][number]
type IoPoint = Static<typeof IoPointSchema>
type BgwriterPoint = Static<typeof BgwriterPointSchema>
/** A point of one chart: its time and the numbers drawn. */
type ChartPoint = { ts: string }
/** The I/O of all backends in one interval. */
type IoTotal = { ts: string; reads: number; writes: number; extends: number }

const DATABASE_CHARTS: SeriesSpec[] = [
  {
    name: 'db-transactions',
    title: 'Transactions per second',
    unit: 'per_s',
    rate: true,
    keys: legends(DATABASE_METRICS, 'xact_commit', 'xact_rollback'),
  },
  {
    name: 'db-blocks',
    title: 'Blocks per second',
    unit: 'per_s',
    rate: true,
    keys: legends(DATABASE_METRICS, 'blks_hit', 'blks_read'),
  },
  {
    name: 'db-connections',
    title: 'Connections',
    unit: 'count',
    keys: legends(DATABASE_METRICS, 'numbackends', 'max_connections'),
  },
  {
    name: 'db-tuples',
    title: 'Rows per second',
    unit: 'per_s',
    rate: true,
    keys: legends(DATABASE_METRICS, 'tup_returned', 'tup_fetched', 'tup_inserted', 'tup_updated', 'tup_deleted'),
  },
]

const BGWRITER_CHARTS: SeriesSpec[] = [
  {
    name: 'bgwriter-checkpoints',
    title: 'Checkpoints',
    unit: 'count',
    total: true,
    keys: legends(BGWRITER_METRICS, 'checkpoints_timed', 'checkpoints_req'),
  },
  {
    name: 'bgwriter-buffers',
    title: 'Buffers written per second',
    unit: 'per_s',
    rate: true,
    keys: legends(BGWRITER_METRICS, 'buffers_checkpoint', 'buffers_clean', 'buffers_backend'),
  },
  {
    name: 'bgwriter-checkpoint-time',
    title: 'Checkpoint write and sync time (spread over the minutes each checkpoint ran)',
    unit: 'ms',
    total: true,
    keys: legends(BGWRITER_METRICS, 'checkpoint_write_time_ms', 'checkpoint_sync_time_ms'),
  },
]

/**
 * Checkpoint time and buffers spread over the buckets each checkpoint ran in: a bucket's
 * checkpoint_write_time_ms and checkpoint_sync_time_ms (PostgreSQL adds them when a checkpoint ends)
 * are taken to end with the bucket, the sync after the writes, and are shared among the buckets that
 * time overlaps in proportion; buffers_checkpoint goes with the write time. The checkpoint counts stay
 * where the checkpoints ended. Buckets the spread reaches without a point get one (the other fields
 * null). Totals are kept exactly; `points` are ascending by ts, `stepMs` their bucket.
 */
export function spreadCheckpoints(points: BgwriterPoint[], stepMs: number): BgwriterPoint[] {
  const SPREAD = ['checkpoint_write_time_ms', 'checkpoint_sync_time_ms', 'buffers_checkpoint'] as const
  const out = new Map<number, BgwriterPoint>()
  for (const p of points) {
    const copy: BgwriterPoint = { ...p }
    for (const k of SPREAD) if (typeof p[k] === 'number') copy[k] = 0
    out.set(Date.parse(p.ts), copy)
  }
  const add = (bucket: number, key: (typeof SPREAD)[number], value: number) => {
    let at = out.get(bucket)
    if (!at) {
      // Only the spread key: the chart reads the absent fields as no value.
      at = { ts: new Date(bucket).toISOString(), [key]: 0 } as unknown as BgwriterPoint
      out.set(bucket, at)
    }
    at[key] = (at[key] ?? 0) + value
  }
  /** `total` shared over [from, to) by overlap with each bucket. */
  const share = (key: (typeof SPREAD)[number], total: number, from: number, to: number) => {
    if (to <= from) return
    for (let b = Math.floor(from / stepMs) * stepMs; b < to; b += stepMs) {
      const overlap = Math.min(to, b + stepMs) - Math.max(from, b)
      if (overlap > 0) add(b, key, (total * overlap) / (to - from))
    }
  }
  for (const p of points) {
    const write = p.checkpoint_write_time_ms ?? 0
    const sync = p.checkpoint_sync_time_ms ?? 0
    const buffers = p.buffers_checkpoint ?? 0
    const end = Date.parse(p.ts) + stepMs
    if (write + sync <= 0) {
      // No time to spread it over (the PostgreSQL settings do not say when a checkpoint started): as counted.
      if (typeof p.buffers_checkpoint === 'number') add(Date.parse(p.ts), 'buffers_checkpoint', buffers)
      continue
    }
    share('checkpoint_sync_time_ms', sync, end - sync, end)
    share('checkpoint_write_time_ms', write, end - sync - write, end - sync)
    if (write > 0) share('buffers_checkpoint', buffers, end - sync - write, end - sync)
    else add(Date.parse(p.ts), 'buffers_checkpoint', buffers)
  }
  return [...out.entries()].sort((a, b) => a[0] - b[0]).map(([, p]) => p)
}

const WAL_CHARTS: SeriesSpec[] = [
  { name: 'wal-bytes', title: 'WAL generated', unit: 'bytes/s', rate: true, keys: legends(WAL_METRICS, 'wal_bytes') },
  {
    name: 'wal-records',
    title: 'WAL records per second',
    unit: 'per_s',
    rate: true,
    keys: legends(WAL_METRICS, 'wal_records', 'wal_fpi'),
  },
]

const IO_CHART: SeriesSpec = {
  name: 'io-ops',
  title: 'I/O per second (all backends)',
  unit: 'per_s',
  rate: true,
  keys: legends(IO_METRICS, 'reads', 'writes', 'extends'),
}

function Charts({
  loaded,
  specs,
  bucket,
  range,
  marks,
}: {
  loaded: Loaded<ChartPoint[]>
  specs: SeriesSpec[]
  bucket: number
  range: [number, number]
  marks: ChartMark[]
}) {
  if (loaded.error) return <ApiProblem error={loaded.error} />
  if (!loaded.data) return <Loading />
  return (
    <div class="chart-grid">
      {specs.map((s) => (
        <SeriesChart key={s.name} points={loaded.data!} spec={s} bucketSeconds={bucket} range={range} marks={marks} />
      ))}
    </div>
  )
}

function DatabaseFigures({ v }: { v: DatabaseStats }) {
  if (v.ts === null)
    return <p class="muted">No database statistics yet: the database_stats collector sends them every poll.</p>
  const connections = v.numbackends ?? null
  const max = v.max_connections ?? null
  const hit = v.blks_hit ?? 0
  const read = v.blks_read ?? 0
  const freezeMax = v.autovacuum_freeze_max_age ?? 200_000_000
  return (
    <>
      <div class="cards">
        <div class="card">
          <div class="label">Connections</div>
          <div class="value">
            {fmtNum(connections)}
            <span class="small muted"> / {fmtNum(max)}</span>
          </div>
          <Meter
            pct={connections !== null && max ? (100 * connections) / max : null}
            warn={80}
            crit={95}
            label="Connections used"
          />
        </div>
        <Card label="Database size" value={fmtBytes(v.database_size_bytes)} />
        <Card
          label="Commits"
          value={formatValue('per_s', v.xact_commit_per_s)}
          sub={`${formatValue('per_s', v.xact_rollback_per_s)} rolled back`}
        />
        <Card label="Cache hits" value={fmtRatio(hit + read > 0 ? hit / (hit + read) : null, 2)} sub="latest poll" />
        <div class="card">
          <div class="label">Transaction ID age</div>
          <div class="value" title={fmtNum(v.xid_age)}>
            {formatValue('count', v.xid_age)}
          </div>
          <Meter
            pct={v.xid_age === null || v.xid_age === undefined ? null : (100 * v.xid_age) / 2_147_483_648}
            warn={25}
            crit={70}
            label="Share of the XID space before wraparound"
          />
          <div class="sub">of 2.1G before wraparound; freeze max age {formatValue('count', freezeMax)}</div>
        </div>
        <Card
          label="Oldest transaction"
          value={
            v.oldest_xact_age_s === null || v.oldest_xact_age_s === undefined
              ? '—'
              : fmtDuration(v.oldest_xact_age_s * 1000)
          }
        />
        <Card
          label="Deadlocks"
          value={fmtNum(v.deadlocks)}
          sub="latest poll"
          tone={(v.deadlocks ?? 0) > 0 ? 'warning' : undefined}
        />
        <Card label="Temp files" value={fmtNum(v.temp_files)} sub={fmtBytes(v.temp_bytes)} />
      </div>
      <p class="muted small">
        Collected {fmtTime(v.ts)}; counters are over the latest poll ({v.interval_seconds ?? '?'} s).
      </p>
    </>
  )
}

function WalFigures({ loaded }: { loaded: Loaded<WalStats> }) {
  if (loaded.error) return <ApiProblem error={loaded.error} />
  if (!loaded.data) return <Loading />
  const v = loaded.data
  if (v.ts === null) return <p class="muted">No WAL statistics yet.</p>
  return (
    <div class="cards">
      <Card
        label="WAL written"
        value={`${fmtBytes(v.wal_bytes_per_s)}/s`}
        sub={`${fmtBytes(v.wal_bytes)} in the latest poll`}
      />
      <Card
        label="Records"
        value={formatValue('per_s', v.wal_records_per_s)}
        sub={`${formatValue('per_s', v.wal_fpi_per_s)} full-page images`}
      />
      <Card
        label="WAL buffers full"
        value={fmtNum(v.wal_buffers_full)}
        tone={(v.wal_buffers_full ?? 0) > 0 ? 'warning' : undefined}
      />
      <Card label="Sync time" value={fmtMs(v.wal_sync_time_ms)} sub={`${fmtNum(v.wal_sync)} syncs`} />
    </div>
  )
}

/** The WAL archiver: archived and failed counts, the last WAL files (the server's text, through DbText), the backlog. */
function ArchiverFigures({ loaded }: { loaded: Loaded<Archiver> }) {
  if (loaded.error) return <ApiProblem error={loaded.error} />
  if (!loaded.data) return <Loading />
  const v = loaded.data
  if (v.ts === null) return <p class="muted">No archiver state yet: the archiver collector sends pg_stat_archiver.</p>
  if (v.archive_mode === 'off')
    return (
      <p class="muted" data-archiver="off">
        WAL archiving is off (archive_mode).
      </p>
    )
  return (
    <div class="cards" data-archiver={v.failing ? 'failing' : 'ok'}>
      <Card
        label="Archived"
        value={fmtNum(v.archived_count)}
        sub={
          v.last_archived_wal ? (
            <>
              last <DbText text={v.last_archived_wal} /> {fmtTime(v.last_archived_time)}
            </>
          ) : (
            'nothing archived yet'
          )
        }
      />
      <Card
        label="Failed"
        value={fmtNum(v.failed_count)}
        tone={v.failing ? 'critical' : undefined}
        sub={
          v.last_failed_wal ? (
            <>
              {v.failing ? 'failing on' : 'last'} <DbText text={v.last_failed_wal} /> {fmtTime(v.last_failed_time)}
            </>
          ) : (
            'no failures'
          )
        }
      />
      <Card
        label="Waiting to archive"
        value={v.ready_count === null ? 'unknown' : fmtNum(v.ready_count)}
        sub={
          v.ready_count === null
            ? 'the role may not list them (pg_monitor)'
            : `${fmtBytes(v.ready_bytes)}${v.oldest_ready_time ? `, oldest since ${fmtTime(v.oldest_ready_time)}` : ''}`
        }
      />
    </div>
  )
}

const BACKUP_COLUMNS: Column<BackupRow>[] = [
  { key: 'label', label: 'Backup', render: (r) => <DbText text={r.label} />, sort: (r) => r.label },
  { key: 'type', label: 'Type', render: (r) => r.type, sort: (r) => r.type },
  {
    key: 'finished',
    label: 'Finished',
    render: (r) => fmtTime(r.finished_at ?? r.started_at),
    sort: (r) => r.finished_at ?? r.started_at ?? '',
  },
  { key: 'size', label: 'Size', num: true, render: (r) => fmtBytes(r.size_bytes), sort: (r) => r.size_bytes ?? 0 },
  {
    key: 'stored',
    label: 'Stored',
    num: true,
    render: (r) => fmtBytes(r.stored_bytes),
    sort: (r) => r.stored_bytes ?? 0,
  },
  {
    key: 'ok',
    label: 'Status',
    render: (r) => (r.ok ? 'ok' : <span class="critical">failed</span>),
    sort: (r) => (r.ok ? 1 : 0),
  },
]

/** Backups as pgBackRest or WAL-G lists them: the last successful and last full, the command's error, the latest backups. */
function BackupFigures({ loaded }: { loaded: Loaded<Backups> }) {
  if (loaded.error) return <ApiProblem error={loaded.error} />
  if (!loaded.data) return <Loading />
  const v = loaded.data
  if (v.tool === null)
    return (
      <p class="muted" data-backups="none">
        No backup status: name the backup tool's listing command in the agent config (backup_command) to see backups
        here.
      </p>
    )
  const when = (b: BackupRow | null) => (b ? fmtTime(b.finished_at ?? b.started_at) : 'none')
  return (
    <>
      <div class="cards" data-backups={v.error ? 'error' : 'ok'}>
        <Card
          label="Last successful"
          value={when(v.last_successful)}
          tone={v.last_successful ? undefined : 'critical'}
          sub={
            v.last_successful ? (
              <>
                <DbText text={v.last_successful.label} /> ({v.last_successful.type})
              </>
            ) : (
              'no successful backup listed'
            )
          }
        />
        <Card
          label="Last full"
          value={when(v.last_full)}
          sub={
            v.last_full ? (
              <>
                <DbText text={v.last_full.label} />, {fmtBytes(v.last_full.size_bytes)}
              </>
            ) : (
              'no full backup listed'
            )
          }
        />
        <Card
          label={v.tool === 'walg' ? 'WAL-G' : 'pgBackRest'}
          value={v.error ? 'failing' : 'ok'}
          tone={v.error ? 'warning' : undefined}
          sub={v.error ? <DbText text={v.error} /> : `checked ${fmtTime(v.checked_at)}`}
        />
      </div>
      {v.backups.length > 0 && (
        <DataTable
          caption="Latest backups"
          columns={BACKUP_COLUMNS}
          rows={v.backups.slice(0, 20)}
          rowKey={(r) => `${r.stanza ?? ''}/${r.label}`}
          compact
        />
      )}
    </>
  )
}

const IO_COLUMNS: Column<IoRow>[] = [
  { key: 'backend', label: 'Backend', render: (r) => r.backend_type, sort: (r) => r.backend_type },
  { key: 'object', label: 'Object', render: (r) => r.object, sort: (r) => r.object },
  { key: 'context', label: 'Context', render: (r) => r.context, sort: (r) => r.context },
  ...(['reads', 'writes', 'extends', 'hits', 'evictions', 'reuses', 'fsyncs'] as const).map(
    (k): Column<IoRow> => ({ key: k, label: k, num: true, render: (r) => fmtNum(r[k]), sort: (r) => r[k] }),
  ),
  {
    key: 'read_time',
    label: 'read time',
    num: true,
    render: (r) => fmtMs(r.read_time_ms),
    sort: (r) => r.read_time_ms,
  },
  {
    key: 'write_time',
    label: 'write time',
    num: true,
    render: (r) => fmtMs(r.write_time_ms),
    sort: (r) => r.write_time_ms,
  },
]

/** I/O points per subject summed per interval, for one chart of all backends. */
function ioTotals(points: IoPoint[] | undefined): IoTotal[] | undefined {
  if (!points) return undefined
  const byTs = new Map<string, IoTotal>()
  for (const p of points) {
    const sum: IoTotal = byTs.get(p.ts) ?? { ts: p.ts, reads: 0, writes: 0, extends: 0 }
    for (const k of ['reads', 'writes', 'extends'] as const) sum[k] += p[k] ?? 0
    byTs.set(p.ts, sum)
  }
  return [...byTs.values()].sort((a, b) => (a.ts < b.ts ? -1 : 1))
}

export function InternalsPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const marks = useEventMarks(db, tw.bounds)
  const on = db.last_seen_at !== null
  const series = <const S extends string>(path: S) =>
    on ? apiPath(db, `${path}?${tw.params}&bucket=${tw.bucket}`) : null
  const stats = useApi(on ? apiPath(db, '/database-stats') : null)
  const statsSeries = useApi(series('/database-stats/timeseries'))
  const bgwriterRaw = useApi(series('/bgwriter'))
  const bgwriterSpread = useMemo(
    () => (bgwriterRaw.data ? spreadCheckpoints(bgwriterRaw.data, tw.bucket * 1000) : undefined),
    [bgwriterRaw.data, tw.bucket],
  )
  const bgwriter: Loaded<BgwriterPoint[]> = { ...bgwriterRaw, data: bgwriterSpread }
  const wal = useApi(on ? apiPath(db, '/wal-stats') : null)
  const walSeries = useApi(series('/wal-stats/timeseries'))
  const archiver = useApi(on ? apiPath(db, '/archiver') : null)
  const backups = useApi(on ? apiPath(db, '/backups') : null)
  const io = useApi(on ? apiPath(db, '/io-stats') : null)
  const ioSeries = useApi(series('/io-stats/timeseries'))
  const ioPoints = useMemo(() => ioTotals(ioSeries.data), [ioSeries.data])
  if (!on) return <NoDataYet db={db} />
  const ioLoaded: Loaded<IoTotal[]> = { ...ioSeries, data: ioPoints }
  return (
    <section>
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
        <nav class="row small" aria-label="Internals sections">
          <button type="button" class="link" onClick={() => jump('internals-database')}>
            Database
          </button>
          <button type="button" class="link" onClick={() => jump('internals-bgwriter')}>
            Checkpoints
          </button>
          <button type="button" class="link" onClick={() => jump('internals-wal')}>
            WAL
          </button>
          <button type="button" class="link" onClick={() => jump('internals-io')}>
            I/O
          </button>
        </nav>
      </div>
      <h2 id="internals-database">Database</h2>
      <Async loaded={stats}>{(v) => <DatabaseFigures v={v} />}</Async>
      <Charts loaded={statsSeries} specs={DATABASE_CHARTS} bucket={tw.bucket} range={tw.bounds} marks={marks} />
      <h2 id="internals-bgwriter">Background writer and checkpoints</h2>
      <Charts loaded={bgwriter} specs={BGWRITER_CHARTS} bucket={tw.bucket} range={tw.bounds} marks={marks} />
      <h2 id="internals-wal">WAL</h2>
      <WalFigures loaded={wal} />
      {!wal.error && (
        <Charts loaded={walSeries} specs={WAL_CHARTS} bucket={tw.bucket} range={tw.bounds} marks={marks} />
      )}
      <h3 id="internals-archiver">WAL archiver</h3>
      <ArchiverFigures loaded={archiver} />
      <h3 id="internals-backups">Backups</h3>
      <BackupFigures loaded={backups} />
      <h2 id="internals-io">I/O by backend</h2>
      {io.error ? (
        <ApiProblem error={io.error} />
      ) : !io.data ? (
        <Loading />
      ) : io.data.stats.length === 0 ? (
        <p class="muted">No I/O statistics yet: the io_stats collector sends pg_stat_io (PostgreSQL 16+).</p>
      ) : (
        <>
          <Charts loaded={ioLoaded} specs={[IO_CHART]} bucket={tw.bucket} range={tw.bounds} marks={marks} />
          <p class="muted small">
            Latest poll ({io.data.interval_seconds ?? '?'} s), collected {fmtTime(io.data.ts)}.
          </p>
          <DataTable
            caption="I/O by backend type, object and context"
            columns={IO_COLUMNS}
            rows={io.data.stats}
            rowKey={(r) => `${r.backend_type}/${r.object}/${r.context}`}
            initialSort={{ key: 'reads' }}
            compact
          />
        </>
      )}
    </section>
  )
}

/** In-page links that leave the hash route alone. */
function jump(id: string) {
  const target = document.getElementById(id)
  target?.scrollIntoView({ block: 'start' })
  target?.setAttribute('tabindex', '-1')
  target?.focus({ preventScroll: true })
}
