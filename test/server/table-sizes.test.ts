// One size per table: what the API gives the Tables page, the table's page and the doctor (one
// definition, web/pages/db/table-size.ts) is the server's own pg_table_size, pg_indexes_size and their
// sum pg_total_relation_size at the same sample, on a real PostgreSQL 17 watched by the real agent,
// for a table with TOASTed values and two indexes.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { totalSize } from '../../src/web/pages/db/table-size.ts'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'

let rig: PostgresDoctorRig

beforeAll(async () => {
  rig = await postgresDoctorRig(17, { entry: '    enabled_collectors: [tables]\n' })
})
afterAll(async () => {
  await rig?.stop()
})

test("the API's table sizes are pg_table_size, pg_indexes_size and pg_total_relation_size at the sample", async () => {
  await rig.sql`CREATE TABLE docs (id int PRIMARY KEY, body text)`
  // Values of 20 kB of random text: TOASTed, not compressible away.
  await rig.sql`INSERT INTO docs SELECT g, (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 640)) || g FROM generate_series(1, 300) g`
  await rig.sql`CREATE INDEX docs_body ON docs (left(body, 20))`
  await rig.sql`ANALYZE docs`
  await rig.cycle()
  const [server] = await rig.sql<{ heap: number; table: number; indexes: number; total: number; toast: number }[]>`
    SELECT pg_relation_size('docs')::float8 AS heap, pg_table_size('docs')::float8 AS table,
           pg_indexes_size('docs')::float8 AS indexes, pg_total_relation_size('docs')::float8 AS total,
           pg_total_relation_size(reltoastrelid)::float8 AS toast FROM pg_class WHERE oid = 'docs'::regclass`
  // TOAST holds most of it: a size that left it out would be far off.
  expect(server!.toast).toBeGreaterThan(server!.heap)
  const tables = await rig.api('/tables')
  const docs = tables.find((t: any) => t.table_name === 'docs')
  expect({ table: docs.table_size_bytes, indexes: docs.index_size_bytes, total: totalSize(docs) }).toEqual({ table: server!.table, indexes: server!.indexes, total: server!.total })
  const detail = await rig.api('/tables/public/docs')
  expect({ table: detail.table_size_bytes, indexes: detail.index_size_bytes }).toEqual({ table: server!.table, indexes: server!.indexes })
})
