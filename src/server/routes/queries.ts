// /api/v1/databases/{id}/queries: statement statistics over a window (sortable, limited), and one
// statement's detail with its timeseries (whose points carry read_bytes, memory_bytes and errors for
// ClickHouse statements only).
import { Elysia, t } from 'elysia'
import type { Static } from '@sinclair/typebox'
import { POSTGRES_STATEMENT_COUNTERS, STATEMENT_COUNTERS, STATEMENT_DURATIONS } from '../../shared/families.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { notFound } from '../http-error.ts'
import type { QueryPoint, QueryStatsRow } from '../store/statements/reads.ts'
import type { Engine } from '../store/types.ts'
import { rfc3339 } from '../views.ts'
import {
  type ClickHouseQueryPoint,
  type PostgresQueryPoint,
  QueryDetail,
  QueryPlan,
  QueryStats,
} from '../../shared/api/queries.ts'
import { oneOf, query } from './schema.ts'
import { clampLimit, databaseFor, limitQuery, parseWindow, windowQuery } from './telemetry-params.ts'

/** The spec's four, and io_time (blk_read_time_ms + blk_write_time_ms): the dashboard's I/O time column. */
const sorts = ['total_time', 'calls', 'mean_time', 'rows', 'io_time'] as const

const round = (n: number | null, digits = 3) => (n === null ? null : Number(n.toFixed(digits)))

/** Counters PostgreSQL has no source for (ClickHouse's): left out of a PostgreSQL statement's points. */
const CLICKHOUSE_ONLY = STATEMENT_COUNTERS.filter(
  (c) => !(POSTGRES_STATEMENT_COUNTERS as readonly string[]).includes(c),
)

/** The statement family's durations, answered to the microsecond. */
const DURATIONS = [...STATEMENT_DURATIONS]
const roundedDurations = (row: object) =>
  Object.fromEntries(DURATIONS.map((k) => [k, round((row as Record<string, number | null>)[k] ?? null)]))

function queryView({ first_bucket, ...row }: QueryStatsRow): Static<typeof QueryStats> {
  return {
    ...row,
    // Where the statement's data in the window starts (the agent counts from its first cycle).
    first_bucket: rfc3339(first_bucket),
    ...roundedDurations(row),
    mean_time_ms: round(row.mean_time_ms)!,
    cache_hit_ratio: round(row.cache_hit_ratio, 6),
  } as Static<typeof QueryStats>
}

function pointView(
  point: QueryPoint,
  engine: Engine,
): Static<typeof PostgresQueryPoint> | Static<typeof ClickHouseQueryPoint> {
  const view: Record<string, unknown> = {
    ...point,
    ts: rfc3339(point.ts),
    ...roundedDurations(point),
    mean_time_ms: round(point.mean_time_ms),
    cache_hit_ratio: round(point.cache_hit_ratio, 6),
  }
  if (engine !== 'clickhouse') for (const key of CLICKHOUSE_ONLY) delete view[key]
  return view as Static<typeof PostgresQueryPoint> | Static<typeof ClickHouseQueryPoint>
}

export function queryRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/databases/:id/queries' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const window = parseWindow(query, clock())
        const rows = await store.listQueryStats(
          db.id,
          window,
          query.sort_by ?? 'total_time',
          clampLimit('queries', query.limit),
        )
        return rows.map(queryView)
      },
      {
        query: query({ ...windowQuery, limit: limitQuery('queries'), sort_by: t.Optional(oneOf('sort_by', sorts)) }),
        response: { 200: t.Array(QueryStats) },
        detail: { summary: 'Statement statistics over a window, sorted and limited' },
      },
    )
    .get(
      '/:hash',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const window = parseWindow(query, clock())
        const detail = await store.queryDetail(db.id, params.hash, window)
        if (!detail) throw notFound('query')
        return {
          ...queryView(detail.stats),
          first_seen: rfc3339(detail.first_seen),
          last_seen: rfc3339(detail.last_seen),
          since: rfc3339(window.since),
          until: rfc3339(window.until),
          resolution_seconds: detail.resolution,
          timeseries: detail.points.map((p) => pointView(p, db.engine)),
        } as Static<typeof QueryDetail>
      },
      {
        query: query(windowQuery),
        response: { 200: QueryDetail },
        detail: { summary: "One statement's sums, first and last seen, and timeseries over a window" },
      },
    )
    .get(
      '/:hash/explain',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const window = parseWindow(query, clock())
        const plans = await store.listPlans(db.id, params.hash, window, clampLimit('explain', query.limit))
        return plans.map((p) => ({ ...p, ts: rfc3339(p.ts) }))
      },
      {
        query: query({ ...windowQuery, limit: limitQuery('explain') }),
        response: { 200: t.Array(QueryPlan) },
        detail: { summary: "A statement's sampled execution plans in a window, newest first (PostgreSQL)" },
      },
    )
}
