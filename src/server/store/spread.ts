// Spreading a counter delta over the minutes it covers (issue 29 d6). A delta is measured over the
// batch's covered span up to its collected_at; after a gap (the agent stopped, the database did not
// answer) that is minutes, and put whole in the batch's own minute it stood on the charts as a spike
// that never happened (a 3-minute gap: 4,386 calls in one minute against ~1,170 a minute). So ingest
// writes such a delta into every minute bucket the interval covers, each its share by time (a rate),
// and the rollups and totals stay exact: integer counters are cut at rounded cumulative shares, so the
// shares of a delta add up to it exactly, and the coarser buckets get the shares of their minutes.
// A delta of a minute or less stays in its batch's minute (at most a minute off, one row per statement
// per batch as before); one longer than MAX_SPREAD_MS is spread over the last MAX_SPREAD_MS (the agent
// starts a new baseline after an hour, so only a poll interval over an hour comes there), which bounds
// the rows a batch writes to 60 per statement. And the minute rows a batch's spread writes are bounded
// as a whole (SPREAD_ROW_BUDGET, about one full batch's worth): a batch of many statements after a long
// gap is spread in steps of several minutes, each step's share in its first minute, instead of writing
// a row per statement per minute (20,000 statements over an hour were 1.2 million rows, one transaction
// of 20 s that held every other batch of the store behind it).
// The span is the batch's covered_seconds (wire version 4), else its interval_seconds: an older agent's
// batch says only its poll interval, and interval_seconds stays the cadence everywhere else (the events'
// and availability's gap rules, rates).
import type { IngestBatch } from '../../shared/wire.ts'
import { HOUR_MS, MINUTE_MS, floorTo } from './window.ts'

export const MAX_SPREAD_MS = HOUR_MS

/** The minute rows one batch's spread may write, all its statements together (see above). */
export const SPREAD_ROW_BUDGET = 20_000

/** The buckets a delta may be spread over when `rows` deltas are spread in one batch. */
export const spreadBucketsFor = (rows: number): number => Math.max(1, Math.floor(SPREAD_ROW_BUDGET / Math.max(1, rows)))

/** The seconds a batch's counter deltas cover (covered_seconds; an older agent's: its interval_seconds). */
export function coveredSeconds(batch: Pick<IngestBatch, 'interval_seconds' | 'covered_seconds'>): number {
  return batch.covered_seconds ?? batch.interval_seconds
}

export interface Spread {
  /** The minute buckets the delta covers, oldest first. */
  buckets: number[]
  /** bounds[k]: the share of the delta up to the end of buckets[k]; the last is 1. */
  bounds: number[]
}

/**
 * The minutes a delta measured over `intervalSeconds` up to `collectedAt` covers, with their shares: at
 * most `maxBuckets` of them (spreadBucketsFor), in steps of whole minutes when the minutes are more, each
 * step's share in its first minute (the last step ends with the batch's own minute).
 */
export function spreadOverMinutes(collectedAt: number, intervalSeconds: number, maxBuckets = Infinity): Spread {
  const last = floorTo(collectedAt, MINUTE_MS)
  const span = Math.min(intervalSeconds * 1000, MAX_SPREAD_MS)
  if (!(span > MINUTE_MS) || !(maxBuckets > 1)) return { buckets: [last], bounds: [1] }
  const start = collectedAt - span
  const minutes = (last - floorTo(start, MINUTE_MS)) / MINUTE_MS + 1
  const step = Math.ceil(minutes / Math.floor(maxBuckets)) * MINUTE_MS
  const buckets: number[] = []
  const bounds: number[] = []
  // Steps are counted back from the batch's minute, so its own minute is the last step's first.
  const first = last - Math.floor((last - floorTo(start, MINUTE_MS)) / step) * step
  for (let bucket = first; bucket <= last; bucket += step) {
    const upTo = Math.min(bucket + step, collectedAt)
    // collected_at on a minute's first millisecond: that minute has no part of the interval.
    if (upTo <= Math.max(bucket, start)) continue
    buckets.push(bucket)
    bounds.push((upTo - start) / span)
  }
  bounds[bounds.length - 1] = 1
  return { buckets, bounds }
}

/**
 * The share of `total` that the spread's minutes `from` to `to` (inclusive) take. Integers are cut at
 * rounded cumulative shares, so the shares of all minutes, or of the groups of them a coarser bucket
 * takes, add up to `total` exactly; other values by their share.
 */
export function shareOf(total: number, spread: Spread, from: number, to: number, integer: boolean): number {
  if (from === 0 && to === spread.bounds.length - 1) return total
  const lo = from === 0 ? 0 : spread.bounds[from - 1]!
  const hi = spread.bounds[to]!
  return integer ? Math.round(total * hi) - Math.round(total * lo) : total * hi - total * lo
}
