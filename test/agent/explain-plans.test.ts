// explain_plans against real PostgreSQL 13 (PREPARE + generic plan) and 17 (GENERIC_PLAN): the
// costliest statement is explained without running it, its plan_hash follows the plan's shape, and
// auto_explain plans are read from the server's log directory (pg_log_dir).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { explainPlans, explainSampling, grantHint } from '../../src/agent/collectors/postgres/explain-plans.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { ExplainPlan } from '../../src/shared/wire.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'

for (const major of [13, 17]) {
  describe(`explain_plans on PostgreSQL ${major}`, () => {
    let pg: PostgresServer
    let sql: postgres.Sql
    let logDir: string
    const state = new Map<string, unknown>()
    let now = Date.now()

    beforeAll(async () => {
      logDir = mkdtempSync(join(tmpdir(), `dbm-pglog${major}-`))
      chmodSync(logDir, 0o777)
      pg = await startPostgres(major, [
        '-c', 'shared_preload_libraries=pg_stat_statements,auto_explain',
        '-c', 'logging_collector=on',
        '-c', `log_directory=${logDir}`,
        '-c', 'log_filename=postgresql.log',
        '-c', 'auto_explain.log_format=json',
        '-c', 'auto_explain.log_min_duration=-1',
        // With a query id in the plan (14+), auto_explain plans join their statement's history.
        ...(major >= 14 ? ['-c', 'compute_query_id=on', '-c', 'auto_explain.log_verbose=on'] : []),
      ])
      sql = postgres(await pg.freshDatabase(), { max: 2, onnotice: () => {} })
      await sql`CREATE EXTENSION pg_stat_statements`
      await sql`CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric)`
      await sql`INSERT INTO accounts SELECT g, 'owner ' || (g % 50), g FROM generate_series(1, 20000) g`
      await sql`CREATE INDEX accounts_owner ON accounts (owner)`
      await sql`ANALYZE accounts`
    })
    afterAll(async () => {
      await sql?.end()
      await pg?.stop()
      rmSync(logDir, { recursive: true, force: true })
    })

    const ctx = async (): Promise<PostgresContext> => {
      const [info] = await sql`SELECT current_setting('server_version_num')::int AS num, current_database() AS db`
      return {
        name: `pg${major}`,
        database: info!.db,
        sql,
        versionNum: info!.num,
        major: Math.floor(info!.num / 10_000),
        now,
        settings: { collectExplainPlans: true, collectReplication: true },
        state,
        notes: new Map(),
        pgLogDir: logDir,
        log: createLogger('error', () => {}),
      }
    }

    const plansFor = (plans: ExplainPlan[] | undefined, hash: string) => (plans ?? []).filter((p) => p.query_hash === hash && p.source === 'sampled')

    test('the costliest statement is explained; the plan hash changes with the plan, not the costs', async () => {
      for (let i = 0; i < 200; i++) await sql`SELECT balance FROM accounts WHERE owner = ${`owner ${i % 50}`}`
      const [row] = await sql`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE 'SELECT balance FROM accounts WHERE owner = $1%'`
      const hash = row!.id as string

      const first = await explainPlans.collect(await ctx())
      const [indexed] = plansFor(first.explain_plans, hash)
      expect(indexed).toMatchObject({ source: 'sampled', seq_scans: 0, actual_time_ms: null, rows_actual: null })
      expect(indexed!.index_scans).toBeGreaterThanOrEqual(1)
      expect(indexed!.total_cost).toBeGreaterThan(0)
      expect(indexed!.plan_hash).toMatch(/^[0-9a-f]{16}$/)
      // Nothing was executed: the statement's call count is unchanged by EXPLAIN.
      const [calls] = await sql`SELECT calls::int AS n FROM pg_stat_statements WHERE queryid::text = ${hash}`
      expect(calls!.n).toBe(200)

      // Not sampled again before the interval has passed.
      now += 1000
      expect(plansFor((await explainPlans.collect(await ctx())).explain_plans, hash)).toEqual([])

      // More rows change the costs but not the plan's shape: same hash.
      await sql`INSERT INTO accounts SELECT g, 'owner ' || (g % 50), g FROM generate_series(20001, 22000) g`
      await sql`ANALYZE accounts`
      now += explainSampling.intervalMs
      const [same] = plansFor((await explainPlans.collect(await ctx())).explain_plans, hash)
      expect(same!.plan_hash).toBe(indexed!.plan_hash)

      // Without the index the plan becomes a sequential scan: a new hash.
      await sql`DROP INDEX accounts_owner`
      now += explainSampling.intervalMs
      const [scan] = plansFor((await explainPlans.collect(await ctx())).explain_plans, hash)
      expect(scan).toMatchObject({ seq_scans: 1, index_scans: 0 })
      expect(scan!.plan_hash).not.toBe(indexed!.plan_hash)
    })

    test('auto_explain plans are read from pg_log_dir', async () => {
      // The first read of an existing log starts at its end.
      await explainPlans.collect(await ctx())
      await sql.begin(async (tx) => {
        await tx`SET LOCAL auto_explain.log_min_duration = 0`
        await tx`SELECT count(*) FROM accounts WHERE balance > ${100}`
      })
      let found: ExplainPlan[] = []
      for (let i = 0; i < 50 && found.length === 0; i++) {
        await Bun.sleep(100)
        found = ((await explainPlans.collect(await ctx())).explain_plans ?? []).filter((p) => p.source === 'auto_explain')
      }
      const plan = found.find((p) => JSON.stringify(p.plan_json).includes('balance > $1') || JSON.stringify(p.plan_json).includes('accounts'))
      expect(plan).toBeDefined()
      expect(plan!.seq_scans).toBeGreaterThanOrEqual(1)
      expect(plan!.actual_time_ms).toBeGreaterThanOrEqual(0)
      if (major >= 14) {
        const [row] = await sql`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE 'SELECT count(*) FROM accounts WHERE balance > $1%'`
        expect(plan!.query_hash).toBe(row!.id)
      } else {
        expect(plan!.query_hash).toMatch(/^text:[0-9a-f]{16}$/)
      }
      // Read once: the next cycle finds nothing new.
      expect(((await explainPlans.collect(await ctx())).explain_plans ?? []).filter((p) => p.source === 'auto_explain')).toEqual([])
    })
  })
}

describe('the hint for a statement the agent role may not explain', () => {
  test('reads need pg_read_all_data (SELECT grants on 13); writes need their own privilege, which pg_read_all_data does not give', () => {
    expect(grantHint(17, 'SELECT * FROM orders WHERE id = $1')).toBe('grant pg_read_all_data')
    expect(grantHint(13, 'SELECT * FROM orders WHERE id = $1')).toBe('grant SELECT on the tables')
    expect(grantHint(17, 'UPDATE orders SET status = $1 WHERE id = $2')).toBe(
      'EXPLAIN of an UPDATE needs the UPDATE privilege on its table even though it is never run; leave it unexplained or grant it',
    )
    expect(grantHint(16, 'WITH moved AS (SELECT id FROM q) DELETE FROM orders WHERE id IN (SELECT id FROM moved)')).toContain('the DELETE privilege')
    expect(grantHint(16, '  insert into events values ($1)')).toContain('the INSERT privilege')
  })
})
