// ClickHouse internals in the store: parts per partition, running merges, mutations and server metrics.
// The latest parts, merges, mutations and server_metrics sections are kept whole, one row per kind,
// and a batch collected before the stored one (a late delivery from the agent's buffer) never
// replaces it. Over time, in the 60-second and 1-hour buckets of metric_gauges / metric_counters
// (sql-internals.ts): the server's gauges (source 'server'), each disk's free and total bytes
// (source 'disk', the disk's name as subject), the query counters' deltas (source 'server') and, from
// each parts section, the total of active parts, the partitions and the largest partition's part
// count (source 'parts'), so a chart or the doctor can see parts pile up.
// (sql-telemetry.ts imports this module and this one imports it back: its exports are used inside
// functions only, never while the modules load.)
import type { IngestBatch, MergeEntry, MutationEntry, PartStat } from '../../shared/wire.ts'
import { dialectDdl } from './ddl.ts'
import type { SqlDriver } from './driver.ts'
import type { Migration } from './migrations.ts'
import type { Intervals, Latest, MetricPoint } from './sql-internals.ts'
import { HOUR_MS, MINUTE_MS, upsertMany, windowClause } from './sql-telemetry.ts'

/** server_metrics keys that are gauges (the bucket keeps the latest value). */
export const SERVER_GAUGE_KEYS = [
  'uptime_s',
  'memory_resident_bytes',
  'memory_tracked_bytes',
  'memory_limit_bytes',
  'os_memory_total_bytes',
  'os_memory_available_bytes',
  'tcp_connections',
  'http_connections',
] as const

/** server_metrics keys that are deltas since the agent's previous cycle (the bucket sums them). */
export const SERVER_COUNTER_KEYS = ['queries_total', 'queries_failed'] as const

/** Per-disk gauges, sent as `disk.<name>.<key>`. */
export const DISK_KEYS = ['free_bytes', 'total_bytes'] as const

/** Gauges derived from each parts section. */
export const PARTS_GAUGE_KEYS = ['active_parts', 'partition_count', 'max_partition_parts'] as const

/** Metric families of this part in metric_gauges / metric_counters. */
export type ClickHouseSource = 'server' | 'disk' | 'parts'

/** Sections kept whole as the latest of their kind. */
const LATEST_KINDS = ['parts', 'merges', 'mutations', 'server_metrics'] as const
type LatestKind = (typeof LATEST_KINDS)[number]

const DDL = `
CREATE TABLE clickhouse_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts {bigint} NOT NULL,
  interval_seconds {double} NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
`

/** Schema of this part (migration 5); its history lives in migration 4's metric tables. */
export const clickhouseMigration: Omit<Migration, 'version'> = {
  name: 'latest ClickHouse parts, merges, mutations and server metrics',
  sqlite: dialectDdl(DDL, 'sqlite'),
  postgres: dialectDdl(DDL, 'postgres'),
}

// ---- ingest ----

const floorTo = (t: number, step: number) => Math.floor(t / step) * step
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)
const DISK_KEY = /^disk\.(.+)\.(free_bytes|total_bytes)$/

interface MetricValue {
  source: ClickHouseSource
  subject: string
  metric: string
  value: number
}

/** The gauges of the batch: server gauges, disks, and the parts section's totals. */
function batchGauges(batch: IngestBatch): MetricValue[] {
  const gauges: MetricValue[] = []
  const metrics = batch.server_metrics ?? {}
  for (const metric of SERVER_GAUGE_KEYS) {
    const value = metrics[metric]
    if (isNumber(value)) gauges.push({ source: 'server', subject: '', metric, value })
  }
  for (const [key, value] of Object.entries(metrics)) {
    const disk = DISK_KEY.exec(key)
    if (disk && isNumber(value)) gauges.push({ source: 'disk', subject: disk[1]!, metric: disk[2]!, value })
  }
  if (batch.parts) {
    const totals = partsTotals(batch.parts)
    for (const metric of PARTS_GAUGE_KEYS) gauges.push({ source: 'parts', subject: '', metric, value: totals[metric] })
  }
  return gauges
}

/** Active parts, partitions and the largest partition's part count of a parts section. */
export function partsTotals(parts: PartStat[]): Record<(typeof PARTS_GAUGE_KEYS)[number], number> {
  let active = 0
  let max = 0
  for (const p of parts) {
    active += p.active_parts
    max = Math.max(max, p.active_parts)
  }
  return { active_parts: active, partition_count: parts.length, max_partition_parts: max }
}

const METRIC_COLUMNS = ['database_id', 'resolution', 'bucket', 'source', 'subject', 'metric', 'value'] as const
const METRIC_CONFLICT = ['database_id', 'source', 'resolution', 'bucket', 'subject', 'metric'] as const

async function applyMetrics(tx: SqlDriver, databaseId: string, batch: IngestBatch) {
  // The resolutions are read here, not at load time (see the header: the modules import each other).
  const prefixes = [MINUTE_MS, HOUR_MS].map((r) => [databaseId, r / 1000, floorTo(batch.collected_at, r)])
  const metrics = batch.server_metrics ?? {}
  const counters = SERVER_COUNTER_KEYS.filter((k) => isNumber(metrics[k]))
  if (counters.length > 0) {
    await upsertMany(
      tx,
      'metric_counters',
      METRIC_COLUMNS,
      prefixes.flatMap((prefix) => counters.map((metric) => [...prefix, 'server', '', metric, metrics[metric]])),
      METRIC_CONFLICT,
      { value: 'metric_counters.value + excluded.value' },
    )
  }
  const gauges = batchGauges(batch)
  if (gauges.length === 0) return
  // A batch collected before the bucket's latest one (a late replay) does not overwrite it.
  const newer = 'excluded.sampled_at >= metric_gauges.sampled_at'
  await upsertMany(
    tx,
    'metric_gauges',
    [...METRIC_COLUMNS, 'sampled_at'],
    prefixes.flatMap((prefix) => gauges.map((g) => [...prefix, g.source, g.subject, g.metric, g.value, batch.collected_at])),
    METRIC_CONFLICT,
    {
      value: `CASE WHEN ${newer} THEN excluded.value ELSE metric_gauges.value END`,
      sampled_at: `CASE WHEN ${newer} THEN excluded.sampled_at ELSE metric_gauges.sampled_at END`,
    },
  )
}

async function applyLatest(tx: SqlDriver, databaseId: string, batch: IngestBatch) {
  const rows = LATEST_KINDS.filter((kind) => batch[kind] !== undefined).map((kind) => [
    databaseId,
    kind,
    batch.collected_at,
    batch.interval_seconds,
    JSON.stringify(batch[kind]),
  ])
  if (rows.length === 0) return
  await upsertMany(
    tx,
    'clickhouse_latest',
    ['database_id', 'kind', 'ts', 'interval_seconds', 'payload'],
    rows,
    ['database_id', 'kind'],
    { ts: 'excluded.ts', interval_seconds: 'excluded.interval_seconds', payload: 'excluded.payload' },
    'excluded.ts >= clickhouse_latest.ts',
  )
}

/** Applies the batch's parts, merges, mutations and server_metrics sections. */
export async function applyClickHouse(tx: SqlDriver, databaseId: string, batch: IngestBatch): Promise<void> {
  if (batch.parts === undefined && batch.merges === undefined && batch.mutations === undefined && batch.server_metrics === undefined) return
  await applyMetrics(tx, databaseId, batch)
  await applyLatest(tx, databaseId, batch)
}

// ---- reads ----

/** Hourly rows only when every interval is whole hours (re-aggregation stays exact); minute rows otherwise. */
function sourceRows(intervals: Intervals, first: number): { sql: string; params: number[] } {
  if (intervals.bucketSeconds % 3600 === 0) return windowClause(intervals, first)
  return {
    sql: `(resolution = 60 AND bucket >= $${first} AND bucket < $${first + 1})`,
    params: [floorTo(intervals.since, MINUTE_MS), intervals.until],
  }
}

function collectPoints(points: Map<string, MetricPoint>, rows: Record<string, unknown>[]) {
  for (const r of rows) {
    const ts = Number(r.ts)
    const subject = String(r.subject)
    const key = JSON.stringify([ts, subject])
    let point = points.get(key)
    if (!point) points.set(key, (point = { ts, subject, values: {} }))
    point.values[String(r.metric)] = Number(r.value)
  }
}

/** One source's metrics per interval and subject: counters summed, gauges the interval's latest value. */
async function metricSeries(driver: SqlDriver, databaseId: string, source: ClickHouseSource, intervals: Intervals): Promise<MetricPoint[]> {
  const rows = sourceRows(intervals, 4)
  const params = [databaseId, source, intervals.bucketSeconds * 1000, ...rows.params]
  const counters =
    source === 'server'
      ? await driver.all(
          `SELECT ts, subject, metric, SUM(value) AS value FROM (
             SELECT bucket - (bucket % $3) AS ts, subject, metric, value
             FROM metric_counters WHERE database_id = $1 AND source = $2 AND ${rows.sql}
           ) b GROUP BY ts, subject, metric`,
          params,
        )
      : []
  const gauges = await driver.all(
    `SELECT ts, subject, metric, value FROM (
       SELECT bucket - (bucket % $3) AS ts, subject, metric, value,
              ROW_NUMBER() OVER (PARTITION BY bucket - (bucket % $3), subject, metric ORDER BY sampled_at DESC, resolution) AS latest
       FROM metric_gauges WHERE database_id = $1 AND source = $2 AND ${rows.sql}
     ) b WHERE latest = 1`,
    params,
  )
  const points = new Map<string, MetricPoint>()
  collectPoints(points, counters)
  collectPoints(points, gauges)
  return [...points.values()].sort((a, b) => a.ts - b.ts || (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0))
}

async function latest<T>(driver: SqlDriver, databaseId: string, kind: LatestKind): Promise<Latest<T> | undefined> {
  const row = await driver.get<{ ts: number; interval_seconds: number; payload: string }>(
    'SELECT ts, interval_seconds, payload FROM clickhouse_latest WHERE database_id = $1 AND kind = $2',
    [databaseId, kind],
  )
  return row ? { ts: Number(row.ts), interval_seconds: Number(row.interval_seconds), payload: JSON.parse(row.payload) as T } : undefined
}

/** Reads for the ClickHouse routes. */
export function clickhouseReader(driver: SqlDriver) {
  return {
    latestParts: (databaseId: string) => latest<PartStat[]>(driver, databaseId, 'parts'),
    latestMerges: (databaseId: string) => latest<MergeEntry[]>(driver, databaseId, 'merges'),
    latestMutations: (databaseId: string) => latest<MutationEntry[]>(driver, databaseId, 'mutations'),
    latestServerMetrics: (databaseId: string) => latest<Record<string, number | null>>(driver, databaseId, 'server_metrics'),
    metricSeries: (databaseId: string, source: ClickHouseSource, intervals: Intervals) => metricSeries(driver, databaseId, source, intervals),
  }
}
export type ClickHouseReader = ReturnType<typeof clickhouseReader>
