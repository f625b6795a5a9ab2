// Responses of the ClickHouse routes (src/server/routes/clickhouse.ts): parts (+ timeseries), merges,
// mutations and server-metrics. Percentages are 0-100 with 2 decimals, ratios 0-1 (above 1 past a
// threshold) with 4; before the first batch the summary fields are null and the lists empty.
import { t } from 'elysia'
import { Nullable, Timestamp } from './common.ts'

/**
 * The one meaning of query_p99_ms wherever it is served (the overview, the doctor's metrics_summary,
 * /server-metrics): the agent's latest cycle, never a fallback to other figures.
 */
export const QUERY_P99_DESCRIPTION =
  "ms: the p99 duration (exact, ClickHouse's quantileExact) of the initial queries system.query_log recorded in the agent's latest cycle that ran, the agent's own left out; " +
  'null when that cycle logged none that ran, or query_log is off'
export const QUERIES_LOGGED_DESCRIPTION =
  "initial queries system.query_log recorded in the agent's latest cycle (those refused before starting included), the agent's own left out; null without query_log"

const latestTs = Nullable(Timestamp('when the agent collected the latest section; null before any'))
const NullableNumber = (description?: string) => Nullable(t.Number(description ? { description } : {}))
const Ratio = (of: string) =>
  NullableNumber(`active parts / ${of}, 4 decimals (1 or more: past it); null when the setting is unknown`)

const thresholds = {
  parts_to_delay_insert: NullableNumber(
    'active parts in one partition at which inserts are slowed down (MergeTree setting); null when unknown',
  ),
  parts_to_throw_insert: NullableNumber(
    'active parts in one partition at which inserts are refused; null when unknown',
  ),
  delay_insert_ratio: Ratio('parts_to_delay_insert'),
  throw_insert_ratio: Ratio('parts_to_throw_insert'),
}

export const PartitionParts = t.Object({
  database: t.String(),
  table: t.String(),
  partition_id: t.String(),
  active_parts: t.Number(),
  rows: t.Number(),
  bytes_on_disk: t.Number({ description: 'bytes' }),
  ...thresholds,
})

export const TableParts = t.Object({
  database: t.String(),
  table: t.String(),
  active_parts: t.Number({ description: "the table's partitions' active parts summed" }),
  partition_count: t.Integer(),
  rows: t.Number(),
  bytes_on_disk: t.Number({ description: 'bytes' }),
  worst_partition_id: t.String({
    description:
      'the partition with the most active parts (the one inserts stall on); the thresholds and ratios are of it',
  }),
  max_partition_parts: t.Number(),
  ...thresholds,
})

export const Parts = t.Object(
  {
    ts: latestTs,
    active_parts: NullableNumber('active parts of the partitions that match the filters'),
    partition_count: Nullable(t.Integer()),
    table_count: Nullable(t.Integer()),
    max_partition_parts: NullableNumber('active parts of the fullest partition'),
    max_delay_insert_ratio: NullableNumber(),
    max_throw_insert_ratio: NullableNumber(),
    tables: t.Array(TableParts),
    partitions: t.Array(PartitionParts),
  },
  { title: 'Parts' },
)

export const PartsPoint = t.Object(
  {
    ts: Timestamp('start of the interval'),
    active_parts: NullableNumber(),
    partition_count: NullableNumber(),
    max_partition_parts: NullableNumber(),
  },
  { title: 'PartsPoint', description: "the interval's latest values" },
)

export const Merge = t.Object({
  database: t.String(),
  table: t.String(),
  elapsed_s: t.Number({ description: 'seconds, 3 decimals' }),
  progress: t.Number({ description: '0-1, 4 decimals' }),
  progress_pct: t.Number({ description: 'percent 0-100, 2 decimals' }),
  num_parts: t.Number({ description: 'parts being merged' }),
  total_size_bytes_compressed: t.Number({ description: 'bytes' }),
  result_part_name: t.String(),
  is_mutation: t.Boolean({ description: "a mutation's rewrite of a part" }),
})

export const Merges = t.Object(
  {
    ts: latestTs,
    active_merges: Nullable(t.Integer({ description: 'merges running (mutation rewrites included)' })),
    merge_progress_pct: NullableNumber('their mean progress, percent 0-100; null without merges'),
    merges: t.Array(Merge, { description: 'the longest running first' }),
  },
  { title: 'Merges' },
)

export const Mutation = t.Object({
  database: t.String(),
  table: t.String(),
  mutation_id: t.String(),
  command: t.String(),
  create_time: Timestamp(),
  age_seconds: t.Integer({ description: 'seconds since create_time' }),
  is_done: t.Boolean(),
  parts_to_do: t.Number(),
  latest_fail_reason: Nullable(t.String({ description: 'null when it has not failed' })),
  latest_fail_time: Nullable(Timestamp()),
  stuck: t.Boolean({ description: 'not done and either failing or older than the agent’s threshold' }),
})

export const Mutations = t.Object(
  {
    ts: latestTs,
    active_mutations: Nullable(t.Integer({ description: 'not done' })),
    stuck_mutations: Nullable(t.Integer()),
    mutations: t.Array(Mutation, { description: 'stuck first, then running, then done; the oldest first within each' }),
  },
  { title: 'Mutations' },
)

export const Disk = t.Object({
  name: t.String(),
  free_bytes: NullableNumber('bytes'),
  total_bytes: NullableNumber('bytes'),
  used_bytes: NullableNumber('bytes'),
  used_pct: NullableNumber('percent 0-100'),
})

/** The server's figures over a span (the latest cycle, or one interval of the timeseries); null where not reported. */
const serverValues = {
  uptime_s: NullableNumber('seconds'),
  memory_used_bytes: NullableNumber('bytes: memory tracked by the server, else its resident set'),
  memory_limit_bytes: NullableNumber('bytes: max_server_memory_usage'),
  memory_used_pct: NullableNumber('memory_used_bytes of memory_limit_bytes, percent 0-100'),
  memory_tracked_bytes: NullableNumber('bytes'),
  memory_resident_bytes: NullableNumber('bytes'),
  os_memory_total_bytes: NullableNumber('bytes'),
  os_memory_available_bytes: NullableNumber('bytes'),
  os_memory_used_pct: NullableNumber("the machine's memory in use, percent 0-100"),
  tcp_connections: NullableNumber('native protocol (system.metrics TCPConnection)'),
  http_connections: NullableNumber(),
  mysql_connections: NullableNumber(),
  postgresql_connections: NullableNumber(),
  interserver_connections: NullableNumber(),
  connections: NullableNumber("the protocols' connections summed (those reported)"),
  max_connections: NullableNumber(
    "the server's max_connections, shared by every protocol's listener; null when unknown (no system.server_settings)",
  ),
  running_queries: NullableNumber("queries running (system.processes), the agent's own left out"),
  max_concurrent_queries: NullableNumber("the server's max_concurrent_queries; null when unknown or 0 (no limit)"),
  queries_total: NullableNumber('queries over the span'),
  queries_failed: NullableNumber('failed queries over the span'),
  queries_per_s: NullableNumber('per second'),
  failed_queries_per_s: NullableNumber('per second'),
  failed_query_ratio: NullableNumber('queries_failed / queries_total, 0-1, 6 decimals'),
  disks: t.Array(Disk, { description: 'by name' }),
}

export const ServerMetricsPoint = t.Object(
  { ts: Timestamp('start of the interval'), ...serverValues },
  { title: 'ServerMetricsPoint', description: 'the rates are over the interval' },
)

export const ServerMetrics = t.Object(
  {
    ts: latestTs,
    interval_seconds: NullableNumber("the latest cycle's length in seconds, the span of its counters and rates"),
    ...serverValues,
    query_p99_ms: NullableNumber(QUERY_P99_DESCRIPTION),
    queries_logged: NullableNumber(QUERIES_LOGGED_DESCRIPTION),
    bucket_seconds: t.Integer({ description: "the timeseries' interval, seconds" }),
    timeseries: t.Array(ServerMetricsPoint),
  },
  { title: 'ServerMetrics', description: 'the latest cycle, and the window cut into intervals' },
)
