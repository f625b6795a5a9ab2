// Deltas of cumulative counters between two samples, reset-aware: a counter that went down was
// reset (stats reset, server restart), so the new value is the increase since the reset.

export function counterDelta(previous: number | null | undefined, current: number | null | undefined): number | null {
  if (current === null || current === undefined) return null
  if (previous === null || previous === undefined) return current
  return current >= previous ? current - previous : current
}

/** Deltas of every key of `current`; null for the first sample (no previous one). */
export function deltaOf<K extends string>(
  previous: Record<K, number | null> | undefined,
  current: Record<K, number | null>,
): Record<K, number | null> | null {
  if (!previous) return null
  const out = {} as Record<K, number | null>
  for (const key of Object.keys(current) as K[]) out[key] = counterDelta(previous[key], current[key])
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
