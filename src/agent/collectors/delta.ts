// Deltas of cumulative counters between two samples, reset-aware: a counter that went down was
// reset (stats reset, server restart), so the new value is the increase since the reset; the counters
// of one subject (a table, an index, a view's row) are judged together.

export function counterDelta(previous: number | null | undefined, current: number | null | undefined): number | null {
  if (current === null || current === undefined) return null
  if (previous === null || previous === undefined) return current
  return current >= previous ? current - previous : current
}

/**
 * True when any counter of one subject went down: the subject's counters were reset (or the subject
 * dropped and created again) since `previous`, so all of them count from zero, not each on its own.
 */
export function wentDown<K extends string>(
  previous: Readonly<Record<K, number | null>>,
  current: Readonly<Record<K, number | null>>,
): boolean {
  for (const key of Object.keys(current) as K[]) {
    const before = previous[key]
    const now = current[key]
    if (before !== null && before !== undefined && now !== null && now !== undefined && now < before) return true
  }
  return false
}

/** A previous sample of zeros for `current`'s keys: what counts every counter whole (from a reset, or a subject new since). */
export function zerosOf<K extends string>(current: Record<K, number | null>): Record<K, number | null> {
  const out = {} as Record<K, number | null>
  for (const key of Object.keys(current) as K[]) out[key] = 0
  return out
}

/**
 * Deltas of every key of `current`; null for the first sample (no previous one). The counters of one
 * subject are judged together: when one went down, every delta is the current value. A key the previous
 * sample does not have at all (a counter an upgraded agent reads for the first time, its state saved by
 * the older one) has no delta yet: null, not its whole value since the table was created.
 */
export function deltaOf<K extends string>(
  previous: Record<K, number | null> | undefined,
  current: Record<K, number | null>,
): Record<K, number | null> | null {
  if (!previous) return null
  const base = wentDown(previous, current) ? zerosOf(current) : previous
  const out = {} as Record<K, number | null>
  for (const key of Object.keys(current) as K[]) out[key] = key in base ? counterDelta(base[key], current[key]) : null
  return out
}

/** Numbers from PostgreSQL: int8/numeric arrive as strings; null stays null. */
export function num(value: unknown): number | null {
  if (value === null || value === undefined) return null
  const n = typeof value === 'number' ? value : Number(value)
  return Number.isFinite(n) ? n : null
}

/** Timestamps to epoch ms; null stays null. */
export function epoch(value: unknown): number | null {
  if (value === null || value === undefined) return null
  const t = value instanceof Date ? value.getTime() : Date.parse(String(value))
  return Number.isFinite(t) ? t : null
}
