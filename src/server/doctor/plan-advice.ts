// The index one statement's newest sampled plan asks for: its Seq Scan of a table of at least 10,000
// live rows with a Filter estimated to keep at most a tenth of them (pg_sequential_scans' test of an
// index missing), the columns read from the scan's conditions (index-advice.ts), ordered by the table's
// column statistics when the agent sends them, and the existing index that already leads with them.
// For rules about one statement (pg_slow_statements), so that the doctor names the same index wherever
// it advises one.
import type { DoctorContext } from './context.ts'
import { type IndexAdvice, type PlanNode, adviseIndex, indexShape, scanConditions, seqScanNodes } from './index-advice.ts'
import { pgQualified } from './sql-text.ts'

const MIN_LIVE_ROWS = 10_000
const MAX_FILTER_SHARE = 0.1

type ScanNode = PlanNode & { Schema?: string; 'Plan Rows'?: number }


export interface PlanIndexAdvice extends IndexAdvice {
  /** `schema.table` as SQL. */
  table: string
  filter: string
}

/** The index the statement's newest plan in the window asks for, if it has such a scan (the largest table's first). */
export async function planIndexAdvice(ctx: DoctorContext, queryHash: string, windowMs: number): Promise<PlanIndexAdvice | undefined> {
  const [newest] = await ctx.plans(queryHash, windowMs)
  const plan = (newest?.plan_json as { Plan?: ScanNode } | null | undefined)?.Plan
  if (!plan) return undefined
  const tables = await ctx.tables()
  const candidates = seqScanNodes(plan)
    .filter((node) => node.Filter)
    .map((node) => {
      const table = tables.find((t) => t.table_name === node['Relation Name'] && (node.Schema === undefined || node.Schema === t.schema_name))
      return { node, table }
    })
    .filter(({ node, table }) => {
      const live = table?.n_live_tup ?? 0
      const rows = node['Plan Rows']
      return table !== undefined && live >= MIN_LIVE_ROWS && typeof rows === 'number' && rows <= MAX_FILTER_SHARE * live
    })
    .sort((a, b) => (b.table!.n_live_tup ?? 0) - (a.table!.n_live_tup ?? 0))
  for (const { node, table } of candidates) {
    const stats = (await ctx.columnStats()).entries.filter((c) => c.schema_name === table!.schema_name && c.table_name === table!.table_name)
    const shape = indexShape(scanConditions(plan, node), stats)
    if (shape.columns.length === 0) continue
    const indexes = (await ctx.indexes()).filter((i) => i.schema_name === table!.schema_name && i.table_name === table!.table_name)
    return { ...adviseIndex(table!.schema_name, table!.table_name, shape.columns, indexes, shape.whereNull), table: pgQualified(table!.schema_name, table!.table_name), filter: node.Filter! }
  }
  return undefined
}
