// Reads plans that auto_explain (auto_explain.log_format = json) wrote to PostgreSQL's log files in
// pg_log_dir, from where the previous read stopped: after "duration: N ms  plan:", the JSON object that
// follows (stderr, over several lines), or the escaped rest of the line (jsonlog, inside the "message").
// A plan cut off at the end of what was read is read again, whole, on the next cycle. (csvlog doubles the
// plan's quotes, and PostgreSQL 17's jsonlog has fields after the message: neither yields a plan today,
// as test/agent/auto-explain-log.test.ts records.)
// Memory: up to MAX_READ bytes of each file per cycle are read through one reused buffer of SLICE bytes
// and searched as bytes (the marker, braces, quotes and backslashes are ASCII, which never occurs inside a
// UTF-8 sequence); only a plan's own bytes, or a jsonlog line holding a marker, are decoded. A plan longer
// than the buffer is read into a buffer of its own size. Positions are byte offsets.
import { createHash } from 'node:crypto'
import { openSync, readSync, closeSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { ExplainPlan } from '../../../shared/wire.ts'
import type { AgentLogger } from '../types.ts'
import { planEntry } from './plan-entry.ts'

const LOG_FILE = /\.(log|csv|json)$/
/** At most this much of each file is read per cycle. */
const MAX_READ = 8 * 1024 * 1024
/** The reused read buffer's size. */
export const SLICE = 1024 * 1024
const NEWEST_FILES = 3
/** Key in the offsets map that records that the directory was scanned once. */
const SCANNED = '\u0000scanned'

const MARKER = Buffer.from('duration: ')
const PLAN = Buffer.from('plan:')
const code = (c: string): number => c.charCodeAt(0)
const [BACKSLASH, QUOTE, OPEN, CLOSE, NEWLINE] = [code('\\'), code('"'), code('{'), code('}'), code('\n')]
const [DOT, SPACE, LOWER_M, LOWER_S, ZERO, NINE] = [code('.'), code(' '), code('m'), code('s'), code('0'), code('9')]

/** Shared by every call: the reader never awaits, so two databases' calls cannot interleave. */
let scratch: Buffer | undefined

/** The balanced JSON object starting at `start` (a '{'), or undefined when the text ends first. */
function balancedObject(text: string, start: number): { json: string; end: number } | undefined {
  let depth = 0
  let inString = false
  for (let i = start; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '{') depth++
    else if (c === '}' && --depth === 0) return { json: text.slice(start, i + 1), end: i + 1 }
  }
  return undefined
}

interface Found {
  plan: { Plan: Record<string, unknown>; 'Query Text'?: string; 'Query Identifier'?: number | string }
  durationMs: number | null
}

/** Adds the plan in `json` when it is one (a log line may only look like one). */
function takePlan(json: string, durationMs: number, found: Found[]): void {
  try {
    const plan = JSON.parse(json)
    // A 64-bit query id loses digits as a JS number: keep it as written.
    const id = /"Query Identifier":\s*(-?\d+)/.exec(json)?.[1]
    if (id !== undefined) plan['Query Identifier'] = id
    if (plan && typeof plan === 'object' && plan.Plan) found.push({ plan, durationMs })
  } catch {
    // Not a plan after all.
  }
}

/**
 * Bytes [start, end) of an open file, seen through the reused buffer, which holds [at, at + length).
 * `end` shrinks when the file turns out shorter than its size said (truncated meanwhile).
 */
class FileRange {
  at = 0
  length = 0
  /** Per searched byte: the last search (from, found at or -1), so that searching again from between is free. */
  private readonly lastSearch = new Map<number, { from: number; at: number }>()

  constructor(
    private readonly fd: number,
    private readonly buffer: Buffer,
    public end: number,
  ) {}

  /** Makes the buffer start at `from`. */
  private load(from: number): void {
    const want = Math.min(this.buffer.length, this.end - from)
    const got = want > 0 ? readSync(this.fd, this.buffer, 0, want, from) : 0
    if (got < want) this.end = from + got
    this.at = from
    this.length = got
  }

  /** The byte at `position`, or -1 past the end. */
  byte(position: number): number {
    if (position >= this.end) return -1
    if (position < this.at || position >= this.at + this.length) this.load(position)
    return position < this.end ? this.buffer[position - this.at]! : -1
  }

  /** Where `pattern` first occurs at or after `from`, or -1. */
  indexOf(pattern: Buffer | number, from: number): number {
    const single = typeof pattern === 'number'
    const known = single ? this.lastSearch.get(pattern) : undefined
    if (known && from >= known.from && (known.at === -1 || from <= known.at)) return known.at
    const size = single ? 1 : pattern.length
    let at = -1
    for (let position = from; position + size <= this.end; ) {
      if (position < this.at || position + size > this.at + this.length) this.load(position)
      const index = this.buffer.subarray(0, this.length).indexOf(pattern, position - this.at)
      if (index !== -1) {
        at = this.at + index
        break
      }
      if (this.at + this.length >= this.end) break
      position = this.at + this.length - size + 1
    }
    if (single) this.lastSearch.set(pattern, { from, at })
    return at
  }

  /** Where the JSON object opening at `start` closes (the position after its '}'), or -1 when the range ends first. */
  objectEnd(start: number): number {
    let depth = 0
    let inString = false
    let escaped = false
    for (let position = start; position < this.end; ) {
      if (position < this.at || position >= this.at + this.length) this.load(position)
      const buffer = this.buffer
      const stop = this.length
      for (let i = position - this.at; i < stop; i++) {
        const c = buffer[i]!
        if (escaped) escaped = false
        else if (inString) {
          if (c === BACKSLASH) escaped = true
          else if (c === QUOTE) inString = false
        } else if (c === QUOTE) inString = true
        else if (c === OPEN) depth++
        else if (c === CLOSE && --depth === 0) return this.at + i + 1
      }
      position = this.at + stop
    }
    return -1
  }

  /** Bytes [from, to) decoded as UTF-8. */
  text(from: number, to: number): string {
    if (from >= this.at && to <= this.at + this.length)
      return this.buffer.toString('utf8', from - this.at, to - this.at)
    if (to - from <= this.buffer.length) {
      this.load(from)
      return this.buffer.toString('utf8', 0, Math.min(to, this.end) - from)
    }
    const own = Buffer.allocUnsafe(to - from)
    const got = readSync(this.fd, own, 0, own.length, from)
    return own.toString('utf8', 0, got)
  }

  /** The length of the whitespace character (as JavaScript's `\s` has it) at `position`, or 0. */
  space(position: number): number {
    const c = this.byte(position)
    if (c === SPACE || (c >= 0x09 && c <= 0x0d)) return 1
    if (c < 0xc2) return 0
    const c1 = this.byte(position + 1)
    if (c === 0xc2) return c1 === 0xa0 ? 2 : 0
    const c2 = this.byte(position + 2)
    if (c === 0xe1) return c1 === 0x9a && c2 === 0x80 ? 3 : 0 // U+1680
    if (c === 0xe2 && c1 === 0x80)
      return (c2 >= 0x80 && c2 <= 0x8a) || c2 === 0xa8 || c2 === 0xa9 || c2 === 0xaf ? 3 : 0 // U+2000-200A, 2028, 2029, 202F
    if (c === 0xe2) return c1 === 0x81 && c2 === 0x9f ? 3 : 0 // U+205F
    if (c === 0xe3) return c1 === 0x80 && c2 === 0x80 ? 3 : 0 // U+3000
    if (c === 0xef) return c1 === 0xbb && c2 === 0xbf ? 3 : 0 // U+FEFF
    return 0
  }

  /** After `position`'s whitespace (none, or at least one when `least`), or -1. */
  skipSpace(position: number, least: boolean): number {
    let n = this.space(position)
    if (least && n === 0) return -1
    while (n > 0) {
      position += n
      n = this.space(position)
    }
    return position
  }

  /** At `position` (just past "duration: "): the duration and where the plan text starts, when the rest of "N ms plan:" follows. */
  markerRest(position: number): { duration: string; start: number } | undefined {
    const first = position
    for (let c = this.byte(position); (c >= ZERO && c <= NINE) || c === DOT; c = this.byte(++position));
    if (
      position === first ||
      this.byte(position) !== SPACE ||
      this.byte(position + 1) !== LOWER_M ||
      this.byte(position + 2) !== LOWER_S
    )
      return undefined
    const duration = this.text(first, position)
    const plan = this.skipSpace(position + 3, true)
    if (plan === -1) return undefined
    for (let i = 0; i < PLAN.length; i++) if (this.byte(plan + i) !== PLAN[i]) return undefined
    return { duration, start: this.skipSpace(plan + PLAN.length, false) }
  }
}

/** Plans in the bytes [from, range.end) of a file, and the position up to which they were fully consumed. */
function extractPlans(range: FileRange, from: number): { found: Found[]; consumed: number } {
  const found: Found[] = []
  for (let position = range.indexOf(MARKER, from); position !== -1; ) {
    const marker = range.markerRest(position + MARKER.length)
    if (!marker) {
      position = range.indexOf(MARKER, position + 1)
      continue
    }
    const { duration, start } = marker
    let next = start
    if (range.byte(start) === BACKSLASH) {
      // jsonlog: the plan is inside a JSON string, escaped; unescape the rest of that line first.
      const lineEnd = range.indexOf(NEWLINE, start)
      const line = range.text(start, lineEnd === -1 ? range.end : lineEnd)
      const closing = line.lastIndexOf('","')
      let body: string | undefined
      try {
        body = JSON.parse(`"${line.slice(0, closing === -1 ? undefined : closing)}"`) as string
      } catch {}
      const brace = body === undefined ? -1 : body.indexOf('{')
      const object = brace === -1 ? undefined : balancedObject(body!, brace)
      if (object) takePlan(object.json, Number(duration), found)
    } else {
      const brace = range.indexOf(OPEN, start)
      if (brace !== -1) {
        const end = range.objectEnd(brace)
        // Cut off by the end of what was read: read again from its marker next time.
        if (end === -1) return { found, consumed: position }
        takePlan(range.text(brace, end), Number(duration), found)
        next = end
      }
    }
    position = range.indexOf(MARKER, next)
  }
  return { found, consumed: range.end }
}

function queryHashOf(plan: Found['plan']): string {
  if (plan['Query Identifier'] !== undefined && plan['Query Identifier'] !== null)
    return String(plan['Query Identifier'])
  return `text:${createHash('sha256')
    .update(String(plan['Query Text'] ?? ''))
    .digest('hex')
    .slice(0, 16)}`
}

export async function readAutoExplainPlans(
  dir: string,
  offsets: Map<string, number>,
  now: number,
  log: AgentLogger,
): Promise<ExplainPlan[]> {
  let files: { path: string; size: number; mtime: number }[]
  try {
    files = readdirSync(dir)
      .filter((name) => LOG_FILE.test(name))
      .map((name) => {
        const path = join(dir, name)
        const st = statSync(path)
        return { path, size: st.size, mtime: st.mtimeMs }
      })
      .sort((a, b) => b.mtime - a.mtime)
      .slice(0, NEWEST_FILES)
  } catch (e) {
    log.warn('pg_log_dir cannot be read', { dir, cause: (e as Error).message })
    return []
  }
  // Files already there at the first scan are read from their end (no flood of old plans at start);
  // files that appear later (rotation) are read from the start.
  const firstScan = !offsets.has(SCANNED)
  offsets.set(SCANNED, 1)
  const out: ExplainPlan[] = []
  for (const file of files) {
    let offset = offsets.get(file.path) ?? (firstScan ? file.size : 0)
    if (offset > file.size) offset = 0 // truncated in place: start over
    const length = Math.min(file.size - offset, MAX_READ)
    offsets.set(file.path, offset)
    if (length <= 0) continue
    scratch ??= Buffer.allocUnsafeSlow(SLICE)
    const fd = openSync(file.path, 'r')
    let found: Found[]
    try {
      const result = extractPlans(new FileRange(fd, scratch, offset + length), offset)
      found = result.found
      offsets.set(file.path, result.consumed)
    } finally {
      closeSync(fd)
    }
    for (const f of found) {
      const entry = planEntry(queryHashOf(f.plan), now, f.plan as never, 'auto_explain')
      if (entry.actual_time_ms === null && f.durationMs !== null) entry.actual_time_ms = f.durationMs
      out.push(entry)
    }
  }
  return out
}
