// The doctor's thresholds of one database (src/server/routes/thresholds.ts): every rule of its engine
// with each threshold's default, the value the database uses and the range it takes; and the body that
// changes them. A threshold is a number, or a list of names (pg_superusers' allowed_names).
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'

export const ThresholdValue = t.Union([t.Number(), t.Array(t.String())], {
  description: 'a number, or a list of names (kind `names`)',
})

export const Threshold = t.Object({
  key: t.String(),
  kind: t.Union([t.Literal('number'), t.Literal('names')]),
  default: ThresholdValue,
  value: ThresholdValue,
  overridden: t.Boolean({ description: 'the database sets its own value (else value is the default)' }),
  updated_at: Nullable(Timestamp("when the database's value was set; null for a default")),
  minimum: Nullable(t.Number({ description: 'the smallest value a number takes; null for a list' })),
  maximum: Nullable(t.Number({ description: 'the largest value a number takes; null for a list' })),
  whole: t.Boolean({ description: 'a count: whole numbers only' }),
})

export const RuleThresholds = t.Object({
  rule: t.String({ description: "the rule's id (docs/doctor-rules.md)" }),
  category: t.String(),
  summary: t.String(),
  thresholds: t.Array(Threshold),
})

export const DatabaseThresholds = t.Object(
  {
    database_id: Uuid(),
    rules: t.Array(RuleThresholds, {
      description: "every rule of the database's engine that has thresholds, in the doctor's order",
    }),
  },
  { title: 'DatabaseThresholds' },
)

/** PUT's body: rule → key → value; null takes the database's value away (back to the default). */
export const ThresholdsChange = t.Object(
  {
    thresholds: t.Record(
      t.String({ maxLength: 64 }),
      t.Record(
        t.String({ maxLength: 64 }),
        t.Union([t.Number(), t.Array(t.String({ maxLength: 256 }), { maxItems: 1000 }), t.Null()]),
        { maxProperties: 64 },
      ),
      {
        maxProperties: 200,
        error:
          'thresholds must be an object of rules, each an object of keys whose values are a number, a list of names, or null',
        examples: [
          {
            pg_prepared_transactions: { warning_s: 900 },
            pg_superusers: { allowed_names: ['admin'] },
            pg_rollback_ratio: { warning_commit_ratio: null },
          },
        ],
      },
    ),
  },
  { additionalProperties: false },
)
