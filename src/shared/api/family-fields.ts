// A counter family's fields (src/shared/families.ts) as response properties, typed per field: the
// statement, table and index responses name each family field once, as the families list them.
import { t } from 'elysia'
import type { TInteger, TNull, TNumber, TUnion } from '@sinclair/typebox'
import { type Field, type Unit, columnType } from '../families.ts'

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

/** A duration (ms) is a number; every other field is a whole number (the stores round a fractional one from the wire at ingest, into BIGINT columns). */
type FieldSchema<F extends Field> = F['unit'] extends 'ms' ? TNumber : TInteger

/** A field's schema, `how` saying what its value is (summed over the window, the latest value...). */
export function familyNumber<F extends Field>(f: F, how: string): FieldSchema<F> {
  const description = `${UNIT_TEXT[f.unit]}, ${how}`
  return (
    columnType(f) === 'double precision' ? t.Number({ description }) : t.Integer({ description })
  ) as FieldSchema<F>
}

/** The fields as numbers. */
export function numberProperties<F extends Field>(
  fields: readonly F[],
  how: (f: F) => string,
): { [P in F as P['key']]: FieldSchema<P> } {
  return Object.fromEntries(fields.map((f) => [f.key, familyNumber(f, how(f))])) as {
    [P in F as P['key']]: FieldSchema<P>
  }
}

/** The fields as numbers or null (not known). */
export function nullableProperties<F extends Field>(
  fields: readonly F[],
  how: (f: F) => string,
): { [P in F as P['key']]: TUnion<[FieldSchema<P>, TNull]> } {
  return Object.fromEntries(fields.map((f) => [f.key, t.Union([familyNumber(f, how(f)), t.Null()])])) as {
    [P in F as P['key']]: TUnion<[FieldSchema<P>, TNull]>
  }
}
