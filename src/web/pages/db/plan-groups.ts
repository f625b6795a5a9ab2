// A statement's logged plans grouped by plan_hash: with auto_explain every call logs its plan, so one
// plan comes back dozens of times. Each group is one plan with its samples (newest first), how many,
// when first and last seen, the min / median / max of the actual time (or of the cost, for plans
// explained without running them), the sources, and the times it took over from another plan.
import type { Static } from '@sinclair/typebox'
import type { QueryPlan } from '../../../shared/api/queries.ts'

/** What grouping reads of a plan as GET /queries/{hash}/explain sends it (QueryPlan). */
export type PlanSample = Pick<
  Static<typeof QueryPlan>,
  'ts' | 'plan_hash' | 'total_cost' | 'actual_time_ms' | 'source' | 'plan_changed'
>

export interface Spread {
  min: number
  median: number
  max: number
}

export interface PlanGroup<P extends PlanSample> {
  plan_hash: string
  /** Newest first. */
  samples: P[]
  latest: P
  /** Epoch ms of the oldest and the newest sample. */
  firstSeen: number
  lastSeen: number
  /** Actual time in ms over the samples that have one (EXPLAIN ANALYZE, auto_explain with analyze). */
  time: Spread | undefined
  cost: Spread | undefined
  sources: string[]
  /** Epoch ms of each sample where this plan replaced another (in time order), oldest first. */
  changedAt: number[]
}

/** The smallest, middle (mean of the two middle ones for an even count) and largest of `values`; undefined for none. */
export function spread(values: (number | null | undefined)[]): Spread | undefined {
  const sorted = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b)
  if (sorted.length === 0) return undefined
  const mid = sorted.length >> 1
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { min: sorted[0]!, median, max: sorted[sorted.length - 1]! }
}

/**
 * The plans grouped by plan_hash, the group seen last first. A plan "changed" where a sample's plan differs
 * from the sample before it in time; the oldest sample loaded keeps the server's mark (it compared it with
 * the plan before the window).
 */
export function groupPlans<P extends PlanSample>(plans: P[]): PlanGroup<P>[] {
  const ordered = plans.map((p) => ({ p, at: Date.parse(p.ts) })).sort((a, b) => a.at - b.at)
  const groups = new Map<string, { samples: P[]; changedAt: number[] }>()
  ordered.forEach(({ p, at }, i) => {
    const group = groups.get(p.plan_hash) ?? { samples: [], changedAt: [] }
    groups.set(p.plan_hash, group)
    group.samples.push(p)
    const changed = i === 0 ? p.plan_changed : ordered[i - 1]!.p.plan_hash !== p.plan_hash
    if (changed) group.changedAt.push(at)
  })
  return [...groups.entries()]
    .map(([plan_hash, { samples, changedAt }]): PlanGroup<P> => {
      const newestFirst = samples.slice().reverse()
      return {
        plan_hash,
        samples: newestFirst,
        latest: newestFirst[0]!,
        firstSeen: Date.parse(samples[0]!.ts),
        lastSeen: Date.parse(newestFirst[0]!.ts),
        time: spread(samples.map((s) => s.actual_time_ms)),
        cost: spread(samples.map((s) => s.total_cost)),
        sources: [...new Set(samples.map((s) => s.source))].sort(),
        changedAt,
      }
    })
    .sort((a, b) => b.lastSeen - a.lastSeen || b.firstSeen - a.firstSeen)
}
