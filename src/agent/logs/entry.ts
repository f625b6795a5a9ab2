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
  /** Not a line PostgreSQL formatted (no prefix, a broken one, unparsable JSON): never classified by its text. */
  foreign?: true
}

/** An entry of a line PostgreSQL did not format (see RawLogEntry.foreign). */
export function foreignEntry(message: string): RawLogEntry {
  const entry = emptyEntry('LOG', message)
  entry.foreign = true
  return entry
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
const ZONE = /^[A-Za-z0-9+\-:/_]+$/

/** The offset from UTC of a zone as logged, or undefined when the name alone does not tell it. */
function zoneOffset(zone: string): number | undefined {
  if (zone === 'UTC' || zone === 'GMT' || zone === 'UCT' || zone === 'Z') return 0
  const numeric = /^([+-])(\d\d):?(\d\d)?$/.exec(zone)
  return numeric ? (numeric[1] === '-' ? -1 : 1) * (+numeric[2]! * 60 + +(numeric[3] ?? 0)) * 60_000 : undefined
}

/** The value of the digits text[from, from + count), or -1 when one is not a digit. */
function digits(text: string, from: number, count: number): number {
  let v = 0
  for (let i = from; i < from + count; i++) {
    const d = text.charCodeAt(i) - 48
    if (d < 0 || d > 9) return -1
    v = v * 10 + d
  }
  return v
}

// Entries come in time order: consecutive ones share their day and zone.
let lastDay = -1
let lastDayMs = 0
let lastZone = ''
let lastZoneOffset: number | undefined

/**
 * Epoch ms of a log timestamp (`2026-12-07 03:58:46.566 UTC`), written in log_timezone with its
 * abbreviation. UTC/GMT and numeric zones (+03, -0530) are exact; any other abbreviation (CEST) takes
 * `offsetMs`, the server's log_timezone offset now (off by the DST change for entries across one).
 * Read by hand, digit by digit (every entry has one); the regular expression only checks the rare shapes.
 */
export function parseLogTime(text: string, offsetMs: number): number | null {
  return parseLogTimeAt(text, 0, text.length, offsetMs)
}

/** parseLogTime of text[from, to), read in place: no string is made unless the zone changed. */
export function parseLogTimeAt(text: string, from: number, to: number, offsetMs: number): number | null {
  const year = digits(text, from, 4)
  const month = digits(text, from + 5, 2)
  const dayOfMonth = digits(text, from + 8, 2)
  const hour = digits(text, from + 11, 2)
  const minute = digits(text, from + 14, 2)
  const second = digits(text, from + 17, 2)
  const at = (k: number) => text.charCodeAt(from + k)
  // 45 '-', 32 ' ', 58 ':', 46 '.'
  if (
    to - from < 19 ||
    year < 0 ||
    month < 0 ||
    dayOfMonth < 0 ||
    hour < 0 ||
    minute < 0 ||
    second < 0 ||
    at(4) !== 45 ||
    at(7) !== 45 ||
    at(10) !== 32 ||
    at(13) !== 58 ||
    at(16) !== 58
  ) {
    return null
  }
  let i = from + 19
  let millis = 0
  if (i < to && text.charCodeAt(i) === 46) {
    let k = i + 1
    while (k < to && k < i + 7 && text.charCodeAt(k) >= 48 && text.charCodeAt(k) <= 57) k++
    if (k === i + 1) return null
    // Milliseconds: the first three digits of the fraction (.5 is 500, .123456 is 123).
    for (let f = i + 1; f < i + 4; f++) millis = millis * 10 + (f < k ? text.charCodeAt(f) - 48 : 0)
    i = k
  }
  let offset = offsetMs
  if (i < to) {
    if (text.charCodeAt(i) !== 32 || i + 1 === to) return null
    if (to - i - 1 !== lastZone.length || !text.startsWith(lastZone, i + 1)) {
      const zone = text.slice(i + 1, to)
      if (!ZONE.test(zone)) return null
      lastZone = zone
      lastZoneOffset = zoneOffset(zone)
    }
    if (lastZoneOffset !== undefined) offset = lastZoneOffset
  }
  const day = year * 10_000 + month * 100 + dayOfMonth
  if (day !== lastDay) {
    lastDayMs = Date.UTC(year, month - 1, dayOfMonth)
    lastDay = day
  }
  return lastDayMs + ((hour * 60 + minute) * 60 + second) * 1000 + millis - offset
}

/** The same as parseLogTime, by one regular expression: the reference the tests hold the fast one to. */
export function parseLogTimeByRegex(text: string, offsetMs: number): number | null {
  const m = STAMP.exec(text)
  if (!m) return null
  const base = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, m[7] ? +m[7].padEnd(3, '0').slice(0, 3) : 0)
  const zone = m[8]
  return base - (zone === undefined ? offsetMs : (zoneOffset(zone) ?? offsetMs))
}

/**
 * A copy of a value read from a log slice that shares no memory with the slice. The parsers' strings are
 * views into the slice's decoded text (a substring keeps its whole parent alive), so whatever outlives a
 * slice — entries kept for sending, the classifier's memory — is copied first.
 */
export function detached<T>(value: T): T {
  return value === null || value === undefined ? value : JSON.parse(JSON.stringify(value))
}
