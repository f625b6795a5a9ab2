// Turns a slice of a PostgreSQL log file (bytes, as read) into entries, and says how many bytes of it
// were fully used: an entry whose end is not in the slice yet (a file cut mid-entry) is left for the
// next read, which starts at that entry. Three formats:
// - stderr: lines of log_line_prefix + `LABEL:  text`; the secondary parts of a message (DETAIL, HINT,
//   QUERY, CONTEXT, STATEMENT) follow on their own prefixed lines, and every newline inside a part is
//   followed by a TAB (PostgreSQL's append_with_tabs), so a line a user wrote through RAISE LOG can never
//   start a line of its own. A secondary line joins the entry before it only when the pid agrees.
// - csvlog: one record per entry, fields quoted with "" escapes, newlines inside quotes.
// - jsonlog (PostgreSQL 15+): one JSON object per line.
// Lines are split on the byte 0x0A; a line is decoded by itself (stderr: matched in place in the slice
// decoded once, or cut from it), so invalid UTF-8 only costs replacement characters and never shifts an
// offset; parts are kept to PART_CHARS (1 MB lines). Entries are handed over one by one as they are parsed
// (parseEach), each with its end offset, so a reader may stop after any.
import { isAscii } from 'node:buffer'
import { type RawLogEntry, emptyEntry, foreignEntry, parseLogTime, parseLogTimeAt, SEVERITY_LABELS } from './entry.ts'
import { PREFIX_PROBE_CHARS, type PrefixField, type PrefixParser } from './prefix.ts'

export type LogFormat = 'stderr' | 'csvlog' | 'jsonlog'

/** Longest text kept of one part of an entry while it is assembled (the wire's caps are smaller). */
export const PART_CHARS = 32_768
/**
 * A stderr prefix broken by newlines inside its fields is joined over at most JOIN_LINES lines, of at most
 * JOIN_CHARS before the one with the label: %u, %d and %a are at most 63 bytes each (NAMEDATALEN), so 189
 * newlines and a few hundred characters are the most PostgreSQL can write there.
 */
export const JOIN_LINES = 256
export const JOIN_CHARS = 2_048

export interface ParseOptions {
  format: LogFormat
  /** stderr only: the parser built from the server's log_line_prefix. */
  prefix?: PrefixParser
  /** log_timezone's offset from UTC now, for zone abbreviations other than UTC and numeric ones. */
  tzOffsetMs: number
  /**
   * The last entry of the slice is complete once its lines end (stderr: no more DETAIL/STATEMENT lines
   * will follow), because the file has been quiet for a while or will not grow.
   */
  settled: boolean
  /** The file will not grow (rotated away, or the slice is the rest of a full-size read): a last line without newline is read too. */
  closed: boolean
}

/** Takes one entry and where it ends in the slice; false refuses it, and the parse stops before it. */
export type ParsedEntryHandler = (entry: RawLogEntry, end: number) => boolean | undefined

export interface ParsedChunk {
  entries: RawLogEntry[]
  /** Bytes from the slice's start that are fully read (the next read starts there). */
  consumed: number
  /** Where each entry ends: reading again from ends[i] gives the entries after entries[i]. */
  ends: number[]
}

/** A csvlog record's start: its log_time (`2026-12-07 13:11:49.114 UTC,`). */
const CSV_RECORD_START = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [A-Za-z0-9+:_/-]+,/
/** A jsonlog record's start. */
const JSON_RECORD_START = '{"timestamp":"'

function cap(text: string): string {
  return text.length > PART_CHARS ? text.slice(0, PART_CHARS) : text
}

function append(existing: string | null, more: string): string {
  if (existing === null) return cap(more)
  if (existing.length >= PART_CHARS) return existing
  return cap(`${existing}\n${more}`)
}

/**
 * Calls `each(start, end, next)` for every line of `buf`; a last line without newline only when `closed`.
 * `each` answering false stops it.
 */
function forEachLine(
  buf: Buffer,
  closed: boolean,
  each: (start: number, end: number, next: number) => boolean | undefined,
): void {
  let pos = 0
  while (pos < buf.length) {
    const nl = buf.indexOf(10, pos)
    if (nl < 0) {
      if (closed) each(pos, buf.length, buf.length)
      return
    }
    if (each(pos, nl > pos && buf[nl - 1] === 13 ? nl - 1 : nl, nl + 1) === false) return
    pos = nl + 1
  }
}

const SECTIONS: Record<string, 'detail' | 'hint' | 'internalQuery' | 'context' | 'statement' | 'location'> = {
  DETAIL: 'detail',
  HINT: 'hint',
  QUERY: 'internalQuery',
  CONTEXT: 'context',
  STATEMENT: 'statement',
  LOCATION: 'location',
}

type Part = 'message' | 'detail' | 'hint' | 'internalQuery' | 'context' | 'statement' | 'location'

/** The bytes 0x80 to 0xFF in a slice decoded as latin1: where a line must be decoded as UTF-8 instead. */
const HIGH_BYTE = /[\x80-\xff]/g

/** Where an entry's part is written as newline + TAB + more: the TAB goes, and empty lines between are skipped. */
const CONTINUATION = /\r?\n(?:\r?\n)*\t/g

/** The label that ends at `at` (the regex matched one there; none is a suffix of another, so one fits). */
function labelEndingAt(text: string, at: number): string {
  for (const label of LABEL_LIST) if (text.startsWith(label, at - label.length)) return label
  return 'LOG'
}
const LABEL_LIST = [
  'LOG',
  'DETAIL',
  'STATEMENT',
  'ERROR',
  'CONTEXT',
  'HINT',
  'QUERY',
  'WARNING',
  'FATAL',
  'NOTICE',
  'INFO',
  'LOCATION',
  'PANIC',
  'DEBUG1',
  'DEBUG2',
  'DEBUG3',
  'DEBUG4',
  'DEBUG5',
]

/**
 * stderr. The slice is decoded once, as latin1 (one character per byte, so string indexes are byte offsets).
 * A line of ASCII alone, no longer than the prefix probe, is matched in place (the sticky regex at the
 * line's start: no string is cut for it), and the part of an entry it starts (its message, a DETAIL...) is
 * kept as offsets while its continuation lines are ASCII too: the part's string is made once, when the
 * part ends. Any other line is cut out (decoded again from the bytes as UTF-8 when it holds a byte past
 * ASCII, so that invalid sequences become replacement characters) and matched by itself, as the parts it
 * adds to. Either way the entries' strings are views into the slice's text: whoever keeps one past the
 * slice copies it (entry.ts `detached`).
 */
function parseStderr(buf: Buffer, opts: ParseOptions, onEntry: ParsedEntryHandler): number {
  const parser = opts.prefix
  if (!parser) throw new Error('stderr logs need the log_line_prefix parser')
  const { regex, sticky, fields, labelGroup, head } = parser
  const pidGroup = fields.indexOf('pid') + 1
  const text = buf.toString('latin1')
  const n = text.length
  // Index of the next byte past ASCII at or after the current line (n when none is left).
  let high = isAscii(buf) ? n : -1
  const asciiUpTo = (start: number, end: number): boolean => {
    if (high < start) {
      HIGH_BYTE.lastIndex = start
      high = HIGH_BYTE.test(text) ? HIGH_BYTE.lastIndex - 1 : n
    }
    return high >= end
  }
  const lineText = (start: number, end: number): string =>
    asciiUpTo(start, end) ? text.slice(start, end) : buf.toString('utf8', start, end)
  let consumed = 0
  let stop = false
  // The entry being assembled, the part its next continuation line belongs to, and where its last line ends.
  let entry: RawLogEntry | undefined
  let part: Part = 'message'
  let entryEnd = 0
  // The part being read, as offsets while all its lines are ASCII: text[spanStart, spanEnd), continuation
  // lines still in it (spanLines > 1). spanStart < 0: nothing pending (the part is in the entry already).
  let spanStart = -1
  let spanEnd = 0
  let spanLines = 0
  /** The pending part's text into the entry (a part's text is capped; a section's joins the one before). */
  const closePart = () => {
    if (spanStart < 0 || !entry) return
    let value = text.slice(spanStart, spanLines > 1 ? spanEnd : Math.min(spanEnd, spanStart + PART_CHARS))
    if (spanLines > 1) value = value.replace(CONTINUATION, '\n')
    spanStart = -1
    if (part === 'message') entry.message = cap(value)
    else if (part !== 'location') entry[part] = append(entry[part], value)
  }
  const openPart = (from: number, end: number) => {
    spanStart = from
    spanEnd = end
    spanLines = 1
  }
  const finish = () => {
    if (!entry) return
    closePart()
    if (onEntry(entry, entryEnd) === false) {
      stop = true
      return
    }
    consumed = entryEnd
    entry = undefined
  }
  /** An entry read whole from its own line(s), ending at `end`: handed over at once. */
  const takeWhole = (whole: RawLogEntry, end: number) => {
    entry = whole
    spanStart = -1
    part = 'message'
    entryEnd = end
    finish()
  }
  /**
   * The broken prefix `first` (its line ends before `from`) joined with the lines after it until the
   * prefix and its label match, within what PostgreSQL can write (names of at most 63 bytes: JOIN_LINES
   * lines, JOIN_CHARS before the last). `match` is null when the label never came within them (all the
   * lines are then one entry); undefined when the slice ends first and more may come.
   */
  const joinPrefix = (
    first: string,
    from: number,
  ): { line: string; match: RegExpExecArray | null; next: number } | undefined => {
    let joined = first
    let at = from
    for (let lines = 1; lines < JOIN_LINES && joined.length <= JOIN_CHARS; lines++) {
      const nl = text.indexOf('\n', at)
      if (nl < 0 && !opts.closed) {
        if (opts.settled) break
        return undefined
      }
      if (at >= n) break
      const lineStart = at
      at = nl < 0 ? n : nl + 1
      const lineStop = nl < 0 ? n : nl > lineStart && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl
      joined = `${joined}\n${lineText(lineStart, Math.min(lineStop, lineStart + PART_CHARS * 4))}`
      const match = regex.exec(
        joined.length > JOIN_CHARS + PREFIX_PROBE_CHARS ? joined.slice(0, JOIN_CHARS + PREFIX_PROBE_CHARS) : joined,
      )
      if (match) return { line: joined, match, next: at }
    }
    return { line: joined, match: null, next: at }
  }
  let pos = 0
  while (pos < n) {
    const nl = text.indexOf('\n', pos)
    if (nl < 0 && !opts.closed) break
    const start = pos
    const next = nl < 0 ? n : nl + 1
    const end = nl < 0 ? n : nl > start && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl
    pos = next
    // A continuation line: a newline inside a part, written as newline + TAB.
    if (text.charCodeAt(start) === 9) {
      if (entry) {
        // Kept as offsets while the part is short (at most two parts' length: a longer one is joined now
        // and gains its next lines as below, each cut to what a part may take).
        if (spanStart >= 0 && end - spanStart <= PART_CHARS * 2 && asciiUpTo(start, end)) {
          spanEnd = end
          spanLines++
        } else {
          closePart()
          const more = lineText(start + 1, Math.min(end, start + 1 + PART_CHARS * 4))
          if (part === 'message') {
            if (entry.message.length < PART_CHARS) entry.message = cap(`${entry.message}\n${more}`)
          } else if (part !== 'location') {
            const value = entry[part]
            if (value === null || value.length < PART_CHARS) entry[part] = cap(`${value ?? ''}\n${more}`)
          }
        }
        entryEnd = next
      } else {
        // A continuation whose entry was read before (cannot happen when slices end at entries): counted as its own.
        entry = foreignEntry(cap(lineText(start + 1, Math.min(end, start + 1 + PART_CHARS * 4))))
        entryEnd = next
        finish()
        if (stop) break
      }
      continue
    }
    if (start === end) {
      if (entry) entryEnd = next
      else consumed = next
      continue
    }
    // In place: an ASCII line within the probe.
    if (sticky !== null && end - start <= PREFIX_PROBE_CHARS && asciiUpTo(start, end)) {
      sticky.lastIndex = start
      const m = sticky.exec(text)
      if (m !== null) {
        const matchEnd = sticky.lastIndex
        const label = labelEndingAt(text, matchEnd - 3)
        const section = SECTIONS[label]
        if (section) {
          const pid = pidGroup > 0 ? pidOf(m[pidGroup]) : null
          if (entry && (pid === null || entry.pid === null || entry.pid === pid)) {
            closePart()
            part = section
            if (section !== 'location') openPart(matchEnd, end)
            entryEnd = next
            continue
          }
          // A secondary line without its entry: kept as an entry of its own, its label in the text.
          finish()
          if (stop) break
          entry = emptyEntry('LOG', '')
          openPart(matchEnd - 3 - label.length, end)
        } else {
          finish()
          if (stop) break
          entry = emptyEntry(label, '')
          openPart(matchEnd, end)
        }
        fillFromPrefix(entry, m, fields, opts.tzOffsetMs, parser.tsFirst ? text : undefined, start)
        part = 'message'
        entryEnd = next
        continue
      }
    }
    let line = lineText(start, Math.min(end, start + PART_CHARS * 4))
    let m = regex.exec(line.length > PREFIX_PROBE_CHARS ? line.slice(0, PREFIX_PROBE_CHARS) : line)
    let lineEnd = next
    if (!m && head !== null && head.test(line)) {
      // A prefix with no label where it ends: a newline inside a field (%u, %d of a client that never
      // logged in). The lines after it are the rest of that prefix, up to the one with the label: joined,
      // so that none of them, however it looks, is an entry of its own.
      const joined = joinPrefix(line, pos)
      if (joined === undefined) {
        // The rest is not written yet: read again from this line.
        pos = start
        break
      }
      line = joined.line
      m = joined.match
      lineEnd = joined.next
      pos = joined.next
    }
    if (!m && CSV_RECORD_START.test(line)) {
      // A csvlog record in the stderr file: while log_destination turns to csvlog, the logging collector
      // writes the records it has before the .csv file is open to the stderr file (jsonlog likewise,
      // below). Read as the record it is, its quoted newlines included.
      let quotes = 0
      let at = start
      let recordEnd = -1
      while (at < n) {
        const lineNl = text.indexOf('\n', at)
        if (lineNl < 0 && !opts.closed && !opts.settled) break
        const lineStop = lineNl < 0 ? n : lineNl > at && text.charCodeAt(lineNl - 1) === 13 ? lineNl - 1 : lineNl
        for (let i = text.indexOf('"', at); i >= 0 && i < lineStop; i = text.indexOf('"', i + 1)) quotes++
        at = lineNl < 0 ? n : lineNl + 1
        if (quotes % 2 === 0) {
          recordEnd = lineStop
          break
        }
      }
      // The entry before it is whole: a record of its own began.
      finish()
      if (stop) break
      if (recordEnd < 0) {
        // The rest of the record is not written yet: read again from this line.
        pos = start
        break
      }
      pos = at
      takeWhole(csvRecordEntry(buf, start, recordEnd, opts.tzOffsetMs), at)
      if (stop) break
      continue
    }
    if (!m && line.startsWith(JSON_RECORD_START)) {
      const json = jsonEntry(line, opts.tzOffsetMs)
      if (json) {
        finish()
        if (stop) break
        takeWhole(json, lineEnd)
        if (stop) break
        continue
      }
    }
    if (!m) {
      // Not a log line of PostgreSQL's own (a library writing to stderr, a line from before the prefix was
      // set), or a broken prefix whose label never came: taken as it is, with no prefix fields.
      finish()
      if (stop) break
      entry = foreignEntry(cap(line))
      part = 'message'
      entryEnd = lineEnd
      continue
    }
    const label = m[labelGroup]!
    const rest = line.slice(m[0].length)
    const section = SECTIONS[label]
    if (section) {
      const pid = pidGroup > 0 ? pidOf(m[pidGroup]) : null
      if (entry && (pid === null || entry.pid === null || entry.pid === pid)) {
        closePart()
        part = section
        if (section !== 'location') entry[section] = append(entry[section], rest)
        entryEnd = lineEnd
        continue
      }
      // A secondary line without its entry: kept as an entry of its own, its label in the text.
      finish()
      if (stop) break
      entry = emptyEntry('LOG', cap(`${label}:  ${rest}`))
    } else {
      finish()
      if (stop) break
      entry = emptyEntry(label, cap(rest))
    }
    fillFromPrefix(entry, m, fields, opts.tzOffsetMs)
    part = 'message'
    entryEnd = lineEnd
  }
  if (entry && opts.settled && !stop) {
    // The slice ended at a line's end (or the file will not grow): the entry is whole.
    finish()
  }
  return consumed
}

function pidOf(v: string | undefined): number | null {
  return v === undefined || v === '' ? null : Number(v)
}

/**
 * The prefix's values into the entry (a field left empty is null). `text`: the slice's text when the match
 * starts there at `at` with the timestamp (read in place, no string made for it).
 */
function fillFromPrefix(
  entry: RawLogEntry,
  m: RegExpExecArray,
  fields: PrefixField[],
  tzOffsetMs: number,
  text?: string,
  at = 0,
): void {
  for (let i = 0; i < fields.length; i++) {
    const raw = m[i + 1]
    if (raw === undefined || raw === '') continue
    if (i === 0 && text !== undefined) {
      // The timestamp, first in the prefix: its pattern holds no space at either end.
      const ts = parseLogTimeAt(text, at, at + raw.length, tzOffsetMs)
      if (ts !== null) entry.ts = ts
      continue
    }
    // Trimmed after the test, as a padded field is: a value of spaces alone is '' (not null), so that an
    // entry of a user whose name is blank never passes for a server process's.
    const v = raw.trim()
    switch (fields[i]) {
      case 'ts': {
        const ts = parseLogTime(v, tzOffsetMs)
        if (ts !== null) entry.ts = ts
        break
      }
      case 'epoch':
        if (entry.ts === null) entry.ts = Math.round(Number(v) * 1000)
        break
      case 'pid':
        entry.pid = Number(v)
        break
      case 'user':
        entry.user = v
        break
      case 'database':
        entry.database = v
        break
      case 'application':
        entry.application = v
        break
      case 'host':
        if (entry.client === null) entry.client = v
        break
      case 'hostport':
        entry.client = v
        break
      case 'sqlstate':
        entry.sqlstate = v
        break
      case 'backendType':
        entry.backendType = v
        break
      case 'queryId':
        if (v !== '0') entry.queryId = v
        break
    }
  }
}

/** The fields of one CSV record (RFC 4180 quoting as PostgreSQL writes it). */
export function csvFields(record: string): string[] {
  const out: string[] = []
  let i = 0
  const n = record.length
  for (;;) {
    if (record[i] === '"') {
      let value = ''
      i++
      for (;;) {
        const q = record.indexOf('"', i)
        if (q < 0) {
          value += record.slice(i)
          i = n
          break
        }
        value += record.slice(i, q)
        if (record[q + 1] === '"') {
          value += '"'
          i = q + 2
        } else {
          i = q + 1
          break
        }
      }
      out.push(value)
    } else {
      const comma = record.indexOf(',', i)
      out.push(record.slice(i, comma < 0 ? n : comma))
      i = comma < 0 ? n : comma
    }
    if (i >= n || record[i] !== ',') break
    i++
    if (i === n) {
      out.push('')
      break
    }
  }
  return out
}

const nonEmpty = (v: string | undefined): string | null => (v === undefined || v === '' ? null : cap(v))

function csvEntry(f: string[], tzOffsetMs: number): RawLogEntry {
  // Columns (13): log_time, user_name, database_name, process_id, connection_from, session_id,
  // session_line_num, command_tag, session_start_time, virtual_transaction_id, transaction_id,
  // error_severity, sql_state_code, message, detail, hint, internal_query, internal_query_pos, context,
  // query, query_pos, location, application_name, backend_type; 14+ adds leader_pid and query_id.
  const entry = emptyEntry(f[11] || 'LOG', cap(f[13] ?? ''))
  entry.ts = parseLogTime(f[0] ?? '', tzOffsetMs)
  entry.user = nonEmpty(f[1])
  entry.database = nonEmpty(f[2])
  entry.pid = f[3] && /^\d+$/.test(f[3]) ? Number(f[3]) : null
  entry.client = nonEmpty(f[4])
  entry.sqlstate = f[12] && /^[0-9A-Z]{5}$/.test(f[12]) ? f[12] : null
  entry.detail = nonEmpty(f[14])
  entry.hint = nonEmpty(f[15])
  entry.internalQuery = nonEmpty(f[16])
  entry.context = nonEmpty(f[18])
  entry.statement = nonEmpty(f[19])
  entry.application = nonEmpty(f[22])
  entry.backendType = nonEmpty(f[23])
  const q = f[25]
  entry.queryId = q && /^-?\d+$/.test(q) && q !== '0' ? q : null
  return entry
}

/**
 * The csvlog record in buf[start, end) (its last line's CR left out) as an entry: decoded once, a CR before
 * a newline inside the record going with it.
 */
function csvRecordEntry(buf: Buffer, start: number, end: number, tzOffsetMs: number): RawLogEntry {
  const decoded = buf.toString('utf8', start, end)
  return csvEntry(csvFields(decoded.includes('\r\n') ? decoded.replaceAll('\r\n', '\n') : decoded), tzOffsetMs)
}

/**
 * csvlog. A record's lines are counted for quotes in the bytes (a quote byte is never part of a UTF-8
 * sequence) and decoded once, when the record is whole: its lines joined by one newline each.
 */
function parseCsv(buf: Buffer, opts: ParseOptions, onEntry: ParsedEntryHandler): number {
  let consumed = 0
  let recordStart = -1
  let quotes = 0
  forEachLine(buf, opts.closed, (start, end, next) => {
    if (recordStart < 0) recordStart = start
    for (let i = buf.indexOf(34, start); i >= 0 && i < end; i = buf.indexOf(34, i + 1)) quotes++
    if (quotes % 2 !== 0 && next < buf.length) return
    if (quotes % 2 !== 0 && !opts.closed) return
    const entry = csvRecordEntry(buf, recordStart, end, opts.tzOffsetMs)
    recordStart = -1
    quotes = 0
    if (onEntry(entry, next) === false) return false
    consumed = next
  })
  return consumed
}

const str = (v: unknown): string | null =>
  typeof v === 'string' && v !== '' ? cap(v) : typeof v === 'number' ? String(v) : null

function parseJson(buf: Buffer, opts: ParseOptions, onEntry: ParsedEntryHandler): number {
  let consumed = 0
  let stopped = false
  const push = (entry: RawLogEntry, end: number) => {
    if (onEntry(entry, end) === false) stopped = true
  }
  forEachLine(buf, opts.closed, (start, end, next) => {
    if (start === end) {
      consumed = next
      return
    }
    const line = buf.toString('utf8', start, end)
    const entry = jsonEntry(line, opts.tzOffsetMs)
    if (entry === undefined) {
      push(foreignEntry(cap(line)), next)
      if (stopped) return false
      consumed = next
      return
    }
    push(entry, next)
    if (stopped) return false
    consumed = next
  })
  return consumed
}

/** A jsonlog record (one line) as an entry; undefined when the line is no JSON object. */
function jsonEntry(line: string, tzOffsetMs: number): RawLogEntry | undefined {
  let o: Record<string, unknown>
  try {
    o = JSON.parse(line)
    if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new Error('not an object')
  } catch {
    return undefined
  }
  const severity = typeof o.error_severity === 'string' && SEVERITY_LABELS[o.error_severity] ? o.error_severity : 'LOG'
  const entry = emptyEntry(severity, str(o.message) ?? '')
  entry.ts = typeof o.timestamp === 'string' ? parseLogTime(o.timestamp, tzOffsetMs) : null
  entry.user = str(o.user)
  entry.database = str(o.dbname)
  entry.pid = typeof o.pid === 'number' && Number.isInteger(o.pid) && o.pid >= 0 ? o.pid : null
  const host = str(o.remote_host)
  entry.client = host === null ? null : typeof o.remote_port === 'number' ? `${host}:${o.remote_port}` : host
  entry.sqlstate = typeof o.state_code === 'string' && /^[0-9A-Z]{5}$/.test(o.state_code) ? o.state_code : null
  entry.detail = str(o.detail)
  entry.hint = str(o.hint)
  entry.internalQuery = str(o.internal_query)
  entry.context = str(o.context)
  entry.statement = str(o.statement)
  entry.application = str(o.application_name)
  entry.backendType = str(o.backend_type)
  // query_id is a 64-bit integer: JSON.parse rounds it, so it is read from the text.
  const q = /"query_id":(-?\d+)/.exec(line)?.[1]
  entry.queryId = q && q !== '0' ? q : null
  return entry
}

/**
 * Hands each whole entry of the slice to `onEntry` as it is parsed, with where it ends; answers how many
 * bytes of the slice are fully read (meaningless once `onEntry` refused one: the read stops before it).
 */
export function parseEach(buf: Buffer, opts: ParseOptions, onEntry: ParsedEntryHandler): number {
  if (opts.format === 'csvlog') return parseCsv(buf, opts, onEntry)
  if (opts.format === 'jsonlog') return parseJson(buf, opts, onEntry)
  return parseStderr(buf, opts, onEntry)
}

/** The slice's entries in an array (parseEach, collected). */
export function parseChunk(buf: Buffer, opts: ParseOptions): ParsedChunk {
  const entries: RawLogEntry[] = []
  const ends: number[] = []
  const consumed = parseEach(buf, opts, (entry, end) => {
    entries.push(entry)
    ends.push(end)
  })
  return { entries, consumed, ends }
}

/** The format of a log file, from its name as PostgreSQL gives it (csvlog: .csv, jsonlog: .json). */
export function formatOfFile(name: string): LogFormat {
  if (name.endsWith('.csv')) return 'csvlog'
  if (name.endsWith('.json')) return 'jsonlog'
  return 'stderr'
}
