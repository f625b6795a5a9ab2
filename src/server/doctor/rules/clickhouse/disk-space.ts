// Free space of each ClickHouse disk (system.disks, through server_metrics), and when it fills. A full
// disk stops inserts and merges; well before that, merges of big parts need free space for the new part
// and are postponed, so parts pile up. Altinity's clickhouse-operator alerts at 80 % used
// (ClickHouseDiskUsage): warning below 20 % free; critical below 10 %, where big merges already stall.
// And, as Altinity's 24-hour disk-full alert and PostgreSQL's pg_disk_fill do, from the host section's
// `disk:<name>` filesystems (the same system.disks, kept as a series): critical when the disk fills
// within 24 hours at the last day's rate (disk-forecast.ts), warning within 7 days. One finding per
// disk, whichever threshold it crossed. What grows: dbm keeps only the latest parts (no history of
// table sizes), so the finding names the biggest tables now and says so; part_log tells what grew.
import { parseDiskMetricKey } from '../../../../shared/metrics.ts'
import { filesystemForecasts, fillSeverity } from '../../disk-forecast.ts'
import { chString, chTable } from '../../sql-text.ts'
import { bytes, duration, type FindingDraft, pct, type Rule, severityBelow, worseSeverity } from '../../types.ts'
import { count } from './common.ts'

const defaults = {
  warning_free_below: 0.2,
  critical_free_below: 0.1,
  warning_fill_days: 7,
  critical_fill_hours: 24,
}

/** server_metrics keys carry a disk's name cut to this many characters (agent/collectors/clickhouse/server-metrics.ts). */
const METRIC_NAME_MAX = 40
/** Tables named as the biggest. */
const TABLES_NAMED = 3

interface Disk {
  free?: number
  total?: number
  /** The host section's forecast of this disk. */
  forecast?: { rate_per_s: number; basis_ms: number; fills_at: number | null; ts: number }
}

export const diskSpace: Rule<typeof defaults> = {
  id: 'ch_disk_space',
  summary:
    "A ClickHouse disk low on free space, or filling within days at the last day's rate, naming the biggest tables.",
  collectors: ['server_metrics', 'host', 'parts'],
  engine: 'clickhouse',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(diskSpace)
    const metrics = (await ctx.serverMetrics())?.payload ?? {}
    const disks = new Map<string, Disk>()
    for (const [key, value] of Object.entries(metrics)) {
      const parsed = parseDiskMetricKey(key)
      if (!parsed || typeof value !== 'number') continue
      const disk = disks.get(parsed.disk) ?? {}
      if (parsed.key === 'free_bytes') disk.free = value
      else disk.total = value
      disks.set(parsed.disk, disk)
    }
    // The forecast, from the host section's series of each `disk:<name>` filesystem.
    const host = await ctx.once('host', () => ctx.store.host.latestHost(ctx.db.id))
    if (host) {
      const forecasts = await filesystemForecasts(ctx.store.host, ctx.db.id, host, ctx.now)
      for (const [i, fs] of host.status.filesystems.entries()) {
        const role = fs.roles.find((r) => r.startsWith('disk:'))
        const { trend, fills_at } = forecasts[i]!
        if (!role || !trend) continue
        const name = role.slice(5, 5 + METRIC_NAME_MAX)
        const disk = disks.get(name) ?? { free: fs.available_bytes, total: fs.total_bytes }
        disk.forecast = { rate_per_s: trend.rate_per_s, basis_ms: trend.until - trend.since, fills_at, ts: host.ts }
        disks.set(name, disk)
      }
    }
    const findings: FindingDraft[] = []
    for (const [name, { free, total, forecast }] of [...disks].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (free === undefined || !total) continue
      const ratio = free / total
      const byFree = severityBelow(ratio, t.warning_free_below, t.critical_free_below)
      const left = forecast?.fills_at != null ? Math.max(0, forecast.fills_at - forecast.ts) : null
      const byFill = fillSeverity(left, t)
      const severity = worseSeverity(byFree, byFill)
      if (!severity) continue
      const rate = forecast
        ? `${bytes(Math.abs(forecast.rate_per_s) * 86_400)} a day (fitted over ${duration(forecast.basis_ms)} of samples)`
        : null
      const biggest = biggestTables((await ctx.parts())?.payload ?? [])
      findings.push({
        severity,
        object: `disk ${name}`,
        title:
          byFill && left !== null
            ? `Disk ${name} fills in ${duration(left)}`
            : `Disk ${name} is ${pct(1 - ratio, 0)} full`,
        detail:
          `ClickHouse disk ${name} has ${bytes(free)} free of ${bytes(total)} (${pct(ratio)} free; a warning below ${pct(t.warning_free_below, 0)}, critical below ${pct(t.critical_free_below, 0)}).` +
          (forecast
            ? forecast.rate_per_s < 0
              ? ` Free space shrinks by ${rate}${forecast.fills_at !== null ? `: at that rate it is full at ${new Date(forecast.fills_at).toISOString()} (a warning within ${t.warning_fill_days} days, critical within ${t.critical_fill_hours} hours).` : '.'}`
              : ` Free space does not shrink (${rate}).`
            : ' There is too little history of this disk for a trend yet (the host collector keeps it).') +
          (biggest.length > 0
            ? ` dbm keeps no history of table sizes, so what grew is not known from its data; the biggest tables now (all disks): ${biggest.map((b) => `${chTable(b.database, b.table)} ${bytes(b.bytes)} in ${count(b.partitions)} partition${b.partitions === 1 ? '' : 's'}`).join(', ')}.`
            : '') +
          ' Merges of big parts need free space for the new part and wait for it; a full disk stops inserts.',
        recommendation:
          'Find the biggest tables and partitions on this disk and drop or expire (TTL) data that is no longer needed; remove detached parts you will not attach again; check the system log tables (query_log, trace_log, ...) have a TTL. Otherwise add space, or a second disk in a storage policy.',
        how_to_investigate: [
          'SELECT name, path, formatReadableSize(free_space) AS free, formatReadableSize(total_space) AS total, formatReadableSize(keep_free_space) AS keep_free FROM system.disks;',
          `SELECT database, table, formatReadableSize(sum(bytes_on_disk)) AS size, count() AS parts FROM system.parts WHERE active AND disk_name = ${chString(name)} GROUP BY database, table ORDER BY sum(bytes_on_disk) DESC LIMIT 10;`,
          `SELECT database, table, count() AS parts, formatReadableSize(sum(bytes_on_disk)) AS size FROM system.detached_parts WHERE disk = ${chString(name)} GROUP BY database, table ORDER BY sum(bytes_on_disk) DESC;`,
          `SELECT database, table, partition_id, formatReadableSize(sum(bytes_on_disk)) AS size FROM system.parts WHERE active AND disk_name = ${chString(name)} GROUP BY database, table, partition_id ORDER BY sum(bytes_on_disk) DESC LIMIT 10;`,
          `SELECT database, table, formatReadableSize(sum(size_in_bytes)) AS written FROM system.part_log WHERE event_type = 'NewPart' AND disk_name = ${chString(name)} AND event_time > now() - INTERVAL 1 DAY GROUP BY database, table ORDER BY sum(size_in_bytes) DESC LIMIT 10;   -- what grew in the last day (with part_log enabled)`,
        ],
        how_to_fix: [
          ...biggest.map(
            (b) =>
              `SELECT partition_id, formatReadableSize(sum(bytes_on_disk)) AS size, min(min_time) AS oldest FROM system.parts WHERE active AND database = ${chString(b.database)} AND table = ${chString(b.table)} GROUP BY partition_id ORDER BY partition_id LIMIT 20;   -- then drop the old partitions you no longer need, or set a TTL`,
          ),
          ...biggest
            .slice(0, 1)
            .map(
              (b) =>
                `ALTER TABLE ${chTable(b.database, b.table)} MODIFY TTL <date column> + INTERVAL 90 DAY;   -- expire data from now on`,
            ),
          "ALTER TABLE <database>.<table> DROP PARTITION ID '<partition_id>';   -- old data you no longer need",
          "ALTER TABLE <database>.<table> DROP DETACHED PARTITION ID '<partition_id>' SETTINGS allow_drop_detached = 1;   -- detached parts you will not attach again",
        ],
        metrics: {
          free_bytes: free,
          total_bytes: total,
          free_ratio: Number(ratio.toFixed(4)),
          rate_bytes_per_s: forecast ? Number(forecast.rate_per_s.toFixed(3)) : null,
          fills_at: forecast?.fills_at != null ? new Date(forecast.fills_at).toISOString() : null,
          basis_seconds: forecast ? Math.round(forecast.basis_ms / 1000) : null,
        },
      })
    }
    return findings
  },
}

/** The biggest tables of the latest parts section (every disk: parts carry no disk name), biggest first. */
function biggestTables(parts: { database: string; table: string; bytes_on_disk: number }[]) {
  const byTable = new Map<string, { database: string; table: string; bytes: number; partitions: number }>()
  for (const p of parts) {
    const key = JSON.stringify([p.database, p.table])
    const found = byTable.get(key) ?? { database: p.database, table: p.table, bytes: 0, partitions: 0 }
    found.bytes += p.bytes_on_disk
    found.partitions++
    byTable.set(key, found)
  }
  return [...byTable.values()]
    .filter((b) => b.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, TABLES_NAMED)
}
