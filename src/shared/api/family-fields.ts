// A counter family's fields (src/shared/families.ts) as response properties, typed per field: the
// statement, table and index responses name each family field once, as the families list them.
import { t } from 'elysia'
import type { TNull, TNumber, TUnion } from '@sinclair/typebox'
import type { Field, Unit } from '../families.ts'

const UNIT_TEXT: Record<Unit, string> = {
  calls: 'calls',
  rows: 'rows',
  blocks: 'blocks (8 kB pages)',
  tuples: 'tuples',
  scans: 'scans',
  bytes: 'bytes',
  ms: 'ms',
  count: 'count',
}

/**
 * A field's number: a duration in ms, or a count. Counts are not declared integers: the agent's wire
 * schema accepts any non-negative number for them (src/shared/wire.ts), so a store may hold a fraction.
 */
export const familyNumber = (f: Field, how: string) => t.Number({ description: `${UNIT_TEXT[f.unit]}, ${how}` })

/** The fields as numbers, `how` saying what the number is (summed over the window, the latest value...). */
export function numberProperties<F extends Field>(fields: readonly F[], how: (f: F) => string): { [K in F['key']]: TNumber } {
  return Object.fromEntries(fields.map((f) => [f.key, familyNumber(f, how(f))])) as { [K in F['key']]: TNumber }
}

/** The fields as numbers or null (not known). */
export function nullableProperties<F extends Field>(fields: readonly F[], how: (f: F) => string): { [K in F['key']]: TUnion<[TNumber, TNull]> } {
  return Object.fromEntries(fields.map((f) => [f.key, t.Union([familyNumber(f, how(f)), t.Null()])])) as { [K in F['key']]: TUnion<[TNumber, TNull]> }
}
