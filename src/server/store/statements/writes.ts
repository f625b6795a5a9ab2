// Statement statistics at ingest: a batch's query_stats deltas summed per statement into the minute
// buckets of query_stats its interval covers (spread.ts: its own minute unless it covers more than
// one, after a gap) and the coarser buckets already rolled up past them (a late batch), the
// statements' texts in query_texts (rewritten once per TEXT_REFRESH_MS, KnownTexts), all in the
// ingest's transaction, after the rollups that the batch's time closes (planRollup, rollups/rollups.ts).
import { STATEMENT_COUNTERS as QUERY_COUNTER_KEYS, STATEMENT_DURATIONS } from '../../../shared/families.ts'
import type { QueryStatDelta } from '../../../shared/wire.ts'
import { type SqlDialect, perDialect } from '../dialect.ts'
import { type BatchRollup, SPAN_MS } from '../rollups/rollups.ts'
import { int64Counter, saturatingAdd } from '../sums.ts'
import type { Writes } from '../ingest/batch.ts'
import { HOUR_MS, MINUTE_MS, floorTo } from '../window.ts'
import { shareOf, spreadBucketsFor, spreadOverMinutes } from '../spread.ts'

const QUERY_COUNTERS = QUERY_COUNTER_KEYS

const QUERY_STAT_COLUMNS = ['database_id', 'resolution', 'bucket', 'query_hash', ...QUERY_COUNTERS, 'p99_ms']
const QUERY_STAT_KEY = ['database_id', 'resolution', 'bucket', 'query_hash']
/** The counters kept in BIGINT columns (the durations, `_ms`, are doubles): a fractional one from the wire is rounded. */
const INTEGER_COUNTER = QUERY_COUNTERS.map((key) => !STATEMENT_DURATIONS.has(key))
const counterOf = (delta: QueryStatDelta, i: number): number => {
  const value = delta[QUERY_COUNTERS[i]!] ?? 0
  return INTEGER_COUNTER[i] ? Math.round(value) : value
}
/** Where the counters and p99_ms sit in a row of QUERY_STAT_COLUMNS. */
const COUNTERS_AT = 4
const P99_AT = COUNTERS_AT + QUERY_COUNTERS.length

/**
 * The batch's statements as query_stats rows of the minute bucket (QUERY_STAT_COLUMNS), summed per
 * statement (a batch may carry one statement more than once), with their texts.
 */
function queryStatRows(
  databaseId: string,
  bucket: number,
  rows: QueryStatDelta[],
): Map<string, { text: string; row: unknown[] }> {
  const merged = new Map<string, { text: string; row: unknown[] }>()
  const repeated = new Set<{ text: string; row: unknown[] }>()
  for (const delta of rows) {
    const entry = merged.get(delta.query_hash)
    if (!entry) {
      const row: unknown[] = new Array(QUERY_STAT_COLUMNS.length)
      row[0] = databaseId
      row[1] = MINUTE_MS / 1000
      row[2] = bucket
      row[3] = delta.query_hash
      for (let i = 0; i < QUERY_COUNTERS.length; i++) row[COUNTERS_AT + i] = counterOf(delta, i)
      row[P99_AT] = delta.p99_ms ?? null
      merged.set(delta.query_hash, { text: delta.query_text, row })
      continue
    }
    const row = entry.row
    for (let i = 0; i < QUERY_COUNTERS.length; i++)
      row[COUNTERS_AT + i] = (row[COUNTERS_AT + i] as number) + counterOf(delta, i)
    if (delta.p99_ms !== undefined) row[P99_AT] = Math.max((row[P99_AT] as number | null) ?? 0, delta.p99_ms)
    repeated.add(entry)
  }
  // A statement named ~1,000 times at the wire's maximum sums past BIGINT in JS: bound as its maximum.
  for (const { row } of repeated) {
    for (let i = 0; i < QUERY_COUNTERS.length; i++)
      if (INTEGER_COUNTER[i]) row[COUNTERS_AT + i] = int64Counter(row[COUNTERS_AT + i] as number)
  }
  return merged
}

/** How often a statement's text row (and its last_seen) is rewritten while the statement keeps coming. */
export const TEXT_REFRESH_MS = 10 * MINUTE_MS

/**
 * Statements whose text row this process wrote recently, per database, with the last_seen written. A
 * batch skips the text upsert of statements written for a batch less than TEXT_REFRESH_MS before its
 * own, so the same 500 statements arriving every 10 s cost text writes once in 10 minutes, not every
 * batch (rewriting the wide text rows was a third of the ingest's SQL time even once a minute). The
 * stored last_seen is then up to 10 minutes behind; queryDetail reads the later minute buckets to
 * answer it to the minute, and retention keeps a text that much past its hour. Filled only after the ingest's
 * transaction committed. Several processes sharing a PostgreSQL store each write a statement at most
 * once per refresh.
 */
export class KnownTexts {
  private readonly byDatabase = new Map<string, Map<string, number>>()

  /** Whether a statement's text row needs the upsert for the database's batch collected at `at`. */
  writerFor(databaseId: string, at: number): (hash: string) => boolean {
    const seen = this.byDatabase.get(databaseId)
    if (!seen) return () => true
    const since = at - TEXT_REFRESH_MS
    return (hash) => {
      const written = seen.get(hash)
      return written === undefined || written <= since
    }
  }

  /** After a commit: these statements' text rows have last_seen >= `atLeast`. */
  remember(databaseId: string, hashes: readonly string[], atLeast: number): void {
    let seen = this.byDatabase.get(databaseId)
    // Bounded: a database with an endless stream of new statements starts over.
    if (!seen || seen.size > 100_000) this.byDatabase.set(databaseId, (seen = new Map()))
    for (const hash of hashes) if (!(seen.get(hash)! >= atLeast)) seen.set(hash, atLeast)
  }

  forget(databaseId: string): void {
    this.byDatabase.delete(databaseId)
  }
}

/** What an applied batch changed that caches outside the transaction must learn once it commits. */
export interface IngestEffects {
  /** Hourly statement buckets were written (a late batch or a rollup): cached closed-hour sums are stale. */
  closedHoursChanged: boolean
  /** Statements whose text rows now have last_seen >= textsAt. */
  texts: string[]
  textsAt: number
}

/**
 * Adds the batch's statements to `writes`, after its rollup (planRollup): texts, then the minute rows
 * of the interval the deltas cover (and those of the coarser buckets already rolled up past them).
 */
export function applyQueryStats(
  dialect: SqlDialect,
  databaseId: string,
  collectedAt: number,
  intervalSeconds: number,
  rows: QueryStatDelta[],
  known: KnownTexts | undefined,
  effects: IngestEffects,
): ((writes: Writes, rollup: BatchRollup) => void) | undefined {
  const merged = queryStatRows(databaseId, floorTo(collectedAt, MINUTE_MS), rows)
  if (merged.size === 0) return undefined
  return (writes, { marks }) => {
    const textRows: unknown[][] = []
    const needsWrite = known?.writerFor(databaseId, collectedAt)
    for (const [hash, e] of merged) {
      if (!needsWrite || needsWrite(hash)) textRows.push([databaseId, hash, e.text, collectedAt, collectedAt])
    }
    if (textRows.length > 0) {
      writes.upsert('query_texts', ['database_id', 'query_hash', 'query_text', 'first_seen', 'last_seen'], textRows, {
        key: ['database_id', 'query_hash'],
        update: {
          query_text: 'excluded.query_text',
          last_seen: dialect.greatest('query_texts.last_seen', 'excluded.last_seen'),
        },
      })
      effects.texts = textRows.map((r) => r[1] as string)
      effects.textsAt = collectedAt
    }

    // The deltas cover the batch's interval: each minute of it gets its share (spread.ts; one minute,
    // the batch's own, for an interval of a minute or less). The spans and hours that closed before this
    // batch are rolled up already (planRollup): a minute also lands in the coarser buckets whose level
    // was rolled up past it (a late batch, or the early minutes of a long interval), each such bucket
    // taking the shares of its minutes at once (one row per key in an upsert).
    const spread = spreadOverMinutes(collectedAt, intervalSeconds, spreadBucketsFor(merged.size))
    const statRows: unknown[][] = []
    const last = spread.buckets.length - 1
    const rowOf = (row: unknown[], resolution: number, bucket: number, from: number, to: number) => {
      const out = [databaseId, resolution / 1000, bucket, row[3]]
      for (let i = 0; i < QUERY_COUNTERS.length; i++)
        out.push(shareOf(row[COUNTERS_AT + i] as number, spread, from, to, INTEGER_COUNTER[i]!))
      out.push(row[P99_AT])
      return out
    }
    for (const e of merged.values()) {
      if (last === 0) statRows.push(e.row)
      else for (let k = 0; k <= last; k++) statRows.push(rowOf(e.row, MINUTE_MS, spread.buckets[k]!, k, k))
    }
    for (const [resolution, mark] of [
      [SPAN_MS, marks.spans],
      [HOUR_MS, marks.hours],
    ] as const) {
      for (let from = 0; from <= last; ) {
        const bucket = floorTo(spread.buckets[from]!, resolution)
        let to = from
        while (to < last && floorTo(spread.buckets[to + 1]!, resolution) === bucket) to++
        if (bucket < mark) {
          for (const e of merged.values()) statRows.push(rowOf(e.row, resolution, bucket, from, to))
          if (resolution === HOUR_MS) effects.closedHoursChanged = true
        }
        from = to + 1
      }
    }
    writes.upsert('query_stats', QUERY_STAT_COLUMNS, statRows, {
      key: QUERY_STAT_KEY,
      update: queryStatUpdate(dialect),
    })
  }
}

/** The upsert's update of query_stats: counters add up (BIGINT ones saturating, sums.ts), p99_ms keeps the larger. */
const queryStatUpdate = perDialect(
  (dialect): Record<string, string> => ({
    ...Object.fromEntries(
      QUERY_COUNTERS.map((c, i) => [
        c,
        INTEGER_COUNTER[i] ? saturatingAdd(`query_stats.${c}`, `excluded.${c}`) : `query_stats.${c} + excluded.${c}`,
      ]),
    ),
    p99_ms: dialect.greatest('query_stats.p99_ms', 'excluded.p99_ms'),
  }),
)
