// The database host's figures (the `host` section): the latest section whole, as a snapshot (kind
// `host` in `snapshots`, never replaced by a late batch), and over time, in the 60-second and hourly
// buckets of metric_gauges under source `host`: CPU shares, load, memory and swap (subject ''), and each
// filesystem's total and available bytes and inodes (subject `fs:<mount or path>`). Minute rows serve
// the last 48 hours (the disk forecast reads the last day), hourly rows the rest of the retention.
// Reads apart from the ingest write; no table of its own.
import type { HostStatus, IngestBatch } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import { type Intervals, type MetricPoint, type MetricValue, metricSeries, writeMetrics } from '../internals/internals.ts'
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
export const filesystemSubject = (fs: Pick<HostStatus['filesystems'][number], 'mount' | 'path'>) => `fs:${fs.mount ?? fs.path}`

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
  /** The writes of a batch's host section (nothing when it has none). */
  applyHost(writes: Writes, databaseId: string, batch: IngestBatch): void
}

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)

/** The section's gauges, as metric_gauges rows of source `host`. */
export function hostGauges(status: HostStatus): MetricValue[] {
  const out: MetricValue[] = []
  const put = (subject: string, metric: string, value: unknown) => {
    if (isNumber(value)) out.push({ source: 'host', subject, metric, value })
  }
  if (status.cpu) for (const k of ['user', 'system', 'iowait', 'steal', 'idle'] as const) put('', `cpu_${k}`, status.cpu[k])
  put('', 'load1', status.load?.load1)
  if (status.memory) {
    put('', 'memory_total_bytes', status.memory.total_bytes)
    put('', 'memory_available_bytes', status.memory.available_bytes)
    put('', 'swap_total_bytes', status.memory.swap_total_bytes)
    put('', 'swap_used_bytes', status.memory.swap_used_bytes)
  }
  for (const fs of status.filesystems) for (const k of FILESYSTEM_GAUGE_KEYS) put(filesystemSubject(fs), k, fs[k])
  return out
}

export const hostWrites: HostWrites = {
  applyHost(writes, databaseId, batch) {
    const status = batch.host
    if (!status) return
    writes.upsert('snapshots', ['database_id', 'kind', 'ts', 'payload'], [[databaseId, 'host', batch.collected_at, JSON.stringify(status)]], {
      key: ['database_id', 'kind'],
      update: { ts: 'excluded.ts', payload: 'excluded.payload' },
      onlyIf: 'excluded.ts >= snapshots.ts',
    })
    writeMetrics(writes, databaseId, batch.collected_at, [], hostGauges(status))
  },
}

export class SqlHostReads implements HostReads {
  constructor(private readonly driver: SqlDriver) {}

  async latestHost(databaseId: string): Promise<LatestHost | undefined> {
    const row = await this.driver.get<{ ts: number; payload: string }>("SELECT ts, payload FROM snapshots WHERE database_id = $1 AND kind = 'host'", [databaseId])
    return row ? { ts: Number(row.ts), status: JSON.parse(row.payload) as HostStatus } : undefined
  }

  hostSeries(databaseId: string, intervals: Intervals): Promise<MetricPoint[]> {
    return metricSeries(this.driver, databaseId, 'host', intervals)
  }
}
