// Foreign keys whose referencing columns lead no index (collected by `tables`). Each DELETE, or key
// UPDATE, of a referenced row makes PostgreSQL look for referencing rows: without an index that is a
// sequential scan of the referencing table per row (and a lock held meanwhile), and joins on the key
// cannot use an index either. pganalyze's schema check and postgres-checkup (H003) list them; a note
// for a small referencing table, a warning from 10,000 rows or 10 MB, where those scans start to hurt.
import type { UnindexedForeignKey } from '../../../../shared/wire.ts'
import type { FindingDraft, Rule } from '../../types.ts'
import { tableSizeText } from '../../table-size-text.ts'
import { pgIdent, pgQualified, pgRegclass, pgString, pgObject } from '../../sql-text.ts'

const defaults = {
  /** From this many live rows in the referencing table a warning, below it a note. */
  warning_rows: 10_000,
  /** From this size of the referencing table's heap (the collector's pg_relation_size) a warning, whatever its row count. */
  warning_bytes: 10 * 1024 * 1024,
  /** Foreign keys named one finding each, the largest tables first; the rest are counted in one more. */
  max_findings: 10,
}

const n = (v: number) => v.toLocaleString('en-US')

export const unindexedForeignKeys: Rule<typeof defaults> = {
  id: 'pg_unindexed_foreign_keys',
  summary:
    'Foreign keys whose referencing columns lead no index: each delete or key update of a referenced row scans the referencing table.',
  collectors: ['tables'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(unindexedForeignKeys)
    const { entries } = await ctx.unindexedForeignKeys()
    const severityOf = (f: UnindexedForeignKey) =>
      (f.n_live_tup ?? 0) >= t.warning_rows || (f.table_size_bytes ?? 0) >= t.warning_bytes
        ? ('warning' as const)
        : ('info' as const)
    const keys = [...entries].sort((a, b) =>
      severityOf(a) === severityOf(b) ? 0 : severityOf(a) === 'warning' ? -1 : 1,
    )

    const findings: FindingDraft[] = keys.slice(0, t.max_findings).map((f) => {
      const table = pgQualified(f.schema_name, f.table_name)
      const columns = f.columns.map((c) => pgIdent(c)).join(', ')
      const index = pgIdent(`${f.table_name}_${f.columns.join('_')}_idx`.slice(0, 63))
      return {
        severity: severityOf(f),
        object: pgObject(f.schema_name, f.table_name, f.constraint_name),
        title: `Foreign key ${pgIdent(f.constraint_name)} on ${table} has no index`,
        detail:
          `${table} (${n(f.n_live_tup ?? 0)} rows${f.table_size_bytes === null ? '' : `, ${tableSizeText({ heap_bytes: f.table_size_bytes })}`}) references ${f.referenced_table} through (${columns}), ` +
          `and no index starts with those columns: every DELETE or key UPDATE on ${f.referenced_table} scans ${table} for referencing rows, and joins on the key cannot use an index.`,
        recommendation: `Index the referencing columns, building the index concurrently so that writes go on meanwhile.`,
        how_to_investigate: [
          `SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = ${pgRegclass(f.schema_name, f.table_name)} AND contype = 'f';`,
          `SELECT indexrelid::regclass, pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = ${pgRegclass(f.schema_name, f.table_name)};`,
          `SELECT query, calls, mean_exec_time FROM pg_stat_statements WHERE query ILIKE ${pgString(`%${f.table_name}%`)} ORDER BY total_exec_time DESC LIMIT 10;`,
        ],
        how_to_fix: [`CREATE INDEX CONCURRENTLY ${index} ON ${table} (${columns});`],
        metrics: {
          n_live_tup: f.n_live_tup,
          table_size_bytes: f.table_size_bytes,
          columns: f.columns.join(','),
          referenced_table: f.referenced_table,
        },
      }
    })
    const rest = keys.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((f) => severityOf(f) === 'warning') ? 'warning' : 'info',
        title: `${rest.length} more foreign keys without an index`,
        detail: `Besides the ${t.max_findings} named, ${rest.length} more foreign keys have no index on their referencing columns: ${rest
          .slice(0, 20)
          .map((f) => pgObject(f.schema_name, f.table_name, f.constraint_name))
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation: 'Index their referencing columns, the largest tables first.',
        how_to_investigate: [
          "SELECT conrelid::regclass, conname, pg_get_constraintdef(oid) FROM pg_constraint c WHERE contype = 'f' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey);",
        ],
        how_to_fix: [],
        objects: rest.map((f) => pgObject(f.schema_name, f.table_name, f.constraint_name)),
        metrics: { foreign_keys: rest.length },
      })
    }
    return findings
  },
}
