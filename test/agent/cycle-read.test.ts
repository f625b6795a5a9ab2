// The tables collector's read of a cycle shared with the collectors after it (TABLES_READ in
// src/agent/collectors/postgres/tables.ts): indexes take their tables' part of the size fingerprint
// from it and bloat its whole fingerprint, instead of asking PostgreSQL again. Against real PostgreSQL
// 17: what either would have noticed on its own (rows written, a VACUUM, an ANALYZE, a new index) is
// still noticed in the next cycle, and nothing is read again while nothing moved.
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { bloat } from '../../src/agent/collectors/postgres/bloat.ts'
import { indexes } from '../../src/agent/collectors/postgres/indexes.ts'
import { tables } from '../../src/agent/collectors/postgres/tables.ts'
import type { BatchSections, PostgresCollector, PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { sharedPostgres } from '../support/postgres.ts'

setDefaultTimeout(30_000)

const opened: postgres.Sql[] = []
const connect = (url: string) => {
  const sql = postgres(url, { max: 1, onnotice: () => {}, fetch_types: false })
  opened.push(sql)
  return sql
}
afterAll(async () => {
  await Promise.all(opened.map((s) => s.end({ timeout: 1 }).catch(() => {})))
})

/** An agent's database: one state across cycles, each cycle at a later `now`, its collectors in the runner's order. */
function agentOn(sql: postgres.Sql) {
  const state = new Map<string, unknown>()
  let now = Date.now()
  return async (...collectors: PostgresCollector[]): Promise<Partial<BatchSections>> => {
    now = Math.max(now + 1, Date.now())
    const ctx: PostgresContext = {
      name: 'test-db',
      database: 'test',
      sql,
      versionNum: 170_000,
      major: 17,
      now,
      settings: { collectExplainPlans: false, collectReplication: false },
      state,
      notes: new Map(),
      log: createLogger('error', () => {}),
    }
    const out: Partial<BatchSections> = {}
    for (const c of collectors) Object.assign(out, await c.collect(ctx))
    return out
  }
}

/** Waits until the statistics views show `expected` for `sql` (they are flushed by other sessions asynchronously). */
async function until(sql: postgres.Sql, query: string, expected: string) {
  const deadline = Date.now() + 10_000
  while (String((await sql.unsafe(query))[0]?.v) !== expected) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${query} = ${expected}`)
    await Bun.sleep(50)
  }
}

test('indexes sized from the tables read of the cycle: a write to the table re-sizes its index in the next cycle', async () => {
  const url = await (await sharedPostgres(17)).freshDatabase()
  const sql = connect(url)
  await sql`CREATE TABLE grows (id int PRIMARY KEY, note text) WITH (autovacuum_enabled = false)`
  const cycle = agentOn(sql)
  const size = async () =>
    (await cycle(tables, indexes)).indexes!.find((i) => i.index_name === 'grows_pkey')!.size_bytes
  expect(await size()).toBe(8192)
  expect(await size()).toBe(8192)
  const writer = connect(url)
  await writer`INSERT INTO grows SELECT g, 'n' || g FROM generate_series(1, 20000) g`
  await writer.end()
  await until(sql, "SELECT n_tup_ins AS v FROM pg_stat_user_tables WHERE relname = 'grows'", '20000')
  const bytes = (await sql`SELECT pg_relation_size('grows_pkey')::int8 AS bytes`)[0]!.bytes
  expect(Number(bytes)).toBeGreaterThan(8192)
  expect(await size()).toBe(Number(bytes))
  // Without the tables collector before it, the index reads its table's part itself: the same size.
  expect((await cycle(indexes)).indexes!.find((i) => i.index_name === 'grows_pkey')!.size_bytes).toBe(Number(bytes))
})

test('bloat fingerprinted from the tables read of the cycle: estimated again after a VACUUM, an ANALYZE and a new index, not otherwise', async () => {
  const url = await (await sharedPostgres(17)).freshDatabase()
  const sql = connect(url)
  await sql`CREATE TABLE worn (id int PRIMARY KEY, note text) WITH (autovacuum_enabled = false)`
  await sql`INSERT INTO worn SELECT g, repeat('n', 40) || g FROM generate_series(1, 30000) g`
  await sql`VACUUM ANALYZE worn`
  const cycle = agentOn(sql)
  const estimate = async () => (await cycle(tables, bloat)).bloat
  const tableOf = (rows: BatchSections['bloat']) => rows!.find((r) => r.table_name === 'worn' && r.kind === 'table')!
  expect(tableOf(await estimate()).bloat_bytes).toBeLessThan(0.05 * tableOf((await cycle(bloat)).bloat).size_bytes)
  // The second estimate above came from bloat's own fingerprint; from the tables' read again: recomputed once, then kept.
  expect(await estimate()).toBeDefined()
  expect(await estimate()).toBeUndefined()

  await sql`DELETE FROM worn WHERE id % 3 <> 0`
  expect(await estimate()).toBeUndefined()
  await sql`VACUUM worn`
  await until(sql, "SELECT vacuum_count AS v FROM pg_stat_user_tables WHERE relname = 'worn'", '2')
  const vacuumed = tableOf(await estimate())
  expect(vacuumed.live_rows).toBe(10_000)
  expect(vacuumed.bloat_bytes).toBeGreaterThan(0.5 * vacuumed.size_bytes)
  expect(await estimate()).toBeUndefined()

  await sql`ANALYZE worn`
  await until(sql, "SELECT analyze_count AS v FROM pg_stat_user_tables WHERE relname = 'worn'", '2')
  expect(await estimate()).toBeDefined()
  expect(await estimate()).toBeUndefined()

  await sql`CREATE INDEX worn_note ON worn (note)`
  const after = await estimate()
  expect(after!.some((r) => r.index_name === 'worn_note')).toBe(true)
  expect(await estimate()).toBeUndefined()
})
