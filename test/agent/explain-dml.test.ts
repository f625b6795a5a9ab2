// explain_plans and write statements (UPDATE, INSERT, DELETE) on PostgreSQL 17 and 18, with the agent
// connected as the README's monitor role (pg_monitor, pg_read_all_data). EXPLAIN of a write checks the
// write privilege on its table although nothing runs: with the README's grants the statements are left
// unexplained and an info note says which grant would explain them; with the grant they are explained.
// Either way nothing is executed: the tables' rows are what the application left.
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { explainPlans, explainSampling } from '../../src/agent/collectors/postgres/explain-plans.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { watchDatabase } from '../support/doctor.ts'
import { sharedPostgres } from '../support/postgres.ts'

setDefaultTimeout(60_000)

const sessions: postgres.Sql[] = []
const open = (url: string) => {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  sessions.push(sql)
  return sql
}
afterAll(async () => {
  await Promise.all(sessions.map((s) => s.end({ timeout: 1 }).catch(() => {})))
})

for (const major of [17, 18]) {
  describe(`PostgreSQL ${major}`, () => {
    test('write statements: explained where the monitor role holds the write privilege, an info note where it does not; never run', async () => {
      const server = await sharedPostgres(major)
      const url = await server.freshDatabase()
      const app = open(url)
      const role = `dbm_mon_dml_${major}_${process.pid}`
      await app`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
      // The set-up is not the application's: left out of pg_stat_statements.
      await app`SET pg_stat_statements.track = none`
      await app`CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)`
      await app`INSERT INTO orders SELECT g, 'new' FROM generate_series(1, 1000) g`
      await app`CREATE TABLE order_log (id int, note text)`
      await app`ANALYZE orders`
      await app.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'mon-pw'`)
      await app.unsafe(`GRANT pg_monitor, pg_read_all_data TO ${role}`)
      // The application's statements (a superuser's: trusted), the costliest being the writes.
      await app`SET pg_stat_statements.track = top`
      for (let i = 1; i <= 30; i++) {
        await app`UPDATE orders SET status = ${'paid'} WHERE id = ${i}`
        await app`INSERT INTO order_log VALUES (${i}, ${'paid'})`
        await app`DELETE FROM order_log WHERE id = ${i - 1}`
      }
      for (let i = 1; i <= 5; i++) await app`SELECT status FROM orders WHERE id = ${i}`
      const contents = async () => {
        const [row] = await app`
          SELECT (SELECT md5(string_agg(ctid::text || id || ':' || status, ',' ORDER BY id)) FROM orders) AS orders,
                 (SELECT md5(coalesce(string_agg(ctid::text || id || ':' || note, ',' ORDER BY id), '')) FROM order_log) AS log,
                 (SELECT string_agg(calls::text, ',' ORDER BY query) FROM pg_stat_statements
                  WHERE query ~ '^(UPDATE orders|INSERT INTO order_log|DELETE FROM order_log)') AS calls`
        return row
      }
      await app`SET pg_stat_statements.track = none`
      const before = await contents()
      const hashes = Object.fromEntries(
        (
          await app`SELECT queryid::text AS id, query FROM pg_stat_statements WHERE query ~ '^(UPDATE orders|INSERT INTO order_log|DELETE FROM order_log|SELECT status FROM orders)'`
        ).map((r) => [String(r.query).split(' ')[0], String(r.id)]),
      )

      const u = new URL(url)
      u.username = role
      u.password = 'mon-pw'
      const monitor = open(u.toString())
      let now = Date.now()
      const collect = async (
        settings = { collectExplainPlans: true, collectReplication: false },
        infos = new Map<string, string>(),
      ) => {
        const [info] = await monitor`SELECT current_setting('server_version_num')::int AS num, current_database() AS db`
        const ctx: PostgresContext = {
          name: 'orders',
          database: info!.db,
          sql: monitor,
          versionNum: info!.num,
          major,
          now: (now += explainSampling.intervalMs),
          settings,
          state: new Map(),
          notes: new Map(),
          infos,
          log: createLogger('error', () => {}),
        }
        const plans = (await explainPlans.collect(ctx)).explain_plans ?? []
        return { plans, ctx }
      }
      const explained = (plans: { query_hash: string }[]) =>
        Object.keys(hashes).filter((kind) => plans.some((p) => p.query_hash === hashes[kind]))

      // The README's grants: reads are explained, the writes are not, and an info note (not a warning
      // note) says why and what would explain them.
      const readOnly = await collect()
      expect(explained(readOnly.plans).sort()).toEqual(['SELECT'])
      expect(readOnly.ctx.notes.get('explain_plans')).toBeUndefined()
      expect(readOnly.ctx.infos?.get('explain_plans')).toMatch(
        new RegExp(
          '^3 write statements \\(INSERT, UPDATE, DELETE\\) not explained: EXPLAIN of a write needs the write privilege on its table even though it is never run ' +
            '\\(permission denied for table (orders|order_log)\\)\\. To see their plans, grant it to the agent role \\(GRANT INSERT, UPDATE, DELETE ON <table> TO <agent role>\\): ' +
            'the agent plans them and never runs them$',
        ),
      )
      expect(await contents()).toEqual(before)
      // Sampling turned off server-side (collect_explain_plans): the note goes with it.
      const off = await collect({ collectExplainPlans: false, collectReplication: false }, readOnly.ctx.infos)
      expect(off.plans).toEqual([])
      expect(off.ctx.infos?.has('explain_plans')).toBe(false)

      // Granted the write privileges, the agent explains the writes too, without running them.
      await app.unsafe(`GRANT INSERT, UPDATE, DELETE ON orders, order_log TO ${role}`)
      const granted = await collect()
      expect(explained(granted.plans).sort()).toEqual(['DELETE', 'INSERT', 'SELECT', 'UPDATE'])
      expect(granted.ctx.notes.get('explain_plans')).toBeUndefined()
      expect(granted.ctx.infos?.get('explain_plans')).toBeUndefined()
      const update = granted.plans.find((p) => p.query_hash === hashes.UPDATE)!
      expect(update).toMatchObject({ source: 'sampled', actual_time_ms: null, rows_actual: null })
      expect((update.plan_json as any).Plan['Node Type']).toBe('ModifyTable')
      expect((update.plan_json as any).Plan.Operation).toBe('Update')
      expect(JSON.stringify(update.plan_json)).not.toContain('Actual')
      expect(await contents()).toEqual(before)
    })
  })
}

describe('PostgreSQL 17 through the server', () => {
  test('the info note reaches /overview with level info, apart from the warning notes', async () => {
    const interval = explainSampling.intervalMs
    explainSampling.intervalMs = 0 // sample plans every cycle instead of every 5 minutes
    const server = await sharedPostgres(17)
    const url = await server.freshDatabase()
    const app = open(url)
    const role = `dbm_mon_dml_e2e_${process.pid}`
    await app`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    await app`SET pg_stat_statements.track = none`
    await app`CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)`
    await app`INSERT INTO orders SELECT g, 'new' FROM generate_series(1, 100) g`
    await app.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'mon-pw'`)
    await app.unsafe(`GRANT pg_monitor, pg_read_all_data TO ${role}`)
    await app`SET pg_stat_statements.track = top`
    for (let i = 1; i <= 20; i++) await app`UPDATE orders SET status = ${'paid'} WHERE id = ${i}`
    const u = new URL(url)
    u.username = role
    u.password = 'mon-pw'
    const rig = await watchDatabase(u.toString())
    try {
      await rig.cycle()
      const overview = await rig.api('/overview')
      const notes = (overview.agent_notes as { collector: string; message: string; level?: string }[]).filter(
        (n) => n.collector === 'explain_plans',
      )
      expect(notes.map((n) => [n.level, n.message.split(':')[0]])).toEqual([
        ['info', '1 write statement (UPDATE) not explained'],
      ])
      expect(notes[0]!.message).toContain('GRANT UPDATE ON <table> TO <agent role>')
    } finally {
      explainSampling.intervalMs = interval
      await rig.stop()
    }
  })
})
