// The PgHero-parity collectors (constraints, connections, progress, bloat) against real PostgreSQL 13
// to 18, with schema, table, constraint and application names carrying quotes, newlines, comment ends
// and unicode. Each expectation is what PostgreSQL itself says: pg_constraint, pg_stat_activity,
// pg_stat_progress_create_index and _vacuum (a CREATE INDEX CONCURRENTLY and a VACUUM held in a phase by
// a lock, never by timing), and for bloat the space a rewrite (VACUUM FULL) gives back and
// pgstattuple's free space.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import postgres from 'postgres'
import { bloat, dataWidth } from '../../src/agent/collectors/postgres/bloat.ts'
import { connections } from '../../src/agent/collectors/postgres/connections.ts'
import { constraints } from '../../src/agent/collectors/postgres/constraints.ts'
import { percentOf, progress } from '../../src/agent/collectors/postgres/progress.ts'
import type { BatchSections, PostgresCollector, PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { IngestBatch } from '../../src/shared/wire.ts'
import { postgresMajors, sharedPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(60_000)

/** Hostile names: a quote of each kind, a newline, a comment end, non-ASCII letters and an emoji. */
export const SCHEMA = 'we"ird\n*/ schéma'
export const TABLE = 'ta\'ble"\n*/ ünï 🐘'
const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`
const QUALIFIED = `${quoteIdent(SCHEMA)}.${quoteIdent(TABLE)}`

const sessions: postgres.Sql[] = []
function connect(url: string, app = 'dbm-parity-test', max = 1): postgres.Sql {
  const sql = postgres(url, { max, onnotice: () => {}, fetch_types: false, connection: { application_name: app } })
  sessions.push(sql)
  return sql
}

afterAll(async () => {
  await Promise.all(sessions.map((s) => s.end({ timeout: 1 }).catch(() => {})))
})

beforeAll(async () => {
  await Promise.all(postgresMajors.map((major) => sharedPostgres(major)))
}, 120_000)

function contextFor(sql: postgres.Sql, major: number): PostgresContext {
  return {
    name: 'test-db',
    database: 'test',
    sql,
    versionNum: major * 10_000,
    major,
    now: Date.now(),
    settings: { collectExplainPlans: false, collectReplication: false },
    state: new Map(),
    notes: new Map(),
    log: createLogger('error', () => {}),
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

test('percentages: done of total to one decimal, none without a positive total', () => {
  expect([
    percentOf(0, 1),
    percentOf(1, 3),
    percentOf(5, 5),
    percentOf(7, 5),
    percentOf(3, 0),
    percentOf(null, 5),
    percentOf(2, null),
  ]).toEqual([0, 33.3, 100, 100, null, null, null])
})

test('row data width: columns padded to their alignment, short varlenas unaligned, nulls weighted', () => {
  // int4 then int8: 4 bytes of padding before the int8.
  expect(
    dataWidth([
      [4, 0, 4, 'i'],
      [8, 0, 8, 'd'],
    ]),
  ).toBe(16)
  // A 33-byte text (1-byte header, unaligned) then an int4 padded to 36, then 4.
  expect(
    dataWidth([
      [33, 0, -1, 'i'],
      [4, 0, 4, 'i'],
    ]),
  ).toBe(40)
  // A column null half the time counts half.
  expect(dataWidth([[8, 0.5, 8, 'd']])).toBe(4)
})

for (const major of postgresMajors) {
  describe(`PostgreSQL ${major}`, () => {
    let url: string
    let admin: postgres.Sql
    let agent: postgres.Sql

    beforeAll(async () => {
      url = await (await sharedPostgres(major)).freshDatabase()
      admin = connect(url, 'dbm-parity-admin', 2)
      agent = connect(url, 'dbm-parity-agent', 2)
      await admin.unsafe(`CREATE SCHEMA ${quoteIdent(SCHEMA)}`)
    })

    test('constraints: the NOT VALID ones with their type and definition, as pg_constraint has them; validated ones not', async () => {
      const parent = `${quoteIdent(SCHEMA)}.${quoteIdent('pa"rent\n*/')}`
      const check = 'ck"\n*/ ü 🐘'
      const fkey = "fk'\n*/"
      await admin.unsafe(`CREATE TABLE ${parent} (id int PRIMARY KEY)`)
      await admin.unsafe(`CREATE TABLE ${QUALIFIED} (id int, parent_id int, qty int)`)
      await admin.unsafe(`INSERT INTO ${parent} VALUES (1)`)
      await admin.unsafe(`INSERT INTO ${QUALIFIED} VALUES (1, 1, -5)`)
      await admin.unsafe(`ALTER TABLE ${QUALIFIED} ADD CONSTRAINT ${quoteIdent(check)} CHECK (qty > 0) NOT VALID`)
      await admin.unsafe(
        `ALTER TABLE ${QUALIFIED} ADD CONSTRAINT ${quoteIdent(fkey)} FOREIGN KEY (parent_id) REFERENCES ${parent} (id) NOT VALID`,
      )
      await admin.unsafe(`ALTER TABLE ${QUALIFIED} ADD CONSTRAINT valid_one CHECK (id > 0) NOT VALID`)
      await admin.unsafe(`ALTER TABLE ${QUALIFIED} VALIDATE CONSTRAINT valid_one`)

      const { invalid_constraints } = await run(constraints, contextFor(agent, major))
      const truth = await admin`
        SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE NOT convalidated AND conrelid = ${`${QUALIFIED}`}::regclass ORDER BY conname`
      expect(invalid_constraints).toEqual(
        truth.map((t) => ({
          schema_name: SCHEMA,
          table_name: TABLE,
          constraint_name: t.conname,
          constraint_type: t.conname === check ? 'check' : 'foreign key',
          definition: t.def,
        })),
      )
      expect(invalid_constraints!.map((c) => c.constraint_name).sort()).toEqual([check, fkey].sort())
      expect(invalid_constraints!.find((c) => c.constraint_name === check)!.definition).toBe(
        'CHECK ((qty > 0)) NOT VALID',
      )

      // Validated (the bad row fixed first), it is gone from the list.
      await admin.unsafe(`UPDATE ${QUALIFIED} SET qty = 5`)
      await admin.unsafe(`ALTER TABLE ${QUALIFIED} VALIDATE CONSTRAINT ${quoteIdent(check)}`)
      const after = (await run(constraints, contextFor(agent, major))).invalid_constraints!
      expect(after.map((c) => c.constraint_name)).toEqual([fkey])
    })

    test('connections: counts by database, user, application, client address and state equal pg_stat_activity', async () => {
      const apps = { idle: 'idle "app"\n*/ ü', waiting: "tx'app", busy: 'busy app 🐘' }
      const idle = [0, 1, 2].map(() => connect(url, apps.idle))
      await Promise.all(idle.map((s) => s`SELECT 1`))
      const inTx = connect(url, apps.waiting)
      await inTx.unsafe('BEGIN')
      await inTx.unsafe('SELECT 1')
      const busy = [0, 1].map(() => connect(url, apps.busy))
      const sleeping = busy.map((s) => s`SELECT pg_sleep(60)`.catch(() => {}))
      try {
        const db = (await admin`SELECT current_database() AS d`)[0]!.d as string
        const truthOf = async () =>
          (
            await admin`
            SELECT application_name, state, count(*)::int AS n FROM pg_stat_activity
            WHERE datname = ${db} AND backend_type = 'client backend' AND application_name NOT LIKE 'dbm-parity-%'
            GROUP BY application_name, state ORDER BY application_name, state`
          ).map((r) => ({ application_name: r.application_name, state: r.state, count: r.n }))
        // The sleeping sessions show as active once their statements started.
        await until('the sleepers to be active', async () =>
          (await truthOf()).some((r) => r.state === 'active' && r.count === 2) ? true : undefined,
        )
        const truth = await truthOf()
        const found = (await run(connections, contextFor(agent, major))).connections!
        const mine = found
          .filter((g) => g.database === db && !g.application_name!.startsWith('dbm-parity-'))
          .map((g) => ({ application_name: g.application_name, state: g.state, count: g.count }))
          .sort((a, b) =>
            a.application_name! < b.application_name! ? -1 : a.application_name! > b.application_name! ? 1 : 0,
          )
        expect(mine).toEqual(truth)
        expect(truth.map((t) => [t.state, t.count])).toEqual([
          ['active', 2],
          ['idle', 3],
          ['idle in transaction', 1],
        ])
        for (const g of found.filter((g) => g.database === db)) {
          expect(g.user).toBe('postgres')
          expect(g.client_addr).toBe('127.0.0.1')
        }
      } finally {
        await admin`SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'`
        await Promise.all(sleeping)
        await inTx.unsafe('ROLLBACK')
      }
    })

    test('progress: CREATE INDEX CONCURRENTLY held in "waiting for old snapshots" by an open transaction, as the view shows it', async () => {
      const table = `${quoteIdent(SCHEMA)}.${quoteIdent('big "one"\n*/ ü')}`
      const index = 'idx "new"\n*/ 🐘'
      await admin.unsafe(`CREATE TABLE ${table} (id int, pad text)`)
      await admin.unsafe(`INSERT INTO ${table} SELECT g, repeat('p', 50) FROM generate_series(1, 20000) g`)
      const holder = connect(url, 'dbm-parity-holder')
      await holder.unsafe('BEGIN ISOLATION LEVEL REPEATABLE READ')
      const [{ pid: holderPid }] = (await holder.unsafe('SELECT pg_backend_pid() AS pid')) as unknown as [
        { pid: number },
      ]
      await holder.unsafe('SELECT 1')
      const builder = connect(url, 'dbm-parity-builder')
      // postgres.js sends a query once it is awaited or then-ed.
      const building = builder
        .unsafe(`CREATE INDEX CONCURRENTLY ${quoteIdent(index)} ON ${table} (id)`)
        .then(() => undefined)
      try {
        const [view] = await until('the build to wait for old snapshots', async () => {
          const rows = await admin`
            SELECT p.pid, p.command, p.phase, p.lockers_total::int, p.lockers_done::int, p.current_locker_pid::int, a.wait_event_type, a.wait_event
            FROM pg_stat_progress_create_index p JOIN pg_stat_activity a USING (pid) WHERE p.datname = current_database()`
          // Settled on the holder: a transaction of this test's own connection may be a locker for a moment first.
          return rows[0]?.phase === 'waiting for old snapshots' &&
            rows[0]?.wait_event &&
            rows[0]?.current_locker_pid === holderPid
            ? rows
            : undefined
        })
        // The session the build waits for, as pg_stat_activity shows it: the holder's open transaction.
        const [locker] = await admin`
          SELECT pid, usename, application_name, host(client_addr) AS client_addr, backend_type, state, xact_start, state_change, query
          FROM pg_stat_activity WHERE pid = ${view!.current_locker_pid}`
        const found = (await run(progress, contextFor(agent, major))).progress!
        expect(found.length).toBe(1)
        const [entry] = found
        expect({ ...entry!, started_at: null }).toEqual({
          pid: view!.pid,
          command: 'CREATE INDEX CONCURRENTLY',
          phase: 'waiting for old snapshots',
          schema_name: SCHEMA,
          table_name: 'big "one"\n*/ ü',
          index_name: index,
          unit: 'lockers waited for',
          done: view!.lockers_done,
          total: view!.lockers_total,
          percent: percentOf(view!.lockers_done, view!.lockers_total),
          lockers_done: view!.lockers_done,
          lockers_total: view!.lockers_total,
          current_locker_pid: view!.current_locker_pid,
          wait_event_type: view!.wait_event_type,
          wait_event: view!.wait_event,
          blocker: {
            pid: locker!.pid,
            via: 'current_locker_pid',
            user: locker!.usename,
            application_name: 'dbm-parity-holder',
            client_addr: locker!.client_addr,
            backend_type: locker!.backend_type,
            state: 'idle in transaction',
            xact_start: (locker!.xact_start as Date).getTime(),
            state_change: (locker!.state_change as Date).getTime(),
            query_text: locker!.query,
          },
          started_at: null,
        })
        expect(view!.lockers_total).toBeGreaterThanOrEqual(1)
        const [{ started }] =
          (await admin`SELECT query_start AS started FROM pg_stat_activity WHERE pid = ${view!.pid}`) as unknown as [
            { started: Date },
          ]
        expect(entry!.started_at).toBe(started.getTime())
      } finally {
        await holder.unsafe('COMMIT')
        await building
      }
      // (An autovacuum of the table may be running by now: only the build must be gone.)
      expect(
        (await run(progress, contextFor(agent, major))).progress!.filter((e) => !e.command.startsWith('autovacuum')),
      ).toEqual([])
    })

    test('progress: VACUUM (FREEZE) held in "scanning heap" by a cursor pinning a page, with the view\'s block counts', async () => {
      const table = `${quoteIdent(SCHEMA)}.${quoteIdent('vac "t"\n*/ é')}`
      await admin.unsafe(`CREATE TABLE ${table} (id int, pad text)`)
      await admin.unsafe(`INSERT INTO ${table} SELECT g, repeat('v', 100) FROM generate_series(1, 20000) g`)
      // An open cursor keeps a pin on the page it stands on; an aggressive VACUUM must freeze that page's rows and waits for the pin to go.
      const holder = connect(url, 'dbm-parity-pin')
      await holder.unsafe('BEGIN')
      await holder.unsafe(`DECLARE pin CURSOR FOR SELECT * FROM ${table}`)
      await holder.unsafe('FETCH 1 FROM pin')
      const vacuumer = connect(url, 'dbm-parity-vacuum')
      const vacuuming = vacuumer.unsafe(`VACUUM (FREEZE) ${table}`).then(() => undefined)
      try {
        const view = await until('the vacuum to wait for the pin', async () => {
          const [row] = await admin`
            SELECT p.pid, p.phase, p.heap_blks_scanned::int AS scanned, p.heap_blks_total::int AS total, a.wait_event_type, a.wait_event
            FROM pg_stat_progress_vacuum p JOIN pg_stat_activity a USING (pid) WHERE p.datname = current_database() AND p.relid = to_regclass(${table})`
          return row?.wait_event === 'BufferPin' ? row : undefined
        })
        // This table's: an autovacuum of an earlier test's table may be running too (seen in CI on 13).
        const found = (await run(progress, contextFor(agent, major))).progress!.filter(
          (e) => e.table_name === 'vac "t"\n*/ é',
        )
        expect(found.map((e) => ({ ...e, started_at: null }))).toEqual([
          {
            pid: view.pid,
            command: 'VACUUM',
            phase: 'scanning heap',
            schema_name: SCHEMA,
            table_name: 'vac "t"\n*/ é',
            index_name: null,
            unit: 'heap blocks scanned',
            done: view.scanned,
            total: view.total,
            percent: percentOf(view.scanned, view.total),
            wait_event_type: view.wait_event_type,
            wait_event: 'BufferPin',
            // a buffer pin is no lock: pg_blocking_pids() names no one, and neither does dbm
            blocker: null,
            started_at: null,
          },
        ])
        expect(view.phase).toBe('scanning heap')
        expect(view.total).toBeGreaterThan(100)
      } finally {
        await holder.unsafe('COMMIT')
        await vacuuming
      }
    })
  })
}

/** pgstattuple's free space plus dead tuples' bytes: what holds no live row. */
async function unusedBytes(sql: postgres.Sql, relation: string): Promise<number> {
  const [row] = await sql.unsafe(
    `SELECT (free_space + dead_tuple_len)::float8 AS unused FROM pgstattuple('${relation.replaceAll("'", "''")}'::regclass)`,
  )
  return row!.unused as number
}

for (const major of [13, 17, 18] as const) {
  test(`bloat on PostgreSQL ${major}: after deleting rows and a plain VACUUM, the estimate is within 5 % of the table's size of what VACUUM FULL gives back and of pgstattuple; after VACUUM FULL, under 5 %`, async () => {
    const url = await (await sharedPostgres(major)).freshDatabase()
    const sql = connect(url, 'dbm-parity-bloat', 2)
    await sql`CREATE EXTENSION pgstattuple`
    await sql.unsafe(`CREATE SCHEMA ${quoteIdent(SCHEMA)}`)
    const index = 'ix "b"\n*/ é'
    // Mixed alignment (int4, text, timestamptz, numeric), varying widths and nulls; notes distinct, so that
    // btree deduplication (which the estimate does not model) has nothing to merge in the index.
    await sql.unsafe(
      `CREATE TABLE ${QUALIFIED} (id int PRIMARY KEY, note text, at timestamptz, amount numeric, flag boolean)`,
    )
    await sql.unsafe(
      `INSERT INTO ${QUALIFIED} SELECT g, CASE WHEN g % 5 = 0 THEN NULL ELSE repeat('n', g % 90) || g END, now(), g / 7.0, g % 2 = 0 FROM generate_series(1, 150000) g`,
    )
    await sql.unsafe(`CREATE INDEX ${quoteIdent(index)} ON ${QUALIFIED} (note)`)
    await sql.unsafe(`VACUUM ANALYZE ${QUALIFIED}`)
    const estimate = async () => {
      const rows = (await run(bloat, contextFor(sql, major))).bloat!
      const of = (name: string | null) =>
        rows.find((r) => r.schema_name === SCHEMA && r.table_name === TABLE && r.index_name === name)!
      return { table: of(null), index: of(index) }
    }
    const size = async (rel: string) =>
      Number((await sql.unsafe(`SELECT pg_relation_size('${rel.replaceAll("'", "''")}'::regclass) AS s`))[0]!.s)
    const indexRel = `${quoteIdent(SCHEMA)}.${quoteIdent(index)}`

    // Fresh: next to nothing.
    const fresh = await estimate()
    expect(fresh.table.bloat_bytes).toBeLessThan(0.05 * fresh.table.size_bytes)
    expect(fresh.index.bloat_bytes).toBeLessThan(0.05 * fresh.index.size_bytes)

    // Two rows of three deleted, spread over every page; a plain VACUUM frees the space inside the pages but keeps them.
    await sql.unsafe(`DELETE FROM ${QUALIFIED} WHERE id % 3 <> 0`)
    await sql.unsafe(`VACUUM ANALYZE ${QUALIFIED}`)
    const bloated = await estimate()
    const tableBefore = await size(QUALIFIED)
    const indexBefore = await size(indexRel)
    expect(bloated.table.size_bytes).toBe(tableBefore)
    expect(bloated.table.live_rows).toBe(50_000)
    const unusedBefore = await unusedBytes(sql, QUALIFIED)

    await sql.unsafe(`VACUUM FULL ${QUALIFIED}`)
    await sql.unsafe(`ANALYZE ${QUALIFIED}`)
    const reclaimedTable = tableBefore - (await size(QUALIFIED))
    const reclaimedIndex = indexBefore - (await size(indexRel))
    const unusedAfter = await unusedBytes(sql, QUALIFIED)
    // Ground truth both ways: what the rewrite gave back, and pgstattuple's unused space less what a packed table still has.
    expect(Math.abs(bloated.table.bloat_bytes - reclaimedTable)).toBeLessThan(0.05 * tableBefore)
    expect(Math.abs(bloated.table.bloat_bytes - (unusedBefore - unusedAfter))).toBeLessThan(0.05 * tableBefore)
    expect(Math.abs(bloated.index.bloat_bytes - reclaimedIndex)).toBeLessThan(0.05 * indexBefore)
    expect(bloated.table.bloat_bytes).toBeGreaterThan(0.5 * tableBefore)

    const packed = await estimate()
    expect(packed.table.bloat_bytes).toBeLessThan(0.05 * packed.table.size_bytes)
    expect(packed.index.bloat_bytes).toBeLessThan(0.05 * packed.index.size_bytes)
    const pct = (n: number, of: number) => `${((100 * n) / of).toFixed(1)} %`
    console.log(
      `PostgreSQL ${major} bloat estimate: table ${bloated.table.bloat_bytes} B vs ${reclaimedTable} B given back by VACUUM FULL (off by ${pct(bloated.table.bloat_bytes - reclaimedTable, tableBefore)} of its size) ` +
        `and ${unusedBefore - unusedAfter} B by pgstattuple (${pct(bloated.table.bloat_bytes - (unusedBefore - unusedAfter), tableBefore)}); ` +
        `index ${bloated.index.bloat_bytes} B vs ${reclaimedIndex} B (${pct(bloated.index.bloat_bytes - reclaimedIndex, indexBefore)})`,
    )
  })
}

test('as the README monitoring role (pg_monitor) on PostgreSQL 17: every parity collector runs; bloat leaves out the tables whose pg_stats the role may not read until pg_read_all_data', async () => {
  const url = await (await sharedPostgres(17)).freshDatabase()
  const admin = connect(url, 'dbm-parity-admin')
  const role = `dbm_parity_monitor_${Math.random().toString(36).slice(2, 8)}`
  await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'monitor-pass' IN ROLE pg_monitor`)
  let monitor: postgres.Sql | undefined
  try {
    await admin.unsafe(`CREATE TABLE hidden (id int, note text)`)
    await admin.unsafe(`INSERT INTO hidden SELECT g, 'n' || g FROM generate_series(1, 5000) g`)
    await admin.unsafe(`ALTER TABLE hidden ADD CONSTRAINT hidden_ck CHECK (id > 0) NOT VALID`)
    await admin.unsafe(`ANALYZE hidden`)
    const parsed = new URL(url)
    parsed.username = role
    parsed.password = 'monitor-pass'
    monitor = connect(parsed.toString(), 'dbm-parity-monitor', 2)
    const ctx = contextFor(monitor, 17)
    expect((await run(constraints, ctx)).invalid_constraints!.map((c) => c.constraint_name)).toEqual(['hidden_ck'])
    // pg_monitor reads every session's state (pg_read_all_stats).
    const groups = (await run(connections, ctx)).connections!
    expect(groups.find((g) => g.application_name === 'dbm-parity-admin')?.state).toBe('idle')
    expect((await run(progress, ctx)).progress).toEqual([])
    expect((await run(bloat, ctx)).bloat!.filter((b) => b.table_name === 'hidden')).toEqual([])
    await admin.unsafe(`GRANT pg_read_all_data TO ${role}`)
    const estimated = (await run(bloat, contextFor(monitor, 17))).bloat!.filter((b) => b.table_name === 'hidden')
    expect(estimated.map((b) => [b.kind, b.live_rows])).toEqual([['table', 5000]])
  } finally {
    // The role's sessions end before it is dropped.
    await monitor?.end({ timeout: 1 })
    await admin.unsafe(`DROP OWNED BY ${role}; DROP ROLE ${role}`)
  }
})
