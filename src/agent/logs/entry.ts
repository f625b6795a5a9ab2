// One entry of PostgreSQL's server log as the parsers (stderr, csvlog, jsonlog) read it, before it is
// classified: the fields PostgreSQL wrote, each null when the format or the prefix does not give it.
// Also the severity labels and the log timestamps, shared by the three parsers.
import type { LogSeverity } from '../../shared/log-kinds.ts'

export interface RawLogEntry {
  /** Epoch ms; null when the line has no timestamp (a prefix without %m/%t/%n). */
  ts: number | null
  /** PostgreSQL's label: LOG, ERROR, DEBUG1 ... */
  severity: string
  pid: number | null
  user: string | null
  database: string | null
  application: string | null
  client: string | null
  backendType: string | null
  sqlstate: string | null
  message: string
  detail: string | null
  hint: string | null
  context: string | null
  /** The internal query (QUERY: line) of a PL/pgSQL statement. */
  internalQuery: string | null
  statement: string | null
  queryId: string | null
}

export function emptyEntry(severity: string, message: string): RawLogEntry {
  return {
    ts: null,
    severity,
    pid: null,
    user: null,
    database: null,
    application: null,
    client: null,
    backendType: null,
    sqlstate: null,
    message,
    detail: null,
    hint: null,
    context: null,
    internalQuery: null,
    statement: null,
    queryId: null,
  }
}

/** The severities PostgreSQL writes (English, lc_messages=C), as the wire names them. */
export const SEVERITY_LABELS: Readonly<Record<string, LogSeverity>> = {
  DEBUG1: 'debug',
  DEBUG2: 'debug',
  DEBUG3: 'debug',
  DEBUG4: 'debug',
  DEBUG5: 'debug',
  DEBUG: 'debug',
  INFO: 'info',
  NOTICE: 'notice',
  WARNING: 'warning',
  LOG: 'log',
  ERROR: 'error',
  FATAL: 'fatal',
  PANIC: 'panic',
}

export function severityOf(label: string): LogSeverity {
  return SEVERITY_LABELS[label] ?? 'log'
}

const STAMP = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?(?: ([A-Za-z0-9+\-:/_]+))?$/

/**
 * Epoch ms of a log timestamp (`2026-12-07 03:58:46.566 UTC`), written in log_timezone with its
 * abbreviation. UTC/GMT and numeric zones (+03, -0530) are exact; any other abbreviation (CEST) takes
 * `offsetMs`, the server's log_timezone offset now (off by the DST change for entries across one).
 */
export function parseLogTime(text: string, offsetMs: number): number | null {
  const m = STAMP.exec(text)
  if (!m) return null
  const base = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, m[7] ? Math.floor(+`0.${m[7]}` * 1000) : 0)
  const zone = m[8]
  let offset = offsetMs
  if (zone === undefined || zone === 'UTC' || zone === 'GMT' || zone === 'UCT' || zone === 'Z') offset = zone === undefined ? offsetMs : 0
  else {
    const numeric = /^([+-])(\d\d):?(\d\d)?$/.exec(zone)
    if (numeric) offset = (numeric[1] === '-' ? -1 : 1) * (+numeric[2]! * 60 + +(numeric[3] ?? 0)) * 60_000
  }
  return base - offset
}
