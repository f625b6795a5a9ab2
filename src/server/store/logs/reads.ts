// Reads of the server log: entries newest first by (ts, id) with their filters, counts per bucket, and
// what was dropped. Text from the monitored database reaches SQL only as parameters; `q` is matched
// with LIKE, its wildcards escaped.
import { LOG_SEVERITIES, kindsRaisedTo } from '../../../shared/log-kinds.ts'
import type { SqlDriver } from '../driver.ts'
import { type Fragment, ident, join, sql } from '../sql.ts'
import { windowClause } from '../window.ts'
import { DROPPED_KEY, type LogEventReads, type LogFieldValue, type StoredLogEntry } from './types.ts'

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
  return raised.length > 0
    ? sql`(${severity} IN ${[...importances]} OR ${kind} IN ${raised})`
    : sql`${severity} IN ${[...importances]}`
}

/** `text` as a LIKE pattern matching it anywhere, its wildcards and the escape character escaped (ESCAPE '\'). */
export function likeContaining(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`
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

/** The log events' reads over a driver. */
export function logEventReads(driver: SqlDriver): LogEventReads {
  return {
    async entries(databaseId, filter, limit) {
      const conditions: Fragment[] = [
        sql`e.database_id = ${databaseId}`,
        sql`e.ts >= ${filter.since}`,
        sql`e.ts < ${filter.until}`,
      ]
      if (filter.kinds) conditions.push(sql`e.kind IN ${[...filter.kinds]}`)
      if (filter.severities) conditions.push(sql`e.severity IN ${[...filter.severities]}`)
      if (filter.importances) conditions.push(importanceCondition('e.', filter.importances))
      if (filter.q !== undefined && filter.q !== '') {
        const pattern = likeContaining(filter.q)
        conditions.push(
          sql`(LOWER(e.message) LIKE ${pattern} ESCAPE '\\' OR LOWER(e.statement) LIKE ${pattern} ESCAPE '\\' OR LOWER(e.detail) LIKE ${pattern} ESCAPE '\\')`,
        )
      }
      if (filter.before)
        conditions.push(
          sql`(e.ts < ${filter.before.ts} OR (e.ts = ${filter.before.ts} AND e.id < ${filter.before.id}))`,
        )
      // A statement dbm keeps under the entry's query id (PostgreSQL's query_hash is pg_stat_statements' queryid).
      const query = sql`SELECT e.id, e.ts, e.kind, e.severity, e.sqlstate, e.message, e.fingerprint, e.pid, e.user_name, e.database_name, e.application,
          e.client, e.detail, e.statement, e.query_id, e.fields, e.count,
          (SELECT t.query_hash FROM query_texts t WHERE t.database_id = e.database_id AND t.query_hash = e.query_id) AS query_hash
        FROM log_entries e WHERE ${join(conditions, sql` AND `)} ORDER BY e.ts DESC, e.id DESC LIMIT ${limit}`
      const rows = await driver.all(query.sql, query.params)
      return rows.map(toEntry)
    },

    async counts(databaseId, window, bucketMs, filter = {}) {
      const conditions: Fragment[] = [
        sql`database_id = ${databaseId}`,
        sql`kind <> ${DROPPED_KEY}`,
        windowClause(window),
      ]
      if (filter.kinds) conditions.push(sql`kind IN ${[...filter.kinds]}`)
      if (filter.importances) conditions.push(importanceCondition('', filter.importances))
      const query = sql`SELECT bucket - (bucket % ${bucketMs}) AS b, kind, severity, SUM(count) AS n FROM log_counts
        WHERE ${join(conditions, sql` AND `)}
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`
      const rows = await driver.all(query.sql, query.params)
      return rows.map((r) => ({
        bucket: Number(r.b),
        kind: String(r.kind),
        severity: String(r.severity),
        count: Number(r.n),
      }))
    },

    async dropped(databaseId, window) {
      const query = sql`SELECT SUM(count) AS n FROM log_counts WHERE database_id = ${databaseId} AND kind = ${DROPPED_KEY} AND severity = ${DROPPED_KEY} AND ${windowClause(window)}`
      const row = await driver.get(query.sql, query.params)
      return Number(row?.n ?? 0)
    },
  }
}
