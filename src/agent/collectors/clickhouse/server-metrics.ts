// server_metrics: one map of server gauges and query counter deltas:
//   uptime_s (uptime()), memory_resident_bytes / os_memory_total_bytes / os_memory_available_bytes
//   (system.asynchronous_metrics), memory_tracked_bytes, tcp_connections, http_connections
//   (system.metrics), memory_limit_bytes (system.server_settings max_server_memory_usage, when set),
//   disk.<name>.free_bytes / disk.<name>.total_bytes (system.disks), detached_parts
//   (system.detached_parts), and, with Replicated tables, replicas_readonly / replication_queue_size
//   (the longest queue of one table) / max_replica_delay_s (system.replicas); the counter deltas
//   queries_total / queries_failed / delayed_inserts / rejected_inserts (system.events Query /
//   FailedQuery / DelayedInserts / RejectedInserts, the agent's own queries included); and, from the
//   initial queries system.query_log recorded since the previous cycle with the agent's own left out
//   (as query_stats does), queries_logged / queries_logged_failed (those that ended, and those of them
//   that failed, before or while running) and query_p99_ms (the p99 duration of those that ran).
//   For the counters and query_log the first cycle is the baseline. The error signals (error-signals.ts:
//   Distributed, Buffer, replication, Keeper, file, DNS counters and InsertQuery / InsertedRows as deltas,
//   Keeper sessions, Distributed files and preempted queries as gauges) come with the same two reads.
// A system table this server lacks leaves its keys out; it is not an error. query_log is looked up in
// system.tables first (system-tables.ts): querying it while missing would count an UNKNOWN_TABLE error. The key names are the
// wire's (SERVER_GAUGE_KEYS, SERVER_COUNTER_KEYS and DISK_KEYS in shared/metrics.ts).
import { type ServerCounterKey, type ServerGaugeKey, diskMetricKey } from '../../../shared/metrics.ts'
import { AGENT_LOG_COMMENT } from '../../clickhouse-connection.ts'
import { counterDelta, num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { select, selectOptional } from './common.ts'
import { readDisks } from './disks.ts'
import { SIGNAL_EVENTS, SIGNAL_METRICS, signalDeltas } from './error-signals.ts'
import { readLoad } from './load.ts'
import { systemTables } from './system-tables.ts'

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
const EVENTS: Record<string, ServerCounterKey> = {
  Query: 'queries_total',
  FailedQuery: 'queries_failed',
  DelayedInserts: 'delayed_inserts',
  RejectedInserts: 'rejected_inserts',
}
// The error signals' names join the same two reads of system.metrics and system.events.
const METRIC_NAMES = [...Object.keys(METRICS), ...Object.keys(SIGNAL_METRICS)]
const EVENT_NAMES = [...Object.keys(EVENTS), ...Object.keys(SIGNAL_EVENTS)]

/** The initial queries logged after a watermark (microseconds since the epoch): ended, failed, p99. */
const QUERY_LOG_SQL = `
  SELECT count() AS queries, countIf(type != 'QueryFinish') AS failed,
         quantileExactIf(0.99)(query_duration_ms, type != 'ExceptionBeforeStart') AS p99_ms,
         countIf(type != 'ExceptionBeforeStart') AS ran,
         toString(toUnixTimestamp64Micro(max(event_time_microseconds))) AS last_us
  FROM system.query_log
  WHERE event_date >= toDate(fromUnixTimestamp64Micro({since:Int64}))
    AND event_time >= toDateTime(intDiv({since:Int64}, 1000000)) -- what the primary key can use (see query-stats.ts)
    AND event_time_microseconds > fromUnixTimestamp64Micro({since:Int64})
    AND type IN ('QueryFinish', 'ExceptionBeforeStart', 'ExceptionWhileProcessing')
    AND is_initial_query = 1
    AND log_comment != {own:String}`

interface State {
  /** system.events counters at the previous cycle. */
  events?: Record<string, number>
  /** Newest query_log row counted (microseconds since the epoch, as a string: 64-bit). */
  queryLogSinceUs?: string
}

type Named = { name: string; value: number | string }

interface Logged {
  queries: number
  failed: number
  /** Null when no query ran (none ended, or all failed before starting). */
  p99_ms: number | null
}

/**
 * The queries query_log recorded since the previous cycle, moving the watermark; undefined on the
 * baseline cycle and while query_log is missing (the next cycle then starts over).
 */
async function queryLog(ctx: ClickHouseContext, state: State): Promise<Logged | undefined> {
  if (!(await systemTables(ctx)).has('query_log')) {
    state.queryLogSinceUs = undefined
    return undefined
  }
  if (state.queryLogSinceUs === undefined) {
    const [now] = await select<{ us: string }>(ctx, 'SELECT toString(toUnixTimestamp64Micro(now64(6))) AS us')
    state.queryLogSinceUs = now?.us
    return undefined
  }
  const rows = await selectOptional<{
    queries: number | string
    failed: number | string
    ran: number | string
    p99_ms: number | string
    last_us: string
  }>(ctx, QUERY_LOG_SQL, {
    since: state.queryLogSinceUs,
    own: AGENT_LOG_COMMENT,
  })
  if (rows === undefined) {
    state.queryLogSinceUs = undefined
    return undefined
  }
  const [row] = rows
  const queries = num(row?.queries) ?? 0
  if (queries > 0) state.queryLogSinceUs = row!.last_us
  return { queries, failed: num(row?.failed) ?? 0, p99_ms: (num(row?.ran) ?? 0) > 0 ? num(row!.p99_ms) : null }
}

export const serverMetrics = registerCollector<ClickHouseContext>({
  name: 'server_metrics',
  engine: 'clickhouse',
  defaultEnabled: true,
  async collect(ctx) {
    // A copy (its events are replaced, never changed): the committed state changes only when this run
    // finishes within its deadline.
    const state: State = { ...(ctx.state.get('server_metrics') as State | undefined) }
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

    const [asynchronous, metrics, limit, disks, events, replicas, detached, logged] = await Promise.all([
      selectOptional<Named>(
        ctx,
        'SELECT metric AS name, value FROM system.asynchronous_metrics WHERE metric IN {names:Array(String)}',
        {
          names: Object.keys(ASYNCHRONOUS),
        },
      ),
      selectOptional<Named>(
        ctx,
        'SELECT metric AS name, value FROM system.metrics WHERE metric IN {names:Array(String)}',
        { names: METRIC_NAMES },
      ),
      selectOptional<Named>(
        ctx,
        "SELECT name, value FROM system.server_settings WHERE name = 'max_server_memory_usage'",
      ),
      readDisks(ctx),
      selectOptional<Named>(
        ctx,
        'SELECT event AS name, value FROM system.events WHERE event IN {names:Array(String)}',
        { names: EVENT_NAMES },
      ),
      selectOptional<Record<'replicas' | 'readonly' | 'queue' | 'delay', number | string>>(
        ctx,
        'SELECT count() AS replicas, countIf(is_readonly) AS readonly, max(queue_size) AS queue, max(absolute_delay) AS delay FROM system.replicas',
      ),
      selectOptional<{ parts: number | string }>(ctx, 'SELECT count() AS parts FROM system.detached_parts'),
      queryLog(ctx, state),
    ])
    put(asynchronous, ASYNCHRONOUS)
    put(metrics, METRICS)
    put(metrics, SIGNAL_METRICS)
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
      for (const event of EVENT_NAMES) current[event] = num(events.find((e) => e.name === event)?.value) ?? 0
      if (state.events) {
        for (const [event, key] of Object.entries(EVENTS)) set(key, counterDelta(state.events[event], current[event]))
        for (const [key, delta] of Object.entries(signalDeltas(state.events, current, counterDelta)))
          set(key as ServerCounterKey, delta)
      }
      state.events = current
    }
    const [replica] = replicas ?? []
    if (replica && (num(replica.replicas) ?? 0) > 0) {
      set('replicas_readonly', num(replica.readonly))
      set('replication_queue_size', num(replica.queue))
      set('max_replica_delay_s', num(replica.delay))
    }
    if (detached?.[0]) set('detached_parts', num(detached[0].parts))
    if (logged) {
      set('queries_logged', logged.queries)
      set('queries_logged_failed', logged.failed)
      if (logged.p99_ms !== null) set('query_p99_ms', logged.p99_ms)
    }
    // The load against the server's limits: running queries, connections by protocol (load.ts).
    Object.assign(out, await readLoad(ctx))
    return { server_metrics: out }
  },
})
