// Splits one cycle's batch into parts that each fit the server's ingest limits (src/shared/ingest-limits.ts):
// every array section within its item cap, every body under the byte limit less a margin. Sizes are
// measured as the UTF-8 bytes of each row's JSON, once per row, and added up.
//
// Which sections may be cut, from how the server stores them (src/server/store/sql-*.ts):
// - query_stats, explain_plans and waits add up (deltas summed into buckets, plans appended), and the
//   latest tables and indexes are replaced by a newer collected_at but merged with rows of the same one
//   (store/objects/writes.ts): their rows are spread over parts, each row in exactly one part.
//   Statements go biggest first (by total_time_ms), so the costliest land in the first part.
// - Every other section is kept whole by the server as "the latest list" (snapshots: activity, locks,
//   sequences, unindexed_foreign_keys, collector_notes; internals_latest: replication, bgwriter, wal_stats,
//   io_stats, database_stats; clickhouse_latest: parts, merges, mutations, server_metrics; and fields this
//   agent does not know yet): a second part of the same collected_at would replace the first. Each goes
//   whole into one part, the first ones that have room.
// Every part carries the batch header (database, collected_at, interval_seconds, covered_seconds, agent_version). A batch
// that fits keeps its batch_id; parts get `<batch_id>.<n>` (a digest of it when that would pass 64
// characters), so a retried part is applied once. A section that cannot fit even alone keeps the entries
// that do (past its item cap, or a row bigger than a part on its own): a statement's text is shortened
// to fit, and anything else left out is counted in `dropped`, which batchParts logs.
import { createHash } from 'node:crypto'
import {
  INGEST_BODY_LIMIT_BYTES,
  type IngestArraySection,
  ingestMaxItems,
  ingestTextLimits,
} from '../shared/ingest-limits.ts'
import type { IngestBatch } from '../shared/wire.ts'
import type { AgentLogger } from './collectors/types.ts'

/** Room left under the server's body limit: the parts aim at this many bytes less. */
export const PART_MARGIN_BYTES = 1024 * 1024

const HEADER_KEYS = new Set([
  'batch_id',
  'collected_at',
  'interval_seconds',
  'covered_seconds',
  'agent_version',
  'database',
])
/** Sections whose rows may go to different parts, in the order they fill the parts. */
const SPLITTABLE = ['query_stats', 'tables', 'indexes', 'explain_plans', 'waits'] as const
const SPLITTABLE_SET = new Set<string>(SPLITTABLE)

export interface SplitLimits {
  /** Largest JSON body of a part, in bytes. */
  maxBodyBytes: number
  maxItems: Record<IngestArraySection, number>
}

export const defaultSplitLimits: SplitLimits = {
  maxBodyBytes: INGEST_BODY_LIMIT_BYTES - PART_MARGIN_BYTES,
  maxItems: ingestMaxItems,
}

export interface SplitResult {
  parts: IngestBatch[]
  /** Each part's JSON size in bytes (at most; exact when its id is as long as the longest possible one). */
  bytes: number[]
  /** Entries left out per section: past the section's item cap, or too big for a part on their own. */
  dropped: Record<string, number>
  /** Texts shortened per section: past their length cap, or a statement too big for a part on its own. */
  truncated: Record<string, number>
}

const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8')
const jsonBytes = (value: unknown): number => utf8Bytes(JSON.stringify(value))

/** `text` cut to at most `max` UTF-16 units, without leaving half of a surrogate pair at the end. */
function clip(text: string, max: number): string {
  if (text.length <= max) return text
  const code = text.charCodeAt(max - 1)
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max)
}

/** Which string field of a section's rows has a length cap, and the cap. */
const CAPPED_TEXTS: Partial<Record<string, { field: string; max: number }>> = {
  query_stats: { field: 'query_text', max: ingestTextLimits.queryText },
  mutations: { field: 'command', max: ingestTextLimits.mutationCommand },
  collector_errors: { field: 'message', max: ingestTextLimits.collectorMessage },
  collector_notes: { field: 'message', max: ingestTextLimits.collectorMessage },
}

interface Draft {
  sections: Record<string, unknown>
  bytes: number
}

/** The parts of `batch`, in the order to send them; see the header for the rules. */
export function splitBatch(batch: IngestBatch, limits: SplitLimits = defaultSplitLimits): SplitResult {
  const dropped: Record<string, number> = {}
  const truncated: Record<string, number> = {}
  const count = (into: Record<string, number>, key: string, n = 1) => {
    if (n > 0) into[key] = (into[key] ?? 0) + n
  }

  const header: Record<string, unknown> = {}
  const whole: [string, unknown][] = []
  for (const [key, value] of Object.entries(batch)) {
    if (value === undefined) continue
    if (HEADER_KEYS.has(key)) header[key] = value
    else if (!SPLITTABLE_SET.has(key)) whole.push([key, value])
  }
  // Part ids are ASCII and at most 64 characters: the header is measured with the longer of that and the batch's own.
  const idBytes = Math.max(ingestTextLimits.id + 2, jsonBytes(batch.batch_id))
  const headerBytes = jsonBytes({ ...header, batch_id: '' }) - 2 + idBytes
  const room = limits.maxBodyBytes - headerBytes
  if (room <= 0)
    throw new Error(
      `the batch header alone (${headerBytes} bytes) is over the part size of ${limits.maxBodyBytes} bytes`,
    )

  const drafts: Draft[] = []
  let current: Draft = { sections: {}, bytes: headerBytes }
  drafts.push(current)
  const openPart = () => {
    current = { sections: {}, bytes: headerBytes }
    drafts.push(current)
  }
  /** Bytes of `"key":` after a comma. */
  const keyBytes = (key: string) => utf8Bytes(JSON.stringify(key)) + 2

  const capped = (key: string, row: unknown): unknown => {
    const cap = CAPPED_TEXTS[key]
    if (!cap || row === null || typeof row !== 'object') return row
    const text = (row as Record<string, unknown>)[cap.field]
    if (typeof text !== 'string' || text.length <= cap.max) return row
    count(truncated, key)
    return { ...row, [cap.field]: clip(text, cap.max) }
  }

  for (const [key, value] of whole) {
    let section = value
    let bytes: number
    if (Array.isArray(value)) {
      const max = limits.maxItems[key as IngestArraySection] ?? Number.POSITIVE_INFINITY
      const rows = (value.length > max ? value.slice(0, max) : value).map((row) => capped(key, row))
      count(dropped, key, value.length - rows.length)
      // Leading entries while they fit in a part of their own (collectors list the most important first).
      let kept = 0
      bytes = keyBytes(key) + 2
      for (const row of rows) {
        const add = jsonBytes(row) + (kept > 0 ? 1 : 0)
        if (bytes + add > room) break
        bytes += add
        kept++
      }
      count(dropped, key, rows.length - kept)
      section = kept === rows.length ? rows : rows.slice(0, kept)
    } else {
      bytes = keyBytes(key) + jsonBytes(value)
      if (bytes > room) {
        count(dropped, key)
        continue
      }
    }
    const home = drafts.find((d) => d.bytes + bytes <= limits.maxBodyBytes)
    if (home) {
      home.sections[key] = section
      home.bytes += bytes
    } else {
      openPart()
      current.sections[key] = section
      current.bytes += bytes
    }
  }

  for (const key of SPLITTABLE) {
    const value = batch[key] as unknown[] | undefined
    if (value === undefined) continue
    const max = limits.maxItems[key]
    const empty = keyBytes(key) + 2
    if (value.length === 0) {
      if (current.bytes + empty > limits.maxBodyBytes) openPart()
      current.sections[key] = []
      current.bytes += empty
      continue
    }
    const rows = key === 'query_stats' ? biggestFirst(value as NonNullable<IngestBatch['query_stats']>) : value
    for (const original of rows) {
      let row = capped(key, original)
      let bytes = jsonBytes(row)
      if (empty + bytes > room) {
        const shortened =
          key === 'query_stats' ? shortenText(row as Record<string, unknown>, 'query_text', room - empty) : undefined
        if (!shortened) {
          count(dropped, key)
          continue
        }
        if (row === original) count(truncated, key)
        row = shortened.row
        bytes = shortened.bytes
      }
      const list = current.sections[key] as unknown[] | undefined
      const add = list ? bytes + 1 : empty + bytes
      if ((list && list.length >= max) || current.bytes + add > limits.maxBodyBytes) {
        openPart()
        current.sections[key] = [row]
        current.bytes += empty + bytes
      } else if (list) {
        list.push(row)
        current.bytes += add
      } else {
        current.sections[key] = [row]
        current.bytes += add
      }
    }
  }

  const ids = partIds(batch.batch_id, drafts.length)
  return {
    parts: drafts.map((d, i) => ({ ...header, batch_id: ids[i]!, ...d.sections }) as IngestBatch),
    bytes: drafts.map((d) => d.bytes),
    dropped,
    truncated,
  }
}

/** Statements by total_time_ms, largest first; equal ones keep their order. */
function biggestFirst(rows: NonNullable<IngestBatch['query_stats']>) {
  return rows
    .map((row, i) => ({ row, i }))
    .sort((a, b) => b.row.total_time_ms - a.row.total_time_ms || a.i - b.i)
    .map((e) => e.row)
}

/** The row with `field` cut until the row's JSON takes at most `maxBytes`; undefined when even an empty text does not fit. */
function shortenText(
  row: Record<string, unknown>,
  field: string,
  maxBytes: number,
): { row: Record<string, unknown>; bytes: number } | undefined {
  const text = String(row[field] ?? '')
  const withText = (length: number) => {
    const candidate = { ...row, [field]: clip(text, length) }
    return { row: candidate, bytes: jsonBytes(candidate) }
  }
  let best = withText(0)
  if (best.bytes > maxBytes) return undefined
  let low = 0
  let high = text.length
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    const attempt = withText(mid)
    if (attempt.bytes <= maxBytes) {
      best = attempt
      low = mid
    } else {
      high = mid - 1
    }
  }
  return best
}

/** The batch_id of each of `n` parts: the batch's own for one part, `<id>.<n>` (or a digest's) otherwise. */
export function partIds(batchId: string, n: number): string[] {
  if (n === 1) return [batchId]
  const suffix = `.${n}`.length
  const base =
    batchId.length + suffix <= ingestTextLimits.id
      ? batchId
      : createHash('sha256').update(batchId).digest('hex').slice(0, 48)
  return Array.from({ length: n }, (_, i) => `${base}.${i + 1}`)
}

/** The parts of a cycle's batch, for the shipper; what could not be sent (or only shortened) is logged with its count. */
export function batchParts(
  batch: IngestBatch,
  log: AgentLogger,
  limits: SplitLimits = defaultSplitLimits,
): IngestBatch[] {
  const split = splitBatch(batch, limits)
  const database = batch.database.name
  if (split.parts.length > 1)
    log.debug('batch split into parts to fit the server limits', {
      database,
      parts: split.parts.length,
      bytes: split.bytes,
    })
  for (const [section, dropped] of Object.entries(split.dropped)) {
    log.error('entries too many or too big for the server limits; dropped', { database, section, dropped })
  }
  for (const [section, shortened] of Object.entries(split.truncated)) {
    log.warn('texts too long for the server limits; shortened', { database, section, shortened })
  }
  return split.parts
}
