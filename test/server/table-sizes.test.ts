// One size per table: what the API gives the Tables page and the table's page (one definition,
// web/pages/db/table-size.ts: Heap · Indexes · TOAST · Total) is the server's own figures at the same
// sample: pg_relation_size of the heap, pg_total_relation_size of its TOAST table, pg_indexes_size and
// pg_total_relation_size, with pg_table_size beside them, on a real PostgreSQL 17 watched by the real
// agent, for a table whose TOASTed values are most of its size, and one without a TOAST table.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'

let rig: PostgresDoctorRig

beforeAll(async () => {
  rig = await postgresDoctorRig(17, { entry: '    enabled_collectors: [tables]\n' })
})
afterAll(async () => {
  await rig?.stop()
})

interface ServerSizes {
  heap: number
  toast: number
  indexes: number
  total: number
  table: number
}

/** The server's figures for a table, read after the agent's sample (nothing writes to it in between). */
async function serverSizes(name: string): Promise<ServerSizes> {
  const [sizes] = await rig.sql<ServerSizes[]>`
    SELECT pg_relation_size(oid)::float8 AS heap,
           CASE WHEN reltoastrelid <> 0 THEN pg_total_relation_size(reltoastrelid) ELSE 0 END::float8 AS toast,
           pg_indexes_size(oid)::float8 AS indexes, pg_total_relation_size(oid)::float8 AS total,
           pg_table_size(oid)::float8 AS table
    FROM pg_class WHERE oid = ${name}::regclass`
  return sizes!
}

const apiSizes = (t: any): ServerSizes => ({
  heap: t.heap_bytes,
  toast: t.toast_bytes,
  indexes: t.index_size_bytes,
  total: t.total_bytes,
  table: t.table_size_bytes,
})

test("the API's heap, TOAST, index and total sizes are the server's at the sample", async () => {
  // Autovacuum off for the table and its TOAST table, and vacuumed once (its free-space and visibility
  // maps exist): nothing changes its files between the agent's sample and the server's figures.
  await rig.sql`CREATE TABLE docs (id int PRIMARY KEY, body text) WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false)`
  // Values of 20 kB of random text: TOASTed, not compressible away.
  await rig.sql`INSERT INTO docs SELECT g, (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 640)) || g FROM generate_series(1, 300) g`
  await rig.sql`CREATE INDEX docs_body ON docs (left(body, 20))`
  // No TOAST table at all: integers only.
  await rig.sql`CREATE TABLE counts (id int PRIMARY KEY, n bigint) WITH (autovacuum_enabled = false)`
  await rig.sql`INSERT INTO counts SELECT g, g FROM generate_series(1, 1000) g`
  await rig.sql`VACUUM ANALYZE docs, counts`
  await rig.cycle()
  const docs = await serverSizes('docs')
  const counts = await serverSizes('counts')
  // TOAST holds most of it: a size that left it out would be far off.
  expect(docs.toast).toBeGreaterThan(docs.heap + docs.indexes)
  expect(docs.total).toBe(docs.table + docs.indexes)
  expect(counts.toast).toBe(0)

  const tables = await rig.api('/tables')
  expect(apiSizes(tables.find((t: any) => t.table_name === 'docs'))).toEqual(docs)
  expect(apiSizes(tables.find((t: any) => t.table_name === 'counts'))).toEqual(counts)
  expect(apiSizes(await rig.api('/tables/public/docs'))).toEqual(docs)

  // Sorted by each figure, largest first.
  const first = async (sort: string) => (await rig.api(`/tables?sort_by=${sort}`))[0].table_name
  expect(await first('total_size')).toBe('docs')
  expect(await first('toast_size')).toBe('docs')
  expect(await first('heap_size')).toBe(counts.heap > docs.heap ? 'counts' : 'docs')
})
