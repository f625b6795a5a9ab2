// The host section at ingest: the latest section as a snapshot (kind `host`), and its gauges into the
// metric tables under source `host` (internals/writes.ts writes them).
import type { HostStatus } from '../../../shared/wire.ts'
import type { MetricValue } from '../internals/types.ts'
import { writeMetrics } from '../internals/writes.ts'
import { upsertSnapshots } from '../snapshots.ts'
import { FILESYSTEM_GAUGE_KEYS, type HostWrites, filesystemSubject } from './types.ts'

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)

/** The section's gauges, as metric_gauges rows of source `host`. */
export function hostGauges(status: HostStatus): MetricValue[] {
  const out: MetricValue[] = []
  const put = (subject: string, metric: string, value: unknown) => {
    if (isNumber(value)) out.push({ source: 'host', subject, metric, value })
  }
  if (status.cpu)
    for (const k of ['user', 'system', 'iowait', 'steal', 'idle'] as const) put('', `cpu_${k}`, status.cpu[k])
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
  applyHost(writes, databaseId, batch, receivedAt) {
    const status = batch.host
    if (!status) return
    upsertSnapshots(writes, databaseId, batch.collected_at, receivedAt, [['host', JSON.stringify(status)]])
    writeMetrics(writes, databaseId, batch.collected_at, [], hostGauges(status))
  },
}
