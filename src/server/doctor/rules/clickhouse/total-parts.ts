// All active parts of the server (the parts section summed). Every part costs memory for its metadata,
// open files and start-up time, and on Replicated tables Keeper traffic. ClickHouse itself writes a
// warning to system.warnings from max_part_num_to_warn (100,000 active parts on the server), and
// max_parts_in_total (100,000 in one table) refuses inserts: that is critical here; the warning comes
// at a tenth of it, while there is time to coarsen a partition key.
import { type Rule, severityAbove } from '../../types.ts'
import { count, tableSql } from './common.ts'

const defaults = {
  warning_parts: 10_000,
  critical_parts: 100_000,
  /** Tables named in the detail, the most parts first. */
  tables_named: 5,
}

export const totalParts: Rule<typeof defaults> = {
  id: 'ch_total_parts',
  summary:
    'Too many active parts on the whole server: each costs memory, open files, start-up time and Keeper traffic.',
  collectors: ['parts'],
  engine: 'clickhouse',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(totalParts)
    const partitions = (await ctx.parts())?.payload ?? []
    const tables = new Map<string, { database: string; table: string; parts: number; partitions: number }>()
    let total = 0
    for (const p of partitions) {
      total += p.active_parts
      const key = `${p.database}.${p.table}`
      const entry = tables.get(key) ?? { database: p.database, table: p.table, parts: 0, partitions: 0 }
      entry.parts += p.active_parts
      entry.partitions++
      tables.set(key, entry)
    }
    const severity = severityAbove(total, t.warning_parts, t.critical_parts)
    if (!severity) return []
    const top = [...tables.values()].sort((a, b) => b.parts - a.parts).slice(0, t.tables_named)
    const worst = top[0]!
    return [
      {
        severity,
        title: 'Too many active parts on the server',
        detail:
          `The server has ${count(total)} active parts in ${count(partitions.length)} partitions of ${count(tables.size)} tables (a warning from ${count(t.warning_parts)}, critical from ${count(t.critical_parts)}; ` +
          `ClickHouse itself warns from 100,000 by default, max_part_num_to_warn). The most: ${top
            .map((e) => `${e.database}.${e.table} (${count(e.parts)} parts in ${count(e.partitions)} partitions)`)
            .join(', ')}.`,
        recommendation:
          'Many parts come from many partitions (a PARTITION BY finer than a month or a day, or on a high-cardinality column) or from small inserts that merges have not caught up with. ' +
          'Coarsen the partition key of the tables named, drop or expire (TTL) old partitions, and batch inserts.',
        how_to_investigate: [
          'SELECT database, table, count() AS parts, uniqExact(partition_id) AS partitions, formatReadableSize(sum(bytes_on_disk)) AS size FROM system.parts WHERE active GROUP BY database, table ORDER BY parts DESC LIMIT 20;',
          "SELECT database, name, partition_key FROM system.tables WHERE engine LIKE '%MergeTree' AND partition_key != '' ORDER BY database, name;",
          'SELECT message FROM system.warnings;',
        ],
        how_to_fix: [
          `OPTIMIZE TABLE ${tableSql(worst.database, worst.table)} FINAL;   -- merges each partition into one part: heavy I/O and a copy's worth of free disk, so off-peak`,
          `ALTER TABLE ${tableSql(worst.database, worst.table)} MODIFY TTL <date column> + INTERVAL 90 DAY;   -- expire old data, and its parts with it`,
          '-- a coarser PARTITION BY needs a new table: CREATE TABLE <new> ... PARTITION BY toYYYYMM(<date column>), INSERT INTO <new> SELECT * FROM <old>, then EXCHANGE TABLES <old> AND <new>',
        ],
        objects: top.map((e) => `${e.database}.${e.table}`),
        metrics: { active_parts: total, partitions: partitions.length, tables: tables.size },
      },
    ]
  },
}
