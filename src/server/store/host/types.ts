// The database host's figures (the `host` section): the latest section whole, as a snapshot (kind
// `host` in `snapshots`, never replaced by a late batch), and over time, in the 60-second and hourly
// buckets of metric_gauges under source `host`: CPU shares, load, memory and swap (subject ''), and each
// filesystem's total and available bytes and inodes (subject `fs:<mount or path>`). Minute rows serve
// the last 48 hours (the disk forecast reads the last day), hourly rows the rest of the retention.
// No table of its own. Records and interfaces here; reads.ts implements HostReads, writes.ts HostWrites (ingest).
import type { HostStatus, IngestBatch } from '../../../shared/wire.ts'
import type { Intervals, MetricPoint } from '../internals/types.ts'
import type { Writes } from '../ingest/batch.ts'

/** The gauges of subject '' (the host as a whole). */
export const HOST_GAUGE_KEYS = [
  'cpu_user',
  'cpu_system',
  'cpu_iowait',
  'cpu_steal',
  'cpu_idle',
  'load1',
  'memory_total_bytes',
  'memory_available_bytes',
  'swap_total_bytes',
  'swap_used_bytes',
] as const
export type HostGaugeKey = (typeof HOST_GAUGE_KEYS)[number]
/** The gauges of each filesystem's subject. */
export const FILESYSTEM_GAUGE_KEYS = ['total_bytes', 'available_bytes', 'inodes_total', 'inodes_available'] as const

/** A filesystem's subject in metric_gauges: where it is mounted, else the path it was measured at. */
export const filesystemSubject = (fs: Pick<HostStatus['filesystems'][number], 'mount' | 'path'>) =>
  `fs:${fs.mount ?? fs.path}`

export interface LatestHost {
  /** The collected_at of the batch that carried it. */
  ts: number
  status: HostStatus
}

export interface HostReads {
  /** The latest host section; undefined before any (an agent not on the host never sends one). */
  latestHost(databaseId: string): Promise<LatestHost | undefined>
  /** The host's gauges over the window, per interval and subject ('' or `fs:…`). */
  hostSeries(databaseId: string, intervals: Intervals): Promise<MetricPoint[]>
}

export interface HostWrites {
  /**
   * The writes of a batch's host section (nothing when it has none). `receivedAt`: the batch's receipt
   * time less its age, on the server's clock, which orders the latest snapshots (snapshots.ts).
   */
  applyHost(writes: Writes, databaseId: string, batch: IngestBatch, receivedAt: number): void
}
