// A statement whose mean time regressed, from real pg_stat_statements figures: a lookup by an indexed
// column runs 40 times, the index is dropped, and it runs 40 times more. The two deltas of calls and
// total_exec_time that PostgreSQL 17 counted, and its two real plans, are ingested a day apart
// as the agent sends them (batches stamped 3 hours and 10 minutes ago: the agent's own clock cannot be
// moved), and the finding must state exactly those means and calls, and the plan change.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { planEntry } from '../../src/agent/collectors/postgres/plan-entry.ts'
import { agentSession, pgBatch } from '../support/batches.ts'
import { sharedPostgres } from '../support/postgres.ts'

const MINUTE = 60_000
const s = agentSession('sqlite')
let sql: postgres.Sql

beforeAll(async () => {
  const pg = await sharedPostgres(17)
  sql = postgres(await pg.freshDatabase(), { max: 1, onnotice: () => {} })
  await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
  await sql`CREATE TABLE orders AS SELECT g AS id, g % 50000 AS customer, md5(g::text) AS note FROM generate_series(1, 200000) g`
  await sql`CREATE INDEX orders_customer ON orders (customer)`
  await sql`ANALYZE orders`
})
afterAll(async () => {
  await sql?.end({ timeout: 1 })
})

const LOOKUP = 'SELECT count(*) FROM orders WHERE customer = $1'

/** The lookup's cumulative calls and total time as pg_stat_statements counts them. */
async function counted() {
  const [row] = await sql<{ queryid: string; calls: number; total: number }[]>`
    SELECT queryid::text, calls::int, total_exec_time AS total FROM pg_stat_statements
     WHERE query = ${LOOKUP} AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
  return row ?? { queryid: '', calls: 0, total: 0 }
}

async function runLookups(n: number) {
  for (let i = 0; i < n; i++) await sql.unsafe(LOOKUP, [i * 7])
}

const explainLookup = async () =>
  ((await sql.unsafe('EXPLAIN (FORMAT JSON) SELECT count(*) FROM orders WHERE customer = 42'))[0] as any)[
    'QUERY PLAN'
  ][0]

test('a statement 3× slower than its own day before is a finding with both exact means and calls and its plan change', async () => {
  const start = await counted()
  await runLookups(40)
  const fast = await counted()
  const fastPlan = await explainLookup()
  await sql`DROP INDEX orders_customer`
  await runLookups(40)
  const slow = await counted()
  const slowPlan = await explainLookup()
  const before = { calls: fast.calls - start.calls, total: fast.total - start.total }
  const after = { calls: slow.calls - fast.calls, total: slow.total - fast.total }
  expect(before.calls).toBe(40)
  expect(after.calls).toBe(40)

  const now = Date.now()
  const delta = (d: { calls: number; total: number }) => ({
    query_hash: slow.queryid,
    query_text: LOOKUP,
    calls: d.calls,
    total_time_ms: d.total,
    rows: d.calls,
    shared_blks_hit: 0,
    shared_blks_read: 0,
  })
  const id = await s.ingest(
    pgBatch('regressed', now - 180 * MINUTE, {
      query_stats: [delta(before)],
      explain_plans: [planEntry(slow.queryid, now - 180 * MINUTE, fastPlan, 'sampled')],
    }),
  )
  // The same statement an hour later, as fast: no finding from a baseline alone.
  expect((await s.ok(id, '/doctor')).top_issues.filter((f: any) => f.rule === 'pg_statement_regressed')).toEqual([])
  await s.ingest(
    pgBatch('regressed', now - 10 * MINUTE, {
      query_stats: [delta(after)],
      explain_plans: [planEntry(slow.queryid, now - 10 * MINUTE, slowPlan, 'sampled')],
    }),
  )

  const doctor = await s.ok(id, '/doctor')
  const found = doctor.top_issues.filter((f: any) => f.rule === 'pg_statement_regressed')
  const meanBefore = before.total / before.calls
  const meanAfter = after.total / after.calls
  const ratio = meanAfter / meanBefore
  expect(ratio).toBeGreaterThanOrEqual(3)
  expect(found).toHaveLength(1)
  const [f] = found
  expect(f).toMatchObject({
    severity: ratio >= 10 ? 'critical' : 'warning',
    objects: [slow.queryid],
    metrics: {
      query_hash: slow.queryid,
      calls_before: 40,
      calls_after: 40,
      mean_before_ms: Number(meanBefore.toFixed(3)),
      mean_after_ms: Number(meanAfter.toFixed(3)),
      ratio: Number(ratio.toFixed(2)),
      plan_before: planEntry(slow.queryid, 0, fastPlan, 'sampled').plan_hash,
      plan_after: planEntry(slow.queryid, 0, slowPlan, 'sampled').plan_hash,
    },
  })
  expect(f.title).toStartWith(
    `Statement ${ratio.toFixed(1)}× slower than in the 24 hours before, its plan changed: SELECT count(*) FROM orders`,
  )
  const shown = (v: number) => (v >= 100 ? v.toFixed(0) : String(Number(v.toPrecision(3))))
  expect(f.detail).toContain(
    `ran 40 times in the last 1 hour with a mean of ${shown(meanAfter)} ms, against 40 calls with a mean of ${shown(meanBefore)} ms in the 24 hours before`,
  )
  expect(f.detail).toMatch(
    /Its plan changed at .*: before, 0 sequential and 1 index scans, .*; now, 1 sequential and 0 index scans/,
  )
  expect(f.how_to_investigate[0]).toStartWith(
    `#/databases/${id}/queries/${encodeURIComponent(slow.queryid)}   -- the statement's page`,
  )

  // The plan change (an index scan's estimated cost against a sequential scan's) is the same statement's:
  // one issue, led by the regression it explains, listed under it.
  const changed = doctor.top_issues.find((x: any) => x.rule === 'pg_plan_changed')
  expect(changed).toMatchObject({ key: `pg_plan_changed:${slow.queryid}`, cause: `statement:${slow.queryid}` })
  expect(f.cause).toBe(`statement:${slow.queryid}`)
  const group = doctor.groups.find((g: any) => g.key === `statement:${slow.queryid}`)
  expect(group).toMatchObject({ kind: 'statement', lead: f.key, title: f.title, findings: [f.key, changed.key] })
  expect(doctor.groups.filter((g: any) => g.findings.includes(changed.key))).toHaveLength(1)
})
