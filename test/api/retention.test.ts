// Retention and compaction on both stores, driven by the health monitor's runRetention(now) with the
// time moved by the test: an unverified organization keeps 24 hours of telemetry, a verified one
// DBM_RETENTION_DAYS (30 here), in every telemetry table; minute buckets older than 48 hours are deleted
// while the answers over such windows stay exactly what they were, read from the hourly buckets.
import { afterEach, describe, expect, test } from 'bun:test'
import { createMonitor } from '../../src/server/monitor/index.ts'
import {
  KEPT_WITH_DATABASE,
  RETAINED_TABLES,
  WITHOUT_ROWID_KEYS,
  batchDeleteSql,
} from '../../src/server/store/retention/retention.ts'
import { type Window, windowRanges } from '../../src/server/store/window.ts'
import { sqliteDialect } from '../../src/server/store/dialect.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { HOUR, MINUTE, chBatch, iso, pgBatch, range } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer, storeKinds } from '../support/server.ts'

const DAY = 24 * HOUR

/** A PostgreSQL batch with every section the server stores, `calls` calls of one statement. */
function pgFull(name: string, at: number, calls: number): IngestBatch {
  return pgBatch(name, at, {
    query_stats: [
      {
        query_hash: 'q1',
        query_text: 'SELECT * FROM orders',
        calls,
        total_time_ms: 2 * calls,
        rows: calls,
        shared_blks_hit: 10 * calls,
        shared_blks_read: 0,
      },
    ],
    explain_plans: [
      {
        query_hash: 'q1',
        ts: at,
        plan_json: { Plan: { 'Node Type': 'Seq Scan' } },
        plan_hash: 'p1',
        total_cost: 1,
        actual_time_ms: null,
        seq_scans: 1,
        index_scans: 0,
        rows_estimated: 1,
        rows_actual: null,
        source: 'sampled',
      },
    ],
    activity: [
      {
        pid: 7,
        query_text: 'SELECT 1',
        state: 'active',
        wait_event_type: null,
        wait_event: null,
        duration_ms: 5,
        blocking_pids: [],
      },
    ],
    locks: [
      {
        pid: 7,
        lock_type: 'relation',
        mode: 'AccessShareLock',
        relation_name: 'orders',
        granted: true,
        blocked_by_pid: null,
        duration_ms: null,
        query_text: null,
      },
    ],
    waits: [{ wait_event_type: 'IO', wait_event: 'DataFileRead', count: calls, total_duration_ms: 10 * calls }],
    tables: [
      {
        schema_name: 'public',
        table_name: 'orders',
        seq_scan: 10,
        seq_tup_read: 100,
        idx_scan: 5,
        idx_tup_fetch: 5,
        n_tup_ins: 1,
        n_tup_upd: 1,
        n_tup_del: 0,
        n_tup_hot_upd: 0,
        n_live_tup: 100,
        n_dead_tup: 1,
        last_vacuum: null,
        last_autovacuum: null,
        last_analyze: null,
        last_autoanalyze: null,
        table_size_bytes: 8192,
        index_size_bytes: 8192,
        delta: {
          seq_scan: calls,
          seq_tup_read: 10,
          idx_scan: 1,
          idx_tup_fetch: 1,
          n_tup_ins: 1,
          n_tup_upd: 0,
          n_tup_del: 0,
          n_tup_hot_upd: 0,
        },
      },
    ],
    indexes: [
      {
        schema_name: 'public',
        table_name: 'orders',
        index_name: 'orders_pkey',
        idx_scan: 5,
        idx_tup_read: 5,
        idx_tup_fetch: 5,
        size_bytes: 8192,
        index_def: 'CREATE UNIQUE INDEX orders_pkey ON public.orders USING btree (id)',
        is_unique: true,
        is_primary: true,
        is_valid: true,
        delta: { idx_scan: 1, idx_tup_read: 1, idx_tup_fetch: 1 },
      },
    ],
    replication: {
      is_replica: true,
      replication_lag_bytes: 100 * calls,
      replication_lag_seconds: calls,
      upstream_host: 'primary',
      replicas: [],
      slots: [{ slot_name: 's1', slot_type: 'physical', active: true, lag_bytes: 50, wal_status: 'reserved' }],
    },
    bgwriter: { checkpoints_timed: 1 },
    wal_stats: { wal_records: 10 },
    io_stats: [{ backend_type: 'client backend', object: 'relation', context: 'normal', counters: { reads: 1 } }],
    database_stats: { blks_hit: 1000 * calls, blks_read: 0, numbackends: 3 },
  })
}

/** A ClickHouse batch with every ClickHouse section. */
function chFull(name: string, at: number): IngestBatch {
  return chBatch(name, at, {
    query_stats: [
      {
        query_hash: '42',
        query_text: 'SELECT 1',
        calls: 1,
        total_time_ms: 1,
        rows: 1,
        shared_blks_hit: 0,
        shared_blks_read: 0,
        p99_ms: 1,
      },
    ],
    activity: [
      {
        pid: 'q1',
        query_text: 'SELECT 1',
        state: 'active',
        wait_event_type: null,
        wait_event: null,
        duration_ms: 5,
        blocking_pids: [],
      },
    ],
    parts: [{ database: 'db', table: 't', partition_id: 'all', active_parts: 3, rows: 10, bytes_on_disk: 100 }],
    merges: [],
    mutations: [],
    server_metrics: { uptime_s: 100, queries_total: 5, 'disk.default.free_bytes': 10, 'disk.default.total_bytes': 20 },
  })
}

/** The tables each engine's full batch fills, per database. */
const PG_TABLES = [
  'query_stats',
  'query_texts',
  'explain_plans',
  'snapshots',
  'wait_stats',
  'table_stats',
  'index_stats',
  'latest_tables',
  'latest_indexes',
  'replication_lag',
  'replication_slot_lag',
  'metric_counters',
  'metric_gauges',
  'internals_latest',
  'events',
]
const CH_TABLES = [
  'query_stats',
  'query_texts',
  'snapshots',
  'metric_counters',
  'metric_gauges',
  'clickhouse_latest',
  'events',
]
const BUCKET_TABLES = [
  'query_stats',
  'wait_stats',
  'table_stats',
  'index_stats',
  'replication_lag',
  'replication_slot_lag',
  'metric_counters',
  'metric_gauges',
]

async function counts(server: TestServer, id: string, tables: string[], where = ''): Promise<Record<string, number>> {
  const result: Record<string, number> = {}
  for (const table of tables) {
    const row = await server.store.driver.get<{ n: number }>(
      `SELECT COUNT(*) AS n FROM ${table} WHERE database_id = $1 ${where}`,
      [id],
    )
    result[table] = Number(row!.n)
  }
  return result
}

const each = (tables: string[], n: number) => Object.fromEntries(tables.map((t) => [t, n]))
const positive = (found: Record<string, number>) =>
  Object.entries(found)
    .filter(([, n]) => n === 0)
    .map(([t]) => t)

for (const kind of storeKinds) {
  describe(`retention (${kind})`, () => {
    let server: TestServer | undefined
    afterEach(async () => {
      await server?.stop()
      server = undefined
    })
    async function organization(verified: boolean) {
      server = await startTestServer(kind)
      const { key } = await agentAccount(server, { verified })
      const s = server
      return {
        server: s,
        monitor: createMonitor(s.deps, { retentionDays: 30 }),
        async ingest(batch: IngestBatch): Promise<string> {
          const res = await s.call('POST', '/api/v1/ingest', { apiKey: key, body: batch })
          if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`)
          return res.body.database_id
        },
        async get(id: string, path: string) {
          const res = await s.call('GET', `/api/v1/databases/${id}${path}`, { apiKey: key })
          expect({ path, status: res.status }).toEqual({ path, status: 200 })
          return res.body
        },
      }
    }

    test('unverified: telemetry older than 24 hours goes from every table, younger stays; batch ids go after a day', async () => {
      const org = await organization(false)
      const now = org.server.deps.clock()
      const id = await org.ingest(pgFull('orders', now - 30 * HOUR, 1))
      expect(positive(await counts(org.server, id, PG_TABLES))).toEqual([])
      const summary = await org.monitor.runRetention(now)
      expect(summary.rows_deleted).toBeGreaterThan(0)
      expect(await counts(org.server, id, PG_TABLES)).toEqual(each(PG_TABLES, 0))

      await org.ingest(pgFull('orders', now - 23 * HOUR, 1))
      await org.monitor.runRetention(now)
      expect(positive(await counts(org.server, id, PG_TABLES))).toEqual([])
      expect((await counts(org.server, id, ['ingest_batches'])).ingest_batches).toBe(2)

      await org.monitor.runRetention(now + 25 * HOUR)
      expect(await counts(org.server, id, [...PG_TABLES, 'ingest_batches'])).toEqual(
        each([...PG_TABLES, 'ingest_batches'], 0),
      )
    })

    test('verified: kept for DBM_RETENTION_DAYS (minute buckets 48 hours), all gone beyond', async () => {
      const org = await organization(true)
      const now = org.server.deps.clock()
      const pg = await org.ingest(pgFull('orders', now - 30 * HOUR, 1))
      const ch = await org.ingest(chFull('events', now - 30 * HOUR))
      const before = { pg: await counts(org.server, pg, PG_TABLES), ch: await counts(org.server, ch, CH_TABLES) }
      expect(positive(before.pg)).toEqual([])
      expect(positive(before.ch)).toEqual([])
      // 30 hours old is past the unverified retention, not the verified one. Retention rolls the
      // statement statistics, tables and indexes up first: a statement's minute row gains its 10-minute
      // and hourly buckets, a table's and an index's their hourly one.
      await org.monitor.runRetention(now)
      const rolled = {
        pg: { ...before.pg, query_stats: 3, table_stats: 2, index_stats: 2 },
        ch: { ...before.ch, query_stats: 3 },
      }
      expect({ pg: await counts(org.server, pg, PG_TABLES), ch: await counts(org.server, ch, CH_TABLES) }).toEqual(
        rolled,
      )

      // 28 days later (29.25 days old): minute rows compacted, hourly rows and latest sections kept.
      await org.monitor.runRetention(now + 28 * DAY)
      for (const [id, tables] of [
        [pg, PG_TABLES],
        [ch, CH_TABLES],
      ] as const) {
        const buckets = BUCKET_TABLES.filter((t) => tables.includes(t))
        expect(await counts(org.server, id, buckets, 'AND resolution IN (60, 600)')).toEqual(each(buckets, 0))
        expect(positive(await counts(org.server, id, buckets, 'AND resolution = 3600'))).toEqual([])
        expect(
          positive(
            await counts(
              org.server,
              id,
              tables.filter((t) => !buckets.includes(t)),
            ),
          ),
        ).toEqual([])
      }

      await org.monitor.runRetention(now + 31 * DAY)
      expect(await counts(org.server, pg, PG_TABLES)).toEqual(each(PG_TABLES, 0))
      expect(await counts(org.server, ch, CH_TABLES)).toEqual(each(CH_TABLES, 0))
    })

    test('deletes in batches of a few rows until none is left, in every table (on SQLite by key in the WITHOUT ROWID ones)', async () => {
      const org = await organization(true)
      const now = org.server.deps.clock()
      let id = ''
      // an hour between batches (agent silences), and an outage the agent reported at 29 hours, over at 28
      for (const hours of [30, 29, 28]) {
        const batch = pgFull('orders', now - hours * HOUR, 1)
        if (hours === 29)
          batch.availability = {
            state: 'down',
            since: now - hours * HOUR - MINUTE,
            cause: 'refused',
            message: 'connection refused',
          }
        if (hours === 28) batch.availability = { state: 'up', since: now - hours * HOUR - MINUTE }
        id = await org.ingest(batch)
      }
      // roll the statement statistics up first, so the sweep below only deletes what was counted
      await org.monitor.runRetention(now)
      const tables = [...PG_TABLES, 'outages', 'agent_silences', 'ingest_batches']
      const before = await counts(org.server, id, tables)
      expect(positive(before)).toEqual([])
      const total = Object.values(before).reduce((a, b) => a + b, 0) - before.ingest_batches!
      const retention = org.server.store.retention
      const cutoff = now + DAY
      expect(await retention.sweepDatabase(id, { before: cutoff, minutesBefore: cutoff, rollUpTo: now }, 2)).toBe(total)
      expect(await retention.sweepBatchIds(cutoff, 2)).toBe(3)
      expect(await counts(org.server, id, tables)).toEqual(each(tables, 0))
    })

    test('compaction: minute buckets older than 48 hours go, and the answers over those windows stay exact from the hourly ones', async () => {
      const org = await organization(true)
      const now = org.server.deps.clock()
      const t0 = Math.floor((now - 72 * HOUR) / HOUR) * HOUR
      let id = ''
      for (const [minutes, calls] of [
        [10, 1],
        [70, 2],
        [130, 4],
      ] as const)
        id = await org.ingest(pgFull('orders', t0 + minutes * MINUTE, calls))
      await org.ingest(pgFull('orders', now - 50 * MINUTE, 8))
      await org.ingest(pgFull('orders', now - 20 * MINUTE, 16))
      const old = range(t0, t0 + 3 * HOUR)
      const paths = [
        `/queries?${old}`,
        `/queries?${range(t0 + 5 * MINUTE, t0 + 2 * HOUR + 50 * MINUTE)}`,
        `/queries/q1?${old}`,
        `/waits?${old}`,
        `/database-stats/timeseries?${old}`,
        `/tables/public/orders?${old}`,
        `/indexes/public/orders_pkey?${old}`,
        `/replication/history?${old}`,
        `/queries?${range(now - 30 * MINUTE, now)}`,
      ]
      const answers = async () => {
        const found: Record<string, unknown> = {}
        for (const path of paths) found[path] = await org.get(id, path)
        return found
      }
      const before = await answers()
      // The old window reads whole hours (the hour of each edge included); the recent one is exact to the minute.
      expect((before[paths[0]!] as any[]).map((q) => q.total_calls)).toEqual([7])
      expect((before[paths[1]!] as any[]).map((q) => q.total_calls)).toEqual([7])
      expect(before[paths[2]!]).toMatchObject({ total_calls: 7, resolution_seconds: 3600 })
      expect((before[paths[2]!] as any).timeseries.map((p: any) => [p.ts, p.calls])).toEqual([
        [iso(t0), 1],
        [iso(t0 + HOUR), 2],
        [iso(t0 + 2 * HOUR), 4],
      ])
      expect((before[paths[3]!] as any[]).map((w) => [w.ts, w.count])).toEqual([
        [iso(t0), 1],
        [iso(t0 + HOUR), 2],
        [iso(t0 + 2 * HOUR), 4],
      ])
      // No bucket given: hourly intervals for a window whose minute rows are no longer kept.
      expect((before[paths[4]!] as any[]).map((p) => [p.ts, p.blks_hit])).toEqual([
        [iso(t0), 1000],
        [iso(t0 + HOUR), 2000],
        [iso(t0 + 2 * HOUR), 4000],
      ])
      expect(before[paths[5]!]).toMatchObject({ resolution_seconds: 3600 })
      expect((before[paths[8]!] as any[]).map((q) => q.total_calls)).toEqual([16])

      const minuteRows = (where: string) => counts(org.server, id, BUCKET_TABLES, `AND resolution = 60 ${where}`)
      expect(positive(await minuteRows(`AND bucket < ${t0 + 3 * HOUR}`))).toEqual([])
      await org.monitor.runRetention(now)
      expect(await minuteRows(`AND bucket < ${t0 + 3 * HOUR}`)).toEqual(each(BUCKET_TABLES, 0))
      expect(positive(await minuteRows(`AND bucket >= ${now - HOUR}`))).toEqual([])
      expect(
        positive(await counts(org.server, id, BUCKET_TABLES, `AND resolution = 3600 AND bucket < ${t0 + 3 * HOUR}`)),
      ).toEqual([])
      expect(await answers()).toEqual(before)
    })
  })
}

describe('retention coverage and window ranges', () => {
  test('every table with per-database rows is covered by retention', async () => {
    const server = await startTestServer('sqlite')
    try {
      const tables = await server.store.driver.all<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
      )
      const withDatabase: string[] = []
      for (const { name } of tables) {
        const columns = await server.store.driver.all<{ name: string }>(`SELECT name FROM pragma_table_info('${name}')`)
        if (columns.some((c) => c.name === 'database_id')) withDatabase.push(name)
      }
      expect(withDatabase.filter((t) => !RETAINED_TABLES.includes(t) && !KEPT_WITH_DATABASE.includes(t))).toEqual([])
      expect(withDatabase.length).toBeGreaterThan(15)
    } finally {
      await server.stop()
    }
  })

  test('on SQLite, retention picks rows by primary key in the WITHOUT ROWID tables (their keys as listed) and by rowid in the others, each through its key', async () => {
    const server = await startTestServer('sqlite')
    try {
      const driver = server.store.driver
      const withoutRowid: Record<string, string[]> = {}
      const found: Record<string, string[]> = {}
      for (const table of RETAINED_TABLES) {
        const listed = await driver.get<{ wr: number }>('SELECT wr FROM pragma_table_list WHERE name = $1', [table])
        if (listed?.wr === 1) {
          const key = await driver.all<{ name: string }>(
            'SELECT name FROM pragma_table_info($1) WHERE pk > 0 ORDER BY pk',
            [table],
          )
          withoutRowid[table] = key.map((c) => c.name)
        }
        // the batch delete's outer search (by the whole key, or by rowid), and whether its pick searches an index
        const plan = await driver.all<{ parent: number; detail: string }>(
          `EXPLAIN QUERY PLAN ${batchDeleteSql(sqliteDialect, table, 'database_id = $1', 100)}`,
          ['d'],
        )
        const pick = plan.find((p) => p.parent !== 0)!.detail
        found[table] = [
          plan.find((p) => p.parent === 0)!.detail,
          pick.startsWith(`SEARCH ${table} USING `) ? 'the pick searches an index' : pick,
        ]
      }
      expect(withoutRowid).toEqual(
        Object.fromEntries(
          RETAINED_TABLES.filter((t) => t in WITHOUT_ROWID_KEYS).map((t) => [t, [...WITHOUT_ROWID_KEYS[t]!]]),
        ),
      )
      expect(Object.keys(withoutRowid).sort()).toEqual(Object.keys(WITHOUT_ROWID_KEYS).sort())
      expect(found).toEqual(
        Object.fromEntries(
          RETAINED_TABLES.map((t) => {
            const key = WITHOUT_ROWID_KEYS[t]
            const outer = key
              ? `SEARCH ${t} USING PRIMARY KEY (${key.map((k) => `${k}=?`).join(' AND ')})`
              : `SEARCH ${t} USING INTEGER PRIMARY KEY (rowid=?)`
            return [t, [outer, 'the pick searches an index']]
          }),
        ),
      )
    } finally {
      await server.stop()
    }
  })

  test('windowRanges reads whole hours before the minute floor and minutes at the edges after it', () => {
    const h = (n: number) => Date.UTC(2026, 0, 10) + n * HOUR
    const m = (n: number) => n * MINUTE
    const window = (since: number, until: number, minuteFloor?: number): Window => ({ since, until, minuteFloor })
    // No floor: minute edges around the whole hours.
    expect(windowRanges(window(h(0) + m(5), h(3) + m(10)))).toEqual([
      { resolution: 3600, from: h(1), to: h(3) },
      { resolution: 60, from: h(0) + m(5), to: h(1) },
      { resolution: 60, from: h(3), to: h(3) + m(10) },
    ])
    // Entirely before the floor: the hours it overlaps.
    expect(windowRanges(window(h(0) + m(5), h(3) + m(10), h(10)))).toEqual([
      { resolution: 3600, from: h(0), to: h(3) + m(10) },
    ])
    // Across the floor: hours up to it, then the usual ranges from it (an empty minute edge at the floor).
    expect(windowRanges(window(h(0) + m(5), h(3) + m(10), h(2)))).toEqual([
      { resolution: 3600, from: h(0), to: h(2) },
      { resolution: 3600, from: h(2), to: h(3) },
      { resolution: 60, from: h(2), to: h(2) },
      { resolution: 60, from: h(3), to: h(3) + m(10) },
    ])
    // After the floor: unchanged.
    expect(windowRanges(window(h(5) + m(5), h(5) + m(50), h(2)))).toEqual([
      { resolution: 60, from: h(5) + m(5), to: h(5) + m(50) },
    ])
  })
})
