// The agent connected as the README's monitoring role (pg_monitor only) on a real PostgreSQL 17:
// EXPLAIN of application statements and sequences it may not read are reported (a warning once, a
// note in the collector's status) until pg_read_all_data is granted; the agent's own statements stay
// out of query_stats while the application's are there.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { explainPlans, explainSampling } from '../../src/agent/collectors/postgres/explain-plans.ts'
import { queryStats } from '../../src/agent/collectors/postgres/query-stats.ts'
import { tables } from '../../src/agent/collectors/postgres/tables.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { sharedPostgres } from '../support/postgres.ts'

describe('the agent as a pg_monitor role on PostgreSQL 17', () => {
  let app: postgres.Sql
  let monitor: postgres.Sql
  const role = `dbm_monitor_${Math.random().toString(36).slice(2, 8)}`
  const logs: string[] = []
  const notes = new Map<string, string>()
  const state = new Map<string, unknown>()
  let now = Date.now()

  beforeAll(async () => {
    const url = await (await sharedPostgres(17)).freshDatabase()
    app = postgres(url, { max: 1, onnotice: () => {} })
    await app`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    await app.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'monitor-pw'`)
    await app.unsafe(`GRANT pg_monitor TO ${role}`)
    await app`CREATE TABLE orders (id bigserial PRIMARY KEY, customer int, total numeric)`
    await app`INSERT INTO orders (customer, total) SELECT g % 100, g FROM generate_series(1, 2000) g`
    const u = new URL(url)
    u.username = role
    u.password = 'monitor-pw'
    monitor = postgres(u.toString(), { max: 1, onnotice: () => {} })
  })
  afterAll(async () => {
    await monitor?.end()
    await app?.end()
  })

  const ctx = (): PostgresContext => ({
    name: 'orders',
    database: 'x',
    sql: monitor,
    versionNum: 170000,
    major: 17,
    now,
    settings: { collectExplainPlans: true, collectReplication: true },
    state,
    notes,
    log: createLogger('debug', (l) => logs.push(l)),
  })

  test('unreadable tables and sequences: one warning each, a status note, gone after GRANT pg_read_all_data', async () => {
    for (let i = 0; i < 50; i++) await app`SELECT total FROM orders WHERE customer = ${i} /* app-marker */`
    await explainPlans.collect(ctx())
    now += explainSampling.intervalMs
    await explainPlans.collect(ctx())
    expect(notes.get('explain_plans')).toMatch(
      /^\d+ of \d+ statements not explained: permission denied for table orders \(grant pg_read_all_data\)$/,
    )
    expect(logs.filter((l) => l.includes('statements not explained')).length).toBe(1)
    expect(logs.find((l) => l.includes('statements not explained'))).toContain('WARN')

    await tables.collect(ctx())
    await tables.collect(ctx())
    expect(notes.get('tables')).toBe('1 sequences unreadable (grant pg_read_all_data)')
    expect(logs.filter((l) => l.includes('sequences unreadable')).length).toBe(1)

    await app.unsafe(`GRANT pg_read_all_data TO ${role}`)
    now += explainSampling.intervalMs
    const { explain_plans: plans } = await explainPlans.collect(ctx())
    expect(notes.has('explain_plans')).toBe(false)
    expect((plans ?? []).length).toBeGreaterThan(0)
    const { sequences } = await tables.collect(ctx())
    expect(notes.has('tables')).toBe(false)
    expect(sequences!.find((s) => s.sequence_name === 'orders_id_seq')!.last_value).toBe(2000)
  })

  test("the agent's own statements are left out of query_stats; the application's are in", async () => {
    const own = new Map<string, unknown>()
    const c = () => ({ ...ctx(), state: own })
    await queryStats.collect(c())
    for (let i = 0; i < 3; i++) {
      await tables.collect(c())
      await app`SELECT count(*) FROM orders WHERE customer = ${i} /* app-marker-2 */`
    }
    const { query_stats: stats } = await queryStats.collect(c())
    const texts = (stats ?? []).map((s) => s.query_text)
    expect(texts.some((t) => t.includes('app-marker-2'))).toBe(true)
    expect(
      texts.filter(
        (t) => t.includes('WITH busy AS') || t.includes('pg_stat_statements') || t.includes('has_sequence_privilege'),
      ),
    ).toEqual([])
  })
})
