// Ingest CPU benchmark (`bun bench/ingest-cpu.ts`): the event loop's time per fleet-shaped ingest batch
// in `dbm serve`'s app, and where it goes. At 1,000 databases bench:fleet's serve is at the knee (its one
// event loop nearly full), so each millisecond of main-thread work per batch is the fleet's capacity.
//
// Method
// - In this process: the real app (createApp over benchDeps, as bench/common.ts builds it) over a fresh
//   SQLite store (openStore), driven with app.handle(Request): no sockets, so the time measured is the
//   app's own (Bun's HTTP parsing of the request is not in it). SQLite is synchronous, so a request's
//   wall time here is main-thread time (the store's checkpoint worker runs on its own thread).
// - Batches: bench/fleet.ts's SimulatedDatabase (the real agent's batch for a pgbench-shaped PostgreSQL,
//   about 146 KB: 30 of 200 statements moving, 100 tables, 150 indexes, 96 sequences, internals), for
//   `--databases` databases registered by their first batch. A simulated clock (the app's) advances 10 s
//   per cycle, the databases' batches spread over it, so minute buckets, hourly rows and 10-minute
//   rollups happen as in a real fleet. Requests one at a time, every response checked (200).
// - Timed phase: `--warmup` cycles, then `--cycles` cycles measured: each request's app.handle until its
//   body is read (performance.now), and store.ingest's own time (the method wrapped on the store object).
// - Profiled phase (`--profile-cycles` cycles, last): JavaScriptCore's sampling profiler (bun:jsc
//   profile, a sample every `--sample-us` µs) over the same requests; the innermost frame of a source
//   file decides a sample's part (a function without a source named check*, TypeBox's compiled checker
//   that Elysia runs for the route, before it: validation): src/server/json-body.ts: body read and parse;
//   unknown-fields.ts: unknown-field strip; src/server/store/**: the store (store.ingest and the API key's
//   and organization's reads); anything else: the rest (Elysia's request handling, authentication, the
//   route's own checks, the response); the benchmark's own frames are left out. A part's ms per batch =
//   its share of samples × the timed phase's main-thread CPU per batch (the profiler's overhead is spread
//   evenly). The store's samples are also grouped by the store's innermost function and the built-in it
//   was in (run/all: SQLite executing a statement).
// - Main-thread CPU per batch: the main thread's user + system time (/proc/self/task/<pid>/stat, 10 ms
//   ticks) over the measured cycles ÷ batches: the figure to compare, since wall times include waiting
//   for a core when other processes run (the per-request times are wall times).
// - Comparing two versions: run this file in both checkouts alternately (A, B, A, B...) and compare the
//   medians; numbers from one run of each are noise-prone on a shared machine.
// Options: --databases N (default 60), --cycles N (default 10), --warmup N (default 3), --profile-cycles N
// (default 4; 0 skips the profile), --sample-us N (default 200), --moving-statements N (default 30), --rest-top N
// (default 12: the rest's most sampled stacks, by their innermost three frames, and the store's samples by its
// innermost function, to say what they are),
// --sql-cycles N (default 2; 0 skips it) and --sql-top N (default 15): a phase between the timed and the
// profiled ones times every SQLite call
// (each prepared statement's run/all/get/values, Database exec/run) by its SQL text, to say which
// statements store.ingest's time goes to.
// Printed: Markdown for bench/RESULTS.md's Ingest section.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { profile } from 'bun:jsc'
import { Database, type Statement } from 'bun:sqlite'
import { createApp } from '../src/server/app.ts'
import { openStore } from '../src/server/store/open.ts'
import { INGEST_PATH } from '../src/shared/wire.ts'
import { benchDeps, fmt, loadLine, machine, median, parseArgs, percentile } from './common.ts'
import { SimulatedDatabase } from './fleet.ts'

interface Options {
  databases: number
  cycles: number
  warmup: number
  profileCycles: number
  sampleUs: number
  movingStatements: number
  restTop: number
  sqlCycles: number
  sqlTop: number
  writer: number
}

const INTERVAL_MS = 10_000
const PARTS = ['body read and parse', 'validation', 'unknown-field strip', 'store (every call)', 'the rest'] as const
type Part = (typeof PARTS)[number]

/** Every statement prepared, with its SQL (recorded from the start, so statements the store caches are named). */
const prepared = new Map<Statement, string>()
/** While statements are timed: wraps a statement's methods (bun:sqlite keeps them on each statement). */
let onPrepared: ((statement: Statement) => void) | undefined
const prepare = Database.prototype.prepare
Database.prototype.prepare = function (this: Database, sql: string, ...rest: unknown[]) {
  const statement = (prepare as (sql: string, ...rest: unknown[]) => Statement).call(this, sql, ...rest)
  prepared.set(statement, sql)
  onPrepared?.(statement)
  return statement
} as typeof prepare

/** While `fn` runs, each SQLite call's time, by its SQL (whitespace folded): calls and ms. */
async function timeStatements(fn: () => Promise<void>): Promise<Map<string, { calls: number; ms: number }>> {
  const bySql = new Map<string, { calls: number; ms: number }>()
  const add = (sql: string, ms: number) => {
    const key = sql.replace(/\s+/g, ' ').trim()
    const entry = bySql.get(key) ?? { calls: 0, ms: 0 }
    entry.calls++
    entry.ms += ms
    bySql.set(key, entry)
  }
  const restores: (() => void)[] = []
  const wrap = (target: object, name: string, sql: (args: unknown[]) => string) => {
    const slots = target as Record<string, unknown>
    const own = Object.hasOwn(target, name)
    const original = slots[name] as (...args: unknown[]) => unknown
    slots[name] = function (this: unknown, ...args: unknown[]) {
      const t0 = performance.now()
      try {
        return original.apply(this, args)
      } finally {
        add(sql(args), performance.now() - t0)
      }
    }
    restores.push(() => {
      if (own) slots[name] = original
      else delete slots[name]
    })
  }
  const wrapStatement = (statement: Statement) => {
    const sql = prepared.get(statement)!
    for (const name of ['run', 'all', 'get', 'values']) wrap(statement, name, () => sql)
  }
  for (const statement of prepared.keys()) wrapStatement(statement)
  onPrepared = wrapStatement
  wrap(Database.prototype, 'exec', (args) => String(args[0]))
  wrap(Database.prototype, 'run', (args) => String(args[0]))
  try {
    await fn()
  } finally {
    onPrepared = undefined
    for (const restore of restores.reverse()) restore()
  }
  return bySql
}

/** CPU time (user + system, ms) of this process's main thread so far, from /proc (10 ms ticks). */
function mainThreadCpuMs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

interface Frame {
  name: string
  sourceURL?: string
  line?: number
}

/**
 * The part a sample belongs to, from its stack (innermost frame first): the first frame of a source file
 * decides, or before it a function without a source named check* (TypeBox's compiled checker). Undefined
 * for an idle loop and for the benchmark's own work (building the Request it hands to the app).
 */
function partOf(frames: Frame[]): Part | undefined {
  for (const frame of frames) {
    const file = frame.sourceURL ?? ''
    if (!file.startsWith('/')) {
      if (!file && frame.name.startsWith('check')) return 'validation'
      continue
    }
    if (file.includes('/bench/')) return undefined
    if (file.endsWith('/src/server/json-body.ts')) return 'body read and parse'
    if (file.endsWith('/src/server/unknown-fields.ts')) return 'unknown-field strip'
    if (file.includes('/src/server/store/')) return 'store (every call)'
    return 'the rest'
  }
  return frames.length === 0 ? undefined : 'the rest'
}

async function main() {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    {
      databases: 60,
      cycles: 10,
      warmup: 3,
      profileCycles: 4,
      sampleUs: 200,
      movingStatements: 30,
      restTop: 12,
      sqlCycles: 2,
      sqlTop: 15,
      writer: 0,
    },
    {
      databases: [1, 2000],
      cycles: [1, 1000],
      warmup: [0, 100],
      profileCycles: [0, 100],
      sampleUs: [50, 10_000],
      movingStatements: [7, 200],
      restTop: [0, 100],
      sqlCycles: [0, 100],
      sqlTop: [1, 200],
      writer: [0, 1],
    },
  )
  const { commit, line } = await machine()
  const loadStart = loadLine()
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-bench-ingest-cpu-'))
  const { store } = await openStore({ dataDir })
  const deps = benchDeps(store)
  try {
    let now = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000
    deps.clock = () => now
    // --writer 1: batches are parsed and applied in the ingest writer's thread, as `dbm serve` does; the
    // main thread's CPU per batch is then what is left on the event loop (store.ingest runs in the thread).
    if (o.writer) {
      const { startIngestWriter } = await import('../src/server/ingest-writer/client.ts')
      deps.ingestWriter = await startIngestWriter({ dataDir, logLevel: 'warn', log: deps.log, clock: () => now })
      o.sqlCycles = 0
    }
    const app = createApp(deps)
    const handle = async (method: string, path: string, headers: Record<string, string>, body?: string) => {
      const res = await app.handle(
        new Request(`http://127.0.0.1${path}`, {
          method,
          // As an agent's fetch sends it: the body's length declared.
          headers:
            body === undefined
              ? headers
              : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
          body,
        }),
      )
      return { status: res.status, text: await res.text() }
    }
    const signup = await handle(
      'POST',
      '/api/v1/auth/signup',
      {},
      JSON.stringify({
        email: 'bench@example.com',
        password: 'bench password 0123',
        name: 'Bench',
        org_name: 'Bench Org',
      }),
    )
    if (signup.status !== 201) throw new Error(`signup: ${signup.status} ${signup.text}`)
    const account = JSON.parse(signup.text)
    await store.markEmailVerified(account.user.id, now)
    const key = await handle(
      'POST',
      '/api/v1/api-keys',
      { authorization: `Bearer ${account.access_token}` },
      JSON.stringify({ name: 'bench' }),
    )
    if (key.status !== 201) throw new Error(`api key: ${key.status} ${key.text}`)
    const headers = { 'x-api-key': JSON.parse(key.text).key as string }

    // store.ingest's own time, in the app.
    let ingestMs = 0
    const ingest = store.ingest.bind(store)
    store.ingest = async (...args) => {
      const t0 = performance.now()
      try {
        return await ingest(...args)
      } finally {
        ingestMs += performance.now() - t0
      }
    }

    const databases = Array.from(
      { length: o.databases },
      (_, i) => new SimulatedDatabase(i, o.movingStatements, `cpu-${Date.now().toString(36)}`),
    )
    const start = now
    let cycle = 0
    let bytes = 0
    const requestMs: number[] = []
    const storeMs: number[] = []
    /** One cycle: every database's batch, one request at a time, at its place in the 10 s. */
    /** One cycle; returns store.ingest's total ms in it. */
    const runCycle = async (measure: boolean): Promise<number> => {
      let cycleIngestMs = 0
      const at = (db: SimulatedDatabase) =>
        start + cycle * INTERVAL_MS + Math.floor((db.index * INTERVAL_MS) / databases.length)
      const texts = databases.map((db) => db.next(at(db)))
      for (const db of databases) {
        now = at(db)
        const text = texts[db.index]!
        bytes = text.length
        ingestMs = 0
        const t0 = performance.now()
        const res = await handle('POST', INGEST_PATH, headers, text)
        const ms = performance.now() - t0
        if (res.status !== 200) throw new Error(`ingest of ${db.name}: ${res.status} ${res.text}`)
        // A turn of the event loop, as between two requests of a server: the app's after-response hook
        // (which frees the ingest's admission place) runs in it.
        await new Promise<void>((resolve) => setImmediate(resolve))
        cycleIngestMs += ingestMs
        if (measure) {
          requestMs.push(ms)
          storeMs.push(ingestMs)
        }
      }
      cycle++
      return cycleIngestMs
    }
    for (let k = 0; k < o.warmup; k++) await runCycle(false)
    const cpu0 = process.cpuUsage()
    const thread0 = mainThreadCpuMs()
    const wall0 = performance.now()
    for (let k = 0; k < o.cycles; k++) await runCycle(true)
    const wallMs = performance.now() - wall0
    const cpu = process.cpuUsage(cpu0)
    const threadMs = (mainThreadCpuMs() - thread0) / requestMs.length
    const batches = requestMs.length
    const meanMs = requestMs.reduce((a, b) => a + b, 0) / batches
    const meanStoreMs = storeMs.reduce((a, b) => a + b, 0) / batches

    // Before the profile: code run after JavaScriptCore's profiler was on ran several times slower here.
    const sqlBatches = o.sqlCycles * databases.length
    let sqlIngestMs = 0
    const bySql = await timeStatements(async () => {
      for (let k = 0; k < o.sqlCycles; k++) sqlIngestMs += await runCycle(false)
    })

    const samples = new Map<Part, number>(PARTS.map((p) => [p, 0]))
    let sampled = 0
    /** The rest's samples by their innermost three frames. */
    const restStacks = new Map<string, number>()
    /** The store's samples by the innermost function of the store's code (and the built-in it was in, if any). */
    const storeStacks = new Map<string, number>()
    if (o.profileCycles > 0) {
      const result = await profile(async () => {
        for (let k = 0; k < o.profileCycles; k++) await runCycle(false)
      }, o.sampleUs)
      for (const trace of result.stackTraces.traces as { frames: Frame[] }[]) {
        const part = partOf(trace.frames)
        if (!part) continue
        samples.set(part, samples.get(part)! + 1)
        sampled++
        if (part === 'the rest') {
          const where = trace.frames
            .slice(0, 3)
            .map(
              (f) =>
                `${f.name || '(anonymous)'}${f.sourceURL?.startsWith('/') ? ` (${f.sourceURL.replace(/^.*\/(src|node_modules)\//, '$1/')})` : ''}`,
            )
            .join(' < ')
          restStacks.set(where, (restStacks.get(where) ?? 0) + 1)
        }
        if (part === 'store (every call)') {
          const at = trace.frames.findIndex((f) => f.sourceURL?.includes('/src/server/store/'))
          const own = trace.frames[at]!
          const builtIn = trace.frames
            .slice(0, at)
            .find((f) => !f.sourceURL?.startsWith('/') && f.name && !f.name.startsWith('#'))
          const where = `${builtIn ? `${builtIn.name} in ` : ''}${own.name || '(anonymous)'} (${own.sourceURL!.replace(/^.*\/src\/server\/store\//, '')}:${own.line ?? '?'})`
          storeStacks.set(where, (storeStacks.get(where) ?? 0) + 1)
        }
      }
    }
    const loadEnd = loadLine()

    const out: string[] = []
    out.push(
      `### ${new Date().toISOString().slice(0, 10)}: main-thread time per fleet-shaped ingest batch (SQLite store, in-process)`,
    )
    out.push('')
    out.push(
      `- Command: \`bun bench/ingest-cpu.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}\``,
    )
    out.push(`- Commit: ${commit}`)
    out.push(`- Machine: ${line}`)
    out.push(`- Load average (1/5/15 min) at start: ${loadStart}; at end: ${loadEnd}`)
    out.push(
      `- ${o.databases} databases, ${fmt(bytes / 1024)} KiB batches (bench/fleet.ts's, ${o.movingStatements} statements moving), ${o.warmup} warm-up cycles, ${o.cycles} measured (${batches} batches), ${o.profileCycles} profiled (a sample every ${o.sampleUs} µs)`,
    )
    out.push('')
    out.push('| per batch | mean ms | p50 ms | p90 ms | p99 ms |')
    out.push('|---|---:|---:|---:|---:|')
    out.push(
      `| request (app.handle, body read) | ${fmt(meanMs, 2)} | ${fmt(median(requestMs), 2)} | ${fmt(percentile(requestMs, 0.9), 2)} | ${fmt(percentile(requestMs, 0.99), 2)} |`,
    )
    out.push(
      `| ↳ store.ingest | ${fmt(meanStoreMs, 2)} | ${fmt(median(storeMs), 2)} | ${fmt(percentile(storeMs, 0.9), 2)} | ${fmt(percentile(storeMs, 0.99), 2)} |`,
    )
    const outside = requestMs.map((ms, i) => ms - storeMs[i]!)
    out.push(
      `| ↳ everything but store.ingest | ${fmt(meanMs - meanStoreMs, 2)} | ${fmt(median(outside), 2)} | ${fmt(percentile(outside, 0.9), 2)} | ${fmt(percentile(outside, 0.99), 2)} |`,
    )
    out.push('')
    out.push(
      `**Main-thread CPU per batch: ${fmt(threadMs, 2)} ms**${o.writer ? ' with the ingest writer (store.ingest runs in its thread: 0 here)' : ''} (its user + system time over the measured cycles, /proc/self/task); the process's, all threads (the checkpoint worker too): ${fmt((cpu.user + cpu.system) / 1000 / batches, 2)} ms; wall ${fmt(wallMs / batches, 2)} ms per batch (more than the CPU when the machine is busy).`,
    )
    if (sampled > 0) {
      out.push('')
      out.push(
        `Where the main thread's time goes (profiled cycles, ${fmt(sampled)} samples; ms = share × the main-thread CPU per batch, ${fmt(threadMs, 2)} ms):`,
      )
      out.push('')
      out.push('| part | samples | share | ms per batch |')
      out.push('|---|---:|---:|---:|')
      for (const part of PARTS) {
        const n = samples.get(part)!
        out.push(`| ${part} | ${fmt(n)} | ${fmt((100 * n) / sampled, 1)} % | ${fmt((threadMs * n) / sampled, 2)} |`)
      }
      const tables = [
        ['the rest', restStacks, 'the most sampled stacks (innermost three frames)', 'stack'],
        [
          'store (every call)',
          storeStacks,
          "by the store's innermost function (file:line), and the built-in it was in (run, all: SQLite executing a statement)",
          'where',
        ],
      ] as const
      for (const [part, stacks, what, column] of tables) {
        const top = [...stacks].sort((a, b) => b[1] - a[1]).slice(0, o.restTop)
        if (top.length === 0) continue
        out.push('')
        out.push(`${part}: ${what}; ${fmt(samples.get(part)!)} samples:`)
        out.push('')
        out.push(`| ${column} | samples | ms per batch |`)
        out.push('|---|---:|---:|')
        for (const [where, n] of top)
          out.push(`| ${where.replaceAll('|', '\\|')} | ${fmt(n)} | ${fmt((threadMs * n) / sampled, 2)} |`)
      }
    }
    if (sqlBatches > 0) {
      const rows = [...bySql].sort((a, b) => b[1].ms - a[1].ms)
      const sqlMs = rows.reduce((sum, [, e]) => sum + e.ms, 0)
      out.push('')
      out.push(
        `SQLite calls (${o.sqlCycles} cycles, ${sqlBatches} batches, each call timed, the API key's and organization's reads included): ${fmt(sqlMs / sqlBatches, 2)} ms per batch, against store.ingest's ${fmt(sqlIngestMs / sqlBatches, 2)} ms in the same cycles (wall; the rest of store.ingest is JavaScript; timing every call slows the store down, 1.1 to 2 times here, so the shares say more than the ms). The ${Math.min(o.sqlTop, rows.length)} costliest:`,
      )
      out.push('')
      out.push('| statement | calls per batch | ms per batch | share of the SQLite time | µs per call |')
      out.push('|---|---:|---:|---:|---:|')
      for (const [sql, e] of rows.slice(0, o.sqlTop)) {
        const text = sql.length > 110 ? `${sql.slice(0, 110)}…` : sql
        out.push(
          `| \`${text.replaceAll('|', '\\|').replaceAll('`', "'")}\` | ${fmt(e.calls / sqlBatches, 2)} | ${fmt(e.ms / sqlBatches, 3)} | ${fmt((100 * e.ms) / sqlMs, 1)} % | ${fmt((1000 * e.ms) / e.calls, 0)} |`,
        )
      }
    }
    console.log(out.join('\n'))
  } finally {
    await deps.ingestWriter?.close()
    await store.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

if (import.meta.main) await main()
