// The narrowing of the test matrix for local runs (test/support/matrix.ts): DBM_TEST_PG and DBM_TEST_STORES
// pick majors and stores, in the matrix's order; a value that is not in it is an error naming it; under
// CI the variables are refused, so CI cannot run less than the whole matrix.
import { expect, test } from 'bun:test'
import { allMajors, allStoreKinds, narrowed } from './support/matrix.ts'

test('unset or empty: the whole matrix', () => {
  expect(narrowed('DBM_TEST_PG', allMajors, {})).toEqual([13, 14, 16, 17, 18])
  expect(narrowed('DBM_TEST_PG', allMajors, { DBM_TEST_PG: ' ' })).toEqual([13, 14, 16, 17, 18])
  expect(narrowed('DBM_TEST_STORES', allStoreKinds, {})).toEqual(['sqlite', 'postgres'])
})

test('a comma list picks those, in the matrix order, once each', () => {
  expect(narrowed('DBM_TEST_PG', allMajors, { DBM_TEST_PG: '18, 13,18' })).toEqual([13, 18])
  expect(narrowed('DBM_TEST_STORES', allStoreKinds, { DBM_TEST_STORES: 'sqlite' })).toEqual(['sqlite'])
})

test('a value outside the matrix is an error that names it', () => {
  expect(() => narrowed('DBM_TEST_PG', allMajors, { DBM_TEST_PG: '15' })).toThrow(
    'DBM_TEST_PG: unknown value "15" (one of 13, 14, 16, 17, 18)',
  )
  expect(() => narrowed('DBM_TEST_STORES', allStoreKinds, { DBM_TEST_STORES: 'mysql' })).toThrow(
    'unknown value "mysql"',
  )
  expect(() => narrowed('DBM_TEST_PG', allMajors, { DBM_TEST_PG: ',' })).toThrow('DBM_TEST_PG names nothing')
})

test('under CI the narrowing is refused; CI without it runs everything', () => {
  for (const CI of ['true', '1']) {
    expect(() => narrowed('DBM_TEST_PG', allMajors, { CI, DBM_TEST_PG: '17' })).toThrow(
      'DBM_TEST_PG is set, but CI runs the whole matrix',
    )
  }
  expect(narrowed('DBM_TEST_STORES', allStoreKinds, { CI: 'true' })).toEqual(['sqlite', 'postgres'])
})
