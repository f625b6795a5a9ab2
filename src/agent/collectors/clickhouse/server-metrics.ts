// server_metrics: one map of server gauges and query counter deltas:
//   uptime_s (uptime()), memory_resident_bytes / os_memory_total_bytes / os_memory_available_bytes
//   (system.asynchronous_metrics), memory_tracked_bytes, tcp_connections, http_connections
//   (system.metrics), memory_limit_bytes (system.server_settings max_server_memory_usage, when set),
//   disk.<name>.free_bytes / disk.<name>.total_bytes (system.disks), and queries_total /
//   queries_failed (deltas of system.events Query / FailedQuery; the first cycle is the baseline).
// A system table this server lacks leaves its keys out; it is not an error. The key names are the
// wire's (SERVER_GAUGE_KEYS, SERVER_COUNTER_KEYS and DISK_KEYS in shared/metrics.ts).
import { type ServerCounterKey, type ServerGaugeKey, diskMetricKey } from '../../../shared/metrics.ts'
import { counterDelta, num } from '../delta.ts'
import type { ClickHouseCollector } from '../types.ts'
import { select, selectOptional } from './common.ts'

/** Wire keys are at most 64 characters: `disk.<name>.total_bytes` keeps the name under this. */
const MAX_DISK_NAME = 40

const ASYNCHRONOUS: Record<string, ServerGaugeKey> = {
  MemoryResident: 'memory_resident_bytes',
  OSMemoryTotal: 'os_memory_total_bytes',
  OSMemoryAvailable: 'os_memory_available_bytes',
}
const METRICS: Record<string, ServerGaugeKey> = {
  MemoryTracking: 'memory_tracked_bytes',
  TCPConnection: 'tcp_connections',
  HTTPConnection: 'http_connections',
}
const EVENTS: Record<string, ServerCounterKey> = { Query: 'queries_total', FailedQuery: 'queries_failed' }

interface State {
  /** system.events counters at the previous cycle. */
  events?: Record<string, number>
}

type Named = { name: string; value: number | string }

export const serverMetrics: ClickHouseCollector = {
  name: 'server_metrics',
  engine: 'clickhouse',
  defaultEnabled: true,
  async collect(ctx) {
    const state: State = (ctx.state.get('server_metrics') as State | undefined) ?? {}
    ctx.state.set('server_metrics', state)
    const out: Record<string, number | null> = {}
    const set = (key: ServerGaugeKey | ServerCounterKey, value: number | null) => {
      out[key] = value
    }
    const put = (rows: Named[] | undefined, keys: Record<string, ServerGaugeKey>) => {
      for (const r of rows ?? []) {
        const key = keys[r.name]
        if (key) set(key, num(r.value))
      }
    }

    const [uptime] = await select<{ uptime: number | string }>(ctx, 'SELECT uptime() AS uptime')
    set('uptime_s', num(uptime?.uptime))

    const [asynchronous, metrics, limit, disks, events] = await Promise.all([
      selectOptional<Named>(ctx, 'SELECT metric AS name, value FROM system.asynchronous_metrics WHERE metric IN {names:Array(String)}', {
        names: Object.keys(ASYNCHRONOUS),
      }),
      selectOptional<Named>(ctx, 'SELECT metric AS name, value FROM system.metrics WHERE metric IN {names:Array(String)}', { names: Object.keys(METRICS) }),
      selectOptional<Named>(ctx, "SELECT name, value FROM system.server_settings WHERE name = 'max_server_memory_usage'"),
      selectOptional<{ name: string; free_space: number | string; total_space: number | string }>(
        ctx,
        'SELECT name, free_space, total_space FROM system.disks ORDER BY name',
      ),
      selectOptional<Named>(ctx, 'SELECT event AS name, value FROM system.events WHERE event IN {names:Array(String)}', { names: Object.keys(EVENTS) }),
    ])
    put(asynchronous, ASYNCHRONOUS)
    put(metrics, METRICS)
    const limitBytes = num(limit?.[0]?.value)
    if (limitBytes !== null && limitBytes > 0) set('memory_limit_bytes', limitBytes)
    for (const d of disks ?? []) {
      const name = d.name.slice(0, MAX_DISK_NAME)
      out[diskMetricKey(name, 'free_bytes')] = num(d.free_space)
      out[diskMetricKey(name, 'total_bytes')] = num(d.total_space)
    }
    if (events) {
      // system.events lists only counters that moved since the start: absent means 0.
      const current: Record<string, number> = {}
      for (const event of Object.keys(EVENTS)) current[event] = num(events.find((e) => e.name === event)?.value) ?? 0
      if (state.events) for (const [event, key] of Object.entries(EVENTS)) set(key, counterDelta(state.events[event], current[event]))
      state.events = current
    }
    return { server_metrics: out }
  },
}
