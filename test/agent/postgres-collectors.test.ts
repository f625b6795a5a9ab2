// The PostgreSQL collectors of src/agent/collectors/postgres/ against real PostgreSQL 13, 14, 16 and 17:
// known workloads with exact expectations (counter deltas, blockers, flags), one key set per version,
// every section valid against the wire contract. Statistics reach the views asynchronously (backends
// flush them at transaction end, rate-limited, and at exit), so each workload runs in its own session,
// which is closed, and the test waits (bounded) until the view shows the workload before collecting.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import postgres from 'postgres'
import { TABLE_COUNTERS } from '../../src/shared/families.ts'
import { activity } from '../../src/agent/collectors/postgres/activity.ts'
import { bgwriter } from '../../src/agent/collectors/postgres/bgwriter.ts'
import { databaseStats } from '../../src/agent/collectors/postgres/database-stats.ts'
import { deltaSince, forVersion } from '../../src/agent/collectors/postgres/common.ts'
import { postgresCollectors } from '../../src/agent/collectors/postgres/index.ts'
import { indexes } from '../../src/agent/collectors/postgres/indexes.ts'
import { ioStats } from '../../src/agent/collectors/postgres/io-stats.ts'
import { locks } from '../../src/agent/collectors/postgres/locks.ts'
import { replication } from '../../src/agent/collectors/postgres/replication.ts'
import { tables } from '../../src/agent/collectors/postgres/tables.ts'
import { sampleWaits, waits } from '../../src/agent/collectors/postgres/waits.ts'
import { walDir } from '../../src/agent/collectors/postgres/wal-dir.ts'
import { walStats } from '../../src/agent/collectors/postgres/wal-stats.ts'
import type { BatchSections, PostgresCollector, PostgresContext } from '../../src/agent/collectors/types.ts'
import { collectorNames } from '../../src/shared/collectors.ts'
import { createLogger } from '../../src/shared/log.ts'
import { IngestBatch } from '../../src/shared/wire.ts'
import { postgresMajors, sharedPostgres } from '../support/postgres.ts'
import { type Standby, startStandby } from '../support/replica.ts'

// A timed-out test makes bun kill the processes it started, the shared PostgreSQL servers among them,
// so the per-test limit is well above the waits below.
setDefaultTimeout(30_000)

const AGENT_APP = 'dbm-collector-test-agent'
const silent = createLogger('error', () => {})

/** A session as the tests open them; every one is ended in afterAll even when a test fails midway. */
const sessions: postgres.Sql[] = []
function connect(url: string, options: { max?: number; app?: string } = {}): postgres.Sql {
  const sql = postgres(url, {
    max: options.max ?? 1,
    onnotice: () => {},
    fetch_types: false,
    connection: { statement_timeout: 5000, application_name: options.app ?? 'dbm-collector-test' },
  })
  sessions.push(sql)
  return sql
}
async function end(sql: postgres.Sql) {
  await sql.end({ timeout: 5 })
}

afterAll(async () => {
  await Promise.all(sessions.map((s) => s.end({ timeout: 1 }).catch(() => {})))
})

beforeAll(async () => {
  await Promise.all(postgresMajors.map((major) => sharedPostgres(major)))
}, 60_000)

interface Agent {
  sql: postgres.Sql
  ctx(overrides?: Partial<PostgresContext>): PostgresContext
}

async function agentFor(url: string): Promise<Agent> {
  const sql = connect(url, { max: 2, app: AGENT_APP })
  const [info] = await sql<{ num: number; database: string }[]>`
    SELECT current_setting('server_version_num')::int AS num, current_database() AS database`
  const state = new Map<string, unknown>()
  return {
    sql,
    ctx: (overrides = {}) => ({
      name: 'test-db',
      database: info!.database,
      sql,
      versionNum: info!.num,
      major: Math.floor(info!.num / 10_000),
      now: Date.now(),
      settings: { collectExplainPlans: false, collectReplication: true },
      state,
      notes: new Map(),
      log: silent,
      ...overrides,
    }),
  }
}

/** Runs a collector and checks its sections against the wire contract. */
async function run(collector: PostgresCollector, ctx: PostgresContext): Promise<Partial<BatchSections>> {
  const sections = await collector.collect(ctx)
  const batch = {
    batch_id: 'batch-0001',
    collected_at: Date.now(),
    interval_seconds: 10,
    agent_version: 'test',
    database: { name: 'test-db', engine: 'postgres', host: '127.0.0.1', port: 5432 },
    ...sections,
  }
  expect([...Value.Errors(IngestBatch, batch)].map((e) => `${e.path}: ${e.message}`)).toEqual([])
  return sections
}

/** Polls `probe` until it returns a value, for at most `timeoutMs`. */
async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(50)
  }
}

/** Sums the deltas of counter maps collected one after another until `done` holds. */
async function accumulate(
  what: string,
  collect: () => Promise<Record<string, number | null> | undefined>,
  done: (sum: Record<string, number>) => boolean,
): Promise<{ sum: Record<string, number>; last: Record<string, number | null> }> {
  const sum: Record<string, number> = {}
  let last: Record<string, number | null> = {}
  await eventually(what, async () => {
    const delta = await collect()
    if (delta) {
      last = delta
      for (const [k, v] of Object.entries(delta)) sum[k] = (sum[k] ?? 0) + (v ?? 0)
    }
    return done(sum) ? true : undefined
  })
  return { sum, last }
}

/** Ends a workload session; on PostgreSQL 15+ it first asks for its statistics to be flushed. */
async function finish(session: postgres.Sql, major: number) {
  if (major >= 15) await session`SELECT pg_stat_force_next_flush()`
  await end(session)
}

const sorted = (keys: readonly string[]) => [...keys].sort()

describe('the PostgreSQL collector set', () => {
  test('names, order and minimum versions follow src/shared/collectors.ts', () => {
    const table = collectorNames.filter((c) => c.engine === 'postgres').map((c) => [c.name, c.minVersion ?? null])
    expect(postgresCollectors.map((c) => [c.name, c.minVersion ?? null])).toEqual(table)
    expect(postgresCollectors.every((c) => c.engine === 'postgres' && c.defaultEnabled)).toBe(true)
    expect(walStats.minVersion).toBe(14)
    expect(ioStats.minVersion).toBe(16)
  })

  test('the SQL variant is the one keyed by the highest minimum version at or below the server', () => {
    const variants = { 10: 'ten', 14: 'fourteen', 17: 'seventeen' }
    expect([13, 14, 16, 17, 18].map((major) => forVersion(variants, major))).toEqual([
      'ten',
      'fourteen',
      'fourteen',
      'seventeen',
      'seventeen',
    ])
    expect(() => forVersion(variants, 9)).toThrow('no variant for PostgreSQL 9')
  })

  test('counter deltas: none on the first sample, reset-aware after', () => {
    const sample = (resetAt: string | null, a: number | null, b: number | null) => ({ resetAt, values: { a, b } })
    expect(deltaSince(undefined, sample(null, 5, 1))).toBeNull()
    expect(deltaSince(sample(null, 5, 1), sample(null, 8, null))).toEqual({ a: 3, b: null })
    // One counter went down: the subject was reset, so every counter counts from zero, not each on its own.
    expect(deltaSince(sample(null, 5, 1), sample(null, 2, 1))).toEqual({ a: 2, b: 1 })
    expect(deltaSince(sample(null, 5, 1), sample(null, 6, 0))).toEqual({ a: 6, b: 0 })
    expect(deltaSince(sample('r1', 5, 1), sample('r2', 7, 4))).toEqual({ a: 7, b: 4 }) // stats_reset moved
  })
})

for (const major of postgresMajors) {
  describe(`PostgreSQL ${major}`, () => {
    let url: string
    let agent: Agent

    beforeAll(async () => {
      const server = await sharedPostgres(major)
      url = await server.freshDatabase()
      agent = await agentFor(url)
    }, 60_000)

    test('collectors below their minimum version are not in the set that runs', () => {
      const runnable = postgresCollectors.filter((c) => (c.minVersion ?? 0) <= major).map((c) => c.name)
      expect(runnable.includes('wal_stats')).toBe(major >= 14)
      expect(runnable.includes('io_stats')).toBe(major >= 16)
      expect(runnable.length).toBe(postgresCollectors.length - (major < 14 ? 2 : major < 16 ? 1 : 0))
    })

    test('tables: autovacuum_enabled from the storage parameters of the table and of its TOAST table, however spelled', async () => {
      const setup = connect(url)
      await setup`CREATE TABLE t_av_off (id int, note text) WITH (autovacuum_enabled = off)`
      await setup`CREATE TABLE t_av_zero (id int) WITH (autovacuum_enabled = 0)`
      await setup`CREATE TABLE t_av_toast (id int, note text) WITH (toast.autovacuum_enabled = 'no')`
      await setup`CREATE TABLE t_av_on (id int, note text) WITH (autovacuum_enabled, toast.autovacuum_enabled = true, fillfactor = 90)`
      await setup`CREATE TABLE t_av_default (id int)`
      await setup`ALTER TABLE t_av_default SET (autovacuum_enabled = false)`
      await setup`ALTER TABLE t_av_default RESET (autovacuum_enabled)`
      await setup.end()
      const found = (await run(tables, agent.ctx({ state: new Map() }))).tables!.filter((t) =>
        t.table_name.startsWith('t_av_'),
      )
      expect(Object.fromEntries(found.map((t) => [t.table_name, t.autovacuum_enabled]))).toEqual({
        t_av_off: false,
        t_av_zero: false,
        t_av_toast: false,
        t_av_on: true,
        t_av_default: true,
      })
    })

    test('tables: DDL between two cycles shows in the next one (the catalog facts are kept while the catalogs stay)', async () => {
      await agent.sql`CREATE TABLE t_ddl (id int NOT NULL, note text)`
      const ctx = agent.ctx({ state: new Map() })
      const collect = async () => (await run(tables, ctx)).tables!.find((t) => t.table_name === 't_ddl')!
      expect(await collect()).toMatchObject({ has_primary_key: false, autovacuum_enabled: true, index_size_bytes: 0 })
      // A unique index made the primary key changes pg_index alone; a storage parameter of the TOAST table, pg_class alone.
      await agent.sql`CREATE UNIQUE INDEX t_ddl_id ON t_ddl (id)`
      await agent.sql`ALTER TABLE t_ddl ADD PRIMARY KEY USING INDEX t_ddl_id`
      const keyed = await collect()
      expect(keyed).toMatchObject({ has_primary_key: true, autovacuum_enabled: true, index_size_bytes: 8192 })
      await agent.sql`ALTER TABLE t_ddl SET (toast.autovacuum_enabled = off)`
      expect(await collect()).toMatchObject({ has_primary_key: true, autovacuum_enabled: false })
      await agent.sql`ALTER TABLE t_ddl DROP CONSTRAINT t_ddl_id`
      expect(await collect()).toMatchObject({ has_primary_key: false, index_size_bytes: 0 })
    })

    test('tables: exact counter deltas of a known workload', async () => {
      // Building the primary key scans the new table once; the baseline waits until that scan shows.
      const setup = connect(url)
      await setup`CREATE TABLE t_work (id serial PRIMARY KEY, v int NOT NULL) WITH (autovacuum_enabled = false)`
      await setup`CREATE TABLE t_nokey (v int) WITH (autovacuum_enabled = false)`
      await finish(setup, major)
      const scans = async () => {
        const [row] = await agent.sql`SELECT seq_scan, n_tup_upd FROM pg_stat_user_tables WHERE relname = 't_work'`
        return { seq_scan: Number(row?.seq_scan), n_tup_upd: Number(row?.n_tup_upd) }
      }
      await eventually('the index build in pg_stat_user_tables', async () =>
        (await scans()).seq_scan === 1 ? true : undefined,
      )
      const ctx = agent.ctx({ state: new Map() })
      const first = (await run(tables, ctx)).tables!
      const before = first.find((t) => t.table_name === 't_work')!
      expect(before).toMatchObject({
        schema_name: 'public',
        n_tup_ins: 0,
        seq_scan: 1,
        has_primary_key: true,
        delta: null,
      })
      expect(first.find((t) => t.table_name === 't_nokey')).toMatchObject({ has_primary_key: false, idx_scan: null })

      const work = connect(url)
      await work`INSERT INTO t_work (v) SELECT g FROM generate_series(1, 100) g`
      await work`DELETE FROM t_work WHERE v <= 10`
      await work`ANALYZE t_work`
      for (let i = 0; i < 3; i++) await work`SELECT count(*) FROM t_work WHERE v > 0`
      await work`UPDATE t_work SET v = v + 1000 WHERE v = 50`
      await finish(work, major)
      let seen = await scans()
      await eventually('the workload in pg_stat_user_tables', async () => {
        seen = await scans()
        return seen.seq_scan === 6 && seen.n_tup_upd === 1 ? true : undefined
      }).catch((e: Error) => {
        throw new Error(`${e.message}; last seen ${JSON.stringify(seen)}`)
      })

      const after = (await run(tables, ctx)).tables!.find((t) => t.table_name === 't_work')!
      expect(after.delta).toEqual({
        seq_scan: 5, // the DELETE, three counts, the UPDATE
        seq_tup_read: 460, // 100 + 3 × 90 + 90
        idx_scan: 0,
        idx_tup_fetch: 0,
        n_tup_ins: 100,
        n_tup_upd: 1,
        n_tup_del: 10,
        n_tup_hot_upd: 1,
        // the one update stayed on its page (HOT); PostgreSQL before 16 has no such counter
        n_tup_newpage_upd: major >= 16 ? 0 : null,
      })
      // n_live_tup is not asserted exactly: ANALYZE sets it, and inserts flushed after ANALYZE add to it.
      expect(after).toMatchObject({
        n_tup_ins: 100,
        n_tup_del: 10,
        last_vacuum: null,
        last_autovacuum: null,
        has_primary_key: true,
      })
      expect(after.n_live_tup).toBeGreaterThanOrEqual(90)
      expect(after.n_dead_tup).toBeGreaterThanOrEqual(0)
      expect(after.last_analyze).toBeGreaterThan(Date.now() - 60_000)
      expect(after.table_size_bytes).toBe(8192)
      expect(after.index_size_bytes).toBeGreaterThan(0)
      // The heap's one page and no TOAST table (integers only).
      expect({ heap: after.heap_bytes, toast: after.toast_bytes }).toEqual({ heap: 8192, toast: 0 })

      const idle = (await run(tables, ctx)).tables!.find((t) => t.table_name === 't_work')!
      // every counter of the table family still, but the one PostgreSQL before 16 lacks
      expect(idle.delta).toEqual(
        Object.fromEntries(TABLE_COUNTERS.map((c) => [c, c === 'n_tup_newpage_upd' && major < 16 ? null : 0])) as never,
      )
      // Sizes of an unchanged table are the last reading's; TRUNCATE gives it new files (and moves no
      // counter): sized again at once, as PostgreSQL sizes it.
      expect([idle.table_size_bytes, idle.index_size_bytes, idle.heap_bytes]).toEqual([
        after.table_size_bytes,
        after.index_size_bytes,
        after.heap_bytes,
      ])
      const truncate = connect(url)
      await truncate`TRUNCATE t_work`
      await finish(truncate, major)
      const emptied = (await run(tables, ctx)).tables!.find((t) => t.table_name === 't_work')!
      const [sizes] =
        await agent.sql`SELECT pg_table_size('t_work'::regclass)::int AS t, pg_indexes_size('t_work'::regclass)::int AS i`
      expect([emptied.table_size_bytes, emptied.index_size_bytes, emptied.heap_bytes]).toEqual([sizes!.t, sizes!.i, 0])
    })

    test('tables: sequences with the share of their range used and the column they feed; a locked one without waiting', async () => {
      await agent.sql`CREATE SEQUENCE s_int AS integer`
      await agent.sql`SELECT setval('s_int', 2000000000)`
      await agent.sql`CREATE TABLE t_seq (id serial PRIMARY KEY, legacy int)`
      // A bigint sequence feeding an integer column runs out at the column's maximum.
      await agent.sql`CREATE SEQUENCE s_legacy OWNED BY t_seq.legacy`
      await agent.sql`SELECT setval('s_legacy', 1700000000)`
      await agent.sql`CREATE SEQUENCE s_down INCREMENT BY -1`
      await agent.sql`SELECT nextval('s_down')`
      const collect = async () =>
        (await run(tables, agent.ctx({ state: new Map() }))).sequences!.filter(
          (q) => q.schema_name === 'public' && /^(s_|t_seq)/.test(q.sequence_name),
        )
      const found = await collect()
      expect(found.map((q) => q.sequence_name)).toEqual(['s_int', 's_legacy', 's_down', 't_seq_id_seq'])
      const [int, legacy, down, serial] = found
      expect(int).toMatchObject({
        data_type: 'integer',
        last_value: 2_000_000_000,
        max_value: 2_147_483_647,
        increment_by: 1,
        owned_by: null,
      })
      expect(int!.used_ratio).toBeCloseTo(1_999_999_999 / 2_147_483_646, 9)
      expect(legacy).toMatchObject({
        data_type: 'bigint',
        last_value: 1_700_000_000,
        max_value: 2 ** 63,
        owned_by: { schema_name: 'public', table_name: 't_seq', column_name: 'legacy', column_type: 'integer' },
      })
      expect(legacy!.used_ratio).toBeCloseTo(1_699_999_999 / 2_147_483_646, 9)
      expect(down).toMatchObject({ data_type: 'bigint', last_value: -1, increment_by: -1, used_ratio: 0 })
      // Never called: no last value yet.
      expect(serial).toMatchObject({
        data_type: 'integer',
        last_value: null,
        used_ratio: null,
        owned_by: { table_name: 't_seq', column_name: 'id', column_type: 'integer' },
      })

      const holder = connect(url)
      await holder`BEGIN`
      await holder`ALTER SEQUENCE s_int INCREMENT BY 1`
      try {
        const started = performance.now()
        const locked = (await collect()).find((q) => q.sequence_name === 's_int')
        expect(locked).toMatchObject({ last_value: null, used_ratio: null })
        expect(performance.now() - started).toBeLessThan(2000)
      } finally {
        await holder`ROLLBACK`
        await end(holder)
      }
    })

    test('tables: foreign keys whose columns lead no index, until an index covers them', async () => {
      await agent.sql`CREATE TABLE fk_parent (id int PRIMARY KEY)`
      await agent.sql`CREATE TABLE fk_child (id int PRIMARY KEY, parent_id int REFERENCES fk_parent (id))`
      const listed = async () =>
        (await run(tables, agent.ctx({ state: new Map() }))).unindexed_foreign_keys!.filter(
          (f) => f.table_name === 'fk_child',
        )
      expect(await listed()).toEqual([
        {
          schema_name: 'public',
          table_name: 'fk_child',
          constraint_name: 'fk_child_parent_id_fkey',
          columns: ['parent_id'],
          referenced_table: 'fk_parent',
          table_size_bytes: 0,
          n_live_tup: 0,
        },
      ])
      await agent.sql`CREATE INDEX fk_child_parent_id_id ON fk_child (parent_id, id)`
      expect(await listed()).toEqual([])
    })

    test('tables and indexes: a table under an ACCESS EXCLUSIVE lock is listed without sizes, without waiting', async () => {
      await agent.sql`CREATE TABLE t_busy (id int PRIMARY KEY)`
      const indexCtx = agent.ctx({ state: new Map() })
      const busyIndex = async () => (await run(indexes, indexCtx)).indexes!.find((i) => i.index_name === 't_busy_pkey')!
      expect(await busyIndex()).toMatchObject({
        size_bytes: 8192,
        index_def: 'CREATE UNIQUE INDEX t_busy_pkey ON public.t_busy USING btree (id)',
      })
      const holder = connect(url)
      await holder`BEGIN`
      await holder`LOCK TABLE t_busy IN ACCESS EXCLUSIVE MODE`
      try {
        const started = performance.now()
        const table = (await run(tables, agent.ctx({ state: new Map() }))).tables!.find(
          (t) => t.table_name === 't_busy',
        )!
        expect(table).toMatchObject({
          table_size_bytes: null,
          index_size_bytes: null,
          heap_bytes: null,
          toast_bytes: null,
          has_primary_key: true,
        })
        // pg_get_indexdef would wait for the table's lock: the definition is the one seen before.
        expect(await busyIndex()).toMatchObject({
          size_bytes: null,
          index_def: 'CREATE UNIQUE INDEX t_busy_pkey ON public.t_busy USING btree (id)',
          is_primary: true,
        })
        const unseen = (await run(indexes, agent.ctx({ state: new Map() }))).indexes!.find(
          (i) => i.index_name === 't_busy_pkey',
        )!
        expect(unseen).toMatchObject({ size_bytes: null, index_def: '' })
        expect(performance.now() - started).toBeLessThan(2000)
      } finally {
        await holder`ROLLBACK`
        await end(holder)
      }
      const table = (await run(tables, agent.ctx({ state: new Map() }))).tables!.find((t) => t.table_name === 't_busy')!
      expect(table).toMatchObject({ table_size_bytes: 0, heap_bytes: 0, toast_bytes: 0 })
    })

    test('indexes: flags, definitions, an unused index over 1 MB, exact scan deltas', async () => {
      await agent.sql`CREATE TABLE t_idx (id int PRIMARY KEY, code text NOT NULL, payload text NOT NULL) WITH (autovacuum_enabled = false)`
      await agent.sql`INSERT INTO t_idx SELECT g, 'c' || g, md5(g::text) FROM generate_series(1, 40000) g`
      await agent.sql`CREATE UNIQUE INDEX t_idx_code_key ON t_idx (code)`
      await agent.sql`CREATE INDEX t_idx_payload_idx ON t_idx (payload)`
      await agent.sql`ANALYZE t_idx`
      const ctx = agent.ctx({ state: new Map() })
      const byName = (list: BatchSections['indexes']) =>
        new Map(list!.filter((i) => i.table_name === 't_idx').map((i) => [i.index_name, i]))

      const first = byName((await run(indexes, ctx)).indexes)
      expect(sorted([...first.keys()])).toEqual(['t_idx_code_key', 't_idx_payload_idx', 't_idx_pkey'])
      expect(first.get('t_idx_payload_idx')).toMatchObject({
        schema_name: 'public',
        index_def: 'CREATE INDEX t_idx_payload_idx ON public.t_idx USING btree (payload)',
        idx_scan: 0,
        is_unique: false,
        is_primary: false,
        is_valid: true,
        delta: null,
      })
      expect(first.get('t_idx_payload_idx')!.size_bytes).toBeGreaterThan(1024 * 1024)
      expect(first.get('t_idx_code_key')).toMatchObject({
        index_def: 'CREATE UNIQUE INDEX t_idx_code_key ON public.t_idx USING btree (code)',
        is_unique: true,
        is_primary: false,
      })
      expect(first.get('t_idx_pkey')).toMatchObject({
        index_def: 'CREATE UNIQUE INDEX t_idx_pkey ON public.t_idx USING btree (id)',
        is_unique: true,
        is_primary: true,
      })

      const work = connect(url)
      await work`SET enable_seqscan = off`
      await work`SET enable_bitmapscan = off`
      for (let i = 0; i < 2; i++) await work`SELECT payload FROM t_idx WHERE id = 7`
      await finish(work, major)
      await eventually('the index scans in pg_stat_user_indexes', async () => {
        const [row] = await agent.sql`SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 't_idx_pkey'`
        return Number(row?.idx_scan) === 2 ? row : undefined
      })

      const after = byName((await run(indexes, ctx)).indexes)
      expect(after.get('t_idx_pkey')!.delta).toEqual({ idx_scan: 2, idx_tup_read: 2, idx_tup_fetch: 2 })
      expect(after.get('t_idx_payload_idx')!.delta).toEqual({ idx_scan: 0, idx_tup_read: 0, idx_tup_fetch: 0 })
      expect(after.get('t_idx_code_key')!.delta).toEqual({ idx_scan: 0, idx_tup_read: 0, idx_tup_fetch: 0 })
      expect(after.get('t_idx_pkey')!.index_def).toBe('CREATE UNIQUE INDEX t_idx_pkey ON public.t_idx USING btree (id)')
      // Sizes are kept while nothing grows the index; rows inserted into its table have it sized again.
      expect(after.get('t_idx_payload_idx')!.size_bytes).toBe(first.get('t_idx_payload_idx')!.size_bytes)
      const grow = connect(url)
      await grow`INSERT INTO t_idx SELECT g, 'c' || g, md5(g::text) FROM generate_series(40001, 60000) g`
      await finish(grow, major)
      const [real] = await agent.sql<{ n: string }[]>`SELECT pg_relation_size('t_idx_payload_idx')::text AS n`
      const grown = await eventually('the inserts in pg_stat_user_tables', async () => {
        const size = byName((await run(indexes, ctx)).indexes).get('t_idx_payload_idx')!.size_bytes
        return size === Number(real!.n) ? size : undefined
      })
      expect(grown).toBeGreaterThan(first.get('t_idx_payload_idx')!.size_bytes!)

      // Definitions are remembered between cycles; a rename makes the agent deparse them again.
      await agent.sql`ALTER INDEX t_idx_code_key RENAME TO t_idx_code_uq`
      await agent.sql`ALTER TABLE t_idx RENAME TO t_idx2`
      const renamed = (await run(indexes, ctx)).indexes!.filter((i) => i.table_name === 't_idx2')
      expect(renamed.map((i) => i.index_def).sort()).toEqual([
        'CREATE INDEX t_idx_payload_idx ON public.t_idx2 USING btree (payload)',
        'CREATE UNIQUE INDEX t_idx_code_uq ON public.t_idx2 USING btree (code)',
        'CREATE UNIQUE INDEX t_idx_pkey ON public.t_idx2 USING btree (id)',
      ])
    })

    test('activity and locks: a session waiting for a row names its blocker', async () => {
      await agent.sql`CREATE TABLE t_lock (id int PRIMARY KEY, v int NOT NULL)`
      await agent.sql`INSERT INTO t_lock VALUES (1, 0), (2, 0)`
      const update = 'UPDATE t_lock SET v = v + 1 WHERE id = 1'
      const a = connect(url)
      const b = connect(url)
      const idle = connect(url)
      const pidOf = async (s: postgres.Sql) => (await s<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
      const [aPid, bPid, idlePid] = [await pidOf(a), await pidOf(b), await pidOf(idle)]
      // A session of another database on the same server: not this database's activity.
      const elsewhere = connect((await sharedPostgres(major)).url('postgres'))
      const elsewherePid = await pidOf(elsewhere)
      await elsewhere`BEGIN`
      await elsewhere`SELECT 1`
      await a`BEGIN`
      await a.unsafe(update)
      const waiting = b.unsafe(update).execute()
      try {
        await eventually('B to wait for A', async () => {
          const [row] = await idle`SELECT wait_event_type FROM pg_stat_activity WHERE pid = ${bPid}`
          return row?.wait_event_type === 'Lock' ? row : undefined
        })
        const agentPids = (
          await idle<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE application_name = ${AGENT_APP}`
        ).map((r) => r.pid)
        const database = agent.ctx().database

        const sessionList = (await run(activity, agent.ctx())).activity!
        const mine = sessionList.filter((s) => s.database === database)
        expect(mine.map((s) => s.pid).sort()).toEqual([aPid, bPid].sort())
        expect(sessionList.map((s) => s.pid)).not.toContain(elsewherePid)
        expect(sessionList.every((s) => s.database === database)).toBe(true)
        expect(
          sessionList.some((s) => s.pid === idlePid || s.state === 'idle' || agentPids.includes(s.pid as number)),
        ).toBe(false)
        const blocked = mine.find((s) => s.pid === bPid)!
        expect(blocked).toMatchObject({
          query_text: update,
          state: 'active',
          wait_event_type: 'Lock',
          wait_event: 'transactionid',
          blocking_pids: [aPid],
          user: 'postgres',
          application_name: 'dbm-collector-test',
          client_addr: '127.0.0.1',
          database,
          backend_type: 'client backend',
        })
        expect(blocked.duration_ms).toBeGreaterThanOrEqual(0)
        const blocker = mine.find((s) => s.pid === aPid)!
        expect(blocker).toMatchObject({
          query_text: update,
          state: 'idle in transaction',
          wait_event_type: 'Client',
          blocking_pids: [],
        })
        expect(blocker.xact_start).toBeLessThanOrEqual(blocked.xact_start!)
        expect(blocker.duration_ms).toBeGreaterThanOrEqual(0)

        // Wait samples count in the minute they are taken in: two samples astride a minute's end.
        const waitCtx = agent.ctx({ state: new Map() })
        const minute = Math.floor(Date.now() / 60_000) * 60_000
        await sampleWaits(waitCtx, 1000, () => minute + 59_500)
        await sampleWaits(waitCtx, 1000, () => minute + 60_500)
        const sampled = (await run(waits, waitCtx)).waits!
        // A, idle in its transaction, waits for its client (ClientRead): an idle session, not one waiting.
        expect(sampled.filter((w) => w.wait_event === 'ClientRead')).toEqual([])
        const waitList = sampled.filter((w) => w.wait_event === 'transactionid')
        expect(waitList).toEqual([
          { wait_event_type: 'Lock', wait_event: 'transactionid', count: 1, total_duration_ms: 1000, minute },
          {
            wait_event_type: 'Lock',
            wait_event: 'transactionid',
            count: 1,
            total_duration_ms: 1000,
            minute: minute + 60_000,
          },
        ])

        const lockList = (await run(locks, agent.ctx())).locks!
        expect(lockList.some((l) => agentPids.includes(l.pid))).toBe(false)
        expect(lockList.some((l) => l.lock_type === 'virtualxid')).toBe(false)
        const ungranted = lockList.filter((l) => !l.granted)
        expect(ungranted.length).toBe(1)
        expect(ungranted[0]).toMatchObject({
          pid: bPid,
          lock_type: 'transactionid',
          mode: 'ShareLock',
          relation_name: 'public.t_lock',
          granted: false,
          blocked_by_pid: aPid,
          query_text: update,
        })
        expect(ungranted[0]!.duration_ms).toBeGreaterThanOrEqual(0)
        expect(lockList).toContainEqual(
          expect.objectContaining({
            pid: aPid,
            lock_type: 'relation',
            mode: 'RowExclusiveLock',
            relation_name: 'public.t_lock',
            granted: true,
            blocked_by_pid: null,
          }),
        )
        expect(lockList).toContainEqual(
          expect.objectContaining({
            pid: aPid,
            lock_type: 'transactionid',
            mode: 'ExclusiveLock',
            relation_name: null,
            granted: true,
          }),
        )
        expect(lockList).toContainEqual(
          expect.objectContaining({
            pid: bPid,
            lock_type: 'tuple',
            mode: 'ExclusiveLock',
            relation_name: 'public.t_lock',
            granted: true,
          }),
        )
      } finally {
        await a`ROLLBACK`
        await elsewhere`ROLLBACK`
        await waiting
        await Promise.all([end(a), end(b), end(idle), end(elsewhere)])
      }
    })

    test('bgwriter: a CHECKPOINT counts as requested, under one key set', async () => {
      const ctx = agent.ctx({ state: new Map() })
      expect(await run(bgwriter, ctx)).toEqual({})
      // On a connection without the agent's 5 s statement timeout: a busy machine's disk can take longer.
      const admin = postgres(url, { max: 1, onnotice: () => {}, fetch_types: false })
      try {
        await admin`CHECKPOINT`
      } finally {
        await admin.end({ timeout: 5 })
      }
      const { sum, last } = await accumulate(
        'the checkpoint in the statistics',
        async () => (await run(bgwriter, ctx)).bgwriter,
        (s) => (s.checkpoints_req ?? 0) >= 1,
      )
      expect(sum.checkpoints_req).toBeGreaterThanOrEqual(1)
      expect(sorted(Object.keys(last))).toEqual(
        sorted([
          'checkpoints_timed',
          'checkpoints_req',
          'checkpoint_write_time_ms',
          'checkpoint_sync_time_ms',
          'buffers_checkpoint',
          'buffers_clean',
          'maxwritten_clean',
          'buffers_backend',
          'buffers_backend_fsync',
          'buffers_alloc',
          'restartpoints_timed',
          'restartpoints_req',
          'restartpoints_done',
        ]),
      )
      expect(last.buffers_backend === null).toBe(major >= 17)
      expect(last.buffers_backend_fsync === null).toBe(major >= 17)
      expect(last.restartpoints_timed === null).toBe(major < 17)
      expect(typeof last.buffers_alloc).toBe('number')
    })

    test('wal_dir: pg_wal in one row, the last checkpoint and the WAL since its redo; without pg_monitor a note and no pg_wal figure', async () => {
      const admin = postgres(url, { max: 1, onnotice: () => {}, fetch_types: false })
      const plainUrl = url.replace(/\/\/[^@]*@/, '//dbm_wal_plain:w@')
      let plain: postgres.Sql | undefined
      try {
        await admin`CHECKPOINT`
        const [dir] = await admin<
          { files: number; bytes: number }[]
        >`SELECT count(*)::int AS files, sum(size)::float8 AS bytes FROM pg_ls_waldir()`
        const [last] = await admin<
          { redo: string; at: number }[]
        >`SELECT redo_lsn::text AS redo, floor(extract(epoch FROM checkpoint_time) * 1000)::float8 AS at FROM pg_control_checkpoint()`
        const status = await run(walDir, agent.ctx())
        expect(status.wal_dir).toMatchObject({
          wal_files: dir!.files,
          wal_bytes: dir!.bytes,
          redo_lsn: last!.redo,
          checkpoint_time: last!.at,
          in_recovery: false,
        })
        expect(status.wal_dir!.redo_wal_file).toMatch(/^[0-9A-F]{24}$/)
        expect(status.wal_dir!.checkpoint_age_ms).toBeLessThan(60_000)
        expect(status.wal_dir!.wal_since_redo_bytes).toBeLessThan(1024 * 1024)

        await admin.unsafe('DROP ROLE IF EXISTS dbm_wal_plain')
        await admin.unsafe("CREATE ROLE dbm_wal_plain LOGIN PASSWORD 'w'")
        plain = connect(plainUrl)
        const ctx = agent.ctx({ sql: plain })
        const limited = (await run(walDir, ctx)).wal_dir!
        expect(limited).toMatchObject({ wal_files: null, wal_bytes: null, redo_lsn: last!.redo })
        expect(ctx.notes.get('wal_dir')).toBe(
          'pg_wal not measured: the role may not call pg_ls_waldir() (GRANT pg_monitor TO the agent role)',
        )
      } finally {
        await plain?.end({ timeout: 1 })
        await admin.unsafe('DROP ROLE IF EXISTS dbm_wal_plain').catch(() => {})
        await admin.end({ timeout: 5 })
      }
    })

    if (major >= 14) {
      test('wal_stats: WAL written by inserts shows up as deltas', async () => {
        const ctx = agent.ctx({ state: new Map() })
        expect(await run(walStats, ctx)).toEqual({})
        const work = connect(url)
        await work`CREATE TABLE t_wal (v int)`
        await work`INSERT INTO t_wal SELECT g FROM generate_series(1, 1000) g`
        await finish(work, major)
        const { sum, last } = await accumulate(
          'the inserts in pg_stat_wal',
          async () => (await run(walStats, ctx)).wal_stats,
          (s) => (s.wal_records ?? 0) >= 1000,
        )
        expect(sum.wal_bytes).toBeGreaterThan(1000 * 20)
        expect(sorted(Object.keys(last))).toEqual(
          sorted([
            'wal_records',
            'wal_fpi',
            'wal_bytes',
            'wal_buffers_full',
            'wal_write',
            'wal_sync',
            'wal_write_time_ms',
            'wal_sync_time_ms',
          ]),
        )
        // PostgreSQL 18 moved the write and sync counters to pg_stat_io, where the collector reads them
        // (exact values against both views: wal-stats.test.ts).
        for (const value of Object.values(last)) expect(typeof value).toBe('number')
      })
    }

    if (major >= 16) {
      test('io_stats: deltas per backend, object and context, with bytes', async () => {
        const ctx = agent.ctx({ state: new Map() })
        expect(await run(ioStats, ctx)).toEqual({})
        const work = connect(url)
        await work`CREATE TABLE t_io (v int)`
        await work`INSERT INTO t_io SELECT g FROM generate_series(1, 5000) g`
        await work`SELECT count(*) FROM t_io`
        await finish(work, major)
        let rows: BatchSections['io_stats'] = []
        await eventually('client backend I/O in pg_stat_io', async () => {
          rows = (await run(ioStats, ctx)).io_stats!
          return rows.some(
            (r) => r.backend_type === 'client backend' && r.object === 'relation' && (r.counters.hits ?? 0) > 0,
          )
            ? rows
            : undefined
        })
        expect(rows.length).toBeGreaterThan(0)
        for (const row of rows!) {
          expect(sorted(Object.keys(row.counters))).toEqual(
            sorted([
              'reads',
              'writes',
              'extends',
              'hits',
              'evictions',
              'reuses',
              'fsyncs',
              'writebacks',
              'read_time_ms',
              'write_time_ms',
              'extend_time_ms',
              'fsync_time_ms',
              'writeback_time_ms',
              'read_bytes',
              'write_bytes',
              'extend_bytes',
            ]),
          )
          expect(Object.values(row.counters).some((v) => v !== null && v !== 0)).toBe(true)
          for (const op of ['read', 'write', 'extend'] as const) {
            const ops = row.counters[`${op}s`]
            const bytes = row.counters[`${op}_bytes`]
            if (ops === null || ops === undefined) expect(bytes).toBeNull()
            // Before 18 an operation is one block; 18 counts bytes itself (combined reads, WAL writes).
            else if (major < 18) expect(bytes).toBe(ops * 8192)
            else expect(bytes! >= (ops > 0 ? 1 : 0) && (ops > 0 || bytes === 0)).toBe(true)
          }
        }
      })
    } else {
      test('io_stats needs PostgreSQL 16 (skipped here by its minimum version)', () => {
        expect(ioStats.minVersion! > major).toBe(true)
        if (major < 14) expect(walStats.minVersion! > major).toBe(true)
      })
    }

    test('database_stats: gauges first, then exact transaction counts', async () => {
      const server = await sharedPostgres(major)
      const dbUrl = await server.freshDatabase()
      const admin = connect(server.url())
      const dbAgent = await agentFor(dbUrl)
      const ctx = dbAgent.ctx({ state: new Map() })
      const gauges = [
        'numbackends',
        'database_size_bytes',
        'connections_total',
        'max_connections',
        'superuser_reserved_connections',
        'xid_age',
        'mxid_age',
        'oldest_xact_age_s',
        'fsync_on',
        'track_counts_on',
        'full_page_writes_on',
        'autovacuum_on',
        'track_io_timing_on',
        'pg_stat_statements_installed',
        'autovacuum_freeze_max_age',
        'autovacuum_multixact_freeze_max_age',
        'xmin_backend_age',
        'xmin_backend_pid',
        'xmin_backend_xact_age_s',
        'xmin_slot_age',
        'prepared_xacts',
        'xmin_prepared_age',
        'xmin_prepared_age_s',
      ]
      const counters = [
        'xact_commit',
        'xact_rollback',
        'blks_read',
        'blks_hit',
        'tup_returned',
        'tup_fetched',
        'tup_inserted',
        'tup_updated',
        'tup_deleted',
        'conflicts',
        'temp_files',
        'temp_bytes',
        'deadlocks',
      ]
      const first = (await run(databaseStats, ctx)).database_stats!
      expect(sorted(Object.keys(first))).toEqual(sorted(gauges))
      const [settings] =
        await admin`SELECT current_setting('max_connections')::int AS max, current_setting('fsync') AS fsync`
      expect(first).toMatchObject({
        max_connections: settings!.max,
        fsync_on: settings!.fsync === 'on' ? 1 : 0,
        track_counts_on: 1,
        full_page_writes_on: 1,
        autovacuum_on: 1,
        track_io_timing_on: 0,
        pg_stat_statements_installed: 0,
        oldest_xact_age_s: 0,
        superuser_reserved_connections: 3,
        autovacuum_freeze_max_age: 200_000_000,
        autovacuum_multixact_freeze_max_age: 400_000_000,
        // No slots, no prepared transactions (max_prepared_transactions is 0 here).
        xmin_slot_age: null,
        prepared_xacts: 0,
        xmin_prepared_age: null,
        xmin_prepared_age_s: null,
      })
      expect(first.numbackends).toBeGreaterThanOrEqual(1)
      expect(first.connections_total).toBeGreaterThanOrEqual(first.numbackends!)
      expect(first.database_size_bytes).toBeGreaterThan(1024 * 1024)
      expect(first.xid_age).toBeGreaterThan(0)
      expect(first.mxid_age).toBeGreaterThanOrEqual(0)

      const work = connect(dbUrl)
      let commits = 0
      await work`CREATE TABLE d (v int)`
      await work`INSERT INTO d SELECT g FROM generate_series(1, 42) g`
      commits += 2
      for (let i = 0; i < 20; i++) await work`SELECT 1`
      commits += 20
      for (let i = 0; i < 3; i++) {
        await work`BEGIN`
        await work`SELECT 1`
        await work`ROLLBACK`
      }
      await work`CREATE EXTENSION pg_stat_statements`
      commits += 1
      if (major >= 15) commits += 1 // finish() flushes with one more statement
      await finish(work, major)
      await eventually('the workload in pg_stat_database', async () => {
        const [row] = await admin`SELECT xact_rollback FROM pg_stat_database WHERE datname = ${ctx.database}`
        return Number(row?.xact_rollback) === 3 ? row : undefined
      })

      const second = (await run(databaseStats, ctx)).database_stats!
      expect(sorted(Object.keys(second))).toEqual(sorted([...gauges, ...counters]))
      expect(second.xact_rollback).toBe(3)
      // The agent's own statements (and an autovacuum visit) commit too: at most a few more.
      expect(second.xact_commit).toBeGreaterThanOrEqual(commits)
      expect(second.xact_commit).toBeLessThanOrEqual(commits + 5)
      expect(second.tup_inserted).toBeGreaterThanOrEqual(42)
      expect(second.blks_hit).toBeGreaterThan(0)
      expect(second.deadlocks).toBe(0)
      expect(second.pg_stat_statements_installed).toBe(1)
      // The size is read again once rows were written (a table created and filled), and kept while none
      // are (an autovacuum's ANALYZE writes pg_statistic rows: then it is read again).
      expect(second.database_size_bytes).toBeGreaterThan(first.database_size_bytes!)
      const [size] = await admin<{ n: string }[]>`SELECT pg_database_size(${ctx.database})::text AS n`
      expect([second.database_size_bytes, Number(size!.n)]).toContain(
        (await run(databaseStats, ctx)).database_stats!.database_size_bytes,
      )

      // A transaction with a transaction ID, left open while 5 more are assigned: it holds the xmin horizon.
      const open = connect(dbUrl)
      await open`BEGIN`
      const [{ pid: openPid }] = (await open`SELECT pg_backend_pid() AS pid, txid_current()`) as unknown as [
        { pid: number },
      ]
      for (let i = 0; i < 5; i++) await admin`SELECT txid_current()`
      await Bun.sleep(300)
      const third = (await run(databaseStats, ctx)).database_stats!
      expect(third.oldest_xact_age_s).toBeGreaterThanOrEqual(0.25)
      expect(third.oldest_xact_age_s).toBeLessThan(30)
      expect(third.xmin_backend_pid).toBe(openPid)
      expect(third.xmin_backend_age).toBeGreaterThanOrEqual(6)
      expect(third.xmin_backend_age).toBeLessThan(100)
      expect(third.xmin_backend_xact_age_s).toBeGreaterThanOrEqual(0.25)
      expect(third.xmin_backend_xact_age_s).toBeLessThan(30)
      await open`ROLLBACK`

      // pg_stat_reset() moves stats_reset: the next deltas are the counts since the reset, never negative.
      const [{ reset: before }] =
        (await admin`SELECT stats_reset AS reset FROM pg_stat_database WHERE datname = ${ctx.database}`) as unknown as [
          { reset: Date | null },
        ]
      await open`SELECT pg_stat_reset()`
      await eventually('the statistics reset', async () => {
        const [row] = await admin`SELECT stats_reset AS reset FROM pg_stat_database WHERE datname = ${ctx.database}`
        return row?.reset && row.reset.getTime() !== before?.getTime() ? row : undefined
      })
      const afterReset = (await run(databaseStats, ctx)).database_stats!
      expect(afterReset.xact_rollback).toBe(0)
      expect(afterReset.xact_commit).toBeLessThan(10)
      for (const key of counters) expect(afterReset[key]).toBeGreaterThanOrEqual(0)
      await Promise.all([end(open), end(admin), end(dbAgent.sql)])
    })

    test('replication: a primary without replicas, then with a physical slot', async () => {
      expect(
        await run(replication, agent.ctx({ settings: { collectExplainPlans: false, collectReplication: false } })),
      ).toEqual({})
      expect((await run(replication, agent.ctx())).replication).toEqual({
        is_replica: false,
        replication_lag_bytes: null,
        replication_lag_seconds: null,
        upstream_host: null,
        replicas: [],
        slots: [],
      })
      const slot = 'dbm_test_s1'
      await agent.sql`SELECT pg_create_physical_replication_slot(${slot}, true)`
      try {
        await agent.sql`CREATE TABLE t_slot AS SELECT g FROM generate_series(1, 1000) g`
        const status = (await run(replication, agent.ctx())).replication!
        expect(status.slots).toEqual([
          {
            slot_name: slot,
            slot_type: 'physical',
            active: false,
            lag_bytes: expect.any(Number),
            wal_status: 'reserved',
          },
        ])
        expect(status.slots[0]!.lag_bytes).toBeGreaterThan(1000)
      } finally {
        await agent.sql`SELECT pg_drop_replication_slot(${slot})`
      }
    })
  })
}

describe('PostgreSQL 17 streaming replica', () => {
  let replica: Standby | undefined
  let replicaUrl: string
  let primary: postgres.Sql

  beforeAll(async () => {
    const server = await sharedPostgres(17)
    primary = connect(server.url())
    replica = await startStandby(server, primary)
    replicaUrl = replica.url
  }, 30_000)

  afterAll(async () => {
    await replica?.stop()
  })

  test('the primary lists the replica; the replica reports its lag and upstream', async () => {
    const onPrimary = await agentFor((await sharedPostgres(17)).url())
    const fromPrimary = (await run(replication, onPrimary.ctx())).replication!
    expect(fromPrimary.is_replica).toBe(false)
    expect(fromPrimary.replicas.length).toBe(1)
    const [standby] = fromPrimary.replicas
    expect(standby).toMatchObject({
      application_name: 'dbm_replica',
      client_addr: '127.0.0.1',
      state: 'streaming',
      sync_state: 'async',
    })
    expect(standby!.lag_bytes).toBeGreaterThanOrEqual(0)
    for (const lag of [standby!.write_lag_ms, standby!.flush_lag_ms, standby!.replay_lag_ms]) {
      if (lag !== null) expect(lag).toBeGreaterThanOrEqual(0)
    }

    const onReplica = await agentFor(replicaUrl)
    const status = await eventually('the replica to replay the primary', async () => {
      const s = (await run(replication, onReplica.ctx())).replication!
      return s.replication_lag_bytes === 0 ? s : undefined
    })
    expect(status).toEqual({
      is_replica: true,
      replication_lag_bytes: 0,
      replication_lag_seconds: 0,
      upstream_host: '127.0.0.1',
      replicas: [],
      slots: [],
    })
    // The other collectors run on a replica too.
    for (const collector of [activity, locks, tables, indexes, bgwriter, walStats, ioStats, databaseStats]) {
      await run(collector, onReplica.ctx())
    }
    await Promise.all([end(onPrimary.sql), end(onReplica.sql)])
  })
})
