// Engine internals over time: wait events, replication lag and slots, bgwriter/checkpointer, WAL,
// I/O and database-wide statistics. Like statement statistics, everything lands at ingest in
// 60-second and 1-hour buckets: wait counts and counter deltas are summed (a zero delta of this part's
// counters adds a row only where reads need one, see writeMetrics), lags keep their maximum, gauges
// keep the bucket's latest value. The latest section of each kind is kept whole, with the
// cycle's interval, for the "current" endpoints. Reads re-aggregate the stored buckets into
// intervals of any whole number of seconds (hourly rows only when every interval is whole hours).
// The metric tables, their writer and reader, and the latest-section writer and reader serve the
// ClickHouse part too (clickhouse/clickhouse.ts).
import type { IngestBatch, IoStatRow, ReplicationStatus, WaitSample } from '../../../shared/wire.ts'
import { BGWRITER_KEYS, DATABASE_COUNTER_KEYS, DATABASE_GAUGE_KEYS, IO_KEYS, WAL_KEYS } from '../../../shared/metrics.ts'
import type { SqlDriver } from '../driver.ts'
import { int64Counter, saturatingAdd } from '../sums.ts'
import { type Fragment, sql } from '../sql.ts'
import { HOUR_MS, MINUTE_MS, type Window, floorTo, windowClause } from '../window.ts'
import type { Reads, Writes } from '../ingest/batch.ts'

/**
 * Metric families in metric_counters / metric_gauges: PostgreSQL's bgwriter, wal, database and io (I/O
 * rows carry "backend_type/object/context" as subject), ClickHouse's server, disk (the disk's name as
 * subject) and parts (clickhouse/clickhouse.ts), custom metrics (custom-metrics/custom-metrics.ts, the series key as subject), and the store's own ingest: which minutes and hours a batch
 * carrying the tables or indexes section was sampled in (objects/objects.ts).
 */
export type MetricSource = 'bgwriter' | 'wal' | 'database' | 'io' | 'server' | 'disk' | 'parts' | 'ingest' | 'host' | 'custom'

/** Sections kept whole as the latest of their kind. */
const LATEST_KINDS = ['replication', 'bgwriter', 'wal_stats', 'io_stats', 'database_stats'] as const
export type LatestKind = (typeof LATEST_KINDS)[number]

// ---- ingest ----

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)

/** The first columns of every bucketed row, once per resolution. */
function bucketPrefixes(databaseId: string, collectedAt: number): [string, number, number][] {
  return [MINUTE_MS, HOUR_MS].map((r) => [databaseId, r / 1000, floorTo(collectedAt, r)])
}

/** How far a wait entry's minute may be from its batch's time: an hour. */
const WAIT_MINUTE_SLACK_MS = HOUR_MS

/**
 * The batch's samples as wait_stats rows of each minute and hour, summed per bucket and event (a batch
 * may name one event twice, or one event in two minutes). An entry counts in its own minute; without
 * one (older agents), or one implausibly far from the batch, in the batch's.
 */
function waitRows(databaseId: string, collectedAt: number, waits: WaitSample[]): unknown[][] {
  const byKey = new Map<string, unknown[]>()
  for (const w of waits) {
    const at = w.minute !== undefined && Math.abs(w.minute - collectedAt) <= WAIT_MINUTE_SLACK_MS ? w.minute : collectedAt
    const count = Math.round(w.count)
    for (const resolution of [MINUTE_MS, HOUR_MS]) {
      const bucket = floorTo(at, resolution)
      const key = JSON.stringify([resolution, bucket, w.wait_event_type, w.wait_event])
      const row = byKey.get(key)
      if (row) {
        row[5] = (row[5] as number) + count
        row[6] = (row[6] as number) + w.total_duration_ms
      } else byKey.set(key, [databaseId, resolution / 1000, bucket, w.wait_event_type, w.wait_event, count, w.total_duration_ms])
    }
  }
  // An event named ~1,000 times at the wire's maximum sums past BIGINT in JS: bound as its maximum.
  for (const row of byKey.values()) row[5] = int64Counter(row[5] as number)
  return [...byKey.values()]
}

function applyWaits(writes: Writes, databaseId: string, collectedAt: number, waits: WaitSample[]) {
  writes.upsert(
    'wait_stats',
    ['database_id', 'resolution', 'bucket', 'wait_event_type', 'wait_event', 'count', 'total_duration_ms'],
    waitRows(databaseId, collectedAt, waits),
    {
      key: ['database_id', 'resolution', 'bucket', 'wait_event_type', 'wait_event'],
      update: { count: saturatingAdd('wait_stats.count', 'excluded.count'), total_duration_ms: 'wait_stats.total_duration_ms + excluded.total_duration_ms' },
    },
  )
}

function applyReplication(writes: Writes, databaseId: string, collectedAt: number, status: ReplicationStatus) {
  const prefixes = bucketPrefixes(databaseId, collectedAt)
  const bytes = isNumber(status.replication_lag_bytes) ? Math.round(status.replication_lag_bytes) : null
  const seconds = isNumber(status.replication_lag_seconds) ? status.replication_lag_seconds : null
  if (bytes !== null || seconds !== null) {
    writes.upsert(
      'replication_lag',
      ['database_id', 'resolution', 'bucket', 'replication_lag_bytes', 'replication_lag_seconds'],
      prefixes.map((prefix) => [...prefix, bytes, seconds]),
      {
        key: ['database_id', 'resolution', 'bucket'],
        update: {
          replication_lag_bytes: writes.sqlDialect.greatest('replication_lag.replication_lag_bytes', 'excluded.replication_lag_bytes'),
          replication_lag_seconds: writes.sqlDialect.greatest('replication_lag.replication_lag_seconds', 'excluded.replication_lag_seconds'),
        },
      },
    )
  }
  const slots = new Map<string, number>()
  for (const s of status.slots) {
    if (isNumber(s.lag_bytes)) slots.set(s.slot_name, Math.max(slots.get(s.slot_name) ?? 0, Math.round(s.lag_bytes)))
  }
  writes.upsert(
    'replication_slot_lag',
    ['database_id', 'resolution', 'bucket', 'slot_name', 'lag_bytes'],
    prefixes.flatMap((prefix) => [...slots].map(([name, lag]) => [...prefix, name, lag])),
    { key: ['database_id', 'resolution', 'bucket', 'slot_name'], update: { lag_bytes: writes.sqlDialect.greatest('replication_slot_lag.lag_bytes', 'excluded.lag_bytes') } },
  )
}

export interface MetricValue {
  source: MetricSource
  subject: string
  metric: string
  value: number
}

/** The known, non-null keys of one counter map. */
function pick(source: MetricSource, subject: string, map: Record<string, number | null>, keys: readonly string[]): MetricValue[] {
  return keys.filter((k) => isNumber(map[k])).map((metric) => ({ source, subject, metric, value: map[metric] as number }))
}

export const ioSubject = (row: Pick<IoStatRow, 'backend_type' | 'object' | 'context'>) => `${row.backend_type}/${row.object}/${row.context}`

/** Counter deltas of the batch, summed per (source, subject, metric). */
function batchCounters(batch: IngestBatch): MetricValue[] {
  const values = [
    ...pick('bgwriter', '', batch.bgwriter ?? {}, BGWRITER_KEYS),
    ...pick('wal', '', batch.wal_stats ?? {}, WAL_KEYS),
    ...pick('database', '', batch.database_stats ?? {}, DATABASE_COUNTER_KEYS),
    ...(batch.io_stats ?? []).flatMap((row) => pick('io', ioSubject(row), row.counters, IO_KEYS)),
  ]
  const merged = new Map<string, MetricValue>()
  for (const v of values) {
    const key = JSON.stringify([v.source, v.subject, v.metric])
    const entry = merged.get(key)
    if (entry) entry.value += v.value
    else merged.set(key, { ...v })
  }
  return [...merged.values()]
}

const METRIC_COLUMNS = ['database_id', 'resolution', 'bucket', 'source', 'subject', 'metric', 'value'] as const
const METRIC_CONFLICT = ['database_id', 'source', 'resolution', 'bucket', 'subject', 'metric'] as const

/**
 * Which counter families (source and subject) of a batch already have rows in its hour, so that its
 * zero deltas need no rows (see writeMetrics); undefined: write every delta.
 */
export type HourCounted = (source: MetricSource, subject: string) => boolean

const familyOf = (c: MetricValue) => JSON.stringify([c.source, c.subject])

/**
 * The counter rows of one resolution: every delta, or with `skipZeros` only those that moved plus the
 * first of each family (source and subject), so the family's bucket has a row whichever moved.
 */
function counterRows(prefix: unknown[], counters: MetricValue[], skipZeros: (c: MetricValue) => boolean): unknown[][] {
  const marked = new Set<string>()
  const rows: unknown[][] = []
  for (const c of counters) {
    const family = familyOf(c)
    const first = !marked.has(family)
    marked.add(family)
    if (c.value !== 0 || first || !skipZeros(c)) rows.push([...prefix, c.source, c.subject, c.metric, c.value])
  }
  return rows
}

/**
 * Adds counter deltas to their buckets and sets gauges to the bucket's latest sample, at both
 * resolutions. Each (source, subject, metric) may appear once per list.
 * With `hourCounted` (PostgreSQL's internals), a zero delta adds no row, but for the first counter of
 * each family and in an hour where the family has no row yet: so every bucket a batch landed in has a
 * row of each of its families, and each hour's rows name every counter the family reported in it
 * (zeros included), which reads take as the counters a sampled minute without their row reads 0 for
 * (metricSeries). An idle database's batch has about two thirds of its counters at zero (bgwriter,
 * I/O), rows it wrote twice (minute, hour) every batch.
 */
export function writeMetrics(writes: Writes, databaseId: string, collectedAt: number, counters: MetricValue[], gauges: MetricValue[], hourCounted?: HourCounted) {
  const prefixes = bucketPrefixes(databaseId, collectedAt)
  const [minute, hour] = prefixes
  const skip = hourCounted !== undefined
  writes.upsert(
    'metric_counters',
    METRIC_COLUMNS,
    [...counterRows(minute!, counters, () => skip), ...counterRows(hour!, counters, (c) => skip && hourCounted(c.source, c.subject))],
    { key: METRIC_CONFLICT, update: { value: 'metric_counters.value + excluded.value' } },
  )
  // A batch collected before the bucket's latest one (a late replay) does not overwrite it.
  const newer = 'excluded.sampled_at >= metric_gauges.sampled_at'
  writes.upsert(
    'metric_gauges',
    [...METRIC_COLUMNS, 'sampled_at'],
    prefixes.flatMap((prefix) => gauges.map((g) => [...prefix, g.source, g.subject, g.metric, g.value, collectedAt])),
    {
      key: METRIC_CONFLICT,
      update: {
        value: `CASE WHEN ${newer} THEN excluded.value ELSE metric_gauges.value END`,
        sampled_at: `CASE WHEN ${newer} THEN excluded.sampled_at ELSE metric_gauges.sampled_at END`,
      },
    },
  )
}

/** Tables that keep the latest section of each kind whole: this part's and the ClickHouse part's. */
export type LatestTable = 'internals_latest' | 'clickhouse_latest'

/** Keeps the batch's sections of the given kinds as the latest ones, unless a newer batch's are stored. */
export function writeLatest(writes: Writes, table: LatestTable, databaseId: string, batch: IngestBatch, kinds: readonly (keyof IngestBatch)[]) {
  writes.upsert(
    table,
    ['database_id', 'kind', 'ts', 'interval_seconds', 'payload'],
    kinds.filter((kind) => batch[kind] !== undefined).map((kind) => [databaseId, kind, batch.collected_at, batch.interval_seconds, JSON.stringify(batch[kind])]),
    {
      key: ['database_id', 'kind'],
      update: { ts: 'excluded.ts', interval_seconds: 'excluded.interval_seconds', payload: 'excluded.payload' },
      onlyIf: `excluded.ts >= ${table}.ts`,
    },
  )
}

/** The sources of this part's counters, whose zero deltas writeMetrics skips (and metricSeries fills). */
const COUNTER_SOURCES = ['bgwriter', 'wal', 'database', 'io'] as const
const QUIET_SKIPPED: ReadonlySet<MetricSource> = new Set(COUNTER_SOURCES)

/**
 * The batch's waits, replication, bgwriter, wal_stats, io_stats and database_stats sections: registers
 * the read its counters depend on (which families have rows in the batch's hour, see writeMetrics) and
 * returns the function that adds the writes once it is sent.
 */
export function applyInternals(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes) => void {
  const counters = batchCounters(batch)
  const counted =
    counters.length > 0
      ? reads.add({
          sql: `SELECT DISTINCT source, subject FROM metric_counters
           WHERE database_id = $1 AND source IN (${COUNTER_SOURCES.map((s) => `'${s}'`).join(', ')}) AND resolution = 3600 AND bucket = $2`,
          params: [databaseId, floorTo(batch.collected_at, HOUR_MS)],
        })
      : undefined
  return (writes) => {
    if (batch.waits?.length) applyWaits(writes, databaseId, batch.collected_at, batch.waits)
    if (batch.replication) applyReplication(writes, databaseId, batch.collected_at, batch.replication)
    const families = new Set((counted?.() ?? []).map((r) => JSON.stringify([String(r.source), String(r.subject)])))
    const hourCounted: HourCounted = (source, subject) => families.has(JSON.stringify([source, subject]))
    writeMetrics(writes, databaseId, batch.collected_at, counters, pick('database', '', batch.database_stats ?? {}, DATABASE_GAUGE_KEYS), hourCounted)
    writeLatest(writes, 'internals_latest', databaseId, batch, LATEST_KINDS)
  }
}

// ---- reads ----

/** A window cut into intervals of `bucketSeconds` (aligned to the epoch). */
export interface Intervals extends Window {
  bucketSeconds: number
}

/**
 * The stored rows that feed the intervals: hourly rows (for the whole hours of the window) only when
 * every interval is a whole number of hours, so re-aggregation stays exact; minute rows otherwise.
 */
function sourceRows(intervals: Intervals): Fragment {
  if (intervals.bucketSeconds % 3600 === 0) return windowClause(intervals)
  const floor = intervals.minuteFloor
  if (floor !== undefined && intervals.since < floor) {
    // Minute rows before the floor are compacted away: there each hourly row lands in the interval where its hour starts.
    const old = sql`(resolution = 3600 AND bucket >= ${floorTo(intervals.since, HOUR_MS)} AND bucket < ${Math.min(intervals.until, floor)})`
    if (intervals.until <= floor) return old
    return sql`(${old} OR (resolution = 60 AND bucket >= ${floor} AND bucket < ${intervals.until}))`
  }
  return sql`(resolution = 60 AND bucket >= ${floorTo(intervals.since, MINUTE_MS)} AND bucket < ${intervals.until})`
}

const toNumber = (v: unknown) => Number(v)
const toNullable = (v: unknown) => (v === null || v === undefined ? null : Number(v))

export interface WaitPoint {
  ts: number
  wait_event_type: string
  wait_event: string
  count: number
  total_duration_ms: number
}

async function waits(driver: SqlDriver, databaseId: string, intervals: Intervals): Promise<WaitPoint[]> {
  const q = sql`SELECT ts, wait_event_type, wait_event, ${driver.sqlDialect.readSum(sql`count`)} AS count, SUM(total_duration_ms) AS total_duration_ms FROM (
       SELECT bucket - (bucket % ${intervals.bucketSeconds * 1000}) AS ts, wait_event_type, wait_event, count, total_duration_ms
       FROM wait_stats WHERE database_id = ${databaseId} AND ${sourceRows(intervals)}
     ) b GROUP BY ts, wait_event_type, wait_event ORDER BY ts, wait_event_type, wait_event`
  const found = await driver.all(q.sql, q.params)
  return found.map((r) => ({
    ts: toNumber(r.ts),
    wait_event_type: String(r.wait_event_type),
    wait_event: String(r.wait_event),
    count: toNumber(r.count),
    total_duration_ms: toNumber(r.total_duration_ms),
  }))
}

export interface LagPoint {
  ts: number
  replication_lag_bytes: number | null
  replication_lag_seconds: number | null
}

async function replicationHistory(driver: SqlDriver, databaseId: string, intervals: Intervals): Promise<LagPoint[]> {
  const q = sql`SELECT ts, MAX(replication_lag_bytes) AS replication_lag_bytes, MAX(replication_lag_seconds) AS replication_lag_seconds FROM (
       SELECT bucket - (bucket % ${intervals.bucketSeconds * 1000}) AS ts, replication_lag_bytes, replication_lag_seconds
       FROM replication_lag WHERE database_id = ${databaseId} AND ${sourceRows(intervals)}
     ) b GROUP BY ts ORDER BY ts`
  const found = await driver.all(q.sql, q.params)
  return found.map((r) => ({
    ts: toNumber(r.ts),
    replication_lag_bytes: toNullable(r.replication_lag_bytes),
    replication_lag_seconds: toNullable(r.replication_lag_seconds),
  }))
}

export interface SlotLagPoint {
  ts: number
  slot_name: string
  lag_bytes: number
}

async function slotHistory(driver: SqlDriver, databaseId: string, intervals: Intervals): Promise<SlotLagPoint[]> {
  const q = sql`SELECT ts, slot_name, MAX(lag_bytes) AS lag_bytes FROM (
       SELECT bucket - (bucket % ${intervals.bucketSeconds * 1000}) AS ts, slot_name, lag_bytes
       FROM replication_slot_lag WHERE database_id = ${databaseId} AND ${sourceRows(intervals)}
     ) b GROUP BY ts, slot_name ORDER BY ts, slot_name`
  const found = await driver.all(q.sql, q.params)
  return found.map((r) => ({ ts: toNumber(r.ts), slot_name: String(r.slot_name), lag_bytes: toNumber(r.lag_bytes) }))
}

/** One interval of one subject: its metric values (counters summed, gauges the latest). */
export interface MetricPoint {
  ts: number
  subject: string
  values: Record<string, number>
}

/** Adds rows of (ts, subject, metric, value) to points keyed by interval and subject, in order. */
function collectPoints(points: Map<string, MetricPoint>, rows: Record<string, unknown>[]) {
  for (const r of rows) {
    const ts = toNumber(r.ts)
    const subject = String(r.subject)
    const key = JSON.stringify([ts, subject])
    let point = points.get(key)
    if (!point) points.set(key, (point = { ts, subject, values: {} }))
    point.values[String(r.metric)] = toNumber(r.value)
  }
}

/**
 * Counters a family reported in an hour but whose delta was zero have no minute row (writeMetrics): an
 * interval read from minute rows gets 0 for every counter its hours' rows name for the subject (the
 * hourly rows name every counter reported in the hour, zeros included).
 */
async function fillQuietCounters(driver: SqlDriver, databaseId: string, source: MetricSource, intervals: Intervals, points: Map<string, MetricPoint>) {
  if (points.size === 0) return
  const named = await driver.all<{ bucket: unknown; subject: unknown; metric: unknown }>(
    `SELECT bucket, subject, metric FROM metric_counters WHERE database_id = $1 AND source = $2 AND resolution = 3600 AND bucket >= $3 AND bucket < $4`,
    [databaseId, source, floorTo(intervals.since, HOUR_MS), intervals.until],
  )
  const byHour = new Map<string, string[]>()
  for (const r of named) {
    const key = JSON.stringify([Number(r.bucket), String(r.subject)])
    const metrics = byHour.get(key)
    if (metrics) metrics.push(String(r.metric))
    else byHour.set(key, [String(r.metric)])
  }
  const span = intervals.bucketSeconds * 1000
  for (const point of points.values()) {
    for (let hour = floorTo(point.ts, HOUR_MS); hour < point.ts + span; hour += HOUR_MS) {
      for (const metric of byHour.get(JSON.stringify([hour, point.subject])) ?? []) point.values[metric] ??= 0
    }
  }
}

/** One source's metrics per interval and subject: counters summed, gauges the interval's latest value. */
export async function metricSeries(driver: SqlDriver, databaseId: string, source: MetricSource, intervals: Intervals): Promise<MetricPoint[]> {
  const rows = sourceRows(intervals)
  const span = intervals.bucketSeconds * 1000
  const countersQuery = sql`SELECT ts, subject, metric, SUM(value) AS value FROM (
       SELECT bucket - (bucket % ${span}) AS ts, subject, metric, value
       FROM metric_counters WHERE database_id = ${databaseId} AND source = ${source} AND ${rows}
     ) b GROUP BY ts, subject, metric`
  const counters = await driver.all(countersQuery.sql, countersQuery.params)
  const gaugesQuery = sql`SELECT ts, subject, metric, value FROM (
       SELECT bucket - (bucket % ${span}) AS ts, subject, metric, value,
              ROW_NUMBER() OVER (PARTITION BY bucket - (bucket % ${span}), subject, metric ORDER BY sampled_at DESC, resolution) AS latest
       FROM metric_gauges WHERE database_id = ${databaseId} AND source = ${source} AND ${rows}
     ) b WHERE latest = 1`
  const gauges = await driver.all(gaugesQuery.sql, gaugesQuery.params)
  const points = new Map<string, MetricPoint>()
  collectPoints(points, counters)
  if (intervals.bucketSeconds % 3600 !== 0 && QUIET_SKIPPED.has(source)) await fillQuietCounters(driver, databaseId, source, intervals, points)
  collectPoints(points, gauges)
  return [...points.values()].sort((a, b) => a.ts - b.ts || (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0))
}

export interface Latest<T> {
  ts: number
  interval_seconds: number
  payload: T
}

/** The latest section of a kind, as `writeLatest` kept it. */
export async function readLatest<T>(driver: SqlDriver, table: LatestTable, databaseId: string, kind: string): Promise<Latest<T> | undefined> {
  const row = await driver.get<{ ts: number; interval_seconds: number; payload: string }>(
    `SELECT ts, interval_seconds, payload FROM ${table} WHERE database_id = $1 AND kind = $2`,
    [databaseId, kind],
  )
  return row ? { ts: toNumber(row.ts), interval_seconds: toNumber(row.interval_seconds), payload: JSON.parse(row.payload) as T } : undefined
}

const latest = <T>(driver: SqlDriver, databaseId: string, kind: LatestKind) => readLatest<T>(driver, 'internals_latest', databaseId, kind)

/** Reads of waits, replication, bgwriter, WAL, I/O and database statistics. */
export interface InternalsReader {

  waits: (databaseId: string, intervals: Intervals) => Promise<WaitPoint[]>;
  replicationHistory: (databaseId: string, intervals: Intervals) => Promise<LagPoint[]>;
  slotHistory: (databaseId: string, intervals: Intervals) => Promise<SlotLagPoint[]>;
  metricSeries: (databaseId: string, source: MetricSource, intervals: Intervals) => Promise<MetricPoint[]>;
  latestReplication: (databaseId: string) => Promise<Latest<{
    is_replica: boolean;
    replication_lag_bytes: number | null;
    replication_lag_seconds: number | null;
    upstream_host: string | null;
    replicas: {
      application_name: string | null;
      client_addr: string | null;
      state: string | null;
      sync_state: string | null;
      lag_bytes: number | null;
      write_lag_ms: number | null;
      flush_lag_ms: number | null;
      replay_lag_ms: number | null;
    }[];
    slots: {
      slot_name: string;
      slot_type: string;
      active: boolean;
      lag_bytes: number | null;
      wal_status: string | null;
    }[];
  }> | undefined>;
  latestCounters: (databaseId: string, kind: 'bgwriter' | 'wal_stats' | 'database_stats') => Promise<Latest<Record<string, number | null>> | undefined>;
  latestIo: (databaseId: string) => Promise<Latest<{
    backend_type: string;
    object: string;
    context: string;
    counters: {
      [x: string]: number | null;
    };
  }[]> | undefined>;
}

/** Reads for the routes of this part. */
export function internalsReader(driver: SqlDriver): InternalsReader {
  return {
    waits: (databaseId: string, intervals: Intervals) => waits(driver, databaseId, intervals),
    replicationHistory: (databaseId: string, intervals: Intervals) => replicationHistory(driver, databaseId, intervals),
    slotHistory: (databaseId: string, intervals: Intervals) => slotHistory(driver, databaseId, intervals),
    metricSeries: (databaseId: string, source: MetricSource, intervals: Intervals) => metricSeries(driver, databaseId, source, intervals),
    latestReplication: (databaseId: string) => latest<ReplicationStatus>(driver, databaseId, 'replication'),
    latestCounters: (databaseId: string, kind: 'bgwriter' | 'wal_stats' | 'database_stats') =>
      latest<Record<string, number | null>>(driver, databaseId, kind),
    latestIo: (databaseId: string) => latest<IoStatRow[]>(driver, databaseId, 'io_stats'),
  }
}
