// The store's SQL tagged template (src/server/store/sql.ts): placeholders numbered in order through
// nested fragments and lists, values only ever as parameters, identifiers only from their fixed set.
import { describe, expect, test } from 'bun:test'
import { Fragment, ident, join, param, sql } from '../../src/server/store/sql.ts'

describe('sql tagged template', () => {
  test('numbers the placeholders in order and keeps the values as parameters', () => {
    const q = sql`SELECT * FROM t WHERE a = ${'x'} AND b < ${42} AND c IS ${null}`
    expect(q.sql).toBe('SELECT * FROM t WHERE a = $1 AND b < $2 AND c IS $3')
    expect(q.params).toEqual(['x', 42, null])
  })

  test('an array is a list of parameters; an empty one matches nothing', () => {
    const q = sql`SELECT * FROM t WHERE a = ${1} AND b IN ${['p', 'q', 'r']} AND c = ${2}`
    expect(q.sql).toBe('SELECT * FROM t WHERE a = $1 AND b IN ($2, $3, $4) AND c = $5')
    expect(q.params).toEqual([1, 'p', 'q', 'r', 2])
    const none = sql`SELECT * FROM t WHERE b IN ${[]}`
    expect(none.sql).toBe('SELECT * FROM t WHERE b IN (NULL)')
    expect(none.params).toEqual([])
  })

  test('param() binds an array as one parameter', () => {
    const q = sql`SELECT * FROM unnest(${param(['a', 'b'])}::text[], ${param([1, 2])}::bigint[]) WHERE x = ${3}`
    expect(q.sql).toBe('SELECT * FROM unnest($1::text[], $2::bigint[]) WHERE x = $3')
    expect(q.params).toEqual([['a', 'b'], [1, 2], 3])
  })

  test('nested fragments are numbered on from where they land, also when one is used twice', () => {
    const range = (from: number, to: number) => sql`(bucket >= ${from} AND bucket < ${to})`
    const ranges = join([range(10, 20), range(30, 40)], sql` OR `)
    const q = sql`SELECT ${ranges} AS a, ${ranges} AS b FROM t WHERE id = ${'db'} AND (${ranges})`
    expect(q.sql).toBe(
      'SELECT (bucket >= $1 AND bucket < $2) OR (bucket >= $3 AND bucket < $4) AS a, (bucket >= $5 AND bucket < $6) OR (bucket >= $7 AND bucket < $8) AS b ' +
        'FROM t WHERE id = $9 AND ((bucket >= $10 AND bucket < $11) OR (bucket >= $12 AND bucket < $13))',
    )
    expect(q.params).toEqual([10, 20, 30, 40, 10, 20, 30, 40, 'db', 10, 20, 30, 40])
    // Joined fragments (tuples of a VALUES list) number through them too.
    const values = sql`INSERT INTO t (a, b) VALUES ${join([sql`(${1}, ${'x'})`, sql`(${2}, ${'y'})`])}`
    expect(values.sql).toBe('INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)')
    expect(values.params).toEqual([1, 'x', 2, 'y'])
  })

  test('join of nothing is empty text; its default separator is a comma', () => {
    expect(join([]).sql).toBe('')
    expect(join([sql`a`, sql`${1}`, sql`b`]).sql).toBe('a, $1, b')
  })

  test('no value ever reaches the text', () => {
    const hostile = ["'; DROP TABLE users; --", '$1', 'x) OR (1 = 1', 12345.678, 9007199254740991n, { a: 1 }]
    const q = sql`SELECT * FROM t WHERE a = ${hostile[0]} AND b = ${hostile[1]} AND c IN ${hostile.slice(2, 4)} AND d = ${hostile[4]} AND e = ${hostile[5]}`
    expect(q.sql).toBe('SELECT * FROM t WHERE a = $1 AND b = $2 AND c IN ($3, $4) AND d = $5 AND e = $6')
    expect(q.params).toEqual(hostile)
    for (const value of ['DROP', 'OR (1', '12345', '9007199254740991', '[object']) expect(q.sql).not.toContain(value)
  })

  test('ident: text only from its fixed set', () => {
    const COLUMNS = ['calls', 'rows'] as const
    expect(
      sql`SELECT ${ident('calls', COLUMNS)} FROM t WHERE r = ${ident(3600, [60, 600, 3600])} AND x = ${1}`.sql,
    ).toBe('SELECT calls FROM t WHERE r = 3600 AND x = $1')
    expect(() => ident('calls; DROP TABLE t', COLUMNS)).toThrow(
      'SQL identifier not in its fixed set: "calls; DROP TABLE t"',
    )
    expect(() => ident(61, new Set([60, 3600]))).toThrow('SQL identifier not in its fixed set: 61')
  })

  test('fragments are made by the tag, ident and join only', () => {
    expect(() => new (Fragment as any)(['text'], [], Symbol('sql fragment'))).toThrow(
      'SQL fragments are made by sql``, ident() and join()',
    )
  })
})
