// Tables and btree indexes whose estimated bloat (collected by `bloat`: a statistics-based estimate,
// not a measurement) is large both as a share and in bytes. The share: the estimate is within a few
// percent of the truth on ordinary rows (test/agent/parity-collectors.test.ts) but off by more with
// stale statistics or unusual layouts, and a table at fillfactor 100 that takes updates routinely
// keeps 10 to 30 % free space that new rows reuse; past half of the relation, a rewrite would at least
// halve it, which no estimate error explains away. The bytes: below 100 MB a rewrite is not worth its
// lock and I/O, and a small relation's share swings with a page or two (the size floor keeps tiny
// tables from alarming). Critical from 80 % and 10 GB: most of a large relation is dead space that
// every sequential scan and backup reads. The fix names VACUUM FULL (an ACCESS EXCLUSIVE lock for the
// rewrite: pg_repack does it online) and, for an index, REINDEX CONCURRENTLY. While something has held
// the xmin horizon back for more than 5 minutes (xmin-holders.ts), the finding names it first: a rewrite
// keeps every row version it may still see, and the bloat comes back until it ends.
import type { BloatEstimate } from '../../../../shared/wire.ts'
import type { Snapshot } from '../../context.ts'
import { type FindingDraft, type Rule, type Severity, bytes, pct } from '../../types.ts'
import { pgQualified, pgRegclass, pgObject } from '../../sql-text.ts'
import { oldestDataHolder } from '../../xmin-holders.ts'

/** A holder of the horizon is named from this long on (shorter ones are ordinary transactions). */
const HOLDER_AFTER_MS = 5 * 60_000

const MB = 1024 ** 2
const GB = 1024 ** 3

const defaults = {
  warning_ratio: 0.5,
  warning_bytes: 100 * MB,
  critical_ratio: 0.8,
  critical_bytes: 10 * GB,
  /** Relations named one finding each, the most bloated first; the rest are counted in one more finding. */
  max_findings: 10,
}

const nameOf = (b: BloatEstimate) =>
  b.index_name === null ? pgObject(b.schema_name, b.table_name) : pgObject(b.schema_name, b.index_name)

export const bloatEstimates: Rule<typeof defaults> = {
  id: 'pg_bloat',
  summary: 'Tables and B-tree indexes whose estimated bloat is large both as a share and in bytes.',
  collectors: ['bloat'],
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(bloatEstimates)
    const { entries } = await ctx.once<Snapshot<BloatEstimate>>('bloat', async () => {
      const found = await ctx.store.latestSnapshot(ctx.db.id, 'bloat')
      return { ts: found?.ts ?? null, entries: Array.isArray(found?.payload) ? (found.payload as BloatEstimate[]) : [] }
    })
    const severityOf = (b: BloatEstimate): Severity | undefined => {
      const ratio = b.size_bytes > 0 ? b.bloat_bytes / b.size_bytes : 0
      if (ratio >= t.critical_ratio && b.bloat_bytes >= t.critical_bytes) return 'critical'
      if (ratio >= t.warning_ratio && b.bloat_bytes >= t.warning_bytes) return 'warning'
      return undefined
    }
    const flagged = entries
      .map((b) => ({ b, severity: severityOf(b) }))
      .filter((f): f is { b: BloatEstimate; severity: Severity } => f.severity !== undefined)
      .sort((x, y) => y.b.bloat_bytes - x.b.bloat_bytes)
    const oldest = flagged.length > 0 ? await oldestDataHolder(ctx) : undefined
    const holder = oldest && oldest.since !== null && ctx.now - oldest.since >= HOLDER_AFTER_MS ? oldest : undefined
    const findings: FindingDraft[] = flagged.slice(0, t.max_findings).map(({ b, severity }) => {
      const ratio = b.bloat_bytes / b.size_bytes
      const table = pgQualified(b.schema_name, b.table_name)
      const isIndex = b.index_name !== null
      const relation = isIndex ? pgQualified(b.schema_name, b.index_name!) : table
      const regclass = pgRegclass(b.schema_name, isIndex ? b.index_name! : b.table_name)
      return {
        severity,
        object: nameOf(b),
        title: `${isIndex ? 'Index' : 'Table'} ${relation} is an estimated ${pct(ratio, 0)} bloat`,
        detail:
          // Not the Tables page's Heap or Total: the estimate's own basis, pg_class.relpages, under the Maintenance page's label.
          `By the statistics-based estimate (an estimate, not a measurement), ${relation} takes ${bytes(b.size_bytes)} (Pages at last ANALYZE: relpages × block size) where its ` +
          `${b.live_rows.toLocaleString('en-US')} live rows would need about ${bytes(b.expected_bytes)} at fillfactor ${b.fillfactor}: ` +
          `some ${bytes(b.bloat_bytes)} of dead space that scans, caches and backups carry.` +
          (holder
            ? ` ${holder.about} has held back the xmin horizon since ${new Date(holder.since!).toISOString()}: until ${holder.ends}, VACUUM cannot remove the rows deleted or updated after that, a rewrite keeps every row version it may still see, and the bloat comes back.`
            : ''),
        recommendation:
          (holder ? `${holder.advice} Then: ` : '') +
          (isIndex
            ? 'Measure it with pgstatindex first; if confirmed, rebuild the index concurrently (writes go on). Long-running transactions during heavy updates and deletes are the usual cause.'
            : 'Measure it with pgstattuple first; if confirmed, rewrite the table: VACUUM FULL locks it for the whole rewrite, pg_repack does it online. Then find why vacuum fell behind (long transactions, autovacuum settings).'),
        ...(holder ? { objects: [nameOf(b), holder.object] } : {}),
        how_to_investigate: [
          ...(holder ? holder.investigate : []),
          'CREATE EXTENSION IF NOT EXISTS pgstattuple;',
          isIndex
            ? `SELECT index_size, avg_leaf_density, leaf_fragmentation FROM pgstatindex(${regclass});`
            : `SELECT table_len, tuple_percent, dead_tuple_percent, free_percent FROM pgstattuple_approx(${regclass});`,
        ],
        how_to_fix: [
          ...(holder ? holder.fix : []),
          isIndex ? `REINDEX INDEX CONCURRENTLY ${relation};` : `VACUUM (FULL, ANALYZE) ${table};`,
        ],
        metrics: {
          size_bytes: b.size_bytes,
          expected_bytes: b.expected_bytes,
          bloat_bytes: b.bloat_bytes,
          bloat_ratio: Number(ratio.toFixed(3)),
          kind: b.kind,
          estimate: 'statistics',
          ...(holder ? holder.metrics : {}),
        },
      }
    })
    const rest = flagged.slice(t.max_findings)
    if (rest.length > 0) {
      const total = rest.reduce((sum, f) => sum + f.b.bloat_bytes, 0)
      findings.push({
        severity: rest.some((f) => f.severity === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more relations with estimated bloat`,
        detail: `Besides the ${t.max_findings} named, ${rest.length} more tables and indexes hold an estimated ${bytes(total)} of dead space between them: ${rest
          .slice(0, 20)
          .map((f) => nameOf(f.b))
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation: 'Measure them with pgstattuple and rebuild the confirmed ones, the largest first.',
        how_to_investigate: ['CREATE EXTENSION IF NOT EXISTS pgstattuple;'],
        how_to_fix: [],
        objects: rest.map((f) => nameOf(f.b)),
        metrics: { relations: rest.length, bloat_bytes: total },
      })
    }
    return findings
  },
}
