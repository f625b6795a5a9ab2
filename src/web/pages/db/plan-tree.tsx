// A PostgreSQL plan (EXPLAIN FORMAT JSON, as the agent sends it) as a readable tree: each node's type,
// relation and index, startup..total cost, estimated against actual rows (in the warning colour when
// they are 10 times apart or more), loops and time, and its conditions. Names and conditions come from the
// monitored database: shown with <DbText>.
import { DbText } from '../../components/invisible.tsx'
import { fmtMs, fmtNum } from '../../components/ui.tsx'

export interface PlanNode {
  'Node Type'?: string
  'Relation Name'?: string
  Schema?: string
  Alias?: string
  'Index Name'?: string
  'Join Type'?: string
  'Scan Direction'?: string
  'Parent Relationship'?: string
  'Startup Cost'?: number
  'Total Cost'?: number
  'Plan Rows'?: number
  'Actual Rows'?: number
  'Actual Loops'?: number
  'Actual Total Time'?: number
  Plans?: PlanNode[]
  [detail: string]: unknown
}

/** The root node of a stored plan_json: `{Plan}`, `[{Plan}]` or a node itself. */
export function planRoot(planJson: unknown): { root: PlanNode; executionMs?: number; planningMs?: number } | undefined {
  const top = Array.isArray(planJson) ? planJson[0] : planJson
  if (!top || typeof top !== 'object') return undefined
  const t = top as Record<string, unknown>
  if (t.Plan && typeof t.Plan === 'object') {
    return {
      root: t.Plan as PlanNode,
      executionMs: typeof t['Execution Time'] === 'number' ? t['Execution Time'] : undefined,
      planningMs: typeof t['Planning Time'] === 'number' ? t['Planning Time'] : undefined,
    }
  }
  return 'Node Type' in t ? { root: t as PlanNode } : undefined
}

/** Estimated and actual rows 10 times apart or more. */
export function misestimated(node: PlanNode): boolean {
  const est = node['Plan Rows']
  const act = node['Actual Rows']
  if (typeof est !== 'number' || typeof act !== 'number') return false
  const hi = Math.max(est, act, 1)
  const lo = Math.max(Math.min(est, act), 1)
  return hi / lo >= 10
}

const CONDITIONS = [
  'Index Cond',
  'Recheck Cond',
  'Hash Cond',
  'Merge Cond',
  'Join Filter',
  'Filter',
  'Sort Key',
  'Group Key',
  'Rows Removed by Filter',
] as const

const cost = (n: number | undefined) => (typeof n === 'number' ? n.toFixed(2) : '?')

function Node({ node }: { node: PlanNode }) {
  const type = node['Node Type'] ?? 'Node'
  const join = node['Join Type'] && type !== 'Hash' ? `${node['Join Type']} ` : ''
  const relation = node['Relation Name'] ? `${node.Schema ? `${node.Schema}.` : ''}${node['Relation Name']}` : undefined
  const loops = node['Actual Loops']
  const analysed = typeof node['Actual Rows'] === 'number'
  const timeMs = typeof node['Actual Total Time'] === 'number' ? node['Actual Total Time'] * (loops ?? 1) : undefined
  const bad = misestimated(node)
  return (
    <li>
      <div class={`plan-node${bad ? ' misestimate' : ''}`}>
        <div class="plan-title">
          <strong>
            <DbText text={`${join}${type}`} />
          </strong>
          {node['Scan Direction'] === 'Backward' && <span class="muted"> backward</span>}
          {node['Index Name'] && (
            <>
              {' '}
              using{' '}
              <code>
                <DbText text={node['Index Name']} />
              </code>
            </>
          )}
          {relation && (
            <>
              {' '}
              on{' '}
              <code>
                <DbText text={relation} />
              </code>
              {node.Alias && node.Alias !== node['Relation Name'] && (
                <span class="muted">
                  {' '}
                  <DbText text={node.Alias} />
                </span>
              )}
            </>
          )}
        </div>
        <div class="plan-figures small">
          <span title="startup cost .. total cost">
            cost {cost(node['Startup Cost'])}..{cost(node['Total Cost'])}
          </span>
          <span
            class={bad ? 'sev-warning' : undefined}
            title={bad ? 'The estimate is 10 times or more off the actual rows' : 'rows per loop'}
          >
            rows {fmtNum(node['Plan Rows'])} est.
            {analysed && <> / {fmtNum(node['Actual Rows'])} actual</>}
            {bad && <strong> ⚠ 10×+ off</strong>}
          </span>
          {loops !== undefined && <span>loops {fmtNum(loops)}</span>}
          {timeMs !== undefined && <span>time {fmtMs(timeMs)}</span>}
        </div>
        {CONDITIONS.filter((c) => node[c] !== undefined).map((c) => (
          <div key={c} class="plan-cond small">
            <span class="muted">{c}:</span>{' '}
            <code>
              <DbText text={Array.isArray(node[c]) ? (node[c] as unknown[]).join(', ') : String(node[c])} />
            </code>
          </div>
        ))}
      </div>
      {node.Plans && node.Plans.length > 0 && (
        <ul>
          {node.Plans.map((child, i) => (
            <Node key={i} node={child} />
          ))}
        </ul>
      )}
    </li>
  )
}

export function PlanTree({ planJson }: { planJson: unknown }) {
  const plan = planRoot(planJson)
  if (!plan) return <p class="muted">This plan is not in EXPLAIN's JSON format.</p>
  return (
    <div class="plan">
      {(plan.planningMs !== undefined || plan.executionMs !== undefined) && (
        <p class="small muted">
          {plan.planningMs !== undefined && <>Planning {fmtMs(plan.planningMs)}. </>}
          {plan.executionMs !== undefined && <>Execution {fmtMs(plan.executionMs)}.</>}
        </p>
      )}
      <ul class="plan-tree" aria-label="Plan nodes">
        <Node node={plan.root} />
      </ul>
    </div>
  )
}
