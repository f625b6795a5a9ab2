// The server's memory against its limit (server_metrics). Used: the larger of what ClickHouse tracks
// (MemoryTracking, which max_server_memory_usage is enforced against) and the process's resident
// memory (MemoryResident: caches and allocations the tracker misses). Limit: max_server_memory_usage
// when the agent read one, else ClickHouse's default of 90 % of RAM (max_server_memory_usage_to_ram_ratio).
// At the limit every query that asks for more fails with MEMORY_LIMIT_EXCEEDED; Linux's OOM killer
// may end the server before that. Warning at 80 %, critical at 90 % (the levels of common memory
// alerts: node-mixin's NodeMemoryHighUtilization fires at 90 %).
import { type Rule, bytes, pct, severityAbove } from '../../types.ts'

const defaults = {
  warning_ratio: 0.8,
  critical_ratio: 0.9,
  /** max_server_memory_usage_to_ram_ratio's default, for a limit from the machine's RAM. */
  ram_ratio: 0.9,
}

export const memory: Rule<typeof defaults> = {
  id: 'ch_memory',
  summary: "The server's memory near its limit, past which queries fail with MEMORY_LIMIT_EXCEEDED.",
  collectors: ['server_metrics'],
  engine: 'clickhouse',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(memory)
    const m = (await ctx.serverMetrics())?.payload
    if (!m) return []
    const tracked = m.memory_tracked_bytes ?? null
    const resident = m.memory_resident_bytes ?? null
    const used = Math.max(tracked ?? 0, resident ?? 0)
    const limit = m.memory_limit_bytes ?? (m.os_memory_total_bytes ? m.os_memory_total_bytes * t.ram_ratio : null)
    if (!limit || used === 0) return []
    const ratio = used / limit
    const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
    if (!severity) return []
    const limitText = m.memory_limit_bytes
      ? `max_server_memory_usage (${bytes(limit)})`
      : `${pct(t.ram_ratio, 0)} of the machine's ${bytes(m.os_memory_total_bytes!)}, ClickHouse's default limit (${bytes(limit)})`
    return [
      {
        severity,
        title: 'ClickHouse is close to its memory limit',
        detail:
          `The server uses ${bytes(used)}, ${pct(ratio)} of ${limitText} (tracked ${tracked === null ? 'unknown' : bytes(tracked)}, resident ${resident === null ? 'unknown' : bytes(resident)}` +
          `${m.os_memory_available_bytes != null ? `; the machine has ${bytes(m.os_memory_available_bytes)} available` : ''}). At the limit, queries that need more fail with MEMORY_LIMIT_EXCEEDED.`,
        recommendation:
          'Find what holds the memory: running queries (big GROUP BY or JOIN), dictionaries, Memory/Join/Set tables, or caches. Cap queries per user (max_memory_usage, spilling GROUP BY and ORDER BY to disk), ' +
          'and give the server more RAM if the working set has simply grown.',
        how_to_investigate: [
          'SELECT query_id, user, formatReadableSize(memory_usage) AS memory, elapsed, left(query, 200) AS query FROM system.processes ORDER BY memory_usage DESC LIMIT 10;',
          "SELECT metric, formatReadableSize(value) AS size FROM system.asynchronous_metrics WHERE metric IN ('MemoryResident', 'OSMemoryTotal', 'OSMemoryAvailable') OR metric LIKE '%CacheBytes' ORDER BY value DESC;",
          'SELECT name, formatReadableSize(bytes_allocated) AS size FROM system.dictionaries ORDER BY bytes_allocated DESC LIMIT 10;',
          "SELECT database, name, engine, formatReadableSize(total_bytes) AS size FROM system.tables WHERE engine IN ('Memory', 'Join', 'Set') ORDER BY total_bytes DESC LIMIT 10;",
        ],
        how_to_fix: [
          "KILL QUERY WHERE query_id = '<query_id>' ASYNC;   -- the largest query, if it is a runaway",
          'ALTER USER <user> SETTINGS max_memory_usage = 10000000000, max_bytes_before_external_group_by = 5000000000, max_bytes_before_external_sort = 5000000000;   -- per-query cap with spilling to disk',
          'SYSTEM DROP MARK CACHE; SYSTEM DROP UNCOMPRESSED CACHE;   -- frees cache memory at once (it fills again with use)',
        ],
        metrics: {
          used_bytes: used,
          limit_bytes: limit,
          used_ratio: Number(ratio.toFixed(4)),
          memory_tracked_bytes: tracked,
          memory_resident_bytes: resident,
        },
      },
    ]
  },
}
