// Internals at ingest: wait events, replication lag and slots, and the counter deltas and gauges of
// bgwriter, WAL, I/O and database statistics into 60-second and 1-hour buckets; the latest section of
// each kind kept whole. writeMetrics and writeLatest serve the ClickHouse, host and custom-metrics
// parts too (how the buckets are summed: reads.ts's header).
import type { IngestBatch, ReplicationStatus, WaitSample } from '../../../shared/wire.ts'
import {
  BGWRITER_KEYS,
  DATABASE_COUNTER_KEYS,
  DATABASE_GAUGE_KEYS,
  IO_KEYS,
  WAL_KEYS,
} from '../../../shared/metrics.ts'
import { int64Counter, saturatingAdd } from '../sums.ts'
import { HOUR_MS, MINUTE_MS, floorTo } from '../window.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import {
  COUNTER_SOURCES,
  type HourCounted,
  INTERNALS_LATEST_KINDS,
  type InternalsWrites,
  type LatestTable,
  type MetricSource,
  type MetricValue,
  ioSubject,
} from './types.ts'

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)

/** The first columns of every bucketed row, once per resolution. */
function bucketPrefixes(databaseId: string, collectedAt: number): [string, number, number][] {
  return [MINUTE_MS, HOUR_MS].map((r) => [databaseId, r / 1000, floorTo(collectedAt, r)])
}

/**
 * How far a wait entry's minute may be from its batch's time: an hour. Wait events are not spread over
 * a batch's covered span (spread.ts) as statements are: they are samples the agent took and dated
 * itself, each entry in its own minute, not a delta measured over the interval, so a gap holds none.
 */
const WAIT_MINUTE_SLACK_MS = HOUR_MS

/**
 * The batch's samples as wait_stats rows of each minute and hour, summed per bucket and event (a batch
 * may name one event twice, or one event in two minutes). An entry counts in its own minute; without
 * one (older agents), or one implausibly far from the batch, in the batch's.
 */
function waitRows(databaseId: string, collectedAt: number, waits: WaitSample[]): unknown[][] {
  const byKey = new Map<string, unknown[]>()
  for (const w of waits) {
    const at =
      w.minute !== undefined && Math.abs(w.minute - collectedAt) <= WAIT_MINUTE_SLACK_MS ? w.minute : collectedAt
    const count = Math.round(w.count)
    for (const resolution of [MINUTE_MS, HOUR_MS]) {
      const bucket = floorTo(at, resolution)
      const key = JSON.stringify([resolution, bucket, w.wait_event_type, w.wait_event])
      const row = byKey.get(key)
      if (row) {
        row[5] = (row[5] as number) + count
        row[6] = (row[6] as number) + w.total_duration_ms
      } else
        byKey.set(key, [
          databaseId,
          resolution / 1000,
          bucket,
          w.wait_event_type,
          w.wait_event,
          count,
          w.total_duration_ms,
        ])
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
      update: {
        count: saturatingAdd('wait_stats.count', 'excluded.count'),
        total_duration_ms: 'wait_stats.total_duration_ms + excluded.total_duration_ms',
      },
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
          replication_lag_bytes: writes.sqlDialect.greatest(
            'replication_lag.replication_lag_bytes',
            'excluded.replication_lag_bytes',
          ),
          replication_lag_seconds: writes.sqlDialect.greatest(
            'replication_lag.replication_lag_seconds',
            'excluded.replication_lag_seconds',
          ),
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
    {
      key: ['database_id', 'resolution', 'bucket', 'slot_name'],
      update: { lag_bytes: writes.sqlDialect.greatest('replication_slot_lag.lag_bytes', 'excluded.lag_bytes') },
    },
  )
}

/** The known, non-null keys of one counter map. */
function pick(
  source: MetricSource,
  subject: string,
  map: Record<string, number | null>,
  keys: readonly string[],
): MetricValue[] {
  return keys
    .filter((k) => isNumber(map[k]))
    .map((metric) => ({ source, subject, metric, value: map[metric] as number }))
}

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
export function writeMetrics(
  writes: Writes,
  databaseId: string,
  collectedAt: number,
  counters: MetricValue[],
  gauges: MetricValue[],
  hourCounted?: HourCounted,
) {
  const prefixes = bucketPrefixes(databaseId, collectedAt)
  const [minute, hour] = prefixes
  const skip = hourCounted !== undefined
  writes.upsert(
    'metric_counters',
    METRIC_COLUMNS,
    [
      ...counterRows(minute!, counters, () => skip),
      ...counterRows(hour!, counters, (c) => skip && hourCounted(c.source, c.subject)),
    ],
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

/** Keeps the batch's sections of the given kinds as the latest ones, unless a newer batch's are stored. */
export function writeLatest(
  writes: Writes,
  table: LatestTable,
  databaseId: string,
  batch: IngestBatch,
  kinds: readonly (keyof IngestBatch)[],
) {
  writes.upsert(
    table,
    ['database_id', 'kind', 'ts', 'interval_seconds', 'payload'],
    kinds
      .filter((kind) => batch[kind] !== undefined)
      .map((kind) => [databaseId, kind, batch.collected_at, batch.interval_seconds, JSON.stringify(batch[kind])]),
    {
      key: ['database_id', 'kind'],
      update: { ts: 'excluded.ts', interval_seconds: 'excluded.interval_seconds', payload: 'excluded.payload' },
      onlyIf: `excluded.ts >= ${table}.ts`,
    },
  )
}

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
    writeMetrics(
      writes,
      databaseId,
      batch.collected_at,
      counters,
      pick('database', '', batch.database_stats ?? {}, DATABASE_GAUGE_KEYS),
      hourCounted,
    )
    writeLatest(writes, 'internals_latest', databaseId, batch, INTERNALS_LATEST_KINDS)
  }
}

export const internalsWrites = { applyInternals } satisfies InternalsWrites
