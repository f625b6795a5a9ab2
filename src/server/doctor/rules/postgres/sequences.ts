// Sequences close to their maximum (collected by `tables` from pg_sequences, with the column each one
// feeds). At the maximum every INSERT that needs a new value fails; integer (int4) serials reach it at
// 2,147,483,647, and a bigint sequence feeding an integer column overflows the column there too, which
// the agent's used ratio accounts for. PgHero's sequence_danger flags 90 % used (critical here); 75 %
// is the early warning that leaves time for the migration to bigint.
import type { SequenceStat } from '../../../../shared/wire.ts'
import { type FindingDraft, type Rule, pct, severityAbove } from '../../types.ts'
import { commentText, pgIdent, pgQualified, pgRegclass, pgString, pgObject } from '../../sql-text.ts'

const defaults = {
  warning_ratio: 0.75,
  critical_ratio: 0.9,
  /** Sequences named one finding each, the most used first; the rest are counted in one more. */
  max_findings: 10,
}

const TYPE_MAX: Record<string, number> = { smallint: 32_767, integer: 2_147_483_647, bigint: 2 ** 63 }
const n = (v: number) => v.toLocaleString('en-US')

/** The value the sequence can count up to: its own maximum or its column type's, the lower. */
function upperLimit(s: SequenceStat): number {
  const column = s.owned_by ? TYPE_MAX[s.owned_by.column_type] : undefined
  return column === undefined ? s.max_value : Math.min(s.max_value, column)
}

export const sequenceExhaustion: Rule<typeof defaults> = {
  id: 'pg_sequence_exhaustion',
  summary:
    'Sequences close to their maximum, or to the maximum of the column they feed: at the limit every INSERT fails.',
  collectors: ['tables'],
  engine: 'postgres',
  category: 'capacity',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(sequenceExhaustion)
    const flagged = (await ctx.sequences()).entries
      .filter((s) => s.used_ratio !== null && s.last_value !== null && s.used_ratio >= t.warning_ratio)
      .sort((a, b) => b.used_ratio! - a.used_ratio!)
    const severityOf = (s: SequenceStat) => severityAbove(s.used_ratio!, t.warning_ratio, t.critical_ratio) ?? 'warning'

    const findings: FindingDraft[] = flagged.slice(0, t.max_findings).map((s) => {
      const name = pgQualified(s.schema_name, s.sequence_name)
      const owner = s.owned_by
      const table = owner ? pgQualified(owner.schema_name, owner.table_name) : undefined
      const column = owner ? pgIdent(owner.column_name) : undefined
      const narrowColumn =
        owner !== null && owner !== undefined && owner.column_type !== 'bigint' && owner.column_type in TYPE_MAX
      const limit = upperLimit(s)
      const position =
        s.increment_by > 0
          ? `is at ${n(s.last_value!)} of ${n(limit)}: ${pct(s.used_ratio!)} used, ${n(Math.max(0, limit - s.last_value!))} values left`
          : `is at ${n(s.last_value!)}, counting down: ${pct(s.used_ratio!)} of its range used`
      const fix: string[] = []
      if (s.data_type !== 'bigint')
        fix.push(
          `ALTER SEQUENCE ${name} AS bigint;   -- raises its maximum to bigint's too when it was ${commentText(s.data_type, 40)}'s`,
        )
      if (narrowColumn)
        fix.push(
          `ALTER TABLE ${table} ALTER COLUMN ${column} TYPE bigint;   -- rewrites the table under an ACCESS EXCLUSIVE lock; on a large table migrate through a new bigint column instead`,
        )
      if (s.data_type === 'bigint' && !narrowColumn)
        fix.push(`ALTER SEQUENCE ${name} NO MAXVALUE;   -- its maximum was set below bigint's`)
      return {
        severity: severityOf(s),
        object: pgObject(s.schema_name, s.sequence_name),
        objects: [
          pgObject(s.schema_name, s.sequence_name),
          ...(owner ? [pgObject(owner.schema_name, owner.table_name)] : []),
        ],
        title: `Sequence ${name} is close to its maximum`,
        detail: `${name} (${s.data_type}) ${position}${owner ? `; it feeds ${table}.${column} (${owner.column_type})` : ''}. When it runs out, every INSERT that needs a new value fails.`,
        recommendation:
          s.data_type === 'bigint' && !narrowColumn
            ? 'Raise the maximum the sequence was given, before it runs out.'
            : `Widen ${[s.data_type !== 'bigint' ? 'the sequence' : '', narrowColumn ? 'the column it feeds' : ''].filter(Boolean).join(' and ')} to bigint before it runs out${narrowColumn ? ', together with every column that references it through a foreign key' : ''}.`,
        how_to_investigate: [
          `SELECT * FROM pg_sequences WHERE schemaname = ${pgString(s.schema_name)} AND sequencename = ${pgString(s.sequence_name)};`,
          ...(table
            ? [
                `SELECT conrelid::regclass AS referencing_table, conname FROM pg_constraint WHERE confrelid = ${pgRegclass(owner!.schema_name, owner!.table_name)} AND contype = 'f';   -- these columns must be widened too`,
              ]
            : []),
        ],
        how_to_fix: fix,
        metrics: {
          used_ratio: Number(s.used_ratio!.toFixed(4)),
          last_value: s.last_value,
          max_value: limit,
          data_type: s.data_type,
        },
      }
    })

    const rest = flagged.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((s) => severityOf(s) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more sequences close to their maximum`,
        detail: `Besides the sequences named above, ${rest.length} more have used ${pct(t.warning_ratio, 0)} or more of their range: ${rest
          .slice(0, 20)
          .map((s) => `${pgObject(s.schema_name, s.sequence_name)} (${pct(s.used_ratio!)})`)
          .join(', ')}${rest.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Widen each of them, and the columns they feed, to bigint.',
        how_to_investigate: [
          'SELECT schemaname, sequencename, data_type, last_value, max_value FROM pg_sequences ORDER BY last_value::numeric / max_value DESC NULLS LAST;',
        ],
        how_to_fix: [
          'ALTER SEQUENCE <schema>.<sequence> AS bigint;   -- and ALTER TABLE ... ALTER COLUMN ... TYPE bigint for its column',
        ],
        objects: rest.slice(0, 100).map((s) => pgObject(s.schema_name, s.sequence_name)),
        metrics: { sequences: rest.length },
      })
    }
    return findings
  },
}
