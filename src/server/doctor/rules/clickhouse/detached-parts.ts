// Parts in the tables' detached/ directories (system.detached_parts, through server_metrics): data no
// query reads that still takes disk space. They come from ALTER ... DETACH, from parts ClickHouse
// found broken or unexpected at start-up or while merging, and from replica clones. Altinity's
// clickhouse-operator alerts on any (ClickHouseDetachedParts): a warning here; from 100, more than
// one careful detach, it is critical (a bulk event: a disk fault, a failed clone).
import { type Rule, severityAbove } from '../../types.ts'
import { count, counted } from './common.ts'

const defaults = {
  warning_parts: 1,
  critical_parts: 100,
}

export const detachedParts: Rule<typeof defaults> = {
  id: 'ch_detached_parts',
  summary: "Parts in the tables' detached directories: data no query reads that still takes disk space.",
  collectors: ['server_metrics'],
  engine: 'clickhouse',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(detachedParts)
    const parts = (await ctx.serverMetrics())?.payload.detached_parts ?? 0
    const severity = severityAbove(parts, t.warning_parts, t.critical_parts)
    if (!severity) return []
    return [
      {
        severity,
        title: counted(parts, 'detached part'),
        detail: `The server has ${counted(parts, 'detached part')}: data on disk that no query reads (a warning from ${count(t.warning_parts)}, critical from ${count(t.critical_parts)}).`,
        recommendation:
          "Look at each part's reason: none (detached by ALTER ... DETACH) is usually deliberate; broken, unexpected, ignored or noquorum mean ClickHouse set data aside, which may be missing from the table. " +
          'Attach the parts whose data belongs in the table; drop the ones you have checked are not needed, to free their space.',
        how_to_investigate: [
          "SELECT database, table, partition_id, name, if(reason = '', 'detached by user', reason) AS reason, disk, formatReadableSize(bytes_on_disk) AS size, modification_time FROM system.detached_parts ORDER BY database, table, name;",
          "SELECT event_time, message FROM system.text_log WHERE message ILIKE '%detach%' AND event_time > now() - INTERVAL 1 DAY ORDER BY event_time DESC LIMIT 20;   -- when the server log goes to text_log",
        ],
        how_to_fix: [
          "ALTER TABLE <database>.<table> ATTACH PART '<name>';   -- puts the part back into the table",
          "ALTER TABLE <database>.<table> DROP DETACHED PART '<name>' SETTINGS allow_drop_detached = 1;   -- deletes it from disk",
        ],
        metrics: { detached_parts: parts },
      },
    ]
  },
}
