// The archiver section (issue 25) across agent/server versions: a server whose wire schema predates it
// drops it as an unknown field, and the current schema bounds its texts. The API side (a database whose
// agent never sends it, late batches) is in test/api/internals.test.ts.
import { expect, test } from 'bun:test'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { Type as T } from '@sinclair/typebox'
import { stripUnknownFields } from '../../src/server/unknown-fields.ts'
import { type ArchiverStatus, IngestBatch } from '../../src/shared/wire.ts'
import { fullBatch } from '../support/full-batch.ts'

const LIMITS = { distinctPaths: 64, named: 8 }
const AT = Date.UTC(2026, 11, 7, 9)

const status: ArchiverStatus = {
  archive_mode: 'on',
  archive_command_set: true,
  archived_count: 7,
  last_archived_wal: '000000010000000000000007',
  last_archived_time: AT - 60_000,
  failed_count: 2,
  last_failed_wal: '000000010000000000000008',
  last_failed_time: AT - 30_000,
  stats_reset: null,
  ready_count: null,
  ready_bytes: null,
  oldest_ready_time: null,
}

test('an older server (no archiver in its schema) accepts the newer agent’s batch and drops the section', () => {
  const { archiver: _, ...older } = IngestBatch.properties
  const olderBatch = T.Object(older, { additionalProperties: true })
  const batch = { ...fullBatch('skew', AT), archiver: status }
  expect(TypeCompiler.Compile(olderBatch).Check(batch)).toBe(true)
  const stripped = stripUnknownFields(olderBatch, batch, LIMITS)
  expect(stripped.paths).toEqual(['archiver'])
  expect('archiver' in (stripped.value as object)).toBe(false)
})

test('the current schema takes the section, and an older agent’s batch without it, and bounds its texts', () => {
  const check = TypeCompiler.Compile(IngestBatch)
  const { archiver: _, ...withoutSection } = fullBatch('current', AT)
  expect(check.Check(withoutSection)).toBe(true)
  expect(check.Check({ ...withoutSection, archiver: status })).toBe(true)
  expect(check.Check({ ...withoutSection, archiver: { ...status, last_failed_wal: 'x'.repeat(65) } })).toBe(false)
  expect(check.Check({ ...withoutSection, archiver: { ...status, archive_mode: 'o\u0000n' } })).toBe(false)
  expect(check.Check({ ...withoutSection, archiver: { ...status, failed_count: -1 } })).toBe(false)
})
