// Engine internals on both stores: waits, replication (current, lag and slot history), bgwriter,
// wal-stats, io-stats and database-stats from batches with known values across minute and hour
// boundaries, re-aggregated into other bucket sizes; version gates, bucket validation, engine and
// organization checks, and deletion of the rows with their database.
import { describe, expect, test } from 'bun:test'
import type { ReplicationStatus } from '../../src/shared/wire.ts'
import { HOUR, POSTGRES_INTERNALS_PATHS, agentSession, at, base, iso, pgBatch, range } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const wait = (type: string, event: string, count: number) => ({
  wait_event_type: type,
  wait_event: event,
  count,
  total_duration_ms: count * 1000,
})

function replication(
  lagBytes: number | null,
  lagSeconds: number | null,
  slots: [string, number | null][],
  isReplica = true,
): ReplicationStatus {
  return {
    is_replica: isReplica,
    replication_lag_bytes: lagBytes,
    replication_lag_seconds: lagSeconds,
    upstream_host: isReplica ? 'primary.internal' : null,
    replicas: [],
    slots: slots.map(([slot_name, lag_bytes]) => ({
      slot_name,
      slot_type: 'physical',
      active: true,
      lag_bytes,
      wal_status: 'reserved',
    })),
  }
}

const BGWRITER_NULLS = {
  checkpoints_timed: null,
  checkpoints_req: null,
  checkpoint_write_time_ms: null,
  checkpoint_sync_time_ms: null,
  buffers_checkpoint: null,
  buffers_clean: null,
  maxwritten_clean: null,
  buffers_backend: null,
  buffers_backend_fsync: null,
  buffers_alloc: null,
  restartpoints_timed: null,
  restartpoints_req: null,
  restartpoints_done: null,
}

const IO_NULLS = {
  reads: null,
  writes: null,
  extends: null,
  hits: null,
  evictions: null,
  reuses: null,
  fsyncs: null,
  writebacks: null,
  read_time_ms: null,
  write_time_ms: null,
  extend_time_ms: null,
  fsync_time_ms: null,
  writeback_time_ms: null,
  read_bytes: null,
  write_bytes: null,
  extend_bytes: null,
}

const INTERNAL_TABLES = [
  'wait_stats',
  'replication_lag',
  'replication_slot_lag',
  'metric_counters',
  'metric_gauges',
  'internals_latest',
]

for (const kind of storeKinds) {
  describe(`engine internals (${kind})`, () => {
    const session = agentSession(kind)
    const { ingest, get, ok } = session

    test("a cycle's wait samples count in the minute they were taken in; entries without one, or far from the batch, in the batch's", async () => {
      // A batch at 00:00:05 of minute 12 carrying samples of minute 11 (its last 5 s) and of minute 12.
      const id = await ingest(
        pgBatch('waits-minutes', at(12, 5), {
          waits: [
            { ...wait('Lock', 'tuple', 5), minute: at(11) },
            { ...wait('Lock', 'tuple', 5), minute: at(12) },
            { ...wait('IO', 'DataFileRead', 2), minute: at(12) + 30_000 },
            // Older agents send no minute; a minute a day away is not believed.
            wait('Client', 'ClientRead', 1),
            { ...wait('LWLock', 'BufferMapping', 3), minute: at(12) + 24 * HOUR },
          ],
        }),
      )
      const entries = (await ok(id, `/waits?${range(at(10), at(14))}`)) as {
        ts: string
        wait_event: string
        count: number
      }[]
      expect(entries.map((e) => [e.ts, e.wait_event, e.count])).toEqual([
        [iso(at(11)), 'tuple', 5],
        [iso(at(12)), 'ClientRead', 1],
        [iso(at(12)), 'DataFileRead', 2],
        [iso(at(12)), 'BufferMapping', 3],
        [iso(at(12)), 'tuple', 5],
      ])
      // Hourly, the two minutes of tuple waits add up in one row.
      const hourly = (await ok(id, `/waits?${range(at(0), at(60))}&bucket=3600`)) as {
        wait_event: string
        count: number
      }[]
      expect(hourly.find((e) => e.wait_event === 'tuple')?.count).toBe(10)
    })

    test('waits are summed per event and re-bucketed into 60 s, 300 s and hourly intervals', async () => {
      await ingest(
        pgBatch('waits', at(58, 10), { waits: [wait('LWLock', 'WALWrite', 2), wait('Lock', 'transactionid', 1)] }),
      )
      await ingest(pgBatch('waits', at(58, 40), { waits: [wait('LWLock', 'WALWrite', 3)] }))
      await ingest(pgBatch('waits', at(59, 20), { waits: [wait('Lock', 'transactionid', 4)] }))
      // One batch naming an event twice, in the next hour.
      await ingest(
        pgBatch('waits', at(60, 30), { waits: [wait('LWLock', 'WALWrite', 5), wait('LWLock', 'WALWrite', 1)] }),
      )
      await ingest(pgBatch('waits', at(64), { waits: [wait('IO', 'DataFileRead', 7)] }))
      const id = await ingest(
        pgBatch('waits', at(65), { waits: [wait('IO', 'DataFileRead', 1)], collector_errors: [] }),
      )

      const entry = (ts: number, type: string, event: string, count: number) => ({
        ts: iso(ts),
        wait_event_type: type,
        wait_event: event,
        count,
        total_duration_ms: count * 1000,
      })
      const minutes = [
        entry(at(58), 'LWLock', 'WALWrite', 5),
        entry(at(58), 'Lock', 'transactionid', 1),
        entry(at(59), 'Lock', 'transactionid', 4),
        entry(at(60), 'LWLock', 'WALWrite', 6),
        entry(at(64), 'IO', 'DataFileRead', 7),
        entry(at(65), 'IO', 'DataFileRead', 1),
      ]
      expect(await ok(id, `/waits?${range(at(50), at(70))}&bucket=60`)).toEqual(minutes)
      // bucket defaults to 60 s and the window to the last 24 hours.
      expect(await ok(id, `/waits?${range(at(50), at(70))}`)).toEqual(minutes)
      expect(await ok(id, '/waits')).toEqual(minutes)
      // A window starting inside a minute keeps that minute's bucket; one ending before a bucket leaves it out.
      expect(await ok(id, `/waits?${range(at(59, 30), at(64, 59))}`)).toEqual(minutes.slice(2, 5))

      expect(await ok(id, `/waits?${range(at(50), at(70))}&bucket=300`)).toEqual([
        entry(at(55), 'LWLock', 'WALWrite', 5),
        entry(at(55), 'Lock', 'transactionid', 5),
        entry(at(60), 'IO', 'DataFileRead', 7),
        entry(at(60), 'LWLock', 'WALWrite', 6),
        entry(at(65), 'IO', 'DataFileRead', 1),
      ])
      const hours = [
        entry(at(0), 'LWLock', 'WALWrite', 5),
        entry(at(0), 'Lock', 'transactionid', 5),
        entry(at(60), 'IO', 'DataFileRead', 8),
        entry(at(60), 'LWLock', 'WALWrite', 6),
      ]
      // Whole hours come from the hourly buckets, a partial first hour from the minute buckets: same sums.
      expect(await ok(id, `/waits?${range(at(0), at(120))}&bucket=3600`)).toEqual(hours)
      expect(await ok(id, `/waits?${range(at(30), at(120))}&bucket=3600`)).toEqual(hours)
      expect(await ok(id, `/waits?${range(at(-24 * 60), at(180))}&bucket=7200`)).toEqual([
        entry(at(0), 'IO', 'DataFileRead', 8),
        entry(at(0), 'LWLock', 'WALWrite', 11),
        entry(at(0), 'Lock', 'transactionid', 5),
      ])
      // A replayed batch is not counted twice.
      const replay = pgBatch('waits', at(65, 30), { waits: [wait('IO', 'DataFileRead', 10)] })
      await ingest(replay)
      await ingest(replay)
      expect((await ok(id, `/waits?${range(at(65), at(66))}`))[0]).toEqual(entry(at(65), 'IO', 'DataFileRead', 11))
    })

    test('bucket and window validation', async () => {
      const id = await ingest(pgBatch('validation', at(10), { waits: [wait('IO', 'DataFileRead', 1)] }))
      for (const path of [
        '/waits',
        '/replication/history',
        '/replication/slots/history',
        '/bgwriter',
        '/wal-stats/timeseries',
        '/io-stats/timeseries',
      ]) {
        await session.expectSeriesValidation(id, path)
      }
      // A bucket over the maximum (31 days) is clamped to it.
      const huge = await ok(id, `/waits?${range(at(0), at(60))}&bucket=99999999999`)
      expect(huge).toEqual([
        {
          ts: iso(Math.floor(at(10) / (31 * 24 * HOUR)) * 31 * 24 * HOUR),
          wait_event_type: 'IO',
          wait_event: 'DataFileRead',
          count: 1,
          total_duration_ms: 1000,
        },
      ])
      // Without a bucket, a window longer than 24 hours is cut into hours (720 for 30 days).
      expect((await get(id, `/bgwriter?${range(at(0) - 30 * 24 * HOUR, at(0))}`)).status).toBe(200)
    })

    test('replication: latest status, lag history and slot history keep the maximum per interval', async () => {
      const empty = await ingest(pgBatch('replication-empty', at(100)))
      expect(await ok(empty, '/replication')).toEqual({
        is_replica: null,
        replication_lag_bytes: null,
        replication_lag_seconds: null,
        upstream_host: null,
        slots: [],
        replicas: [],
        ts: null,
      })
      expect(await ok(empty, '/replication/history')).toEqual([])
      expect(await ok(empty, '/replication/slots/history')).toEqual([])

      const h = 120 // minutes: two hours past the base
      await ingest(
        pgBatch('replication', at(h, 10), {
          replication: replication(100, 0.5, [
            ['standby_1', 1000],
            ['logical_a', null],
          ]),
        }),
      )
      await ingest(pgBatch('replication', at(h, 40), { replication: replication(300, 0.2, [['standby_1', 500]]) }))
      await ingest(
        pgBatch('replication', at(h + 1, 5), {
          replication: replication(50, 2.25, [
            ['standby_1', 700],
            ['logical_a', 40],
          ]),
        }),
      )
      const primary: ReplicationStatus = {
        ...replication(null, null, [['standby_1', 10]], false),
        replicas: [
          {
            application_name: 'walreceiver',
            client_addr: '10.0.0.2',
            state: 'streaming',
            sync_state: 'async',
            lag_bytes: 10,
            write_lag_ms: 1.5,
            flush_lag_ms: 2,
            replay_lag_ms: 3,
          },
        ],
      }
      const id = await ingest(pgBatch('replication', at(h + 5), { replication: primary }))
      // A late batch (collected earlier, delivered last) counts in its bucket but is not the latest status.
      await ingest(pgBatch('replication', at(h, 0), { replication: replication(10, 0.1, [['standby_1', 5]]) }))

      expect(await ok(id, '/replication')).toEqual({
        is_replica: false,
        replication_lag_bytes: null,
        replication_lag_seconds: null,
        upstream_host: null,
        slots: [{ slot_name: 'standby_1', slot_type: 'physical', active: true, lag_bytes: 10, wal_status: 'reserved' }],
        replicas: primary.replicas,
        ts: iso(at(h + 5)),
      })
      const window = range(at(h), at(h + 10))
      expect(await ok(id, `/replication/history?${window}`)).toEqual([
        { ts: iso(at(h)), replication_lag_bytes: 300, replication_lag_seconds: 0.5 },
        { ts: iso(at(h + 1)), replication_lag_bytes: 50, replication_lag_seconds: 2.25 },
      ])
      expect(await ok(id, `/replication/history?${window}&bucket=300`)).toEqual([
        { ts: iso(at(h)), replication_lag_bytes: 300, replication_lag_seconds: 2.25 },
      ])
      expect(await ok(id, `/replication/history?${range(at(0), at(h + 60))}&bucket=3600`)).toEqual([
        { ts: iso(at(h)), replication_lag_bytes: 300, replication_lag_seconds: 2.25 },
      ])
      expect(await ok(id, `/replication/slots/history?${window}`)).toEqual([
        { ts: iso(at(h)), slot_name: 'standby_1', lag_bytes: 1000 },
        { ts: iso(at(h + 1)), slot_name: 'logical_a', lag_bytes: 40 },
        { ts: iso(at(h + 1)), slot_name: 'standby_1', lag_bytes: 700 },
        { ts: iso(at(h + 5)), slot_name: 'standby_1', lag_bytes: 10 },
      ])
      expect(await ok(id, `/replication/slots/history?${window}&bucket=300`)).toEqual([
        { ts: iso(at(h)), slot_name: 'logical_a', lag_bytes: 40 },
        { ts: iso(at(h)), slot_name: 'standby_1', lag_bytes: 1000 },
        { ts: iso(at(h + 5)), slot_name: 'standby_1', lag_bytes: 10 },
      ])
    })

    test('bgwriter: deltas summed per minute, per hour beyond a 24-hour window', async () => {
      const pg17 = (checkpoints: number, writeMs: number, buffers: number, alloc: number) => ({
        ...BGWRITER_NULLS,
        checkpoints_timed: checkpoints,
        checkpoints_req: 0,
        checkpoint_write_time_ms: writeMs,
        checkpoint_sync_time_ms: 0.25,
        buffers_checkpoint: buffers,
        buffers_clean: 0,
        maxwritten_clean: 0,
        buffers_alloc: alloc,
        restartpoints_timed: 0,
        restartpoints_req: 0,
        restartpoints_done: 0,
      })
      await ingest(pgBatch('bgwriter', at(59, 10), { bgwriter: pg17(1, 12.5, 100, 40) }))
      await ingest(pgBatch('bgwriter', at(59, 40), { bgwriter: pg17(0, 0, 0, 2) }))
      const id = await ingest(
        pgBatch('bgwriter', at(60, 20), { bgwriter: { ...pg17(1, 7.25, 30, 8), checkpoints_req: 2 } }),
      )

      const point = (
        ts: number,
        checkpoints: number,
        req: number,
        writeMs: number,
        syncMs: number,
        buffers: number,
        alloc: number,
      ) => ({
        ts: iso(ts),
        ...BGWRITER_NULLS,
        checkpoints_timed: checkpoints,
        checkpoints_req: req,
        checkpoint_write_time_ms: writeMs,
        checkpoint_sync_time_ms: syncMs,
        buffers_checkpoint: buffers,
        buffers_clean: 0,
        maxwritten_clean: 0,
        buffers_alloc: alloc,
        restartpoints_timed: 0,
        restartpoints_req: 0,
        restartpoints_done: 0,
      })
      expect(await ok(id, `/bgwriter?${range(at(50), at(70))}`)).toEqual([
        point(at(59), 1, 0, 12.5, 0.5, 100, 42),
        point(at(60), 1, 2, 7.25, 0.25, 30, 8),
      ])
      expect(await ok(id, '/bgwriter')).toHaveLength(2)
      expect(await ok(id, `/bgwriter?${range(at(-48 * 60), at(150))}`)).toEqual([
        point(at(0), 1, 0, 12.5, 0.5, 100, 42),
        point(at(60), 1, 2, 7.25, 0.25, 30, 8),
      ])
      expect(await ok(id, `/bgwriter?${range(at(0), at(120))}&bucket=7200`)).toEqual([
        point(at(0), 2, 2, 19.75, 0.75, 130, 50),
      ])
    })

    test('wal-stats: the latest deltas with rates per second, and sums over time', async () => {
      const empty = await ingest(pgBatch('wal-empty', at(10)))
      expect(await ok(empty, '/wal-stats')).toEqual({
        ts: null,
        interval_seconds: null,
        wal_records: null,
        wal_fpi: null,
        wal_bytes: null,
        wal_buffers_full: null,
        wal_write: null,
        wal_sync: null,
        wal_write_time_ms: null,
        wal_sync_time_ms: null,
        wal_records_per_s: null,
        wal_fpi_per_s: null,
        wal_bytes_per_s: null,
        wal_buffers_full_per_s: null,
        wal_write_per_s: null,
        wal_sync_per_s: null,
      })
      const wal = (records: number, bytes: number) => ({
        wal_records: records,
        wal_fpi: 20,
        wal_bytes: bytes,
        wal_buffers_full: 0,
        wal_write: 12,
        wal_sync: 3,
        wal_write_time_ms: 1.5,
        wal_sync_time_ms: null,
      })
      await ingest(pgBatch('wal', at(30, 5), { wal_stats: wal(100, 8192) }))
      const id = await ingest(pgBatch('wal', at(30, 15), { wal_stats: wal(500, 1_048_576) }))
      expect(await ok(id, '/wal-stats')).toEqual({
        ts: iso(at(30, 15)),
        interval_seconds: 10,
        ...wal(500, 1_048_576),
        wal_records_per_s: 50,
        wal_fpi_per_s: 2,
        wal_bytes_per_s: 104857.6,
        wal_buffers_full_per_s: 0,
        wal_write_per_s: 1.2,
        wal_sync_per_s: 0.3,
      })
      expect(await ok(id, `/wal-stats/timeseries?${range(at(0), at(60))}`)).toEqual([
        {
          ts: iso(at(30)),
          wal_records: 600,
          wal_fpi: 40,
          wal_bytes: 1_056_768,
          wal_buffers_full: 0,
          wal_write: 24,
          wal_sync: 6,
          wal_write_time_ms: 3,
          wal_sync_time_ms: null,
        },
      ])
    })

    test('io-stats: the latest rows by backend, object and context, and sums per interval', async () => {
      const row = (backend_type: string, object: string, context: string, counters: Record<string, number>) => ({
        backend_type,
        object,
        context,
        counters,
      })
      await ingest(
        pgBatch('io', at(30, 5), {
          io_stats: [
            row('client backend', 'relation', 'normal', { reads: 10, hits: 100, read_bytes: 81920, read_time_ms: 0.5 }),
            row('checkpointer', 'relation', 'normal', { writes: 50, write_bytes: 409600, fsyncs: 2 }),
            row('client backend', 'relation', 'bulkread', { reads: 4, reuses: 3 }),
          ],
        }),
      )
      const id = await ingest(
        pgBatch('io', at(30, 15), {
          io_stats: [row('client backend', 'relation', 'normal', { reads: 5, hits: 50, read_bytes: 40960 })],
        }),
      )
      await ingest(
        pgBatch('io', at(31, 15), { io_stats: [row('autovacuum worker', 'relation', 'vacuum', { reads: 1 })] }),
      )
      // The latest batch is the one collected last.
      await ingest(pgBatch('io', at(30, 45), { io_stats: [] }))

      expect(await ok(id, '/io-stats')).toEqual({
        ts: iso(at(31, 15)),
        interval_seconds: 10,
        stats: [{ backend_type: 'autovacuum worker', object: 'relation', context: 'vacuum', ...IO_NULLS, reads: 1 }],
      })
      expect(await ok(id, `/io-stats/timeseries?${range(at(0), at(60))}`)).toEqual([
        {
          ts: iso(at(30)),
          backend_type: 'checkpointer',
          object: 'relation',
          context: 'normal',
          ...IO_NULLS,
          writes: 50,
          write_bytes: 409600,
          fsyncs: 2,
        },
        {
          ts: iso(at(30)),
          backend_type: 'client backend',
          object: 'relation',
          context: 'bulkread',
          ...IO_NULLS,
          reads: 4,
          reuses: 3,
        },
        {
          ts: iso(at(30)),
          backend_type: 'client backend',
          object: 'relation',
          context: 'normal',
          ...IO_NULLS,
          reads: 15,
          hits: 150,
          read_bytes: 122880,
          read_time_ms: 0.5,
        },
        {
          ts: iso(at(31)),
          backend_type: 'autovacuum worker',
          object: 'relation',
          context: 'vacuum',
          ...IO_NULLS,
          reads: 1,
        },
      ])
      expect(
        (await ok(id, `/io-stats/timeseries?${range(at(0), at(60))}&bucket=300`)).map((p: any) => [
          p.ts,
          p.backend_type,
          p.context,
          p.reads,
        ]),
      ).toEqual([
        [iso(at(30)), 'autovacuum worker', 'vacuum', 1],
        [iso(at(30)), 'checkpointer', 'normal', null],
        [iso(at(30)), 'client backend', 'bulkread', 4],
        [iso(at(30)), 'client backend', 'normal', 15],
      ])
    })

    test('database-stats: counters summed, gauges the latest value of the interval', async () => {
      const stats = (commits: number, backends: number, size: number) => ({
        xact_commit: commits,
        blks_hit: 10 * commits,
        numbackends: backends,
        database_size_bytes: size,
        fsync_on: 1,
      })
      await ingest(pgBatch('dbstats', at(30, 10), { database_stats: stats(100, 5, 1000) }))
      const id = await ingest(pgBatch('dbstats', at(30, 40), { database_stats: stats(50, 3, 1200) }))
      // Delivered late: its counters count, its gauges do not replace the newer ones.
      await ingest(pgBatch('dbstats', at(30, 20), { database_stats: stats(1, 99, 1) }))
      await ingest(pgBatch('dbstats', at(90, 0), { database_stats: { ...stats(7, 4, 1300), xact_rollback: 2 } }))

      const current = await ok(id, '/database-stats')
      expect(current).toMatchObject({
        ts: iso(at(90)),
        interval_seconds: 10,
        xact_commit: 7,
        xact_commit_per_s: 0.7,
        xact_rollback: 2,
        xact_rollback_per_s: 0.2,
        blks_hit: 70,
        blks_read: null,
        blks_read_per_s: null,
        numbackends: 4,
        database_size_bytes: 1300,
        fsync_on: 1,
        xid_age: null,
      })
      const series = await ok(id, `/database-stats/timeseries?${range(at(0), at(120))}`)
      expect(
        series.map((p: any) => [
          p.ts,
          p.xact_commit,
          p.xact_rollback,
          p.blks_hit,
          p.numbackends,
          p.database_size_bytes,
        ]),
      ).toEqual([
        [iso(at(30)), 151, null, 1510, 3, 1200],
        [iso(at(90)), 7, 2, 70, 4, 1300],
      ])
      const hourly = await ok(id, `/database-stats/timeseries?${range(at(0), at(120))}&bucket=3600`)
      expect(hourly.map((p: any) => [p.ts, p.xact_commit, p.numbackends, p.database_size_bytes])).toEqual([
        [iso(at(0)), 151, 3, 1200],
        [iso(at(60)), 7, 4, 1300],
      ])
      const twoHours = await ok(id, `/database-stats/timeseries?${range(at(0), at(120))}&bucket=7200`)
      expect(twoHours.map((p: any) => [p.ts, p.xact_commit, p.numbackends, p.database_size_bytes])).toEqual([
        [iso(at(0)), 158, 4, 1300],
      ])
    })

    test('a tiny interval_seconds (5e-324, which the wire allows) makes no rate Infinity: the rates are null, the answers 200', async () => {
      // A hostile review: a count over 5e-324 s is Infinity, which the answers' schemas refuse (a 500).
      const id = await ingest({
        ...pgBatch('tiny-interval', at(30)),
        interval_seconds: 5e-324,
        wal_stats: { wal_records: 100, wal_bytes: 8192 },
        database_stats: { xact_commit: 7, numbackends: 2 },
      })
      const wal = await get(id, '/wal-stats')
      expect([wal.status, wal.body.wal_records, wal.body.wal_records_per_s, wal.body.wal_bytes_per_s]).toEqual([
        200,
        100,
        null,
        null,
      ])
      const stats = await get(id, '/database-stats')
      expect([stats.status, stats.body.xact_commit, stats.body.xact_commit_per_s, stats.body.numbackends]).toEqual([
        200,
        7,
        null,
        2,
      ])
      // A first sample's interval of 0 is allowed too: no rate either.
      const zero = await ingest({
        ...pgBatch('zero-interval', at(30)),
        interval_seconds: 0,
        database_stats: { xact_commit: 7 },
      })
      expect((await ok(zero, '/database-stats')).xact_commit_per_s).toBeNull()
    })

    test('archiver: nulls before any section, the latest section served, a batch without it leaves it as it was', async () => {
      const NOTHING = {
        ts: null,
        archive_mode: null,
        archive_command_set: null,
        archived_count: null,
        last_archived_wal: null,
        last_archived_time: null,
        failed_count: null,
        last_failed_wal: null,
        last_failed_time: null,
        stats_reset: null,
        ready_count: null,
        ready_bytes: null,
        oldest_ready_time: null,
        failing: false,
      }
      // An agent from before the collector sends no section: the answer is 200 with nulls.
      const id = await ingest(pgBatch('archiver-db', at(0), { bgwriter: { buffers_alloc: 1 } }))
      expect(await ok(id, '/archiver')).toEqual(NOTHING)
      const status = {
        archive_mode: 'on',
        archive_command_set: true,
        archived_count: 7,
        last_archived_wal: '000000010000000000000007',
        last_archived_time: at(1),
        failed_count: 2,
        last_failed_wal: '000000010000000000000008',
        last_failed_time: at(2),
        stats_reset: null,
        ready_count: 3,
        ready_bytes: 3 * 16 * 1024 ** 2,
        oldest_ready_time: at(1, 30),
      }
      await ingest(pgBatch('archiver-db', at(3), { archiver: status }))
      const served = {
        ...status,
        ts: iso(at(3)),
        last_archived_time: iso(at(1)),
        last_failed_time: iso(at(2)),
        oldest_ready_time: iso(at(1, 30)),
        failing: true,
      }
      expect(await ok(id, '/archiver')).toEqual(served)
      // A later batch without the section (an older agent again, or the collector disabled) keeps the snapshot; a late one never replaces it.
      await ingest(pgBatch('archiver-db', at(4)))
      await session.ingestLate(pgBatch('archiver-db', at(2), { archiver: { ...status, failed_count: 1 } }), 120)
      expect(await ok(id, '/archiver')).toEqual(served)
      // Archived after the failure: no longer failing.
      await ingest(
        pgBatch('archiver-db', at(5), { archiver: { ...status, archived_count: 8, last_archived_time: at(5) } }),
      )
      expect(await ok(id, '/archiver')).toMatchObject({ archived_count: 8, failing: false })
      // archive_mode on with no command: nothing is archived and every WAL file is kept, a critical finding.
      const bare = await ingest(
        pgBatch('archiver-no-command', at(5), {
          archiver: {
            ...status,
            archive_command_set: false,
            failed_count: 0,
            last_failed_time: null,
            last_failed_wal: null,
          },
        }),
      )
      const finding = (await ok(bare, '/doctor')).top_issues.find(
        (f: { rule: string }) => f.rule === 'pg_archiver_failing',
      )
      expect([finding?.severity, finding?.title]).toEqual(['critical', 'WAL archiving is on without a command'])
      expect(finding?.detail).toContain("archive_mode is 'on' but neither archive_command nor archive_library is set")
      // The section is bounded: a WAL file name past 64 characters is refused with the field named.
      const res = await session.server.call('POST', '/api/v1/ingest', {
        apiKey: session.key,
        body: pgBatch('archiver-db', at(6), { archiver: { ...status, last_failed_wal: 'x'.repeat(65) } }),
      })
      expect(res.status).toBe(400)
      expect(JSON.stringify(res.body)).toContain('last_failed_wal')
    })

    test('backups: empty before any section; the latest status with its last, last successful and last full; the doctor on fresh, stale, failed and failing', async () => {
      const EMPTY = {
        ts: null,
        tool: null,
        checked_at: null,
        error: null,
        latest: null,
        last_successful: null,
        last_full: null,
        backups: [],
      }
      const id = await ingest(pgBatch('backups-db', at(0)))
      expect(await ok(id, '/backups')).toEqual(EMPTY)
      const backupRule = async (db: string) =>
        (
          (await ok(db, '/doctor')).top_issues as {
            rule: string
            severity: string
            title: string
            detail: string
            objects: string[]
          }[]
        )
          .filter((f) => f.rule === 'pg_backup_age')
          .map((f) => [f.severity, f.title])
      // Never configured: no finding (the agent cannot know).
      expect(await backupRule(id)).toEqual([])
      const full = {
        label: '20261101-010000F',
        type: 'full',
        started_at: at(0),
        finished_at: at(2),
        size_bytes: 31457280,
        stored_bytes: 4194304,
        stanza: 'main',
        ok: true,
      }
      const diff = {
        ...full,
        label: '20261101-010000F_20261101-030000D',
        type: 'diff',
        started_at: at(60),
        finished_at: at(61),
        ok: false,
      }
      await ingest(
        pgBatch('backups-db', at(70), {
          backups: { tool: 'pgbackrest', checked_at: at(70), error: null, backups: [diff, full] },
        }),
      )
      const view = (b: typeof full) => ({ ...b, started_at: iso(b.started_at), finished_at: iso(b.finished_at) })
      expect(await ok(id, '/backups')).toEqual({
        ts: iso(at(70)),
        tool: 'pgbackrest',
        checked_at: iso(at(70)),
        error: null,
        latest: view(diff),
        last_successful: view(full),
        last_full: view(full),
        backups: [view(diff), view(full)],
      })
      // Fresh, but the newest failed.
      expect(await backupRule(id)).toEqual([['warning', 'The newest backup failed']])
      // A batch without the section keeps the status.
      await ingest(pgBatch('backups-db', at(80)))
      expect((await ok(id, '/backups')).tool).toBe('pgbackrest')
      // Stale: the last success 30 hours before the base (a warning), 80 hours (critical); the full 9 days old.
      const old = (hours: number) => ({ ...full, started_at: base - hours * HOUR, finished_at: base - hours * HOUR })
      const stale = await ingest(
        pgBatch('backups-stale', at(0), {
          backups: { tool: 'walg', checked_at: at(0), error: null, backups: [old(30)] },
        }),
      )
      expect(await backupRule(stale)).toEqual([
        ['warning', expect.stringMatching(/^The last successful backup is 1\.\d days old$/)],
      ])
      const older = await ingest(
        pgBatch('backups-older', at(0), {
          backups: {
            tool: 'walg',
            checked_at: at(0),
            error: null,
            backups: [{ ...old(1), type: 'delta' }, old(9 * 24)],
          },
        }),
      )
      expect(await backupRule(older)).toEqual([
        ['warning', expect.stringMatching(/^The last full backup is 9\.\d days old$/)],
      ])
      const none = await ingest(
        pgBatch('backups-none', at(0), {
          backups: { tool: 'pgbackrest', checked_at: at(0), error: null, backups: [] },
        }),
      )
      expect(await backupRule(none)).toEqual([['critical', 'No successful backup in pgBackRest']])
      const critical = await ingest(
        pgBatch('backups-critical', at(0), {
          backups: { tool: 'pgbackrest', checked_at: at(0), error: null, backups: [old(80)] },
        }),
      )
      expect((await backupRule(critical))[0]?.[0]).toBe('critical')
      // The command failing: its error, and nothing said of ages it cannot know.
      const failing = await ingest(
        pgBatch('backups-failing', at(0), {
          backups: {
            tool: 'pgbackrest',
            checked_at: at(0),
            error: 'pgbackrest exited with code 55: ERROR: [055]: unable to load info file',
            backups: [],
          },
        }),
      )
      expect(await backupRule(failing)).toEqual([['warning', 'The pgBackRest backup listing fails']])
      expect((await ok(failing, '/backups')).error).toBe(
        'pgbackrest exited with code 55: ERROR: [055]: unable to load info file',
      )
    })

    test('version gates: wal-stats needs PostgreSQL 14, io-stats 16', async () => {
      const pg13 = await ingest(pgBatch('pg13', at(10), {}, '13.4'))
      const pg15 = await ingest(pgBatch('pg15', at(10), {}, '15.2'))
      const pg16 = await ingest(pgBatch('pg16', at(10), {}, 'PostgreSQL 16.1 on x86_64-pc-linux-gnu'))
      const wal = { status: 400, body: { error: 'wal-stats needs PostgreSQL 14 or later' } }
      const io = { status: 400, body: { error: 'io-stats needs PostgreSQL 16 or later' } }
      expect(await get(pg13, '/wal-stats')).toEqual(wal)
      expect(await get(pg13, '/wal-stats/timeseries')).toEqual(wal)
      expect(await get(pg13, '/io-stats')).toEqual(io)
      expect(await get(pg15, '/io-stats')).toEqual(io)
      expect(await get(pg15, '/io-stats/timeseries')).toEqual(io)
      expect((await get(pg15, '/wal-stats')).status).toBe(200)
      expect((await get(pg16, '/io-stats')).body).toEqual({ ts: null, interval_seconds: null, stats: [] })
      // A database registered without a version is not refused.
      const res = await session.server.call('POST', '/api/v1/databases', {
        apiKey: session.key,
        body: { name: 'unknown-version', engine: 'postgres', host: 'h' },
      })
      expect(res.status).toBe(201)
      expect((await get(res.body.id, '/io-stats')).status).toBe(200)
      expect((await get(res.body.id, '/wal-stats/timeseries')).status).toBe(200)
    })

    test('PostgreSQL-only endpoints answer 400 for ClickHouse; another organization gets 404', async () => {
      const ch = pgBatch('ch', at(10))
      ch.database = { name: 'ch', engine: 'clickhouse', engine_version: '24.3', host: 'ch.internal', port: 8123 }
      const chId = await ingest(ch)
      const postgresOnly = POSTGRES_INTERNALS_PATHS
      await session.expectEach(chId, postgresOnly, {
        status: 400,
        body: { error: 'this endpoint serves postgres databases; "ch" is a clickhouse database' },
      })
      expect(await get(chId, '/waits')).toEqual({ status: 200, body: [] })

      const pgId = await ingest(pgBatch('mine', at(10), { waits: [wait('IO', 'DataFileRead', 1)] }))
      await session.expectHiddenFromOtherOrganizations(pgId, ['/waits', ...postgresOnly])
      expect((await session.server.call('GET', `/api/v1/databases/${pgId}/waits`)).status).toBe(401)
    })

    test('deleting a database removes its internals', async () => {
      const id = await ingest(
        pgBatch('internals-delete', at(20), {
          waits: [wait('IO', 'DataFileRead', 1)],
          replication: replication(5, 1, [['s', 5]]),
          bgwriter: { buffers_alloc: 1 },
          wal_stats: { wal_bytes: 1 },
          io_stats: [{ backend_type: 'client backend', object: 'relation', context: 'normal', counters: { reads: 1 } }],
          database_stats: { xact_commit: 1, numbackends: 1 },
        }),
      )
      const count = (table: string) => session.rowCount(table, id)
      for (const table of INTERNAL_TABLES)
        expect({ table, stored: (await count(table)) > 0 }).toEqual({ table, stored: true })
      expect((await session.server.call('DELETE', `/api/v1/databases/${id}`, { apiKey: session.key })).status).toBe(204)
      for (const table of INTERNAL_TABLES) expect({ table, n: await count(table) }).toEqual({ table, n: 0 })
    })
  })
}
