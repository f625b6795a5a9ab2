// Merges (and mutation rewrites, which run as merges) that have been running a long time
// (system.merges). A merge holds a background pool slot and the disk space of its new part until it
// ends; while a big one runs, small parts of its table can pile up. ClickHouse and Altinity publish no
// number for this: the largest merges (max_bytes_to_merge_at_max_space_in_pool, 150 GB) normally finish
// within tens of minutes, so dbm warns at an hour and calls six hours critical.
import type { MergeEntry } from '../../../../shared/wire.ts'
import { type FindingDraft, type Rule, bytes, duration, pct, severityAbove } from '../../types.ts'
import { counted, tableFilter, tableSql } from './common.ts'

const defaults = {
  warning_s: 3600,
  critical_s: 6 * 3600,
  /** Merges named one finding each, the longest first; the rest are counted in one more. */
  max_findings: 10,
}

/** What is left at the pace so far, when there is a pace. */
const remaining = (m: MergeEntry) =>
  m.progress > 0 && m.progress < 1 ? (m.elapsed_s * (1 - m.progress)) / m.progress : null

export const longMerges: Rule<typeof defaults> = {
  id: 'ch_long_merges',
  summary: 'Merges (and mutation rewrites) running a long time, holding a pool slot and disk space meanwhile.',
  collectors: ['merges'],
  engine: 'clickhouse',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(longMerges)
    const long = ((await ctx.merges())?.payload ?? [])
      .filter((m) => m.elapsed_s >= t.warning_s)
      .sort((a, b) => b.elapsed_s - a.elapsed_s)
    const severityOf = (m: MergeEntry) => severityAbove(m.elapsed_s, t.warning_s, t.critical_s)!

    const findings: FindingDraft[] = long.slice(0, t.max_findings).map((m) => {
      const table = tableSql(m.database, m.table)
      const kind = m.is_mutation ? 'Mutation rewrite' : 'Merge'
      const left = remaining(m)
      return {
        severity: severityOf(m),
        object: `${m.database}.${m.table}:${m.result_part_name}`,
        objects: [`${m.database}.${m.table}`, `${m.database}.${m.table}:${m.result_part_name}`],
        title: `${kind} on ${m.database}.${m.table} running for ${duration(m.elapsed_s * 1000)}`,
        detail:
          `${m.is_mutation ? 'A mutation rewriting' : 'A merge of'} ${counted(m.num_parts, 'part')} of ${table} (${bytes(m.total_size_bytes_compressed)} compressed) into ${m.result_part_name} ` +
          `has been running for ${duration(m.elapsed_s * 1000)} and is ${pct(m.progress, 0)} done${left !== null ? `: about ${duration(left * 1000)} more at this pace` : ''}.`,
        recommendation: m.is_mutation
          ? 'A mutation rewrites whole parts, so on a big table it takes long. If the mutation is not needed any more, kill it; otherwise check that disk I/O and the background pool are not saturated.'
          : 'Check that the disk is not saturated and has room for the new part, and that the background pool is not starved by mutations. A merge this slow on a part this size points to slow disks or an expensive table (many columns, heavy codecs, big ORDER BY key).',
        how_to_investigate: [
          `SELECT elapsed, progress, num_parts, result_part_name, formatReadableSize(total_size_bytes_compressed) AS size, formatReadableSize(memory_usage) AS memory, is_mutation FROM system.merges WHERE ${tableFilter(m.database, m.table)};`,
          "SELECT metric, value FROM system.metrics WHERE metric IN ('BackgroundMergesAndMutationsPoolTask', 'BackgroundMergesAndMutationsPoolSize');",
          'SELECT name, formatReadableSize(free_space) AS free, formatReadableSize(total_space) AS total FROM system.disks;',
          ...(m.is_mutation
            ? [
                `SELECT mutation_id, command, parts_to_do, latest_fail_reason FROM system.mutations WHERE ${tableFilter(m.database, m.table)} AND NOT is_done;`,
              ]
            : []),
        ],
        how_to_fix: m.is_mutation
          ? [
              `KILL MUTATION WHERE ${tableFilter(m.database, m.table)} AND mutation_id = '<mutation_id from system.mutations>';   -- if the change is not needed any more`,
            ]
          : [
              `SYSTEM STOP MERGES ${table};   -- cancels the table's running merges; parts pile up meanwhile, so fix the cause first`,
              `SYSTEM START MERGES ${table};   -- the merge then starts over`,
            ],
        metrics: {
          elapsed_s: Math.round(m.elapsed_s),
          progress: Number(m.progress.toFixed(4)),
          num_parts: m.num_parts,
          total_size_bytes_compressed: m.total_size_bytes_compressed,
        },
      }
    })

    const rest = long.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((m) => severityOf(m) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more long merges`,
        detail: `Besides the merges named above, ${rest.length} more have run for over ${duration(t.warning_s * 1000)}: ${rest
          .slice(0, 20)
          .map((m) => `${m.database}.${m.table} ${m.result_part_name} (${duration(m.elapsed_s * 1000)})`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation:
          'So many slow merges at once point to the server rather than one table: saturated disks, too small a background pool, or many mutations.',
        how_to_investigate: [
          'SELECT database, table, elapsed, progress, is_mutation, formatReadableSize(total_size_bytes_compressed) AS size FROM system.merges ORDER BY elapsed DESC;',
        ],
        how_to_fix: [
          '-- raise background_pool_size in the server config if the disks have headroom; kill mutations that are not needed (KILL MUTATION WHERE ...)',
        ],
        objects: rest.slice(0, 100).map((m) => `${m.database}.${m.table}:${m.result_part_name}`),
        metrics: { merges: rest.length },
      })
    }
    return findings
  },
}
