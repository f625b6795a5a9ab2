// The server log's entries and their counts (migration 15), as the agent's `log_events` section sends
// them. Ingest (LogEventWrites.apply, called by planBatch in the batch's transaction) inserts each entry
// sent whole with an id of its own, and adds the section's counts per minute, kind and severity into
// minute and hour buckets (summed across batches: a batch is applied once, by its batch_id), with the
// entries the agent counted but did not send whole under the empty kind. Reads: entries newest first by
// (ts, id) with their filters, counts per bucket, and what was dropped. Everything from the monitored
// database stays text reaching SQL only as parameters; `q` is matched with LIKE, its wildcards escaped.
import { LOG_SEVERITIES, kindsRaisedTo } from '../../../shared/log-kinds.ts'
import type { IngestBatch } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import { int64Counter, saturatingAdd } from '../sums.ts'
import { type Fragment, ident, join, sql } from '../sql.ts'
import type { Writes } from '../ingest/batch.ts'
import { HOUR_MS, MINUTE_MS, type Window, floorTo, windowClause } from '../window.ts'

/** A value of an entry's `fields`, as the wire allows it. */
export type LogFieldValue = number | boolean | null | string | (number | string)[]

export interface StoredLogEntry {
  id: string
  ts: number
  kind: string
  severity: string
  sqlstate: string | null
  message: string
  fingerprint: string
  pid: number | null
  user: string | null
  database: string | null
  application: string | null
  client: string | null
  detail: string | null
  statement: string | null
  query_id: string | null
  /** The statement's hash when query_id names a statement dbm keeps (PostgreSQL: query_hash is the queryid). */
  query_hash: string | null
  fields: Record<string, LogFieldValue>
  count: number
}

/** Which entries a read wants; every condition optional but the window. */
export interface LogEntryFilter {
  since: number
  until: number
  /** These kinds only. */
  kinds?: readonly string[]
  /** These severities only, as logged. */
  severities?: readonly string[]
  /** These importances only: the logged severity raised to the kind's (LOG_KIND_IMPORTANCE). */
  importances?: readonly string[]
  /** A substring of the message, the statement or the detail, case-insensitive (ASCII letters on SQLite). */
  q?: string
  /** Entries older than this one (the previous page's last): (ts, id) below it. */
  before?: { ts: number; id: string }
}

/** Which counts a read wants: every condition optional. */
export interface LogCountFilter {
  /** These kinds only. */
  kinds?: readonly string[]
  /** These importances only (see LogEntryFilter). */
  importances?: readonly string[]
}

/** One bucket's count of one kind and severity. */
export interface LogCountRow {
  bucket: number
  kind: string
  severity: string
  count: number
}

export interface LogEventReads {
  /** Entries matching the filter, newest first (ts, then id, descending), at most `limit`. */
  entries(databaseId: string, filter: LogEntryFilter, limit: number): Promise<StoredLogEntry[]>
  /**
   * Counts per `bucketMs` bucket (aligned on multiples of it), kind and severity, oldest first, from the
   * minute rows (and the hour rows where minute rows are no longer kept: window.minuteFloor), of the
   * kinds and importances the filter names when it does.
   */
  counts(databaseId: string, window: Window, bucketMs: number, filter?: LogCountFilter): Promise<LogCountRow[]>
  /** Entries the agent counted but did not send whole, in the window. */
  dropped(databaseId: string, window: Window): Promise<number>
}

export interface LogEventWrites {
  /** Adds the batch's log_events section to the batch's writes (nothing when it has none). */
  apply(writes: Writes, databaseId: string, batch: IngestBatch): void
}

export interface LogEventStore extends LogEventReads, LogEventWrites {}

const ENTRY_COLUMNS = [
  'database_id',
  'ts',
  'id',
  'kind',
  'severity',
  'sqlstate',
  'message',
  'fingerprint',
  'pid',
  'user_name',
  'database_name',
  'application',
  'client',
  'detail',
  'statement',
  'query_id',
  'fields',
  'count',
] as const

const COUNT_COLUMNS = ['database_id', 'resolution', 'bucket', 'kind', 'severity', 'count'] as const

/** The kind and severity the dropped entries are counted under (no real kind or severity is empty). */
export const DROPPED_KEY = ''

/** The severities at or above `min` (LOG_SEVERITIES order); undefined when `min` is not one. */
export function severitiesFrom(min: string): string[] | undefined {
  const i = (LOG_SEVERITIES as readonly string[]).indexOf(min)
  return i < 0 ? undefined : LOG_SEVERITIES.slice(i)
}

/** The condition an importance filter makes: the logged severity is one of them, or the kind's own importance is. */
function importanceCondition(alias: '' | 'e.', importances: readonly string[]): Fragment {
  const raised = kindsRaisedTo(importances)
  const severity = ident(`${alias}severity`, ['severity', 'e.severity'])
  const kind = ident(`${alias}kind`, ['kind', 'e.kind'])
  return raised.length > 0 ? sql`(${severity} IN ${[...importances]} OR ${kind} IN ${raised})` : sql`${severity} IN ${[...importances]}`
}

/** `text` as a LIKE pattern matching it anywhere, its wildcards and the escape character escaped (ESCAPE '\'). */
export function likeContaining(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

function applyLogEvents(writes: Writes, databaseId: string, batch: IngestBatch): void {
  const section = batch.log_events
  if (!section) return
  const entries = section.entries.map((e) => [
    databaseId,
    e.ts,
    Bun.randomUUIDv7(),
    e.kind,
    e.severity,
    e.sqlstate,
    e.message,
    e.fingerprint,
    e.pid,
    e.user,
    e.database,
    e.application,
    e.client,
    e.detail,
    e.statement,
    e.query_id,
    JSON.stringify(e.fields),
    e.count ?? 1,
  ])
  writes.upsert('log_entries', ENTRY_COLUMNS, entries, { key: ['database_id', 'ts', 'id'], update: {} })
  // One row per (resolution, bucket, kind, severity): the batch's counts added up first (an upsert may
  // not touch one row twice), both resolutions at once.
  const sums = new Map<string, unknown[]>()
  const add = (at: number, kind: string, severity: string, n: number) => {
    if (!(n > 0)) return
    for (const resolution of [MINUTE_MS, HOUR_MS]) {
      const bucket = floorTo(at, resolution)
      const key = JSON.stringify([resolution, bucket, kind, severity])
      const row = sums.get(key)
      if (row) row[5] = (row[5] as number) + n
      else sums.set(key, [databaseId, resolution / 1000, bucket, kind, severity, n])
    }
  }
  for (const c of section.counts) add(c.minute, c.kind, c.severity, Math.round(c.count))
  add(batch.collected_at, DROPPED_KEY, DROPPED_KEY, Math.round(section.dropped))
  const rows = [...sums.values()]
  for (const row of rows) row[5] = int64Counter(row[5] as number)
  writes.upsert('log_counts', COUNT_COLUMNS, rows, {
    key: ['database_id', 'resolution', 'bucket', 'kind', 'severity'],
    update: { count: saturatingAdd('log_counts.count', 'excluded.count') },
  })
}

const text = (v: unknown) => (v === null || v === undefined ? null : String(v))

function parseFields(v: unknown): Record<string, LogFieldValue> {
  try {
    const parsed = JSON.parse(String(v))
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {}
  } catch {
    return {}
  }
}

function toEntry(r: Record<string, unknown>): StoredLogEntry {
  return {
    id: String(r.id),
    ts: Number(r.ts),
    kind: String(r.kind),
    severity: String(r.severity),
    sqlstate: text(r.sqlstate),
    message: String(r.message),
    fingerprint: String(r.fingerprint),
    pid: r.pid === null || r.pid === undefined ? null : Number(r.pid),
    user: text(r.user_name),
    database: text(r.database_name),
    application: text(r.application),
    client: text(r.client),
    detail: text(r.detail),
    statement: text(r.statement),
    query_id: text(r.query_id),
    query_hash: text(r.query_hash),
    fields: parseFields(r.fields),
    count: Number(r.count),
  }
}

/** The ingest side: needs no driver (its statements join the batch's writes). */
export const logEventWrites: LogEventWrites = { apply: applyLogEvents }

/** The log events store over a driver. */
export function logEventStore(driver: SqlDriver): LogEventStore {
  return {
    ...logEventWrites,

    async entries(databaseId, filter, limit) {
      const conditions: Fragment[] = [sql`e.database_id = ${databaseId}`, sql`e.ts >= ${filter.since}`, sql`e.ts < ${filter.until}`]
      if (filter.kinds) conditions.push(sql`e.kind IN ${[...filter.kinds]}`)
      if (filter.severities) conditions.push(sql`e.severity IN ${[...filter.severities]}`)
      if (filter.importances) conditions.push(importanceCondition('e.', filter.importances))
      if (filter.q !== undefined && filter.q !== '') {
        const pattern = likeContaining(filter.q)
        conditions.push(
          sql`(LOWER(e.message) LIKE ${pattern} ESCAPE '\\' OR LOWER(e.statement) LIKE ${pattern} ESCAPE '\\' OR LOWER(e.detail) LIKE ${pattern} ESCAPE '\\')`,
        )
      }
      if (filter.before) conditions.push(sql`(e.ts < ${filter.before.ts} OR (e.ts = ${filter.before.ts} AND e.id < ${filter.before.id}))`)
      // A statement dbm keeps under the entry's query id (PostgreSQL's query_hash is pg_stat_statements' queryid).
      const query = sql`SELECT e.id, e.ts, e.kind, e.severity, e.sqlstate, e.message, e.fingerprint, e.pid, e.user_name, e.database_name, e.application,
          e.client, e.detail, e.statement, e.query_id, e.fields, e.count,
          (SELECT t.query_hash FROM query_texts t WHERE t.database_id = e.database_id AND t.query_hash = e.query_id) AS query_hash
        FROM log_entries e WHERE ${join(conditions, sql` AND `)} ORDER BY e.ts DESC, e.id DESC LIMIT ${limit}`
      const rows = await driver.all(query.sql, query.params)
      return rows.map(toEntry)
    },

    async counts(databaseId, window, bucketMs, filter = {}) {
      const conditions: Fragment[] = [sql`database_id = ${databaseId}`, sql`kind <> ${DROPPED_KEY}`, windowClause(window)]
      if (filter.kinds) conditions.push(sql`kind IN ${[...filter.kinds]}`)
      if (filter.importances) conditions.push(importanceCondition('', filter.importances))
      const query = sql`SELECT bucket - (bucket % ${bucketMs}) AS b, kind, severity, SUM(count) AS n FROM log_counts
        WHERE ${join(conditions, sql` AND `)}
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`
      const rows = await driver.all(query.sql, query.params)
      return rows.map((r) => ({ bucket: Number(r.b), kind: String(r.kind), severity: String(r.severity), count: Number(r.n) }))
    },

    async dropped(databaseId, window) {
      const query = sql`SELECT SUM(count) AS n FROM log_counts WHERE database_id = ${databaseId} AND kind = ${DROPPED_KEY} AND severity = ${DROPPED_KEY} AND ${windowClause(window)}`
      const row = await driver.get(query.sql, query.params)
      return Number(row?.n ?? 0)
    },
  }
}
