// The column_stats collector against real PostgreSQL 13 and 17: the statistics of the columns of the
// tables most read by sequential scans, equal to what pg_stats and pg_class say, with schema, table and
// column names carrying quotes, newlines and unicode; read again only when an ANALYZE changed them;
// 64 columns a table, the 50 tables most read; and a role that may not read a table's pg_stats
// (pg_monitor alone) leaves the table out with an info note until it is granted pg_read_all_data (17)
// or SELECT on it (13).
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import postgres from 'postgres'
import { MAX_COLUMNS, columnStats } from '../../src/agent/collectors/postgres/column-stats.ts'
import { SEQ_READ, tables as tablesCollector } from '../../src/agent/collectors/postgres/tables.ts'
import type { BatchSections, PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { IngestBatch } from '../../src/shared/wire.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(90_000)

const SCHEMA = 'we"ird\n schéma'
const TABLE = 'ord\'ers" ünï 🐘'
const CUSTOMER = 'cu"st\nomer ü'
const STATUS = "sta'tus 🐘"
const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`
const QUALIFIED = `${quoteIdent(SCHEMA)}.${quoteIdent(TABLE)}`

const sessions: postgres.Sql[] = []
function connect(url: string, app = 'dbm-column-stats-test', max = 1): postgres.Sql {
  const sql = postgres(url, { max, onnotice: () => {}, fetch_types: false, connection: { application_name: app } })
  sessions.push(sql)
  return sql
}

afterAll(async () => {
  await Promise.all(sessions.map((s) => s.end({ timeout: 1 }).catch(() => {})))
})

beforeAll(async () => {
  await Promise.all([13, 17].map((major) => sharedPostgres(major)))
}, 120_000)

function contextFor(
  sql: postgres.Sql,
  major: number,
  state = new Map<string, unknown>(),
  now = Date.now(),
): PostgresContext & { infos: Map<string, string> } {
  return {
    name: 'test-db',
    database: 'test',
    sql,
    versionNum: major * 10_000,
    major,
    now,
    settings: { collectExplainPlans: false, collectReplication: false },
    state,
    notes: new Map(),
    infos: new Map(),
    log: createLogger('error', () => {}),
  }
}

/** Runs the collector and checks its sections against the wire contract. */
async function run(ctx: PostgresContext): Promise<Partial<BatchSections>> {
  const sections = await columnStats.collect(ctx)
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

/** What pg_stats and pg_class say of a table's columns, in column order, as the collector sends them. */
async function groundTruth(sql: postgres.Sql, schema: string, table: string) {
  return sql.unsafe(
    `SELECT s.schemaname::text AS schema_name, s.tablename::text AS table_name, s.attname::text AS column_name,
            s.n_distinct, s.null_frac, s.correlation, c.reltuples::float8 AS reltuples
     FROM pg_stats s
     JOIN pg_namespace n ON n.nspname = s.schemaname
     JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename
     JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = s.attname
     WHERE s.schemaname = $1 AND s.tablename = $2 AND NOT s.inherited
     ORDER BY a.attnum`,
    [schema, table],
  )
}

/** Reads the table whole once and waits until its statistics count the read (13's collector sends them late). */
async function scanned(sql: postgres.Sql, qualified: string, oid: string) {
  await sql.unsafe(`SELECT count(*) FROM ${qualified}`)
  await until(`seq_tup_read of ${qualified}`, async () => {
    const [row] = await sql.unsafe(`SELECT seq_tup_read > 0 AS read FROM pg_stat_user_tables WHERE relid = ${oid}`)
    return row?.read ? true : undefined
  })
}

async function oidOf(sql: postgres.Sql, qualified: string): Promise<string> {
  const [row] = await sql.unsafe(`SELECT ${literal(qualified)}::regclass::oid::text AS oid`)
  return row!.oid as string
}

for (const major of [13, 17] as const) {
  test(`PostgreSQL ${major}: the statistics of a table read by sequential scans equal pg_stats' own, hostile names exact; read again after an ANALYZE only; 64 columns a table`, async () => {
    const url = await (await sharedPostgres(major)).freshDatabase()
    const sql = connect(url, 'dbm-column-stats', 2)
    await sql.unsafe(`CREATE SCHEMA ${quoteIdent(SCHEMA)}`)
    await sql.unsafe(
      `CREATE TABLE ${QUALIFIED} (id int PRIMARY KEY, ${quoteIdent(CUSTOMER)} int NOT NULL, ${quoteIdent(STATUS)} int NOT NULL, note text)`,
    )
    await sql.unsafe(
      `INSERT INTO ${QUALIFIED} SELECT g, g % 5000, g % 3, CASE WHEN g % 4 = 0 THEN NULL ELSE 'n' || (g % 700) END FROM generate_series(1, 100000) g`,
    )
    const wide = 'wide table'
    await sql.unsafe(
      `CREATE TABLE ${quoteIdent(wide)} (${Array.from({ length: 70 }, (_, i) => `c${i + 1} int`).join(', ')})`,
    )
    await sql.unsafe(
      `INSERT INTO ${quoteIdent(wide)} SELECT ${Array.from({ length: 70 }, (_, i) => `g % ${i + 2}`).join(', ')} FROM generate_series(1, 1000) g`,
    )
    // Analyzed but never read by a sequential scan: not sent.
    await sql.unsafe(`CREATE TABLE untouched (id int, kind int)`)
    await sql.unsafe(`INSERT INTO untouched SELECT g, g % 7 FROM generate_series(1, 1000) g`)
    await sql.unsafe(`ANALYZE ${QUALIFIED}, ${quoteIdent(wide)}, untouched`)
    await scanned(sql, QUALIFIED, await oidOf(sql, QUALIFIED))
    await scanned(sql, quoteIdent(wide), await oidOf(sql, quoteIdent(wide)))

    const state = new Map<string, unknown>()
    const first = (await run(contextFor(sql, major, state))).column_stats!
    const of = (rows: typeof first, schema: string, table: string) =>
      rows.filter((r) => r.schema_name === schema && r.table_name === table)
    const truth = await groundTruth(sql, SCHEMA, TABLE)
    expect(truth.map((r) => r.column_name)).toEqual(['id', CUSTOMER, STATUS, 'note'])
    expect(of(first, SCHEMA, TABLE)).toEqual(truth.map((r) => ({ ...r })) as never)
    // The numbers the advice orders by: 3 values of status, about 5,000 of the customer, a quarter of the notes null.
    const byName = Object.fromEntries(of(first, SCHEMA, TABLE).map((r) => [r.column_name, r]))
    expect([
      byName[STATUS]!.n_distinct,
      byName[STATUS]!.null_frac,
      byName[CUSTOMER]!.null_frac,
      byName.id!.n_distinct,
      byName.id!.reltuples,
    ]).toEqual([3, 0, 0, -1, 100_000])
    expect(byName[CUSTOMER]!.n_distinct).toBeGreaterThan(4000)
    expect(byName.note!.null_frac).toBeGreaterThan(0.2)
    const wideRows = of(first, 'public', wide)
    expect(wideRows.map((r) => r.column_name)).toEqual(Array.from({ length: MAX_COLUMNS }, (_, i) => `c${i + 1}`))
    expect(wideRows).toEqual(
      (await groundTruth(sql, 'public', wide)).slice(0, MAX_COLUMNS).map((r) => ({ ...r })) as never,
    )
    expect(of(first, 'public', 'untouched')).toEqual([])

    // Nothing changed: the section is not sent, the server keeps the last one.
    expect(await run(contextFor(sql, major, state))).toEqual({})
    // An ANALYZE changes them: sent again, as pg_stats now says.
    await sql.unsafe(`UPDATE ${QUALIFIED} SET ${quoteIdent(STATUS)} = 7 WHERE id <= 50000`)
    const oid = await oidOf(sql, QUALIFIED)
    const [before] = await sql.unsafe(
      `SELECT coalesce(last_analyze::text, '') AS at FROM pg_stat_user_tables WHERE relid = ${oid}`,
    )
    await sql.unsafe(`ANALYZE ${QUALIFIED}`)
    await until('the ANALYZE in pg_stat_user_tables', async () => {
      const [row] = await sql.unsafe(
        `SELECT coalesce(last_analyze::text, '') AS at FROM pg_stat_user_tables WHERE relid = ${oid}`,
      )
      return row!.at !== before!.at ? true : undefined
    })
    const again = (await run(contextFor(sql, major, state))).column_stats!
    expect(of(again, SCHEMA, TABLE)).toEqual((await groundTruth(sql, SCHEMA, TABLE)).map((r) => ({ ...r })) as never)
    // Half the rows now 7, the rest still 0, 1 or 2: four values.
    expect(of(again, SCHEMA, TABLE).find((r) => r.column_name === STATUS)!.n_distinct).toBe(4)
    // An hour on, sent again even unchanged.
    expect(await run(contextFor(sql, major, state))).toEqual({})
    expect((await run(contextFor(sql, major, state, Date.now() + 3600_000))).column_stats!.length).toBe(again.length)
  })

  test(`PostgreSQL ${major}: a role without access to a table's pg_stats (pg_monitor alone) gets none of its columns and an info note, until ${major >= 14 ? 'pg_read_all_data' : 'SELECT on it'} is granted`, async () => {
    const url = await (await sharedPostgres(major)).freshDatabase()
    const admin = connect(url, 'dbm-column-stats-admin')
    const role = `dbm_colstats_${Math.random().toString(36).slice(2, 8)}`
    await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'monitor-pass' IN ROLE pg_monitor`)
    let monitor: postgres.Sql | undefined
    try {
      await admin.unsafe(`CREATE TABLE hidden (id int, kind int)`)
      await admin.unsafe(`INSERT INTO hidden SELECT g, g % 3 FROM generate_series(1, 5000) g`)
      await admin.unsafe(`ANALYZE hidden`)
      await scanned(admin, 'hidden', await oidOf(admin, 'hidden'))
      const parsed = new URL(url)
      parsed.username = role
      parsed.password = 'monitor-pass'
      monitor = connect(parsed.toString(), 'dbm-column-stats-monitor', 2)
      const state = new Map<string, unknown>()
      const ctx = contextFor(monitor, major, state)
      expect((await run(ctx)).column_stats).toEqual([])
      const fix = major >= 14 ? 'grant pg_read_all_data' : 'grant SELECT on them'
      expect([...ctx.infos]).toEqual([
        [
          'column_stats',
          `column statistics of 1 of the 1 tables most read by sequential scans unreadable (${fix}): index advice keeps the plan's column order for them`,
        ],
      ])
      expect([...ctx.notes]).toEqual([])
      await admin.unsafe(major >= 14 ? `GRANT pg_read_all_data TO ${role}` : `GRANT SELECT ON hidden TO ${role}`)
      // The role's access is part of what says the statistics changed: sent at once.
      const granted = contextFor(monitor, major, state)
      const rows = (await run(granted)).column_stats!
      expect(rows).toEqual((await groundTruth(admin, 'public', 'hidden')).map((r) => ({ ...r })) as never)
      expect(rows.map((r) => [r.column_name, r.n_distinct])).toEqual([
        ['id', -1],
        ['kind', 3],
      ])
      expect([...granted.infos]).toEqual([])
    } finally {
      await monitor?.end({ timeout: 1 })
      await admin.unsafe(`DROP OWNED BY ${role}; DROP ROLE ${role}`)
    }
  })
}

test('PostgreSQL 17: the 50 tables most read by sequential scans (seq_tup_read), the most read first', async () => {
  const url = await (await sharedPostgres(17)).freshDatabase()
  const sql = connect(url, 'dbm-column-stats-top', 2)
  // Table i holds i + 10 rows and is read whole once: seq_tup_read i + 10.
  for (let i = 1; i <= 52; i++) {
    await sql.unsafe(`CREATE TABLE top_${i} (id int, kind int)`)
    await sql.unsafe(`INSERT INTO top_${i} SELECT g, g % 2 FROM generate_series(1, ${i + 10}) g`)
  }
  await sql.unsafe(`ANALYZE ${Array.from({ length: 52 }, (_, i) => `top_${i + 1}`).join(', ')}`)
  for (let i = 1; i <= 52; i++) await sql.unsafe(`SELECT count(*) FROM top_${i}`)
  await sql`SELECT pg_stat_force_next_flush()`
  await until('the reads in pg_stat_user_tables', async () => {
    const [row] = await sql.unsafe(
      `SELECT count(*)::int AS n FROM pg_stat_user_tables WHERE relname LIKE 'top\\_%' AND seq_tup_read > 0`,
    )
    return row!.n === 52 ? true : undefined
  })
  const rows = (await run(contextFor(sql, 17))).column_stats!
  const tables = [...new Set(rows.map((r) => r.table_name))]
  expect(tables).toEqual(Array.from({ length: 50 }, (_, i) => `top_${52 - i}`))
  expect(rows.filter((r) => r.table_name === 'top_52').map((r) => [r.column_name, r.n_distinct, r.reltuples])).toEqual([
    ['id', -1, 62],
    ['kind', 2, 62],
  ])
  // In a cycle where the tables collector ran first, the tables come from its read of pg_stat_user_tables: the same section.
  const cycle = contextFor(sql, 17)
  await tablesCollector.collect(cycle)
  expect(cycle.state.has(SEQ_READ)).toBe(true)
  expect((await run(cycle)).column_stats).toEqual(rows)
  expect(cycle.state.has(SEQ_READ)).toBe(false)
})

test('PostgreSQL 17: pg_stats read again only for the table whose analyze moved; the section whole and exact', async () => {
  const url = await (await sharedPostgres(17)).freshDatabase()
  const sql = connect(url, 'dbm-column-stats-cache', 2)
  for (const name of ['kept', 'moved']) {
    await sql.unsafe(`CREATE TABLE ${name} (id int, kind int)`)
    await sql.unsafe(`INSERT INTO ${name} SELECT g, g % 3 FROM generate_series(1, 500) g`)
  }
  await sql.unsafe('ANALYZE kept, moved')
  await scanned(sql, 'kept', await oidOf(sql, 'kept'))
  await scanned(sql, 'moved', await oidOf(sql, 'moved'))
  // The tables named in each pg_stats statement (its JSON list of tables).
  const asked: string[][] = []
  const watched = new Proxy(sql, {
    get(target, key) {
      if (key !== 'unsafe') return Reflect.get(target, key)
      return (query: string, params?: unknown[]) => {
        if (query.includes('FROM pg_stats s'))
          asked.push((JSON.parse(String(params![0])) as { relname: string }[]).map((t) => t.relname).sort())
        return target.unsafe(query, params as never)
      }
    },
  })
  const state = new Map<string, unknown>()
  let now = Date.now()
  const cycle = () => run(contextFor(watched, 17, state, ++now))
  const truth = async () => [
    ...(await groundTruth(sql, 'public', 'kept')),
    ...(await groundTruth(sql, 'public', 'moved')),
  ]
  const sorted = (rows: object[]) => rows.map((r) => JSON.stringify(r)).sort()
  const exact = (rows: Partial<BatchSections>['column_stats'], expected: Record<string, unknown>[]) =>
    expect(sorted(rows!)).toEqual(
      sorted(
        expected.map((r) => ({
          ...r,
          n_distinct: Number(r.n_distinct),
          null_frac: Number(r.null_frac),
          correlation: Number(r.correlation),
        })),
      ),
    )

  exact((await cycle()).column_stats, await truth())
  expect(asked).toEqual([['kept', 'moved']])
  await sql.unsafe('UPDATE moved SET kind = id % 11')
  await sql.unsafe('ANALYZE moved')
  await until('the analyze in pg_stat_user_tables', async () => {
    const [row] = await sql`SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'moved'`
    return Number(row!.analyze_count) === 2 ? true : undefined
  })
  const after = (await cycle()).column_stats!
  exact(after, await truth())
  expect(after.find((r) => r.table_name === 'moved' && r.column_name === 'kind')!.n_distinct).toBe(11)
  expect(asked).toEqual([['kept', 'moved'], ['moved']])
  expect((await cycle()).column_stats).toBeUndefined()
  expect(asked.length).toBe(2)
})
