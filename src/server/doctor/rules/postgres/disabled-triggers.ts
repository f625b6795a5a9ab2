// Triggers switched off (the agent's `triggers` collector: pg_trigger.tgenabled = 'D'). A user trigger
// that is off no longer does its job (an audit row, a derived column, a check): a warning per table,
// naming the triggers. ALTER TABLE ... DISABLE TRIGGER ALL also switches off the internal triggers that
// enforce foreign keys, so rows may now reference rows that do not exist: critical, one finding per
// foreign key, naming the constraint and the table, with the query that finds the orphans it let in.
// Names are the server's text: quoted into commands through sql-text.ts only.
import { pgIdent, pgObject, pgQualified, pgRegclass, pgString } from '../../sql-text.ts'
import type { FindingDraft, Rule } from '../../types.ts'
import type { DisabledTrigger } from '../../../../shared/wire.ts'

const defaults = {
  /** Tables with disabled user triggers named one finding each; the rest are counted in one more. */
  max_findings: 20,
}

export const disabledTriggers: Rule<typeof defaults> = {
  id: 'pg_disabled_triggers',
  engine: 'postgres',
  category: 'schema',
  summary:
    'Triggers switched off (DISABLE TRIGGER): a foreign key whose internal triggers are off is no longer checked (critical, naming the constraint); user triggers that are off, per table.',
  collectors: ['triggers'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(disabledTriggers)
    const found = await ctx.disabledTriggers()
    if (!found || found.entries.length === 0) return []
    const findings: FindingDraft[] = []

    // Foreign keys whose checks or actions are off: one finding per constraint.
    const keys = new Map<string, DisabledTrigger[]>()
    for (const tr of found.entries) {
      if (!tr.internal || tr.constraint_name === null || tr.constraint_schema === null || tr.constraint_table === null)
        continue
      const id = JSON.stringify([tr.constraint_schema, tr.constraint_table, tr.constraint_name])
      keys.set(id, [...(keys.get(id) ?? []), tr])
    }
    for (const triggers of keys.values()) {
      const first = triggers[0]!
      const table = pgQualified(first.constraint_schema!, first.constraint_table!)
      const rel = pgRegclass(first.constraint_schema!, first.constraint_table!)
      const on = [...new Set(triggers.map((tr) => pgQualified(tr.schema_name, tr.table_name)))]
      findings.push({
        severity: 'critical',
        object: `${pgObject(first.constraint_schema!, first.constraint_table!)} ${pgIdent(first.constraint_name!)}`,
        objects: [pgObject(first.constraint_schema!, first.constraint_table!), ...on.filter((o) => o !== table)],
        title: `Foreign key ${pgIdent(first.constraint_name!)} on ${table} unchecked`,
        detail:
          `The internal triggers that enforce foreign key ${pgIdent(first.constraint_name!)} of ${table} are switched off on ${on.join(' and ')} ` +
          `(${triggers.length} trigger${triggers.length === 1 ? '' : 's'}; ALTER TABLE ... DISABLE TRIGGER ALL does this). Until they are on again, rows may be written that reference rows that do not exist, ` +
          'and deletes on the referenced table neither cascade nor fail. Turning them back on does not check the rows written meanwhile.',
        recommendation:
          'Turn the triggers back on (a bulk load or a restore that switched them off should have done so itself), then look for rows written meanwhile that break the key and fix them; validating the key again proves none is left.',
        how_to_investigate: [
          `SELECT tgname, tgenabled, tgrelid::regclass FROM pg_trigger WHERE tgconstraint = (SELECT oid FROM pg_constraint WHERE conrelid = ${rel} AND conname = ${pgString(first.constraint_name!)});`,
          `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = ${rel} AND conname = ${pgString(first.constraint_name!)};   -- the key's columns, to look for rows without a referenced row`,
        ],
        how_to_fix: [
          ...on.map((o) => `ALTER TABLE ${o} ENABLE TRIGGER ALL;   -- needs a superuser for the internal triggers`),
          `SELECT format('ALTER TABLE %s DROP CONSTRAINT %I, ADD CONSTRAINT %I %s NOT VALID', conrelid::regclass, conname, conname, pg_get_constraintdef(oid)) FROM pg_constraint WHERE conrelid = ${rel} AND conname = ${pgString(first.constraint_name!)} /* in psql: the key again, unchecked */ \\gexec`,
          `ALTER TABLE ${table} VALIDATE CONSTRAINT ${pgIdent(first.constraint_name!)};   -- checks the rows written meanwhile: fails naming a row that breaks the key`,
        ],
        metrics: {
          constraint_name: first.constraint_name,
          table: pgObject(first.constraint_schema!, first.constraint_table!),
          disabled_triggers: triggers.length,
        },
        as_of: found.ts,
      })
    }

    // User triggers switched off, by table.
    const byTable = new Map<string, DisabledTrigger[]>()
    for (const tr of found.entries) {
      if (tr.internal) continue
      const id = JSON.stringify([tr.schema_name, tr.table_name])
      byTable.set(id, [...(byTable.get(id) ?? []), tr])
    }
    const tables = [...byTable.values()]
    for (const triggers of tables.slice(0, t.max_findings)) {
      const first = triggers[0]!
      const table = pgQualified(first.schema_name, first.table_name)
      const names = triggers.map((tr) => pgIdent(tr.trigger_name))
      findings.push({
        severity: 'warning',
        object: pgObject(first.schema_name, first.table_name),
        title: `${triggers.length === 1 ? `Trigger ${names[0]}` : `${triggers.length} triggers`} disabled on ${table}`,
        detail:
          `${triggers.length === 1 ? 'The trigger' : 'The triggers'} ${names.join(', ')} on ${table} ${triggers.length === 1 ? 'is' : 'are'} switched off (ALTER TABLE ... DISABLE TRIGGER): ` +
          'whatever they do (an audit row, a derived column, a check) is not done for the rows written meanwhile.',
        recommendation:
          'If they were switched off for a bulk load or a migration, turn them back on and redo their work for the rows written meanwhile; if they are no longer wanted, drop them so that nobody is misled.',
        how_to_investigate: [
          `SELECT tgname, tgenabled, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = ${pgRegclass(first.schema_name, first.table_name)} AND NOT tgisinternal;`,
        ],
        how_to_fix: triggers.map((tr) => `ALTER TABLE ${table} ENABLE TRIGGER ${pgIdent(tr.trigger_name)};`),
        metrics: { disabled_triggers: triggers.length },
        as_of: found.ts,
      })
    }
    const rest = tables.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: 'warning',
        title: `${rest.length} more tables with disabled triggers`,
        detail: `Besides the tables named above, ${rest.length} more tables have triggers switched off.`,
        recommendation: 'Turn them back on, or drop the ones no longer wanted.',
        how_to_investigate: [
          "SELECT tgrelid::regclass, tgname FROM pg_trigger WHERE tgenabled = 'D' AND NOT tgisinternal ORDER BY 1, 2;",
        ],
        how_to_fix: rest
          .slice(0, 100)
          .flatMap((trs) =>
            trs.map(
              (tr) =>
                `ALTER TABLE ${pgQualified(tr.schema_name, tr.table_name)} ENABLE TRIGGER ${pgIdent(tr.trigger_name)};`,
            ),
          ),
        objects: rest.slice(0, 100).map((trs) => pgObject(trs[0]!.schema_name, trs[0]!.table_name)),
        metrics: { tables: rest.length },
        as_of: found.ts,
      })
    }
    return findings
  },
}
