// The judgement both engines' error-rate rules make (postgres/log-error-rate.ts, clickhouse/log-error-rate.ts):
// the log entries of severity ERROR, FATAL or PANIC in the last window minutes (exact, from the log's
// counts, where an entry standing for `count` occurrences counts `count`) per minute, against the same
// rate over the hours before them. Kinds another rule judges are left out (one finding per cause).
import type { DoctorContext } from '../context.ts'
import type { Severity } from '../types.ts'
import { logCounts } from './postgres/log-evidence.ts'

export const ERROR_RATE_DEFAULTS = {
  window_minutes: 10,
  baseline_hours: 24,
  warning_ratio: 10,
  warning_per_minute: 5,
  critical_ratio: 100,
  critical_per_minute: 50,
}

export const ERROR_SEVERITIES = ['error', 'fatal', 'panic']
const MINUTE = 60_000

export interface ErrorRate {
  recent: number
  baseline: number
  /** Per minute, in the window and over the baseline. */
  rate: number
  baseRate: number
  severity: Severity | undefined
  /** The window: whole minutes, the current one included. */
  start: number
  end: number
}

export async function judgeErrorRate(
  ctx: DoctorContext,
  t: typeof ERROR_RATE_DEFAULTS,
  leftOut: ReadonlySet<string>,
): Promise<ErrorRate> {
  const end = Math.floor(ctx.now / MINUTE) * MINUTE + MINUTE
  const start = end - t.window_minutes * MINUTE
  const [recentCounts, baselineCounts] = await Promise.all([
    logCounts(ctx, start, end),
    logCounts(ctx, start - t.baseline_hours * 3_600_000, start),
  ])
  const errors = (counts: Map<string, Record<string, number>>) => {
    let n = 0
    for (const [kind, bySeverity] of counts) {
      if (leftOut.has(kind)) continue
      for (const s of ERROR_SEVERITIES) n += bySeverity[s] ?? 0
    }
    return n
  }
  const recent = errors(recentCounts)
  const baseline = errors(baselineCounts)
  const rate = recent / t.window_minutes
  const baseRate = baseline / (t.baseline_hours * 60)
  const above = (ratio: number, floor: number) => rate >= floor && rate >= ratio * baseRate
  const severity = above(t.critical_ratio, t.critical_per_minute)
    ? 'critical'
    : above(t.warning_ratio, t.warning_per_minute)
      ? 'warning'
      : undefined
  return { recent, baseline, rate, baseRate, severity, start, end }
}
