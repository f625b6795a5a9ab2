// Time windows of the store's reads and the buckets that cover them: the bucket sizes, a read's window
// (with the floor before which only hourly rows are kept), the resolution of a series over it, and the
// bucket ranges (whole hours from hourly buckets, the edges from minute ones) as a WHERE clause. A leaf
// module: every sql-*.ts file may import it without an import cycle.
import { retentionLimits } from '../limits.ts'
import { type Fragment, ident, join, sql } from './sql.ts'

export const MINUTE_MS = 60_000
export const HOUR_MS = 3_600_000

export const floorTo = (t: number, step: number) => Math.floor(t / step) * step

export interface Window {
  since: number
  until: number
  /**
   * Minute buckets before this time (a whole hour) may have been compacted away (retentionLimits): the
   * part of the window before it is read from the hourly buckets, whole hours. Absent: minute rows throughout.
   */
  minuteFloor?: number
}

/** The minuteFloor of reads at `now`: minute rows are kept retentionLimits.minuteRowsMs, then only hourly ones. */
export function minuteFloor(now: number): number {
  return floorTo(now - retentionLimits.minuteRowsMs, HOUR_MS)
}

/** A timeseries' resolution: minute points for windows up to 24 hours whose minute rows are kept, else hourly. */
export function seriesResolution(window: Window): 60 | 3600 {
  const minutesKept = window.minuteFloor === undefined || window.since >= window.minuteFloor
  return window.until - window.since <= 24 * HOUR_MS && minutesKept ? 60 : 3600
}

/** The bucket ranges that cover [since, until): whole hours from the hourly buckets, the edges from the minute buckets. */
export function windowRanges(window: Window): { resolution: 60 | 3600; from: number; to: number }[] {
  const floor = window.minuteFloor
  if (floor !== undefined && window.since < floor) {
    // Before the floor only hourly rows are kept: the hours that overlap that part of the window.
    const old = { resolution: 3600 as const, from: floorTo(window.since, HOUR_MS), to: Math.min(window.until, floor) }
    return window.until > floor ? [old, ...windowRanges({ since: floor, until: window.until })] : [old]
  }
  const since = floorTo(window.since, MINUTE_MS)
  const until = window.until
  const hourStart = Math.ceil(since / HOUR_MS) * HOUR_MS
  const hourEnd = floorTo(until, HOUR_MS)
  if (hourEnd - hourStart < HOUR_MS) return [{ resolution: 60, from: since, to: until }]
  return [
    { resolution: 3600, from: hourStart, to: hourEnd },
    { resolution: 60, from: since, to: hourStart },
    { resolution: 60, from: hourEnd, to: until },
  ]
}

/** The bucket sizes of bucketed rows, in seconds: written into the text (a range's resolution is part of its shape). */
export const RESOLUTIONS = [60, 600, 3600] as const

/** One bucket range as a condition: the resolution in the text, the bounds as parameters. */
export function rangeCondition(r: { resolution: number; from: number; to: number }): Fragment {
  return sql`(resolution = ${ident(r.resolution, RESOLUTIONS)} AND bucket >= ${r.from} AND bucket < ${r.to})`
}

/** Bucket ranges (windowRanges, statRanges) as a WHERE condition: an OR of ranges (FALSE for none). */
export function rangesClause(ranges: readonly { resolution: number; from: number; to: number }[]): Fragment {
  if (ranges.length === 0) return sql`FALSE`
  return sql`(${join(ranges.map(rangeCondition), sql` OR `)})`
}

/** windowRanges as a WHERE condition. */
export function windowClause(window: Window): Fragment {
  return rangesClause(windowRanges(window))
}
