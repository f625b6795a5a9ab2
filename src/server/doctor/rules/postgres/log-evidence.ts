// What the log-based rules read of the server log (store/logs/), once per diagnosis: entries
// of some kinds over a trailing window, and the exact counts per kind and severity over a span (from the
// count table, so they include the entries the agent counted but did not send whole); and the server's
// settings as it last reported them (parsed from SHOW's text: '5min', '1GB').
import type { StoredLogEntry } from '../../../store/logs/types.ts'
import { minuteFloor } from '../../../store/window.ts'
import type { DoctorContext } from '../../context.ts'

/** Entries read per rule at most: the newest ones. */
export const MAX_LOG_ENTRIES = 5_000

/** The entries of `kinds` in the trailing `windowMs` (up to ctx.now), newest first. */
export function logEntries(
  ctx: DoctorContext,
  kinds: readonly string[],
  windowMs: number,
  severities?: readonly string[],
): Promise<StoredLogEntry[]> {
  return ctx.once(`log:${kinds.join(',')}:${windowMs}:${severities?.join(',') ?? ''}`, () =>
    ctx.store.logEvents.entries(
      ctx.db.id,
      { since: ctx.now - windowMs, until: ctx.now + 1, kinds, severities },
      MAX_LOG_ENTRIES,
    ),
  )
}

/** Counts by kind, then severity, over [since, until) (whole minutes: the count table's). */
export function logCounts(
  ctx: DoctorContext,
  since: number,
  until: number,
): Promise<Map<string, Record<string, number>>> {
  return ctx.once(`log-counts:${since}:${until}`, async () => {
    const rows = await ctx.store.logEvents.counts(
      ctx.db.id,
      { since, until, minuteFloor: minuteFloor(ctx.now) },
      Math.max(60_000, until - since),
    )
    const byKind = new Map<string, Record<string, number>>()
    for (const r of rows) {
      const k = byKind.get(r.kind) ?? {}
      k[r.severity] = (k[r.severity] ?? 0) + r.count
      byKind.set(r.kind, k)
    }
    return byKind
  })
}

/** Sum of a kind's counts (all severities, or those given). */
export function countOf(
  counts: Map<string, Record<string, number>>,
  kind: string,
  severities?: readonly string[],
): number {
  let n = 0
  for (const [severity, count] of Object.entries(counts.get(kind) ?? {}))
    if (!severities || severities.includes(severity)) n += count
  return n
}

/** The server's settings as its latest report gave them (SHOW's text), or null when none arrived. */
export function settings(ctx: DoctorContext): Promise<Record<string, string> | null> {
  return ctx.once('settings', () => ctx.store.latestSettings(ctx.db.id))
}

const TIME_UNITS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 }
const SIZE_UNITS: Record<string, number> = { B: 1, kB: 1024, MB: 1024 ** 2, GB: 1024 ** 3, TB: 1024 ** 4 }

/** A time setting as SHOW prints it ('5min', '30s', '300') in ms; `bareUnitMs` for a number without unit. */
export function settingMs(value: string | undefined, bareUnitMs: number): number | undefined {
  const m = value === undefined ? null : /^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$/.exec(value)
  if (!m) return undefined
  return Number(m[1]) * (m[2] ? TIME_UNITS[m[2]]! : bareUnitMs)
}

/** A size setting as SHOW prints it ('1GB', '512MB', '64kB') in bytes; `bareUnit` bytes for a number without unit. */
export function settingBytes(value: string | undefined, bareUnit: number): number | undefined {
  const m = value === undefined ? null : /^\s*(\d+(?:\.\d+)?)\s*(B|kB|MB|GB|TB)?\s*$/.exec(value)
  if (!m) return undefined
  return Number(m[1]) * (m[2] ? SIZE_UNITS[m[2]]! : bareUnit)
}

/** A plain number setting as SHOW prints it ('0.2', '50'); undefined when it is not one. */
export function settingNumber(value: string | undefined): number | undefined {
  const m = value === undefined ? null : /^\s*(-?\d+(?:\.\d+)?)\s*$/.exec(value)
  return m ? Number(m[1]) : undefined
}

/** A size for a setting's text: whole MB below 1 GB, whole GB from there, rounded up. */
export function sizeSetting(bytes: number): string {
  const mb = Math.max(1, Math.ceil(bytes / 1024 ** 2))
  return mb < 1024 ? `${mb}MB` : `${Math.ceil(mb / 1024)}GB`
}

/** A field of an entry as a number (null when absent or not a finite number). */
export function numberField(e: StoredLogEntry, name: string): number | null {
  const v = e.fields[name]
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

/** A field of an entry as text (null when absent; numbers as their text). */
export function textField(e: StoredLogEntry, name: string): string | null {
  const v = e.fields[name]
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null
}

/** Text of the log cut for a finding's detail, on one line. */
export const logExcerpt = (text: string, max = 200) => {
  const line = text.replace(/\s+/g, ' ').trim()
  return line.length > max ? `${line.slice(0, max)}…` : line
}
