// Turns a slice of a PostgreSQL log file (bytes, as read) into entries, and says how many bytes of it
// were fully used: an entry whose end is not in the slice yet (a file cut mid-entry) is left for the
// next read, which starts at that entry. Three formats:
// - stderr: lines of log_line_prefix + `LABEL:  text`; the secondary parts of a message (DETAIL, HINT,
//   QUERY, CONTEXT, STATEMENT) follow on their own prefixed lines, and every newline inside a part is
//   followed by a TAB (PostgreSQL's append_with_tabs), so a line a user wrote through RAISE LOG can never
//   start a line of its own. A secondary line joins the entry before it only when the pid agrees.
// - csvlog: one record per entry, fields quoted with "" escapes, newlines inside quotes.
// - jsonlog (PostgreSQL 15+): one JSON object per line.
// Lines are split on the byte 0x0A and decoded one by one, so invalid UTF-8 only costs replacement
// characters and never shifts an offset; parts are kept to PART_CHARS while assembled (1 MB lines).
import { type RawLogEntry, emptyEntry, parseLogTime, SEVERITY_LABELS } from './entry.ts'
import { PREFIX_PROBE_CHARS, type PrefixParser, prefixValues } from './prefix.ts'

export type LogFormat = 'stderr' | 'csvlog' | 'jsonlog'

/** Longest text kept of one part of an entry while it is assembled (the wire's caps are smaller). */
export const PART_CHARS = 32_768

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

export interface ParsedChunk {
  entries: RawLogEntry[]
  /** Bytes from the slice's start that are fully read (the next read starts there). */
  consumed: number
}

function cap(text: string): string {
  return text.length > PART_CHARS ? text.slice(0, PART_CHARS) : text
}

function append(existing: string | null, more: string): string {
  if (existing === null) return cap(more)
  if (existing.length >= PART_CHARS) return existing
  return cap(`${existing}\n${more}`)
}

/** Calls `each(start, end, next)` for every line of `buf`; a last line without newline only when `closed`. */
function forEachLine(buf: Buffer, closed: boolean, each: (start: number, end: number, next: number) => void): void {
  let pos = 0
  while (pos < buf.length) {
    const nl = buf.indexOf(10, pos)
    if (nl < 0) {
      if (closed) each(pos, buf.length, buf.length)
      return
    }
    each(pos, nl > pos && buf[nl - 1] === 13 ? nl - 1 : nl, nl + 1)
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

function parseStderr(buf: Buffer, opts: ParseOptions): ParsedChunk {
  const parser = opts.prefix
  if (!parser) throw new Error('stderr logs need the log_line_prefix parser')
  const entries: RawLogEntry[] = []
  let consumed = 0
  let current: { entry: RawLogEntry; part: Part; end: number } | undefined
  const finish = () => {
    if (!current) return
    entries.push(current.entry)
    consumed = current.end
    current = undefined
  }
  const addTo = (part: Part, text: string) => {
    if (!current || part === 'location') return
    const e = current.entry
    if (part === 'message') e.message = append(e.message, text)
    else e[part] = append(e[part], text)
  }
  forEachLine(buf, opts.closed, (start, end, next) => {
    // A continuation line: a newline inside a part, written as newline + TAB.
    if (buf[start] === 9) {
      if (current) {
        const e = current.entry
        const part = current.part
        const text = buf.toString('utf8', start + 1, Math.min(end, start + 1 + PART_CHARS * 4))
        if (part === 'message') {
          if (e.message.length < PART_CHARS) e.message = cap(`${e.message}\n${text}`)
        } else if (part !== 'location') {
          const value = e[part]
          if (value === null || value.length < PART_CHARS) e[part] = cap(`${value ?? ''}\n${text}`)
        }
        current.end = next
      } else {
        // A continuation whose entry was read before (cannot happen when slices end at entries): counted as its own.
        const orphan = emptyEntry('LOG', cap(buf.toString('utf8', start + 1, Math.min(end, start + 1 + PART_CHARS * 4))))
        entries.push(orphan)
        consumed = next
      }
      return
    }
    if (start === end) {
      if (current) current.end = next
      else consumed = next
      return
    }
    const line = buf.toString('utf8', start, Math.min(end, start + PART_CHARS * 4))
    const m = parser.regex.exec(line.length > PREFIX_PROBE_CHARS ? line.slice(0, PREFIX_PROBE_CHARS) : line)
    if (!m) {
      // Not a log line of PostgreSQL's own (a library writing to stderr, a line from before the prefix was set).
      finish()
      current = { entry: emptyEntry('LOG', cap(line)), part: 'message', end: next }
      return
    }
    const label = m.groups!.label!
    const values = prefixValues(parser, m.groups as Record<string, string | undefined>)
    const rest = line.slice(m[0].length)
    const pid = values.pid === undefined ? null : Number(values.pid)
    const section = SECTIONS[label]
    if (section) {
      if (current && (pid === null || current.entry.pid === null || current.entry.pid === pid)) {
        current.part = section
        addTo(section, rest)
        current.end = next
        return
      }
      // A secondary line without its entry: kept as an entry of its own, its label in the text.
      finish()
      const orphan = emptyEntry('LOG', cap(`${label}:  ${rest}`))
      fillFromPrefix(orphan, values, opts.tzOffsetMs, pid)
      current = { entry: orphan, part: 'message', end: next }
      return
    }
    finish()
    const entry = emptyEntry(label, cap(rest))
    fillFromPrefix(entry, values, opts.tzOffsetMs, pid)
    current = { entry, part: 'message', end: next }
  })
  if (current && opts.settled) {
    // The slice ended at a line's end (or the file will not grow): the entry is whole.
    finish()
  }
  return { entries, consumed }
}

function fillFromPrefix(entry: RawLogEntry, values: ReturnType<typeof prefixValues>, tzOffsetMs: number, pid: number | null): void {
  entry.pid = pid
  if (values.ts) entry.ts = parseLogTime(values.ts, tzOffsetMs)
  else if (values.epoch) entry.ts = Math.round(Number(values.epoch) * 1000)
  entry.user = values.user ?? null
  entry.database = values.database ?? null
  entry.application = values.application ?? null
  entry.client = values.hostport ?? values.host ?? null
  entry.sqlstate = values.sqlstate ?? null
  entry.backendType = values.backendType ?? null
  entry.queryId = values.queryId && values.queryId !== '0' ? values.queryId : null
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

function parseCsv(buf: Buffer, opts: ParseOptions): ParsedChunk {
  const entries: RawLogEntry[] = []
  let consumed = 0
  let record: string[] = []
  let quotes = 0
  forEachLine(buf, opts.closed, (start, end, next) => {
    const line = buf.toString('utf8', start, end)
    record.push(line)
    for (let i = line.indexOf('"'); i >= 0; i = line.indexOf('"', i + 1)) quotes++
    if (quotes % 2 !== 0 && next < buf.length) return
    if (quotes % 2 !== 0 && !opts.closed) return
    entries.push(csvEntry(csvFields(record.join('\n')), opts.tzOffsetMs))
    consumed = next
    record = []
    quotes = 0
  })
  return { entries, consumed }
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? cap(v) : typeof v === 'number' ? String(v) : null)

function parseJson(buf: Buffer, opts: ParseOptions): ParsedChunk {
  const entries: RawLogEntry[] = []
  let consumed = 0
  forEachLine(buf, opts.closed, (start, end, next) => {
    consumed = next
    if (start === end) return
    const line = buf.toString('utf8', start, end)
    let o: Record<string, unknown>
    try {
      o = JSON.parse(line)
      if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new Error('not an object')
    } catch {
      entries.push(emptyEntry('LOG', cap(line)))
      return
    }
    const severity = typeof o.error_severity === 'string' && SEVERITY_LABELS[o.error_severity] ? o.error_severity : 'LOG'
    const entry = emptyEntry(severity, str(o.message) ?? '')
    entry.ts = typeof o.timestamp === 'string' ? parseLogTime(o.timestamp, opts.tzOffsetMs) : null
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
    entries.push(entry)
  })
  return { entries, consumed }
}

export function parseChunk(buf: Buffer, opts: ParseOptions): ParsedChunk {
  if (opts.format === 'csvlog') return parseCsv(buf, opts)
  if (opts.format === 'jsonlog') return parseJson(buf, opts)
  return parseStderr(buf, opts)
}

/** The format of a log file, from its name as PostgreSQL gives it (csvlog: .csv, jsonlog: .json). */
export function formatOfFile(name: string): LogFormat {
  if (name.endsWith('.csv')) return 'csvlog'
  if (name.endsWith('.json')) return 'jsonlog'
  return 'stderr'
}
