// log_events (ClickHouse): the server's error signals as log events, from its system tables.
// - system.errors: per error code (and local/remote), the increase of its counter since the previous
//   cycle, sent as one entry standing for `count` occurrences with the last message and time. The first
//   cycle takes a baseline only (the errors since the server started are history, not news). A counter
//   that went down, or an uptime that did, is a restart: the new value is what happened since. A code not
//   in the previous sample counts whole.
// - system.crash_log, when the server has it: crashes since the watermark (signal, thread, version, the
//   first frames of the trace).
// - system.text_log, when enabled: Fatal, Critical and Warning entries since the watermark, and Error
//   entries that are not exceptions (an exception's `Code: N. DB::Exception` line is already counted by
//   system.errors, and counting it twice would double the error rate). At most MAX_TEXT_ROWS a cycle;
//   the rest next cycle. Without text_log: a note, logged once.
// The optional tables are looked up in system.tables rather than queried (system-tables.ts): querying a
// missing table is itself an UNKNOWN_TABLE error that system.errors would count. ClickHouse creates
// crash_log at the first crash (and every log table at its first flush): a table that appears after the
// agent's first cycle is read from the previous cycle's time, so the crash that created it is reported.
// Messages pass the agent's secret masking.
import { LOG_SEVERITIES, type LogKind, type LogSeverity } from '../../../shared/log-kinds.ts'
import { ingestMaxItems, ingestTextLimits } from '../../../shared/ingest-limits.ts'
import type { LogCount, LogEvent, LogEventsSection } from '../../../shared/wire.ts'
import { redactSecrets } from '../../../shared/redact.ts'
import { maskSecretStatements } from '../../secret-statements.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { select } from './common.ts'
import { systemTables } from './system-tables.ts'

const NAME = 'log_events'
const TEXT_LOG_NOTE =
  'system.text_log is disabled: ClickHouse errors come from system.errors only (enable <text_log> in the server config for warnings and fatal entries)'
/** text_log rows read per cycle at most; a backlog is read over the next cycles. */
export const MAX_TEXT_ROWS = 1_000
const MAX_CRASH_ROWS = 100
const MAX_FINGERPRINT = 512

interface State {
  /** Values of system.errors by `code:remote` at the previous cycle; absent before the baseline. */
  values?: Record<string, string>
  uptime?: number
  /** crash_log watermark: timestamp_ns of the newest crash read. */
  crashNs?: string
  /** text_log watermark: event_time_microseconds (µs since the epoch) of the newest row read. */
  textUs?: string
  textLogMissing?: boolean
  /** The server's clock (µs since the epoch) at the previous cycle: where a table that appears since is read from. */
  clockUs?: string
}

interface ErrorRow {
  name: string
  code: number
  value: string
  last_error_time: number
  last_error_message: string
  last_error_format_string: string
  remote: number
}

interface CrashRow {
  ns: string
  signal: number
  thread_id: string
  query_id: string
  version: string
  trace: string[]
}

interface TextRow {
  us: string
  level: string
  message: string
  logger_name: string
  query_id: string
  format: string
}

/** ClickHouse error names that are a kind of their own; the rest are `error`. */
const KIND_OF_ERROR: Record<string, LogKind> = {
  NOT_ENOUGH_SPACE: 'disk_full',
  MEMORY_LIMIT_EXCEEDED: 'out_of_memory',
  CANNOT_ALLOCATE_MEMORY: 'out_of_memory',
  CANNOT_WRITE_TO_FILE_DESCRIPTOR: 'io_error',
  CANNOT_FSYNC: 'io_error',
  CANNOT_READ_FROM_FILE_DESCRIPTOR: 'io_error',
  CANNOT_WRITE_TO_OSTREAM: 'io_error',
  TIMEOUT_EXCEEDED: 'statement_cancelled',
  QUERY_WAS_CANCELLED: 'statement_cancelled',
  AUTHENTICATION_FAILED: 'auth_failed',
  REQUIRED_PASSWORD: 'auth_failed',
  WRONG_PASSWORD: 'auth_failed',
  TOO_MANY_SIMULTANEOUS_QUERIES: 'too_many_connections',
  CANNOT_FORK: 'could_not_fork',
}

/** An error name as the wire takes it (SQLSTATE-like): letters, digits and underscores, at most 64. */
const errorName = (name: string): string | null => (/^[A-Za-z0-9_]{1,64}$/.test(name) ? name : null)

/** ClickHouse's own `IDENTIFIED ... BY '...'` (CREATE/ALTER USER) besides the agent's statement masking. */
const IDENTIFIED_BY = /(IDENTIFIED\s+(?:WITH\s+\w+\s+)?BY\s+)'(?:[^'\\]|\\.|'')*'/gi

/** A message safe to send: secrets masked, NUL gone, cut to the wire's limit. */
export function maskMessage(text: string): string {
  const masked = maskSecretStatements(redactSecrets(text.replaceAll('\u0000', ''))).replace(IDENTIFIED_BY, "$1'***'")
  return masked.length > ingestTextLimits.logMessage ? masked.slice(0, ingestTextLimits.logMessage) : masked
}

/** What identical errors share: numbers and quoted texts replaced. */
export function fingerprintOf(text: string): string {
  return text
    .replace(/'(?:[^'\\]|\\.)*'/g, "'?'")
    .replace(/`(?:[^`\\]|\\.)*`/g, '`?`')
    .replace(/\b\d+(\.\d+)?\b/g, '?')
    .replaceAll('\u0000', '')
    .slice(0, MAX_FINGERPRINT)
}

function event(
  ts: number,
  kind: LogKind,
  severity: LogSeverity,
  sqlstate: string | null,
  message: string,
  fields: LogEvent['fields'],
  fingerprint?: string,
): LogEvent {
  const masked = maskMessage(message)
  return {
    ts,
    kind,
    severity,
    sqlstate,
    message: masked,
    fingerprint:
      fingerprint !== undefined
        ? fingerprint.replaceAll('\u0000', '').slice(0, MAX_FINGERPRINT)
        : fingerprintOf(masked),
    pid: null,
    user: null,
    database: null,
    application: null,
    client: null,
    detail: null,
    statement: null,
    query_id: null,
    fields,
  }
}

const minuteOf = (ms: number) => Math.floor(ms / 60_000) * 60_000

/** The counts section: occurrences per minute, kind and severity. */
function countsOf(entries: LogEvent[]): LogCount[] {
  const byKey = new Map<string, LogCount>()
  for (const e of entries) {
    const minute = minuteOf(e.ts)
    const key = `${minute}|${e.kind}|${e.severity}`
    const c = byKey.get(key)
    if (c) c.count += e.count ?? 1
    else byKey.set(key, { minute, kind: e.kind, severity: e.severity, count: e.count ?? 1 })
  }
  return [...byKey.values()].slice(0, ingestMaxItems.log_counts)
}

const ERRORS_SQL = `
  SELECT name, code, toString(value) AS value, toUnixTimestamp(last_error_time) AS last_error_time,
         substringUTF8(last_error_message, 1, {max:UInt32}) AS last_error_message,
         substringUTF8(last_error_format_string, 1, {max_fp:UInt32}) AS last_error_format_string, remote
  FROM system.errors`

const CRASH_SQL = `
  SELECT toString(timestamp_ns) AS ns, signal, toString(thread_id) AS thread_id, query_id, version,
         arrayMap(x -> toString(x), arraySlice(trace_full, 1, 5)) AS trace
  FROM system.crash_log
  WHERE timestamp_ns > {since:UInt64}
  ORDER BY timestamp_ns
  LIMIT {limit:UInt32}`

const TEXT_SQL = `
  SELECT toString(toUnixTimestamp64Micro(event_time_microseconds)) AS us, toString(level) AS level,
         substringUTF8(message, 1, {max:UInt32}) AS message, logger_name, query_id,
         substringUTF8(message_format_string, 1, {max_fp:UInt32}) AS format
  FROM system.text_log
  WHERE event_date >= toDate(fromUnixTimestamp64Micro({since:Int64}))
    AND event_time >= toDateTime(intDiv({since:Int64}, 1000000))
    AND event_time_microseconds > fromUnixTimestamp64Micro({since:Int64})
    AND level IN ('Fatal', 'Critical', 'Error', 'Warning')
  ORDER BY event_time_microseconds
  LIMIT {limit:UInt32}`

/** text_log's levels as the shared severities (src/shared/log-kinds.ts). */
const SEVERITY_OF_LEVEL: Record<string, LogSeverity> = {
  Fatal: 'fatal',
  Critical: 'fatal',
  Error: 'error',
  Warning: 'warning',
}

/** An exception's line in text_log: already counted by system.errors. */
const EXCEPTION = /\bCode: \d+\. DB::Exception\b/

function errorEntries(rows: ErrorRow[], previous: Record<string, string>, restarted: boolean): LogEvent[] {
  const out: LogEvent[] = []
  for (const r of rows) {
    const key = `${r.code}:${r.remote}`
    const value = BigInt(r.value)
    const before = restarted ? 0n : BigInt(previous[key] ?? '0')
    const increase = value - before
    if (increase <= 0n) continue
    const kind = KIND_OF_ERROR[r.name] ?? 'error'
    const e = event(
      r.last_error_time * 1000,
      kind,
      'error',
      errorName(r.name),
      r.last_error_message || r.name,
      { code: r.code, remote: r.remote === 1 },
      r.last_error_format_string || undefined,
    )
    e.count = Number(increase > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : increase)
    out.push(e)
  }
  return out
}

function textEntry(r: TextRow): LogEvent {
  const name = /\(([A-Z][A-Z0-9_]{2,63})\)/.exec(r.message)?.[1] ?? null
  const severity = SEVERITY_OF_LEVEL[r.level] ?? 'warning'
  const kind: LogKind = (name && KIND_OF_ERROR[name]) || (severity === 'warning' ? 'other' : 'error')
  return event(Math.floor(Number(r.us) / 1000), kind, severity, name, r.message, {}, r.format || undefined)
}

export const logEvents = registerCollector<ClickHouseContext>({
  name: NAME,
  engine: 'clickhouse',
  defaultEnabled: true,
  // For --check: what the server's optional log tables leave out (a crash_log appears at the first crash;
  // SYSTEM FLUSH LOGS creates every configured one).
  async checkNotes({ systemTables }) {
    const notes: string[] = []
    if (!systemTables.has('text_log'))
      notes.push(
        "system.text_log is missing: log_events reads errors from system.errors only, without the server's warnings and fatal messages, until <text_log> is enabled in the server config",
      )
    if (!systemTables.has('crash_log'))
      notes.push(
        'system.crash_log is missing: no crash recorded yet, or <crash_log> is not configured (it is by default); crashes are reported once it exists (SYSTEM FLUSH LOGS creates it when configured)',
      )
    return notes
  },

  async collect(ctx) {
    // A copy: the committed state changes only when this run finishes within its deadline.
    const state: State = { ...(ctx.state.get(NAME) as State | undefined) }
    ctx.state.set(NAME, state)
    const [clock] = await select<{ us: string; uptime: number }>(
      ctx,
      'SELECT toString(toUnixTimestamp64Micro(now64(6))) AS us, uptime() AS uptime',
    )
    const nowUs = clock!.us
    const uptime = Number(clock!.uptime)
    const rows = await select<ErrorRow>(ctx, ERRORS_SQL, { max: ingestTextLimits.logMessage, max_fp: MAX_FINGERPRINT })
    const tables = await systemTables(ctx)
    // Where a table that was not there at the previous cycle is read from: that cycle's time; on the agent's first cycle, now (history).
    const previousUs = state.clockUs ?? nowUs
    state.clockUs = nowUs

    const entries: LogEvent[] = []
    if (state.values !== undefined) {
      // A restart resets the counters: the uptime went down (0 is "unknown": an engine that does not tell), or a counter did.
      const restarted =
        (uptime > 0 && state.uptime !== undefined && state.uptime > 0 && uptime < state.uptime) ||
        rows.some((r) => BigInt(r.value) < BigInt(state.values![`${r.code}:${r.remote}`] ?? '0'))
      if (restarted)
        ctx.log.info('ClickHouse restarted: its error counters start again from zero', {
          database: ctx.name,
          collector: NAME,
        })
      entries.push(...errorEntries(rows, state.values, restarted))
    }
    state.values = Object.fromEntries(rows.map((r) => [`${r.code}:${r.remote}`, r.value]))
    state.uptime = uptime

    if (tables.has('crash_log')) {
      if (state.crashNs === undefined && previousUs === nowUs) state.crashNs = `${nowUs}000`
      else {
        state.crashNs ??= `${previousUs}000`
        const crashes = await select<CrashRow>(ctx, CRASH_SQL, { since: state.crashNs, limit: MAX_CRASH_ROWS })
        for (const c of crashes) {
          const ts = Math.floor(Number(BigInt(c.ns) / 1_000_000n))
          const message = `ClickHouse ${c.version} crashed: signal ${c.signal} in thread ${c.thread_id}${c.query_id ? ` (query ${c.query_id})` : ''}`
          entries.push(
            event(ts, 'server_crash', 'panic', null, message, {
              signal: c.signal,
              process: `thread ${c.thread_id}`.slice(0, 200),
              version: c.version.slice(0, 100),
              trace: c.trace.map((f) => f.slice(0, 300)),
            }),
          )
          state.crashNs = c.ns
        }
      }
    } else state.crashNs = undefined

    if (tables.has('text_log')) {
      if (state.textLogMissing)
        ctx.log.info('system.text_log is available now', { database: ctx.name, collector: NAME })
      state.textLogMissing = false
      ctx.infos?.delete(NAME)
      if (state.textUs === undefined && previousUs === nowUs) state.textUs = nowUs
      else {
        state.textUs ??= previousUs
        const texts = await select<TextRow>(ctx, TEXT_SQL, {
          since: state.textUs,
          max: ingestTextLimits.logMessage,
          max_fp: MAX_FINGERPRINT,
          limit: MAX_TEXT_ROWS,
        })
        for (const r of texts) {
          state.textUs = r.us
          if (r.level === 'Error' && EXCEPTION.test(r.message)) continue
          entries.push(textEntry(r))
        }
      }
    } else {
      if (!state.textLogMissing) ctx.log.info(TEXT_LOG_NOTE, { database: ctx.name, collector: NAME })
      state.textLogMissing = true
      state.textUs = undefined
      // What the server's configuration leaves out, not a fault: an info note, shown where it matters rather than on every page.
      ctx.infos?.set(NAME, TEXT_LOG_NOTE)
    }

    if (entries.length === 0) return {}
    // The most severe first when the batch cannot carry them all; the counts cover every one.
    const rank = (e: LogEvent) => LOG_SEVERITIES.indexOf(e.severity as LogSeverity)
    const sent = [...entries].sort((a, b) => rank(b) - rank(a) || a.ts - b.ts).slice(0, ingestMaxItems.log_events)
    const section: LogEventsSection = {
      source: 'system_tables',
      entries: sent.sort((a, b) => a.ts - b.ts),
      counts: countsOf(entries),
      dropped: entries.length - sent.length,
      bytes_read: 0,
      backlog_bytes: null,
    }
    return { log_events: section }
  },
})
