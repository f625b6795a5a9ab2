// Responses of /api/v1/databases/{id}/queries: statement statistics over a window, one statement's
// detail with its timeseries (ClickHouse's points carry read_bytes, memory_bytes and errors, PostgreSQL's
// do not), and a statement's sampled execution plans.
import { t } from 'elysia'
import type { TInteger, TNumber } from '@sinclair/typebox'
import { POSTGRES_STATEMENT_COUNTERS, STATEMENT_FIELDS, type StatementCounter } from '../families.ts'
import { Nullable, Timestamp } from './common.ts'
import { numberProperties } from './family-fields.ts'

type Renamed<K extends string> = K extends 'calls' ? 'total_calls' : K extends 'rows' ? 'total_rows' : K
const renamed = (key: string) => (key === 'calls' ? 'total_calls' : key === 'rows' ? 'total_rows' : key)

/** Every counter of the statement family summed over the window; calls and rows as total_calls and total_rows. */
const sums = Object.fromEntries(
  Object.entries(
    numberProperties(STATEMENT_FIELDS, (f) =>
      f.unit === 'ms' ? 'summed over the window, to the microsecond' : 'summed over the window',
    ),
  ).map(([key, schema]) => [renamed(key), schema]),
) as { [K in StatementCounter as Renamed<K>]: K extends `${string}_ms` ? TNumber : TInteger }

const statementProperties = {
  query_hash: t.String({
    description: "the statement's identity (pg_stat_statements' queryid, ClickHouse's normalized_query_hash)",
  }),
  query_text: t.String({ description: 'the normalized statement text' }),
  ...sums,
  mean_time_ms: t.Number({ description: 'total_time_ms / total_calls (0 without calls), ms' }),
  cache_hit_ratio: Nullable(
    t.Number({ description: 'shared_blks_hit / (hit + read), 0..1; null without block reads' }),
  ),
  p99_ms: Nullable(
    t.Number({ description: "ClickHouse: the highest cycle's p99 duration in the window, ms; null for PostgreSQL" }),
  ),
  first_bucket: Nullable(
    Timestamp(
      "when the statement's data in the window start, how much of the window they cover: its earliest minute bucket; before the minute rows' retention (48 hours), where only hourly buckets are kept, the start of its earliest hour",
    ),
  ),
}

/** A statement's sums over the window (GET /queries). */
export const QueryStats = t.Object(statementProperties, { title: 'QueryStats' })

const pointCommon = {
  ts: Timestamp("the bucket's start"),
  mean_time_ms: t.Number({ description: "the bucket's total_time_ms / calls (0 without calls), ms" }),
  cache_hit_ratio: Nullable(
    t.Number({ description: 'shared_blks_hit / (hit + read) in the bucket, 0..1; null without block reads' }),
  ),
  p99_ms: Nullable(t.Number({ description: "ClickHouse: the bucket's highest p99 duration, ms" })),
}
const allCounters = numberProperties(STATEMENT_FIELDS, () => 'in the bucket')
const postgresCounters = Object.fromEntries(POSTGRES_STATEMENT_COUNTERS.map((k) => [k, allCounters[k]])) as Pick<
  typeof allCounters,
  (typeof POSTGRES_STATEMENT_COUNTERS)[number]
>

/** A bucket of a PostgreSQL statement's timeseries: the counters pg_stat_statements has. */
export const PostgresQueryPoint = t.Object({ ...pointCommon, ...postgresCounters }, { title: 'PostgresQueryPoint' })
/** A bucket of a ClickHouse statement's timeseries: every counter of the statement family. */
export const ClickHouseQueryPoint = t.Object({ ...pointCommon, ...allCounters }, { title: 'ClickHouseQueryPoint' })

const detailProperties = {
  ...statementProperties,
  first_seen: Timestamp('when the server first received the statement'),
  last_seen: Timestamp('the latest minute the statement was reported in'),
  since: Timestamp("the window's start"),
  until: Timestamp("the window's end"),
  resolution_seconds: t.Integer({
    description: 'seconds per timeseries point: 60 up to a 24-hour window, 3600 beyond',
  }),
}

export const PostgresQueryDetail = t.Object(
  { ...detailProperties, timeseries: t.Array(PostgresQueryPoint) },
  { title: 'PostgresQueryDetail' },
)
export const ClickHouseQueryDetail = t.Object(
  { ...detailProperties, timeseries: t.Array(ClickHouseQueryPoint) },
  { title: 'ClickHouseQueryDetail' },
)
/** GET /queries/{hash}: the statement's sums, its times and its timeseries, by the database's engine. */
export const QueryDetail = t.Union([PostgresQueryDetail, ClickHouseQueryDetail], { title: 'QueryDetail' })

/** One sampled execution plan of a statement (PostgreSQL). */
export const QueryPlan = t.Object(
  {
    ts: Timestamp('when the plan was taken'),
    plan_json: t.Unknown({
      description: "the plan as EXPLAIN (FORMAT JSON) gives it: one element's object, with Plan",
    }),
    plan_hash: t.String({ description: "the plan's shape (node types and relations), to tell plans apart" }),
    total_cost: Nullable(t.Number({ description: "the planner's cost estimate" })),
    actual_time_ms: Nullable(
      t.Number({ description: 'measured run time (auto_explain with analyze), ms; null for a plan without ANALYZE' }),
    ),
    seq_scans: t.Integer({ description: 'Seq Scan nodes in the plan' }),
    index_scans: t.Integer({ description: 'Index, Index Only and Bitmap Index Scan nodes in the plan' }),
    rows_estimated: Nullable(t.Number({ description: "the top node's estimated rows" })),
    rows_actual: Nullable(t.Number({ description: "the top node's actual rows (plans with ANALYZE)" })),
    source: t.Union([t.Literal('sampled'), t.Literal('auto_explain')], {
      description: "sampled: the agent's EXPLAIN; auto_explain: read from the server's log",
    }),
    plan_changed: t.Boolean({ description: 'the plan differs from the one before it for this statement' }),
  },
  { title: 'QueryPlan' },
)
