// Free space of each ClickHouse disk (system.disks, through server_metrics). A full disk stops
// inserts and merges; well before that, merges of big parts need free space for the new part and are
// postponed, so parts pile up. Altinity's clickhouse-operator alerts at 80 % used
// (ClickHouseDiskUsage): warning below 20 % free; critical below 10 %, where big merges already stall.
import { parseDiskMetricKey } from '../../../../shared/metrics.ts'
import { chString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, bytes, pct, severityBelow } from '../../types.ts'

const defaults = {
  warning_free_below: 0.2,
  critical_free_below: 0.1,
}

export const diskSpace: Rule<typeof defaults> = {
  id: 'ch_disk_space',
  engine: 'clickhouse',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(diskSpace)
    const metrics = (await ctx.serverMetrics())?.payload ?? {}
    const disks = new Map<string, { free?: number; total?: number }>()
    for (const [key, value] of Object.entries(metrics)) {
      const parsed = parseDiskMetricKey(key)
      if (!parsed || typeof value !== 'number') continue
      const disk = disks.get(parsed.disk) ?? {}
      if (parsed.key === 'free_bytes') disk.free = value
      else disk.total = value
      disks.set(parsed.disk, disk)
    }
    const findings: FindingDraft[] = []
    for (const [name, { free, total }] of [...disks].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (free === undefined || !total) continue
      const ratio = free / total
      const severity = severityBelow(ratio, t.warning_free_below, t.critical_free_below)
      if (!severity) continue
      findings.push({
        severity,
        object: `disk ${name}`,
        title: `Disk ${name} is ${pct(1 - ratio, 0)} full`,
        detail: `ClickHouse disk ${name} has ${bytes(free)} free of ${bytes(total)} (${pct(ratio)} free; a warning below ${pct(t.warning_free_below, 0)}, critical below ${pct(t.critical_free_below, 0)}). Merges of big parts need free space for the new part and wait for it; a full disk stops inserts.`,
        recommendation:
          'Find the biggest tables and partitions on this disk and drop or expire (TTL) data that is no longer needed; remove detached parts you will not attach again; check the system log tables (query_log, trace_log, ...) have a TTL. Otherwise add space, or a second disk in a storage policy.',
        how_to_investigate: [
          'SELECT name, path, formatReadableSize(free_space) AS free, formatReadableSize(total_space) AS total, formatReadableSize(keep_free_space) AS keep_free FROM system.disks;',
          `SELECT database, table, formatReadableSize(sum(bytes_on_disk)) AS size, count() AS parts FROM system.parts WHERE active AND disk_name = ${chString(name)} GROUP BY database, table ORDER BY sum(bytes_on_disk) DESC LIMIT 10;`,
          `SELECT database, table, count() AS parts, formatReadableSize(sum(bytes_on_disk)) AS size FROM system.detached_parts WHERE disk = ${chString(name)} GROUP BY database, table ORDER BY sum(bytes_on_disk) DESC;`,
          `SELECT database, table, partition_id, formatReadableSize(sum(bytes_on_disk)) AS size FROM system.parts WHERE active AND disk_name = ${chString(name)} GROUP BY database, table, partition_id ORDER BY sum(bytes_on_disk) DESC LIMIT 10;`,
        ],
        how_to_fix: [
          "ALTER TABLE <database>.<table> DROP PARTITION ID '<partition_id>';   -- old data you no longer need",
          'ALTER TABLE <database>.<table> MODIFY TTL <date column> + INTERVAL 90 DAY;   -- expire data from now on',
          "ALTER TABLE <database>.<table> DROP DETACHED PARTITION ID '<partition_id>' SETTINGS allow_drop_detached = 1;   -- detached parts you will not attach again",
        ],
        metrics: { free_bytes: free, total_bytes: total, free_ratio: Number(ratio.toFixed(4)) },
      })
    }
    return findings
  },
}
