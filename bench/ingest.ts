// Ingest benchmark (`bun bench/ingest.ts`): query_stats rows/s accepted by the real app (createApp)
// over a fresh SQLite store on 127.0.0.1, from a load generator in its own process emulating many
// agents, against a bare bun:sqlite batched insert of the same rows, in the same run.
//
// - Agents: each emulated agent posts one POST /api/v1/ingest at a time (as the real agent does) with
//   its API key, for its own database name (auto-registered on the first batch), with a fresh batch_id
//   per request and a clock that advances 10 s per batch (the default poll interval), so minute buckets
//   see the mix of inserts and updates that real traffic gives. Every batch carries `--rows` distinct
//   statements (query_hash, query_text and the 11 counters the PostgreSQL agent sends).
// - Bare insert: the same rows as query_stats rows (the table created with dbm's own DDL, the store's
//   pragmas), one transaction per batch, one prepared multi-row INSERT per batch, in this process.
// - Rounds alternate bare / server; the report gives the median of the rounds and their ratio.
// Rows/s counts query_stats rows accepted (a batch of 500 statements = 500 rows); the server adds each
// to its minute bucket, rolls 10-minute and hourly buckets up as spans close and rewrites a statement's
// text once in 10 minutes.
// Options: --agents N, --rows N, --duration S, --warmup S, --rounds N.
import { Database } from 'bun:sqlite'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrations } from '../src/server/store/migrations.ts'
import { INGEST_PATH, type IngestBatch, type QueryStatDelta } from '../src/shared/wire.ts'
import {
  type BenchServer,
  createAccount,
  fmt,
  loadLine,
  machine,
  median,
  parseArgs,
  percentile,
  startServer,
} from './common.ts'

const GOAL_RATIO = 0.5
const POLL_INTERVAL_MS = 10_000
const CHILD_ENV = 'DBM_BENCH_INGEST_CHILD'

interface Options {
  agents: number
  rows: number
  duration: number
  warmup: number
  rounds: number
}

// ---- the rows every agent sends ----

/** A pg_stat_statements-like queryid (signed 64-bit as text) for statement i of agent a. */
function queryHash(agent: number, i: number): string {
  let x = BigInt(agent * 1_000_003 + i + 1) * 0x9e3779b97f4a7c15n
  x = (x ^ (x >> 29n)) & 0xffffffffffffffffn
  return BigInt.asIntN(64, x).toString()
}

const COLUMNS = ['id', 'created_at', 'customer_id', 'status', 'total_cents', 'currency', 'updated_at', 'notes']

/** A normalised statement of 100–400 characters, as pg_stat_statements shows them. */
function queryText(agent: number, i: number): string {
  const cols = COLUMNS.slice(0, 2 + (i % 7)).join(', ')
  const table = `app_${agent}.table_${i % 97}`
  switch (i % 4) {
    case 0:
      return `SELECT ${cols} FROM ${table} WHERE customer_id = $1 AND status = $2 ORDER BY created_at DESC LIMIT $3 /* stmt ${i} */`
    case 1:
      return `UPDATE ${table} SET status = $1, updated_at = now() WHERE id = $2 AND status <> $3 RETURNING ${cols} /* stmt ${i} */`
    case 2:
      return `INSERT INTO ${table} (${cols}) VALUES (${COLUMNS.slice(0, 2 + (i % 7))
        .map((_, k) => `$${k + 1}`)
        .join(', ')}) ON CONFLICT (id) DO NOTHING /* stmt ${i} */`
    default:
      return `WITH recent AS (SELECT ${cols} FROM ${table} WHERE created_at > now() - $1::interval) SELECT status, count(*), sum(total_cents) FROM recent GROUP BY status ORDER BY 2 DESC /* stmt ${i} */`
  }
}

export function statRows(agent: number, rows: number): QueryStatDelta[] {
  return Array.from({ length: rows }, (_, i) => {
    const calls = 1 + (i % 20)
    return {
      query_hash: queryHash(agent, i),
      query_text: queryText(agent, i),
      calls,
      total_time_ms: Number((calls * (0.05 + (i % 100) * 0.013)).toFixed(6)),
      rows: calls * (i % 7),
      shared_blks_hit: calls * (3 + (i % 11)),
      shared_blks_read: i % 3,
      shared_blks_dirtied: i % 5 === 0 ? 1 : 0,
      shared_blks_written: 0,
      temp_blks_read: 0,
      temp_blks_written: 0,
      blk_read_time_ms: (i % 3) * 0.021,
      blk_write_time_ms: 0,
    }
  })
}

const callsPerBatch = (rows: number) => Array.from({ length: rows }, (_, i) => 1 + (i % 20)).reduce((a, b) => a + b, 0)

// ---- load generator (child process) ----

interface ChildInput {
  base: string
  apiKey: string
  agents: number
  rows: number
  warmupMs: number
  durationMs: number
  /** Simulated clock of batch 0 for each agent; each batch advances it by the poll interval. */
  clockStart: number
  /** Batches already sent per agent in earlier rounds (the simulated clock continues). */
  batchOffset: number
  round: number
}

interface ChildResult {
  accepted: number
  acceptedInWindow: number
  errors: number
  duplicates: number
  windowS: number
  latenciesMs: number[]
  sentPerAgent: number[]
  firstError?: string
}

async function runChild(input: ChildInput): Promise<ChildResult> {
  const url = input.base + INGEST_PATH
  const headers = { 'content-type': 'application/json', 'x-api-key': input.apiKey }
  const started = performance.now()
  const windowStart = started + input.warmupMs
  const windowEnd = windowStart + input.durationMs
  const result: ChildResult = {
    accepted: 0,
    acceptedInWindow: 0,
    errors: 0,
    duplicates: 0,
    windowS: input.durationMs / 1000,
    latenciesMs: [],
    sentPerAgent: [],
  }
  const agent = async (a: number) => {
    const rest: Omit<IngestBatch, 'batch_id' | 'collected_at'> = {
      interval_seconds: POLL_INTERVAL_MS / 1000,
      agent_version: 'bench',
      database: {
        name: `bench-agent-${a}`,
        engine: 'postgres',
        engine_version: '17.6',
        host: `db-${a}.bench.invalid`,
        port: 5432,
      },
      query_stats: statRows(a, input.rows),
    }
    const tail = `,${JSON.stringify(rest).slice(1)}`
    let k = input.batchOffset
    while (performance.now() < windowEnd) {
      const body = `{"batch_id":"r${input.round}-a${a}-b${k}-${crypto.randomUUID()}","collected_at":${input.clockStart + k * POLL_INTERVAL_MS}${tail}`
      k++
      const t0 = performance.now()
      try {
        const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(30_000) })
        const text = await res.text()
        const t1 = performance.now()
        if (res.status !== 200) {
          result.errors++
          result.firstError ??= `${res.status} ${text.slice(0, 200)}`
          continue
        }
        if (JSON.parse(text).duplicate) {
          result.duplicates++
          continue
        }
        result.accepted++
        if (t1 >= windowStart && t1 <= windowEnd) {
          result.acceptedInWindow++
          result.latenciesMs.push(t1 - t0)
        }
      } catch (e) {
        result.errors++
        result.firstError ??= (e as Error).message
      }
    }
    result.sentPerAgent[a] = k - input.batchOffset
  }
  await Promise.all(Array.from({ length: input.agents }, (_, a) => agent(a)))
  return result
}

async function spawnChild(input: ChildInput): Promise<ChildResult> {
  const proc = Bun.spawn([process.execPath, import.meta.path], {
    env: { ...process.env, [CHILD_ENV]: JSON.stringify(input) },
    stdout: 'pipe',
    stderr: 'inherit',
  })
  const killer = setTimeout(() => proc.kill(), input.warmupMs + input.durationMs + 60_000)
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
  clearTimeout(killer)
  if (code !== 0) throw new Error(`load generator exited with ${code}`)
  return JSON.parse(out) as ChildResult
}

// ---- bare bun:sqlite insert ----

/** dbm's own CREATE TABLE query_stats (SQLite dialect), so the bare table has the same columns and key. */
function queryStatsDdl(): string {
  const m2 = migrations.find((m) => m.version === 2)!
  const ddl = /CREATE TABLE query_stats \([\s\S]*?\n\);/.exec(m2.sqlite)?.[0]
  if (!ddl) throw new Error('cannot find CREATE TABLE query_stats in migration 2')
  return ddl.replace(/\s+REFERENCES databases\(id\) ON DELETE CASCADE/, '')
}

const STAT_COLUMNS = [
  'database_id',
  'resolution',
  'bucket',
  'query_hash',
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
  'p99_ms',
] as const

class BareInsert {
  private readonly db: Database
  private readonly insert
  private readonly begin
  private readonly commit
  /** Flat parameter arrays per agent; only the bucket slots change between batches. */
  private readonly params: (string | number | null)[][]
  private batches: number[]

  constructor(
    dir: string,
    agents: number,
    private readonly rows: number,
  ) {
    this.db = new Database(join(dir, 'bare.sqlite'), { create: true, strict: false })
    // The SQLite store's pragmas (src/server/store/sqlite/driver.ts).
    this.db.exec('PRAGMA locking_mode = EXCLUSIVE')
    this.db.exec('PRAGMA journal_mode = WAL')
    this.db.exec('PRAGMA synchronous = NORMAL')
    this.db.exec(queryStatsDdl())
    const tuple = `(${STAT_COLUMNS.map(() => '?').join(', ')})`
    this.insert = this.db.prepare(
      `INSERT INTO query_stats (${STAT_COLUMNS.join(', ')}) VALUES ${Array(rows).fill(tuple).join(', ')}`,
    )
    this.begin = this.db.prepare('BEGIN IMMEDIATE')
    this.commit = this.db.prepare('COMMIT')
    this.params = Array.from({ length: agents }, (_, a) =>
      statRows(a, rows).flatMap((r) => [
        `00000000-0000-7000-8000-${String(a).padStart(12, '0')}`,
        60,
        0,
        r.query_hash,
        r.calls,
        r.total_time_ms,
        r.rows,
        r.shared_blks_hit,
        r.shared_blks_read,
        r.shared_blks_dirtied ?? 0,
        r.shared_blks_written ?? 0,
        r.temp_blks_read ?? 0,
        r.temp_blks_written ?? 0,
        r.blk_read_time_ms ?? 0,
        r.blk_write_time_ms ?? 0,
        0,
        0,
        0,
        null,
      ]),
    )
    this.batches = Array(agents).fill(0)
  }

  /** Inserts batches round-robin over the agents for warm-up + duration; rows/s over the duration. */
  run(
    clockStart: number,
    warmupMs: number,
    durationMs: number,
  ): { rowsPerS: number; batches: number; latenciesMs: number[] } {
    const started = performance.now()
    const windowStart = started + warmupMs
    const windowEnd = windowStart + durationMs
    const width = STAT_COLUMNS.length
    let inWindow = 0
    const latenciesMs: number[] = []
    for (let a = 0; ; a = (a + 1) % this.params.length) {
      const now = performance.now()
      if (now >= windowEnd) break
      const params = this.params[a]!
      // Each batch gets its own bucket, so every row is a plain insert (no key conflicts).
      const bucket = clockStart + this.batches[a]!++ * POLL_INTERVAL_MS
      for (let r = 0; r < this.rows; r++) params[r * width + 2] = bucket
      this.begin.run()
      this.insert.run(...params)
      this.commit.run()
      const t1 = performance.now()
      if (t1 >= windowStart) {
        inWindow++
        latenciesMs.push(t1 - now)
      }
    }
    return { rowsPerS: (inWindow * this.rows) / (durationMs / 1000), batches: inWindow, latenciesMs }
  }

  count(): number {
    return (this.db.query('SELECT COUNT(*) AS n FROM query_stats').get() as { n: number }).n
  }

  close() {
    this.insert.finalize()
    this.begin.finalize()
    this.commit.finalize()
    this.db.close()
  }
}

// ---- main ----

interface Sample {
  round: number
  path: 'bare' | 'server'
  rowsPerS: number
  batchesPerS: number
  p50Ms: number
  p99Ms: number
  errors: number
}

async function main(): Promise<number> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    { agents: 20, rows: 500, duration: 10, warmup: 2, rounds: 3 },
    {
      agents: [1, 200],
      rows: [1, 20_000],
      duration: [1, 120],
      warmup: [0, 30],
      rounds: [1, 10],
    },
  )
  const loadBefore = loadLine()
  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-ingest-'))
  let server: BenchServer | undefined
  let bare: BareInsert | undefined
  try {
    server = await startServer({ dataDir: join(dir, 'serve') })
    const { apiKey } = await createAccount(server)
    bare = new BareInsert(dir, o.agents, o.rows)
    const clockStart = Math.floor((Date.now() - 7 * 24 * 3_600_000) / 60_000) * 60_000
    const samples: Sample[] = []
    let serverBatches = 0
    let offset = 0
    for (let round = 1; round <= o.rounds; round++) {
      const b = bare.run(clockStart, o.warmup * 1000, o.duration * 1000)
      samples.push({
        round,
        path: 'bare',
        rowsPerS: b.rowsPerS,
        batchesPerS: b.batches / o.duration,
        p50Ms: percentile(b.latenciesMs, 0.5),
        p99Ms: percentile(b.latenciesMs, 0.99),
        errors: 0,
      })
      console.error(`round ${round} bare: ${fmt(b.rowsPerS)} rows/s`)
      const c = await spawnChild({
        base: server.base,
        apiKey,
        agents: o.agents,
        rows: o.rows,
        warmupMs: o.warmup * 1000,
        durationMs: o.duration * 1000,
        clockStart,
        batchOffset: offset,
        round,
      })
      if (c.firstError) console.error(`round ${round} server: first error: ${c.firstError}`)
      serverBatches += c.accepted
      offset += Math.max(...c.sentPerAgent)
      const rowsPerS = (c.acceptedInWindow * o.rows) / c.windowS
      samples.push({
        round,
        path: 'server',
        rowsPerS,
        batchesPerS: c.acceptedInWindow / c.windowS,
        p50Ms: percentile(c.latenciesMs, 0.5),
        p99Ms: percentile(c.latenciesMs, 0.99),
        errors: c.errors + c.duplicates,
      })
      console.error(`round ${round} server: ${fmt(rowsPerS)} rows/s, errors ${c.errors}, duplicates ${c.duplicates}`)
    }

    // Nothing lost or double-counted: every accepted batch is recorded once and its calls are in the minute buckets.
    const d = server.store.driver
    const recorded = Number((await d.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_batches'))!.n)
    const calls = Number(
      (await d.get<{ n: number }>('SELECT SUM(calls) AS n FROM query_stats WHERE resolution = 60'))!.n,
    )
    const expectedCalls = serverBatches * callsPerBatch(o.rows)
    const consistent = recorded === serverBatches && calls === expectedCalls
    if (!consistent)
      console.error(
        `inconsistent store: ${recorded} batches recorded for ${serverBatches} accepted; ${calls} calls for ${expectedCalls} expected`,
      )
    const stored = Number((await d.get<{ n: number }>('SELECT COUNT(*) AS n FROM query_stats'))!.n)

    const of = (path: Sample['path']) => samples.filter((s) => s.path === path)
    const bareMedian = median(of('bare').map((s) => s.rowsPerS))
    const serverMedian = median(of('server').map((s) => s.rowsPerS))
    const ratio = serverMedian / bareMedian
    const m = await machine()
    const command = ['bun bench/ingest.ts', ...process.argv.slice(2)].join(' ')
    const lines = [
      `### ${new Date().toISOString().slice(0, 10)}: ingest into \`serve\` (SQLite store) vs. bare bun:sqlite insert`,
      ``,
      `- Command: \`${command}\``,
      `- Commit: ${m.commit}`,
      `- Machine: ${m.line}; server, load generator and bare insert share the machine`,
      `- Load average (1/5/15 min) at start: ${loadBefore}; at end: ${loadLine()}`,
      `- Server: the real app (createApp) over a fresh SQLite store in this process, on 127.0.0.1`,
      `- Load generator: a separate bun process emulating ${o.agents} agents, each with one request in flight, its own database name (auto-registered), one API key for all, a fresh batch_id per request and a clock advancing 10 s per batch; ${o.rows} query_stats rows (distinct statements, 11 counters, texts of 100–400 characters) per batch, ${fmt(JSON.stringify(statRows(0, o.rows)).length / 1024)} KiB of JSON`,
      `- Bare insert: the same rows into dbm's own \`query_stats\` table (same DDL, same pragmas: WAL, synchronous NORMAL, exclusive locking), one \`BEGIN IMMEDIATE\`…\`COMMIT\` per batch of ${o.rows} rows, one prepared ${o.rows}-row \`INSERT\` reused for every batch, each batch in its own bucket (no key conflicts), in the benchmark process`,
      `- Method: ${o.duration} s per run ${o.warmup > 0 ? `after a ${o.warmup} s warm-up` : 'without warm-up'}, alternating bare / server, ${o.rounds} round${o.rounds === 1 ? '' : 's'}; median of the rounds. Rows/s = query_stats rows accepted (the server adds each row to its minute bucket, rolls 10-minute and hourly buckets up as spans close, and rewrites a statement's text once in 10 minutes)`,
      `- Check after the runs: ${recorded} batches recorded for ${serverBatches} accepted, minute-bucket calls ${calls === expectedCalls ? 'equal' : 'DIFFER from'} the calls sent (${consistent ? 'nothing lost or double-counted' : 'INCONSISTENT'}); ${fmt(stored)} query_stats rows in the store`,
      ``,
      `| round | path | rows/s | batches/s | p50 ms | p99 ms | errors |`,
      `|---:|---|---:|---:|---:|---:|---:|`,
      ...samples.map(
        (s) =>
          `| ${s.round} | ${s.path} | ${fmt(s.rowsPerS)} | ${fmt(s.batchesPerS, 1)} | ${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${s.errors} |`,
      ),
      ``,
      `| path | median rows/s |`,
      `|---|---:|`,
      `| bare bun:sqlite insert | ${fmt(bareMedian)} |`,
      `| \`POST /api/v1/ingest\` | ${fmt(serverMedian)} |`,
      `| **ratio server/bare** | **${fmt(ratio, 2)}** (goal ≥ ${GOAL_RATIO}: ${ratio >= GOAL_RATIO ? 'met' : 'not met'}) |`,
    ]
    console.log(lines.join('\n'))
    const errors = samples.reduce((a, s) => a + s.errors, 0)
    if (errors > 0)
      console.error(`warning: ${errors} failed or duplicate requests during the runs; the numbers are suspect`)
    if (ratio < GOAL_RATIO) console.error(`ratio ${ratio.toFixed(2)} is below the goal of ${GOAL_RATIO}`)
    return errors > 0 || !consistent ? 1 : 0
  } finally {
    bare?.close()
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.env[CHILD_ENV] && import.meta.main) {
  const result = await runChild(JSON.parse(process.env[CHILD_ENV]!) as ChildInput)
  process.stdout.write(JSON.stringify(result))
} else if (import.meta.main) {
  try {
    process.exitCode = await main()
  } catch (e) {
    console.error(`bench/ingest.ts: ${(e as Error).stack ?? e}`)
    process.exitCode = 1
  }
}
