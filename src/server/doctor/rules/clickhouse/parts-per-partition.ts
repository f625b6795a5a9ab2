// Active parts in one partition against the table's parts_to_delay_insert and parts_to_throw_insert
// (the agent sends the table's own SETTINGS, else the server's MergeTree defaults). From
// parts_to_delay_insert ClickHouse slows every INSERT into the partition down, from
// parts_to_throw_insert it refuses them with "Too many parts" (ClickHouse docs, MergeTree settings).
// Warning at half of parts_to_delay_insert, while there is time to act; critical once inserts are
// delayed. (Altinity's clickhouse-operator alerts at 100 parts in a partition, a fixed number from the
// time the delay started at 150.)
import type { PartStat } from '../../../../shared/wire.ts'
import { chNumber, chString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, bytes, pct, severityAbove } from '../../types.ts'
import { count, counted, short, tableFilter, tableSql } from './common.ts'
import { describeInsert, insertStatements, rowsPerInsert, writesTo } from './inserts.ts'

const defaults = {
  /** Share of parts_to_delay_insert. */
  warning_ratio: 0.5,
  critical_ratio: 1,
  /** When the agent sent no thresholds: ClickHouse's current MergeTree defaults. */
  default_parts_to_delay_insert: 1000,
  default_parts_to_throw_insert: 3000,
  /** Partitions named one finding each, the fullest first; the rest are counted in one more. */
  max_findings: 10,
}

export const partsPerPartition: Rule<typeof defaults> = {
  id: 'ch_parts_per_partition',
  summary:
    "Active parts in one partition near the table's parts_to_delay_insert or parts_to_throw_insert, past which inserts slow down or fail.",
  collectors: ['parts'],
  engine: 'clickhouse',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(partsPerPartition)
    const delayOf = (p: PartStat) => p.parts_to_delay_insert || t.default_parts_to_delay_insert
    const throwOf = (p: PartStat) => p.parts_to_throw_insert || t.default_parts_to_throw_insert
    const severityOf = (p: PartStat) => severityAbove(p.active_parts / delayOf(p), t.warning_ratio, t.critical_ratio)
    const full = ((await ctx.parts())?.payload ?? [])
      .filter((p) => severityOf(p) !== undefined)
      .sort((a, b) => b.active_parts / delayOf(b) - a.active_parts / delayOf(a) || b.active_parts - a.active_parts)
    // The statements that wrote to each table in the last hour, the most frequent first: the likely cause.
    const inserts = full.length > 0 ? await insertStatements(ctx) : []

    const findings: FindingDraft[] = full.slice(0, t.max_findings).map((p) => {
      const table = tableSql(p.database, p.table)
      const delay = delayOf(p)
      const refuse = throwOf(p)
      const state =
        p.active_parts >= refuse
          ? `it has reached parts_to_throw_insert (${count(refuse)}): INSERTs into it fail with "Too many parts"`
          : p.active_parts >= delay
            ? `it is past parts_to_delay_insert (${count(delay)}), so every INSERT into it is slowed down, and at parts_to_throw_insert (${count(refuse)}) they will fail with "Too many parts"`
            : `${pct(p.active_parts / delay, 0)} of parts_to_delay_insert (${count(delay)}), from which ClickHouse slows every INSERT into it down; at parts_to_throw_insert (${count(refuse)}) they fail with "Too many parts"`
      const writers = inserts.filter((s) => writesTo(s, p.database, p.table))
      const top = writers[0]
      const written = top
        ? ` Written by ${writers.length === 1 ? '' : `${writers.length} statements, the most frequent `}${describeInsert(top, short)}.`
        : ' No INSERT into it was seen in the last hour (query_log): the parts come from an earlier writer, or from merges that cannot keep up.'
      return {
        severity: severityOf(p)!,
        object: `${p.database}.${p.table}:${p.partition_id}`,
        objects: [`${p.database}.${p.table}`, `${p.database}.${p.table}:${p.partition_id}`],
        title: `Too many parts in partition ${p.partition_id} of ${p.database}.${p.table}`,
        detail: `Partition ${p.partition_id} of ${table} has ${counted(p.active_parts, 'active part')} (${counted(p.rows, 'row')}, ${bytes(p.bytes_on_disk)}): ${state}.${written}`,
        recommendation:
          'Every INSERT writes at least one part per partition it touches, and background merges must keep up. Insert fewer, bigger batches (at least a thousand rows each, ' +
          'about one INSERT per second per table), or let the server batch small ones with async_insert; keep the partition key coarse (a month or a day, not an hour or a customer); ' +
          'and check that merges run (not stopped, enough free disk for them).',
        how_to_investigate: [
          `SELECT partition_id, count() AS parts, sum(rows) AS rows, formatReadableSize(sum(bytes_on_disk)) AS size FROM system.parts WHERE active AND ${tableFilter(p.database, p.table)} GROUP BY partition_id ORDER BY parts DESC LIMIT 10;`,
          `SELECT toStartOfMinute(event_time) AS minute, countIf(event_type = 'NewPart') AS new_parts, countIf(event_type = 'MergeParts') AS merges FROM system.part_log WHERE ${tableFilter(p.database, p.table)} AND event_time > now() - INTERVAL 1 HOUR GROUP BY minute ORDER BY minute;`,
          `SELECT count() AS inserts, avg(written_rows) AS rows_per_insert FROM system.query_log WHERE type = 'QueryFinish' AND query_kind = 'Insert' AND has(tables, ${chString(`${p.database}.${p.table}`)}) AND event_time > now() - INTERVAL 1 HOUR;`,
          `SELECT elapsed, progress, num_parts, result_part_name FROM system.merges WHERE ${tableFilter(p.database, p.table)};`,
          ...(top
            ? [
                `SELECT user, client_hostname, http_user_agent, count() AS inserts, avg(written_rows) AS rows_per_insert, countIf(Settings['async_insert'] = '1') AS async FROM system.query_log WHERE normalized_query_hash = ${chNumber(top.query_hash)} AND type = 'QueryFinish' AND event_time > now() - INTERVAL 1 HOUR GROUP BY user, client_hostname, http_user_agent ORDER BY inserts DESC LIMIT 10;   -- who sends the most frequent INSERT`,
              ]
            : []),
        ],
        how_to_fix: [
          `SYSTEM START MERGES ${table};   -- in case merges of the table were stopped`,
          `INSERT INTO ${table} SETTINGS async_insert = 1, wait_for_async_insert = 1 VALUES ...;   -- or ALTER USER <inserting user> SETTINGS async_insert = 1: the server batches small inserts`,
          `OPTIMIZE TABLE ${table} PARTITION ID ${chString(p.partition_id)} FINAL;   -- merges the partition now: rewrites it whole (heavy I/O, needs free disk for a copy), so off-peak and only once inserts are batched`,
        ],
        metrics: {
          active_parts: p.active_parts,
          parts_to_delay_insert: delay,
          parts_to_throw_insert: refuse,
          delay_ratio: Number((p.active_parts / delay).toFixed(4)),
          rows: p.rows,
          bytes_on_disk: p.bytes_on_disk,
          inserting_statements: writers.length,
          ...(top
            ? {
                top_insert_hash: top.query_hash,
                top_inserts_last_hour: top.inserts,
                top_rows_per_insert: Number(rowsPerInsert(top).toFixed(2)),
              }
            : {}),
        },
      }
    })

    const rest = full.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((p) => severityOf(p) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more partitions with too many parts`,
        detail: `Besides the partitions named above, ${rest.length} more have at least ${pct(t.warning_ratio, 0)} of their parts_to_delay_insert in active parts: ${rest
          .slice(0, 20)
          .map((p) => `${p.database}.${p.table} ${p.partition_id} (${count(p.active_parts)})`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation:
          'So many full partitions at once usually share a cause: merges stopped or starved (disk, background pool), or a writer sending many small inserts.',
        how_to_investigate: [
          'SELECT database, table, partition_id, count() AS parts FROM system.parts WHERE active GROUP BY database, table, partition_id ORDER BY parts DESC LIMIT 50;',
          "SELECT metric, value FROM system.metrics WHERE metric LIKE 'BackgroundMergesAndMutationsPool%';",
        ],
        how_to_fix: ['SYSTEM START MERGES;   -- in case merges were stopped server-wide'],
        objects: rest.slice(0, 100).map((p) => `${p.database}.${p.table}:${p.partition_id}`),
        metrics: { partitions: rest.length },
      })
    }
    return findings
  },
}
