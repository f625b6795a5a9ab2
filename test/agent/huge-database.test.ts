// A huge database end to end: 10,000 tables and 50,000 statements of one cycle, more than one request may
// carry, are collected by a real agent from a real PostgreSQL 17 and stored completely by a real server:
// every statement pg_stat_statements counted, with exactly its calls, and every table and index.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { ingestMaxItems } from '../../src/shared/ingest-limits.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

const TABLES = 10_000
/** Statement shapes run against every table: 5 × 10,000 statements of their own queryid. */
const SHAPES = [
  'SELECT count(*) FROM t%s',
  'SELECT v FROM t%s WHERE id = 1',
  'INSERT INTO t%s (id, v) VALUES (1, 0) ON CONFLICT (id) DO NOTHING',
  'UPDATE t%s SET v = v + 1 WHERE id = 1',
  'DELETE FROM t%s WHERE id = 2',
]
/** Tables created or run against per transaction (each holds a lock per table until it ends). */
const CHUNK = 2_000

let pg: PostgresServer
let server: TestServer
let key = ''
let dir = ''
let database = ''

beforeAll(async () => {
  const setupStarted = performance.now()
  ;[pg, server] = await Promise.all([
    startPostgres(17, [
      '-c',
      'shared_preload_libraries=pg_stat_statements',
      '-c',
      'pg_stat_statements.max=60000',
      // The workload runs inside DO blocks: their statements are counted as nested ones, the blocks not at all.
      '-c',
      'pg_stat_statements.track=all',
      '-c',
      'pg_stat_statements.track_utility=off',
      '-c',
      'max_locks_per_transaction=256',
      // 20,000 relation files are created: a test server need not flush them.
      '-c',
      'fsync=off',
    ]),
    startTestServer('sqlite'),
  ])
  ;({ key } = await agentAccount(server))
  const admin = postgres(pg.url(), { max: 1, onnotice: () => {} })
  await admin`CREATE EXTENSION pg_stat_statements`
  await admin.end()
  const dsn = await pg.freshDatabase()
  database = new URL(dsn).pathname.slice(1)
  const setup = postgres(dsn, { max: 1, onnotice: () => {} })
  await setup`CREATE EXTENSION pg_stat_statements`
  // The agent's own role (pg_monitor only), whose statements it leaves out.
  await setup`CREATE ROLE dbm_huge_agent LOGIN PASSWORD 'agent-pw' IN ROLE pg_monitor`
  for (let from = 1; from <= TABLES; from += CHUNK) {
    await setup.unsafe(`DO $$ BEGIN
      FOR i IN ${from}..${from + CHUNK - 1} LOOP
        EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, v int)', i);
      END LOOP;
    END $$`)
  }
  await setup.end()
  console.log(`huge database: set up in ${Math.round(performance.now() - setupStarted)} ms`)
  dir = mkdtempSync(join(tmpdir(), 'dbm-huge-'))
})

afterAll(async () => {
  await server?.stop()
  await pg?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** pg_stat_statements' calls per statement of the test database, summed over users and levels as the agent does; its own role left out. */
async function groundTruth(): Promise<Map<string, number>> {
  const admin = postgres(pg.url(), { max: 1, onnotice: () => {} })
  try {
    const rows = await admin`
      SELECT queryid::text AS hash, sum(calls)::bigint AS calls FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = ${database})
        AND userid <> (SELECT oid FROM pg_roles WHERE rolname = 'dbm_huge_agent')
      GROUP BY queryid`
    return new Map(rows.map((r) => [r.hash as string, Number(r.calls)]))
  } finally {
    await admin.end()
  }
}

describe('a huge database', () => {
  test('50,000 statements and 10,000 tables in one cycle are collected and stored completely', async () => {
    const logs: string[] = []
    const configPath = join(dir, 'config.yaml')
    const dsn = `postgres://dbm_huge_agent:agent-pw@127.0.0.1:${pg.port}/${database}`
    // Cycles are driven by the test: the loop's first one takes the baseline, the next one is called below.
    writeFileSync(
      configPath,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: huge\n    dsn: ${dsn}\n    poll_interval: 1h\n`,
    )
    const agent = new Agent({ configPath, bufferDir: dir, log: createLogger('debug', (l) => logs.push(l)) })
    const started = performance.now()
    await agent.start()
    try {
      const databaseId = await until(
        'the first cycle with every table',
        async () => {
          const row = await server.store.driver.get<{ id: string; n: number }>(
            `SELECT d.id, (SELECT COUNT(*) FROM latest_tables t WHERE t.database_id = d.id) AS n FROM databases d WHERE d.name = 'huge'`,
          )
          return row && Number(row.n) === TABLES ? row.id : undefined
        },
        { timeoutMs: 60_000, everyMs: 200 },
      )
      const baselineAt = performance.now()
      const before = await groundTruth()

      const workload = postgres(`postgres://postgres:${new URL(pg.url()).password}@127.0.0.1:${pg.port}/${database}`, {
        max: 1,
        onnotice: () => {},
      })
      for (let from = 1; from <= TABLES; from += CHUNK) {
        // Table i's count(*) runs 1 to 3 times, so calls differ between statements.
        await workload.unsafe(`DO $$ BEGIN
          FOR i IN ${from}..${from + CHUNK - 1} LOOP
            FOR k IN 0..(i % 3) LOOP EXECUTE format('${SHAPES[0]}', i); END LOOP;
            ${SHAPES.slice(1)
              .map((s) => `EXECUTE format('${s}', i);`)
              .join('\n            ')}
          END LOOP;
        END $$`)
      }
      await workload.end()
      const workloadAt = performance.now()

      const after = await groundTruth()
      const expected = new Map<string, number>()
      for (const [hash, calls] of after)
        if (calls > (before.get(hash) ?? 0)) expected.set(hash, calls - (before.get(hash) ?? 0))
      expect(expected.size).toBeGreaterThanOrEqual(SHAPES.length * TABLES)
      expect(expected.size).toBeGreaterThan(ingestMaxItems.query_stats)

      await agent.runner('huge')!.cycle()
      const cycleAt = performance.now()
      const window = { since: Date.now() - 3_600_000, until: Date.now() + 60_000 }
      const stored = await until(
        'every statement stored',
        async () => {
          const rows = await server.store.listQueryStats(databaseId, window, 'calls', 1_000_000)
          return rows.length >= expected.size ? rows : undefined
        },
        { timeoutMs: 30_000 },
      )
      expect(stored.length).toBe(expected.size)
      expect(new Map(stored.map((r) => [r.query_hash, r.total_calls]))).toEqual(expected)
      expect(stored.reduce((s, r) => s + r.total_calls, 0)).toBe([...expected.values()].reduce((s, c) => s + c, 0))

      const tables = await server.store.objects.listTables(databaseId, 'size', 1_000_000)
      expect(tables).toHaveLength(TABLES)
      expect(new Set(tables.map((t) => t.table_name)).size).toBe(TABLES)
      const indexes = await server.store.objects.listIndexes(databaseId, 'size', 1_000_000)
      expect(indexes).toHaveLength(TABLES)

      const split = logs.filter((l) => l.includes('batch split into parts'))
      expect(split.length).toBeGreaterThanOrEqual(1)
      expect(logs.filter((l) => l.includes('dropped') || l.includes('collector failed'))).toEqual([])
      expect(agent.runner('huge')!.status.buffered).toBe(0)
      console.log(
        `huge database: first cycle ${Math.round(baselineAt - started)} ms, workload ${Math.round(workloadAt - baselineAt)} ms, ` +
          `cycle with ${expected.size} statements ${Math.round(cycleAt - workloadAt)} ms; ${split.map((l) => l.slice(l.indexOf('parts='))).join(' | ')}; ` +
          ['query_stats', 'tables', 'indexes']
            .map((c) => `${c} ${agent.runner('huge')!.status.collectors[c]}`)
            .join(', '),
      )
    } finally {
      await agent.stop()
    }
  }, 120_000)
})
