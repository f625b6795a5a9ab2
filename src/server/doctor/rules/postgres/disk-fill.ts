// The disk holding the data directory, the WAL or a tablespace fills (collected by `host`, which runs
// only beside the database). One finding per filesystem, whatever it holds: critical when it fills
// within 24 hours at the last day's rate (disk-forecast.ts) or has under 5 % free, warning within 7
// days or under 10 % free. It names what grows: the tables that grew most over the last day (of the
// biggest ones dbm keeps sizes of), WAL held by replication slots and WAL waiting for the archiver,
// with fixes whose names pass through pgString. A full data or WAL disk stops PostgreSQL (a PANIC
// when WAL cannot be written); a full tablespace fails the writes to its tables.
import type { ArchiverStatus } from '../../../../shared/wire.ts'
import { FORECAST_WINDOW_MS, filesystemForecasts, fillSeverity } from '../../disk-forecast.ts'
import { commentText, pgQualified, pgRegclass, pgString } from '../../sql-text.ts'
import { bytes, duration, type FindingDraft, pct, type Rule, worseSeverity } from '../../types.ts'
import { TABLE_SIZE_LABELS, tableTotalBytes } from '../../../../shared/table-size.ts'

const defaults = {
  warning_fill_days: 7,
  critical_fill_hours: 24,
  warning_free_below: 0.1,
  critical_free_below: 0.05,
}

/** How many of the biggest tables are looked at for growth, and how many growing ones are named. */
const TABLES_CHECKED = 10
const TABLES_NAMED = 3

export const diskFill: Rule<typeof defaults> = {
  id: 'pg_disk_fill',
  summary:
    "A filesystem holding the data directory, the WAL, a tablespace or the log fills soon at the last day's rate, or has little free space left.",
  collectors: ['host'],
  engine: 'postgres',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(diskFill)
    const latest = await ctx.once('host', () => ctx.store.host.latestHost(ctx.db.id))
    if (!latest) return []
    const forecasts = await filesystemForecasts(ctx.store.host, ctx.db.id, latest, ctx.now)
    const findings: FindingDraft[] = []
    for (const [i, fs] of latest.status.filesystems.entries()) {
      const roles = fs.roles.filter(
        (r) => r === 'data' || r === 'wal' || r.startsWith('tablespace:') || r.startsWith('disk:'),
      )
      if (roles.length === 0 || fs.total_bytes <= 0) continue
      const free = fs.available_bytes / fs.total_bytes
      const { trend, fills_at } = forecasts[i]!
      const left = fills_at === null ? null : Math.max(0, fills_at - latest.ts)
      const byFill = fillSeverity(left, t)
      const byFree = free < t.critical_free_below ? 'critical' : free < t.warning_free_below ? 'warning' : undefined
      const severity = worseSeverity(byFill, byFree)
      if (!severity) continue
      const where = fs.mount ?? fs.path
      const holds = roles
        .map((r) =>
          r.startsWith('tablespace:')
            ? `tablespace ${pgString(r.slice(11))}`
            : r === 'wal'
              ? 'the WAL'
              : r === 'data'
                ? 'the data directory'
                : r,
        )
        .join(', ')
      const growth = await whatGrows(ctx, roles)
      const rate = trend
        ? `${bytes(Math.abs(trend.rate_per_s) * 86_400)} a day (fitted over ${duration(trend.until - trend.since)} of samples)`
        : null
      findings.push({
        severity,
        object: `filesystem ${where}`,
        title:
          left !== null && byFill
            ? `The disk holding ${holds} fills in ${duration(left)}`
            : `The disk holding ${holds} is ${pct(1 - free, 0)} full`,
        detail:
          `The filesystem at ${pgString(where)} (${holds}) has ${bytes(fs.available_bytes)} free of ${bytes(fs.total_bytes)} (${pct(free)}).` +
          (trend
            ? trend.rate_per_s < 0
              ? ` Free space shrinks by ${rate}`
              : ` Free space does not shrink (${rate ?? 'flat'})`
            : ' There is too little history for a trend yet') +
          (fills_at !== null ? `: at that rate it is full at ${new Date(fills_at).toISOString()}.` : '.') +
          (growth.text.length > 0 ? ` What grows: ${growth.text.join('; ')}.` : '') +
          ' A full data or WAL disk stops PostgreSQL (it cannot write WAL); a full tablespace fails the writes to its tables.',
        recommendation:
          'Free space or add it before the disk fills: drop a replication slot nobody uses, fix the archiver, delete or archive old data in the growing tables (or move them to another tablespace), or grow the filesystem.',
        how_to_investigate: [
          'SELECT pg_size_pretty(pg_database_size(current_database())) AS database_size;',
          'SELECT slot_name, active, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)) AS retained FROM pg_replication_slots ORDER BY restart_lsn;',
          'SELECT * FROM pg_stat_archiver;',
          ...roles
            .filter((r) => r.startsWith('tablespace:'))
            .map(
              (r) =>
                `SELECT c.oid::regclass AS relation, pg_size_pretty(pg_total_relation_size(c.oid)) AS size FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace WHERE t.spcname = ${pgString(r.slice(11))} ORDER BY pg_total_relation_size(c.oid) DESC LIMIT 10;`,
            ),
          'SELECT relid::regclass AS table, pg_size_pretty(pg_total_relation_size(relid)) AS size FROM pg_stat_user_tables ORDER BY pg_total_relation_size(relid) DESC LIMIT 10;',
        ],
        how_to_fix: growth.fixes,
        metrics: {
          available_bytes: fs.available_bytes,
          total_bytes: fs.total_bytes,
          free_ratio: Number(free.toFixed(4)),
          rate_bytes_per_s: trend ? Number(trend.rate_per_s.toFixed(3)) : null,
          fills_at: fills_at === null ? null : new Date(fills_at).toISOString(),
          basis_seconds: trend ? Math.round((trend.until - trend.since) / 1000) : null,
        },
      })
    }
    return findings
  },
}

type Ctx = Parameters<Rule['check']>[0]

/** The tables that grew most over the day, WAL held by slots and by the archiver, with their fixes. */
async function whatGrows(ctx: Ctx, roles: string[]): Promise<{ text: string[]; fixes: string[] }> {
  const text: string[] = []
  const fixes: string[] = []
  if (roles.includes('wal')) {
    const replication = await ctx.replication()
    for (const slot of (replication?.payload.slots ?? [])
      .filter((s) => (s.lag_bytes ?? 0) > 0)
      .sort((a, b) => (b.lag_bytes ?? 0) - (a.lag_bytes ?? 0))
      .slice(0, 3)) {
      text.push(
        `replication slot ${pgString(slot.slot_name)} holds ${bytes(slot.lag_bytes!)} of WAL${slot.active ? '' : ' (inactive)'}`,
      )
      if (!slot.active)
        fixes.push(
          `SELECT pg_drop_replication_slot(${pgString(slot.slot_name)});   -- only if no replica or consumer will use it again`,
        )
    }
    const archiver = await ctx.once('archiver', async () => {
      const snapshot = await ctx.store.latestSnapshot(ctx.db.id, 'archiver')
      return { ts: snapshot?.ts ?? null, status: (snapshot?.payload ?? null) as ArchiverStatus | null }
    })
    const ready = archiver.status?.ready_bytes ?? 0
    if (ready > 0)
      text.push(`${bytes(ready)} of WAL waits for the archiver (${archiver.status?.ready_count ?? 0} files)`)
  }
  if (roles.includes('data') || roles.some((r) => r.startsWith('tablespace:'))) {
    const biggest = (await ctx.tables()).slice(0, TABLES_CHECKED)
    const window = { since: ctx.now - FORECAST_WINDOW_MS, until: ctx.now }
    const grown: { name: string; regclass: string; growth: number }[] = []
    for (const table of biggest) {
      const series = await ctx.store.objects.tableSeries(ctx.db.id, table.schema_name, table.table_name, window)
      // Its Total (pg_total_relation_size, as the Tables page names it): heap, TOAST and indexes all fill the disk.
      const sizes = series.points.map((p) => tableTotalBytes(p)).filter((v): v is number => typeof v === 'number')
      const growth = sizes.length >= 2 ? sizes.at(-1)! - sizes[0]! : 0
      if (growth > 0)
        grown.push({
          name: pgQualified(table.schema_name, table.table_name),
          regclass: pgRegclass(table.schema_name, table.table_name),
          growth,
        })
    }
    for (const g of grown.sort((a, b) => b.growth - a.growth).slice(0, TABLES_NAMED)) {
      text.push(`table ${g.name} grew ${bytes(g.growth)} (its ${TABLE_SIZE_LABELS.total}) in the last day`)
      fixes.push(
        `SELECT pg_size_pretty(pg_total_relation_size(${g.regclass}));   -- then delete or archive old rows of ${commentText(g.name)}`,
      )
    }
  }
  return { text, fixes }
}
