// ClickHouse internals in the store: parts per partition, running merges, mutations and server metrics.
// The latest parts, merges, mutations and server_metrics sections are kept whole, one row per kind,
// and a batch collected before the stored one (a late delivery from the agent's buffer) never
// replaces it. Over time, in the 60-second and 1-hour buckets of metric_gauges / metric_counters
// (written by internals/writes.ts, read by internals/reads.ts): the server's gauges (source 'server'), each disk's free and
// total bytes (source 'disk', the disk's name as subject), the query counters' deltas (source 'server')
// and, from each parts section, the total of active parts, the partitions and the largest partition's
// part count (source 'parts'), so a chart or the doctor can see parts pile up.
// Records and interfaces: types.ts; reads: reads.ts.
import { SERVER_COUNTER_KEYS, SERVER_GAUGE_KEYS, parseDiskMetricKey } from '../../../shared/metrics.ts'
import type { IngestBatch, PartStat } from '../../../shared/wire.ts'
import type { MetricValue } from '../internals/types.ts'
import { writeLatest, writeMetrics } from '../internals/writes.ts'
import type { Writes } from '../ingest/batch.ts'
import { CLICKHOUSE_LATEST_KINDS, type ClickHouseWrites, PARTS_GAUGE_KEYS } from './types.ts'

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)

/** The gauges of the batch: server gauges, disks, and the parts section's totals. */
function batchGauges(batch: IngestBatch): MetricValue[] {
  const gauges: MetricValue[] = []
  const metrics = batch.server_metrics ?? {}
  for (const metric of SERVER_GAUGE_KEYS) {
    const value = metrics[metric]
    if (isNumber(value)) gauges.push({ source: 'server', subject: '', metric, value })
  }
  for (const [key, value] of Object.entries(metrics)) {
    const disk = parseDiskMetricKey(key)
    if (disk && isNumber(value)) gauges.push({ source: 'disk', subject: disk.disk, metric: disk.key, value })
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

/** The query counters' deltas of the batch. */
function batchCounters(batch: IngestBatch): MetricValue[] {
  const metrics = batch.server_metrics ?? {}
  return SERVER_COUNTER_KEYS.filter((k) => isNumber(metrics[k])).map((metric) => ({
    source: 'server',
    subject: '',
    metric,
    value: metrics[metric]!,
  }))
}

/** Applies the batch's parts, merges, mutations and server_metrics sections. */
export function applyClickHouse(writes: Writes, databaseId: string, batch: IngestBatch): void {
  if (
    batch.parts === undefined &&
    batch.merges === undefined &&
    batch.mutations === undefined &&
    batch.server_metrics === undefined
  )
    return
  writeMetrics(writes, databaseId, batch.collected_at, batchCounters(batch), batchGauges(batch))
  writeLatest(writes, 'clickhouse_latest', databaseId, batch, CLICKHOUSE_LATEST_KINDS)
}

export const clickhouseWrites = { applyClickHouse } satisfies ClickHouseWrites
