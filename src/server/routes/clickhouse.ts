// /api/v1/databases/{id}: ClickHouse parts (+ timeseries), merges, mutations and server-metrics, from
// the latest sections the agent sent and the metric history kept by store/clickhouse/. All serve
// ClickHouse databases only (400 for PostgreSQL). Percentages are 0-100 with 2 decimals, ratios are
// 0-1 (or above 1 past a threshold) with 4 decimals; before the first batch the summary fields are
// null and the lists empty.
import { Elysia, t } from 'elysia'
import type { MergeEntry, MutationEntry, PartStat } from '../../shared/wire.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { DISK_KEYS, SERVER_COUNTER_KEYS, SERVER_GAUGE_KEYS, parseDiskMetricKey } from '../../shared/metrics.ts'
import { PARTS_GAUGE_KEYS } from '../store/clickhouse/types.ts'
import { CONNECTION_PROTOCOLS } from '../doctor/rules/clickhouse/load.ts'
import type { MetricPoint } from '../store/internals/types.ts'
import { perSecond, rfc3339 } from '../views.ts'
import { Merges, Mutations, Parts, PartsPoint, ServerMetrics } from '../../shared/api/clickhouse.ts'
import { boolean, oneOf, query } from './schema.ts'
import { clampLimit, databaseFor, intervalsFor, limitQuery, seriesQuery } from './telemetry-params.ts'

const round = (n: number, digits: number) => Number(n.toFixed(digits))
const orNull = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? null : v)
/** `n` when finite, else null (the answers' schemas refuse Infinity). */
const finite = (n: number) => (Number.isFinite(n) ? n : null)
/**
 * part / whole, null when either is unknown, the whole is not positive, or the quotient is not finite (a
 * wire-valid whole of 5e-324 bytes or parts divides into Infinity).
 */
const ratio = (part: number | null, whole: number | null, digits = 4) =>
  part === null || whole === null || whole <= 0 ? null : finite(round(part / whole, digits))
const pct = (part: number | null, whole: number | null) => {
  const r = ratio(part, whole, 8)
  return r === null ? null : finite(round(r * 100, 2))
}
const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
const maxOrNull = (values: (number | null)[]) =>
  values.reduce<number | null>((max, v) => (v === null ? max : max === null ? v : Math.max(max, v)), null)

// ---- parts ----

export const PART_SORTS = ['active_parts', 'bytes_on_disk', 'rows'] as const
type PartSort = (typeof PART_SORTS)[number]

function partitionView(p: PartStat) {
  const delay = orNull(p.parts_to_delay_insert)
  const refuse = orNull(p.parts_to_throw_insert)
  return {
    database: p.database,
    table: p.table,
    partition_id: p.partition_id,
    active_parts: p.active_parts,
    rows: p.rows,
    bytes_on_disk: p.bytes_on_disk,
    parts_to_delay_insert: delay,
    parts_to_throw_insert: refuse,
    delay_insert_ratio: ratio(p.active_parts, delay),
    throw_insert_ratio: ratio(p.active_parts, refuse),
  }
}
type PartitionView = ReturnType<typeof partitionView>

/** Most active parts first; ties by database, table and partition. */
const partitionOrder = (a: PartitionView, b: PartitionView) =>
  b.active_parts - a.active_parts ||
  byCodePoint(a.database, b.database) ||
  byCodePoint(a.table, b.table) ||
  byCodePoint(a.partition_id, b.partition_id)

/** One table's partitions summed; its worst partition is the one with the most active parts (the one inserts stall on). */
function tableViews(partitions: PartitionView[]) {
  const tables = new Map<string, PartitionView[]>()
  for (const p of partitions) {
    const key = JSON.stringify([p.database, p.table])
    const list = tables.get(key)
    if (list) list.push(p)
    else tables.set(key, [p])
  }
  return [...tables.values()].map((list) => {
    const worst = [...list].sort(partitionOrder)[0]!
    return {
      database: worst.database,
      table: worst.table,
      active_parts: list.reduce((sum, p) => sum + p.active_parts, 0),
      partition_count: list.length,
      rows: list.reduce((sum, p) => sum + p.rows, 0),
      bytes_on_disk: list.reduce((sum, p) => sum + p.bytes_on_disk, 0),
      worst_partition_id: worst.partition_id,
      max_partition_parts: worst.active_parts,
      parts_to_delay_insert: worst.parts_to_delay_insert,
      parts_to_throw_insert: worst.parts_to_throw_insert,
      delay_insert_ratio: worst.delay_insert_ratio,
      throw_insert_ratio: worst.throw_insert_ratio,
    }
  })
}

/** Largest `sort` first; ties by database, table (and partition). */
function sortedBy<T extends { database: string; table: string; partition_id?: string } & Record<PartSort, number>>(
  rows: T[],
  sort: PartSort,
): T[] {
  return rows.sort(
    (a, b) =>
      b[sort] - a[sort] ||
      byCodePoint(a.database, b.database) ||
      byCodePoint(a.table, b.table) ||
      byCodePoint(a.partition_id ?? '', b.partition_id ?? ''),
  )
}

// ---- merges and mutations ----

function mergeView(m: MergeEntry) {
  return {
    database: m.database,
    table: m.table,
    elapsed_s: round(m.elapsed_s, 3),
    progress: round(m.progress, 4),
    progress_pct: round(m.progress * 100, 2),
    num_parts: m.num_parts,
    total_size_bytes_compressed: m.total_size_bytes_compressed,
    result_part_name: m.result_part_name,
    is_mutation: m.is_mutation,
  }
}

/** Running merges (mutation rewrites included) and their mean progress in percent; null before the first batch. */
export function mergeSummary(merges: MergeEntry[] | undefined) {
  if (merges === undefined) return { active_merges: null, merge_progress_pct: null }
  const mean = merges.length === 0 ? null : merges.reduce((sum, m) => sum + m.progress, 0) / merges.length
  return { active_merges: merges.length, merge_progress_pct: mean === null ? null : round(mean * 100, 2) }
}

function mutationView(m: MutationEntry, now: number) {
  return {
    database: m.database,
    table: m.table,
    mutation_id: m.mutation_id,
    command: m.command,
    create_time: rfc3339(m.create_time),
    age_seconds: Math.max(0, Math.floor((now - m.create_time) / 1000)),
    is_done: m.is_done,
    parts_to_do: m.parts_to_do,
    latest_fail_reason: m.latest_fail_reason === '' ? null : m.latest_fail_reason,
    latest_fail_time: rfc3339(m.latest_fail_time),
    stuck: m.stuck,
  }
}

/** Unfinished and stuck mutations (as the agent judged them); null before the first batch. */
export function mutationSummary(mutations: MutationEntry[] | undefined) {
  if (mutations === undefined) return { active_mutations: null, stuck_mutations: null }
  return {
    active_mutations: mutations.filter((m) => !m.is_done).length,
    stuck_mutations: mutations.filter((m) => m.stuck).length,
  }
}

/** Stuck first, then running, then done; the oldest first within each. */
const mutationOrder = (a: MutationEntry, b: MutationEntry) =>
  Number(b.stuck) - Number(a.stuck) ||
  Number(a.is_done) - Number(b.is_done) ||
  a.create_time - b.create_time ||
  byCodePoint(a.database, b.database) ||
  byCodePoint(a.table, b.table) ||
  byCodePoint(a.mutation_id, b.mutation_id)

// ---- server metrics ----

type Values = Record<string, number | null | undefined>

function diskView(name: string, values: Values) {
  const free = orNull(values.free_bytes)
  const total = orNull(values.total_bytes)
  const used = free === null || total === null ? null : Math.max(0, total - free)
  return { name, free_bytes: free, total_bytes: total, used_bytes: used, used_pct: pct(used, total) }
}

/**
 * The server's values over `seconds`: memory used (tracked, else resident) against the limit and the
 * machine, connections, and the query counters with their rates and the failed share.
 */
function serverValues(values: Values, disks: ReturnType<typeof diskView>[], seconds: number | null) {
  const v = (key: string) => orNull(values[key])
  const used = v('memory_tracked_bytes') ?? v('memory_resident_bytes')
  const osTotal = v('os_memory_total_bytes')
  const osAvailable = v('os_memory_available_bytes')
  const byProtocol = CONNECTION_PROTOCOLS.map(([key]) => v(key))
  const total = v('queries_total')
  const failed = v('queries_failed')
  return {
    uptime_s: v('uptime_s'),
    memory_used_bytes: used,
    memory_limit_bytes: v('memory_limit_bytes'),
    memory_used_pct: pct(used, v('memory_limit_bytes')),
    memory_tracked_bytes: v('memory_tracked_bytes'),
    memory_resident_bytes: v('memory_resident_bytes'),
    os_memory_total_bytes: osTotal,
    os_memory_available_bytes: osAvailable,
    os_memory_used_pct: pct(osTotal === null || osAvailable === null ? null : osTotal - osAvailable, osTotal),
    tcp_connections: v('tcp_connections'),
    http_connections: v('http_connections'),
    mysql_connections: v('mysql_connections'),
    postgresql_connections: v('postgresql_connections'),
    interserver_connections: v('interserver_connections'),
    connections: byProtocol.every((n) => n === null) ? null : byProtocol.reduce<number>((sum, n) => sum + (n ?? 0), 0),
    max_connections: v('max_connections'),
    running_queries: v('running_queries'),
    max_concurrent_queries: v('max_concurrent_queries'),
    queries_total: total,
    queries_failed: failed,
    queries_per_s: perSecond(total, seconds),
    failed_queries_per_s: perSecond(failed, seconds),
    failed_query_ratio: ratio(failed, total, 6),
    disks,
  }
}

/** The disks of a server_metrics map (`disk.<name>.free_bytes` / `.total_bytes`), by name. */
function disksOf(metrics: Values) {
  const disks = new Map<string, Values>()
  for (const [key, value] of Object.entries(metrics)) {
    const match = parseDiskMetricKey(key)
    if (!match) continue
    const values = disks.get(match.disk) ?? {}
    values[match.key] = value
    disks.set(match.disk, values)
  }
  return [...disks].sort(([a], [b]) => byCodePoint(a, b)).map(([name, values]) => diskView(name, values))
}

/** Known keys only, so a newer agent's extra keys do not leak into the answer. */
function known(metrics: Values): Values {
  return Object.fromEntries([...SERVER_GAUGE_KEYS, ...SERVER_COUNTER_KEYS].map((k) => [k, metrics[k]]))
}

/** Server and disk points merged per interval. */
function serverSeries(server: MetricPoint[], disks: MetricPoint[], bucketSeconds: number) {
  const byTs = new Map<number, { values: Values; disks: ReturnType<typeof diskView>[] }>()
  const at = (ts: number) => {
    let point = byTs.get(ts)
    if (!point) byTs.set(ts, (point = { values: {}, disks: [] }))
    return point
  }
  for (const p of server) Object.assign(at(p.ts).values, p.values)
  for (const p of disks)
    at(p.ts).disks.push(diskView(p.subject, Object.fromEntries(DISK_KEYS.map((k) => [k, p.values[k]]))))
  return [...byTs]
    .sort(([a], [b]) => a - b)
    .map(([ts, point]) => ({ ts: rfc3339(ts), ...serverValues(point.values, point.disks, bucketSeconds) }))
}

export function clickhouseRoutes(deps: Deps) {
  const { store, clock } = deps
  const reader = store.clickhouse
  const clickhouse = (principal: Parameters<typeof databaseFor>[1], id: string) =>
    databaseFor(deps, principal, id, 'clickhouse')

  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/parts',
      async ({ principal, params, query }) => {
        const db = await clickhouse(principal, params.id)
        const latest = await reader.latestParts(db.id)
        const sort = query.sort_by ?? 'active_parts'
        const limit = clampLimit('parts', query.limit)
        const partitions = (latest?.payload ?? [])
          .filter(
            (p) =>
              (query.database === undefined || p.database === query.database) &&
              (query.table === undefined || p.table === query.table),
          )
          .map(partitionView)
        const tables = tableViews(partitions)
        const found = latest !== undefined
        return {
          ts: rfc3339(latest?.ts ?? null),
          active_parts: found ? partitions.reduce((sum, p) => sum + p.active_parts, 0) : null,
          partition_count: found ? partitions.length : null,
          table_count: found ? tables.length : null,
          max_partition_parts: found ? partitions.reduce((max, p) => Math.max(max, p.active_parts), 0) : null,
          max_delay_insert_ratio: maxOrNull(partitions.map((p) => p.delay_insert_ratio)),
          max_throw_insert_ratio: maxOrNull(partitions.map((p) => p.throw_insert_ratio)),
          tables: sortedBy(tables, sort).slice(0, limit),
          partitions: sortedBy(partitions, sort).slice(0, limit),
        }
      },
      {
        query: query({
          sort_by: t.Optional(oneOf('sort_by', PART_SORTS)),
          limit: limitQuery('parts'),
          database: t.Optional(t.String({ maxLength: 1000, error: 'database must be a string' })),
          table: t.Optional(t.String({ maxLength: 1000, error: 'table must be a string' })),
        }),
        response: { 200: Parts },
        detail: { summary: "Active parts per table and partition against the tables' insert thresholds" },
      },
    )
    .get(
      '/parts/timeseries',
      async ({ principal, params, query }) => {
        const db = await clickhouse(principal, params.id)
        const points = await reader.metricSeries(db.id, 'parts', intervalsFor(query, clock()))
        return points.map((p) => ({
          ts: rfc3339(p.ts),
          ...(Object.fromEntries(PARTS_GAUGE_KEYS.map((k) => [k, orNull(p.values[k])])) as Record<
            (typeof PARTS_GAUGE_KEYS)[number],
            number | null
          >),
        }))
      },
      {
        query: seriesQuery,
        response: { 200: t.Array(PartsPoint) },
        detail: { summary: 'Active parts, partitions and the fullest partition per interval' },
      },
    )
    .get(
      '/merges',
      async ({ principal, params, query }) => {
        const db = await clickhouse(principal, params.id)
        const latest = await reader.latestMerges(db.id)
        const merges = [...(latest?.payload ?? [])].sort(
          (a, b) =>
            b.elapsed_s - a.elapsed_s ||
            byCodePoint(a.database, b.database) ||
            byCodePoint(a.table, b.table) ||
            byCodePoint(a.result_part_name, b.result_part_name),
        )
        return {
          ts: rfc3339(latest?.ts ?? null),
          ...mergeSummary(latest?.payload),
          merges: merges.slice(0, clampLimit('merges', query.limit)).map(mergeView),
        }
      },
      {
        query: query({ limit: limitQuery('merges') }),
        response: { 200: Merges },
        detail: { summary: 'Merges (and mutation rewrites) running now, with their progress' },
      },
    )
    .get(
      '/mutations',
      async ({ principal, params, query }) => {
        const db = await clickhouse(principal, params.id)
        const latest = await reader.latestMutations(db.id)
        const now = clock()
        const mutations = (latest?.payload ?? [])
          .filter(
            (m) =>
              (query.stuck === undefined || m.stuck === query.stuck) && (query.include_done !== false || !m.is_done),
          )
          .sort(mutationOrder)
        return {
          ts: rfc3339(latest?.ts ?? null),
          ...mutationSummary(latest?.payload),
          mutations: mutations.slice(0, clampLimit('mutations', query.limit)).map((m) => mutationView(m, now)),
        }
      },
      {
        query: query({
          stuck: t.Optional(boolean('stuck')),
          include_done: t.Optional(boolean('include_done')),
          limit: limitQuery('mutations'),
        }),
        response: { 200: Mutations },
        detail: { summary: 'Mutations not done or created within the last day; stuck ones first' },
      },
    )
    .get(
      '/server-metrics',
      async ({ principal, params, query }) => {
        const db = await clickhouse(principal, params.id)
        const intervals = intervalsFor(query, clock())
        const [latest, server, disks] = await Promise.all([
          reader.latestServerMetrics(db.id),
          reader.metricSeries(db.id, 'server', intervals),
          reader.metricSeries(db.id, 'disk', intervals),
        ])
        const metrics = latest?.payload ?? {}
        return {
          ts: rfc3339(latest?.ts ?? null),
          interval_seconds: latest?.interval_seconds ?? null,
          ...serverValues(known(metrics), disksOf(metrics), latest?.interval_seconds ?? null),
          // The latest cycle's, as the overview's figure (QUERY_P99_DESCRIPTION); absent keys: none ran, or no query_log.
          query_p99_ms: orNull(metrics.query_p99_ms),
          queries_logged: orNull(metrics.queries_logged),
          bucket_seconds: intervals.bucketSeconds,
          timeseries: serverSeries(server, disks, intervals.bucketSeconds),
        }
      },
      {
        query: seriesQuery,
        response: { 200: ServerMetrics },
        detail: {
          summary: "The server's memory, connections, query rates and disks: the latest cycle and per interval",
        },
      },
    )
}
