// Tables without a primary key (collected by `tables`). Logical replication cannot publish their
// UPDATEs and DELETEs without a replica identity (REPLICA IDENTITY FULL makes the subscriber scan the
// table for each row), tools such as pg_repack and most ORMs need one, and nothing stops duplicate
// rows. A note for any such table; a warning from a million rows, where adding a key later means a
// long build and, without a natural key, a table rewrite (the pganalyze and PgHero schema checks list
// such tables without a size cut-off).
import type { TableRow } from '../../../store/objects/types.ts'
import type { FindingDraft, Rule } from '../../types.ts'
import { tableSizeMetrics, tableSizeText } from '../../table-size-text.ts'
import { pgIdent, pgQualified, pgRegclass, pgString, pgObject } from '../../sql-text.ts'

const defaults = {
  /** Tables with fewer live rows are left out (0: every table). */
  min_rows: 0,
  /** From this many live rows a warning, below it a note. */
  warning_rows: 1_000_000,
  /** Tables named one finding each, the largest first; the rest are counted in one more. */
  max_findings: 10,
}

const n = (v: number) => v.toLocaleString('en-US')

export const missingPrimaryKey: Rule<typeof defaults> = {
  id: 'pg_missing_primary_key',
  summary:
    'Tables without a primary key: logical replication, pg_repack and most ORMs need one, and nothing stops duplicate rows.',
  collectors: ['tables'],
  engine: 'postgres',
  category: 'schema',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(missingPrimaryKey)
    // ctx.tables() is ordered by size, the largest first; has_primary_key is null from older agents.
    const keyless = (await ctx.tables()).filter(
      (table) => table.has_primary_key === false && (table.n_live_tup ?? 0) >= t.min_rows,
    )
    const severityOf = (table: TableRow) => ((table.n_live_tup ?? 0) >= t.warning_rows ? 'warning' : 'info')
    keyless.sort((a, b) => (severityOf(a) === severityOf(b) ? 0 : severityOf(a) === 'warning' ? -1 : 1))

    const findings: FindingDraft[] = keyless.slice(0, t.max_findings).map((table) => {
      const name = pgQualified(table.schema_name, table.table_name)
      const sizes = tableSizeText(table)
      const size = sizes === '' ? '' : `, ${sizes}`
      const key = pgIdent(`${table.table_name}_pkey`)
      return {
        severity: severityOf(table),
        object: pgObject(table.schema_name, table.table_name),
        title: `Table ${name} has no primary key`,
        detail: `${name} (${n(table.n_live_tup ?? 0)} rows${size}) has no primary key: logical replication cannot replicate its UPDATEs and DELETEs without one (REPLICA IDENTITY FULL makes the subscriber scan the table for each row), tools such as pg_repack and most ORMs need one, and nothing prevents duplicate rows.`,
        recommendation:
          'Make its natural key (unique, NOT NULL columns) the primary key, building the index concurrently first; without a natural key, add an identity column as the key.',
        how_to_investigate: [
          `SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = ${pgRegclass(table.schema_name, table.table_name)};`,
          `SELECT indexrelid::regclass, indisunique, pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = ${pgRegclass(table.schema_name, table.table_name)};   -- a unique index on NOT NULL columns can become the key`,
          `SELECT pubname FROM pg_publication_tables WHERE schemaname = ${pgString(table.schema_name)} AND tablename = ${pgString(table.table_name)};`,
        ],
        how_to_fix: [
          `CREATE UNIQUE INDEX CONCURRENTLY ${key} ON ${name} (<key columns>);`,
          `ALTER TABLE ${name} ADD CONSTRAINT ${key} PRIMARY KEY USING INDEX ${key};`,
          `-- without a natural key: ALTER TABLE ${name} ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY;   -- rewrites the table`,
        ],
        metrics: { n_live_tup: table.n_live_tup, table_size_bytes: table.table_size_bytes, ...tableSizeMetrics(table) },
      }
    })

    const rest = keyless.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((table) => severityOf(table) === 'warning') ? 'warning' : 'info',
        title: `${rest.length} more tables without a primary key`,
        detail: `Besides the tables named above, ${rest.length} more tables have no primary key: ${rest
          .slice(0, 20)
          .map((table) => pgObject(table.schema_name, table.table_name))
          .join(', ')}${rest.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Give each of them a primary key.',
        how_to_investigate: [
          "SELECT c.oid::regclass FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary);",
        ],
        how_to_fix: ['ALTER TABLE <schema>.<table> ADD PRIMARY KEY (<key columns>);   -- for each one'],
        objects: rest.slice(0, 100).map((table) => pgObject(table.schema_name, table.table_name)),
        metrics: { tables: rest.length },
      })
    }
    return findings
  },
}
