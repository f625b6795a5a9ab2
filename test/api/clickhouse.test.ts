// ClickHouse internals on both stores: parts (per partition, per table with the worst partition's
// ratios to the insert thresholds, sorts, limits, filters, history), merges, mutations (stuck first,
// ages, filters) and server-metrics (current values and timeseries across minute and hour
// boundaries) from crafted batches with known values; a late batch never replacing newer data; the
// ClickHouse fields of /queries and /active; engine, organization and validation errors with exact
// bodies; and deletion of the rows with their database.
import { describe, expect, test } from 'bun:test'
import type { MergeEntry, MutationEntry, PartStat } from '../../src/shared/wire.ts'
import { HOUR, POSTGRES_INTERNALS_PATHS, agentSession, at, chBatch, iso, pgBatch, range } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

function part(
  database: string,
  table: string,
  partition_id: string,
  active_parts: number,
  rows: number,
  bytes: number,
  thresholds = true,
): PartStat {
  return {
    database,
    table,
    partition_id,
    active_parts,
    rows,
    bytes_on_disk: bytes,
    ...(thresholds ? { parts_to_delay_insert: 300, parts_to_throw_insert: 600 } : {}),
  }
}

function merge(table: string, elapsed: number, progress: number, fields: Partial<MergeEntry> = {}): MergeEntry {
  return {
    database: 'events',
    table,
    elapsed_s: elapsed,
    progress,
    num_parts: 4,
    total_size_bytes_compressed: 1_000_000,
    result_part_name: `all_1_4_1_${table}`,
    is_mutation: false,
    ...fields,
  }
}

function mutation(id: string, createTime: number, fields: Partial<MutationEntry> = {}): MutationEntry {
  return {
    database: 'events',
    table: 'hits',
    mutation_id: id,
    command: `DELETE WHERE id = '${id}'`,
    create_time: createTime,
    is_done: false,
    parts_to_do: 3,
    latest_fail_reason: '',
    latest_fail_time: null,
    stuck: false,
    ...fields,
  }
}

/** One cycle's query_stats row of a ClickHouse statement: calls of 10 ms and one row each, twice the bytes read in memory. */
function statementCycle(hash: string, text: string) {
  return (calls: number, readBytes: number, p99: number, errors: number) => ({
    query_hash: hash,
    query_text: text,
    calls,
    total_time_ms: 10 * calls,
    rows: calls,
    shared_blks_hit: 0,
    shared_blks_read: 0,
    read_bytes: readBytes,
    memory_bytes: 2 * readBytes,
    p99_ms: p99,
    errors,
  })
}

const CLICKHOUSE_TABLES = ['clickhouse_latest', 'metric_gauges', 'metric_counters']

for (const kind of storeKinds) {
  describe(`ClickHouse internals (${kind})`, () => {
    const session = agentSession(kind)
    const { ingest, get, ok } = session

    test('parts: partitions and tables with the worst partition and its ratios to the insert thresholds', async () => {
      const empty = await ingest(chBatch('parts-empty', at(10)))
      expect(await ok(empty, '/parts')).toEqual({
        ts: null,
        active_parts: null,
        partition_count: null,
        table_count: null,
        max_partition_parts: null,
        max_delay_insert_ratio: null,
        max_throw_insert_ratio: null,
        tables: [],
        partitions: [],
      })

      const id = await ingest(
        chBatch('parts', at(10), {
          parts: [
            part('events', 'hits', '202601', 250, 1000, 5000),
            part('events', 'hits', '202602', 20, 9000, 20000),
            part('events', 'clicks', 'all', 30, 500, 70000),
            part('logs', 'raw', 'all', 5, 100000, 1000, false),
            // Ties the worst partition of events.hits: the lower partition id is named.
            part('events', 'hits', '202603', 250, 1, 1),
          ],
        }),
      )
      const A = {
        database: 'events',
        table: 'hits',
        partition_id: '202601',
        active_parts: 250,
        rows: 1000,
        bytes_on_disk: 5000,
        parts_to_delay_insert: 300,
        parts_to_throw_insert: 600,
        delay_insert_ratio: 0.8333,
        throw_insert_ratio: 0.4167,
      }
      const B = {
        database: 'events',
        table: 'hits',
        partition_id: '202602',
        active_parts: 20,
        rows: 9000,
        bytes_on_disk: 20000,
        parts_to_delay_insert: 300,
        parts_to_throw_insert: 600,
        delay_insert_ratio: 0.0667,
        throw_insert_ratio: 0.0333,
      }
      const C = {
        database: 'events',
        table: 'clicks',
        partition_id: 'all',
        active_parts: 30,
        rows: 500,
        bytes_on_disk: 70000,
        parts_to_delay_insert: 300,
        parts_to_throw_insert: 600,
        delay_insert_ratio: 0.1,
        throw_insert_ratio: 0.05,
      }
      const D = {
        database: 'logs',
        table: 'raw',
        partition_id: 'all',
        active_parts: 5,
        rows: 100000,
        bytes_on_disk: 1000,
        parts_to_delay_insert: null,
        parts_to_throw_insert: null,
        delay_insert_ratio: null,
        throw_insert_ratio: null,
      }
      const E = {
        database: 'events',
        table: 'hits',
        partition_id: '202603',
        active_parts: 250,
        rows: 1,
        bytes_on_disk: 1,
        parts_to_delay_insert: 300,
        parts_to_throw_insert: 600,
        delay_insert_ratio: 0.8333,
        throw_insert_ratio: 0.4167,
      }
      const hits = {
        database: 'events',
        table: 'hits',
        active_parts: 520,
        partition_count: 3,
        rows: 10001,
        bytes_on_disk: 25001,
        worst_partition_id: '202601',
        max_partition_parts: 250,
        parts_to_delay_insert: 300,
        parts_to_throw_insert: 600,
        delay_insert_ratio: 0.8333,
        throw_insert_ratio: 0.4167,
      }
      const clicks = {
        database: 'events',
        table: 'clicks',
        active_parts: 30,
        partition_count: 1,
        rows: 500,
        bytes_on_disk: 70000,
        worst_partition_id: 'all',
        max_partition_parts: 30,
        parts_to_delay_insert: 300,
        parts_to_throw_insert: 600,
        delay_insert_ratio: 0.1,
        throw_insert_ratio: 0.05,
      }
      const raw = {
        database: 'logs',
        table: 'raw',
        active_parts: 5,
        partition_count: 1,
        rows: 100000,
        bytes_on_disk: 1000,
        worst_partition_id: 'all',
        max_partition_parts: 5,
        parts_to_delay_insert: null,
        parts_to_throw_insert: null,
        delay_insert_ratio: null,
        throw_insert_ratio: null,
      }
      const totals = {
        ts: iso(at(10)),
        active_parts: 555,
        partition_count: 5,
        table_count: 3,
        max_partition_parts: 250,
        max_delay_insert_ratio: 0.8333,
        max_throw_insert_ratio: 0.4167,
      }

      expect(await ok(id, '/parts')).toEqual({ ...totals, tables: [hits, clicks, raw], partitions: [A, E, C, B, D] })
      expect(await ok(id, '/parts?sort_by=active_parts')).toEqual({
        ...totals,
        tables: [hits, clicks, raw],
        partitions: [A, E, C, B, D],
      })
      expect(await ok(id, '/parts?sort_by=bytes_on_disk')).toEqual({
        ...totals,
        tables: [clicks, hits, raw],
        partitions: [C, B, A, D, E],
      })
      expect(await ok(id, '/parts?sort_by=rows')).toEqual({
        ...totals,
        tables: [raw, hits, clicks],
        partitions: [D, B, A, C, E],
      })
      // The limit cuts each list; the totals stay those of every partition. Over the maximum: clamped.
      expect(await ok(id, '/parts?limit=2')).toEqual({ ...totals, tables: [hits, clicks], partitions: [A, E] })
      expect(await ok(id, '/parts?limit=5000')).toEqual({
        ...totals,
        tables: [hits, clicks, raw],
        partitions: [A, E, C, B, D],
      })
      // Filters narrow the partitions, and the totals with them.
      expect(await ok(id, '/parts?database=events&table=hits')).toEqual({
        ts: iso(at(10)),
        active_parts: 520,
        partition_count: 3,
        table_count: 1,
        max_partition_parts: 250,
        max_delay_insert_ratio: 0.8333,
        max_throw_insert_ratio: 0.4167,
        tables: [hits],
        partitions: [A, E, B],
      })
      expect(await ok(id, '/parts?database=logs')).toMatchObject({
        active_parts: 5,
        max_delay_insert_ratio: null,
        tables: [raw],
        partitions: [D],
      })
      expect(await ok(id, '/parts?table=nope')).toMatchObject({
        ts: iso(at(10)),
        active_parts: 0,
        partition_count: 0,
        max_partition_parts: 0,
        tables: [],
        partitions: [],
      })

      // A newer batch with no parts at all replaces the snapshot.
      await ingest(chBatch('parts', at(11), { parts: [] }))
      expect(await ok(id, '/parts')).toEqual({
        ts: iso(at(11)),
        active_parts: 0,
        partition_count: 0,
        table_count: 0,
        max_partition_parts: 0,
        max_delay_insert_ratio: null,
        max_throw_insert_ratio: null,
        tables: [],
        partitions: [],
      })
    })

    test('parts timeseries: active parts, partitions and the largest partition, the latest value per interval', async () => {
      const parts = (...counts: number[]) => counts.map((n, i) => part('events', 'hits', `p${i}`, n, 1, 1))
      await ingest(chBatch('parts-history', at(59, 10), { parts: parts(6, 4) }))
      await ingest(chBatch('parts-history', at(59, 40), { parts: parts(7, 5) }))
      const id = await ingest(chBatch('parts-history', at(60, 30), { parts: parts(15, 3, 2) }))
      // Delivered late: it does not replace the values sampled after it.
      await ingest(chBatch('parts-history', at(59, 20), { parts: parts(99) }))

      const point = (ts: number, active: number, partitions: number, max: number) => ({
        ts: iso(ts),
        active_parts: active,
        partition_count: partitions,
        max_partition_parts: max,
      })
      const minutes = [point(at(59), 12, 2, 7), point(at(60), 20, 3, 15)]
      expect(await ok(id, `/parts/timeseries?${range(at(50), at(70))}`)).toEqual(minutes)
      expect(await ok(id, `/parts/timeseries?${range(at(50), at(70))}&bucket=60`)).toEqual(minutes)
      expect(await ok(id, '/parts/timeseries')).toEqual(minutes)
      expect(await ok(id, `/parts/timeseries?${range(at(0), at(120))}&bucket=3600`)).toEqual([
        point(at(0), 12, 2, 7),
        point(at(60), 20, 3, 15),
      ])
      expect(await ok(id, `/parts/timeseries?${range(at(0), at(120))}&bucket=7200`)).toEqual([point(at(0), 20, 3, 15)])
      expect(await ok(id, `/parts/timeseries?${range(at(61), at(70))}`)).toEqual([])
      expect((await ok(id, '/parts')).ts).toBe(iso(at(60, 30)))
    })

    test('merges: longest first, progress in percent, the mean progress of all running merges', async () => {
      const empty = await ingest(chBatch('merges-empty', at(10)))
      expect(await ok(empty, '/merges')).toEqual({
        ts: null,
        active_merges: null,
        merge_progress_pct: null,
        merges: [],
      })

      const id = await ingest(
        chBatch('merges', at(10), {
          merges: [
            merge('hits', 12.5, 0.25),
            merge('clicks', 300.1234, 0.9, {
              is_mutation: true,
              result_part_name: 'all_1_1_2_5',
              num_parts: 1,
              total_size_bytes_compressed: 52_428_800,
            }),
            merge('views', 0.75, 0.123456),
          ],
        }),
      )
      expect(await ok(id, '/merges')).toEqual({
        ts: iso(at(10)),
        active_merges: 3,
        // (25 + 90 + 12.3456) / 3
        merge_progress_pct: 42.45,
        merges: [
          {
            database: 'events',
            table: 'clicks',
            elapsed_s: 300.123,
            progress: 0.9,
            progress_pct: 90,
            num_parts: 1,
            total_size_bytes_compressed: 52_428_800,
            result_part_name: 'all_1_1_2_5',
            is_mutation: true,
          },
          {
            database: 'events',
            table: 'hits',
            elapsed_s: 12.5,
            progress: 0.25,
            progress_pct: 25,
            num_parts: 4,
            total_size_bytes_compressed: 1_000_000,
            result_part_name: 'all_1_4_1_hits',
            is_mutation: false,
          },
          {
            database: 'events',
            table: 'views',
            elapsed_s: 0.75,
            progress: 0.1235,
            progress_pct: 12.35,
            num_parts: 4,
            total_size_bytes_compressed: 1_000_000,
            result_part_name: 'all_1_4_1_views',
            is_mutation: false,
          },
        ],
      })
      // The limit cuts the list, not the summary.
      expect(await ok(id, '/merges?limit=1')).toMatchObject({
        active_merges: 3,
        merge_progress_pct: 42.45,
        merges: [{ table: 'clicks' }],
      })
      expect((await ok(id, '/merges?limit=1')).merges).toHaveLength(1)
      // No merge running: a count of 0 and no progress.
      await ingest(chBatch('merges', at(11), { merges: [] }))
      expect(await ok(id, '/merges')).toEqual({
        ts: iso(at(11)),
        active_merges: 0,
        merge_progress_pct: null,
        merges: [],
      })
    })

    test('mutations: stuck first, then running, then done; ages relative to now; filters', async () => {
      const empty = await ingest(chBatch('mutations-empty', at(10)))
      expect(await ok(empty, '/mutations')).toEqual({
        ts: null,
        active_mutations: null,
        stuck_mutations: null,
        mutations: [],
      })

      const now = Date.now()
      const created = {
        failing: Math.floor(now / 1000) * 1000 - 600_000,
        old: Math.floor(now / 1000) * 1000 - 2 * HOUR,
        running: Math.floor(now / 1000) * 1000 - 60_000,
        done: Math.floor(now / 1000) * 1000 - 5 * HOUR,
      }
      const failTime = created.failing + 30_000
      const id = await ingest(
        chBatch('mutations', now - 5000, {
          mutations: [
            mutation('mutation_4.txt', created.done, { is_done: true, parts_to_do: 0 }),
            mutation('mutation_3.txt', created.running),
            mutation('mutation_2.txt', created.failing, {
              stuck: true,
              latest_fail_reason: 'Code: 241. DB::Exception: Memory limit exceeded',
              latest_fail_time: failTime,
            }),
            mutation('mutation_1.txt', created.old, { stuck: true, table: 'clicks', command: 'UPDATE x = 1 WHERE 1' }),
          ],
        }),
      )
      const view = (m: MutationEntry, age: number) => ({
        database: m.database,
        table: m.table,
        mutation_id: m.mutation_id,
        command: m.command,
        create_time: iso(m.create_time),
        age_seconds: age,
        is_done: m.is_done,
        parts_to_do: m.parts_to_do,
        latest_fail_reason: m.latest_fail_reason === '' ? null : m.latest_fail_reason,
        latest_fail_time: m.latest_fail_time === null ? null : iso(m.latest_fail_time),
        stuck: m.stuck,
      })
      const old = mutation('mutation_1.txt', created.old, {
        stuck: true,
        table: 'clicks',
        command: 'UPDATE x = 1 WHERE 1',
      })
      const failing = mutation('mutation_2.txt', created.failing, {
        stuck: true,
        latest_fail_reason: 'Code: 241. DB::Exception: Memory limit exceeded',
        latest_fail_time: failTime,
      })
      const running = mutation('mutation_3.txt', created.running)
      const done = mutation('mutation_4.txt', created.done, { is_done: true, parts_to_do: 0 })

      /** GET with the ages expected from the server's clock around the request (equal unless a second ticked). */
      const mutations = async (path: string, expected: MutationEntry[]) => {
        const before = session.server.deps.clock()
        const body = await ok(id, path)
        const after = session.server.deps.clock()
        const ages = body.mutations.map((m: { age_seconds: number }) => m.age_seconds)
        expected.forEach((m, i) => {
          expect(ages[i]).toBeGreaterThanOrEqual(Math.floor((before - m.create_time) / 1000))
          expect(ages[i]).toBeLessThanOrEqual(Math.floor((after - m.create_time) / 1000))
        })
        return {
          body,
          expected: (summary: object) => ({
            ts: iso(now - 5000),
            ...summary,
            mutations: expected.map((m, i) => view(m, ages[i])),
          }),
        }
      }
      const summary = { active_mutations: 3, stuck_mutations: 2 }
      let r = await mutations('/mutations', [old, failing, running, done])
      expect(r.body).toEqual(r.expected(summary))
      // The oldest stuck one is two hours old.
      expect(r.body.mutations[0].age_seconds).toBeGreaterThanOrEqual(7200)
      expect(r.body.mutations[0].age_seconds).toBeLessThan(7260)
      r = await mutations('/mutations?stuck=true', [old, failing])
      expect(r.body).toEqual(r.expected(summary))
      r = await mutations('/mutations?stuck=false', [running, done])
      expect(r.body).toEqual(r.expected(summary))
      r = await mutations('/mutations?include_done=false', [old, failing, running])
      expect(r.body).toEqual(r.expected(summary))
      r = await mutations('/mutations?stuck=false&include_done=false', [running])
      expect(r.body).toEqual(r.expected(summary))
      r = await mutations('/mutations?include_done=true&limit=1', [old])
      expect(r.body).toEqual(r.expected(summary))
      // Later, every age has grown with the server's clock.
      session.server.advance(HOUR)
      try {
        r = await mutations('/mutations', [old, failing, running, done])
        expect(r.body.mutations[0].age_seconds).toBeGreaterThanOrEqual(3 * 3600)
      } finally {
        session.server.advance(-HOUR)
      }
    })

    test('server-metrics: memory, disks, connections and failed queries now, and over minutes and hours', async () => {
      const empty = await ingest(chBatch('server-empty', at(10)))
      expect(await ok(empty, '/server-metrics')).toEqual({
        ts: null,
        interval_seconds: null,
        uptime_s: null,
        memory_used_bytes: null,
        memory_limit_bytes: null,
        memory_used_pct: null,
        memory_tracked_bytes: null,
        memory_resident_bytes: null,
        os_memory_total_bytes: null,
        os_memory_available_bytes: null,
        os_memory_used_pct: null,
        tcp_connections: null,
        http_connections: null,
        mysql_connections: null,
        postgresql_connections: null,
        interserver_connections: null,
        connections: null,
        max_connections: null,
        running_queries: null,
        max_concurrent_queries: null,
        query_p99_ms: null,
        queries_logged: null,
        queries_total: null,
        queries_failed: null,
        queries_per_s: null,
        failed_queries_per_s: null,
        failed_query_ratio: null,
        disks: [],
        bucket_seconds: 60,
        timeseries: [],
      })

      const GB = 1e9
      const gauges = {
        memory_resident_bytes: 2 * GB,
        memory_limit_bytes: 6 * GB,
        os_memory_total_bytes: 8 * GB,
        os_memory_available_bytes: 6 * GB,
      }
      // The first cycle is the agent's baseline: no query counters yet.
      await ingest(
        chBatch('server', at(59, 10), {
          server_metrics: {
            ...gauges,
            uptime_s: 3600,
            memory_tracked_bytes: 1.5 * GB,
            tcp_connections: 3,
            http_connections: 2,
            'disk.default.free_bytes': 40 * GB,
            'disk.default.total_bytes': 100 * GB,
          },
        }),
      )
      await ingest(
        chBatch('server', at(59, 40), {
          server_metrics: {
            ...gauges,
            uptime_s: 3630,
            memory_tracked_bytes: 3 * GB,
            tcp_connections: 3,
            http_connections: 2,
            queries_total: 100,
            queries_failed: 5,
            'disk.default.free_bytes': 39 * GB,
            'disk.default.total_bytes': 100 * GB,
            'disk.cold.free_bytes': 900,
            'disk.cold.total_bytes': 1000,
          },
        }),
      )
      const id = await ingest(
        chBatch('server', at(60, 20), {
          server_metrics: {
            ...gauges,
            uptime_s: 3670,
            memory_tracked_bytes: 1.2 * GB,
            tcp_connections: 10,
            http_connections: 0,
            queries_total: 50,
            queries_failed: 0,
            query_p99_ms: 197,
            queries_logged: 40,
            'disk.default.free_bytes': 38 * GB,
            'disk.default.total_bytes': 100 * GB,
            unknown_new_metric: 7,
          },
        }),
      )
      // Delivered late: its query counts add to minute 59, its gauges replace nothing, nor the current values.
      await ingest(
        chBatch('server', at(59, 30), {
          server_metrics: {
            ...gauges,
            uptime_s: 3620,
            memory_tracked_bytes: 9 * GB,
            tcp_connections: 99,
            queries_total: 10,
            queries_failed: 10,
          },
        }),
      )

      const disk = (name: string, free: number, total: number, usedPct: number) => ({
        name,
        free_bytes: free,
        total_bytes: total,
        used_bytes: total - free,
        used_pct: usedPct,
      })
      const common = {
        // Not reported by these batches: the other protocols' connections, the running queries and the limits.
        mysql_connections: null,
        postgresql_connections: null,
        interserver_connections: null,
        max_connections: null,
        running_queries: null,
        max_concurrent_queries: null,
        memory_limit_bytes: 6 * GB,
        memory_resident_bytes: 2 * GB,
        os_memory_total_bytes: 8 * GB,
        os_memory_available_bytes: 6 * GB,
        os_memory_used_pct: 25,
      }
      const minute59 = {
        ...common,
        uptime_s: 3630,
        memory_used_bytes: 3 * GB,
        memory_used_pct: 50,
        memory_tracked_bytes: 3 * GB,
        tcp_connections: 3,
        http_connections: 2,
        connections: 5,
        queries_total: 110,
        queries_failed: 15,
        failed_query_ratio: 0.136364,
        disks: [disk('cold', 900, 1000, 10), disk('default', 39 * GB, 100 * GB, 61)],
      }
      const minute60 = {
        ...common,
        uptime_s: 3670,
        memory_used_bytes: 1.2 * GB,
        memory_used_pct: 20,
        memory_tracked_bytes: 1.2 * GB,
        tcp_connections: 10,
        http_connections: 0,
        connections: 10,
        queries_total: 50,
        queries_failed: 0,
        failed_query_ratio: 0,
        disks: [disk('default', 38 * GB, 100 * GB, 62)],
      }
      // The latest cycle's query p99 and the queries it is over, as stored (QUERY_P99_DESCRIPTION).
      const current = {
        ts: iso(at(60, 20)),
        interval_seconds: 10,
        ...minute60,
        queries_per_s: 5,
        failed_queries_per_s: 0,
        query_p99_ms: 197,
        queries_logged: 40,
      }
      const minutes = [
        { ts: iso(at(59)), ...minute59, queries_per_s: 1.833, failed_queries_per_s: 0.25 },
        { ts: iso(at(60)), ...minute60, queries_per_s: 0.833, failed_queries_per_s: 0 },
      ]
      expect(await ok(id, `/server-metrics?${range(at(50), at(70))}`)).toEqual({
        ...current,
        bucket_seconds: 60,
        timeseries: minutes,
      })
      expect(await ok(id, '/server-metrics')).toEqual({ ...current, bucket_seconds: 60, timeseries: minutes })
      // Across the hour boundary: each hour from the hourly buckets.
      expect(await ok(id, `/server-metrics?${range(at(0), at(120))}&bucket=3600`)).toEqual({
        ...current,
        bucket_seconds: 3600,
        timeseries: [
          { ts: iso(at(0)), ...minute59, queries_per_s: 0.031, failed_queries_per_s: 0.004 },
          { ts: iso(at(60)), ...minute60, queries_per_s: 0.014, failed_queries_per_s: 0 },
        ],
      })
      // A window starting mid-hour reads that hour's minutes: the same values.
      expect((await ok(id, `/server-metrics?${range(at(30), at(120))}&bucket=3600`)).timeseries[0]).toEqual({
        ts: iso(at(0)),
        ...minute59,
        queries_per_s: 0.031,
        failed_queries_per_s: 0.004,
      })
      // Two hours in one interval: counters summed, each gauge (and each disk) its latest value.
      expect((await ok(id, `/server-metrics?${range(at(0), at(120))}&bucket=7200`)).timeseries).toEqual([
        {
          ts: iso(at(0)),
          ...minute60,
          queries_total: 160,
          queries_failed: 15,
          failed_query_ratio: 0.09375,
          queries_per_s: 0.022,
          failed_queries_per_s: 0.002,
          disks: [disk('cold', 900, 1000, 10), disk('default', 38 * GB, 100 * GB, 62)],
        },
      ])
      // Beyond 24 hours without a bucket: hourly.
      expect((await ok(id, `/server-metrics?${range(at(-48 * 60), at(120))}`)).bucket_seconds).toBe(3600)
    })

    test('wire-valid but tiny divisors (an interval of 5e-324 s, a limit, disk or insert threshold of 5e-324) give null rates and shares, never a 500', async () => {
      // A hostile review: a count over 5e-324 is Infinity, which the answers' schemas refuse.
      const id = await ingest({
        ...chBatch('tiny-divisors', at(30), {
          server_metrics: {
            queries_total: 100,
            queries_failed: 1,
            memory_tracked_bytes: 1024,
            memory_limit_bytes: 5e-324,
            // (a negative free size: the wire's maps take any number within ±2^53)
            'disk.default.free_bytes': -1024,
            'disk.default.total_bytes': 5e-324,
          },
          parts: [
            {
              database: 'd',
              table: 't',
              partition_id: 'all',
              active_parts: 9,
              rows: 1,
              bytes_on_disk: 1,
              parts_to_delay_insert: 5e-324,
              parts_to_throw_insert: 1e-300,
            },
          ],
        }),
        interval_seconds: 5e-324,
      })
      const metrics = await get(id, '/server-metrics')
      expect(metrics.status).toBe(200)
      expect(metrics.body).toMatchObject({
        queries_total: 100,
        queries_per_s: null,
        failed_queries_per_s: null,
        failed_query_ratio: 0.01,
        memory_used_pct: null,
      })
      expect(metrics.body.disks).toEqual([
        { name: 'default', free_bytes: -1024, total_bytes: 5e-324, used_bytes: 1024, used_pct: null },
      ])
      const parts = await get(id, '/parts')
      expect(parts.status).toBe(200)
      // (9 parts over a threshold of 1e-300 is absurd but finite, so it stays)
      expect([
        parts.body.max_delay_insert_ratio,
        parts.body.max_throw_insert_ratio,
        parts.body.partitions[0].delay_insert_ratio,
      ]).toEqual([null, 9e300, null])
    })

    test('a late batch never replaces newer parts, merges, mutations or server metrics', async () => {
      const newer = {
        parts: [part('events', 'hits', 'all', 10, 10, 10)],
        merges: [merge('hits', 1, 0.5)],
        mutations: [mutation('mutation_9.txt', at(0))],
        server_metrics: { uptime_s: 1000 },
      }
      const id = await ingest(chBatch('late', at(20), newer))
      await ingest(
        chBatch('late', at(19), {
          parts: [part('events', 'hits', 'all', 99, 99, 99)],
          merges: [],
          mutations: [],
          server_metrics: { uptime_s: 940 },
        }),
      )
      const check = async (ts: number) => {
        expect(await ok(id, '/parts')).toMatchObject({
          ts: iso(ts),
          active_parts: 10,
          partitions: [{ partition_id: 'all', active_parts: 10 }],
        })
        expect(await ok(id, '/merges')).toMatchObject({
          ts: iso(ts),
          active_merges: 1,
          merges: [{ table: 'hits', progress: 0.5 }],
        })
        expect(await ok(id, '/mutations')).toMatchObject({
          ts: iso(ts),
          active_mutations: 1,
          mutations: [{ mutation_id: 'mutation_9.txt' }],
        })
      }
      await check(at(20))
      expect(await ok(id, '/server-metrics')).toMatchObject({ ts: iso(at(20)), uptime_s: 1000 })
      // A newer batch without those sections keeps them; its server metrics are the current ones.
      await ingest(chBatch('late', at(21), { server_metrics: { uptime_s: 1060 } }))
      await check(at(20))
      expect(await ok(id, '/server-metrics')).toMatchObject({ ts: iso(at(21)), uptime_s: 1060 })
      // A batch collected at the same time as the stored one replaces it.
      await ingest(chBatch('late', at(20), { ...newer, merges: [] }))
      expect(await ok(id, '/merges')).toEqual({
        ts: iso(at(20)),
        active_merges: 0,
        merge_progress_pct: null,
        merges: [],
      })
    })

    test('/queries, /queries/{hash} and /active carry the ClickHouse fields', async () => {
      const stat = statementCycle('7382740123', 'SELECT count() FROM events.hits WHERE d = ?')
      const running = {
        pid: 'b7e1-4c1d',
        query_text: 'SELECT sleep(3)',
        state: null,
        wait_event_type: null,
        wait_event: null,
        duration_ms: 1500,
        blocking_pids: [],
        user: 'default',
        memory_usage: 4_194_304,
        read_bytes: 8192,
        written_bytes: 0,
        read_rows: 100,
      }
      await ingest(chBatch('ch-queries', at(30, 5), { query_stats: [stat(3, 4096, 25, 1)] }))
      const id = await ingest(
        chBatch('ch-queries', at(31, 5), { query_stats: [stat(1, 1024, 40, 0)], activity: [running] }),
      )
      const totals = {
        query_hash: '7382740123',
        query_text: 'SELECT count() FROM events.hits WHERE d = ?',
        total_calls: 4,
        total_time_ms: 40,
        mean_time_ms: 10,
        total_rows: 4,
        shared_blks_hit: 0,
        shared_blks_read: 0,
        shared_blks_dirtied: 0,
        shared_blks_written: 0,
        cache_hit_ratio: null,
        temp_blks_read: 0,
        temp_blks_written: 0,
        blk_read_time_ms: 0,
        blk_write_time_ms: 0,
        read_bytes: 5120,
        memory_bytes: 10240,
        errors: 1,
        p99_ms: 40,
        first_bucket: iso(at(30)),
      }
      expect(await ok(id, `/queries?${range(at(0), at(60))}`)).toEqual([totals])
      const detail = await ok(id, `/queries/7382740123?${range(at(0), at(60))}`)
      expect(detail).toMatchObject(totals)
      expect(detail.timeseries.map((p: any) => [p.ts, p.calls, p.p99_ms])).toEqual([
        [iso(at(30)), 3, 25],
        [iso(at(31)), 1, 40],
      ])
      expect(await ok(id, '/active')).toEqual([{ ...running, ts: iso(at(31, 5)) }])
    })

    test('/queries/{hash}: each timeseries point carries the bytes read, memory and errors of its interval', async () => {
      const stat = statementCycle('9001', 'SELECT uniq(user_id) FROM events.hits')
      await ingest(chBatch('ch-query-points', at(30, 5), { query_stats: [stat(3, 4096, 25, 1)] }))
      await ingest(chBatch('ch-query-points', at(30, 35), { query_stats: [stat(2, 100, 30, 2)] }))
      await ingest(chBatch('ch-query-points', at(31, 5), { query_stats: [stat(1, 1024, 40, 0)] }))
      const id = await ingest(chBatch('ch-query-points', at(90, 5), { query_stats: [stat(1, 10, 5, 4)] }))

      const point = (ts: number, calls: number, readBytes: number, errors: number, p99: number) => ({
        ts: iso(ts),
        calls,
        total_time_ms: 10 * calls,
        mean_time_ms: 10,
        rows: calls,
        shared_blks_hit: 0,
        shared_blks_read: 0,
        shared_blks_dirtied: 0,
        shared_blks_written: 0,
        cache_hit_ratio: null,
        temp_blks_read: 0,
        temp_blks_written: 0,
        blk_read_time_ms: 0,
        blk_write_time_ms: 0,
        p99_ms: p99,
        read_bytes: readBytes,
        memory_bytes: 2 * readBytes,
        errors,
      })
      // Minute points: the two cycles of minute 30 summed (p99: the higher one).
      const minutes = await ok(id, `/queries/9001?${range(at(0), at(120))}`)
      expect(minutes).toMatchObject({ resolution_seconds: 60, read_bytes: 5230, memory_bytes: 10460, errors: 7 })
      expect(minutes.timeseries).toEqual([
        point(at(30), 5, 4196, 3, 30),
        point(at(31), 1, 1024, 0, 40),
        point(at(90), 1, 10, 4, 5),
      ])
      // Beyond 24 hours: hourly points.
      const hours = await ok(id, `/queries/9001?${range(at(-25 * 60), at(120))}`)
      expect(hours.resolution_seconds).toBe(3600)
      expect(hours.timeseries).toEqual([point(at(0), 6, 5220, 3, 40), point(at(60), 1, 10, 4, 5)])

      // A PostgreSQL statement's points carry none of the three.
      const pgId = await ingest(
        pgBatch('pg-query-points', at(30, 5), {
          query_stats: [
            {
              query_hash: '9001',
              query_text: 'SELECT 1',
              calls: 1,
              total_time_ms: 10,
              rows: 1,
              shared_blks_hit: 0,
              shared_blks_read: 0,
            },
          ],
        }),
      )
      const { read_bytes, memory_bytes, errors, ...pgPoint } = point(at(30), 1, 0, 0, 0)
      expect((await ok(pgId, `/queries/9001?${range(at(0), at(120))}`)).timeseries).toEqual([
        { ...pgPoint, p99_ms: null },
      ])
    })

    test('validation: sort, limit, booleans, bucket and window', async () => {
      const id = await ingest(chBatch('validation', at(10), { parts: [part('events', 'hits', 'all', 1, 1, 1)] }))
      const cases: [string, string][] = [
        ['/parts?sort_by=size', 'sort_by must be one of: active_parts, bytes_on_disk, rows'],
        ['/parts?limit=0', 'limit must be a whole number from 1 (at most 1000 are returned)'],
        ['/parts?limit=ten', 'limit must be a whole number from 1 (at most 1000 are returned)'],
        ['/merges?limit=-1', 'limit must be a whole number from 1 (at most 1000 are returned)'],
        ['/mutations?limit=1.5', 'limit must be a whole number from 1 (at most 1000 are returned)'],
        ['/mutations?stuck=maybe', 'stuck must be true or false'],
        ['/mutations?include_done=2', 'include_done must be true or false'],
      ]
      for (const [path, error] of cases)
        expect({ path, ...(await get(id, path)) }).toEqual({ path, status: 400, body: { error } })

      for (const path of ['/server-metrics', '/parts/timeseries']) {
        await session.expectSeriesValidation(id, path)
        expect({ path, ...(await get(id, `${path}?${range(at(20), at(10))}`)) }).toEqual({
          path,
          status: 400,
          body: { error: 'since must be before until' },
        })
      }
    })

    test('engine checks both ways, 404 for another organization, 401 without credentials', async () => {
      const chId = await ingest(chBatch('ch', at(10), { parts: [part('events', 'hits', 'all', 1, 1, 1)] }))
      const pgId = await ingest(pgBatch('pg', at(10)))

      const clickhouseOnly = ['/parts', '/parts/timeseries', '/merges', '/mutations', '/server-metrics']
      await session.expectEach(pgId, clickhouseOnly, {
        status: 400,
        body: { error: 'this endpoint serves clickhouse databases; "pg" is a postgres database' },
      })
      const postgresOnly = [
        '/locks',
        '/tables',
        '/tables/default/hits',
        '/indexes',
        '/indexes/unused',
        '/indexes/default/hits_idx',
        ...POSTGRES_INTERNALS_PATHS,
        '/queries/7382740123/explain',
      ]
      await session.expectEach(chId, postgresOnly, {
        status: 400,
        body: { error: 'this endpoint serves postgres databases; "ch" is a clickhouse database' },
      })
      // Both engines: statements, sessions and waits.
      await session.expectEach(chId, ['/queries', '/active', '/waits'], { status: 200, body: [] })

      await session.expectHiddenFromOtherOrganizations(chId, clickhouseOnly)
      for (const path of clickhouseOnly) {
        expect({ path, status: (await session.server.call('GET', `/api/v1/databases/${chId}${path}`)).status }).toEqual(
          { path, status: 401 },
        )
      }
      expect(await get('00000000-0000-0000-0000-000000000000', '/parts')).toEqual({
        status: 404,
        body: { error: 'database not found' },
      })
    })

    test('deleting a database removes its ClickHouse rows', async () => {
      const id = await ingest(
        chBatch('clickhouse-delete', at(20), {
          parts: [part('events', 'hits', 'all', 1, 1, 1)],
          merges: [merge('hits', 1, 0.5)],
          mutations: [mutation('mutation_1.txt', at(0))],
          server_metrics: {
            uptime_s: 10,
            queries_total: 5,
            queries_failed: 1,
            'disk.default.free_bytes': 1,
            'disk.default.total_bytes': 2,
          },
        }),
      )
      const count = (table: string) => session.rowCount(table, id)
      const kinds = await session.server.store.driver.all<{ kind: string }>(
        'SELECT kind FROM clickhouse_latest WHERE database_id = $1 ORDER BY kind',
        [id],
      )
      expect(kinds.map((k) => k.kind)).toEqual(['merges', 'mutations', 'parts', 'server_metrics'])
      for (const table of CLICKHOUSE_TABLES)
        expect({ table, stored: (await count(table)) > 0 }).toEqual({ table, stored: true })
      expect((await session.server.call('DELETE', `/api/v1/databases/${id}`, { apiKey: session.key })).status).toBe(204)
      for (const table of CLICKHOUSE_TABLES) expect({ table, n: await count(table) }).toEqual({ table, n: 0 })
      expect(await get(id, '/parts')).toEqual({ status: 404, body: { error: 'database not found' } })
    })
  })
}
