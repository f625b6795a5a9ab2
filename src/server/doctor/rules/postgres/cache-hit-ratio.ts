// Share of block reads served from shared buffers over the last hour (pg_stat_database blks_hit and
// blks_read). PgHero's rule of thumb: a working set that fits in memory keeps this at 99 % or more.
// The cause comes first (issue 32, deliverable 5): the same diagnosis's sequential-scan and bloat
// findings (their rules run again on this context, so their thresholds and data are the same) name the
// tables whose reads fill the cache; the one read most (its full reads times its size) leads, with its
// own fix (the index to create, the ANALYZE, the rewrite of a bloated table). More memory comes after,
// sized from the host's memory when the host collector knows it, and called a guess when it does not
// (memory-sizing.ts).
import type { DoctorContext } from '../../context.ts'
import { type FindingDraft, type Rule, bytes, pct, severityBelow } from '../../types.ts'
import { bloatEstimates } from './bloat.ts'
import { memoryAdviceFor } from './memory-sizing.ts'
import { sequentialScans } from './sequential-scans.ts'

const defaults = {
  warning_below: 0.99,
  critical_below: 0.9,
  /** Fewer block accesses than this in the window say nothing about the cache. */
  min_block_accesses: 10_000,
  window_s: 3600,
}

/** A table named by another finding of this diagnosis as a cause of block reads. */
export interface ReadCause {
  /** The table, as the findings' objects name it (pgObject). */
  object: string
  /** Bytes its sequential scans read in the window (full reads × its size); 0 when it is only bloated. */
  scanned_bytes: number
  /** Its estimated dead space, when a bloat finding names it. */
  bloat_bytes: number
  scan?: FindingDraft
  bloat?: FindingDraft
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0)

/**
 * The tables the sequential-scan and bloat findings name (their per-table findings only; a bloated
 * index is left out: its reads are index reads), the most bytes read first, then the most bloat.
 */
export function readCauses(scans: FindingDraft[], bloat: FindingDraft[]): ReadCause[] {
  const byTable = new Map<string, ReadCause>()
  const entry = (object: string) => {
    let found = byTable.get(object)
    if (!found) byTable.set(object, (found = { object, scanned_bytes: 0, bloat_bytes: 0 }))
    return found
  }
  for (const f of scans) {
    if (!f.object) continue
    const size = num(f.metrics?.heap_bytes) || num(f.metrics?.table_size_bytes)
    const cause = entry(f.object)
    cause.scan = f
    cause.scanned_bytes = num(f.metrics?.full_reads) * size
  }
  for (const f of bloat) {
    if (!f.object || f.metrics?.kind !== 'table') continue
    const cause = entry(f.object)
    cause.bloat = f
    cause.bloat_bytes = num(f.metrics?.bloat_bytes)
  }
  return [...byTable.values()].sort((a, b) => b.scanned_bytes - a.scanned_bytes || b.bloat_bytes - a.bloat_bytes)
}

/** The causes named in this diagnosis (the other rules' findings on this context). */
async function causesOf(ctx: DoctorContext): Promise<ReadCause[]> {
  const [scans, bloat] = await Promise.all([sequentialScans.check(ctx), bloatEstimates.check(ctx)])
  return readCauses(scans, bloat)
}

/** The text naming the leading cause and the others. */
function causeText(causes: ReadCause[]): string {
  const [lead, ...rest] = causes
  if (!lead) return ''
  const what: string[] = []
  if (lead.scan)
    what.push(
      `read whole ${Math.round(num(lead.scan.metrics?.full_reads)).toLocaleString('en-US')} times by sequential scans (about ${bytes(lead.scanned_bytes)})`,
    )
  if (lead.bloat)
    what.push(
      `${lead.scan ? 'and it is' : 'is'} an estimated ${bytes(lead.bloat_bytes)} of bloat that every scan reads too`,
    )
  const others =
    rest.length > 0
      ? ` Also named: ${rest
          .slice(0, 5)
          .map((c) => c.object)
          .join(', ')}${rest.length > 5 ? ', ...' : ''}.`
      : ''
  return ` The likely cause: ${lead.object} was ${what.join(', ')} in the same window: a table that does not stay in shared buffers is read from disk or the OS cache again at every full read (and a scan of one larger than a quarter of shared_buffers goes through a small ring of buffers, so it never stays).${others}`
}

export const cacheHitRatio: Rule<typeof defaults> = {
  id: 'pg_cache_hit_ratio',
  summary:
    'Too few block reads served from shared buffers over the last hour, naming the sequentially scanned or bloated table that causes it, with memory advice sized to the host.',
  collectors: ['database_stats', 'tables', 'bloat', 'host'],
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
    const [causes, memory] = await Promise.all([causesOf(ctx), memoryAdviceFor(ctx)])
    const lead = causes[0]
    const leadFix = lead
      ? [...(lead.scan?.how_to_fix.slice(0, 1) ?? []), ...(lead.bloat?.how_to_fix.slice(-1) ?? [])]
      : []
    const leadWhat =
      lead?.scan && lead.bloat
        ? 'index its scans and rewrite it'
        : lead?.scan
          ? 'give its scans an index (the sequential-scan finding names the columns)'
          : 'rewrite it'
    return [
      {
        severity,
        title: lead
          ? `Low buffer cache hit ratio: ${lead.object} ${lead.scan ? 'read by sequential scans' : 'bloated'}`
          : 'Low buffer cache hit ratio',
        detail: `Over the last hour ${pct(ratio, 2)} of block reads were served from shared buffers (${hit.toLocaleString('en-US')} hits, ${read.toLocaleString('en-US')} reads from disk or the OS cache); healthy databases stay at ${pct(thresholds.warning_below, 0)} or more.${causeText(causes)}`,
        recommendation: lead
          ? `Fix the cause first: ${lead.object}, ${leadWhat}; the hit ratio recovers once it is no longer read whole. Only if it stays low has the working set outgrown shared_buffers. ${memory.text}`
          : `Find the statements and tables that read the most blocks from disk: missing indexes and sequential scans of large tables are the usual cause; otherwise the working set has outgrown shared_buffers. ${memory.text}`,
        how_to_investigate: [
          'SELECT query, shared_blks_read, shared_blks_hit FROM pg_stat_statements ORDER BY shared_blks_read DESC LIMIT 10;',
          'SELECT relname, heap_blks_read, heap_blks_hit, idx_blks_read FROM pg_statio_user_tables ORDER BY heap_blks_read DESC LIMIT 10;',
          "SELECT pg_size_pretty(pg_database_size(current_database())) AS database_size, current_setting('shared_buffers') AS shared_buffers, current_setting('effective_cache_size') AS effective_cache_size;",
        ],
        how_to_fix: [...leadFix, ...memory.commands],
        ...(lead ? { objects: causes.slice(0, 10).map((c) => c.object) } : {}),
        metrics: {
          cache_hit_ratio: Number(ratio.toFixed(4)),
          blks_hit: hit,
          blks_read: read,
          ...(lead
            ? {
                cause_table: lead.object,
                cause_scanned_bytes: Math.round(lead.scanned_bytes),
                cause_bloat_bytes: lead.bloat_bytes,
              }
            : {}),
          host_memory_bytes: memory.total_bytes,
          advised_shared_buffers: memory.total_bytes === null ? null : memory.shared_buffers,
          advised_effective_cache_size: memory.total_bytes === null ? null : memory.effective_cache_size,
        },
      },
    ]
  },
}
