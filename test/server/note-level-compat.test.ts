// Agent/server version skew for the collector notes' level ('info' notes, added with issue 14): a
// server whose wire schema predates the field (CollectorError without `level`) still accepts a newer
// agent's batch, dropping the field as an unknown one; a newer server accepts an older agent's notes.
import { expect, test } from 'bun:test'
import { Type as T } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { stripUnknownFields } from '../../src/server/unknown-fields.ts'
import { CollectorError, IngestBatch } from '../../src/shared/wire.ts'
import { fullBatch } from '../support/full-batch.ts'

const LIMITS = { distinctPaths: 64, named: 8 }
const AT = Date.UTC(2026, 10, 26, 9)
const notes = [
  {
    collector: 'explain_plans',
    message: '1 of 5 statements not explained: permission denied for table orders (grant pg_read_all_data)',
  },
  {
    collector: 'explain_plans',
    message: '3 write statements (INSERT, UPDATE, DELETE) not explained',
    level: 'info' as const,
  },
]

test('an older server (no level in its schema) accepts the newer agent’s notes, without the level', () => {
  const olderNote = T.Object({
    collector: CollectorError.properties.collector,
    message: CollectorError.properties.message,
  })
  const olderBatch = T.Object(
    { ...IngestBatch.properties, collector_notes: T.Optional(T.Array(olderNote)) },
    { additionalProperties: true },
  )
  const batch = { ...fullBatch('skew', AT), collector_notes: notes }
  expect(TypeCompiler.Compile(olderBatch).Check(batch)).toBe(true)
  const stripped = stripUnknownFields(olderBatch, batch, LIMITS)
  expect(stripped.paths).toEqual(['collector_notes[].level'])
  expect(stripped.value.collector_notes).toEqual(notes.map(({ collector, message }) => ({ collector, message })))
})

test('the current schema takes notes with and without a level, and no other level', () => {
  const check = TypeCompiler.Compile(IngestBatch)
  expect(check.Check({ ...fullBatch('current', AT), collector_notes: notes })).toBe(true)
  expect(check.Check({ ...fullBatch('current', AT), collector_notes: [{ ...notes[0], level: 'warning' }] })).toBe(false)
})
