// The index one statement's newest sampled plan asks for: its Seq Scan of a table of at least 10,000
// live rows with a Filter estimated to keep at most a tenth of them (pg_sequential_scans' test of an
// index missing), the columns read from the scan's conditions (index-advice.ts), ordered by the table's
// column statistics when the agent sends them, and the existing index that already leads with them.
// For rules about one statement (pg_slow_statements), so that the doctor names the same index wherever
// it advises one.
// And the index an ORDER BY ... LIMIT asks for: a Limit over a Sort (a top-N sort, maybe under a Gather
// Merge) of a Seq Scan of a table of at least 10,000 live rows reads and sorts the whole table for a few
// rows; an index on the filter's equality columns, then the Sort Key's columns in its order, returns them
// in order and stops after the limit. Sort keys are read as columns of the scanned relation (quoted or
// bare, qualified by its alias or name) with their DESC / NULLS FIRST / NULLS LAST; a key that is an
// expression, has a COLLATE or a USING operator gives no advice.
import type { DoctorContext } from './context.ts'
import {
  type IndexAdvice,
  type KeyOrder,
  type PlanNode,
  adviseIndex,
  columnRef,
  filterConditions,
  indexShape,
  scanConditions,
  seqScanNodes,
} from './index-advice.ts'
import { pgQualified } from './sql-text.ts'

const MIN_LIVE_ROWS = 10_000
const MAX_FILTER_SHARE = 0.1

type ScanNode = PlanNode & { Schema?: string; 'Plan Rows'?: number; 'Sort Key'?: unknown }

export interface PlanIndexAdvice extends IndexAdvice {
  /** `schema.table` as SQL. */
  table: string
  filter: string
}

/** The index the statement's newest plan in the window asks for, if it has such a scan (the largest table's first). */
export async function planIndexAdvice(
  ctx: DoctorContext,
  queryHash: string,
  windowMs: number,
): Promise<PlanIndexAdvice | undefined> {
  const [newest] = await ctx.plans(queryHash, windowMs)
  const plan = (newest?.plan_json as { Plan?: ScanNode } | null | undefined)?.Plan
  if (!plan) return undefined
  const tables = await ctx.tables()
  const candidates = seqScanNodes(plan)
    .filter((node) => node.Filter)
    .map((node) => {
      const table = tables.find(
        (t) => t.table_name === node['Relation Name'] && (node.Schema === undefined || node.Schema === t.schema_name),
      )
      return { node, table }
    })
    .filter(({ node, table }) => {
      const live = table?.n_live_tup ?? 0
      const rows = node['Plan Rows']
      return table !== undefined && live >= MIN_LIVE_ROWS && typeof rows === 'number' && rows <= MAX_FILTER_SHARE * live
    })
    .sort((a, b) => (b.table!.n_live_tup ?? 0) - (a.table!.n_live_tup ?? 0))
  for (const { node, table } of candidates) {
    const stats = (await ctx.columnStats()).entries.filter(
      (c) => c.schema_name === table!.schema_name && c.table_name === table!.table_name,
    )
    const shape = indexShape(scanConditions(plan, node), stats)
    if (shape.columns.length === 0) continue
    const indexes = (await ctx.indexes()).filter(
      (i) => i.schema_name === table!.schema_name && i.table_name === table!.table_name,
    )
    return {
      ...adviseIndex(table!.schema_name, table!.table_name, shape.columns, indexes, shape.whereNull),
      table: pgQualified(table!.schema_name, table!.table_name),
      filter: node.Filter!,
    }
  }
  return undefined
}

export interface SortIndexAdvice extends IndexAdvice {
  /** `schema.table` as SQL. */
  table: string
  /** The Sort Key as the plan gives it (comma-joined; hostile text: for comments through commentText only). */
  sortKey: string
}

/** A Sort Key entry as a column of the scanned relation and its order; undefined for anything else. */
function sortKeyColumn(key: string, names: string[]): { column: string; order: KeyOrder } | undefined {
  const m = /^([\s\S]*?)(\s+DESC)?(\s+NULLS\s+(?:FIRST|LAST))?$/.exec(key.trim())
  if (!m) return undefined
  const ref = columnRef(m[1]!)
  if (!ref || (ref.qualifier !== null && !names.includes(ref.qualifier))) return undefined
  const desc = m[2] !== undefined
  const nulls = m[3]?.trim().split(/\s+/)[1]?.toUpperCase()
  // CREATE INDEX's defaults: NULLS LAST ascending, NULLS FIRST descending; only a differing one is written.
  const order: KeyOrder = desc
    ? nulls === 'LAST'
      ? ' DESC NULLS LAST'
      : ' DESC'
    : nulls === 'FIRST'
      ? ' NULLS FIRST'
      : ''
  return { column: ref.column, order }
}

const isGather = (n: ScanNode | undefined) => n?.['Node Type'] === 'Gather' || n?.['Node Type'] === 'Gather Merge'

/** The Limit → [Gather Merge →] Sort → [Gather →] Seq Scan chains of a plan: each Sort's keys and its scan. */
function limitedSorts(
  node: ScanNode | undefined,
  into: { keys: string[]; scan: ScanNode }[] = [],
  depth = 0,
): { keys: string[]; scan: ScanNode }[] {
  if (!node || typeof node !== 'object' || depth > 200) return into
  if (node['Node Type'] === 'Limit' && Array.isArray(node.Plans)) {
    let sort = node.Plans[0] as ScanNode | undefined
    if (isGather(sort) && Array.isArray(sort!.Plans)) sort = sort!.Plans[0] as ScanNode | undefined
    const keys = sort?.['Sort Key']
    if (
      sort?.['Node Type'] === 'Sort' &&
      Array.isArray(keys) &&
      keys.length > 0 &&
      keys.every((k) => typeof k === 'string') &&
      Array.isArray(sort.Plans)
    ) {
      let scan = sort.Plans[0] as ScanNode | undefined
      if (isGather(scan) && Array.isArray(scan!.Plans)) scan = scan!.Plans[0] as ScanNode | undefined
      if (scan?.['Node Type'] === 'Seq Scan' && typeof scan['Relation Name'] === 'string')
        into.push({ keys: keys as string[], scan })
    }
  }
  if (Array.isArray(node.Plans)) for (const child of node.Plans) limitedSorts(child as ScanNode, into, depth + 1)
  return into
}

/** The index the statement's newest plan's ORDER BY ... LIMIT asks for, if it sorts a large table read whole (see the header). */
export async function planSortIndexAdvice(
  ctx: DoctorContext,
  queryHash: string,
  windowMs: number,
): Promise<SortIndexAdvice | undefined> {
  const [newest] = await ctx.plans(queryHash, windowMs)
  const plan = (newest?.plan_json as { Plan?: ScanNode } | null | undefined)?.Plan
  if (!plan) return undefined
  const chains = limitedSorts(plan)
  if (chains.length === 0) return undefined
  const tables = await ctx.tables()
  for (const { keys, scan } of chains) {
    const relation = scan['Relation Name']!
    const table = tables.find(
      (t) => t.table_name === relation && (scan.Schema === undefined || scan.Schema === t.schema_name),
    )
    if (!table || (table.n_live_tup ?? 0) < MIN_LIVE_ROWS) continue
    const names = [scan.Alias ?? relation, relation]
    const sortColumns = keys.map((k) => sortKeyColumn(k, names))
    if (sortColumns.some((c) => c === undefined)) continue
    // The filter's equality columns first (ordered as for a filter's index), then the sort's.
    const equality = (scan.Filter ? filterConditions(scan.Filter, names) : []).filter(
      (c) => c.kind === 'equality' && !c.join,
    )
    const stats = (await ctx.columnStats()).entries.filter(
      (c) => c.schema_name === table.schema_name && c.table_name === table.table_name,
    )
    const columns = indexShape(equality, stats).columns
    const orders: KeyOrder[] = columns.map(() => '')
    for (const key of sortColumns) {
      if (columns.includes(key!.column)) continue
      columns.push(key!.column)
      orders.push(key!.order)
    }
    const indexes = (await ctx.indexes()).filter(
      (i) => i.schema_name === table.schema_name && i.table_name === table.table_name,
    )
    return {
      ...adviseIndex(table.schema_name, table.table_name, columns, indexes, [], orders),
      table: pgQualified(table.schema_name, table.table_name),
      sortKey: keys.join(', '),
    }
  }
  return undefined
}
