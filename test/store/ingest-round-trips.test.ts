// Ingest on both stores sends a batch's writes together (ingest/batch.ts): on PostgreSQL a fixed number of
// statements and exchanges per batch, counted at the driver, whatever the number of rows (one unnest
// statement per section instead of multi-row VALUES cut into chunks); and what reads give back after
// ingest is exact: statement sums, the latest tables and indexes, their minute and hourly series,
// waits and metric series, with a batch that repeats a statement, a table and an index, a batch where
// only some tables moved, and a late batch that adds to the buckets but leaves the latest rows alone.
import { beforeAll, describe, expect, test } from 'bun:test'
import type { PostgresDriver } from '../../src/server/store/postgres/driver.ts'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import { INGEST_COLUMN_TYPES } from '../../src/server/store/ingest/batch.ts'
import type { IndexStat, IngestBatch, TableStat } from '../../src/shared/wire.ts'
import { REAL_SHAPE, agentBatch } from '../support/agent-batch.ts'
import { type StoreKind, storeKinds } from '../support/server.ts'
import { storeAccount } from '../support/store-account.ts'

const MINUTE = 60_000
const HOUR = 3_600_000
/** An hour boundary 5 hours back, so every bucket written is closed and inside a 24-hour window. */
const T0 = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR

const counters = (seqScan: number, ins: number) => ({
  seq_scan: seqScan,
  seq_tup_read: 10 * seqScan,
  idx_scan: 0,
  idx_tup_fetch: 0,
  n_tup_ins: ins,
  n_tup_upd: 0,
  n_tup_del: 0,
  n_tup_hot_upd: 0,
})

function table(name: string, liveTuples: number, delta: ReturnType<typeof counters> | null): TableStat {
  return {
    schema_name: 'public',
    table_name: name,
    ...counters(100, 1000),
    n_live_tup: liveTuples,
    n_dead_tup: 3,
    last_vacuum: null,
    last_autovacuum: null,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: 81_920,
    index_size_bytes: 16_384,
    has_primary_key: true,
    autovacuum_enabled: name !== 'b',
    delta,
  }
}

function index(
  name: string,
  scans: number,
  delta: { idx_scan: number; idx_tup_read: number; idx_tup_fetch: number } | null,
): IndexStat {
  return {
    schema_name: 'public',
    table_name: name.replace('_pkey', ''),
    index_name: name,
    idx_scan: scans,
    idx_tup_read: 2 * scans,
    idx_tup_fetch: scans,
    size_bytes: 16_384,
    index_def: `CREATE UNIQUE INDEX ${name} ON public.${name.replace('_pkey', '')} USING btree (id)`,
    is_unique: true,
    is_primary: true,
    is_valid: true,
    delta,
  }
}

function batch(collectedAt: number, sections: Partial<IngestBatch>): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: collectedAt,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name: 'exact', engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
    ...sections,
  }
}

const stat = (hash: string, calls: number, rows: number) => ({
  query_hash: hash,
  query_text: `SELECT ${hash}`,
  calls,
  total_time_ms: calls * 1.5,
  rows,
  shared_blks_hit: calls,
  shared_blks_read: 0,
})

describe.each(storeKinds)('ingest in a few round trips (%s store)', (kind: StoreKind) => {
  const account = storeAccount(kind, 'Trips Inc')
  let store: SqlStore
  beforeAll(() => {
    store = account.store
  })

  const ingest = (b: IngestBatch, now?: number): Promise<string> => account.ingest(b, now)

  test('reads after ingest are exact: repeated objects, tables that did not move, a late batch', async () => {
    // First cycle (the agent's first sample: deltas null), then two cycles in the next minute where only
    // `a` moved, the second naming statement q1, table a and index a_pkey twice (summed), then a late
    // batch from the minute before the first one.
    const id = await ingest(
      batch(T0 + 5_000, {
        query_stats: [stat('q1', 2, 20), stat('q2', 1, 1)],
        tables: [table('a', 500, null), table('b', 700, null)],
        indexes: [index('a_pkey', 40, null), index('b_pkey', 70, null)],
        waits: [{ wait_event_type: 'Lock', wait_event: 'relation', count: 2, total_duration_ms: 2_000 }],
        bgwriter: { buffers_alloc: 5 },
        database_stats: { xact_commit: 9, numbackends: 4 },
      }),
    )
    await ingest(
      batch(T0 + MINUTE + 5_000, {
        query_stats: [stat('q1', 3, 30)],
        tables: [table('a', 510, counters(1, 10)), table('b', 700, counters(0, 0))],
        indexes: [
          index('a_pkey', 45, { idx_scan: 5, idx_tup_read: 10, idx_tup_fetch: 5 }),
          index('b_pkey', 70, { idx_scan: 0, idx_tup_read: 0, idx_tup_fetch: 0 }),
        ],
        waits: [{ wait_event_type: 'Lock', wait_event: 'relation', count: 1, total_duration_ms: 500 }],
        bgwriter: { buffers_alloc: 7 },
        database_stats: { xact_commit: 4, numbackends: 6 },
      }),
    )
    await ingest(
      batch(T0 + MINUTE + 15_000, {
        query_stats: [stat('q1', 1, 10), stat('q1', 4, 40), stat('q2', 2, 2)],
        tables: [table('a', 515, counters(2, 3)), table('a', 520, counters(1, 1)), table('b', 700, counters(0, 0))],
        indexes: [
          index('a_pkey', 47, { idx_scan: 1, idx_tup_read: 2, idx_tup_fetch: 1 }),
          index('a_pkey', 48, { idx_scan: 1, idx_tup_read: 2, idx_tup_fetch: 1 }),
          index('b_pkey', 70, { idx_scan: 0, idx_tup_read: 0, idx_tup_fetch: 0 }),
        ],
        waits: [{ wait_event_type: 'Lock', wait_event: 'relation', count: 4, total_duration_ms: 1_000 }],
        bgwriter: { buffers_alloc: 1 },
        database_stats: { xact_commit: 1, numbackends: 8 },
      }),
    )
    // Late: collected before the others (the agent's buffer delivering it after a gap).
    await ingest(
      batch(T0 - MINUTE + 30_000, {
        query_stats: [stat('q2', 10, 100)],
        tables: [table('c', 1, counters(7, 7))],
        indexes: [index('c_pkey', 1, { idx_scan: 9, idx_tup_read: 9, idx_tup_fetch: 9 })],
        bgwriter: { buffers_alloc: 100 },
      }),
      T0 + 2 * MINUTE,
    )

    const window = { since: T0 - HOUR, until: T0 + HOUR }
    const statements = await store.listQueryStats(id, window, 'calls', 10)
    expect(
      statements.map((s) => ({ hash: s.query_hash, calls: s.total_calls, rows: s.total_rows, time: s.total_time_ms })),
    ).toEqual([
      { hash: 'q2', calls: 13, rows: 103, time: 19.5 },
      { hash: 'q1', calls: 10, rows: 100, time: 15 },
    ])
    const q1 = await store.queryDetail(id, 'q1', window)
    expect(q1!.points.map((p) => [p.ts - T0, p.calls, p.rows])).toEqual([
      [0, 2, 20],
      [MINUTE, 8, 80],
    ])

    // The latest tables and indexes are the newest batch's (the late one left them alone), a repeated
    // object's last entry winning.
    const tables = await store.objects.listTables(id, 'live_tuples', 10)
    expect(tables.map((t) => [t.table_name, t.ts - T0, t.n_live_tup, t.seq_scan, t.autovacuum_enabled])).toEqual([
      ['b', MINUTE + 15_000, 700, 100, false],
      ['a', MINUTE + 15_000, 520, 100, true],
    ])
    const indexes = await store.objects.listIndexes(id, 'scans', 10)
    expect(indexes.map((i) => [i.index_name, i.idx_scan, i.idx_tup_read])).toEqual([
      ['b_pkey', 70, 140],
      ['a_pkey', 48, 96],
    ])

    // Minute series: deltas summed (null in a minute of first samples only), gauges the minute's last.
    const aSeries = await store.objects.tableSeries(id, 'public', 'a', window)
    expect(aSeries.resolution).toBe(60)
    expect(aSeries.points.map((p) => [p.ts - T0, p.seq_scan, p.seq_tup_read, p.n_tup_ins, p.n_live_tup])).toEqual([
      [0, null, null, null, 500],
      [MINUTE, 4, 40, 14, 520],
    ])
    const bSeries = await store.objects.tableSeries(id, 'public', 'b', window)
    expect(bSeries.points.map((p) => [p.ts - T0, p.seq_scan, p.n_tup_ins, p.n_live_tup])).toEqual([
      [0, null, null, 700],
      [MINUTE, 0, 0, 700],
    ])
    const cSeries = await store.objects.tableSeries(id, 'public', 'c', window)
    expect(cSeries.points.map((p) => [p.ts - T0, p.seq_scan, p.n_tup_ins, p.n_live_tup])).toEqual([[-MINUTE, 7, 7, 1]])
    const aIndex = await store.objects.indexSeries(id, 'public', 'a_pkey', window)
    expect(aIndex.points.map((p) => [p.ts - T0, p.idx_scan, p.idx_tup_read, p.size_bytes])).toEqual([
      [0, null, null, 16_384],
      [MINUTE, 7, 14, 16_384],
    ])
    // Hourly buckets hold the hour's sums: the late batch's minute is in the hour before T0.
    const day = { since: T0 - 24 * HOUR, until: T0 + HOUR }
    const aHours = await store.objects.tableSeries(id, 'public', 'a', { since: T0 - 48 * HOUR, until: T0 + HOUR })
    expect(aHours.resolution).toBe(3600)
    expect(aHours.points.map((p) => [p.ts - T0, p.seq_scan, p.n_tup_ins, p.n_live_tup])).toEqual([[0, 4, 14, 520]])
    const cHours = await store.objects.tableSeries(id, 'public', 'c', { since: T0 - 48 * HOUR, until: T0 + HOUR })
    expect(cHours.points.map((p) => [p.ts - T0, p.seq_scan, p.n_live_tup])).toEqual([[-HOUR, 7, 1]])

    const intervals = { ...day, bucketSeconds: 60 }
    expect((await store.internals.waits(id, intervals)).map((w) => [w.ts - T0, w.count, w.total_duration_ms])).toEqual([
      [0, 2, 2_000],
      [MINUTE, 5, 1_500],
    ])
    const bgwriter = await store.internals.metricSeries(id, 'bgwriter', intervals)
    expect(bgwriter.map((p) => [p.ts - T0, p.values])).toEqual([
      [-MINUTE, { buffers_alloc: 100 }],
      [0, { buffers_alloc: 5 }],
      [MINUTE, { buffers_alloc: 8 }],
    ])
    const database = await store.internals.metricSeries(id, 'database', intervals)
    expect(database.map((p) => [p.ts - T0, p.values])).toEqual([
      [0, { xact_commit: 9, numbackends: 4 }],
      [MINUTE, { xact_commit: 5, numbackends: 8 }],
    ])
  })

  test('a real-shaped batch: the same statements (and exchanges) whatever its size', async () => {
    const sent = kind === 'postgres' ? (store.driver as PostgresDriver).sent : undefined
    const counted = async (b: IngestBatch, now?: number) => {
      const before = sent ? { ...sent } : { statements: 0, exchanges: 0 }
      await ingest(b, now)
      return sent
        ? { statements: sent.statements - before.statements, exchanges: sent.exchanges - before.exchanges }
        : undefined
    }
    const start = T0 + 2 * HOUR + 15_000
    await counted(agentBatch('real', start, 0))
    // The same database 10 s later: its statement texts are written (once in 10 minutes), nothing to roll up.
    const steady = await counted(agentBatch('real', start + 10_000, 1))
    // Ten times the rows (2,000 statements, 1,000 tables, 1,500 indexes) in the same 10-minute span.
    const large = await counted(
      agentBatch('real', start + 20_000, 2, { statements: 2_000, tables: 1_000, indexes: 1_500 }),
    )
    // The first batch of the next span rolls the span up first (its 10-minute rows and the marks).
    const rolling = await counted(agentBatch('real', start + 10 * MINUTE, 3, REAL_SHAPE))
    if (kind === 'sqlite') return
    // Two exchanges. BEGIN and the ingest lock with the database, the batch_id and the reads (rollup lock
    // and marks, the latest tables and indexes, their sections' sampled minute and hours, the counter
    // families of the hour), planned for the database's id of the batch before; the writes (query_texts
    // when due, query_stats, table_stats, latest_tables, index_stats, latest_indexes, the minute's count
    // of the tables and indexes sections, wait_stats, metric_counters, metric_gauges, internals_latest,
    // snapshots, the agent's clock offset, the session history's snapshot, lock chains and their
    // members, and the database's last_seen_at) with COMMIT; the events' reads (the baseline, the latest tables' and indexes' names)
    // and the baseline's upsert (events/events.ts): 4 more.
    expect(steady).toEqual({ statements: 32, exchanges: 2 })
    // + the texts of its 1,800 statements not seen before: one statement, as for 200; + the events of the
    // 800 tables and 1,300 indexes it reports first: one statement.
    expect(large).toEqual({ statements: 34, exchanges: 2 })
    // + the texts (10 minutes on) + the 10-minute rollup and the marks, in the same exchange; + one DELETE
    // each for the 900 tables and 1,400 indexes it no longer reports; + their events, one statement; + the
    // agent's silence of nearly 10 minutes since the batch before (availability/writes.ts), one statement.
    expect(rolling).toEqual({ statements: 39, exchanges: 2 })
  })

  test('a database deleted and registered again under its name gets the next batch under its new id', async () => {
    const sent = kind === 'postgres' ? (store.driver as PostgresDriver).sent : undefined
    const named = (collectedAt: number, tableName: string): IngestBatch => ({
      ...batch(collectedAt, { tables: [table(tableName, 5, null)] }),
      database: { name: 'again', engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
    })
    const first = await ingest(named(T0 + 10_000, 'old'))
    expect(await store.deleteDatabase(account.orgId, first)).toBe(true)
    const created = await store.createDatabase(
      account.orgId,
      { name: 'again', engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432, tags: {} },
      T0 + 15_000,
    )
    if (created === 'limit') throw new Error('limit')
    expect(created.id).not.toBe(first)
    const before = sent ? { ...sent } : undefined
    // The store last ingested 'again' under the first id: the reads planned for it are not used.
    expect(await ingest(named(T0 + 20_000, 'new'))).toBe(created.id)
    // BEGIN and the lock with the database, the batch_id and the reads planned for the old id; the reads
    // again for the new one; the writes with COMMIT.
    if (sent && before) expect(sent.exchanges - before.exchanges).toBe(3)
    expect(
      (await store.objects.listTables(created.id, 'size', 10)).map((t) => [t.table_name, t.n_live_tup, t.ts]),
    ).toEqual([['new', 5, T0 + 20_000]])
    expect(await store.objects.listTables(first, 'size', 10)).toEqual([])
    // And the batch after it is planned for the new id at once.
    const next = sent ? { ...sent } : undefined
    expect(await ingest(named(T0 + 30_000, 'new'))).toBe(created.id)
    if (sent && next) expect(sent.exchanges - next.exchanges).toBe(2)
  })

  test.skipIf(kind !== 'postgres')("the unnest casts are the columns' types in the PostgreSQL schema", async () => {
    const columns = await store.driver.all<{ column_name: string; data_type: string }>(
      `SELECT DISTINCT column_name, data_type FROM information_schema.columns
       WHERE table_schema = current_schema() AND column_name = ANY($1::text[])
         AND table_name IN ('query_texts', 'query_stats', 'explain_plans', 'snapshots', 'table_stats', 'index_stats', 'latest_tables',
           'latest_indexes', 'wait_stats', 'replication_lag', 'replication_slot_lag', 'metric_counters', 'metric_gauges',
           'internals_latest', 'clickhouse_latest', 'events', 'session_snapshots', 'lock_chains', 'lock_chain_members', 'log_entries', 'log_counts',
           'custom_metrics', 'custom_metric_series', 'agent_clocks')
       ORDER BY column_name, data_type`,
      [Object.keys(INGEST_COLUMN_TYPES)],
    )
    const found = Object.fromEntries(columns.map((c) => [c.column_name, c.data_type]))
    expect(columns.length).toBe(Object.keys(found).length)
    expect(found).toEqual({ ...INGEST_COLUMN_TYPES })
  })
})
