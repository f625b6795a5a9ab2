// The numbers of an ingest batch against what the stores hold, on both stores: every number past its
// maximum (counts and sizes past 2^53 - 1, durations past 1e15 ms (a session's and a lock's included), times past the year 9999, an interval
// past a day, a plan's scan counts past INTEGER) is a 400 naming the field, never a store error (a 500
// the agent would retry for an hour); the largest values allowed are stored and read back exactly.
import { describe, expect, test } from 'bun:test'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { agentSession, at, iso, pgBatch } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const MAX_COUNT = Number.MAX_SAFE_INTEGER
const MAX_MS = 1e15
/** 9999-12-31T23:59:59.999Z. */
const MAX_EPOCH_MS = 253_402_300_799_999
const MAX_PLAN_COUNT = 2_147_483_647

const tableCounters = (n: number) => ({
  seq_scan: n,
  seq_tup_read: n,
  idx_scan: n,
  idx_tup_fetch: n,
  n_tup_ins: n,
  n_tup_upd: n,
  n_tup_del: n,
  n_tup_hot_upd: n,
})

/** A batch with every section the overflow cases spoil, each value at its maximum. */
function largestBatch(name: string, collectedAt: number): IngestBatch {
  return {
    ...pgBatch(name, collectedAt),
    interval_seconds: 86_400,
    // Its deltas cover the cycle's own minute (no gap): read back whole in that minute.
    covered_seconds: 10,
    query_stats: [
      {
        query_hash: 'largest',
        query_text: 'SELECT 1',
        calls: MAX_COUNT,
        total_time_ms: MAX_MS,
        rows: MAX_COUNT,
        shared_blks_hit: MAX_COUNT,
        shared_blks_read: MAX_COUNT,
        blk_read_time_ms: MAX_MS,
        read_bytes: MAX_COUNT,
        p99_ms: MAX_MS,
      },
    ],
    explain_plans: [
      {
        query_hash: 'largest',
        ts: collectedAt,
        plan_json: {},
        plan_hash: 'p',
        total_cost: 1,
        actual_time_ms: 1,
        seq_scans: MAX_PLAN_COUNT,
        index_scans: MAX_PLAN_COUNT,
        rows_estimated: 1,
        rows_actual: 1,
        source: 'sampled',
      },
    ],
    activity: [
      {
        pid: 1,
        query_text: 'SELECT 1',
        state: 'active',
        wait_event_type: null,
        wait_event: null,
        duration_ms: 1,
        blocking_pids: [],
        xact_start: MAX_EPOCH_MS,
        memory_usage: MAX_COUNT,
      },
    ],
    waits: [{ wait_event_type: 'IO', wait_event: 'DataFileRead', count: MAX_COUNT, total_duration_ms: MAX_MS }],
    tables: [
      {
        schema_name: 'public',
        table_name: 'largest',
        ...tableCounters(MAX_COUNT),
        n_live_tup: MAX_COUNT,
        n_dead_tup: MAX_COUNT,
        last_vacuum: MAX_EPOCH_MS,
        last_autovacuum: null,
        last_analyze: null,
        last_autoanalyze: null,
        table_size_bytes: MAX_COUNT,
        index_size_bytes: MAX_COUNT,
        delta: tableCounters(MAX_COUNT),
      },
    ],
    indexes: [
      {
        schema_name: 'public',
        table_name: 'largest',
        index_name: 'largest_pkey',
        idx_scan: MAX_COUNT,
        idx_tup_read: MAX_COUNT,
        idx_tup_fetch: MAX_COUNT,
        size_bytes: MAX_COUNT,
        index_def: 'CREATE UNIQUE INDEX largest_pkey ON public.largest USING btree (id)',
        is_unique: true,
        is_primary: true,
        is_valid: true,
        delta: { idx_scan: MAX_COUNT, idx_tup_read: MAX_COUNT, idx_tup_fetch: MAX_COUNT },
      },
    ],
    replication: {
      is_replica: true,
      replication_lag_bytes: MAX_COUNT,
      replication_lag_seconds: 1,
      upstream_host: null,
      replicas: [],
      slots: [{ slot_name: 's', slot_type: 'physical', active: true, lag_bytes: MAX_COUNT, wal_status: 'reserved' }],
    },
    bgwriter: { buffers_clean: MAX_COUNT },
    wal_stats: { wal_bytes: MAX_COUNT },
    database_stats: { xact_commit: MAX_COUNT, temp_bytes: -MAX_COUNT },
    io_stats: [
      { backend_type: 'client backend', object: 'relation', context: 'normal', counters: { reads: MAX_COUNT } },
    ],
  }
}

/** [field as the error names it, how to push it past its maximum]. */
const overflows: [string, (b: any) => void][] = [
  ['collected_at', (b) => (b.collected_at = 1e300)],
  ['collected_at', (b) => (b.collected_at = MAX_EPOCH_MS + 1)],
  ['interval_seconds', (b) => (b.interval_seconds = 1e300)],
  ['interval_seconds', (b) => (b.interval_seconds = 86_401)],
  ['query_stats.0.calls', (b) => (b.query_stats[0].calls = 1e300)],
  ['query_stats.0.calls', (b) => (b.query_stats[0].calls = MAX_COUNT + 2)],
  ['query_stats.0.total_time_ms', (b) => (b.query_stats[0].total_time_ms = 1e300)],
  ['query_stats.0.p99_ms', (b) => (b.query_stats[0].p99_ms = MAX_MS * 2)],
  ['query_stats.0.read_bytes', (b) => (b.query_stats[0].read_bytes = 1e300)],
  ['explain_plans.0.ts', (b) => (b.explain_plans[0].ts = 1e300)],
  ['explain_plans.0.seq_scans', (b) => (b.explain_plans[0].seq_scans = MAX_PLAN_COUNT + 1)],
  ['activity.0.xact_start', (b) => (b.activity[0].xact_start = 1e300)],
  ['activity.0.duration_ms', (b) => (b.activity[0].duration_ms = 1e16)],
  ['activity.0.duration_ms', (b) => (b.activity[0].duration_ms = MAX_MS * 2)],
  [
    'locks.0.duration_ms',
    (b) =>
      (b.locks = [
        {
          pid: 2,
          lock_type: 'relation',
          mode: 'AccessExclusiveLock',
          relation_name: 't',
          granted: false,
          blocked_by_pid: 1,
          duration_ms: 1e21,
          query_text: null,
        },
      ]),
  ],
  [
    'locks.0.duration_ms',
    (b) =>
      (b.locks = [
        {
          pid: 2,
          lock_type: 'relation',
          mode: 'AccessExclusiveLock',
          relation_name: 't',
          granted: false,
          blocked_by_pid: 1,
          duration_ms: MAX_MS + 1,
          query_text: null,
        },
      ]),
  ],
  ['waits.0.count', (b) => (b.waits[0].count = 1e300)],
  ['waits.0.total_duration_ms', (b) => (b.waits[0].total_duration_ms = 1e300)],
  ['waits.0.minute', (b) => (b.waits[0].minute = 1e300)],
  ['tables.0.table_size_bytes', (b) => (b.tables[0].table_size_bytes = 1e300)],
  ['tables.0.last_vacuum', (b) => (b.tables[0].last_vacuum = 1e300)],
  ['tables.0.delta.seq_scan', (b) => (b.tables[0].delta.seq_scan = 1e300)],
  ['indexes.0.size_bytes', (b) => (b.indexes[0].size_bytes = 1e300)],
  ['indexes.0.delta.idx_scan', (b) => (b.indexes[0].delta.idx_scan = 1e300)],
  ['replication.replication_lag_bytes', (b) => (b.replication.replication_lag_bytes = 1e300)],
  ['replication.slots.0.lag_bytes', (b) => (b.replication.slots[0].lag_bytes = 1e300)],
  ['bgwriter.buffers_clean', (b) => (b.bgwriter.buffers_clean = 1e300)],
  ['wal_stats.wal_bytes', (b) => (b.wal_stats.wal_bytes = 1e300)],
  ['database_stats.temp_bytes', (b) => (b.database_stats.temp_bytes = -1e300)],
  ['io_stats.0.counters.reads', (b) => (b.io_stats[0].counters.reads = 1e300)],
  [
    'parts.0.bytes_on_disk',
    (b) =>
      (b.parts = [{ database: 'd', table: 't', partition_id: 'all', active_parts: 1, rows: 1, bytes_on_disk: 1e300 }]),
  ],
  ['server_metrics.MemoryTracking', (b) => (b.server_metrics = { MemoryTracking: 1e300 })],
  [
    'mutations.0.create_time',
    (b) =>
      (b.mutations = [
        {
          database: 'd',
          table: 't',
          mutation_id: 'm',
          command: 'x',
          create_time: 1e300,
          is_done: false,
          parts_to_do: 1,
          latest_fail_reason: '',
          latest_fail_time: null,
          stuck: false,
        },
      ]),
  ],
]

for (const kind of storeKinds) {
  describe(`ingest: numbers against the store's columns (${kind})`, () => {
    const session = agentSession(kind)
    const post = (batch: unknown) => session.server.call('POST', '/api/v1/ingest', { apiKey: session.key, body: batch })

    test('each number past its maximum is a 400 naming the field', async () => {
      for (const [field, spoil] of overflows) {
        const batch = largestBatch('overflow', at(10))
        spoil(batch)
        const res = await post(batch)
        expect({ field, status: res.status, names: String(res.body.error).startsWith(`invalid ${field}`) }).toEqual({
          field,
          status: 400,
          names: true,
        })
      }
    })

    test('the largest values allowed are stored and read back exactly', async () => {
      const res = await post(largestBatch('largest', at(20)))
      expect(res.status).toBe(200)
      const id: string = res.body.database_id
      const [statement] = await session.ok(id, `/queries?since=${iso(at(20))}&until=${iso(at(21))}`)
      expect(statement).toMatchObject({
        query_hash: 'largest',
        total_calls: MAX_COUNT,
        total_time_ms: MAX_MS,
        total_rows: MAX_COUNT,
      })

      const read = async (sql: string) =>
        (await session.server.store.driver.all<Record<string, unknown>>(sql, [id])).map((r) =>
          Object.values(r).map(Number),
        )
      expect(
        await read('SELECT calls, rows, read_bytes, total_time_ms, p99_ms FROM query_stats WHERE database_id = $1'),
      ).toEqual([[MAX_COUNT, MAX_COUNT, MAX_COUNT, MAX_MS, MAX_MS]])
      expect(await read('SELECT seq_scans, index_scans FROM explain_plans WHERE database_id = $1')).toEqual([
        [MAX_PLAN_COUNT, MAX_PLAN_COUNT],
      ])
      expect(
        await read('SELECT count, total_duration_ms FROM wait_stats WHERE database_id = $1 AND resolution = 60'),
      ).toEqual([[MAX_COUNT, MAX_MS]])
      expect(
        await read('SELECT seq_scan, table_size_bytes, last_vacuum FROM latest_tables WHERE database_id = $1'),
      ).toEqual([[MAX_COUNT, MAX_COUNT, MAX_EPOCH_MS]])
      expect(
        await read('SELECT seq_scan, n_live_tup FROM table_stats WHERE database_id = $1 AND resolution = 60'),
      ).toEqual([[MAX_COUNT, MAX_COUNT]])
      expect(
        await read('SELECT idx_scan, size_bytes FROM index_stats WHERE database_id = $1 AND resolution = 60'),
      ).toEqual([[MAX_COUNT, MAX_COUNT]])
      expect(
        await read('SELECT replication_lag_bytes FROM replication_lag WHERE database_id = $1 AND resolution = 60'),
      ).toEqual([[MAX_COUNT]])
      expect(
        await read('SELECT lag_bytes FROM replication_slot_lag WHERE database_id = $1 AND resolution = 60'),
      ).toEqual([[MAX_COUNT]])
      expect(
        await read(
          "SELECT value FROM metric_counters WHERE database_id = $1 AND resolution = 60 AND metric IN ('buffers_clean', 'wal_bytes', 'reads', 'xact_commit', 'temp_bytes') ORDER BY value",
        ),
      ).toEqual([[-MAX_COUNT], [MAX_COUNT], [MAX_COUNT], [MAX_COUNT], [MAX_COUNT]])
      expect(await read('SELECT DISTINCT interval_seconds FROM internals_latest WHERE database_id = $1')).toEqual([
        [86_400],
      ])
    })

    test('fractional counts, which the schema allows, are stored rounded', async () => {
      const res = await post(
        pgBatch('fractions', at(30), {
          query_stats: [
            {
              query_hash: 'q',
              query_text: 'SELECT 1',
              calls: 1.5,
              total_time_ms: 0.25,
              rows: 2.4,
              shared_blks_hit: 0,
              shared_blks_read: 0,
            },
          ],
        }),
      )
      expect(res.status).toBe(200)
      const row = await session.server.store.driver.get<{ calls: number; rows: number; total_time_ms: number }>(
        'SELECT calls, rows, total_time_ms FROM query_stats WHERE database_id = $1',
        [res.body.database_id],
      )
      expect([Number(row?.calls), Number(row?.rows), Number(row?.total_time_ms)]).toEqual([2, 2, 0.25])
    })

    test('a batch collected in the last millisecond of the year 9999 fits the store; the API refuses it as ahead of its clock', async () => {
      const batch = pgBatch('far-future', MAX_EPOCH_MS, {
        query_stats: [
          {
            query_hash: 'q',
            query_text: 'SELECT 1',
            calls: 1,
            total_time_ms: 1,
            rows: 1,
            shared_blks_hit: 0,
            shared_blks_read: 0,
          },
        ],
      })
      const res = await post(batch)
      expect({
        status: res.status,
        names: String(res.body.error).startsWith('invalid collected_at: 9999-12-31T23:59:59.999Z is '),
      }).toEqual({ status: 400, names: true })
      const id = (await post(pgBatch('far-future', at(40)))).body.database_id
      const owner = await session.server.store.driver.get<{ org_id: string }>(
        'SELECT org_id FROM databases WHERE id = $1',
        [id],
      )
      await session.server.store.ingest(owner!.org_id, batch, Date.now())
      const row = await session.server.store.driver.get<{ at: number }>(
        'SELECT MAX(collected_at) AS at FROM ingest_batches WHERE database_id = $1',
        [id],
      )
      expect(Number(row?.at)).toBe(MAX_EPOCH_MS)
    })
  })
}
