// Indexes never scanned: the spec's unused index (0 scans, neither primary nor unique, larger than
// 1 MB; the same filter as GET /indexes/unused). Such an index costs every write to its table and its
// space, and serves no read. idx_scan counts since the last statistics reset and on this server only
// (scans on a replica are counted there), which the finding says. PgHero lists these as unused
// indexes; from 1 GB the wasted space and write cost make it a warning rather than a note. An index
// that is redundant with another, or covers a redundant one, is left to pg_duplicate_indexes, which
// names the copy to drop: dropping every unused copy would leave the columns with no index at all.
import { unusedIndexMinBytes } from '../../../limits.ts'
import type { IndexRow } from '../../../store/objects/types.ts'
import { redundantIndexes } from './duplicate-indexes.ts'
import { type FindingDraft, type Rule, bytes } from '../../types.ts'
import { pgIndexDefinition, pgQualified, pgRegclass, pgObject } from '../../sql-text.ts'

const defaults = {
  /** Larger than this (the spec's 1 MB). */
  min_bytes: unusedIndexMinBytes,
  /** From this size a warning, below it a note. */
  warning_bytes: 1024 ** 3,
  /** Indexes named one finding each, the largest first; the rest are counted in one more. */
  max_findings: 10,
}

export const unusedIndexes: Rule<typeof defaults> = {
  id: 'pg_unused_indexes',
  summary:
    'Indexes never scanned (neither primary nor unique, larger than 1 MB): they cost every write and serve no read.',
  collectors: ['indexes'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(unusedIndexes)
    // Invalid indexes are never scanned either: pg_invalid_indexes reports those.
    const indexes = await ctx.indexes()
    const duplicated = new Set(redundantIndexes(indexes).flatMap((r) => [r.index.row, r.cover.row]))
    const unused = indexes
      .filter(
        (i) =>
          i.idx_scan === 0 &&
          !i.is_primary &&
          !i.is_unique &&
          i.is_valid &&
          (i.size_bytes ?? 0) > t.min_bytes &&
          !duplicated.has(i),
      )
      .sort((a, b) => b.size_bytes! - a.size_bytes!)
    const severityOf = (i: IndexRow) => (i.size_bytes! >= t.warning_bytes ? 'warning' : 'info')
    const caveat =
      'Scans are counted since the statistics were last reset, and on this server only: an index used only by queries on a replica shows no scans here.'

    const findings: FindingDraft[] = unused.slice(0, t.max_findings).map((i) => {
      const name = pgQualified(i.schema_name, i.index_name)
      const table = pgQualified(i.schema_name, i.table_name)
      const recreate = pgIndexDefinition(i.index_def, { concurrently: true })
      return {
        severity: severityOf(i),
        object: pgObject(i.schema_name, i.index_name),
        objects: [pgObject(i.schema_name, i.index_name), pgObject(i.schema_name, i.table_name)],
        title: `Unused index ${name}`,
        detail: `${name} on ${table} (${bytes(i.size_bytes!)}) has not been scanned once (idx_scan 0), yet every insert and every non-HOT update of ${table} maintains it. ${caveat}`,
        recommendation:
          'Check that no replica uses it and that the statistics cover a full business cycle (month-end jobs included), then drop it; keep its definition to recreate it if needed.',
        how_to_investigate: [
          'SELECT stats_reset FROM pg_stat_database WHERE datname = current_database();   -- scans are counted since then',
          `SELECT idx_scan, pg_size_pretty(pg_relation_size(indexrelid)) FROM pg_stat_user_indexes WHERE indexrelid = ${pgRegclass(i.schema_name, i.index_name)};   -- on the primary and on each replica`,
          `SELECT conname FROM pg_constraint WHERE conindid = ${pgRegclass(i.schema_name, i.index_name)};   -- an index backing a constraint is dropped with the constraint`,
          `SELECT pg_get_indexdef(${pgRegclass(i.schema_name, i.index_name)});   -- its definition: keep it to recreate the index`,
        ],
        how_to_fix: [`DROP INDEX CONCURRENTLY ${name};`, ...(recreate ? [`-- to recreate it: ${recreate};`] : [])],
        metrics: { size_bytes: i.size_bytes, idx_scan: i.idx_scan },
      }
    })

    const rest = unused.slice(t.max_findings)
    if (rest.length > 0) {
      const size = rest.reduce((sum, i) => sum + i.size_bytes!, 0)
      findings.push({
        severity: rest.some((i) => severityOf(i) === 'warning') ? 'warning' : 'info',
        title: `${rest.length} more unused indexes`,
        detail: `Besides the indexes named above, ${rest.length} more indexes larger than ${bytes(t.min_bytes)} have not been scanned once, ${bytes(size)} in all. ${caveat}`,
        recommendation: 'Review them with the query below and drop the ones no replica and no periodic job needs.',
        how_to_investigate: [
          `SELECT s.indexrelid::regclass, pg_size_pretty(pg_relation_size(s.indexrelid)) FROM pg_stat_user_indexes s JOIN pg_index i USING (indexrelid) WHERE s.idx_scan = 0 AND NOT i.indisunique AND NOT i.indisprimary AND pg_relation_size(s.indexrelid) > ${t.min_bytes} ORDER BY pg_relation_size(s.indexrelid) DESC;`,
        ],
        how_to_fix: ['DROP INDEX CONCURRENTLY <schema>.<index>;   -- for each one reviewed'],
        objects: rest.slice(0, 100).map((i) => pgObject(i.schema_name, i.index_name)),
        metrics: { indexes: rest.length, size_bytes: size },
      })
    }
    return findings
  },
}
