// The ingest route's two steps on a batch, unit by unit: the wire schema's check as Elysia compiles it
// (TypeBox's TypeCompiler on the route's body schema) and stripUnknownFields (src/server/unknown-fields.ts)
// on what passed. Unknown fields deep inside unions, records and arrays, __proto__ keys, and wrong values
// deep inside (NaN, Infinity, numbers past their maximum, wrong types) next to unknown fields.
import { describe, expect, test } from 'bun:test'
import { Kind, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { IngestBody } from '../../src/server/ingest-writer/apply.ts'
import { stripUnknownFields } from '../../src/server/unknown-fields.ts'
import { IngestBatch } from '../../src/shared/wire.ts'
import { fullBatch } from '../support/full-batch.ts'

const LIMITS = { distinctPaths: 64, named: 8 }
const check = TypeCompiler.Compile(IngestBody)

/** The schema with additionalProperties: false on every object: what a batch must pass once stripped. */
function strict(schema: TSchema): TSchema {
  const copy = { ...schema } as TSchema
  if (schema[Kind] === 'Object') {
    copy.properties = Object.fromEntries(
      Object.entries(schema.properties as Record<string, TSchema>).map(([k, v]) => [k, strict(v)]),
    )
    copy.additionalProperties = false
  }
  if (schema[Kind] === 'Array') copy.items = strict(schema.items as TSchema)
  if (schema[Kind] === 'Union') copy.anyOf = (schema.anyOf as TSchema[]).map(strict)
  return copy
}
const strictCheck = TypeCompiler.Compile(strict(IngestBody))

const AT = Date.UTC(2026, 10, 26, 9)
// structuredClone keeps NaN and Infinity, which a JSON round trip would turn into null.
const batchCopy = (name: string) => structuredClone(fullBatch(name, AT)) as any

describe('ingest: unknown fields and validation', () => {
  test('a valid batch without unknown fields passes and comes back as the same object', () => {
    const batch = fullBatch('unchanged', AT)
    expect(check.Check(batch)).toBe(true)
    const result = stripUnknownFields(IngestBatch, batch, LIMITS)
    expect(result.value).toBe(batch)
    expect({ paths: result.paths, more: result.more }).toEqual({ paths: [], more: 0 })
  })

  test('unknown fields at every depth, inside unions, arrays and optional objects, are left out and named by their path shape', () => {
    const batch = batchCopy('unknown')
    const expected = structuredClone(batch)
    batch.compression = 'zstd'
    batch.database.cluster_role = 'primary'
    batch.tables[0].delta.n_tup_future = 3 // inside a union's object member (delta: object | null)
    batch.tables[0].future_gauge = 1
    batch.sequences[0].owned_by.column_collation = 'C' // owned_by: optional, object | null
    batch.replication.replicas[0].reply_time = 5
    batch.query_stats[0].jit_ms = 1
    batch.query_stats[1].jit_ms = 2 // the same path shape: named once
    batch.explain_plans[0].plan_json.Plan.extra = 1 // plan_json is open (Unknown): kept as sent
    batch.bgwriter.future_counter = 1 // a record: any key is a counter, kept
    expect(check.Check(batch)).toBe(true)
    const result = stripUnknownFields(IngestBatch, batch, LIMITS)
    expect([...result.paths].sort()).toEqual([
      'compression',
      'database.cluster_role',
      'query_stats[].jit_ms',
      'replication.replicas[].reply_time',
      'sequences[].owned_by.column_collation',
      'tables[].delta.n_tup_future',
      'tables[].future_gauge',
    ])
    expect(result.more).toBe(0)
    expect(strictCheck.Check(result.value) || [...strictCheck.Errors(result.value)].map((e) => e.path)).toBe(true)
    expected.explain_plans[0].plan_json.Plan.extra = 1
    expected.bgwriter.future_counter = 1
    expect(result.value).toEqual(expected)
  })

  test('__proto__ and constructor keys from JSON: left out of declared objects (no prototype is touched), checked as counters in a record', () => {
    const text = JSON.stringify(fullBatch('proto', AT))
      .replace('"database":{', '"database":{"__proto__":{"polluted":1},"constructor":1,')
      .replace('"bgwriter":{', '"bgwriter":{"__proto__":7,')
    const batch = JSON.parse(text)
    expect(check.Check(batch)).toBe(true)
    const result = stripUnknownFields(IngestBatch, batch, LIMITS)
    expect([...result.paths].sort()).toEqual(['database.__proto__', 'database.constructor'])
    expect(Object.hasOwn(result.value.database, '__proto__')).toBe(false)
    expect(Object.getPrototypeOf(result.value.database)).toBe(Object.prototype)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    expect(Object.getOwnPropertyDescriptor(result.value.bgwriter, '__proto__')?.value).toBe(7)
    // A record's value is checked whatever its key: a __proto__ counter that is not a number fails.
    expect(check.Check(JSON.parse(text.replace('"__proto__":7', '"__proto__":"7"')))).toBe(false)
  })

  test('a wrong type, NaN, Infinity or a number past its maximum deep inside fails, unknown fields beside it or not', () => {
    const cases: [string, (b: any) => void][] = [
      ['a delta counter as a string', (b) => (b.tables[0].delta.seq_scan = '1')],
      ['NaN in a delta', (b) => (b.tables[0].delta.seq_scan = Number.NaN)],
      ['Infinity in a statement', (b) => (b.query_stats[0].calls = Number.POSITIVE_INFINITY)],
      ['-Infinity in a counter map', (b) => (b.wal_stats.wal_records = Number.NEGATIVE_INFINITY)],
      ['a count past 2^53 - 1', (b) => (b.query_stats[0].calls = 2 ** 53)],
      ['1e308 as a duration', (b) => (b.query_stats[0].total_time_ms = 1e308)],
      ['a negative duration', (b) => (b.query_stats[0].total_time_ms = -1)],
      ['a port that is not an integer', (b) => (b.database.port = 5432.5)],
      ['owned_by of the wrong type', (b) => (b.sequences[0].owned_by = 'public.t')],
      ['a counter map value as a string', (b) => (b.wal_stats.wal_records = '1')],
      ['a plan without plan_json', (b) => delete b.explain_plans[0].plan_json],
      ['an engine not in the union', (b) => (b.database.engine = 'mysql')],
      ['a tag value with NUL', (b) => (b.database.tags = { env: 'a\u0000b' })],
      [
        'an unknown field beside a wrong one in a union member',
        (b) => ((b.tables[0].delta.future = 1), (b.tables[0].delta.seq_scan = -1)),
      ],
    ]
    const failed = cases.map(([name, change]) => {
      const batch = batchCopy('bad')
      change(batch)
      return [name, check.Check(batch)]
    })
    expect(failed).toEqual(cases.map(([name]) => [name, false]))
  })

  test('more distinct unknown paths than the limit: a 400', () => {
    const batch = batchCopy('many')
    for (let i = 0; i <= LIMITS.distinctPaths; i++) batch.tables[0][`f${i}`] = i
    expect(check.Check(batch)).toBe(true)
    expect(() => stripUnknownFields(IngestBatch, batch, LIMITS)).toThrow(
      `too many unknown fields (more than ${LIMITS.distinctPaths})`,
    )
  })
})
