// explain_plans against real PostgreSQL 16 and 17 (PREPARE + EXPLAIN EXECUTE, a generic plan), and 13: the
// costliest statement is explained without running it, its plan_hash follows the plan's shape, and
// auto_explain plans are read from the server's log directory (pg_log_dir).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import {
  NO_TOPLEVEL,
  explainPlans,
  explainSampling,
  grantHint,
} from '../../src/agent/collectors/postgres/explain-plans.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { ExplainPlan } from '../../src/shared/wire.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'

for (const major of [16, 17]) {
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
        '-c',
        'shared_preload_libraries=pg_stat_statements,auto_explain',
        '-c',
        'logging_collector=on',
        '-c',
        `log_directory=${logDir}`,
        '-c',
        'log_filename=postgresql.log',
        '-c',
        'auto_explain.log_format=json',
        '-c',
        'auto_explain.log_min_duration=-1',
        // With a query id in the plan (14+), auto_explain plans join their statement's history.
        ...(major >= 14 ? ['-c', 'compute_query_id=on', '-c', 'auto_explain.log_verbose=on'] : []),
      ])
      sql = postgres(await pg.freshDatabase(), { max: 2, onnotice: () => {} })
      await sql`CREATE EXTENSION pg_stat_statements`
      await sql`CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric)`
      await sql`INSERT INTO accounts SELECT g, 'owner ' || (g % 50), g FROM generate_series(1, 20000) g`
      await sql`CREATE INDEX accounts_owner ON accounts (owner)`
      await sql`ANALYZE accounts`
      // As the README asks (and as PostgreSQL 15+ does): plans are not sampled while others may create in a schema on the path.
      await sql`REVOKE CREATE ON SCHEMA public FROM PUBLIC`
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

    const plansFor = (plans: ExplainPlan[] | undefined, hash: string) =>
      (plans ?? []).filter((p) => p.query_hash === hash && p.source === 'sampled')

    test('the costliest statement is explained; the plan hash changes with the plan, not the costs', async () => {
      for (let i = 0; i < 200; i++) await sql`SELECT balance FROM accounts WHERE owner = ${`owner ${i % 50}`}`
      const [row] =
        await sql`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE 'SELECT balance FROM accounts WHERE owner = $1%'`
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
        found = ((await explainPlans.collect(await ctx())).explain_plans ?? []).filter(
          (p) => p.source === 'auto_explain',
        )
      }
      const plan = found.find(
        (p) => JSON.stringify(p.plan_json).includes('balance > $1') || JSON.stringify(p.plan_json).includes('accounts'),
      )
      expect(plan).toBeDefined()
      expect(plan!.seq_scans).toBeGreaterThanOrEqual(1)
      expect(plan!.actual_time_ms).toBeGreaterThanOrEqual(0)
      if (major >= 14) {
        const [row] =
          await sql`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE 'SELECT count(*) FROM accounts WHERE balance > $1%'`
        expect(plan!.query_hash).toBe(row!.id)
      } else {
        expect(plan!.query_hash).toMatch(/^text:[0-9a-f]{16}$/)
      }
      // Read once: the next cycle finds nothing new.
      expect(
        ((await explainPlans.collect(await ctx())).explain_plans ?? []).filter((p) => p.source === 'auto_explain'),
      ).toEqual([])
    })

    test('a low-privilege role cannot make the planner run its code with the agent role (a function, a name on the search_path, a domain, a view and a policy, a race): the secret stays put', async () => {
      // The agent connects as a monitor role that may read every table (pg_read_all_data; SELECT on 13).
      // mallory may read nothing but owns an IMMUTABLE function that reads the secret and, when it can,
      // takes an advisory lock whose key is the secret (visible to everyone in pg_locks). EXPLAIN plans
      // `SELECT mallory.leak()` by folding the call, that is by running it with the planner's rights.
      const SECRET = 424242
      const database = String((await sql`SELECT current_database() AS d`)[0]!.d)
      await sql.unsafe(`CREATE ROLE dbm_mon${major} LOGIN PASSWORD 'mon-pw'`)
      await sql.unsafe(`GRANT pg_monitor TO dbm_mon${major}`)
      await sql.unsafe(`CREATE ROLE mallory${major} LOGIN PASSWORD 'mallory-pw'`)
      await sql.unsafe(`CREATE TABLE secret (v bigint)`)
      await sql.unsafe(`INSERT INTO secret VALUES (${SECRET})`)
      await sql.unsafe(
        major >= 14
          ? `GRANT pg_read_all_data TO dbm_mon${major}`
          : `GRANT SELECT ON ALL TABLES IN SCHEMA public TO dbm_mon${major}`,
      )
      await sql.unsafe(`CREATE SCHEMA mallory AUTHORIZATION mallory${major}`)
      const as = (user: string, password: string) => {
        const u = new URL(pg.url(database))
        u.username = user
        u.password = password
        return postgres(u.toString(), { max: 1, onnotice: () => {} })
      }
      const mallory = as(`mallory${major}`, 'mallory-pw')
      const monitor = as(`dbm_mon${major}`, 'mon-pw')
      try {
        await mallory.unsafe(`
          CREATE FUNCTION mallory.leak() RETURNS int IMMUTABLE LANGUAGE plpgsql AS $f$
          DECLARE s bigint;
          BEGIN
            BEGIN
              SELECT v INTO s FROM public.secret;
            EXCEPTION WHEN insufficient_privilege THEN
              RETURN 0;
            END;
            PERFORM pg_advisory_lock(s);
            RAISE EXCEPTION 'permission denied for table %', s USING ERRCODE = '42501';
          END $f$`)
        await mallory.unsafe('GRANT USAGE ON SCHEMA mallory TO PUBLIC')
        // mallory runs it 12 times, after a reset, so that its statement (next to no execution time: leak()
        // runs while planning) is among the few sampled.
        const plant = async () => {
          await sql`SELECT pg_stat_statements_reset()`
          for (let i = 0; i < 12; i++) expect((await mallory.unsafe('SELECT mallory.leak()'))[0]!.leak).toBe(0)
        }
        await plant()
        const [stmt] =
          await sql`SELECT queryid::text AS id FROM pg_stat_statements WHERE query = 'SELECT mallory.leak()'`
        expect(stmt).toBeDefined()

        const leaked = async () =>
          (await sql`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${SECRET}`)[0]!
            .n as number
        const monitorCtx = async (trusted?: string[]) => ({
          ...(await ctx()),
          sql: monitor,
          notes: new Map<string, string>(),
          explainTrustedRoles: trusted,
        })
        /** The control of each vehicle: with mallory trusted, what `plant` sets up does reach the secret. */
        const leaksWhenTrusted = async (plant: () => Promise<void>) => {
          await plant()
          now += explainSampling.intervalMs
          await explainPlans.collect(await monitorCtx([`mallory${major}`]))
          expect(await leaked()).toBe(1)
          await monitor.unsafe('SELECT pg_advisory_unlock_all()')
        }

        // Defended: nothing is explained while mallory owns a function; the note names it and the way out.
        now += explainSampling.intervalMs
        const defended = await monitorCtx()
        const result = await explainPlans.collect(defended)
        expect((result.explain_plans ?? []).filter((p) => p.source === 'sampled')).toEqual([])
        expect(await leaked()).toBe(0)
        const note = defended.notes.get('explain_plans')!
        expect(note).toBe(
          `plans not sampled: mallory.leak() (owned by mallory${major}) would run with the agent's rights while planning. ` +
            `If you trust mallory${major}, add to database "pg${major}" in the agent config: explain_trusted_roles: ["mallory${major}"]; otherwise use auto_explain with pg_log_dir`,
        )
        expect(note).not.toContain(String(SECRET))

        // The control: trusting mallory (what the check prevents) lets the planner run leak() as the monitor,
        // which reads the secret and publishes it in pg_locks.
        await leaksWhenTrusted(plant)

        // Once mallory's function is gone, plans are sampled again. A write the read-only monitor may not
        // explain (EXPLAIN UPDATE needs UPDATE) is expected, not a note.
        await mallory.unsafe('DROP FUNCTION mallory.leak()')
        for (let i = 0; i < 20; i++) await sql`/* app */ UPDATE accounts SET balance = balance WHERE id = ${i}`
        now += explainSampling.intervalMs
        const clean = await monitorCtx()
        const plans = (await explainPlans.collect(clean)).explain_plans ?? []
        expect(plans.filter((p) => p.source === 'sampled').length).toBeGreaterThan(0)
        expect(clean.notes.get('explain_plans')?.startsWith('plans not sampled') ?? false).toBe(false)
        expect(clean.notes.get('explain_plans') ?? '').not.toContain('UPDATE')

        // A name a trusted function's body resolves only while the agent plans (nothing the PREPARE locks):
        // given CREATE on public, mallory puts a view there under that name, and estimating the STABLE
        // function's result runs it. Nothing is sampled while a schema on the agent's search_path is
        // writable by, or holds objects of, a role it does not trust; trusted, it leaks (the control).
        await sql.unsafe(`GRANT CREATE ON SCHEMA public TO mallory${major}`)
        await sql.unsafe(`CREATE FUNCTION public.current_tenant() RETURNS int STABLE LANGUAGE plpgsql AS $f$
          DECLARE r int; BEGIN SELECT id INTO r FROM tenants WHERE name = 'acme'; RETURN r; END $f$`)
        await mallory.unsafe(`
          CREATE VIEW public.tenants AS SELECT 1 AS id, 'acme'::text AS name
          WHERE CASE WHEN current_user IN ('mallory${major}', 'postgres') THEN true
                     ELSE query_to_xml('SELECT pg_advisory_lock(v) FROM public.secret', true, false, '') IS NOT NULL END`)
        await mallory.unsafe('GRANT SELECT ON public.tenants TO PUBLIC')
        const plantTenant = async () => {
          await sql`SELECT pg_stat_statements_reset()`
          for (let i = 0; i < 12; i++) await sql`SELECT balance FROM accounts WHERE id = public.current_tenant()`
        }
        await plantTenant()
        now += explainSampling.intervalMs
        const pathDefended = await monitorCtx()
        expect((await explainPlans.collect(pathDefended)).explain_plans ?? []).toEqual([])
        expect(await leaked()).toBe(0)
        expect(pathDefended.notes.get('explain_plans')).toBe(
          'plans not sampled: roles the agent does not trust own objects in, or may create them in, schema public on its search_path, where they could stand in for ' +
            'the names statements and functions use while the agent plans them. Revoke CREATE (REVOKE CREATE ON SCHEMA public FROM PUBLIC, the default since PostgreSQL 15) ' +
            'and move their objects out, or give the agent role a search_path of schemas only trusted roles write (ALTER ROLE <agent role> SET search_path = ...)',
        )
        await leaksWhenTrusted(plantTenant)
        await mallory.unsafe('DROP VIEW public.tenants')
        await sql.unsafe(`REVOKE CREATE ON SCHEMA public FROM mallory${major}`)

        // Her statements are never planned: only what a trusted role ran is. Her text reaches the planner in
        // more ways than a check can list: here an array literal's input (array_in, STABLE, evaluated to
        // estimate the comparison) runs her domain's CHECK, which reads the secret with a built-in that runs
        // any query. No table, view or function of hers is involved. Trusted, it leaks (the control).
        await sql.unsafe(`GRANT SELECT ON accounts TO mallory${major}`)
        await mallory.unsafe(`
          CREATE DOMAIN mallory.d AS text CHECK (CASE WHEN current_user IN ('mallory${major}', 'postgres') THEN true
            ELSE query_to_xml('SELECT pg_advisory_lock(v) FROM public.secret', true, false, '') IS NOT NULL END)`)
        const plantDomain = async () => {
          await sql`SELECT pg_stat_statements_reset()`
          for (let i = 0; i < 12; i++)
            await mallory.unsafe(
              'SELECT id FROM accounts WHERE owner = ANY (ARRAY[current_user::text]::text::mallory.d[])',
            )
        }
        await plantDomain()
        now += explainSampling.intervalMs
        const [domainStatement] =
          await sql`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE '%mallory.d[]%'`
        const domainPlans = (await explainPlans.collect(await monitorCtx())).explain_plans ?? []
        expect(await leaked()).toBe(0)
        expect(domainPlans.filter((p) => p.query_hash === domainStatement!.id)).toEqual([])
        await leaksWhenTrusted(plantDomain)

        // Her text under a trusted role's name: with pg_stat_statements.track = all, the statement inside
        // her function, run by a trusted session reading her view, is recorded under that session's role.
        // It is not a top-level statement, so it is not sampled (the function and view are gone by then).
        await mallory.unsafe(`CREATE FUNCTION mallory.fn() RETURNS int LANGUAGE plpgsql AS $f$
          BEGIN PERFORM id FROM public.accounts WHERE owner = ANY (ARRAY[current_user::text]::text::mallory.d[]); RETURN 1; END $f$`)
        await mallory.unsafe('CREATE VIEW mallory.vn AS SELECT mallory.fn() AS x')
        await mallory.unsafe('GRANT SELECT ON mallory.vn TO PUBLIC')
        await sql`SELECT pg_stat_statements_reset()`
        await sql.begin(async (tx) => {
          await tx`SET LOCAL pg_stat_statements.track = 'all'`
          for (let i = 0; i < 12; i++) await tx`SELECT x FROM mallory.vn`
        })
        await mallory.unsafe('DROP VIEW mallory.vn')
        await mallory.unsafe('DROP FUNCTION mallory.fn()')
        const [nested] =
          await sql`SELECT queryid::text AS id, userid::regrole::text AS runner, toplevel FROM pg_stat_statements WHERE query LIKE 'SELECT id FROM public.accounts WHERE owner = ANY%'`
        expect({ runner: nested!.runner, toplevel: nested!.toplevel }).toEqual({ runner: 'postgres', toplevel: false })
        now += explainSampling.intervalMs
        const nestedPlans = (await explainPlans.collect(await monitorCtx())).explain_plans ?? []
        expect(await leaked()).toBe(0)
        expect(nestedPlans.filter((p) => p.query_hash === nested!.id)).toEqual([])

        // A trusted role's statement that reads her view: the view's WHERE compares with a built-in that
        // reads a table (table_to_xml), and that table's row security policy reads the secret. Estimating
        // the comparison evaluates it, as the monitor, policy included. The PREPARE locks her view and
        // table, so the statement is not planned; trusted, it is, and the secret comes out (the control).
        await mallory.unsafe('CREATE TABLE mallory.t (x int)')
        await mallory.unsafe('INSERT INTO mallory.t VALUES (1)')
        await mallory.unsafe('CREATE TABLE mallory.t2 (y int)')
        await mallory.unsafe('INSERT INTO mallory.t2 VALUES (1)')
        await mallory.unsafe('ALTER TABLE mallory.t2 ENABLE ROW LEVEL SECURITY')
        await mallory.unsafe(
          'CREATE POLICY p ON mallory.t2 USING (pg_try_advisory_lock((SELECT v FROM public.secret)))',
        )
        await mallory.unsafe('GRANT SELECT ON mallory.t2 TO PUBLIC')
        await mallory.unsafe(`
          CREATE VIEW mallory.v AS SELECT x FROM mallory.t
          WHERE x = CASE WHEN current_user IN ('mallory${major}', 'postgres') THEN 1
                         ELSE length(table_to_xml('mallory.t2'::regclass, true, false, '')::text) END`)
        await mallory.unsafe('GRANT SELECT ON mallory.v, mallory.t TO PUBLIC')
        const plantView = async () => {
          await sql`SELECT pg_stat_statements_reset()`
          for (let i = 0; i < 12; i++) expect((await sql.unsafe('SELECT x FROM mallory.v'))[0]!.x).toBe(1)
        }
        await plantView()
        now += explainSampling.intervalMs
        const viewDefended = await monitorCtx()
        await explainPlans.collect(viewDefended)
        expect(await leaked()).toBe(0)
        expect(viewDefended.notes.get('explain_plans')).toMatch(/^1 of \d+ statements not explained: they reach /)
        expect(viewDefended.notes.get('explain_plans')).toContain(
          `statements not explained: they reach mallory.t (owned by mallory${major}), mallory.v (owned by mallory${major}), ` +
            `whose code would run with the agent's rights while planning. If you trust mallory${major}, add to database "pg${major}" in the agent config: explain_trusted_roles: ["mallory${major}"]`,
        )
        await leaksWhenTrusted(plantView)
        await mallory.unsafe('DROP VIEW mallory.v')

        // The race: a trusted role's statement calls her function, which is gone when the pass checks and
        // comes back while the agent waits for a lock she holds on the statement's (trusted) table. The
        // statement is parsed only once the lock is free, so the function is in it, and the check after
        // the PREPARE finds it: nothing is planned.
        await sql.unsafe(`GRANT UPDATE ON accounts TO mallory${major}`)
        const leakBody = `CREATE FUNCTION mallory.leak2() RETURNS int IMMUTABLE LANGUAGE plpgsql AS $f$
          DECLARE s bigint;
          BEGIN
            IF current_user IN ('mallory${major}', 'postgres') THEN RETURN 0; END IF;
            SELECT v INTO s FROM public.secret;
            PERFORM pg_advisory_lock(s);
            RETURN 1;
          END $f$`
        await mallory.unsafe(leakBody)
        await mallory.unsafe('GRANT EXECUTE ON FUNCTION mallory.leak2() TO PUBLIC')
        await sql`SELECT pg_stat_statements_reset()`
        for (let i = 0; i < 12; i++) await sql.unsafe('SELECT mallory.leak2() FROM accounts WHERE id = 1')
        await mallory.unsafe('DROP FUNCTION mallory.leak2()')
        const lockTimeout = explainSampling.lockTimeoutMs
        explainSampling.lockTimeoutMs = 20_000
        try {
          const racer = as(`mallory${major}`, 'mallory-pw')
          try {
            await racer.unsafe('BEGIN')
            await racer.unsafe('LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE')
            now += explainSampling.intervalMs
            const raced = await monitorCtx()
            const collecting = explainPlans.collect(raced)
            // Once the agent waits on her lock, the function comes back and the lock goes.
            for (;;) {
              const [w] =
                await sql`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.usename = ${`dbm_mon${major}`}`
              if (w!.n > 0) break
              await Bun.sleep(5)
            }
            await racer.unsafe(leakBody)
            await racer.unsafe('COMMIT')
            await collecting
            expect(await leaked()).toBe(0)
            expect(raced.notes.get('explain_plans')).toStartWith(
              `plans not sampled: mallory.leak2() (owned by mallory${major})`,
            )
          } finally {
            await racer.end()
          }
        } finally {
          explainSampling.lockTimeoutMs = lockTimeout
        }
        await mallory.unsafe('DROP FUNCTION mallory.leak2()')

        // An operator of hers stops the pass too, although its function is a built-in: in a schema on the
        // search_path an exact match takes over a trusted statement's operator.
        await mallory.unsafe('CREATE OPERATOR mallory.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq)')
        now += explainSampling.intervalMs
        const withOperator = await monitorCtx()
        await explainPlans.collect(withOperator)
        expect(withOperator.notes.get('explain_plans')).toStartWith(
          `plans not sampled: operator mallory.===(integer,integer) (owned by mallory${major})`,
        )
        await mallory.unsafe('DROP OPERATOR mallory.=== (int, int)')
      } finally {
        await mallory.end()
        await monitor.end()
      }
    })
  })
}

describe('explain_plans on PostgreSQL 13', () => {
  test('its pg_stat_statements (1.8) does not say which statements ran at top level: nothing is sampled, and the note says why', async () => {
    const pg = await startPostgres(13, ['-c', 'shared_preload_libraries=pg_stat_statements'])
    const sql = postgres(await pg.freshDatabase(), { max: 1, onnotice: () => {} })
    try {
      await sql`CREATE EXTENSION pg_stat_statements`
      await sql`CREATE TABLE t (id int PRIMARY KEY)`
      for (let i = 0; i < 20; i++) await sql`SELECT id FROM t WHERE id = ${i}`
      const [info] = await sql`SELECT current_setting('server_version_num')::int AS num, current_database() AS db`
      const notes = new Map<string, string>()
      const result = await explainPlans.collect({
        name: 'pg13',
        database: info!.db,
        sql,
        versionNum: info!.num,
        major: 13,
        now: Date.now(),
        settings: { collectExplainPlans: true, collectReplication: true },
        state: new Map(),
        notes,
        log: createLogger('error', () => {}),
      })
      expect(result.explain_plans ?? []).toEqual([])
      expect(notes.get('explain_plans')).toBe(`plans not sampled: ${NO_TOPLEVEL}`)
    } finally {
      await sql.end()
      await pg.stop()
    }
  })
})

describe('the hint for a statement the agent role may not explain', () => {
  test('reads need pg_read_all_data (SELECT grants on 13); writes need their own privilege, which pg_read_all_data does not give', () => {
    expect(grantHint(17, 'SELECT * FROM orders WHERE id = $1')).toBe('grant pg_read_all_data')
    expect(grantHint(13, 'SELECT * FROM orders WHERE id = $1')).toBe('grant SELECT on the tables')
    expect(grantHint(17, 'UPDATE orders SET status = $1 WHERE id = $2')).toBe(
      'EXPLAIN of an UPDATE needs the UPDATE privilege on its table even though it is never run; leave it unexplained or grant it',
    )
    expect(
      grantHint(16, 'WITH moved AS (SELECT id FROM q) DELETE FROM orders WHERE id IN (SELECT id FROM moved)'),
    ).toContain('the DELETE privilege')
    expect(grantHint(16, '  insert into events values ($1)')).toContain('the INSERT privilege')
    // A function or schema the agent may not use needs its own grant, not pg_read_all_data.
    // Never a grant of EXECUTE: the monitoring role could then run it (pg_stat_statements_reset() wipes the statistics).
    expect(
      grantHint(17, 'SELECT pg_stat_statements_reset()', 'permission denied for function pg_stat_statements_reset'),
    ).toBe(
      'it calls a function the agent role may not run; it stays unexplained (do not grant EXECUTE for this: the monitoring role could then run it)',
    )
    expect(grantHint(17, 'SELECT * FROM s.t', 'permission denied for schema s')).toBe(
      'grant USAGE on that schema to the agent role',
    )
    expect(grantHint(17, 'SELECT * FROM t', 'permission denied for table t')).toBe('grant pg_read_all_data')
  })
})
