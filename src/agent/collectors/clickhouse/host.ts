// host (ClickHouse): the server's own view of its host, read remotely, so it needs no agent beside it.
// From system.asynchronous_metrics: CPU shares (OS*TimeNormalized: each a 0..1 share of all CPUs over
// the server's last update interval), LoadAverage1/5/15, OSMemoryTotal / OSMemoryAvailable (no swap
// figures: null), NumberOfCPUCores, and each block device's BlockRead/WriteBytes_*, BlockRead/WriteOps_*
// and BlockActiveTime_* (per update interval: scaled to the time since the previous cycle, an estimate);
// from system.disks (read once per cycle with server_metrics, disks.ts): each local disk as a
// filesystem of role `disk:<name>` (no inode figures there). A server without asynchronous_metrics
// still sends its disks.
import type { HostDevice, HostFilesystem, HostStatus } from '../../../shared/wire.ts'
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import { num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { selectOptional } from './common.ts'
import { readDisks } from './disks.ts'

const NAMED = [
  'OSUserTimeNormalized',
  'OSNiceTimeNormalized',
  'OSSystemTimeNormalized',
  'OSInterruptTimeNormalized',
  'OSSoftIrqTimeNormalized',
  'OSIOWaitTimeNormalized',
  'OSStealTimeNormalized',
  'OSIdleTimeNormalized',
  'LoadAverage1',
  'LoadAverage5',
  'LoadAverage15',
  'OSMemoryTotal',
  'OSMemoryAvailable',
  'NumberOfCPUCores',
  'AsynchronousMetricsUpdateInterval',
]

const METRICS_SQL = `SELECT metric, value FROM system.asynchronous_metrics
  WHERE metric IN {names:Array(String)} OR match(metric, '^Block(Read|Write)(Bytes|Ops)_|^BlockActiveTime_')`

/** A disk reporting more than this is an object store (S3 and the like), not a filesystem. */
const REMOTE_TOTAL = 2 ** 60

export const host = registerCollector<ClickHouseContext>({
  name: 'host',
  engine: 'clickhouse',
  defaultEnabled: true,
  async collect(ctx) {
    const [rows, disks] = await Promise.all([
      selectOptional<{ metric: string; value: number | string }>(ctx, METRICS_SQL, { names: NAMED }),
      readDisks(ctx),
    ])
    const m = new Map((rows ?? []).map((r) => [r.metric, num(r.value)]))
    const share = (name: string) => Math.min(100, Math.max(0, Number(((m.get(name) ?? 0) * 100).toFixed(2))))
    const cpu = m.has('OSIdleTimeNormalized')
      ? {
          user: share('OSUserTimeNormalized') + share('OSNiceTimeNormalized'),
          system: Math.min(
            100,
            share('OSSystemTimeNormalized') + share('OSInterruptTimeNormalized') + share('OSSoftIrqTimeNormalized'),
          ),
          iowait: share('OSIOWaitTimeNormalized'),
          steal: share('OSStealTimeNormalized'),
          idle: share('OSIdleTimeNormalized'),
        }
      : null
    if (cpu) cpu.user = Math.min(100, cpu.user)
    const load = m.has('LoadAverage1')
      ? {
          load1: Math.max(0, m.get('LoadAverage1') ?? 0),
          load5: Math.max(0, m.get('LoadAverage5') ?? 0),
          load15: Math.max(0, m.get('LoadAverage15') ?? 0),
        }
      : null
    const total = m.get('OSMemoryTotal')
    const available = m.get('OSMemoryAvailable')
    const memory =
      typeof total === 'number' && typeof available === 'number'
        ? { total_bytes: total, available_bytes: available, swap_total_bytes: null, swap_used_bytes: null }
        : null

    const filesystems: HostFilesystem[] = []
    for (const d of disks ?? []) {
      const totalBytes = num(d.total_space)
      const free = num(d.free_space)
      if (totalBytes === null || free === null || totalBytes <= 0 || totalBytes >= REMOTE_TOTAL) continue
      filesystems.push({
        roles: [`disk:${d.name}`.replaceAll('\u0000', '').slice(0, 200)],
        path: d.path.replaceAll('\u0000', '').slice(0, 1_000),
        mount: null,
        device: null,
        total_bytes: totalBytes,
        available_bytes: free,
        inodes_total: null,
        inodes_available: null,
      })
    }

    // Block metrics are per update interval: scaled to the time since the previous cycle.
    const previous = ctx.state.get('host') as { now: number } | undefined
    ctx.state.set('host', { now: ctx.now })
    const devices: HostDevice[] = []
    const intervalS = m.get('AsynchronousMetricsUpdateInterval') ?? 1
    if (previous && intervalS && intervalS > 0) {
      const scale = (ctx.now - previous.now) / 1000 / intervalS
      const names = new Set(
        [...m.keys()].filter((k) => k.startsWith('BlockReadBytes_')).map((k) => k.slice('BlockReadBytes_'.length)),
      )
      for (const name of names) {
        const v = (k: string, unit = 1) => Math.max(0, Math.round((m.get(`${k}_${name}`) ?? 0) * scale * unit))
        devices.push({
          device: name.slice(0, 200),
          reads: v('BlockReadOps'),
          writes: v('BlockWriteOps'),
          read_bytes: v('BlockReadBytes'),
          write_bytes: v('BlockWriteBytes'),
          busy_ms: v('BlockActiveTime', 1000),
        })
      }
    }
    if (!rows && !disks) return {}
    const status: HostStatus = {
      source: 'clickhouse',
      evidence: null,
      cpu_count: m.get('NumberOfCPUCores') ?? null,
      cpu,
      load,
      memory,
      filesystems: filesystems.slice(0, ingestMaxItems.host_filesystems),
      devices: devices.slice(0, ingestMaxItems.host_devices),
    }
    return { host: status }
  },
})
