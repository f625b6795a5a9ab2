// Where a PostgreSQL-store ingest's time goes (`bun bench/store-ingest-pg.ts`): SqlStore.ingest of bench/fleet.ts's
// batches (the real agent's shape for an idle-ish pgbench database: ~146 KB, 30 of 200 statements moving,
// 100 tables and 150 indexes of which ~20 and ~14 move, 96 sequences, sessions, locks, waits, internals)
// for `--databases` databases in rotation, on an embedded PostgreSQL 17 (test/support/postgres.ts, with
// pg_stat_statements), in this process: no HTTP, no validation, the store alone.
//
// Method
// - Each variant gets a fresh database of the same server and its own store (openStore); `--base DIR` adds
//   the store code of another checkout (DIR/src/server/store) as variant `base`, so old and new code run in
//   the same process on the same server, taking turns batch by batch (base, this, base, ...: the same
//   machine load for both). Batches are 10 s apart on a simulated clock; `--warmup` cycles are not measured.
// - Per batch, by wrapping the driver's transaction and the transaction's statements: wall time of the whole
//   ingest; of opening the transaction (connection, BEGIN and the lock); of each exchange inside it
//   (get/run/all/runAll, awaited); of COMMIT; and the process's CPU time (user + system) across the
//   exchanges, which is postgres.js serialising parameters and parsing answers (the rest of the exchange is
//   the server and waiting). JS = the whole minus all of those (building statements and rows, comparing).
// - Server execution: pg_stat_statements of each variant's database (reset after the warm-up), total
//   execution time per batch, and the statements that take most of it.
// - `--async-commit 1` adds variant `this, synchronous_commit off`: this code on a database set to
//   `synchronous_commit = off` (ALTER DATABASE, before the store connects), what ingest would cost if the
//   store's COMMIT did not wait for its WAL flush (a crash could lose the last moments' acknowledged batches).
// Options: --databases N (default 20), --cycles N (measured, default 15), --warmup N (cycles, default 3),
// --base DIR, --async-commit 0|1, --top N (statements listed per variant, default 12).
import { join } from 'node:path'
import postgres from 'postgres'
import type { SqlDriver } from '../src/server/store/driver.ts'
import type { SqlStore } from '../src/server/store/sql-store.ts'
import type { IngestBatch } from '../src/shared/wire.ts'
import { sharedPostgres, stopSharedPostgres } from '../test/support/postgres.ts'
import { fmt, machine, median, parseArgs } from './common.ts'
import { SimulatedDatabase } from './fleet.ts'

interface Options {
  databases: number
  cycles: number
  warmup: number
  base: string
  asyncCommit: number
  top: number
}

interface Sample {
  total: number
  begin: number
  exchanges: number
  /** The first exchange in the transaction (the database's row, the batch's record, the reads). */
  first: number
  exchangeCpu: number
  commit: number
  count: number
}

interface Variant {
  label: string
  store: SqlStore
  orgId: string
  url: string
  samples: Sample[]
  current?: Sample
}

const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/** The driver with its transactions timed into `variant.current`. */
function instrument(variant: Variant): void {
  const driver = variant.store.driver as SqlDriver
  const transaction = driver.transaction.bind(driver)
  driver.transaction = (async (fn: (tx: SqlDriver) => Promise<unknown>, lockKey?: string) => {
    const s = variant.current
    if (!s) return transaction(fn, lockKey)
    const t0 = performance.now()
    let end = 0
    const result = await transaction(async (tx) => {
      s.begin += performance.now() - t0
      const timed = <F extends (...args: any[]) => Promise<unknown>>(f: F): F =>
        (async (...args: unknown[]) => {
          const [w, c] = [performance.now(), cpuMs()]
          try {
            return await f(...args)
          } finally {
            if (s.count === 0) s.first = performance.now() - w
            s.exchanges += performance.now() - w
            s.exchangeCpu += cpuMs() - c
            s.count++
          }
        }) as F
      const r = await fn({
        ...tx,
        get: timed(tx.get),
        all: timed(tx.all),
        run: timed(tx.run),
        runAll: timed(tx.runAll),
        ...(tx.runLast ? { runLast: timed(tx.runLast) } : {}),
      })
      end = performance.now()
      return r
    }, lockKey)
    s.commit += performance.now() - end
    return result
  }) as SqlDriver['transaction']
}

async function variant(label: string, root: string, url: string, dataDir: string): Promise<Variant> {
  const { openStore } = (await import(
    join(root, 'src/server/store/open.ts')
  )) as typeof import('../src/server/store/open.ts')
  const { store } = await openStore({ dataDir, databaseUrl: url })
  const { org } = await store.createAccount({
    org: { name: 'Bench', slug: `bench-${label.replace(/[^a-z]+/g, '-')}`, plan: 'free' },
    user: {
      email: `bench-${label.replace(/[^a-z]+/g, '-')}@bench.invalid`,
      name: 'Bench',
      passwordHash: 'hash',
      role: 'owner',
    },
  })
  const v: Variant = { label, store, orgId: org.id, url, samples: [] }
  instrument(v)
  return v
}

async function serverTimes(admin: postgres.Sql, url: string, batches: number, limit: number) {
  const dbname = new URL(url).pathname.slice(1)
  const rows = await admin.unsafe(
    `SELECT s.query, s.calls, s.total_exec_time, s.total_plan_time FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
     WHERE d.datname = $1 AND s.query NOT LIKE '%pg_stat_statements%' ORDER BY s.total_exec_time DESC`,
    [dbname],
  )
  const total = rows.reduce((a, r) => a + Number(r.total_exec_time) + Number(r.total_plan_time), 0)
  const top = rows.slice(0, limit).map((r) => ({
    query: String(r.query).replace(/\s+/g, ' ').slice(0, 90),
    ms: Number(r.total_exec_time) / batches,
    calls: Number(r.calls) / batches,
  }))
  return { perBatch: total / batches, top }
}

async function main(): Promise<void> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    { databases: 20, cycles: 15, warmup: 3, base: '', asyncCommit: 0, top: 12 },
    { databases: [1, 500], cycles: [1, 1000], warmup: [0, 100], asyncCommit: [0, 1], top: [1, 100] },
  )
  const server = await sharedPostgres(17)
  const { mkdtempSync, rmSync } = await import('node:fs')
  const dir = mkdtempSync(join((await import('node:os')).tmpdir(), 'dbm-bench-pg-ingest-'))
  const variants: Variant[] = []
  let admin: postgres.Sql | undefined
  try {
    if (o.base) variants.push(await variant('base', o.base, await server.freshDatabase(), join(dir, 'base')))
    variants.push(await variant('this', join(import.meta.dir, '..'), await server.freshDatabase(), join(dir, 'this')))
    admin = postgres(variants[0]!.url, { max: 1, onnotice: () => {} })
    if (o.asyncCommit) {
      const url = await server.freshDatabase()
      await admin.unsafe(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET synchronous_commit = off`)
      variants.push(await variant('this, synchronous_commit off', join(import.meta.dir, '..'), url, join(dir, 'async')))
    }
    await admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    const sims = variants.map(() => Array.from({ length: o.databases }, (_, i) => new SimulatedDatabase(i, 30, 'pg')))
    const start = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 6 * 3_600_000
    let bytes = 0
    for (let k = 0; k < o.warmup + o.cycles; k++) {
      if (k === o.warmup) await admin`SELECT pg_stat_statements_reset()`
      for (let d = 0; d < o.databases; d++) {
        const now = start + k * 10_000 + d * 10
        for (let v = 0; v < variants.length; v++) {
          const variant = variants[(v + k + d) % variants.length]!
          const text = sims[variants.indexOf(variant)]![d]!.next(now)
          bytes = text.length
          const batch = JSON.parse(text) as IngestBatch
          const sample: Sample = { total: 0, begin: 0, exchanges: 0, first: 0, exchangeCpu: 0, commit: 0, count: 0 }
          variant.current = sample
          const t0 = performance.now()
          const outcome = await variant.store.ingest(variant.orgId, batch, now + 1_000)
          sample.total = performance.now() - t0
          variant.current = undefined
          if (outcome.kind !== 'applied') throw new Error(`${variant.label}: ${outcome.kind}`)
          if (k >= o.warmup) variant.samples.push(sample)
        }
      }
    }
    const batches = o.cycles * o.databases
    const m = await machine()
    const out = [
      `- Command: \`${['bun bench/store-ingest-pg.ts', ...process.argv.slice(2)].join(' ')}\``,
      `- Commit: ${m.commit}; machine: ${m.line}`,
      `- Batch: bench/fleet.ts's, ${fmt(bytes / 1024)} KiB; ${o.databases} databases in rotation, ${o.warmup} warm-up and ${o.cycles} measured cycles (${batches} batches per variant)`,
      '',
      '| variant | ingest median ms | p90 | open tx (BEGIN, lock) | exchanges in tx (n) | of which the first | client CPU in exchanges | COMMIT | JS | server exec per batch (pg_stat_statements) |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ]
    const tops: string[] = []
    for (const v of variants) {
      const med = (f: (s: Sample) => number) => fmt(median(v.samples.map(f)), 2)
      const sorted = v.samples.map((s) => s.total).sort((a, b) => a - b)
      const server = await serverTimes(admin, v.url, batches, o.top)
      out.push(
        `| ${v.label} | ${med((s) => s.total)} | ${fmt(sorted[Math.floor(sorted.length * 0.9)]!, 2)} | ${med((s) => s.begin)} | ${med((s) => s.exchanges)} (${median(v.samples.map((s) => s.count))}) | ${med((s) => s.first)} | ${med((s) => s.exchangeCpu)} | ${med((s) => s.commit)} | ${med((s) => s.total - s.begin - s.exchanges - s.commit)} | ${fmt(server.perBatch, 2)} |`,
      )
      tops.push(
        '',
        `Server execution per batch, variant ${v.label} (ms, calls):`,
        '',
        '| statement | ms | calls |',
        '|---|---:|---:|',
        ...server.top.map((t) => `| \`${t.query.replaceAll('|', '\\|')}\` | ${fmt(t.ms, 3)} | ${fmt(t.calls, 2)} |`),
      )
    }
    console.log([...out, ...tops].join('\n'))
  } finally {
    await admin?.end()
    for (const v of variants) await v.store.close()
    await stopSharedPostgres()
    rmSync(dir, { recursive: true, force: true })
  }
}

if (import.meta.main) await main()
