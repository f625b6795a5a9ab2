// /api/v1/databases/{id}: active queries (and their WebSocket stream), locks, tables and indexes.
// Active queries serve both engines; locks, tables and indexes are PostgreSQL's. /active and /locks
// answer the latest snapshot, or with `at` the kept snapshot at or before that time (session history,
// routes/session-history.ts and store/sessions/; its locks are those that wait or block).
import { Elysia, t } from 'elysia'
import type { Static } from '@sinclair/typebox'
import { TABLE_COUNTERS, TABLE_GAUGES } from '../../shared/families.ts'
import { ActiveQuery, type LockEntry } from '../../shared/wire.ts'
import { looksLikeApiKey } from '../auth/api-keys.ts'
import { type Principal, accessCookie, authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { HttpError, forbidden, notFound, unauthorized } from '../http-error.ts'
import { resultLimits, activeStreamInterval } from '../limits.ts'
import { isStoreUnreachable } from '../store/reachability.ts'
import { INDEX_SORTS, type IndexRow, type Point, TABLE_SORTS, type TableRow } from '../store/objects/types.ts'
import { rfc3339 } from '../views.ts'
import { ActiveSession, IndexDetail, IndexEntry, Lock, TableDetail, TableEntry } from '../../shared/api/objects.ts'
import { oneOf, query } from './schema.ts'
import { atQuery, clampLimit, databaseFor, limitQuery, parseAt, parseWindow, windowQuery } from './telemetry-params.ts'

const PREFIX = '/api/v1/databases/:id'

/** The active-query stream's `interval` in seconds: default, minimum, maximum (over it: clamped). */

const round = (n: number | null | undefined, digits = 3) =>
  n === null || n === undefined ? null : Number(n.toFixed(digits))

const TABLE_FIELD_KEYS = [...TABLE_COUNTERS, ...TABLE_GAUGES]

const ACTIVE_FIELDS = Object.keys(ActiveQuery.properties) as (keyof ActiveQuery)[]

/** An active query entry: the wire's known fields (optional ones when sent), times in RFC 3339, the snapshot's ts. */
function activeView(entry: ActiveQuery, ts: number): Static<typeof ActiveSession> {
  const view: Record<string, unknown> = {}
  for (const field of ACTIVE_FIELDS) if (entry[field] !== undefined) view[field] = entry[field]
  view.duration_ms = round(entry.duration_ms)
  for (const field of ['xact_start', 'backend_start', 'query_start'] as const) {
    const time = entry[field]
    if (typeof time === 'number') view[field] = rfc3339(time)
  }
  view.ts = rfc3339(ts)
  return view as Static<typeof ActiveSession>
}

function lockView(l: LockEntry, ts: number) {
  return {
    pid: l.pid,
    lock_type: l.lock_type,
    mode: l.mode,
    relation_name: l.relation_name,
    granted: l.granted,
    blocked_by_pid: l.blocked_by_pid,
    duration_ms: round(l.duration_ms),
    query_text: l.query_text,
    ts: rfc3339(ts),
  }
}

/** Dead tuples as a share of all tuples; null when unknown or the table is empty. */
function deadTupleRatio(live: number | null, dead: number | null): number | null {
  if (live === null || dead === null || live + dead === 0) return null
  return round(dead / (live + dead), 6)
}

/** pg_total_relation_size as the sum of the same sample's pg_table_size and pg_indexes_size; null when either is unknown. */
function totalBytes(table: number | null, indexes: number | null): number | null {
  return table === null || indexes === null ? null : table + indexes
}

/** A table's entry: every counter and gauge of the table family (src/shared/families.ts), times in RFC 3339. */
function tableView(r: TableRow) {
  return {
    schema_name: r.schema_name,
    table_name: r.table_name,
    ...(Object.fromEntries(TABLE_FIELD_KEYS.map((k) => [k, r[k]])) as Pick<
      TableRow,
      (typeof TABLE_FIELD_KEYS)[number]
    >),
    last_vacuum: rfc3339(r.last_vacuum),
    last_autovacuum: rfc3339(r.last_autovacuum),
    last_analyze: rfc3339(r.last_analyze),
    last_autoanalyze: rfc3339(r.last_autoanalyze),
    has_primary_key: r.has_primary_key,
    autovacuum_enabled: r.autovacuum_enabled,
    dead_tuple_ratio: deadTupleRatio(r.n_live_tup, r.n_dead_tup),
    total_bytes: totalBytes(r.table_size_bytes, r.index_size_bytes),
    ts: rfc3339(r.ts),
  }
}

function indexView(r: IndexRow) {
  return { ...r, ts: rfc3339(r.ts) }
}

/** An object's detail: its latest entry, the window and the timeseries. */
function detailView<E, C extends string>(
  entry: E,
  window: { since: number; until: number },
  series: { resolution: number; points: Point<C>[] },
) {
  return {
    ...entry,
    since: rfc3339(window.since),
    until: rfc3339(window.until),
    resolution_seconds: series.resolution,
    timeseries: series.points.map((p) => ({ ...p, ts: rfc3339(p.ts) })),
  }
}

// ---- the WebSocket stream ----

/** A whole number from `min`; over `max` it is clamped; undefined when invalid. */
function wholeNumber(value: unknown, fallback: number, min: number, max: number): number | undefined {
  if (value === undefined) return fallback
  if (typeof value !== 'string' || !/^\d{1,9}$/.test(value) || Number(value) < min) return undefined
  return Math.min(Number(value), max)
}

/** The stream's interval and limit, or the reason they are refused. */
function streamSettings(q: Record<string, unknown>): { intervalMs: number; limit: number } | string {
  const { default: fallback, min, max } = activeStreamInterval
  const interval = wholeNumber(q.interval, fallback, min, max)
  if (interval === undefined) return `interval must be a whole number of seconds from ${min} (at most ${max} are used)`
  const limit = wholeNumber(q.limit, resultLimits.active.default, 1, resultLimits.active.max)
  if (limit === undefined)
    return `limit must be a whole number from 1 (at most ${resultLimits.active.max} are returned)`
  return { intervalMs: interval * 1000, limit }
}

/** Cookie-authenticated upgrades must come from this site: browsers send cookies on cross-site WebSockets. */
function checkStreamOrigin(deps: Deps, request: Request) {
  const origin = request.headers.get('origin')
  if (!origin) return
  let host: string | undefined
  try {
    host = new URL(origin).host
  } catch {}
  if (host !== request.headers.get('host') && host !== new URL(deps.publicUrl).host)
    throw forbidden('cross-site request refused')
}

const JWT_CHARACTERS = /^[A-Za-z0-9_.-]+$/

/**
 * The stream's caller: the `token` query parameter (a user's access JWT, checked exactly as a Bearer
 * token is), else the usual headers or the dashboard's cookie. The token is never logged.
 */
async function streamCaller(deps: Deps, request: Request, token: unknown): Promise<Principal> {
  if (token !== undefined) {
    if (typeof token !== 'string' || !JWT_CHARACTERS.test(token) || looksLikeApiKey(token))
      throw unauthorized('invalid or expired access token')
    return authenticate(deps, new Request(request.url, { headers: { authorization: `Bearer ${token}` } }))
  }
  const headerCredential = request.headers.has('x-api-key') || request.headers.has('authorization')
  if (!headerCredential && accessCookie(request)) checkStreamOrigin(deps, request)
  return authenticate(deps, request)
}

interface StreamState {
  closed: boolean
  timer?: ReturnType<typeof setTimeout>
}

/** GET /active/ws: the latest active-query snapshot now and every `interval` seconds, as `{ts, active}`. */
function activeStream(deps: Deps) {
  const streams = new WeakMap<object, StreamState>()
  return new Elysia({ prefix: PREFIX })
    .derive(async ({ request, query, params }) => {
      const access = async () => {
        const principal = await streamCaller(deps, request, query.token)
        return databaseFor(deps, principal, params.id)
      }
      const database = await access()
      return { databaseId: database.id, access }
    })
    .ws('/active/ws', {
      open(ws) {
        const settings = streamSettings(ws.data.query)
        if (typeof settings === 'string') return ws.close(1008, settings)
        const state: StreamState = { closed: false }
        streams.set(ws.raw, state)
        deps.streams?.add(ws.raw)
        const tick = async (first: boolean) => {
          try {
            // Every later tick checks the caller again: an expired or revoked token ends the stream.
            if (!first) await ws.data.access()
            const snapshot = await deps.store.sessions.activeQueries(ws.data.databaseId, settings.limit)
            if (state.closed) return
            const ts = snapshot.ts
            ws.send(
              JSON.stringify({
                ts: rfc3339(ts),
                active: ts === null ? [] : snapshot.entries.map((e) => activeView(e, ts)),
              }),
            )
          } catch (e) {
            if (state.closed) return
            if (e instanceof HttpError) return ws.close(1008, e.message.slice(0, 120))
            // 1013, try again later: the page reconnects; the outage is logged once by the app.
            if (isStoreUnreachable(e)) return ws.close(1013, 'store unavailable')
            deps.log.error('active query stream failed', { error: (e as Error)?.name, cause: (e as Error)?.message })
            return ws.close(1011, 'internal server error')
          }
          if (!state.closed) state.timer = setTimeout(() => void tick(false), settings.intervalMs)
        }
        void tick(true)
      },
      close(ws) {
        deps.streams?.delete(ws.raw)
        const state = streams.get(ws.raw)
        if (!state) return
        state.closed = true
        clearTimeout(state.timer)
      },
    })
}

// ---- the REST endpoints ----

function restRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: PREFIX })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/active',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const at = parseAt(query.at)
        const limit = clampLimit('active', query.limit)
        const { ts, entries } =
          at === undefined
            ? await store.sessions.activeQueries(db.id, limit)
            : await store.sessions.activityAt(db.id, at, limit)
        return ts === null ? [] : entries.map((e) => activeView(e, ts))
      },
      {
        query: query({ limit: limitQuery('active'), at: atQuery }),
        response: { 200: t.Array(ActiveSession) },
        detail: {
          summary:
            'Active sessions of the latest snapshot, or of the kept one at or before `at`, longest running first',
        },
      },
    )
    .get(
      '/locks',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const at = parseAt(query.at)
        const limit = clampLimit('locks', query.limit)
        const { ts, entries } =
          at === undefined ? await store.sessions.locks(db.id, limit) : await store.sessions.locksAt(db.id, at, limit)
        return ts === null ? [] : entries.map((l) => lockView(l, ts))
      },
      {
        query: query({ limit: limitQuery('locks'), at: atQuery }),
        response: { 200: t.Array(Lock) },
        detail: {
          summary:
            'Locks of the latest snapshot, or the waiting and blocking ones of the kept snapshot at or before `at` (PostgreSQL)',
        },
      },
    )
    .get(
      '/tables',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const rows = await store.objects.listTables(db.id, query.sort_by ?? 'size', clampLimit('tables', query.limit))
        return rows.map(tableView)
      },
      {
        query: query({ sort_by: t.Optional(oneOf('sort_by', TABLE_SORTS)), limit: limitQuery('tables') }),
        response: { 200: t.Array(TableEntry) },
        detail: { summary: "Tables' latest statistics and sizes, sorted and limited (PostgreSQL)" },
      },
    )
    .get(
      '/tables/:schema/:name',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const window = parseWindow(query, clock())
        const table = await store.objects.table(db.id, params.schema, params.name)
        if (!table) throw notFound('table')
        return detailView(
          tableView(table),
          window,
          await store.objects.tableSeries(db.id, params.schema, params.name, window),
        )
      },
      {
        query: query(windowQuery),
        response: { 200: TableDetail },
        detail: { summary: "A table's latest statistics and its timeseries over a window (PostgreSQL)" },
      },
    )
    .get(
      '/indexes',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const rows = await store.objects.listIndexes(db.id, query.sort_by ?? 'size', clampLimit('indexes', query.limit))
        return rows.map(indexView)
      },
      {
        query: query({ sort_by: t.Optional(oneOf('sort_by', INDEX_SORTS)), limit: limitQuery('indexes') }),
        response: { 200: t.Array(IndexEntry) },
        detail: { summary: "Indexes' latest statistics and sizes, sorted and limited (PostgreSQL)" },
      },
    )
    .get(
      '/indexes/unused',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const rows = await store.objects.listIndexes(
          db.id,
          query.sort_by ?? 'size',
          clampLimit('indexes', query.limit),
          true,
        )
        return rows.map(indexView)
      },
      {
        query: query({ sort_by: t.Optional(oneOf('sort_by', INDEX_SORTS)), limit: limitQuery('indexes') }),
        response: { 200: t.Array(IndexEntry) },
        detail: { summary: 'Unused indexes: never scanned, neither primary nor unique, over 1 MB (PostgreSQL)' },
      },
    )
    .get(
      '/indexes/:schema/:name',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const window = parseWindow(query, clock())
        const index = await store.objects.index(db.id, params.schema, params.name)
        if (!index) throw notFound('index')
        return detailView(
          indexView(index),
          window,
          await store.objects.indexSeries(db.id, params.schema, params.name, window),
        )
      },
      {
        query: query(windowQuery),
        response: { 200: IndexDetail },
        detail: { summary: "An index's latest statistics and its timeseries over a window (PostgreSQL)" },
      },
    )
}

export function objectRoutes(deps: Deps) {
  return new Elysia().use(activeStream(deps)).use(restRoutes(deps))
}
