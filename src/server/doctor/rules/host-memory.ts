// Memory pressure on the database's host (collected by `host`, beside PostgreSQL or from ClickHouse's
// own figures): swap in use while little memory is available. The kernel then pages the database's
// memory out and back in, and every query that touches a swapped page waits on the disk; next comes the
// OOM killer, which on PostgreSQL takes a backend and restarts the whole server. Swap used while plenty
// is available is old, idle pages and no finding. A host without swap (most containers and cloud
// images) has no paging stage: low available memory alone is the warning, and very low is critical,
// since the OOM killer is the next step.
// One finding per cause: out-of-memory entries in the server log of the last hour while the host
// swaps are this finding's evidence (it turns critical and names the first), and pg_log_resource_faults
// leaves them out; without memory pressure on the host they stay that rule's.
import type { DoctorContext } from '../context.ts'
import type { LatestHost } from '../../store/host/types.ts'
import { type Rule, bytes, pct } from '../types.ts'
import { countOf, logCounts, logEntries, logExcerpt } from './postgres/log-evidence.ts'

const defaults = {
  /** Swap in use, as a share of the swap space. */
  warning_swap_used_ratio: 0.1,
  /** MemAvailable, as a share of the memory. */
  warning_available_below: 0.1,
  /** Without swap: MemAvailable under this share is critical (under warning_available_below, a warning). */
  critical_available_below_no_swap: 0.05,
}

/** Out-of-memory entries are looked at over this window (pg_log_resource_faults' default). */
const OOM_WINDOW_MS = 60 * 60_000
const MINUTE = 60_000

type Memory = NonNullable<LatestHost['status']['memory']>

/** Swap configured on the host (a total above zero). */
const hasSwap = (m: Memory): m is Memory & { swap_total_bytes: number; swap_used_bytes: number } =>
  !!m.swap_total_bytes && m.swap_used_bytes !== null

/** The host's memory when it is under pressure by the rule's thresholds, else null (once per diagnosis). */
export function memoryPressure(ctx: DoctorContext): Promise<Memory | null> {
  return ctx.once('host_memory_pressure', async () => {
    const t = ctx.thresholds(hostMemoryPressure)
    const latest = await ctx.once('host', () => ctx.store.host.latestHost(ctx.db.id))
    const m = latest?.status.memory
    if (!m || m.total_bytes <= 0 || m.available_bytes / m.total_bytes >= t.warning_available_below) return null
    // With swap, little memory available is pressure once swap is in use; without, by itself.
    if (hasSwap(m) && m.swap_used_bytes / m.swap_total_bytes < t.warning_swap_used_ratio) return null
    return m
  })
}

export const hostMemoryPressure: Rule<typeof defaults> = {
  id: 'host_memory_pressure',
  summary:
    "Memory pressure on the database's host: swap in use with little memory available, or little available without swap.",
  collectors: ['host', 'log_events'],
  engine: 'any',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(hostMemoryPressure)
    const m = await memoryPressure(ctx)
    if (!m) return []
    const swap = hasSwap(m) ? m : null
    const available = m.available_bytes / m.total_bytes
    // The server log's out-of-memory entries of the last hour (exact counts), the first one named.
    const end = Math.floor(ctx.now / MINUTE) * MINUTE + MINUTE
    const ooms = countOf(await logCounts(ctx, end - OOM_WINDOW_MS, end), 'out_of_memory')
    const first =
      ooms > 0
        ? (await logEntries(ctx, ['out_of_memory'], OOM_WINDOW_MS)).reduce<{ ts: number; message: string } | null>(
            (a, e) => (a === null || e.ts < a.ts ? e : a),
            null,
          )
        : null
    const postgres = ctx.db.engine === 'postgres'
    const oomTitle = ooms > 0 ? `Out of memory ${ooms} ${ooms === 1 ? 'time' : 'times'} in the last hour: ` : ''
    const oomDetail =
      ooms > 0
        ? ` The server logged ${ooms} out-of-memory ${ooms === 1 ? 'entry' : 'entries'} in the last hour${first ? `, the first at ${new Date(first.ts).toISOString()}: "${logExcerpt(first.message)}"` : ''}.`
        : ''
    const killer = postgres
      ? ', which on PostgreSQL ends a backend and restarts the whole server.'
      : ', which may end the server.'
    const severity = ooms > 0 || (!swap && available < t.critical_available_below_no_swap) ? 'critical' : 'warning'
    return [
      {
        severity,
        title: swap
          ? `${oomTitle}The host is swapping: ${pct(swap.swap_used_bytes / swap.swap_total_bytes, 0)} of swap in use with ${pct(available, 0)} of memory available`
          : `${oomTitle}The host is low on memory: ${pct(available, 1)} available, and no swap`,
        detail: swap
          ? `${bytes(swap.swap_used_bytes)} of ${bytes(swap.swap_total_bytes)} swap is in use while only ${bytes(m.available_bytes)} of ${bytes(m.total_bytes)} memory is available (a warning from ${pct(t.warning_swap_used_ratio, 0)} of swap used with under ${pct(t.warning_available_below, 0)} available). ` +
            `Queries that touch swapped-out memory wait on the disk, and the next allocation that finds none wakes the OOM killer${killer}${oomDetail}`
          : `Only ${bytes(m.available_bytes)} of ${bytes(m.total_bytes)} memory is available and the host has no swap (a warning under ${pct(t.warning_available_below, 0)} available, critical under ${pct(t.critical_available_below_no_swap, 0)}). ` +
            `Without swap there is no slow stage first: the next allocation that finds no memory wakes the OOM killer${killer}${oomDetail}`,
        recommendation: postgres
          ? 'Find what takes the memory: too many connections each with its work_mem (use a pooler, lower max_connections), a work_mem or maintenance_work_mem set too high for the concurrency, shared_buffers too large for the host, or other processes on the host. Add memory if the working set needs it.'
          : "Find what takes the memory (big queries, caches, other processes on the host): lower max_server_memory_usage or the queries' max_memory_usage, or add memory.",
        how_to_investigate: [
          'free -m; vmstat 1 5   # si/so columns: pages swapped in and out per second',
          'ps -eo pid,rss,comm --sort=-rss | head -20',
          ...(postgres
            ? [
                "SELECT count(*) AS connections, current_setting('max_connections') AS max_connections, current_setting('work_mem') AS work_mem, current_setting('shared_buffers') AS shared_buffers FROM pg_stat_activity;",
              ]
            : [
                'SELECT query_id, formatReadableSize(memory_usage) AS memory, query FROM system.processes ORDER BY memory_usage DESC LIMIT 10;',
              ]),
        ],
        how_to_fix: [],
        metrics: {
          swap_used_bytes: m.swap_used_bytes,
          swap_total_bytes: m.swap_total_bytes ?? null,
          available_bytes: m.available_bytes,
          total_bytes: m.total_bytes,
          out_of_memory_entries: ooms,
        },
      },
    ]
  },
}
