// INSERTs that ClickHouse slowed down (DelayedInserts) or refused with "Too many parts"
// (RejectedInserts) over the last minutes (window_s): system.events deltas in server_metrics. Both
// happen when a partition reaches the table's parts_to_delay_insert / parts_to_throw_insert; refused
// inserts lose data unless the client retries. Altinity's clickhouse-operator alerts on any of either
// (ClickHouseDelayedInsertThrottling, ClickHouseRejectedInsert); refused ones are critical, as in the
// Grafana ClickHouse mixin (ClickHouseRejectedInserts). The partitions at their delay threshold now
// are named, and the finding is resolved as soon as the latest parts section shows every partition
// back under its table's threshold (merged down), even while the window still holds the counts; it
// is judged on the counts alone only when the parts are not known (no parts section, or a partition
// whose threshold the agent could not read).
import type { Rule } from '../../types.ts'
import { count, counted, tableSql } from './common.ts'

const defaults = {
  /** The delayed and refused inserts counted over the last this many seconds. */
  window_s: 300,
  /** Partitions named in the detail, the fullest first. */
  partitions_named: 5,
}

export const delayedInserts: Rule<typeof defaults> = {
  id: 'ch_delayed_inserts',
  summary: 'INSERTs ClickHouse slowed down or refused with "Too many parts" over the last minutes.',
  collectors: ['server_metrics', 'parts'],
  engine: 'clickhouse',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(delayedInserts)
    const server = (await ctx.totals('server', t.window_s * 1000)).get('') ?? {}
    const delayed = server.delayed_inserts ?? 0
    const rejected = server.rejected_inserts ?? 0
    if (delayed === 0 && rejected === 0) return []
    const parts = (await ctx.parts())?.payload
    const full = (parts ?? [])
      .filter((p) => p.parts_to_delay_insert && p.active_parts >= p.parts_to_delay_insert)
      .sort((a, b) => b.active_parts / b.parts_to_delay_insert! - a.active_parts / a.parts_to_delay_insert!)
      .slice(0, t.partitions_named)
    // Every partition known to be under its threshold now: merged down, resolved.
    if (
      full.length === 0 &&
      parts !== undefined &&
      parts.every((p) => typeof p.parts_to_delay_insert === 'number' && p.parts_to_delay_insert > 0)
    )
      return []
    const named = full.map(
      (p) =>
        `${p.database}.${p.table} partition ${p.partition_id} (${counted(p.active_parts, 'part')}; delay from ${count(p.parts_to_delay_insert!)}, refused from ${count(p.parts_to_throw_insert ?? 0)})`,
    )
    const window =
      t.window_s % 60 === 0
        ? `the last ${t.window_s === 60 ? 'minute' : `${t.window_s / 60} minutes`}`
        : `the last ${t.window_s} s`
    const worst = full[0]
    return [
      {
        severity: rejected > 0 ? 'critical' : 'warning',
        title:
          rejected > 0
            ? `${counted(rejected, 'INSERT')} refused for too many parts`
            : `${counted(delayed, 'INSERT')} delayed for too many parts`,
        detail:
          `In ${window} ClickHouse ${[rejected > 0 && `refused ${counted(rejected, 'INSERT')} ("Too many parts")`, delayed > 0 && `slowed down ${counted(delayed, 'INSERT')}`].filter(Boolean).join(' and ')}, ` +
          `because a partition had reached its table's ${rejected > 0 ? 'parts_to_throw_insert' : 'parts_to_delay_insert'}. ` +
          (named.length > 0
            ? `At or past the delay threshold now: ${named.join('; ')}.`
            : 'Whether a partition is still at its delay threshold is not known (the parts or their thresholds were not read).'),
        recommendation:
          'Inserts come faster than merges can combine their parts. Batch them (fewer, bigger INSERTs, or async_insert), keep the partition key coarse so one INSERT does not touch many partitions, and check that merges run. A client that got "Too many parts" must retry, or that data is lost.',
        how_to_investigate: [
          "SELECT event, value FROM system.events WHERE event IN ('DelayedInserts', 'DelayedInsertsMilliseconds', 'RejectedInserts');",
          'SELECT database, table, partition_id, count() AS parts FROM system.parts WHERE active GROUP BY database, table, partition_id ORDER BY parts DESC LIMIT 10;',
          'SELECT event_time, user, left(query, 200) AS query FROM system.query_log WHERE exception_code = 252 AND event_time > now() - INTERVAL 10 MINUTE ORDER BY event_time DESC LIMIT 20;   -- 252: TOO_MANY_PARTS',
        ],
        how_to_fix: [
          ...(worst
            ? [
                `SYSTEM START MERGES ${tableSql(worst.database, worst.table)};   -- in case merges of the table were stopped`,
              ]
            : []),
          'INSERT INTO <database>.<table> SETTINGS async_insert = 1, wait_for_async_insert = 1 VALUES ...;   -- or ALTER USER <inserting user> SETTINGS async_insert = 1',
        ],
        objects: full.map((p) => `${p.database}.${p.table}:${p.partition_id}`),
        metrics: { delayed_inserts: delayed, rejected_inserts: rejected },
      },
    ]
  },
}
