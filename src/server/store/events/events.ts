// The events timeline of a database (GET /databases/{id}/events). Two kinds of rows make it:
// - events derived at ingest, by comparing a batch with what the store knew before it (event_baselines,
//   the latest tables and indexes, the database's row): the database server restarted or changed version,
//   tables and indexes appeared, disappeared or became valid, settings changed, statistics were reset, the
//   agent connected (its first batch, a restart, or a batch after a gap) and had been away. Kept in
//   `events` (migration 11), swept by retention like other telemetry;
// - alerts opened and resolved, written by the monitor in the transaction that opens or resolves
//   the alert (alerts/alerts.ts through record.ts's recordEventsNow and alertEvent), with the title and detail the alert
//   had at that moment: an opening keeps the rule's text at opening, a resolution the text of the alert's
//   last evaluation while open. Alerts opened before this version have no such rows: for them (and only
//   for them, per kind) the events are still derived from the alerts table at query time, with the text
//   the alert has now;
// - plan changes, read from their own table at query time (not copied);
// - server log entries of the important kinds (TIMELINE_LOG_KINDS: crash, out of memory, disk full,
//   archive failures, recovery, could not fork), written at ingest from the batch's log_events section
//   (applyLogTimeline): one event per entry, or, past LOG_EVENTS_PER_MINUTE of one kind in a minute, one
//   event for the burst of that minute with its count and its first message.
// Derivation rules: a batch older than the baseline (delivered late from the agent's buffer) derives
// nothing and leaves the baseline as it is; the later parts of a split cycle (same collected_at) derive
// no gap; object events come only from a batch that is not a part of a split cycle (a part names only
// some of the objects, and the first part of a cycle replaces the latest rows: objects/writes.ts), so a
// database whose cycles are split (batches past ~15 MB: tens of thousands of objects) gets no table or
// index events; and only for a section the database has carried before (a collector turned on later
// does not make every object "appear"). Everything from the monitored database (names, values) is
// stored as text and given back as JSON strings; nothing of it reaches SQL but as a parameter.
import { LOG_KINDS, type LogKind, TIMELINE_LOG_KINDS } from '../../../shared/log-kinds.ts'
import { maskSecretSettings } from '../../../shared/secret-settings.ts'
import type { IngestBatch } from '../../../shared/wire.ts'
import { silentAfterMs } from '../../limits.ts'
import type { SqlDriver } from '../driver.ts'
import { lastHeardAt } from '../availability/types.ts'
import type { RegisteredDatabase } from '../databases/types.ts'
import type { Window } from '../window.ts'
import type { Reads, Writes } from '../ingest/batch.ts'
import { alertEvent, dbLink, iso, recordEvents } from './record.ts'
import type { DbEvent, EventKind } from './types.ts'
import { numOrNull } from '../rows.ts'

export type { DbEvent, EventKind } from './types.ts'

/** Object events one batch may add; past it, one summary event says how many more there were. */
export const MAX_OBJECT_EVENTS = 200
/** An event's title and detail are cut to these lengths (a hostile batch's 5,000 settings of 256 characters made one 1.3 MB detail). */
/**
 * A time the agent reports for the server (its start, a statistics reset) later than the batch's own
 * time by more than this is not believed: an event dated in year 9999 would outlive every retention,
 * and a start in the future would hide every real restart after it.
 */
const FUTURE_SKEW_MS = 5 * 60_000

/** Setting changes one batch may list one by one; past it, one event names them all in its detail. */
export const MAX_SETTING_EVENTS = 50
/** A gap longer than this many poll intervals between two batches is an agent disconnection. */
export const GAP_INTERVALS = 3
/** ClickHouse's start time is computed from uptime() in seconds: starts closer than this are the same start. */
const CLICKHOUSE_START_TOLERANCE_MS = 5_000

/** A part of a split cycle carries `<batch_id>.<n>` (src/agent/split.ts); whole batches are UUIDs. */
const isPart = (batchId: string) => /\.\d+$/.test(batchId)

interface Baseline {
  collected_at: number
  interval_seconds: number | null
  started_at: number | null
  agent_started_at: number | null
  settings_hash: string | null
  settings: Record<string, string> | null
  stats_resets: Record<string, number | null> | null
  carried: string[]
  /** ClickHouse: the `database.table` names with active parts in the latest parts section. */
  clickhouse_tables: string[] | null
  /** objectsDigest of the tables and of the indexes last compared. */
  tables_digest: string | null
  indexes_digest: string | null
}

/** A JSON column's value; null when absent or not JSON (then the next batch starts it afresh). */
function json<T>(v: unknown): T | null {
  if (v === null || v === undefined) return null
  try {
    return JSON.parse(String(v)) as T
  } catch {
    return null
  }
}

function toBaseline(r: Record<string, unknown> | undefined): Baseline | undefined {
  if (!r) return undefined
  return {
    collected_at: Number(r.collected_at),
    interval_seconds: numOrNull(r.interval_seconds),
    started_at: numOrNull(r.started_at),
    agent_started_at: numOrNull(r.agent_started_at),
    settings_hash: r.settings_hash === null || r.settings_hash === undefined ? null : String(r.settings_hash),
    settings: json(r.settings),
    stats_resets: json(r.stats_resets),
    carried: json<string[]>(r.carried) ?? [],
    clickhouse_tables: json<string[]>(r.clickhouse_tables),
    tables_digest: r.tables_digest === null || r.tables_digest === undefined ? null : String(r.tables_digest),
    indexes_digest: r.indexes_digest === null || r.indexes_digest === undefined ? null : String(r.indexes_digest),
  }
}

/**
 * A digest of a set of objects, whatever their order: their count and the sum of each one's 64-bit hash.
 * A batch whose tables (indexes) have the digest last compared names the same ones, with the same
 * validity: nothing to compare, and the latest rows are not read (their read returns no rows).
 */
export function objectsDigest(keys: Iterable<string>): string {
  let sum = 0n
  let count = 0
  for (const key of keys) {
    sum = (sum + BigInt(Bun.hash(key))) & 0xffffffffffffffffn
    count++
  }
  return `${count}:${sum.toString(16)}`
}

/** "3 min 20 s" style duration of a gap. */
export function spanText(ms: number): string {
  const s = Math.round(ms / 1000)
  if (s < 120) return `${s} s`
  const m = Math.round(s / 60)
  if (m < 120) return `${m} min`
  const h = Math.floor(m / 60)
  return `${h} h ${m % 60} min`
}

const engineLabel = (engine: string) => (engine === 'clickhouse' ? 'ClickHouse' : 'PostgreSQL')
/** A dashboard route of the database. */
const objectLink = (databaseId: string, tab: 'tables' | 'indexes', schema: string, name: string) =>
  dbLink(databaseId, `${tab}/${encodeURIComponent(`${schema}/${name}`)}`)

/** A value as the detail shows it. */
const shown = (v: string | undefined) => (v === undefined ? '(not set)' : v === '' ? "''" : v)

/**
 * Registers the reads the batch's events depend on and returns what adds the events and the new
 * baseline to the batch's writes once they are sent; that is told the database's row as it was before the batch.
 */
export function applyEvents(
  reads: Reads,
  databaseId: string,
  batch: IngestBatch,
): (writes: Writes, database: RegisteredDatabase) => void {
  // The settings (~10 KB on PostgreSQL) and the ClickHouse tables are read only for a batch that carries
  // what they are compared with.
  const baselineRows = reads.add({
    sql: `SELECT collected_at, interval_seconds, started_at, agent_started_at, settings_hash, stats_resets, carried, tables_digest, indexes_digest,
            ${batch.server_state?.settings ? 'settings' : 'NULL AS settings'}, ${batch.parts ? 'clickhouse_tables' : 'NULL AS clickhouse_tables'}
          FROM event_baselines WHERE database_id = $1`,
    params: [databaseId],
  })
  const whole = !isPart(batch.batch_id)
  const tablesDigest =
    whole && batch.tables
      ? objectsDigest(batch.tables.map((t) => JSON.stringify([t.schema_name, t.table_name])))
      : undefined
  const indexesDigest =
    whole && batch.indexes
      ? objectsDigest(batch.indexes.map((i) => JSON.stringify([i.schema_name, i.index_name, i.is_valid])))
      : undefined
  // The latest rows, unless the baseline has the batch's digest (the same objects as last compared).
  const unlessSame = (column: 'tables_digest' | 'indexes_digest') =>
    `NOT EXISTS (SELECT 1 FROM event_baselines b WHERE b.database_id = $1 AND b.${column} = $2)`
  const tableRows =
    tablesDigest !== undefined
      ? reads.add({
          sql: `SELECT schema_name, table_name FROM latest_tables WHERE database_id = $1 AND ${unlessSame('tables_digest')}`,
          params: [databaseId, tablesDigest],
        })
      : undefined
  const indexRows =
    indexesDigest !== undefined
      ? reads.add({
          sql: `SELECT schema_name, index_name, table_name, is_valid FROM latest_indexes WHERE database_id = $1 AND ${unlessSame('indexes_digest')}`,
          params: [databaseId, indexesDigest],
        })
      : undefined
  return (writes, database) => {
    const before = toBaseline(baselineRows()[0])
    // Delivered late: later batches were compared already.
    if (before && batch.collected_at < before.collected_at) return
    const events: DbEvent[] = []
    const add = (e: Omit<DbEvent, 'severity' | 'detail' | 'object' | 'link'> & Partial<DbEvent>) =>
      events.push({ severity: null, detail: null, object: null, link: null, ...e })
    const state = batch.server_state
    const at = batch.collected_at
    const engine = engineLabel(database.engine)

    // The agent: its first batch, a (re)start, or a batch after a gap.
    const connected: string[] = []
    // No baseline: the database's first batch, or the first since this server version derives events.
    if (!before && database.last_seen_at === null) connected.push('first batch from the agent')
    if (before && batch.collected_at > before.collected_at) {
      const intervalMs = Math.max(before.interval_seconds ?? 0, batch.interval_seconds, 1) * 1000
      const gap = batch.collected_at - before.collected_at
      if (gap > GAP_INTERVALS * intervalMs) {
        add({
          ts: before.collected_at,
          kind: 'agent_disconnected',
          severity: 'warning',
          title: 'Agent stopped sending',
          detail: `no batch for ${spanText(gap)} (from ${iso(before.collected_at)} to ${iso(batch.collected_at)})`,
        })
        connected.push(`after a gap of ${spanText(gap)}`)
        // Availability counts the gap as unknown, not as down (availability/, src/server/uptime.ts).
        writes.add(
          'INSERT INTO agent_silences (database_id, started_at, ended_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
          [databaseId, before.collected_at, batch.collected_at],
        )
      }
    }
    if (
      before &&
      state?.agent_started_at !== undefined &&
      before.agent_started_at !== null &&
      state.agent_started_at !== before.agent_started_at
    ) {
      connected.push(`agent ${batch.agent_version} started at ${iso(state.agent_started_at)}`)
    }
    if (connected.length > 0)
      add({ ts: at, kind: 'agent_connected', severity: 'info', title: 'Agent connected', detail: connected.join('; ') })

    // The database server's start and version.
    const uptime = batch.server_metrics?.uptime_s
    const reported =
      state?.started_at ??
      (database.engine === 'clickhouse' && typeof uptime === 'number'
        ? Math.round(batch.collected_at - uptime * 1000)
        : undefined)
    const startedAt = reported !== undefined && reported <= at + FUTURE_SKEW_MS ? reported : undefined
    // The start kept: the first one known, replaced only by a restart (ClickHouse's computed start jitters).
    let start = before?.started_at ?? startedAt ?? null
    if (startedAt !== undefined && before?.started_at !== null && before?.started_at !== undefined) {
      const tolerance = database.engine === 'clickhouse' ? CLICKHOUSE_START_TOLERANCE_MS : 0
      if (startedAt > before.started_at + tolerance) {
        start = startedAt
        add({
          ts: startedAt,
          kind: 'restart',
          severity: 'warning',
          title: `${engine} restarted`,
          detail: `started at ${iso(startedAt)} (previous start ${iso(before.started_at)})`,
        })
      }
    }
    const version = batch.database.engine_version
    if (version && database.engine_version && version !== database.engine_version) {
      add({
        ts: at,
        kind: 'version_change',
        severity: 'info',
        title: `${engine} version changed`,
        detail: `${database.engine_version} → ${version}`,
        object: version,
      })
    }

    // Settings: compared with the last values received; written only when they changed.
    const settings = before?.settings ?? null
    // Masked here too: an agent that predates the masking must not make dbm keep a server's passwords.
    const incoming = state?.settings ? maskSecretSettings(state.settings) : undefined
    let settingsWritten: Record<string, string> | null = null
    if (incoming) {
      if (settings) {
        const names = [...new Set([...Object.keys(settings), ...Object.keys(incoming)])].sort()
        const changed = names.filter((n) => settings![n] !== incoming![n])
        if (changed.length > MAX_SETTING_EVENTS) {
          const named = changed.slice(0, MAX_SETTING_EVENTS)
          add({
            ts: at,
            kind: 'setting_change',
            severity: 'info',
            title: `${changed.length} settings changed`,
            detail: `${named.join(', ')}, … and ${changed.length - named.length} more`,
            object: '',
          })
        } else {
          for (const name of changed) {
            add({
              ts: at,
              kind: 'setting_change',
              severity: 'info',
              title: `${name} changed`,
              detail: `${shown(settings[name])} → ${shown(incoming[name])}`,
              object: name,
            })
          }
        }
      }
      if (!settings || JSON.stringify(settings) !== JSON.stringify(incoming)) settingsWritten = incoming
    }

    // Statistics resets: a reset time that moved.
    const resets = { ...(before?.stats_resets ?? {}) }
    for (const [view, reset] of Object.entries(state?.stats_resets ?? {})) {
      const known = before?.stats_resets && view in before.stats_resets
      if (reset !== null && reset > at + FUTURE_SKEW_MS) continue
      if (known && reset !== null && reset !== before!.stats_resets![view]) {
        add({
          ts: reset,
          kind: 'stats_reset',
          severity: 'info',
          title: `Statistics reset: ${view}`,
          detail: `${view} counts from zero since ${iso(reset)}`,
          object: view,
        })
      }
      resets[view] = reset
    }

    // Tables and indexes: compared with the latest rows, for a section carried before.
    const carried = new Set(before?.carried ?? [])
    const objectEvents: DbEvent[] = []
    if (tableRows && before && carried.has('tables') && before.tables_digest !== tablesDigest) {
      const known = new Map(tableRows().map((r) => [JSON.stringify([String(r.schema_name), String(r.table_name)]), r]))
      const named = new Set<string>()
      for (const t of batch.tables!) {
        const key = JSON.stringify([t.schema_name, t.table_name])
        named.add(key)
        if (!known.has(key)) {
          objectEvents.push(
            objectEvent(
              at,
              'table_created',
              `Table created: ${t.schema_name}.${t.table_name}`,
              null,
              t.schema_name,
              t.table_name,
              objectLink(databaseId, 'tables', t.schema_name, t.table_name),
            ),
          )
        }
      }
      for (const [key, r] of known) {
        if (named.has(key)) continue
        const [schema, name] = [String(r.schema_name), String(r.table_name)]
        objectEvents.push(
          objectEvent(at, 'table_dropped', `Table dropped: ${schema}.${name}`, null, schema, name, null),
        )
      }
    }
    if (indexRows && before && carried.has('indexes') && before.indexes_digest !== indexesDigest) {
      const known = new Map(indexRows().map((r) => [JSON.stringify([String(r.schema_name), String(r.index_name)]), r]))
      const named = new Set<string>()
      for (const i of batch.indexes!) {
        const key = JSON.stringify([i.schema_name, i.index_name])
        named.add(key)
        const stored = known.get(key)
        const link = objectLink(databaseId, 'indexes', i.schema_name, i.index_name)
        const on = `on ${i.schema_name}.${i.table_name}`
        if (!stored) {
          const detail = `${i.index_def || on}${i.is_valid ? '' : ' (not valid yet: being built, or its build failed)'}`
          objectEvents.push(
            objectEvent(
              at,
              'index_created',
              `Index created: ${i.schema_name}.${i.index_name}`,
              detail,
              i.schema_name,
              i.index_name,
              link,
            ),
          )
        } else if (Boolean(stored.is_valid) !== i.is_valid) {
          objectEvents.push(
            i.is_valid
              ? objectEvent(
                  at,
                  'index_valid',
                  `Index became valid: ${i.schema_name}.${i.index_name}`,
                  `${on}: its build finished`,
                  i.schema_name,
                  i.index_name,
                  link,
                )
              : objectEvent(
                  at,
                  'index_invalid',
                  `Index became invalid: ${i.schema_name}.${i.index_name}`,
                  `${on}: a rebuild failed or is under way`,
                  i.schema_name,
                  i.index_name,
                  link,
                  'warning',
                ),
          )
        }
      }
      for (const [key, r] of known) {
        if (named.has(key)) continue
        const [schema, name] = [String(r.schema_name), String(r.index_name)]
        objectEvents.push(
          objectEvent(
            at,
            'index_dropped',
            `Index dropped: ${schema}.${name}`,
            `on ${schema}.${String(r.table_name)}`,
            schema,
            name,
            null,
          ),
        )
      }
    }
    // ClickHouse tables: those with active parts (a table appears with its first part, goes with its last);
    // the parts section is never cut (src/agent/split.ts), so a part of a split cycle carries it whole.
    const clickhouseTables = before?.clickhouse_tables ?? null
    let clickhouseTablesWritten: string[] | null = null
    if (database.engine === 'clickhouse' && batch.parts) {
      const now = [...new Set(batch.parts.map((p) => JSON.stringify([p.database, p.table])))]
      if (clickhouseTables) {
        const known = new Set(clickhouseTables)
        const named = new Set(now)
        for (const key of now) {
          if (known.has(key)) continue
          const [schema, name] = JSON.parse(key) as [string, string]
          objectEvents.push(
            objectEvent(
              at,
              'table_created',
              `Table created: ${schema}.${name}`,
              'its first active parts',
              schema,
              name,
              dbLink(databaseId, 'parts'),
            ),
          )
        }
        for (const key of known) {
          if (named.has(key)) continue
          const [schema, name] = JSON.parse(key) as [string, string]
          objectEvents.push(
            objectEvent(
              at,
              'table_dropped',
              `Table gone: ${schema}.${name}`,
              'no active parts any more (dropped, truncated or emptied)',
              schema,
              name,
              null,
            ),
          )
        }
      }
      const sorted = now.sort()
      if (!clickhouseTables || JSON.stringify(clickhouseTables) !== JSON.stringify(sorted))
        clickhouseTablesWritten = sorted
    }
    events.push(...objectEvents.slice(0, MAX_OBJECT_EVENTS))
    if (objectEvents.length > MAX_OBJECT_EVENTS) {
      add({
        ts: at,
        kind: objectEvents[MAX_OBJECT_EVENTS]!.kind,
        severity: 'info',
        title: `${objectEvents.length - MAX_OBJECT_EVENTS} more object changes`,
        object: '',
      })
    }
    if (whole && batch.tables) carried.add('tables')
    if (whole && batch.indexes) carried.add('indexes')

    // One statement for all of them; an event already stored (the same time, kind and object) is kept.
    recordEvents(writes, databaseId, events)
    const next = {
      collected_at: Math.max(batch.collected_at, before?.collected_at ?? 0),
      interval_seconds: batch.interval_seconds,
      started_at: start,
      agent_started_at: state?.agent_started_at ?? before?.agent_started_at ?? null,
      settings_hash: state?.settings_hash ?? before?.settings_hash ?? null,
    }
    writes.add(
      `INSERT INTO event_baselines (database_id, collected_at, interval_seconds, started_at, agent_started_at, settings_hash, settings, stats_resets, carried, clickhouse_tables, tables_digest, indexes_digest)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
       ON CONFLICT (database_id) DO UPDATE SET collected_at = excluded.collected_at, interval_seconds = excluded.interval_seconds,
         started_at = excluded.started_at, agent_started_at = excluded.agent_started_at, settings_hash = excluded.settings_hash,
         settings = COALESCE(excluded.settings, event_baselines.settings), stats_resets = excluded.stats_resets, carried = excluded.carried,
         clickhouse_tables = COALESCE(excluded.clickhouse_tables, event_baselines.clickhouse_tables),
         tables_digest = COALESCE(excluded.tables_digest, event_baselines.tables_digest), indexes_digest = COALESCE(excluded.indexes_digest, event_baselines.indexes_digest)`,
      [
        databaseId,
        next.collected_at,
        next.interval_seconds,
        next.started_at,
        next.agent_started_at,
        next.settings_hash,
        // null: unchanged (kept by the COALESCE)
        settingsWritten ? JSON.stringify(settingsWritten) : null,
        JSON.stringify(resets),
        JSON.stringify([...carried].sort()),
        clickhouseTablesWritten ? JSON.stringify(clickhouseTablesWritten) : null,
        tablesDigest ?? null,
        indexesDigest ?? null,
      ],
    )
  }
}

function objectEvent(
  ts: number,
  kind: EventKind,
  title: string,
  detail: string | null,
  schema: string,
  name: string,
  link: string | null,
  severity: DbEvent['severity'] = 'info',
): DbEvent {
  return { ts, kind, severity, title, detail, object: `${schema}.${name}`, link }
}

// ---- server log entries (written at ingest) ----

/** Entries of one timeline kind in one minute shown one by one; past it, the minute's burst is one event. */
export const LOG_EVENTS_PER_MINUTE = 5
const LOG_TIMELINE = new Set<string>(TIMELINE_LOG_KINDS)
/**
 * How serious each timeline kind is on the timeline: as the doctor judges the same cause (an archive
 * command failing is pg_archiver_failing's critical, whatever level PostgreSQL logs it at).
 */
const LOG_EVENT_SEVERITY: Partial<Record<LogKind, DbEvent['severity']>> = {
  server_crash: 'critical',
  out_of_memory: 'critical',
  disk_full: 'critical',
  could_not_fork: 'critical',
  archive_failed: 'critical',
  recovery: 'warning',
}
const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim()

/**
 * Adds the events of the batch's log entries of the timeline kinds: `object` is `<log kind>:<pid>:<ts>`
 * for one entry (two at the same millisecond from one process are one event), `<log kind>:burst` for a
 * minute's burst (dated at the minute's start). The message is stored as text like every event's title.
 */
export function applyLogTimeline(writes: Writes, databaseId: string, batch: IngestBatch): void {
  const entries = batch.log_events?.entries.filter((e) => LOG_TIMELINE.has(e.kind))
  if (!entries || entries.length === 0) return
  const byMinute = new Map<string, typeof entries>()
  for (const e of entries) {
    const key = JSON.stringify([e.kind, Math.floor(e.ts / 60_000)])
    const list = byMinute.get(key)
    if (list) list.push(e)
    else byMinute.set(key, [e])
  }
  const events: DbEvent[] = []
  const link = dbLink(databaseId, 'logs')
  for (const list of byMinute.values()) {
    const kind = list[0]!.kind as LogKind
    const label = LOG_KINDS[kind].label
    const severity = LOG_EVENT_SEVERITY[kind] ?? 'warning'
    if (list.length <= LOG_EVENTS_PER_MINUTE) {
      for (const e of list) {
        const who = [
          e.user && `user ${e.user}`,
          e.database && `database ${e.database}`,
          e.pid !== null && `pid ${e.pid}`,
        ]
          .filter(Boolean)
          .join(', ')
        events.push({
          ts: e.ts,
          kind: 'log_event',
          severity,
          title: `${label}: ${oneLine(e.message)}`,
          detail: [who, e.detail].filter(Boolean).join('; ') || null,
          object: `${kind}:${e.pid ?? ''}:${e.ts}`,
          link,
        })
      }
    } else {
      const first = list.reduce((a, b) => (b.ts < a.ts ? b : a))
      const count = list.reduce((n, e) => n + (e.count ?? 1), 0)
      events.push({
        ts: Math.floor(first.ts / 60_000) * 60_000,
        kind: 'log_event',
        severity,
        title: `${label}: ${count} entries in one minute, the first: ${oneLine(first.message)}`,
        detail: first.detail,
        object: `${kind}:burst`,
        link,
      })
    }
  }
  // An entry's object names its kind already (`kind:burst`, say): one event per time and object.
  recordEvents(writes, databaseId, events, (e) => [e.ts, e.object])
}

// ---- reads ----

/** The server's settings (name → SHOW's text) as its latest batch that carried them gave them; null when none did. */
export async function latestSettings(driver: SqlDriver, databaseId: string): Promise<Record<string, string> | null> {
  const row = await driver.get('SELECT settings FROM event_baselines WHERE database_id = $1', [databaseId])
  return json<Record<string, string>>(row?.settings)
}

/** The organization's rule for "disconnected" (DECISIONS.md): no batch within max(3 × poll interval, 60 s). */
const disconnectedAfterMs = (db: RegisteredDatabase) => silentAfterMs(db.poll_interval_seconds)

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`)

/**
 * The database's events in the window, newest first, at most `limit`: the stored ones (derived at ingest,
 * and alert openings and resolutions), those of alerts opened before alert events were stored, plan
 * changes (a statement's plan whose hash differs from its previous plan's), and,
 * while the agent is away, the open "agent stopped sending" since its last batch.
 */
export async function listEvents(
  driver: SqlDriver,
  db: RegisteredDatabase,
  window: Window,
  limit: number,
  now: number,
): Promise<DbEvent[]> {
  const [derived, alerts, plans] = await Promise.all([
    driver.all(
      `SELECT ts, kind, object, severity, title, detail, link FROM events WHERE database_id = $1 AND ts >= $2 AND ts < $3 ORDER BY ts DESC, kind, object LIMIT $4`,
      [db.id, window.since, window.until, limit],
    ),
    // Alerts whose opening or resolution has no stored event (opened before the monitor wrote them).
    driver.all(
      `SELECT a.key, a.severity, a.title, a.detail, a.opened_at, a.last_seen_at, a.resolved_at, a.opened_stored, a.resolved_stored FROM (
         SELECT key, severity, title, detail, opened_at, last_seen_at, resolved_at,
           EXISTS (SELECT 1 FROM events e WHERE e.database_id = $1 AND e.ts = alerts.opened_at AND e.kind = 'alert_opened' AND e.object = alerts.key) AS opened_stored,
           (resolved_at IS NULL OR EXISTS (SELECT 1 FROM events e WHERE e.database_id = $1 AND e.ts = alerts.resolved_at AND e.kind = 'alert_resolved' AND e.object = alerts.key)) AS resolved_stored
         FROM alerts WHERE database_id = $1 AND ((opened_at >= $2 AND opened_at < $3) OR (resolved_at >= $2 AND resolved_at < $3))
       ) a WHERE NOT (a.opened_stored AND a.resolved_stored)
       ORDER BY a.opened_at DESC LIMIT $4`,
      [db.id, window.since, window.until, limit],
    ),
    driver.all(
      `SELECT c.query_hash, c.ts, c.plan_hash, c.total_cost, c.previous_hash, c.previous_cost, t.query_text FROM (
         SELECT p.query_hash, p.ts, p.plan_hash, p.total_cost,
           (SELECT q.plan_hash FROM explain_plans q WHERE q.database_id = p.database_id AND q.query_hash = p.query_hash AND q.ts < p.ts ORDER BY q.ts DESC LIMIT 1) AS previous_hash,
           (SELECT q.total_cost FROM explain_plans q WHERE q.database_id = p.database_id AND q.query_hash = p.query_hash AND q.ts < p.ts ORDER BY q.ts DESC LIMIT 1) AS previous_cost
         FROM explain_plans p WHERE p.database_id = $1 AND p.ts >= $2 AND p.ts < $3
       ) c LEFT JOIN query_texts t ON t.database_id = $1 AND t.query_hash = c.query_hash
       WHERE c.previous_hash IS NOT NULL AND c.previous_hash <> c.plan_hash
       ORDER BY c.ts DESC LIMIT $4`,
      [db.id, window.since, window.until, limit],
    ),
  ])
  const events: DbEvent[] = derived.map((r) => ({
    ts: Number(r.ts),
    kind: String(r.kind) as EventKind,
    severity: (r.severity ?? null) as DbEvent['severity'],
    title: String(r.title),
    detail: r.detail === null || r.detail === undefined ? null : String(r.detail),
    object: r.object ? String(r.object) : null,
    link: r.link ? String(r.link) : null,
  }))
  const inWindow = (ts: number) => ts >= window.since && ts < window.until
  // SQLite answers 0/1, PostgreSQL false/true.
  const yes = (v: unknown) => v === true || Number(v) === 1
  // Their text is the alert's latest (the text at opening was not kept then), and says so.
  for (const a of alerts) {
    const alert = { key: String(a.key), severity: String(a.severity), title: String(a.title), detail: String(a.detail) }
    const opened = Number(a.opened_at)
    const resolved = numOrNull(a.resolved_at)
    if (!yes(a.opened_stored) && inWindow(opened))
      events.push(alertEvent(db.id, 'alert_opened', alert, opened, Number(a.last_seen_at)))
    if (!yes(a.resolved_stored) && resolved !== null && inWindow(resolved))
      events.push(alertEvent(db.id, 'alert_resolved', alert, resolved, Number(a.last_seen_at)))
  }
  for (const p of plans) {
    const cost = (v: unknown) => (v === null || v === undefined ? '?' : String(Math.round(Number(v) * 100) / 100))
    const text =
      p.query_text === null || p.query_text === undefined
        ? ''
        : `: ${clip(String(p.query_text).replace(/\s+/g, ' ').trim(), 120)}`
    events.push({
      ts: Number(p.ts),
      kind: 'plan_change',
      severity: 'info',
      title: `Plan changed${text}`,
      detail: `estimated cost ${cost(p.previous_cost)} → ${cost(p.total_cost)}`,
      object: String(p.query_hash),
      link: dbLink(db.id, `queries/${encodeURIComponent(String(p.query_hash))}`),
    })
  }
  // The agent is heard from by its batches and by its reports that the database is down.
  const heard = await driver.get('SELECT heard_at FROM database_availability WHERE database_id = $1', [db.id])
  const last = lastHeardAt(db, heard ? { heard_at: Number(heard.heard_at) } : undefined)
  if (last !== null && now - last > disconnectedAfterMs(db) && inWindow(last)) {
    events.push({
      ts: last,
      kind: 'agent_disconnected',
      severity: 'warning',
      title: 'Agent stopped sending',
      detail: `no batch since ${iso(last)} (${spanText(now - last)} ago)`,
      object: null,
      link: null,
    })
  }
  const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
  const order = (a: DbEvent, b: DbEvent) =>
    b.ts - a.ts || byText(a.kind, b.kind) || byText(a.object ?? '', b.object ?? '')
  return events.sort(order).slice(0, limit)
}
