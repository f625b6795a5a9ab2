// Constraints added NOT VALID and never validated (collected by `constraints`). PostgreSQL checks them
// on rows written since, not on the rows that were there: those may break them (orphaned references,
// values a CHECK forbids), and the planner does not trust a CHECK that is not valid (no constraint
// exclusion). Adding one NOT VALID and validating it later is the safe way to add a constraint to a
// big table; left unvalidated, it is a migration half done. PgHero lists them; one warning per
// constraint, the fix is VALIDATE CONSTRAINT, which scans the table under a SHARE UPDATE EXCLUSIVE lock
// (reads and writes go on) and fails, naming a row, if one breaks it.
import type { InvalidConstraint } from '../../../../shared/wire.ts'
import type { Snapshot } from '../../context.ts'
import type { FindingDraft, Rule } from '../../types.ts'
import { pgIdent, pgQualified, pgRegclass, pgString, pgObject } from '../../sql-text.ts'

const defaults = {
  /** Constraints named one finding each; the rest are counted in one more finding. */
  max_findings: 10,
}

const objectOf = (c: InvalidConstraint) => pgObject(c.schema_name, c.table_name, c.constraint_name)
const validate = (c: InvalidConstraint) =>
  `ALTER TABLE ${pgQualified(c.schema_name, c.table_name)} VALIDATE CONSTRAINT ${pgIdent(c.constraint_name)};`
const LIST_SQL =
  'SELECT conrelid::regclass AS table_name, conname, pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE NOT convalidated ORDER BY 1, 2;'

export const invalidConstraints: Rule<typeof defaults> = {
  id: 'pg_invalid_constraints',
  summary:
    'Constraints added NOT VALID and never validated: the rows that were there may break them, and the planner does not trust them.',
  collectors: ['constraints'],
  engine: 'postgres',
  category: 'schema',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(invalidConstraints)
    const { entries } = await ctx.once<Snapshot<InvalidConstraint>>('invalid_constraints', async () => {
      const found = await ctx.store.latestSnapshot(ctx.db.id, 'invalid_constraints')
      return {
        ts: found?.ts ?? null,
        entries: Array.isArray(found?.payload) ? (found.payload as InvalidConstraint[]) : [],
      }
    })
    const findings: FindingDraft[] = entries.slice(0, t.max_findings).map((c) => {
      const table = pgQualified(c.schema_name, c.table_name)
      return {
        severity: 'warning',
        object: objectOf(c),
        title: `Constraint ${pgIdent(c.constraint_name)} on ${table} is NOT VALID`,
        detail:
          `The ${c.constraint_type} constraint ${pgIdent(c.constraint_name)} on ${table} was added NOT VALID and has not been validated: ` +
          `PostgreSQL enforces it on rows written since, but the rows that were there before may break it` +
          (c.constraint_type === 'check' ? ', and the planner cannot rely on it to skip partitions or tables.' : '.'),
        recommendation:
          'Validate it: VALIDATE CONSTRAINT checks the existing rows while reads and writes go on (SHARE UPDATE EXCLUSIVE lock). If a row breaks it, the command fails naming the row: fix those rows first.',
        how_to_investigate: [
          `SELECT conname, pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conrelid = ${pgRegclass(c.schema_name, c.table_name)} AND conname = ${pgString(c.constraint_name)};`,
          LIST_SQL,
        ],
        how_to_fix: [validate(c)],
        metrics: { constraint_type: c.constraint_type, definition: c.definition },
      }
    })
    const rest = entries.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: 'warning',
        title: `${rest.length} more constraints are NOT VALID`,
        detail: `Besides the ${t.max_findings} named, ${rest.length} more constraints were added NOT VALID and never validated: ${rest
          .slice(0, 20)
          .map(objectOf)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation: 'Validate each of them once the rows that break it are fixed.',
        how_to_investigate: [LIST_SQL],
        how_to_fix: rest.map(validate),
        objects: rest.map(objectOf),
        metrics: { constraints: rest.length },
      })
    }
    return findings
  },
}
