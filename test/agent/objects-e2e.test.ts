// Locks, active queries, tables and indexes end to end: the real agent against a real PostgreSQL 17,
// read back through the API. Two sessions contending for a row show the waiter blocked by the holder;
// a table read only by sequential scans shows exactly those scans as deltas; an index over 1 MB that
// nothing uses is listed as unused, while the primary key beside it is not. Every counter of the table
// family (src/shared/families.ts) is checked against pg_stat_user_tables.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { TABLE_COUNTERS } from '../../src/shared/families.ts'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

const SEQ_SCANS = 5
const SCANNED_ROWS = 1000
const MOVED_ROWS = 2000

let pg: PostgresServer
let dsn: string
let setup: postgres.Sql
let dir: string

beforeAll(async () => {
  pg = await startPostgres(17)
  dsn = await pg.freshDatabase()
  setup = postgres(dsn, { max: 1, onnotice: () => {} })
  await setup`CREATE TABLE contended (id int PRIMARY KEY, v int)`
  await setup`INSERT INTO contended VALUES (1, 0)`
  await setup`CREATE TABLE scanned (id int, payload text)`
  await setup`INSERT INTO scanned SELECT g, 'row ' || g FROM generate_series(1, ${SCANNED_ROWS}) g`
  await setup`CREATE TABLE wide (id int PRIMARY KEY, tag text)`
  await setup`INSERT INTO wide SELECT g, 'tag-' || g FROM generate_series(1, 100000) g`
  await setup`CREATE INDEX wide_tag_idx ON wide (tag)`
  dir = mkdtempSync(join(tmpdir(), 'dbm-objects-e2e-'))
})

afterAll(async () => {
  await setup?.end()
  await pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('objects through the agent (PostgreSQL 17)', () => {
  let rig: AgentRig

  beforeAll(async () => {
    rig = await startAgentRig(dsn, 'shop', dir)
    // The first cycle is the baseline (no deltas); the workloads below land in later ones.
    await until('a first tables sample', async () => ((await rig.api('/tables')).length > 0 ? true : undefined))
  })
  afterAll(async () => {
    await rig?.stop()
  })

  test('two sessions contending for a row: the waiter is blocked by the holder in /locks and /active', async () => {
    const holder = postgres(dsn, { max: 1, onnotice: () => {} })
    const waiter = postgres(dsn, { max: 1, onnotice: () => {} })
    try {
      const pidOf = async (sql: postgres.Sql) => (await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
      const holderPid = await pidOf(holder)
      const waiterPid = await pidOf(waiter)
      await holder.unsafe('BEGIN')
      await holder`UPDATE contended SET v = 1 WHERE id = 1`
      const blocked = waiter`UPDATE contended SET v = 2 WHERE id = 1 /* dbm-waiter */`.execute()

      const lock = await until('the waiting lock', async () =>
        (await rig.api('/locks')).find((l: any) => l.pid === waiterPid && !l.granted && l.blocked_by_pid === holderPid),
      )
      expect(lock).toMatchObject({
        granted: false,
        blocked_by_pid: holderPid,
        relation_name: 'public.contended',
        query_text: expect.stringContaining('dbm-waiter'),
      })
      // Ungranted locks come first.
      const locks = await rig.api('/locks')
      expect(locks[0].granted).toBe(false)
      expect(locks.some((l: any) => l.pid === holderPid && l.granted)).toBe(true)

      const session = await until('the blocked session', async () =>
        (await rig.api('/active')).find((a: any) => a.pid === waiterPid && a.blocking_pids.includes(holderPid)),
      )
      expect(session).toMatchObject({
        state: 'active',
        wait_event_type: 'Lock',
        blocking_pids: [holderPid],
        query_text: expect.stringContaining('dbm-waiter'),
      })
      expect(session.duration_ms).toBeGreaterThanOrEqual(0)

      await holder.unsafe('ROLLBACK')
      await blocked
    } finally {
      await holder.end()
      await waiter.end()
    }
  })

  test('a table read only by sequential scans shows them as deltas', async () => {
    // A session of its own: a backend reports its statistics when it exits (an idle one waits up to 10 s).
    const reader = postgres(dsn, { max: 1, onnotice: () => {} })
    for (let i = 0; i < SEQ_SCANS; i++) await reader`SELECT count(*) FROM scanned WHERE payload = 'none'`
    await reader.end()
    const detail = await until('the scans in the timeseries', async () => {
      const d = await rig.api('/tables/public/scanned')
      const sum = d.timeseries.reduce((s: number, p: any) => s + (p.seq_scan ?? 0), 0)
      return sum === SEQ_SCANS ? d : undefined
    })
    const points = detail.timeseries as any[]
    expect(points.reduce((s, p) => s + (p.seq_tup_read ?? 0), 0)).toBe(SEQ_SCANS * SCANNED_ROWS)
    expect(points.every((p) => p.idx_scan === null)).toBe(true)
    expect(detail).toMatchObject({
      schema_name: 'public',
      table_name: 'scanned',
      seq_scan: SEQ_SCANS,
      idx_scan: null,
      has_primary_key: false,
    })
    expect(detail.table_size_bytes).toBeGreaterThan(0)
    const bySeqScans = await rig.api('/tables?sort_by=seq_scans')
    expect(bySeqScans[0].table_name).toBe('scanned')
  })

  test('an index over 1 MB that nothing scans is unused; the primary key beside it is not', async () => {
    const unused = await until('the unused index', async () => {
      const list = await rig.api('/indexes/unused')
      return list.some((i: any) => i.index_name === 'wide_tag_idx') ? list : undefined
    })
    expect(unused.map((i: any) => i.index_name)).toEqual(['wide_tag_idx'])
    expect(unused[0]).toMatchObject({
      schema_name: 'public',
      table_name: 'wide',
      idx_scan: 0,
      is_unique: false,
      is_primary: false,
      is_valid: true,
      index_def: 'CREATE INDEX wide_tag_idx ON public.wide USING btree (tag)',
    })
    expect(unused[0].size_bytes).toBeGreaterThan(1_048_576)
    const pkey = (await rig.api('/indexes')).find((i: any) => i.index_name === 'wide_pkey')
    expect(pkey).toMatchObject({ is_primary: true, is_unique: true, idx_scan: 0 })
    expect(pkey.size_bytes).toBeGreaterThan(1_048_576)
    const detail = await rig.api('/indexes/public/wide_tag_idx')
    expect(detail.timeseries.length).toBeGreaterThan(0)
    expect(detail.timeseries.every((p: any) => p.idx_scan === null || p.idx_scan === 0)).toBe(true)
  })

  test("every counter of the table family is PostgreSQL's own (n_tup_newpage_upd, added to the family in one line, included)", async () => {
    // Sessions of their own, ended: a backend's statistics are flushed when it exits.
    const session = async (work: (sql: postgres.Sql) => Promise<unknown>) => {
      const sql = postgres(dsn, { max: 1, onnotice: () => {} })
      try {
        return await work(sql)
      } finally {
        await sql.end()
      }
    }
    await session(async (sql) => {
      await sql`CREATE TABLE moved (id int PRIMARY KEY, pad text) WITH (fillfactor = 100)`
      await sql`INSERT INTO moved SELECT g, 'x' FROM generate_series(1, ${MOVED_ROWS}) g`
    })
    // The agent's first sample of the table is its baseline; the updates land in later samples as deltas.
    await until('a first sample of moved', async () =>
      (await rig.api('/tables')).some((t: any) => t.table_name === 'moved') ? true : undefined,
    )
    // Full pages and longer rows: updates cannot stay on their page, so they move to a new one (not HOT).
    await session((sql) => sql`UPDATE moved SET pad = repeat('y', 200)`)
    const counters = TABLE_COUNTERS.join(', ')
    const truth = await until('the updates in pg_stat_user_tables', async () => {
      const [row] = (await session((sql) =>
        sql.unsafe(`SELECT ${counters} FROM pg_stat_user_tables WHERE relname = 'moved'`),
      )) as Record<string, unknown>[]
      return Number(row!.n_tup_upd) === MOVED_ROWS ? row! : undefined
    })
    const expected = Object.fromEntries(
      TABLE_COUNTERS.map((c) => [c, truth[c] === null ? null : Number(truth[c])]),
    ) as Record<string, number>
    expect(expected.n_tup_newpage_upd).toBeGreaterThan(0)
    expect(expected.n_tup_newpage_upd! + expected.n_tup_hot_upd!).toBeLessThanOrEqual(MOVED_ROWS)

    // the latest row: PostgreSQL's cumulative counters, every one of the family
    const latest = await until('the updates in /tables', async () => {
      const t = (await rig.api('/tables')).find((x: any) => x.table_name === 'moved')
      return t?.n_tup_upd === MOVED_ROWS ? t : undefined
    })
    expect(Object.fromEntries(TABLE_COUNTERS.map((c) => [c, latest[c]]))).toEqual(expected)
    // the timeseries: the updates as deltas after the baseline, newpage ones included
    const detail = await until('the updates in the timeseries', async () => {
      const d = await rig.api('/tables/public/moved')
      return d.timeseries.reduce((sum: number, p: any) => sum + (p.n_tup_upd ?? 0), 0) === MOVED_ROWS ? d : undefined
    })
    const summed = (c: string) => detail.timeseries.reduce((sum: number, p: any) => sum + (p[c] ?? 0), 0)
    expect({ n_tup_newpage_upd: summed('n_tup_newpage_upd'), n_tup_hot_upd: summed('n_tup_hot_upd') }).toEqual({
      n_tup_newpage_upd: expected.n_tup_newpage_upd,
      n_tup_hot_upd: expected.n_tup_hot_upd,
    })
  })
})
