// A finding as the API answers it (findingView) against the Finding response schema: times in RFC 3339,
// a metric that is not finite as null (JSON's spelling, and what the schema allows: Elysia refuses
// NaN and Infinity, which would turn the doctor's answer into a 500), the fix commands locked for an
// unverified organization.
import { expect, test } from 'bun:test'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { LOCKED_FIX, findingView } from '../../src/server/doctor/index.ts'
import type { Finding } from '../../src/server/doctor/types.ts'
import { Finding as FindingSchema } from '../../src/shared/api/doctor.ts'

const finding: Finding = {
  rule: 'pg_dead_tuples',
  key: 'pg_dead_tuples:public.orders',
  cause: 'table:public.orders',
  severity: 'warning',
  category: 'maintenance',
  title: 'Dead rows in public.orders',
  detail: 'detail',
  recommendation: 'VACUUM it',
  how_to_investigate: ['SELECT 1'],
  how_to_fix: ['VACUUM public.orders;'],
  objects: ['public.orders'],
  metrics: {
    dead_ratio: Number.NaN,
    growth: Number.POSITIVE_INFINITY,
    dead: 12,
    last_autovacuum: Date.UTC(2026, 10, 26, 14, 3),
    table: 'public.orders',
    none: null,
  },
  as_of: Date.UTC(2026, 10, 26, 14, 5),
}

test('a finding as the API answers it matches the Finding schema, non-finite metrics as null', () => {
  const check = TypeCompiler.Compile(FindingSchema)
  const verified = findingView(finding, true)
  expect(verified).toEqual({
    ...finding,
    metrics: {
      dead_ratio: null,
      growth: null,
      dead: 12,
      last_autovacuum: '2026-11-26T14:03:00.000Z',
      table: 'public.orders',
      none: null,
    },
    as_of: '2026-11-26T14:05:00.000Z',
  })
  expect([...check.Errors(verified)].map((e) => e.path)).toEqual([])
  const locked = findingView(finding, false)
  expect({
    how_to_fix: locked.how_to_fix,
    how_to_fix_locked: (locked as { how_to_fix_locked?: string }).how_to_fix_locked,
  }).toEqual({ how_to_fix: [], how_to_fix_locked: LOCKED_FIX })
  expect(check.Check(locked)).toBe(true)
})
