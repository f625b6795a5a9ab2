// A cycle's batch split into parts by the agent (src/agent/split.ts) must leave the store exactly as the
// whole batch does, on both stores: the same rows in every telemetry table (statement buckets and texts,
// table and index buckets, the latest tables and indexes, snapshots, internals, waits, plans), after an
// earlier cycle whose latest lists the new one replaces.
import { describe, expect, test } from 'bun:test'
import { type SplitLimits, splitBatch } from '../../src/agent/split.ts'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import { ingestMaxItems } from '../../src/shared/ingest-limits.ts'
import type { IndexStat, IngestBatch, TableStat } from '../../src/shared/wire.ts'
import { type StoreKind, storeKinds } from '../support/server.ts'
import { storeAccount } from '../support/store-account.ts'

const T0 = Math.floor(Date.now() / 60_000) * 60_000 - 30 * 60_000

/** Telemetry tables with a database_id, and the columns that tell their rows apart. */
const TABLES: Record<string, string> = {
  query_stats: 'resolution, bucket, query_hash',
  query_texts: 'query_hash',
  table_stats: 'schema_name, table_name, resolution, bucket',
  index_stats: 'schema_name, index_name, resolution, bucket',
  latest_tables: 'schema_name, table_name',
  latest_indexes: 'schema_name, index_name',
  snapshots: 'kind',
  internals_latest: 'kind',
  wait_stats: 'resolution, bucket, wait_event_type, wait_event',
  metric_counters: 'source, resolution, bucket, subject, metric',
  metric_gauges: 'source, resolution, bucket, subject, metric',
  explain_plans: 'query_hash, ts, plan_hash',
}

function table(i: number, seqScans: number): TableStat {
  const counters = {
    seq_scan: seqScans,
    seq_tup_read: 10 * i,
    idx_scan: i,
    idx_tup_fetch: 0,
    n_tup_ins: i,
    n_tup_upd: 0,
    n_tup_del: 0,
    n_tup_hot_upd: 0,
  }
  return {
    schema_name: 'public',
    table_name: `t${i}`,
    ...counters,
    n_live_tup: i,
    n_dead_tup: 1,
    last_vacuum: null,
    last_autovacuum: T0 - 3_600_000,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: 8192 * (i + 1),
    index_size_bytes: 16384,
    has_primary_key: true,
    autovacuum_enabled: true,
    delta: { ...counters, seq_scan: 1 },
  }
}

function index(i: number): IndexStat {
  return {
    schema_name: 'public',
    table_name: `t${i}`,
    index_name: `t${i}_pkey`,
    idx_scan: i,
    idx_tup_read: i,
    idx_tup_fetch: i,
    size_bytes: 16384,
    index_def: `CREATE UNIQUE INDEX t${i}_pkey ON public.t${i} USING btree (id)`,
    is_unique: true,
    is_primary: true,
    is_valid: true,
    delta: { idx_scan: 1, idx_tup_read: 1, idx_tup_fetch: 1 },
  }
}

function cycle(name: string, collectedAt: number, tables: number[]): IngestBatch {
  return {
    batch_id: `${name}-${collectedAt}-${crypto.randomUUID()}`,
    collected_at: collectedAt,
    interval_seconds: 60,
    agent_version: 'test',
    database: { name, engine: 'postgres', engine_version: '17.2', host: 'db.internal', port: 5432 },
    query_stats: Array.from({ length: 60 }, (_, i) => ({
      query_hash: `q${i}`,
      query_text: `SELECT * FROM t${i} WHERE note = 'ж😀' AND id = $1`,
      calls: i + 1,
      total_time_ms: (i * 37) % 101,
      rows: i,
      shared_blks_hit: 2 * i,
      shared_blks_read: 1,
    })),
    explain_plans: Array.from({ length: 4 }, (_, i) => ({
      query_hash: `q${i}`,
      ts: collectedAt,
      plan_json: [{ Plan: { 'Node Type': 'Seq Scan', 'Relation Name': `t${i}`, Padding: 'p'.repeat(1500) } }],
      plan_hash: `p${i}`,
      total_cost: 10,
      actual_time_ms: null,
      seq_scans: 1,
      index_scans: 0,
      rows_estimated: 5,
      rows_actual: null,
      source: 'sampled' as const,
    })),
    tables: tables.map((i) => table(i, collectedAt / 60_000 + i)),
    indexes: tables.map(index),
    activity: Array.from({ length: 12 }, (_, i) => ({
      pid: 100 + i,
      query_text: `UPDATE t${i} SET v = v + 1 -- ${'x'.repeat(300)}`,
      state: 'active',
      wait_event_type: null,
      wait_event: null,
      duration_ms: i * 10,
      blocking_pids: [],
    })),
    locks: [
      {
        pid: 100,
        lock_type: 'relation',
        mode: 'RowExclusiveLock',
        relation_name: 't1',
        granted: true,
        blocked_by_pid: null,
        duration_ms: 5,
        query_text: null,
      },
    ],
    sequences: [
      {
        schema_name: 'public',
        sequence_name: 's1',
        data_type: 'bigint',
        last_value: 5,
        max_value: 9e15,
        increment_by: 1,
        used_ratio: 0,
      },
    ],
    unindexed_foreign_keys: [],
    collector_notes: [{ collector: 'tables', message: '1 sequences unreadable (grant pg_read_all_data)' }],
    waits: [{ wait_event_type: 'Lock', wait_event: 'relation', count: 3, total_duration_ms: 3000 }],
    replication: {
      is_replica: false,
      replication_lag_bytes: null,
      replication_lag_seconds: null,
      upstream_host: null,
      replicas: [],
      slots: [],
    },
    bgwriter: { buffers_alloc: 12, checkpoints_timed: 1 },
    database_stats: { xact_commit: 40, xact_rollback: 1, numbackends: 7 },
  }
}

/** Every telemetry row of the database, without its id columns, in a stable order. */
async function contents(store: SqlStore, databaseId: string): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {}
  for (const [name, order] of Object.entries(TABLES)) {
    const rows = await store.driver.all(`SELECT * FROM ${name} WHERE database_id = $1 ORDER BY ${order}`, [databaseId])
    out[name] = rows.map(({ database_id, id, ...rest }) => rest)
  }
  return out
}

describe.each(storeKinds)('a split cycle reads back as the whole one (%s store)', (kind: StoreKind) => {
  const account = storeAccount(kind, 'Split Inc')

  test('same rows in every telemetry table, with the latest lists of the previous cycle replaced', async () => {
    const limits: SplitLimits = {
      maxBodyBytes: 8_000,
      maxItems: { ...ingestMaxItems, tables: 9, indexes: 11, query_stats: 25 },
    }
    const ids: Record<string, string> = {}
    for (const name of ['whole', 'split']) {
      // The earlier cycle had t30..t34 too, which the new one no longer reports.
      ids[name] = await account.ingest(cycle(name, T0 - 60_000, [...Array(35).keys()]), T0)
    }
    const { store, orgId } = account
    const current = (name: string) => cycle(name, T0, [...Array(30).keys()])
    expect((await store.ingest(orgId, current('whole'), T0 + 1000)).kind).toBe('applied')
    const split = splitBatch(current('split'), limits)
    expect(split.parts.length).toBeGreaterThan(5)
    expect(split.dropped).toEqual({})
    // Another order than the one sent in, to show that the order of the parts does not matter.
    for (const part of [...split.parts].reverse())
      expect((await store.ingest(orgId, part, T0 + 1000)).kind).toBe('applied')

    const whole = await contents(store, ids.whole!)
    const parted = await contents(store, ids.split!)
    expect(whole.latest_tables).toHaveLength(30)
    expect(whole.latest_indexes).toHaveLength(30)
    expect(whole.snapshots).toHaveLength(5)
    for (const name of Object.keys(TABLES)) expect({ [name]: parted[name] }).toEqual({ [name]: whole[name] })
  })
})
