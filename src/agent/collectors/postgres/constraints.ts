// constraints: CHECK, FOREIGN KEY (and, PostgreSQL 18+, NOT NULL) constraints added NOT VALID and not
// validated since (pg_constraint.convalidated false) on the connected database's tables. PostgreSQL
// enforces them on new and changed rows only: rows written before may break them, and the planner
// cannot use a CHECK that is not valid for constraint exclusion. Domain constraints are left out.
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import type { InvalidConstraint } from '../../../shared/wire.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { PREPARED } from '../../own-statements.ts'

const MAX_CONSTRAINTS = ingestMaxItems.invalid_constraints

// pg_get_constraintdef reads the catalogs only (no lock on the table).
const INVALID_CONSTRAINTS_SQL = `
  SELECT n.nspname AS schema_name, c.relname AS table_name, con.conname AS constraint_name,
         CASE con.contype WHEN 'c' THEN 'check' WHEN 'f' THEN 'foreign key' WHEN 'n' THEN 'not null'
                          WHEN 'u' THEN 'unique' WHEN 'p' THEN 'primary key' WHEN 'x' THEN 'exclusion'
                          ELSE con.contype::text END AS constraint_type,
         pg_get_constraintdef(con.oid) AS definition
  FROM pg_constraint con
  JOIN pg_class c ON c.oid = con.conrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE NOT con.convalidated
    AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
    AND NOT pg_is_other_temp_schema(n.oid)
  ORDER BY n.nspname, c.relname, con.conname
  LIMIT ${MAX_CONSTRAINTS}`

export const constraints = registerCollector<PostgresContext>({
  name: 'constraints',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<InvalidConstraint[]>(INVALID_CONSTRAINTS_SQL, [], PREPARED)
    return {
      invalid_constraints: rows.map((r) => ({
        schema_name: r.schema_name,
        table_name: r.table_name,
        constraint_name: r.constraint_name,
        constraint_type: r.constraint_type,
        definition: r.definition,
      })),
    }
  },
})
