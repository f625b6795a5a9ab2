// Redundant indexes, PgHero's duplicate_indexes: on the same table, with the same method and the same
// predicate, an index whose key columns are a leading prefix of another valid index's (btree) or the
// same columns (any method) is redundant; the covering index serves every query the redundant one
// would. Primary and unique indexes are never the redundant one (they enforce a constraint); of two
// identical plain indexes the one with fewer scans is (queries use the other), and of two equally
// scanned the one with the greater name. Read from the indexes' definitions. pg_unused_indexes leaves
// the indexes named here (either side) to this rule, so following both never drops every copy.
import type { IndexRow } from '../../../store/objects/types.ts'
import { type FindingDraft, type Rule, bytes } from '../../types.ts'
import { pgQualified, pgRegclass, pgObject } from '../../sql-text.ts'

const defaults = {
  /** Redundant indexes named one finding each, the largest first; the rest are counted in one more. */
  max_findings: 10,
}

export interface IndexShape {
  method: string
  /** Key columns or expressions, with their collation, opclass and ordering as pg_get_indexdef writes them. */
  columns: string[]
  include: string[]
  predicate: string | null
}

/** The comma-separated list inside the parentheses that open just before `start`, and where it ends. */
function readList(s: string, start: number): { items: string[]; end: number } | undefined {
  const items: string[] = []
  let item = ''
  let depth = 0
  let quote: string | null = null
  for (let i = start; i < s.length; i++) {
    const c = s[i]!
    if (quote) {
      if (c === quote) quote = null
    } else if (c === '"' || c === "'") quote = c
    else if (c === '(') depth++
    else if (c === ')' && depth > 0) depth--
    else if (c === ')' || (c === ',' && depth === 0)) {
      items.push(item.trim())
      item = ''
      if (c === ')') return { items, end: i + 1 }
      continue
    }
    item += c
  }
  return undefined
}

/** Method, columns, INCLUDE columns and predicate of a pg_get_indexdef text; undefined if it does not parse. */
export function parseIndexDef(def: string): IndexShape | undefined {
  const head = /^CREATE (?:UNIQUE )?INDEX [\s\S]+? USING (\w+) \(/.exec(def)
  if (!head) return undefined
  const keys = readList(def, head[0].length)
  if (!keys) return undefined
  let rest = def.slice(keys.end)
  let include: string[] = []
  if (rest.startsWith(' INCLUDE (')) {
    const list = readList(rest, ' INCLUDE ('.length)
    if (!list) return undefined
    include = list.items
    rest = rest.slice(list.end)
  }
  const where = rest.indexOf(' WHERE ')
  return {
    method: head[1]!,
    columns: keys.items,
    include,
    predicate: where < 0 ? null : rest.slice(where + ' WHERE '.length),
  }
}

const same = (a: string[], b: string[]) => a.length === b.length && a.every((c, i) => c === b[i])
const sameSet = (a: string[], b: string[]) => same([...a].sort(), [...b].sort())

/** True when `cover` serves every query `index` serves. */
function covers(cover: IndexShape, index: IndexShape): boolean {
  if (cover.method !== index.method || cover.predicate !== index.predicate) return false
  const prefix = index.method === 'btree' ? cover.columns.slice(0, index.columns.length) : cover.columns
  if (!same(prefix, index.columns)) return false
  const coverAll = new Set([...cover.columns, ...cover.include])
  return index.include.every((c) => coverAll.has(c))
}

export interface Parsed {
  row: IndexRow
  shape: IndexShape
}

/** Of two identical indexes, true when `keep` is the one to keep: a constraint's, then the more scanned, then the smaller name. */
function keptOver(keep: IndexRow, drop: IndexRow): boolean {
  const constraint = (i: IndexRow) => Number(i.is_primary || i.is_unique)
  if (constraint(keep) !== constraint(drop)) return constraint(keep) > constraint(drop)
  if ((keep.idx_scan ?? 0) !== (drop.idx_scan ?? 0)) return (keep.idx_scan ?? 0) > (drop.idx_scan ?? 0)
  return keep.index_name < drop.index_name
}

/** Each redundant valid index with the index that covers it (shared with pg_unused_indexes). */
export function redundantIndexes(rows: IndexRow[]): { index: Parsed; cover: Parsed }[] {
  const byTable = new Map<string, Parsed[]>()
  for (const row of rows) {
    const shape = row.is_valid ? parseIndexDef(row.index_def) : undefined
    if (!shape) continue
    const key = JSON.stringify([row.schema_name, row.table_name])
    byTable.set(key, [...(byTable.get(key) ?? []), { row, shape }])
  }
  const redundant: { index: Parsed; cover: Parsed }[] = []
  for (const list of byTable.values()) {
    for (const index of list) {
      if (index.row.is_primary || index.row.is_unique) continue
      const candidates = list.filter((c) => c !== index && covers(c.shape, index.shape))
      // Of identical indexes, keep the one keptOver() prefers; prefer the tightest cover.
      const cover = candidates
        .filter(
          (c) =>
            !same(c.shape.columns, index.shape.columns) ||
            !sameSet(c.shape.include, index.shape.include) ||
            keptOver(c.row, index.row),
        )
        .sort(
          (a, b) =>
            a.shape.columns.length - b.shape.columns.length || Number(b.row.is_unique) - Number(a.row.is_unique),
        )[0]
      if (cover) redundant.push({ index, cover })
    }
  }
  return redundant
}

export const duplicateIndexes: Rule<typeof defaults> = {
  id: 'pg_duplicate_indexes',
  summary: 'Redundant indexes: another valid index of the same table covers every query they serve.',
  collectors: ['indexes'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(duplicateIndexes)
    const redundant = redundantIndexes(await ctx.indexes())
    redundant.sort((a, b) => (b.index.row.size_bytes ?? 0) - (a.index.row.size_bytes ?? 0))

    const findings: FindingDraft[] = redundant.slice(0, t.max_findings).map(({ index, cover }) => {
      const i = index.row
      const name = pgQualified(i.schema_name, i.index_name)
      const coverName = pgQualified(cover.row.schema_name, cover.row.index_name)
      const table = pgQualified(i.schema_name, i.table_name)
      const how = same(index.shape.columns, cover.shape.columns)
        ? 'indexes the same columns'
        : 'starts with all of its columns'
      const size = i.size_bytes === null ? '' : ` (${bytes(i.size_bytes)})`
      return {
        severity: 'warning',
        object: pgObject(i.schema_name, i.index_name),
        objects: [
          pgObject(i.schema_name, i.index_name),
          pgObject(cover.row.schema_name, cover.row.index_name),
          pgObject(i.schema_name, i.table_name),
        ],
        title: `Redundant index ${name}`,
        detail: `${name}${size} on ${table} is covered by ${coverName}, which ${how} (${index.shape.method} (${index.shape.columns.join(', ')}) against ${cover.shape.method} (${cover.shape.columns.join(', ')})${index.shape.predicate ? `, both WHERE ${index.shape.predicate}` : ''}). Every write to ${table} maintains both; queries can use ${coverName} instead.`,
        recommendation: `Drop ${name}; ${coverName} serves the same lookups.`,
        how_to_investigate: [
          `SELECT indexrelid::regclass AS index, idx_scan, pg_size_pretty(pg_relation_size(indexrelid)) AS size, pg_get_indexdef(indexrelid) FROM pg_stat_user_indexes WHERE relid = ${pgRegclass(i.schema_name, i.table_name)} ORDER BY 1;`,
          `SELECT conname FROM pg_constraint WHERE conindid = ${pgRegclass(i.schema_name, i.index_name)};   -- an index backing a constraint is dropped with the constraint`,
        ],
        how_to_fix: [`DROP INDEX CONCURRENTLY ${name};`],
        metrics: {
          size_bytes: i.size_bytes,
          idx_scan: i.idx_scan,
          covering_index: pgObject(cover.row.schema_name, cover.row.index_name),
        },
      }
    })

    const rest = redundant.slice(t.max_findings)
    if (rest.length > 0) {
      const size = rest.reduce((sum, r) => sum + (r.index.row.size_bytes ?? 0), 0)
      findings.push({
        severity: 'warning',
        title: `${rest.length} more redundant indexes`,
        detail: `Besides the indexes named above, ${rest.length} more indexes are covered by another index of their table, ${bytes(size)} in all: ${rest
          .slice(0, 20)
          .map(
            (r) =>
              `${pgObject(r.index.row.schema_name, r.index.row.index_name)} (by ${pgObject(r.cover.row.index_name)})`,
          )
          .join(', ')}${rest.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Drop each redundant index once you have checked that its covering index is valid and kept.',
        how_to_investigate: [
          'SELECT indrelid::regclass AS table, indexrelid::regclass AS index, pg_get_indexdef(indexrelid) FROM pg_index ORDER BY 1, 2;',
        ],
        how_to_fix: ['DROP INDEX CONCURRENTLY <schema>.<index>;   -- for each redundant one'],
        objects: rest.slice(0, 100).map((r) => pgObject(r.index.row.schema_name, r.index.row.index_name)),
        metrics: { indexes: rest.length, size_bytes: size },
      })
    }
    return findings
  },
}
