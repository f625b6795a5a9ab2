// Engine internals over time: wait events, replication lag and slots, bgwriter/checkpointer, WAL,
// I/O and database-wide statistics. Like statement statistics, everything lands at ingest in
// 60-second and 1-hour buckets: wait counts and counter deltas are summed (a zero delta of this part's
// counters adds a row only where reads need one, see writeMetrics), lags keep their maximum, gauges
// keep the bucket's latest value. The latest section of each kind is kept whole, with the
// cycle's interval, for the "current" endpoints. Reads re-aggregate the stored buckets into
// intervals of any whole number of seconds (hourly rows only when every interval is whole hours).
// The metric tables, their writer and reader, and the latest-section writer and reader serve the
// ClickHouse, host and custom-metrics parts too. Records and interfaces: types.ts; ingest: writes.ts.
import type { IoStatRow, ReplicationStatus } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import { type Fragment, sql } from '../sql.ts'
import { HOUR_MS, MINUTE_MS, floorTo, windowClause } from '../window.ts'
import {
  COUNTER_SOURCES,
  type InternalsReads,
  type Intervals,
  type LagPoint,
  type Latest,
  type LatestKind,
  type LatestTable,
  type MetricPoint,
  type MetricSource,
  type SlotLagPoint,
  type WaitPoint,
} from './types.ts'
import { num, numOrNull } from '../rows.ts'

const QUIET_SKIPPED: ReadonlySet<MetricSource> = new Set(COUNTER_SOURCES)

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

async function waits(driver: SqlDriver, databaseId: string, intervals: Intervals): Promise<WaitPoint[]> {
  const q = sql`SELECT ts, wait_event_type, wait_event, ${driver.sqlDialect.readSum(sql`count`)} AS count, SUM(total_duration_ms) AS total_duration_ms FROM (
       SELECT bucket - (bucket % ${intervals.bucketSeconds * 1000}) AS ts, wait_event_type, wait_event, count, total_duration_ms
       FROM wait_stats WHERE database_id = ${databaseId} AND ${sourceRows(intervals)}
     ) b GROUP BY ts, wait_event_type, wait_event ORDER BY ts, wait_event_type, wait_event`
  const found = await driver.all(q.sql, q.params)
  return found.map((r) => ({
    ts: num(r.ts),
    wait_event_type: String(r.wait_event_type),
    wait_event: String(r.wait_event),
    count: num(r.count),
    total_duration_ms: num(r.total_duration_ms),
  }))
}

async function replicationHistory(driver: SqlDriver, databaseId: string, intervals: Intervals): Promise<LagPoint[]> {
  const q = sql`SELECT ts, MAX(replication_lag_bytes) AS replication_lag_bytes, MAX(replication_lag_seconds) AS replication_lag_seconds FROM (
       SELECT bucket - (bucket % ${intervals.bucketSeconds * 1000}) AS ts, replication_lag_bytes, replication_lag_seconds
       FROM replication_lag WHERE database_id = ${databaseId} AND ${sourceRows(intervals)}
     ) b GROUP BY ts ORDER BY ts`
  const found = await driver.all(q.sql, q.params)
  return found.map((r) => ({
    ts: num(r.ts),
    replication_lag_bytes: numOrNull(r.replication_lag_bytes),
    replication_lag_seconds: numOrNull(r.replication_lag_seconds),
  }))
}

async function slotHistory(driver: SqlDriver, databaseId: string, intervals: Intervals): Promise<SlotLagPoint[]> {
  const q = sql`SELECT ts, slot_name, MAX(lag_bytes) AS lag_bytes FROM (
       SELECT bucket - (bucket % ${intervals.bucketSeconds * 1000}) AS ts, slot_name, lag_bytes
       FROM replication_slot_lag WHERE database_id = ${databaseId} AND ${sourceRows(intervals)}
     ) b GROUP BY ts, slot_name ORDER BY ts, slot_name`
  const found = await driver.all(q.sql, q.params)
  return found.map((r) => ({ ts: num(r.ts), slot_name: String(r.slot_name), lag_bytes: num(r.lag_bytes) }))
}

/** Adds rows of (ts, subject, metric, value) to points keyed by interval and subject, in order. */
function collectPoints(points: Map<string, MetricPoint>, rows: Record<string, unknown>[]) {
  for (const r of rows) {
    const ts = num(r.ts)
    const subject = String(r.subject)
    const key = JSON.stringify([ts, subject])
    let point = points.get(key)
    if (!point) points.set(key, (point = { ts, subject, values: {} }))
    point.values[String(r.metric)] = num(r.value)
  }
}

/**
 * Counters a family reported in an hour but whose delta was zero have no minute row (writeMetrics): an
 * interval read from minute rows gets 0 for every counter its hours' rows name for the subject (the
 * hourly rows name every counter reported in the hour, zeros included). The work is the rows': each
 * interval visits only the hours that have rows (a binary search into its subject's hours), never every
 * hour it spans, so an interval of any length costs no more than the rows it reads (an hourly row is
 * visited by at most the HOUR / interval + 1 intervals it overlaps).
 */
async function fillQuietCounters(
  driver: SqlDriver,
  databaseId: string,
  source: MetricSource,
  intervals: Intervals,
  points: Map<string, MetricPoint>,
) {
  if (points.size === 0) return
  const named = await driver.all<{ bucket: unknown; subject: unknown; metric: unknown }>(
    `SELECT bucket, subject, metric FROM metric_counters WHERE database_id = $1 AND source = $2 AND resolution = 3600 AND bucket >= $3 AND bucket < $4`,
    [databaseId, source, floorTo(intervals.since, HOUR_MS), intervals.until],
  )
  const byHour = new Map<string, string[]>()
  /** The hours with rows, by subject, in order. */
  const hoursOf = new Map<string, number[]>()
  for (const r of named) {
    const hour = Number(r.bucket)
    const subject = String(r.subject)
    const key = JSON.stringify([hour, subject])
    const metrics = byHour.get(key)
    if (metrics) metrics.push(String(r.metric))
    else {
      byHour.set(key, [String(r.metric)])
      const hours = hoursOf.get(subject)
      if (hours) hours.push(hour)
      else hoursOf.set(subject, [hour])
    }
  }
  for (const hours of hoursOf.values()) hours.sort((a, b) => a - b)
  const span = intervals.bucketSeconds * 1000
  for (const point of points.values()) {
    const hours = hoursOf.get(point.subject)
    if (!hours) continue
    // The first hour at or after the one the interval starts in; then each hour with rows before its end.
    const first = floorTo(point.ts, HOUR_MS)
    let lo = 0
    let hi = hours.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (hours[mid]! < first) lo = mid + 1
      else hi = mid
    }
    for (let i = lo; i < hours.length && hours[i]! < point.ts + span; i++) {
      for (const metric of byHour.get(JSON.stringify([hours[i], point.subject]))!) point.values[metric] ??= 0
    }
  }
}

/** One source's metrics per interval and subject: counters summed, gauges the interval's latest value. */
export async function metricSeries(
  driver: SqlDriver,
  databaseId: string,
  source: MetricSource,
  intervals: Intervals,
): Promise<MetricPoint[]> {
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
  if (intervals.bucketSeconds % 3600 !== 0 && QUIET_SKIPPED.has(source))
    await fillQuietCounters(driver, databaseId, source, intervals, points)
  collectPoints(points, gauges)
  return [...points.values()].sort(
    (a, b) => a.ts - b.ts || (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0),
  )
}

/** The latest section of a kind, as `writeLatest` kept it. */
export async function readLatest<T>(
  driver: SqlDriver,
  table: LatestTable,
  databaseId: string,
  kind: string,
): Promise<Latest<T> | undefined> {
  const row = await driver.get<{ ts: number; interval_seconds: number; payload: string }>(
    `SELECT ts, interval_seconds, payload FROM ${table} WHERE database_id = $1 AND kind = $2`,
    [databaseId, kind],
  )
  return row
    ? { ts: num(row.ts), interval_seconds: num(row.interval_seconds), payload: JSON.parse(row.payload) as T }
    : undefined
}

const latest = <T>(driver: SqlDriver, databaseId: string, kind: LatestKind) =>
  readLatest<T>(driver, 'internals_latest', databaseId, kind)

/** Reads for the routes of waits, replication, bgwriter, WAL, I/O and database statistics. */
export function internalsReads(driver: SqlDriver): InternalsReads {
  return {
    waits: (databaseId: string, intervals: Intervals) => waits(driver, databaseId, intervals),
    replicationHistory: (databaseId: string, intervals: Intervals) => replicationHistory(driver, databaseId, intervals),
    slotHistory: (databaseId: string, intervals: Intervals) => slotHistory(driver, databaseId, intervals),
    metricSeries: (databaseId: string, source: MetricSource, intervals: Intervals) =>
      metricSeries(driver, databaseId, source, intervals),
    latestReplication: (databaseId: string) => latest<ReplicationStatus>(driver, databaseId, 'replication'),
    latestCounters: (databaseId: string, kind: 'bgwriter' | 'wal_stats' | 'database_stats') =>
      latest<Record<string, number | null>>(driver, databaseId, kind),
    latestIo: (databaseId: string) => latest<IoStatRow[]>(driver, databaseId, 'io_stats'),
  }
}
