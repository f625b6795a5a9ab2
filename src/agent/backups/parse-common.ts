// What both backup parsers share: reading untrusted JSON values defensively and bounding the texts and
// numbers that go into a BackupEntry (src/shared/wire.ts), and the list's order (newest first, capped).
import { ingestMaxItems } from '../../shared/ingest-limits.ts'
import type { BackupEntry } from '../../shared/wire.ts'

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

export const isObject = (v: unknown): v is Record<string, Json> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** A text for the wire: no NUL or other control characters, at most `max` characters; null when not a non-empty string. */
export function text(v: unknown, max: number): string | null {
  if (typeof v !== 'string') return null
  const clean = v.replace(/[\u0000-\u001f\u007f]/g, ' ').trim()
  return clean === '' ? null : clean.slice(0, max)
}

/** A byte count: a finite non-negative integer, else null. */
export function bytes(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= Number.MAX_SAFE_INTEGER ? Math.round(v) : null
}

/** Epoch ms from epoch seconds (a number). */
export function fromEpochSeconds(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 && v < 1e11 ? Math.round(v * 1000) : null
}

/** Epoch ms from an RFC 3339 time; Go's zero time (year 1) and unparsable texts are null. */
export function fromRfc3339(v: unknown): number | null {
  if (typeof v !== 'string') return null
  const ms = Date.parse(v)
  return Number.isFinite(ms) && ms > 0 ? ms : null
}

/** Newest first (by finish, else start), at most the wire's cap. */
export function newestFirst(entries: BackupEntry[]): BackupEntry[] {
  const when = (e: BackupEntry) => e.finished_at ?? e.started_at ?? 0
  return entries.sort((a, b) => when(b) - when(a)).slice(0, ingestMaxItems.backups)
}

/** JSON.parse that says what is wrong instead of throwing. */
export function parseJson(output: string, tool: string, command: string): { value: Json } | { error: string } {
  const trimmed = output.trim()
  if (trimmed === '') return { error: `${tool} printed nothing: expected the JSON of ${command}` }
  try {
    return { value: JSON.parse(trimmed) as Json }
  } catch {
    return { error: `${tool} printed no valid JSON: expected the output of ${command}` }
  }
}

export interface ParsedBackups {
  backups: BackupEntry[]
  /** Why the list is missing or incomplete; null when the output was read whole. */
  error: string | null
}
