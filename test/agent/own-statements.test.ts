// The agent's own statements stay out of query_stats whatever role it connects with: as the database's
// owner (what `dbm local postgres://me@…/app` is on a laptop) and as a superuser, on real PostgreSQL 18,
// 17 and 13 (18 keeps no leading comment in pg_stat_statements' texts), also with pg_stat_statements
// tracking nested statements and not utilities (then the agent's EXPLAIN EXECUTE of a statement the
// application ran with literals is counted under a queryid of its own, as PostgreSQL 15 showed). Every
// PostgreSQL collector runs each cycle through the pool the runner builds (the marked `sql` inside a CancellablePool); the application's statements are counted exactly as
// pg_stat_statements says, and no statement of the agent's is in query_stats.
import { afterAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { explainSampling } from '../../src/agent/collectors/postgres/explain-plans.ts'
import { postgresCollectors } from '../../src/agent/collectors/postgres/index.ts'
import { queryStats } from '../../src/agent/collectors/postgres/query-stats.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import {
  OWN_MARKER,
  addArrayTypes,
  agentPostgres,
  fetchArrayTypes,
  readPgArray,
  writePgArray,
} from '../../src/agent/own-statements.ts'
import { CancellablePool } from '../../src/agent/postgres-pool.ts'
import type { QueryStatDelta } from '../../src/shared/wire.ts'
import { createLogger } from '../../src/shared/log.ts'
import { sharedPostgres } from '../support/postgres.ts'

const cleanups: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {})
})

// The application's client reads no array types: its statements are then only the test's own.
const options = { max: 1, onnotice: () => {}, fetch_types: false } as const

describe.each([18, 17, 13])('the agent connected as the owner or a superuser on PostgreSQL %d', (major) => {
  /** A database owned by a login role `me`, with pg_stat_statements and a table; its URLs as `me` and as the superuser. */
  async function ownedDatabase(monitor = true, trackAll = false) {
    const server = await sharedPostgres(major)
    const superUrl = await server.freshDatabase()
    const database = decodeURIComponent(new URL(superUrl).pathname.slice(1))
    if (trackAll) {
      // Before any session of the database starts: every later one tracks nested statements, not utilities.
      const root = postgres(server.url(), options)
      await root.unsafe(`ALTER DATABASE "${database}" SET pg_stat_statements.track = 'all'`)
      await root.unsafe(`ALTER DATABASE "${database}" SET pg_stat_statements.track_utility = off`)
      await root.end()
    }
    const admin = postgres(superUrl, options)
    cleanups.push(() => admin.end())
    const me = `me_${Math.random().toString(36).slice(2, 8)}`
    await admin.unsafe(`CREATE ROLE ${me} LOGIN PASSWORD 'me-pw'`)
    await admin.unsafe(`ALTER DATABASE "${database}" OWNER TO ${me}`)
    // The README's grant for the agent's role; a laptop's own role often has none.
    if (monitor) await admin.unsafe(`GRANT pg_monitor TO ${me}`)
    await admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    const u = new URL(superUrl)
    u.username = me
    u.password = 'me-pw'
    const app = postgres(u.toString(), options)
    cleanups.push(() => app.end())
    await app`CREATE TABLE app_orders (id bigserial PRIMARY KEY, customer int, total numeric)`
    await app`INSERT INTO app_orders (customer, total) SELECT g % 100, g FROM generate_series(1, 500) g`
    return { admin, app, meUrl: u.toString(), superUrl, database }
  }

  /** Runs every PostgreSQL collector through the runner's pool each cycle; returns query_stats of each. */
  async function agent(url: string, database: string) {
    // As the runner builds it: array types read once, marked, for every pool.
    let types: Awaited<ReturnType<typeof fetchArrayTypes>> | undefined
    const pool = new CancellablePool(
      () => agentPostgres(url, { max: 3, onnotice: () => {}, connection: { application_name: 'dbm-agent' } }, types),
      1000,
      20_000,
    )
    cleanups.push(() => pool.close())
    types = await fetchArrayTypes(pool.sql)
    addArrayTypes(pool.sql, types)
    const state = new Map<string, unknown>()
    const notes = new Map<string, string>()
    let now = Date.now()
    const cycle = Object.assign(
      async (): Promise<QueryStatDelta[] | undefined> => {
        // Past the sampling interval every cycle: the agent's EXPLAINs run every cycle.
        now += explainSampling.intervalMs
        const ctx: PostgresContext = {
          name: 'app',
          database,
          sql: pool.view(new AbortController().signal),
          versionNum: major * 10_000,
          major,
          now,
          settings: { collectExplainPlans: true, collectReplication: true },
          state,
          notes,
          infos: new Map(),
          log: createLogger('error', () => {}),
        }
        let stats: QueryStatDelta[] | undefined
        for (const collector of postgresCollectors) {
          if ((collector.minVersion ?? 0) > major) continue
          const out = await collector.collect(ctx).catch((e) => (collector === queryStats ? Promise.reject(e) : {}))
          if (collector === queryStats) stats = (out as { query_stats?: QueryStatDelta[] }).query_stats
          cycle.plans += (out as { explain_plans?: unknown[] }).explain_plans?.length ?? 0
        }
        return stats
      },
      { plans: 0 },
    )
    return cycle
  }

  const cases = [
    ...(['owner', 'owner without pg_monitor', 'superuser'] as const).map((as) => ({ as, trackAll: false })),
    ...(['owner', 'superuser'] as const).map((as) => ({ as, trackAll: true })),
  ]
  for (const { as, trackAll } of cases) {
    test(`as the ${as}${trackAll ? ', nested statements tracked and utilities not, the application sending literals' : ''}: only the application's statements, counted as pg_stat_statements says`, async () => {
      const { admin, app, meUrl, superUrl, database } = await ownedDatabase(as !== 'owner without pg_monitor', trackAll)
      const cycle = await agent(as === 'superuser' ? superUrl : meUrl, database)
      expect(await cycle()).toBeUndefined() // the baseline
      const tag = `own_${as.replaceAll(' ', '_')}_${major}${trackAll ? '_all' : ''}`
      // With literals (the simple protocol) the statement's queryid is not that of the agent's PREPARE of its
      // normalised text (parameters, not constants): the agent's EXPLAIN of it gets an entry of its own.
      const run = (text: string, value: number) =>
        trackAll ? app.unsafe(text.replace('$1', String(value))).simple() : app.unsafe(text, [value])
      const totals = new Map<string, { calls: number; text: string }>()
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i <= round; i++) await run(`SELECT total FROM app_orders WHERE customer = $1 /* ${tag}_a */`, i)
        for (let i = 0; i < 2; i++)
          await run(`UPDATE app_orders SET total = total + 1 WHERE id = $1 /* ${tag}_b */`, i + 1)
        for (const s of (await cycle()) ?? []) {
          const t = totals.get(s.query_hash) ?? { calls: 0, text: s.query_text }
          t.calls += s.calls
          totals.set(s.query_hash, t)
        }
      }
      const texts = [...totals.values()].map((t) => t.text)
      expect(texts.filter((t) => t.includes(OWN_MARKER) || t.includes('dbm_explain'))).toEqual([])
      // The agent's statements were counted by pg_stat_statements, with the marker kept at their end (18
      // drops a leading comment).
      const agentRows =
        await admin`SELECT count(*)::int AS n FROM pg_stat_statements WHERE query LIKE ${`%${OWN_MARKER}`} AND calls > 0`
      expect(agentRows[0]!.n).toBeGreaterThan(10)
      // Nothing but the application's statements.
      expect(texts.filter((t) => !t.includes(tag))).toEqual([])
      const expected = await admin.unsafe(
        `SELECT queryid::text AS hash, sum(calls)::int AS calls FROM pg_stat_statements
         WHERE query LIKE $1 AND query NOT LIKE $2 AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY queryid`,
        [`%${tag}%`, `%${OWN_MARKER}%`],
      )
      expect(expected.length).toBe(2)
      expect(Object.fromEntries([...totals].map(([h, t]) => [h, t.calls]))).toEqual(
        Object.fromEntries(expected.map((r) => [r.hash, r.calls])),
      )
      expect(expected.map((r) => r.calls).sort()).toEqual([6, 6])
      if (major >= 14 && as === 'owner') {
        // The application's statements were explained (PREPARE, EXPLAIN EXECUTE in a READ ONLY
        // transaction) and still counted under their own texts; the transaction's statements were marked.
        expect(cycle.plans).toBeGreaterThan(0)
        const tx =
          await admin`SELECT query FROM pg_stat_statements WHERE query ~* ${'^(/\\* dbm-agent \\*/ )?(begin|commit|savepoint)'} AND query LIKE ${`%${OWN_MARKER}`} ORDER BY 1`
        expect(tx.length).toBeGreaterThanOrEqual(3)
      }
    })
  }

  // An application role cannot hide a statement by ending it with the agent's marker: pg_stat_statements
  // files the marked call and the unmarked ones under one entry (comments do not change the queryid) with
  // the first text, and only entries of the agent's own role are taken for the agent's.
  test.if(major >= 17)("another role's statement ending with the agent's marker is counted, every call", async () => {
    const { admin, app, superUrl, database } = await ownedDatabase()
    const cycle = await agent(superUrl, database)
    expect(await cycle()).toBeUndefined() // the baseline
    await app.unsafe(`SELECT count(*) FROM app_orders WHERE id > 0 ${OWN_MARKER}`)
    for (let i = 0; i < 300; i++) await app.unsafe('SELECT count(*) FROM app_orders WHERE id > 0')
    const stats = (await cycle()) ?? []
    const [entry] = await admin`SELECT queryid::text AS hash, query, calls::int AS calls FROM pg_stat_statements
      WHERE query LIKE 'SELECT count(*) FROM app_orders%' AND userid <> (SELECT oid FROM pg_roles WHERE rolname = current_user)`
    expect(entry).toMatchObject({ calls: 301, query: `SELECT count(*) FROM app_orders WHERE id > $1 ${OWN_MARKER}` })
    expect(stats.filter((s) => s.query_hash === entry!.hash).map((s) => s.calls)).toEqual([301])
    // The agent's own statements (as the superuser) are still left out.
    expect(stats.filter((s) => s.query_hash !== entry!.hash)).toEqual([])
  })
})

describe('markOwnStatements', () => {
  test('marks sent statements only: fragments, helpers, prepared statements and transactions keep working', async () => {
    const server = await sharedPostgres(17)
    const url = await server.freshDatabase()
    const sql = agentPostgres(url, { max: 1, onnotice: () => {} })
    cleanups.push(() => sql.end())
    addArrayTypes(sql, await fetchArrayTypes(sql))
    // Arrays both ways, with the types read through the marked pool.
    const plain = postgres(url, { max: 1, onnotice: () => {} })
    cleanups.push(() => plain.end())
    await plain`SELECT 1`
    const arrays = (s: postgres.Sql) =>
      s`SELECT ${s.array(['a', 'b"c', 'd\\e', 'NULL'])}::text[] AS t, ${s.array([1, 2])}::int[] AS i, ARRAY[1, 2]::int8[] AS big,
               ARRAY[[1.5, 2]]::float8[] AS f, '{}'::int[] AS e, ARRAY[true, false] AS b, ARRAY['2026-01-02'::date] AS d`
    const [mine] = await arrays(sql)
    expect(mine).toEqual((await arrays(plain))[0]!)
    expect(mine).toEqual({
      t: ['a', 'b"c', 'd\\e', 'NULL'],
      i: [1, 2],
      big: ['1', '2'],
      f: [[1.5, 2]],
      e: [],
      b: [true, false],
      d: [new Date('2026-01-02')],
    })
    // A NULL element is null (the string 'NULL' above stays a string: PostgreSQL quotes it).
    const [nulls] =
      await sql`SELECT ARRAY[1, NULL, 3]::int[] AS i, ARRAY[NULL, 'x', ${'a,b}{"\\'}]::text[] AS t, '[0:1]={7,8}'::int[] AS bounds`
    expect(nulls).toEqual({ i: [1, null, 3], t: [null, 'x', 'a,b}{"\\'], bounds: [7, 8] })
    const seen: string[] = []
    const [row] =
      await sql`SELECT ${sql`1`}::int AS one, ${sql.array([1, 2])}::int[] AS arr, ${'x'} AS ${sql('col')}, current_query() AS q`
    expect(row).toEqual({
      one: 1,
      arr: [1, 2],
      col: 'x',
      q: `${OWN_MARKER} SELECT 1::int AS one, $1::int[] AS arr, $2 AS "col", current_query() AS q\n${OWN_MARKER}`,
    })
    // The same template twice: one prepared statement, reused.
    for (let i = 0; i < 2; i++) seen.push(String((await sql`SELECT current_query() AS q, ${i}::int AS i`)[0]!.q))
    expect(new Set(seen).size).toBe(1)
    const [prepared] =
      await sql`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE ${`${OWN_MARKER} SELECT current_query() AS q%`}`
    expect(prepared!.n).toBe(1)
    expect((await sql.unsafe('SELECT current_query() AS q'))[0]!.q).toBe(
      `${OWN_MARKER} SELECT current_query() AS q\n${OWN_MARKER}`,
    )
    expect((await sql.unsafe('SELECT current_query() AS q, $1::int AS i', [1]))[0]!.q).toStartWith(OWN_MARKER)
    const inTx = await sql.begin('read only', async (tx) => {
      const a = (await tx`SELECT current_query() AS q`)[0]!.q
      const b = await tx.savepoint(async (sp) => (await sp.unsafe('SELECT current_query() AS q'))[0]!.q)
      const failed = await tx.savepoint(async (sp) => sp`SELECT 1/0`).catch((e: Error) => e.message)
      const after = (await tx`SELECT current_setting('transaction_read_only') AS ro`)[0]!.ro
      return [a, b, failed, after]
    })
    const q = `${OWN_MARKER} SELECT current_query() AS q\n${OWN_MARKER}`
    expect(inTx).toEqual([q, q, 'division by zero', 'on'])
  })
})

describe("PostgreSQL's text form of arrays, read and written by the agent's own code", () => {
  test('read: quoting, escapes, NULL, nesting, empty, bounds, the box delimiter, text that ends early', () => {
    const int = (x: string) => Number.parseInt(x, 10)
    expect(readPgArray('{1,2,3}', int)).toEqual([1, 2, 3])
    expect(readPgArray('{"a b","c\\"d","e\\\\f","NULL",NULL,""}', undefined)).toEqual([
      'a b',
      'c"d',
      'e\\f',
      'NULL',
      null,
      '',
    ])
    expect(readPgArray('{{1,2},{3,NULL}}', int)).toEqual([
      [1, 2],
      [3, null],
    ])
    expect(readPgArray('{}', int)).toEqual([])
    expect(readPgArray('{{},{}}', int)).toEqual([[], []])
    expect(readPgArray('[0:1]={7,8}', int)).toEqual([7, 8])
    expect(readPgArray('{(1,2),(0,0);(3,4),(1,1)}', undefined, ';')).toEqual(['(1,2),(0,0)', '(3,4),(1,1)'])
    expect(readPgArray('{"*/ \\"; DROP", x}', undefined)).toEqual(['*/ "; DROP', ' x'])
    expect(readPgArray('{1,"unterminated', undefined)).toEqual(['1', 'unterminated'])
    expect(readPgArray('', int)).toEqual([])
  })

  test('write: every element quoted with quotes and backslashes escaped, nesting, null and undefined as NULL', () => {
    expect(writePgArray([1, 2], String)).toBe('{"1","2"}')
    expect(writePgArray(['a"b', 'c\\d', '{x,y}', null, undefined], undefined)).toBe(
      '{"a\\"b","c\\\\d","{x,y}",NULL,NULL}',
    )
    expect(writePgArray([[1], [2, 3]], String)).toBe('{{"1"},{"2","3"}}')
    expect(writePgArray([], String)).toBe('{}')
    expect(writePgArray('not an array', String)).toBe('not an array')
    // Read back, what was written is what was meant.
    const hostile = ['*/', "'", '\\', '"', 'ünïcødé 表', '\n', 'NULL']
    expect(readPgArray(writePgArray(hostile, undefined) as string, undefined)).toEqual(hostile)
  })
})
