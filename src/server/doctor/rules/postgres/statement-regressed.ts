// A statement whose mean time regressed: over the last hour its mean execution time is at least 3 times
// its own mean over the 24 hours before (10 times: critical), with enough calls on both sides to mean
// something (20 each) and a mean that now costs something (1 ms; 0.01 → 0.05 ms is noise). The sudden
// slowdown after an index was dropped, statistics went stale or a plan flipped, which no absolute
// threshold catches on a statement that was fast (0.36 → 4.1 ms is slow for nobody but ten times
// the work). Names both means and call counts, exact from pg_stat_statements' deltas, and the plan
// change the stored plans show, if any, with the statement's page.
import type { StoredPlan } from '../../../store/statements/plans.ts'
import type { QueryStatsRow } from '../../../store/statements/reads.ts'
import { minuteFloor } from '../../../store/window.ts'
import type { DoctorContext } from '../../context.ts'
import { type FindingDraft, type Rule, severityAbove } from '../../types.ts'
import { pgNumber, urlSegment } from '../../sql-text.ts'

const defaults = {
  warning_ratio: 3,
  critical_ratio: 10,
  /** Calls each side needs: a statement run a few times has no mean to speak of. */
  min_calls: 20,
  /** The mean now, below which a regression is not worth a finding. */
  min_mean_ms: 1,
  /** The window judged, and the baseline before it. */
  recent_s: 3600,
  baseline_s: 24 * 3600,
  /** The statements of the recent window compared (the costliest by total time). */
  top_statements: 100,
}

/** Plans read per statement: the newest over both windows. */
const PLANS = 100

const excerpt = (text: string, n: number) => {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > n ? `${flat.slice(0, n)}…` : flat
}
const ms = (v: number) => (v >= 100 ? v.toFixed(0) : String(Number(v.toPrecision(3))))
const span = (s: number) =>
  s % 3600 === 0 ? `${s / 3600} hour${s === 3600 ? '' : 's'}` : `${Math.round(s / 60)} minutes`
const shape = (p: StoredPlan) =>
  `${p.seq_scans} sequential and ${p.index_scans} index scans, estimated cost ${p.total_cost ?? 'unknown'}`

/** Statement sums over [since, until), memoised per diagnosis. */
function statsBetween(
  ctx: DoctorContext,
  since: number,
  until: number,
  limit: number,
): Promise<Map<string, QueryStatsRow>> {
  return ctx.once(`statement_regressed:${since}:${until}:${limit}`, async () => {
    const rows = await ctx.store.listQueryStats(
      ctx.db.id,
      { since, until, minuteFloor: minuteFloor(ctx.now) },
      'total_time',
      limit,
    )
    return new Map(rows.map((r) => [r.query_hash, r]))
  })
}

/** The plan now and the one before it, when the stored plans of one source show a change; else undefined. */
function planChange(plans: StoredPlan[]): { before: StoredPlan; after: StoredPlan; at: number } | undefined {
  const after = plans[0]
  if (!after) return undefined
  const same = plans.filter((p) => p.source === after.source)
  let i = 1
  while (i < same.length && same[i]!.plan_hash === after.plan_hash) i++
  const before = same[i]
  return before ? { before, after, at: same[i - 1]!.ts } : undefined
}

export const statementRegressed: Rule<typeof defaults> = {
  id: 'pg_statement_regressed',
  summary: 'A statement whose mean time over the last hour is several times its own mean over the day before.',
  collectors: ['query_stats', 'explain_plans'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(statementRegressed)
    const recentMs = t.recent_s * 1000
    const baselineMs = t.baseline_s * 1000
    const recentStart = ctx.now - recentMs
    const recent = await ctx.queries(recentMs, 'total_time', t.top_statements)
    const candidates = recent.filter((q) => q.total_calls >= t.min_calls && q.mean_time_ms >= t.min_mean_ms)
    if (candidates.length === 0) return []
    // The baseline of every statement of the day before, not only of today's costliest.
    const before = await statsBetween(ctx, recentStart - baselineMs, recentStart, 10_000)
    const findings: FindingDraft[] = []
    for (const q of candidates) {
      const b = before.get(q.query_hash)
      if (!b || b.total_calls < t.min_calls || b.mean_time_ms <= 0) continue
      const ratio = q.mean_time_ms / b.mean_time_ms
      const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
      if (!severity) continue
      const change = planChange(await ctx.plans(q.query_hash, recentMs + baselineMs, PLANS))
      const page = `#/databases/${urlSegment(ctx.db.id)}/queries/${urlSegment(q.query_hash)}`
      findings.push({
        severity,
        object: q.query_hash,
        title: `Statement ${ratio.toFixed(1)}× slower than in the ${span(t.baseline_s)} before${change ? ', its plan changed' : ''}: ${excerpt(q.query_text, 60)}`,
        detail:
          `Statement ${q.query_hash} ran ${q.total_calls.toLocaleString('en-US')} times in the last ${span(t.recent_s)} with a mean of ${ms(q.mean_time_ms)} ms, ` +
          `against ${b.total_calls.toLocaleString('en-US')} calls with a mean of ${ms(b.mean_time_ms)} ms in the ${span(t.baseline_s)} before: ${ratio.toFixed(1)} × its own mean. ` +
          (change
            ? `Its plan changed at ${new Date(change.at).toISOString()}: before, ${shape(change.before)} (plan ${change.before.plan_hash}); now, ${shape(change.after)} (plan ${change.after.plan_hash}). `
            : 'Its stored plans show no change of plan (or none was sampled). ') +
          `Its page: ${page}. Text: ${excerpt(q.query_text, 300)}`,
        recommendation:
          'Find what changed for it: an index dropped or left invalid, statistics gone stale after a large load or delete (ANALYZE the tables it reads), a changed setting, more rows or a lock it now waits on. Compare its plans before and after; if the old plan was right, restore what it relied on.',
        how_to_investigate: [
          `${page}   -- the statement's page in the dashboard: its mean over time and its plans`,
          `GET /api/v1/databases/${ctx.db.id}/queries/${urlSegment(q.query_hash)}/explain   -- its plans before and after`,
          `SELECT calls, mean_exec_time, total_exec_time FROM pg_stat_statements WHERE queryid = ${pgNumber(q.query_hash)};`,
          `SELECT query FROM pg_stat_statements WHERE queryid = ${pgNumber(q.query_hash)};   -- its text, to run under EXPLAIN (ANALYZE, BUFFERS) with typical values`,
        ],
        how_to_fix: [
          `SELECT pg_stat_statements_reset(0, 0, ${pgNumber(q.query_hash)});   -- after the fix, to measure it afresh`,
        ],
        metrics: {
          query_hash: q.query_hash,
          mean_before_ms: Number(b.mean_time_ms.toFixed(3)),
          calls_before: b.total_calls,
          mean_after_ms: Number(q.mean_time_ms.toFixed(3)),
          calls_after: q.total_calls,
          ratio: Number(ratio.toFixed(2)),
          plan_before: change?.before.plan_hash ?? null,
          plan_after: change?.after.plan_hash ?? null,
        },
        objects: [q.query_hash],
      })
    }
    return findings
  },
}
