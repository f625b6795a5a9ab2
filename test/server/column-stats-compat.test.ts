// The column_stats section (issue 14) across agent/server versions and on both stores: a server whose
// wire schema predates it drops it as an unknown field; the current schema bounds it; the server keeps
// the latest one, which a batch without the section (an older agent, or a cycle whose statistics did not
// change) leaves in place and a batch delivered late never replaces.
import { describe, expect, test } from 'bun:test'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { Type as T } from '@sinclair/typebox'
import { stripUnknownFields } from '../../src/server/unknown-fields.ts'
import { ingestMaxItems } from '../../src/shared/ingest-limits.ts'
import { type ColumnStat, IngestBatch } from '../../src/shared/wire.ts'
import { agentSession, at, pgBatch } from '../support/batches.ts'
import { fullBatch } from '../support/full-batch.ts'
import { storeKinds } from '../support/server.ts'

const LIMITS = { distinctPaths: 64, named: 8 }
const AT = Date.UTC(2026, 10, 26, 9)

const stat = (column_name: string, n_distinct: number, extra: Partial<ColumnStat> = {}): ColumnStat => ({
  schema_name: 'public',
  table_name: "ord'ers\n🐘",
  column_name,
  n_distinct,
  null_frac: 0,
  correlation: 0.5,
  reltuples: 100_000,
  ...extra,
})
const stats = [
  stat('id', -1, { correlation: 1 }),
  stat('cu"stomer', 4998),
  stat('status', 3, { null_frac: 0.25, correlation: null }),
]

test('an older server (no column_stats in its schema) accepts the newer agent’s batch and drops the section', () => {
  const { column_stats: _, ...older } = IngestBatch.properties
  const olderBatch = T.Object(older, { additionalProperties: true })
  const batch = { ...fullBatch('skew', AT), column_stats: stats }
  expect(TypeCompiler.Compile(olderBatch).Check(batch)).toBe(true)
  const stripped = stripUnknownFields(olderBatch, batch, LIMITS)
  expect(stripped.paths).toEqual(['column_stats'])
  expect('column_stats' in (stripped.value as object)).toBe(false)
})

test('the current schema takes the section and bounds it', () => {
  const check = TypeCompiler.Compile(IngestBatch)
  const withStats = (column_stats: unknown[]) => ({ ...fullBatch('current', AT), column_stats })
  expect(check.Check(withStats(stats))).toBe(true)
  expect(check.Check(withStats([]))).toBe(true)
  expect(check.Check(fullBatch('older agent', AT))).toBe(true)
  expect(check.Check(withStats([stat('x', -1.5)]))).toBe(false)
  expect(check.Check(withStats([stat('x', 3, { null_frac: 1.5 })]))).toBe(false)
  expect(check.Check(withStats([stat('x', 3, { correlation: 2 })]))).toBe(false)
  expect(check.Check(withStats([{ ...stat('x', 3), reltuples: undefined }]))).toBe(false)
  expect(
    check.Check(withStats(Array.from({ length: ingestMaxItems.column_stats + 1 }, (_, i) => stat(`c${i}`, 3)))),
  ).toBe(false)
})

for (const kind of storeKinds) {
  describe(`column_stats kept as the latest snapshot: ${kind}`, () => {
    const session = agentSession(kind)
    test('stored as sent; a batch without it keeps it; a newer one replaces it; a late one does not', async () => {
      const id = await session.ingest(pgBatch('stats', at(10), { column_stats: stats }))
      const latest = async () => session.server.store.latestSnapshot(id, 'column_stats')
      expect(await latest()).toEqual({ ts: at(10), payload: stats })
      await session.ingest(pgBatch('stats', at(11)))
      expect(await latest()).toEqual({ ts: at(10), payload: stats })
      const newer = [stat('status', 4)]
      await session.ingest(pgBatch('stats', at(12), { column_stats: newer }))
      // Delivered late from the agent's buffer (3 minutes after it was collected).
      await session.ingestLate(pgBatch('stats', at(9), { column_stats: stats }), 180)
      expect(await latest()).toEqual({ ts: at(12), payload: newer })
      // A database whose agent never sent it: nothing.
      const other = await session.ingest(pgBatch('older agent', at(10)))
      expect(await session.server.store.latestSnapshot(other, 'column_stats')).toBeUndefined()
    })
  })
}
