// Store ingest cost (`bun bench/store-ingest.ts`): the time SqlStore.ingest takes for a real-shaped
// batch (test/support/agent-batch.ts: ~220 KB, 200 statements, 100 tables, 150 indexes, sessions, locks,
// waits, internals) on each store, with nothing else running: no HTTP, no validation, the store alone.
// One database, batches 10 s apart on the simulated clock (so spans close and roll up as in real
// traffic: a rollup every 10 minutes, a text refresh every 10 minutes), after warm-up batches. On
// PostgreSQL (the embedded server of the tests, on loopback) it also counts, at the driver, the
// statements each batch sends and the exchanges they take (a pipelined group is one exchange).
// Options: --batches N (measured), --warmup N, --moved PERCENT (tables whose counters move per cycle),
// --store sqlite|postgres|both, --shape issue|fleet. `issue` is the batch of issue 13 (all 200 statements
// moving, 20 I/O rows, 20 sequences); `fleet` is what the real agent sends for an idle-ish pgbench
// database (bench/fleet.ts's header): only the 30 statements that moved, 2 I/O rows, 96 sequences, and
// tables' vacuum and analyze times that stay put (with --moved 20: 20 tables and ~30 indexes move), and
// the internals counters that stay at zero there (bgwriter but buffers_alloc, 10 of an I/O row's 16...).
// Rows written per batch are counted on SQLite (total_changes(): rows inserted, updated or deleted); the
// PostgreSQL store runs the same statements.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../src/server/store/open.ts'
import type { PostgresDriver } from '../src/server/store/postgres/driver.ts'
import type { SqlStore } from '../src/server/store/sql-store.ts'
import { BGWRITER_KEYS, DATABASE_COUNTER_KEYS, IO_KEYS, WAL_KEYS } from '../src/shared/metrics.ts'
import type { IngestBatch } from '../src/shared/wire.ts'
import { REAL_SHAPE, agentBatch } from '../test/support/agent-batch.ts'
import { sharedPostgres, stopSharedPostgres } from '../test/support/postgres.ts'
import { fmt, machine, median, parseArgs, percentile } from './common.ts'

interface Options {
  batches: number
  warmup: number
  moved: number
  store: string
  shape: string
}

interface Result {
  store: string
  msPerBatch: number[]
  statements: number[]
  exchanges: number[]
  rows: number[]
  bytes: number
}

/** Counters bench/fleet.ts's batch (the real agent's, for an idle-ish pgbench database) has at zero or null every cycle. */
const QUIET: Record<string, 0 | null> = {
  ...Object.fromEntries(
    [
      'checkpoints_timed',
      'checkpoints_req',
      'checkpoint_write_time_ms',
      'checkpoint_sync_time_ms',
      'buffers_checkpoint',
      'buffers_clean',
      'maxwritten_clean',
      'restartpoints_timed',
      'restartpoints_req',
      'restartpoints_done',
    ].map((k) => [k, 0]),
  ),
  buffers_backend: null,
  buffers_backend_fsync: null,
  ...Object.fromEntries(['wal_buffers_full', 'wal_write_time_ms', 'wal_sync_time_ms'].map((k) => [k, 0])),
  ...Object.fromEntries(
    [
      'writes',
      'evictions',
      'fsyncs',
      'writebacks',
      'read_time_ms',
      'write_time_ms',
      'extend_time_ms',
      'fsync_time_ms',
      'writeback_time_ms',
      'write_bytes',
    ].map((k) => [k, 0]),
  ),
  reuses: null,
  ...Object.fromEntries(
    ['xact_rollback', 'tup_deleted', 'conflicts', 'temp_files', 'temp_bytes', 'deadlocks'].map((k) => [k, 0]),
  ),
}
/** The counters with the quiet ones at zero (or null), the others at least 1. */
const quieted = <T extends Record<string, number | null>>(counters: T, keys: readonly string[]): T =>
  ({
    ...counters,
    ...Object.fromEntries(keys.map((k) => [k, k in QUIET ? QUIET[k] : Math.max(1, counters[k] ?? 1)])),
  }) as T

/** The `fleet` shape (see the header) made from the issue's batch. */
function fleetShaped(batch: IngestBatch, start: number): IngestBatch {
  const sequences = batch.sequences ?? []
  return {
    ...batch,
    query_stats: batch.query_stats?.slice(0, 30),
    io_stats: batch.io_stats?.slice(0, 2).map((row) => ({ ...row, counters: quieted(row.counters, IO_KEYS) })),
    bgwriter: batch.bgwriter && quieted(batch.bgwriter, BGWRITER_KEYS),
    wal_stats: batch.wal_stats && quieted(batch.wal_stats, WAL_KEYS),
    database_stats: batch.database_stats && quieted(batch.database_stats, DATABASE_COUNTER_KEYS),
    sequences: Array.from({ length: 96 }, (_, i) => ({
      ...sequences[i % sequences.length]!,
      sequence_name: `app_t${i}_id_seq`,
    })),
    tables: batch.tables?.map((t, i) => ({
      ...t,
      last_autovacuum: start - (i + 1) * 3_600_000,
      last_autoanalyze: start - (i + 1) * 1_800_000,
    })),
  }
}

async function measure(kind: 'sqlite' | 'postgres', o: Options): Promise<Result> {
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-bench-store-ingest-'))
  const databaseUrl = kind === 'postgres' ? await (await sharedPostgres()).freshDatabase() : undefined
  let store: SqlStore | undefined
  try {
    store = (await openStore({ dataDir, databaseUrl })).store
    const { org } = await store.createAccount({
      org: { name: 'Bench', slug: `bench-${Date.now()}`, plan: 'free' },
      user: { email: `bench-${Date.now()}@example.com`, name: 'Bench', passwordHash: 'hash', role: 'owner' },
    })
    const sent = kind === 'postgres' ? (store.driver as PostgresDriver).sent : undefined
    const start = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 6 * 3_600_000
    const shape = { ...REAL_SHAPE, moved: (i: number) => (i * 37) % 100 < o.moved }
    const result: Result = { store: kind, msPerBatch: [], statements: [], exchanges: [], rows: [], bytes: 0 }
    const changes = store.driver.generation
    for (let k = 0; k < o.warmup + o.batches; k++) {
      const collectedAt = start + k * 10_000
      const issueBatch = agentBatch('bench', collectedAt, k, shape)
      const batch = o.shape === 'fleet' ? fleetShaped(issueBatch, start) : issueBatch
      if (k === 0) result.bytes = JSON.stringify(batch).length
      const before = sent ? { ...sent } : undefined
      const changedBefore = changes?.()
      const t0 = performance.now()
      const outcome = await store.ingest(org.id, batch, collectedAt + 1_000)
      const ms = performance.now() - t0
      if (outcome.kind !== 'applied') throw new Error(`batch ${k}: ${outcome.kind}`)
      if (k < o.warmup) continue
      result.msPerBatch.push(ms)
      const changedAfter = changes?.()
      if (changedBefore !== undefined && changedAfter !== undefined) result.rows.push(changedAfter - changedBefore)
      if (sent && before) {
        result.statements.push(sent.statements - before.statements)
        result.exchanges.push(sent.exchanges - before.exchanges)
      }
    }
    return result
  } finally {
    await store?.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

async function main(): Promise<void> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    { batches: 300, warmup: 30, moved: 100, store: 'both', shape: 'issue' },
    {
      batches: [1, 100_000],
      warmup: [0, 10_000],
      moved: [0, 100],
      store: ['sqlite', 'postgres', 'both'],
      shape: ['issue', 'fleet'],
    },
  )
  const kinds = o.store === 'both' ? (['sqlite', 'postgres'] as const) : ([o.store] as ['sqlite' | 'postgres'])
  const results: Result[] = []
  try {
    for (const kind of kinds) results.push(await measure(kind, o))
  } finally {
    await stopSharedPostgres()
  }
  const m = await machine()
  const counts = (xs: number[]) =>
    xs.length === 0 ? 'n/a' : `${fmt(median(xs))} (min ${fmt(Math.min(...xs))}, max ${fmt(Math.max(...xs))})`
  console.log(
    [
      `- Command: \`${['bun bench/store-ingest.ts', ...process.argv.slice(2)].join(' ')}\``,
      `- Commit: ${m.commit}; machine: ${m.line}`,
      `- Batch: ${o.shape} shape, ${fmt(results[0]!.bytes / 1024)} KiB of JSON, ${o.moved}% of tables moved per cycle; ${o.warmup} warm-up batches, ${o.batches} measured, 10 s apart`,
      ...results
        .filter((r) => r.rows.length > 0)
        .map(
          (r) =>
            `- Rows written per batch (${r.store}, total_changes()): median ${counts(r.rows)}, mean ${fmt(r.rows.reduce((a, b) => a + b, 0) / r.rows.length, 1)}`,
        ),
      ``,
      `| store | median ms | p90 ms | p99 ms | statements per batch | exchanges per batch |`,
      `|---|---:|---:|---:|---:|---:|`,
      ...results.map(
        (r) =>
          `| ${r.store} | ${fmt(median(r.msPerBatch), 2)} | ${fmt(percentile(r.msPerBatch, 0.9), 2)} | ${fmt(percentile(r.msPerBatch, 0.99), 2)} | ${counts(r.statements)} | ${counts(r.exchanges)} |`,
      ),
    ].join('\n'),
  )
}

if (import.meta.main) await main()
