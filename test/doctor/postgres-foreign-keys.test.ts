// pg_unindexed_foreign_keys on a real PostgreSQL 17 watched by the real agent: a foreign key of a
// 20,000-row table without an index is a warning, one of a 10-row table a note, a key whose columns lead
// an index (even a wider one) nothing; the finding's own CREATE INDEX cures it.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(60_000)

let rig: PostgresDoctorRig

beforeAll(async () => {
  rig = await postgresDoctorRig(17)
})
afterAll(async () => {
  await rig?.stop()
})

test('unindexed foreign keys: warning for a large table, note for a small one, none when an index leads with the columns; CREATE INDEX cures', async () => {
  await rig.sql`CREATE TABLE customers (id int PRIMARY KEY, region int, UNIQUE (id, region))`
  await rig.sql`INSERT INTO customers SELECT g, g % 10 FROM generate_series(1, 1000) g`
  await rig.sql`CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers (id), total int)`
  await rig.sql`INSERT INTO orders SELECT g, 1 + g % 1000, g FROM generate_series(1, 20000) g`
  await rig.sql`CREATE TABLE notes (id int PRIMARY KEY, customer_id int REFERENCES customers (id), body text)`
  await rig.sql`INSERT INTO notes SELECT g, g, 'n' FROM generate_series(1, 10) g`
  // Covered: (customer_id, region) leads the index (customer_id, region, created).
  await rig.sql`CREATE TABLE visits (id int PRIMARY KEY, customer_id int, region int, created int, FOREIGN KEY (customer_id, region) REFERENCES customers (id, region))`
  await rig.sql`CREATE INDEX visits_customer_region_created ON visits (customer_id, region, created)`
  // The inserting sessions report their row counts within a second or so: ANALYZE before that report
  // arrives would see its live rows added once more when it does (40,000 on a busy machine).
  await until('the inserts in pg_stat_user_tables', async () => {
    const [row] = await rig.sql`SELECT n_tup_ins::int AS n FROM pg_stat_user_tables WHERE relname = 'orders'`
    return row?.n === 20000 ? true : undefined
  })
  await rig.sql`ANALYZE`
  await rig.cycle()

  const findings = await rig.findings('pg_unindexed_foreign_keys')
  expect(findings.map((f) => [f.key, f.severity])).toEqual([
    ['pg_unindexed_foreign_keys:public.orders.orders_customer_id_fkey', 'warning'],
    ['pg_unindexed_foreign_keys:public.notes.notes_customer_id_fkey', 'info'],
  ])
  const [orders] = findings
  expect(orders).toMatchObject({
    category: 'performance',
    title: 'Foreign key orders_customer_id_fkey on public.orders has no index',
    metrics: { n_live_tup: 20000, columns: 'customer_id', referenced_table: 'customers' },
    how_to_fix: ['CREATE INDEX CONCURRENTLY orders_customer_id_idx ON public.orders (customer_id);'],
  })
  expect(orders.detail).toStartWith('public.orders (20,000 rows, ')

  await rig.sql.unsafe(orders.how_to_fix[0])
  await rig.cycle()
  expect((await rig.findings('pg_unindexed_foreign_keys')).map((f) => f.key)).toEqual([
    'pg_unindexed_foreign_keys:public.notes.notes_customer_id_fkey',
  ])
})
