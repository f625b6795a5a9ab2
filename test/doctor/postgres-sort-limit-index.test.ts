// pg_slow_statements on an ORDER BY ... LIMIT that sorts a table read whole, on a real PostgreSQL 17
// watched by the real agent: its sampled plan (Limit → Sort → Seq Scan) gives the index on the filter's
// equality column, then the sort key in its order, for a column named `we"ird */ col` (quoted as
// PostgreSQL needs it, the plan's text kept out of the command and unbroken in its comment); run as
// offered, the index makes the statement read 10 rows by an index scan instead of 7,500 rows sorted.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { explainSampling } from '../../src/agent/collectors/postgres/explain-plans.ts'
import { commentText } from '../../src/shared/sql-text.ts'
import { type PostgresDoctorRig, postgresDoctorRig, workload } from '../support/doctor.ts'

let rig: PostgresDoctorRig
const interval = explainSampling.intervalMs

beforeAll(async () => {
  explainSampling.intervalMs = 0 // sample plans every cycle instead of every 5 minutes
  rig = await postgresDoctorRig(17, {
    thresholds: { pg_slow_statements: { warning_mean_ms: 0.001, critical_mean_ms: 1e9, min_share: 0, min_calls: 10 } },
  })
})
afterAll(async () => {
  explainSampling.intervalMs = interval
  await rig?.stop()
})

const STATEMENT = `SELECT id, note FROM t WHERE status = $1 ORDER BY "we""ird */ col" DESC LIMIT 10`

/** The plan's nodes, depth first. */
const nodes = (plan: any): any[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)]

test('ORDER BY ... LIMIT over a Seq Scan: an index on the filter equality column, then the sort key in its order', async () => {
  await workload(rig.dsn, async (sql) => {
    await sql`CREATE TABLE t (id int PRIMARY KEY, status text NOT NULL, "we""ird */ col" timestamptz NOT NULL, note text)`
    await sql`INSERT INTO t SELECT g, 's' || (g % 4), now() - g * interval '1 minute', 'note ' || g FROM generate_series(1, 30000) g`
    await sql`ANALYZE t`
  })
  await rig.sql`SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`
  await rig.cycle()
  await workload(rig.dsn, async (sql) => {
    for (let i = 0; i < 20; i++) await sql.unsafe(STATEMENT, [`s${i % 4}`])
  })
  await rig.cycle()

  // The server's own plan: the whole filtered share of t (7,500 of its 30,000 rows) read and sorted for 10.
  const [before] = await rig.sql.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${STATEMENT.replace('$1', "'s1'")}`)
  const beforeNodes = nodes((before as any)['QUERY PLAN'][0].Plan)
  expect(beforeNodes.map((n) => n['Node Type'])).toEqual(['Limit', 'Sort', 'Seq Scan'])
  expect(beforeNodes[1]['Sort Key']).toEqual(['"we""ird */ col" DESC'])
  expect(beforeNodes[2]['Actual Rows']).toBe(7500)

  const statements = (await rig.api('/queries?sort_by=total_time')) as { query_hash: string; query_text: string }[]
  const statement = statements.find((q) => q.query_text.startsWith('SELECT id, note FROM t WHERE status = $1'))!
  expect(statement.query_text).toBe(`SELECT id, note FROM t WHERE status = $1 ORDER BY "we""ird */ col" DESC LIMIT $2`)
  const [slow] = (await rig.findings('pg_slow_statements')).filter(
    (f: any) => f.metrics.query_hash === statement.query_hash,
  )
  const create = 'CREATE INDEX CONCURRENTLY ON public.t (status, "we""ird */ col" DESC);'
  expect(slow.how_to_fix[0]).toBe(
    `${create}   -- its plan reads public.t whole by a Seq Scan and sorts it for ORDER BY ... LIMIT (${commentText('Sort Key: "we""ird */ col" DESC', 120)}): an index in that order returns the first rows without the sort`,
  )
  // One statement and one comment: the column's `*/` is quoted in the command and broken up in the comment.
  expect(slow.how_to_fix[0].split('--')[1]).not.toContain('*/')
  expect(slow.how_to_fix[0]).not.toContain('<table>')

  // The cure, run as offered: 10 rows read in the index's order, no sort.
  await rig.sql.unsafe(slow.how_to_fix[0])
  const [after] = await rig.sql.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${STATEMENT.replace('$1', "'s1'")}`)
  const afterNodes = nodes((after as any)['QUERY PLAN'][0].Plan)
  expect(afterNodes.map((n) => n['Node Type'])).toEqual(['Limit', 'Index Scan'])
  expect(afterNodes[1]['Index Name']).toBe('t_status_we"ird */ col_idx')
  expect(afterNodes[1]['Actual Rows']).toBe(10)
})
