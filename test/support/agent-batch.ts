// A real-shaped PostgreSQL batch, as the agent sends one for a pgbench-like database every cycle
// (about 220 KB of JSON): 200 statements, 100 tables, 150 indexes, sessions, locks, waits, sequences,
// unindexed foreign keys and the internals sections (bgwriter, WAL, I/O, database statistics,
// replication). Counters are deltas; cycle k's values are a function of k, so two runs build the same
// batches. Used by the store's round-trip test and its measurement script (bench/store-ingest.ts).
import {
  BGWRITER_KEYS,
  DATABASE_COUNTER_KEYS,
  DATABASE_GAUGE_KEYS,
  IO_KEYS,
  WAL_KEYS,
} from '../../src/shared/metrics.ts'
import type { IndexStat, IngestBatch, QueryStatDelta, TableStat } from '../../src/shared/wire.ts'

export interface AgentBatchShape {
  statements: number
  tables: number
  indexes: number
  /** Whether table i's counters moved this cycle (a delta of zeros otherwise); all by default. */
  moved?: (table: number) => boolean
  /** Deltas null (the agent's first sample of each object); false by default. */
  firstSample?: boolean
}

export const REAL_SHAPE: AgentBatchShape = { statements: 200, tables: 100, indexes: 150 }

const COLUMNS = ['aid', 'bid', 'tid', 'abalance', 'filler', 'mtime', 'delta', 'note']

function statementText(i: number): string {
  const table = `pgbench_t${i % 100}`
  const cols = COLUMNS.slice(0, 2 + (i % 6)).join(', ')
  switch (i % 4) {
    case 0:
      return `SELECT ${cols} FROM public.${table} WHERE aid = $1 AND bid = $2 ORDER BY mtime DESC LIMIT $3 /* app=web route=/accounts/:id step=${i} */`
    case 1:
      return `UPDATE public.${table} SET abalance = abalance + $1, mtime = now() WHERE aid = $2 AND abalance > $3 RETURNING ${cols} /* app=worker job=settle step=${i} */`
    case 2:
      return `INSERT INTO public.${table} (${cols}) VALUES (${COLUMNS.slice(0, 2 + (i % 6))
        .map((_, k) => `$${k + 1}`)
        .join(', ')}) ON CONFLICT (aid) DO NOTHING /* app=ingest step=${i} */`
    default:
      return `WITH recent AS (SELECT ${cols} FROM public.${table} WHERE mtime > now() - $1::interval AND bid = ANY($2)) SELECT bid, count(*), sum(abalance) FROM recent GROUP BY bid ORDER BY 2 DESC /* app=report step=${i} */`
  }
}

function statements(n: number, cycle: number): QueryStatDelta[] {
  return Array.from({ length: n }, (_, i) => {
    const calls = 1 + ((i + cycle) % 40)
    return {
      query_hash: String(-4_000_000_000_000_000_000n + BigInt(i) * 7_919_000_000_000n),
      query_text: statementText(i),
      calls,
      total_time_ms: Number((calls * (0.04 + (i % 50) * 0.011)).toFixed(6)),
      rows: calls * (i % 9),
      shared_blks_hit: calls * (4 + (i % 13)),
      shared_blks_read: (i + cycle) % 4,
      shared_blks_dirtied: i % 5 === 0 ? 1 : 0,
      shared_blks_written: 0,
      temp_blks_read: 0,
      temp_blks_written: i % 50 === 0 ? 8 : 0,
      blk_read_time_ms: ((i + cycle) % 4) * 0.017,
      blk_write_time_ms: 0,
    }
  })
}

function tables(shape: AgentBatchShape, collectedAt: number, cycle: number): TableStat[] {
  return Array.from({ length: shape.tables }, (_, i) => {
    const moved = shape.moved ? shape.moved(i) : true
    const step = moved ? 1 + (i % 7) : 0
    const delta = {
      seq_scan: moved && i % 10 === 0 ? 1 : 0,
      seq_tup_read: moved && i % 10 === 0 ? 1000 + i : 0,
      idx_scan: 3 * step,
      idx_tup_fetch: 3 * step,
      n_tup_ins: step,
      n_tup_upd: 2 * step,
      n_tup_del: moved && i % 3 === 0 ? 1 : 0,
      n_tup_hot_upd: step,
    }
    const total = (k: number) => 1_000_000 + i * 1_000 + cycle * k
    return {
      schema_name: 'public',
      table_name: `pgbench_t${i}`,
      seq_scan: total(delta.seq_scan),
      seq_tup_read: total(delta.seq_tup_read),
      idx_scan: total(delta.idx_scan),
      idx_tup_fetch: total(delta.idx_tup_fetch),
      n_tup_ins: total(delta.n_tup_ins),
      n_tup_upd: total(delta.n_tup_upd),
      n_tup_del: total(delta.n_tup_del),
      n_tup_hot_upd: total(delta.n_tup_hot_upd),
      n_live_tup: 100_000 + i * 10 + (moved ? cycle : 0),
      n_dead_tup: (i * 7 + (moved ? cycle : 0)) % 500,
      last_vacuum: null,
      last_autovacuum: collectedAt - (i + 1) * 3_600_000,
      last_analyze: null,
      last_autoanalyze: collectedAt - (i + 1) * 1_800_000,
      table_size_bytes: 8192 * (1_000 + i * 13),
      index_size_bytes: 8192 * (200 + i * 3),
      has_primary_key: i % 17 !== 0,
      autovacuum_enabled: i % 29 !== 0,
      delta: shape.firstSample ? null : delta,
    }
  })
}

function indexes(shape: AgentBatchShape, cycle: number): IndexStat[] {
  return Array.from({ length: shape.indexes }, (_, i) => {
    const table = i % shape.tables
    const moved = shape.moved ? shape.moved(table) : true
    const step = moved ? 1 + (i % 5) : 0
    const primary = i < shape.tables
    const name = primary ? `pgbench_t${table}_pkey` : `pgbench_t${table}_bid_mtime_idx`
    return {
      schema_name: 'public',
      table_name: `pgbench_t${table}`,
      index_name: name,
      idx_scan: 5_000 + i * 11 + cycle * step,
      idx_tup_read: 9_000 + i * 17 + cycle * 2 * step,
      idx_tup_fetch: 8_000 + i * 13 + cycle * step,
      size_bytes: 8192 * (100 + i * 2),
      index_def: primary
        ? `CREATE UNIQUE INDEX ${name} ON public.pgbench_t${table} USING btree (aid)`
        : `CREATE INDEX ${name} ON public.pgbench_t${table} USING btree (bid, mtime DESC) WHERE (abalance > 0)`,
      is_unique: primary,
      is_primary: primary,
      is_valid: true,
      delta: shape.firstSample ? null : { idx_scan: step, idx_tup_read: 2 * step, idx_tup_fetch: step },
    }
  })
}

const numbers = (keys: readonly string[], cycle: number, scale: number) =>
  Object.fromEntries(keys.map((k, i) => [k, ((i + cycle) % 7) * scale]))

/** Cycle `cycle` of database `name` collected at `collectedAt`. */
export function agentBatch(
  name: string,
  collectedAt: number,
  cycle: number,
  shape: AgentBatchShape = REAL_SHAPE,
): IngestBatch {
  const sessions = Array.from({ length: 12 }, (_, i) => ({
    pid: 40_000 + i,
    query_text: statementText(i * 3).replace(/\$\d+/g, String(i)),
    state: i % 3 === 0 ? 'idle in transaction' : 'active',
    wait_event_type: i % 4 === 0 ? 'Lock' : i % 4 === 1 ? 'IO' : null,
    wait_event: i % 4 === 0 ? 'transactionid' : i % 4 === 1 ? 'DataFileRead' : null,
    duration_ms: 15 + i * 41,
    blocking_pids: i % 4 === 0 ? [40_001] : [],
    user: 'app',
    application_name: `pgbench-${i % 3}`,
    client_addr: `10.0.0.${10 + i}`,
    database: 'app',
    backend_type: 'client backend',
    xact_start: collectedAt - 1_000 * (i + 1),
  }))
  return {
    batch_id: `${name}-${cycle}-${crypto.randomUUID()}`,
    collected_at: collectedAt,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name, engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
    query_stats: statements(shape.statements, cycle),
    activity: sessions,
    locks: Array.from({ length: 10 }, (_, i) => ({
      pid: 40_000 + i,
      lock_type: i % 2 ? 'transactionid' : 'relation',
      mode: i % 3 ? 'RowExclusiveLock' : 'ShareLock',
      relation_name: i % 2 ? null : `public.pgbench_t${i}`,
      granted: i !== 0,
      blocked_by_pid: i === 0 ? 40_001 : null,
      duration_ms: 100 + i * 7,
      query_text: statementText(i),
    })),
    waits: [
      ['Lock', 'transactionid'],
      ['LWLock', 'WALWrite'],
      ['IO', 'DataFileRead'],
      ['IO', 'WALSync'],
      ['Client', 'ClientRead'],
      ['IPC', 'ProcArrayGroupUpdate'],
      ['Activity', 'WalWriterMain'],
      ['Timeout', 'VacuumDelay'],
    ].map(([type, event], i) => ({
      wait_event_type: type!,
      wait_event: event!,
      count: 1 + ((i + cycle) % 5),
      total_duration_ms: 1_000 * (1 + ((i + cycle) % 5)),
      minute: Math.floor(collectedAt / 60_000) * 60_000,
    })),
    tables: tables(shape, collectedAt, cycle),
    indexes: indexes(shape, cycle),
    sequences: Array.from({ length: 20 }, (_, i) => ({
      schema_name: 'public',
      sequence_name: `pgbench_t${i}_aid_seq`,
      data_type: 'bigint',
      last_value: 100_000 + i + cycle,
      max_value: 2 ** 63,
      increment_by: 1,
      used_ratio: (100_000 + i) / 9.2e18,
      owned_by: { schema_name: 'public', table_name: `pgbench_t${i}`, column_name: 'aid', column_type: 'bigint' },
    })),
    unindexed_foreign_keys: Array.from({ length: 3 }, (_, i) => ({
      schema_name: 'public',
      table_name: `pgbench_t${i + 50}`,
      constraint_name: `pgbench_t${i + 50}_bid_fkey`,
      columns: ['bid'],
      referenced_table: 'public.pgbench_branches',
      table_size_bytes: 8192 * 1_000,
      n_live_tup: 100_000,
    })),
    replication: {
      is_replica: false,
      replication_lag_bytes: null,
      replication_lag_seconds: null,
      upstream_host: null,
      replicas: [],
      slots: [],
    },
    bgwriter: numbers(BGWRITER_KEYS, cycle, 3),
    wal_stats: numbers(WAL_KEYS, cycle, 1_000),
    io_stats: ['client backend', 'autovacuum worker', 'checkpointer', 'background writer', 'walsender'].flatMap(
      (backend, b) =>
        ['relation', 'temp relation'].flatMap((object) =>
          ['normal', 'vacuum'].map((context, c) => ({
            backend_type: backend,
            object,
            context,
            counters: numbers(IO_KEYS, cycle + b + c, 5),
          })),
        ),
    ),
    database_stats: { ...numbers(DATABASE_COUNTER_KEYS, cycle, 100), ...numbers(DATABASE_GAUGE_KEYS, 0, 1) },
    collector_notes: [],
  }
}
