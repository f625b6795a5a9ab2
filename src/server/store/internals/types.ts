// The store's contract for engine internals (wait events, replication lag and slots, bgwriter, WAL,
// I/O and database statistics) and for the metric tables they share with the ClickHouse, host and
// custom-metrics parts (metric_counters, metric_gauges, the latest-section tables): records and
// interfaces. reads.ts implements InternalsReads, writes.ts InternalsWrites (ingest).
import type { IngestBatch, IoStatRow, ReplicationStatus } from '../../../shared/wire.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import type { Window } from '../window.ts'

/**
 * Metric families in metric_counters / metric_gauges: PostgreSQL's bgwriter, wal, database and io (I/O
 * rows carry "backend_type/object/context" as subject), ClickHouse's server, disk (the disk's name as
 * subject) and parts (clickhouse/), custom metrics (custom-metrics/, the series key as subject), and the store's own ingest: which minutes and hours a batch
 * carrying the tables or indexes section was sampled in (objects/buckets.ts).
 */
export type MetricSource =
  | 'bgwriter'
  | 'wal'
  | 'database'
  | 'io'
  | 'server'
  | 'disk'
  | 'parts'
  | 'ingest'
  | 'host'
  | 'custom'

/** Sections kept whole as the latest of their kind. */
export const INTERNALS_LATEST_KINDS = ['replication', 'bgwriter', 'wal_stats', 'io_stats', 'database_stats'] as const
export type LatestKind = (typeof INTERNALS_LATEST_KINDS)[number]

/** The sources of this part's counters, whose zero deltas writeMetrics skips (and metricSeries fills). */
export const COUNTER_SOURCES = ['bgwriter', 'wal', 'database', 'io'] as const

/** Tables that keep the latest section of each kind whole: this part's and the ClickHouse part's. */
export type LatestTable = 'internals_latest' | 'clickhouse_latest'

/** An I/O row's subject in the metric tables. */
export const ioSubject = (row: Pick<IoStatRow, 'backend_type' | 'object' | 'context'>) =>
  `${row.backend_type}/${row.object}/${row.context}`

/** One counter delta or gauge sample of a batch. */
export interface MetricValue {
  source: MetricSource
  subject: string
  metric: string
  value: number
}

/**
 * Which counter families (source and subject) of a batch already have rows in its hour, so that its
 * zero deltas need no rows (see writeMetrics); undefined: write every delta.
 */
export type HourCounted = (source: MetricSource, subject: string) => boolean

/** A window cut into intervals of `bucketSeconds` (aligned to the epoch). */
export interface Intervals extends Window {
  bucketSeconds: number
}

export interface WaitPoint {
  ts: number
  wait_event_type: string
  wait_event: string
  count: number
  total_duration_ms: number
}

export interface LagPoint {
  ts: number
  replication_lag_bytes: number | null
  replication_lag_seconds: number | null
}

export interface SlotLagPoint {
  ts: number
  slot_name: string
  lag_bytes: number
}

/** One interval of one subject: its metric values (counters summed, gauges the latest). */
export interface MetricPoint {
  ts: number
  subject: string
  values: Record<string, number>
}

/** A section kept whole as the latest of its kind, with the cycle's interval. */
export interface Latest<T> {
  ts: number
  interval_seconds: number
  payload: T
}

/** Reads of waits, replication, bgwriter, WAL, I/O and database statistics. */
export interface InternalsReads {
  waits(databaseId: string, intervals: Intervals): Promise<WaitPoint[]>
  replicationHistory(databaseId: string, intervals: Intervals): Promise<LagPoint[]>
  slotHistory(databaseId: string, intervals: Intervals): Promise<SlotLagPoint[]>
  /** One source's metrics per interval and subject: counters summed, gauges the interval's latest value. */
  metricSeries(databaseId: string, source: MetricSource, intervals: Intervals): Promise<MetricPoint[]>
  latestReplication(databaseId: string): Promise<Latest<ReplicationStatus> | undefined>
  latestCounters(
    databaseId: string,
    kind: 'bgwriter' | 'wal_stats' | 'database_stats',
  ): Promise<Latest<Record<string, number | null>> | undefined>
  latestIo(databaseId: string): Promise<Latest<IoStatRow[]> | undefined>
}

/** Internals at ingest. */
export interface InternalsWrites {
  /**
   * The batch's waits, replication, bgwriter, wal_stats, io_stats and database_stats sections: registers
   * the read its counters depend on and returns what adds the writes once it is sent.
   */
  applyInternals(reads: Reads, databaseId: string, batch: IngestBatch): (writes: Writes) => void
}
