// The wire entry for one EXPLAIN result, shared by the sampled plans (explain-plans.ts) and auto_explain's
// log (auto-explain-log.ts); a leaf module so that neither of the two imports the other back.
import { createHash } from 'node:crypto'
import type { ExplainPlan } from '../../../shared/wire.ts'
import { maskSecretStatements } from '../../secret-statements.ts'

export interface PlanNode {
  'Node Type'?: string
  'Relation Name'?: string
  'Index Name'?: string
  'Join Type'?: string
  'Scan Direction'?: string
  Strategy?: string
  'Parent Relationship'?: string
  'Total Cost'?: number
  'Plan Rows'?: number
  'Actual Total Time'?: number
  'Actual Rows'?: number
  'Actual Loops'?: number
  Plans?: PlanNode[]
}

function shape(node: PlanNode): unknown {
  return [
    node['Node Type'],
    node['Relation Name'] ?? null,
    node['Index Name'] ?? null,
    node['Join Type'] ?? null,
    node['Scan Direction'] ?? null,
    node.Strategy ?? null,
    node['Parent Relationship'] ?? null,
    (node.Plans ?? []).map(shape),
  ]
}

export function planHash(plan: PlanNode): string {
  return createHash('sha256')
    .update(JSON.stringify(shape(plan)))
    .digest('hex')
    .slice(0, 16)
}

function countNodes(node: PlanNode, types: readonly string[]): number {
  const own = types.includes(node['Node Type'] ?? '') ? 1 : 0
  return own + (node.Plans ?? []).reduce((sum, child) => sum + countNodes(child, types), 0)
}

/** An EXPLAIN result whose 'Query Text' (auto_explain's, possibly several statements) has its secrets masked. */
function withMaskedText<T extends object>(explained: T): T {
  const text = (explained as { 'Query Text'?: unknown })['Query Text']
  return typeof text === 'string' ? { ...explained, 'Query Text': maskSecretStatements(text) } : explained
}

/** The wire entry for one EXPLAIN result (the top element of EXPLAIN's JSON array). */
export function planEntry(
  queryHash: string,
  ts: number,
  explained: { Plan: PlanNode; 'Execution Time'?: number },
  source: ExplainPlan['source'],
): ExplainPlan {
  const plan = explained.Plan
  const analysed = plan['Actual Total Time'] !== undefined
  return {
    query_hash: queryHash,
    ts,
    // auto_explain's entries carry the statement's text, which may hold several statements.
    plan_json: withMaskedText(explained),
    plan_hash: planHash(plan),
    total_cost: plan['Total Cost'] ?? null,
    actual_time_ms: explained['Execution Time'] ?? (analysed ? (plan['Actual Total Time'] ?? 0) : null),
    seq_scans: countNodes(plan, ['Seq Scan']),
    index_scans: countNodes(plan, ['Index Scan', 'Index Only Scan', 'Bitmap Index Scan']),
    rows_estimated: plan['Plan Rows'] ?? null,
    rows_actual: analysed ? (plan['Actual Rows'] ?? 0) * (plan['Actual Loops'] ?? 1) : null,
    source,
  }
}
