// Which columns an index needs, read from a plan: the conditions of a Seq Scan's Filter and of the joins
// above it that use its relation (Join Filter, Hash Cond, Merge Cond), as EXPLAIN deparses them, e.g.
// `((customer_id = $1) AND (created_at > (now() - '1 day'::interval)))` or `(c.id = o.customer_id)`.
// A B-tree serves equality on its leading columns and then one range, so the advice is the columns the
// filter compares by equality (=, = ANY (...)), in the order the plan has them, then those a join
// compares by equality, then the first column compared by a range (<, <=, >, >=); `col IS NULL` (a
// soft-delete marker, typically) becomes the partial index's WHERE rather than a key. Conditions under
// OR, on expressions or by other operators (LIKE, <>) are left out: an index on the rest still narrows
// the scan. The filter's equality columns are ordered by the table's column statistics (pg_stats, sent
// by the `column_stats` collector), the most selective first: the share of the rows one value finds,
// (1 - null_frac) / distinct values, with a negative n_distinct a share of reltuples; equal ones keep
// the plan's order. Without statistics for each of them they keep the plan's order (PostgreSQL orders a
// filter's conditions by their cost, not their selectivity). Names come out quoted the way PostgreSQL
// needs them, so the CREATE INDEX built from them is safe to run.
import { parseIndexDef } from './rules/postgres/duplicate-indexes.ts'
import { pgIdent, pgQualified } from './sql-text.ts'

export type ConditionKind = 'equality' | 'range' | 'null'

export interface ColumnCondition {
  /** The column's name as PostgreSQL stores it (unquoted). */
  column: string
  kind: ConditionKind
  /** True when compared with a column of another relation (a join condition). */
  join: boolean
}

/** Splits `text` at top level (outside quotes and parentheses) on `separator` (case-insensitive). */
function splitTop(text: string, separator: string): string[] {
  const parts: string[] = []
  const upper = text.toUpperCase()
  let depth = 0
  let quote: string | null = null
  let from = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quote) {
      if (c === quote) {
        if (text[i + 1] === quote) i++
        else quote = null
      }
    } else if (c === "'" || c === '"') quote = c
    else if (c === '(' || c === '[') depth++
    else if (c === ')' || c === ']') depth--
    else if (depth === 0 && upper.startsWith(separator, i)) {
      parts.push(text.slice(from, i))
      i += separator.length - 1
      from = i + 1
    }
  }
  parts.push(text.slice(from))
  return parts.map((p) => p.trim())
}

/**
 * `text` without the parentheses that enclose all of it, however many layers (and the white space
 * around them), in one pass: each opening parenthesis's match is found once (outside quotes), then the
 * layers are peeled while the n-th opening from the left closes at the n-th character from the right
 * (white space between layers skipped). A crafted filter of 40,000 layers took seconds when each layer
 * rescanned the text (a hostile review); this is linear.
 */
function unwrap(text: string): string {
  const t = text.trim()
  if (!t.startsWith('(')) return t
  const match = new Int32Array(t.length).fill(-1)
  const open: number[] = []
  let quote: string | null = null
  for (let i = 0; i < t.length; i++) {
    const c = t[i]!
    if (quote) {
      if (c === quote) {
        if (t[i + 1] === quote) i++
        else quote = null
      }
    } else if (c === "'" || c === '"') quote = c
    else if (c === '(') open.push(i)
    else if (c === ')' && open.length > 0) match[open.pop()!] = i
  }
  let from = 0
  let to = t.length - 1
  while (from < to && t[from] === '(' && match[from] === to) {
    from++
    to--
    while (from <= to && /\s/.test(t[from]!)) from++
    while (to >= from && /\s/.test(t[to]!)) to--
  }
  return t.slice(from, to + 1)
}

/** One identifier (bare or "quoted") at the start of `text`: its name and the rest. */
function identifier(text: string): { name: string; rest: string } | undefined {
  if (text.startsWith('"')) {
    let name = ''
    for (let i = 1; i < text.length; i++) {
      if (text[i] === '"') {
        if (text[i + 1] === '"') {
          name += '"'
          i++
        } else {
          return { name, rest: text.slice(i + 1) }
        }
      } else {
        name += text[i]
      }
    }
    return undefined
  }
  const bare = /^[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*/.exec(text)
  return bare ? { name: bare[0], rest: text.slice(bare[0].length) } : undefined
}

/** A column reference: `col`, `alias.col`, `(col)::type` or `(alias.col)::type`; undefined for anything else. */
export function columnRef(operand: string): { qualifier: string | null; column: string } | undefined {
  let t = unwrap(operand)
  const cast = /^\(([\s\S]*)\)::[\w\s."[\]]+$/.exec(t)
  if (cast) t = unwrap(cast[1]!)
  const first = identifier(t)
  if (!first) return undefined
  if (first.rest === '') return /^(true|false|null)$/i.test(t) ? undefined : { qualifier: null, column: first.name }
  if (!first.rest.startsWith('.')) return undefined
  const second = identifier(first.rest.slice(1))
  return second && second.rest === '' ? { qualifier: first.name, column: second.name } : undefined
}

const RANGE = ['<=', '>=', '<', '>']

/** The comparison at the top level of one condition: operator and both sides. */
function comparison(condition: string): { op: string; left: string; right: string } | undefined {
  for (const op of ['= ANY ', ' = ', ...RANGE.map((o) => ` ${o} `)]) {
    const parts = splitTop(condition, op)
    if (parts.length === 2) return { op: op.trim(), left: parts[0]!, right: parts[1]! }
  }
  return undefined
}

/**
 * The columns of the scanned relation that `filter` compares in a way a B-tree serves. `names` are
 * the names a column of the scanned relation may be qualified with (its alias and its table name); an
 * unqualified column is the scanned relation's (EXPLAIN qualifies columns only when several relations
 * are in the query).
 */
/**
 * Filters longer than this are not read: a plan's text comes from the monitored server (or whoever holds
 * an agent key), and a filter's conditions are split and unwrapped once per level of AND nesting.
 * PostgreSQL's names are at most 63 bytes, so no real filter worth an index comes near it.
 */
export const MAX_FILTER_LENGTH = 100_000

export function filterConditions(filter: string, names: string[], unqualifiedIsOwn = true): ColumnCondition[] {
  if (filter.length > MAX_FILTER_LENGTH) return []
  const own = (ref: { qualifier: string | null } | undefined) =>
    ref !== undefined && (ref.qualifier === null ? unqualifiedIsOwn : names.includes(ref.qualifier))
  const found: ColumnCondition[] = []
  for (const part of splitTop(unwrap(filter), ' AND ')) {
    const condition = unwrap(part)
    if (splitTop(condition, ' OR ').length > 1) continue
    const isNull = /^([\s\S]+) IS NULL$/i.exec(condition)
    if (isNull) {
      const ref = columnRef(isNull[1]!)
      if (own(ref)) found.push({ column: ref!.column, kind: 'null', join: false })
      continue
    }
    const cmp = comparison(condition)
    if (!cmp) continue
    const left = columnRef(cmp.left)
    const right = cmp.op === '= ANY' ? undefined : columnRef(cmp.right)
    // The scanned relation's column on one side, and on the other a value or another relation's column.
    const [ref, other, flipped] =
      own(left) && !own(right)
        ? [left!, right, false]
        : own(right) && !own(left)
          ? [right!, left, true]
          : [undefined, undefined, false]
    if (!ref) continue
    if (cmp.op === '= ANY' && flipped) continue
    const kind: ConditionKind = cmp.op === '=' || cmp.op === '= ANY' ? 'equality' : 'range'
    found.push({ column: ref.column, kind, join: other !== undefined })
  }
  return found
}

/** A plan node as EXPLAIN (FORMAT JSON) writes it, the fields read here. */
export interface PlanNode {
  'Node Type'?: string
  'Relation Name'?: string
  Alias?: string
  Filter?: string
  'Join Filter'?: string
  'Hash Cond'?: string
  'Merge Cond'?: string
  Plans?: PlanNode[]
}

/**
 * The Seq Scans of a plan that name their relation, depth first. A plan comes from the monitored server
 * (or whoever holds an agent key): only arrays are walked as children, and no deeper than 200 levels.
 */
export function seqScanNodes<N extends PlanNode>(node: N | undefined, into: N[] = [], depth = 0): N[] {
  if (!node || typeof node !== 'object' || depth > 200) return into
  if (node['Node Type'] === 'Seq Scan' && node['Relation Name']) into.push(node)
  if (Array.isArray(node.Plans)) for (const child of node.Plans) seqScanNodes(child as N, into, depth + 1)
  return into
}

/** The path from `root` down to `target` (both included), or undefined when it is not in the tree. */
function pathTo(root: PlanNode, target: PlanNode): PlanNode[] | undefined {
  if (root === target) return [root]
  for (const child of root.Plans ?? []) {
    const path = pathTo(child, target)
    if (path) return [root, ...path]
  }
  return undefined
}

/** The conditions on `scan`'s relation: its Filter's, then those of the joins above it that name its alias. */
export function scanConditions(root: PlanNode, scan: PlanNode): ColumnCondition[] {
  const relation = scan['Relation Name']
  if (!relation) return []
  const names = [scan.Alias ?? relation, relation]
  const found = scan.Filter ? filterConditions(scan.Filter, names) : []
  for (const node of (pathTo(root, scan) ?? []).slice(0, -1).reverse()) {
    for (const cond of [node['Join Filter'], node['Hash Cond'], node['Merge Cond']]) {
      if (cond) found.push(...filterConditions(cond, names, false).filter((c) => c.join))
    }
  }
  return found
}

export interface IndexShapeAdvice {
  /** Key columns, unquoted, in index order. */
  columns: string[]
  /** Columns the scan wants NULL: the partial index's predicate. */
  whereNull: string[]
  /** What ordered the filter's equality columns: their statistics, or the plan (one column, or no statistics for each). */
  order: 'n_distinct' | 'plan'
  /** With order 'n_distinct': the distinct values of each, the first column's first, e.g. `customer_id first: about 5,000 distinct values against 3 for status`. */
  reason?: string
}

/** A column's planner statistics as the advice reads them (ColumnStat of the wire, one table's). */
export interface ColumnStatistics {
  column_name: string
  n_distinct: number
  null_frac: number
  reltuples: number
}

/** The distinct values pg_stats estimates: n_distinct, or when negative that share of reltuples; undefined when unknown. */
export function distinctValues(s: ColumnStatistics): number | undefined {
  if (s.n_distinct > 0) return s.n_distinct
  if (s.n_distinct < 0 && s.reltuples > 0) return -s.n_distinct * s.reltuples
  return undefined
}

const count = (v: number) => Math.round(v).toLocaleString('en-US')

/** The filter's equality columns, the most selective first when each has statistics (ties in the plan's order). */
function orderEquality(
  columns: string[],
  stats: readonly ColumnStatistics[],
): Pick<IndexShapeAdvice, 'order' | 'reason'> & { columns: string[] } {
  if (columns.length < 2) return { columns, order: 'plan' }
  const known = columns.map((column) => {
    const s = stats.find((x) => x.column_name === column)
    const distinct = s && distinctValues(s)
    return {
      column,
      distinct,
      share: distinct === undefined ? undefined : (1 - Math.min(1, Math.max(0, s!.null_frac))) / distinct,
      nullFrac: s?.null_frac ?? 0,
    }
  })
  if (known.some((k) => k.share === undefined)) return { columns, order: 'plan' }
  const sorted = [...known].sort((a, b) => a.share! - b.share!)
  const about = (k: (typeof known)[number]) =>
    `${count(k.distinct!)}${k.nullFrac >= 0.005 ? ` (${(k.nullFrac * 100).toFixed(1)} % null)` : ''}`
  const [first, ...rest] = sorted
  return {
    columns: sorted.map((k) => k.column),
    order: 'n_distinct',
    reason: `${pgIdent(first!.column)} first: about ${about(first!)} distinct values against ${rest.map((k) => `${about(k)} for ${pgIdent(k.column)}`).join(', ')}`,
  }
}

/**
 * The index for these conditions: filter equality (the most selective first when `stats`, the scanned
 * table's column statistics, cover them), then join equality, then one range column; IS NULL as the predicate.
 */
export function indexShape(conditions: ColumnCondition[], stats: readonly ColumnStatistics[] = []): IndexShapeAdvice {
  const columns: string[] = []
  const add = (c: ColumnCondition | undefined) => c && !columns.includes(c.column) && columns.push(c.column)
  const equality = [...new Set(conditions.filter((c) => c.kind === 'equality' && !c.join).map((c) => c.column))]
  const ordered = orderEquality(equality, stats)
  columns.push(...ordered.columns)
  for (const c of conditions) if (c.kind === 'equality' && c.join) add(c)
  add(conditions.find((c) => c.kind === 'range' && !columns.includes(c.column)))
  const whereNull = [
    ...new Set(conditions.filter((c) => c.kind === 'null' && !columns.includes(c.column)).map((c) => c.column)),
  ]
  // Only IS NULL conditions: the column itself is the key (a B-tree finds NULLs).
  if (columns.length === 0 && whereNull.length > 0) return { columns: [whereNull[0]!], whereNull: [], order: 'plan' }
  return { columns, whereNull, order: ordered.order, ...(ordered.reason ? { reason: ordered.reason } : {}) }
}

/** The key columns alone (indexShape's). */
export const indexColumns = (conditions: ColumnCondition[], stats: readonly ColumnStatistics[] = []): string[] =>
  indexShape(conditions, stats).columns

export interface ExistingIndex {
  index_name: string
  index_def: string
  is_valid: boolean
}

export interface IndexAdvice {
  /** Unquoted column names, in index order. */
  columns: string[]
  /** `CREATE INDEX CONCURRENTLY ON schema.table (a, b) [WHERE c IS NULL];` with every name quoted as needed. */
  create: string
  /** A valid B-tree index of the table whose leading key columns are these (in any order for the equality ones). */
  existing?: {
    index_name: string
    index_def: string /** The index holds every advised column in its leading keys. */
    complete: boolean
  }
}

/** The index for `columns` on the table, and any existing index that already leads with them. */
/** A key's order after its column, as CREATE INDEX writes it: one of these fixed texts, never the plan's. */
export type KeyOrder = '' | ' DESC' | ' NULLS FIRST' | ' DESC NULLS LAST'

export function adviseIndex(
  schema: string,
  table: string,
  columns: string[],
  indexes: ExistingIndex[],
  whereNull: string[] = [],
  orders: readonly KeyOrder[] = [],
): IndexAdvice {
  const where = whereNull.length > 0 ? ` WHERE ${whereNull.map((c) => `${pgIdent(c)} IS NULL`).join(' AND ')}` : ''
  const keys = columns.map((c, i) => `${pgIdent(c)}${orders[i] ?? ''}`)
  const advice: IndexAdvice = {
    columns,
    create: `CREATE INDEX CONCURRENTLY ON ${pgQualified(schema, table)} (${keys.join(', ')})${where};`,
  }
  let best: IndexAdvice['existing'] & { leading: number; first: boolean }
  for (const index of indexes) {
    if (!index.is_valid) continue
    const shape = parseIndexDef(index.index_def)
    if (shape?.method !== 'btree' || shape.predicate !== null) continue
    // Key columns as pg_get_indexdef writes them (quoted when needed, maybe followed by a collation, an
    // opclass or an ordering) by name; an expression key is none.
    const keys = shape.columns.map((k) => {
      const id = identifier(k.trim())
      return id && (id.rest === '' || /^\s/.test(id.rest)) ? id.name : null
    })
    let leading = 0
    while (
      leading < columns.length &&
      leading < keys.length &&
      keys[leading] !== null &&
      columns.includes(keys[leading]!)
    )
      leading++
    if (leading === 0) continue
    // More leading columns wins; of as many, the one that starts with the first advised column.
    if (!best! || leading > best.leading || (leading === best.leading && keys[0] === columns[0] && !best.first))
      best = {
        index_name: index.index_name,
        index_def: index.index_def,
        complete: leading === columns.length,
        leading,
        first: keys[0] === columns[0],
      }
  }
  if (best!) advice.existing = { index_name: best.index_name, index_def: best.index_def, complete: best.complete }
  return advice
}
