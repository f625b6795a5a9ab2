// A costly statement whose plan changed for a costlier one: among the statements with the most total
// time over the window, the newest stored plan (sampled by the agent or read from auto_explain) has a
// different shape from the plan before it, and its estimated cost grew. Plan flips after an index was
// dropped or statistics went stale are the classic sudden regression (pganalyze's plan statistics and
// pg_store_plans exist to catch them); dbm warns when the new plan is estimated at twice the old cost
// and is critical at ten times.
import type { StoredPlan } from '../../../store/statements/plans.ts'
import { type FindingDraft, type Rule, severityAbove } from '../../types.ts'
import { pgIdent, pgNumber, pgRegclass, pgString, urlSegment } from '../../sql-text.ts'

const defaults = {
  warning_cost_ratio: 2,
  critical_cost_ratio: 10,
  /** The costliest statements by total time whose plans are compared. */
  top_statements: 10,
  window_s: 24 * 3600,
}

/** The newest plans of a statement that are compared (about 8 hours of 5-minute samples). */
const PLANS = 100

interface PlanNode {
  'Relation Name'?: string
  Plans?: PlanNode[]
}

function relations(node: PlanNode | undefined, into = new Set<string>()): Set<string> {
  if (!node) return into
  if (node['Relation Name']) into.add(node['Relation Name'])
  for (const child of node.Plans ?? []) relations(child, into)
  return into
}

const planOf = (p: StoredPlan) => (p.plan_json as { Plan?: PlanNode } | null)?.Plan
const excerpt = (text: string, n: number) => {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > n ? `${flat.slice(0, n)}…` : flat
}
const shape = (p: StoredPlan) =>
  `${p.seq_scans} sequential and ${p.index_scans} index scans, estimated cost ${p.total_cost}`

export const planChanged: Rule<typeof defaults> = {
  id: 'pg_plan_changed',
  summary:
    'A costly statement whose newest plan has another shape and a higher estimated cost than the plan before it.',
  collectors: ['query_stats', 'explain_plans'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(planChanged)
    const top = await ctx.queries(t.window_s * 1000, 'total_time', t.top_statements)
    const findings: FindingDraft[] = []
    for (const q of top) {
      const stored = await ctx.plans(q.query_hash, t.window_s * 1000, PLANS)
      const current = stored[0]
      if (!current) continue
      // Sampled generic plans and auto_explain's plans of real executions are costed differently: compare like with like.
      const plans = stored.filter((p) => p.source === current.source)
      // The newest run of the current plan, and the plan before it.
      let i = 1
      while (i < plans.length && plans[i]!.plan_hash === current.plan_hash) i++
      const previous = plans[i]
      if (!previous) continue
      const changedAt = plans[i - 1]!.ts
      const before = previous.total_cost
      const after = current.total_cost
      if (before === null || after === null || before <= 0) continue
      const ratio = after / before
      const severity = severityAbove(ratio, t.warning_cost_ratio, t.critical_cost_ratio)
      if (!severity) continue
      const tables = [...relations(planOf(previous), relations(planOf(current)))].sort()
      findings.push({
        severity,
        object: q.query_hash,
        title: `The plan of a top statement changed: ${excerpt(q.query_text, 60)}`,
        detail: `Statement ${q.query_hash} (${q.total_calls.toLocaleString('en-US')} calls, ${q.mean_time_ms.toFixed(1)} ms mean) got a new plan at ${new Date(changedAt).toISOString()}: estimated cost ${before} before, ${after} now (${ratio.toFixed(1)} ×). Before: ${shape(previous)} (plan ${previous.plan_hash}); now: ${shape(current)} (plan ${current.plan_hash}). Tables: ${tables.join(', ') || 'none'}. Text: ${excerpt(q.query_text, 300)}`,
        recommendation:
          'Find what changed for the tables involved: an index dropped or left invalid, statistics gone stale after a large load or delete (ANALYZE them), a changed setting. Compare the two plans; if the old plan was right, restore what it relied on.',
        how_to_investigate: [
          `GET /api/v1/databases/${ctx.db.id}/queries/${urlSegment(q.query_hash)}/explain   -- the plans before and after`,
          `SELECT query FROM pg_stat_statements WHERE queryid = ${pgNumber(q.query_hash)};   -- its text, to run under EXPLAIN (ANALYZE, BUFFERS) with typical values for the $n parameters`,
          ...tables.map(
            (r) =>
              `SELECT relname, last_analyze, last_autoanalyze, n_mod_since_analyze, n_live_tup FROM pg_stat_user_tables WHERE relname = ${pgString(r)};`,
          ),
          ...tables.map(
            (r) =>
              `SELECT indexrelid::regclass AS index, indisvalid FROM pg_index WHERE indrelid = ${pgRegclass(null, r)};`,
          ),
        ],
        how_to_fix: tables.length > 0 ? tables.map((r) => `ANALYZE ${pgIdent(r)};`) : ['ANALYZE;'],
        objects: [q.query_hash, ...tables],
        metrics: {
          query_hash: q.query_hash,
          changed_at: new Date(changedAt).toISOString(),
          cost_before: before,
          cost_after: after,
          cost_ratio: Number(ratio.toFixed(2)),
          plan_before: previous.plan_hash,
          plan_after: current.plan_hash,
        },
      })
    }
    return findings
  },
}
