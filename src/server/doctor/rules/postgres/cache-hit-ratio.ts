// Share of block reads served from shared buffers over the last hour (pg_stat_database blks_hit and
// blks_read). PgHero's rule of thumb: a working set that fits in memory keeps this at 99 % or more.
import { type Rule, pct, severityBelow } from '../../types.ts'

const defaults = {
  warning_below: 0.99,
  critical_below: 0.9,
  /** Fewer block accesses than this in the window say nothing about the cache. */
  min_block_accesses: 10_000,
  window_s: 3600,
}

export const cacheHitRatio: Rule<typeof defaults> = {
  id: 'pg_cache_hit_ratio',
  summary: 'Too few block reads served from shared buffers over the last hour: the working set does not fit in memory.',
  collectors: ['database_stats'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const thresholds = ctx.thresholds(cacheHitRatio)
    const { blks_hit: hit = 0, blks_read: read = 0 } = await ctx.sums('database', thresholds.window_s * 1000)
    if (hit + read < thresholds.min_block_accesses) return []
    const ratio = hit / (hit + read)
    const severity = severityBelow(ratio, thresholds.warning_below, thresholds.critical_below)
    if (!severity) return []
    return [
      {
        severity,
        title: 'Low buffer cache hit ratio',
        detail: `Over the last hour ${pct(ratio, 2)} of block reads were served from shared buffers (${hit.toLocaleString('en-US')} hits, ${read.toLocaleString('en-US')} reads from disk or the OS cache); healthy databases stay at ${pct(thresholds.warning_below, 0)} or more.`,
        recommendation:
          'Find the statements and tables that read the most blocks from disk: missing indexes and sequential scans of large tables are the usual cause; otherwise the working set has outgrown shared_buffers (about 25 % of RAM is the common starting point).',
        how_to_investigate: [
          'SELECT query, shared_blks_read, shared_blks_hit FROM pg_stat_statements ORDER BY shared_blks_read DESC LIMIT 10;',
          'SELECT relname, heap_blks_read, heap_blks_hit, idx_blks_read FROM pg_statio_user_tables ORDER BY heap_blks_read DESC LIMIT 10;',
          "SELECT pg_size_pretty(pg_database_size(current_database())) AS database_size, current_setting('shared_buffers') AS shared_buffers;",
        ],
        how_to_fix: ["ALTER SYSTEM SET shared_buffers = '4GB';   -- about 25 % of RAM; takes effect after a restart"],
        metrics: { cache_hit_ratio: Number(ratio.toFixed(4)), blks_hit: hit, blks_read: read },
      },
    ]
  },
}
