// Reads plans that auto_explain (auto_explain.log_format = json) wrote to PostgreSQL's log files in
// pg_log_dir, from where the previous read stopped. Works with the stderr/csv formats, where the
// JSON plan follows "plan:" over several lines, and with jsonlog (PG 15+), where it sits inside the
// entry's "message". A plan cut off at the end of a file is read again, whole, on the next cycle.
import { createHash } from 'node:crypto'
import { openSync, readSync, closeSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { ExplainPlan } from '../../../shared/wire.ts'
import type { AgentLogger } from '../types.ts'
import { planEntry } from './explain-plans.ts'

const LOG_FILE = /\.(log|csv|json)$/
/** At most this much of each file is read per cycle. */
const MAX_READ = 8 * 1024 * 1024
const NEWEST_FILES = 3
/** Key in the offsets map that records that the directory was scanned once. */
const SCANNED = '\u0000scanned'

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

/** Plans in a piece of log text, and how far the text was fully consumed. */
export function extractPlans(text: string): { found: Found[]; consumed: number } {
  const found: Found[] = []
  let consumed = text.length
  const marker = /duration: ([\d.]+) ms\s+plan:\s*/g
  for (let m = marker.exec(text); m; m = marker.exec(text)) {
    let start = m.index + m[0].length
    // jsonlog: the plan is inside a JSON string, escaped; unescape the rest of that line first.
    let body = text
    if (text[start] === '\\') {
      const lineEnd = text.indexOf('\n', start)
      const line = text.slice(start, lineEnd === -1 ? undefined : lineEnd)
      const closing = line.lastIndexOf('","')
      try {
        body = JSON.parse(`"${line.slice(0, closing === -1 ? undefined : closing)}"`)
        start = 0
      } catch {
        continue
      }
    }
    const brace = body.indexOf('{', start)
    if (brace === -1) continue
    const object = balancedObject(body, brace)
    if (!object) {
      if (body === text) {
        consumed = m.index
        break
      }
      continue
    }
    try {
      const plan = JSON.parse(object.json)
      // A 64-bit query id loses digits as a JS number: keep it as written.
      const id = /"Query Identifier":\s*(-?\d+)/.exec(object.json)?.[1]
      if (id !== undefined) plan['Query Identifier'] = id
      if (plan && typeof plan === 'object' && plan.Plan) found.push({ plan, durationMs: Number(m[1]) })
    } catch {
      // Not a plan after all (a log line that only looks like one).
    }
    if (body === text) marker.lastIndex = object.end
  }
  return { found, consumed }
}

function queryHashOf(plan: Found['plan']): string {
  if (plan['Query Identifier'] !== undefined && plan['Query Identifier'] !== null) return String(plan['Query Identifier'])
  return `text:${createHash('sha256').update(String(plan['Query Text'] ?? '')).digest('hex').slice(0, 16)}`
}

export async function readAutoExplainPlans(dir: string, offsets: Map<string, number>, now: number, log: AgentLogger): Promise<ExplainPlan[]> {
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
    const buffer = Buffer.alloc(length)
    const fd = openSync(file.path, 'r')
    try {
      readSync(fd, buffer, 0, length, offset)
    } finally {
      closeSync(fd)
    }
    const text = buffer.toString('utf8')
    const { found, consumed } = extractPlans(text)
    offsets.set(file.path, offset + Buffer.byteLength(text.slice(0, consumed)))
    for (const f of found) {
      const entry = planEntry(queryHashOf(f.plan), now, f.plan as never, 'auto_explain')
      if (entry.actual_time_ms === null && f.durationMs !== null) entry.actual_time_ms = f.durationMs
      out.push(entry)
    }
  }
  return out
}
