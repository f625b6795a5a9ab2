// Large tables read by frequent full sequential scans over the last hour (pg_stat_user_tables seq_scan,
// idx_scan and seq_tup_read, summed from the per-cycle deltas), the mark of a filter or join without a
// fitting index. PgHero's missing_indexes looks at tables of 10,000 rows or more.
// - How often a table was read whole is seq_tup_read / n_live_tup, the full reads, not seq_scan:
//   PostgreSQL counts a scan in every process that begins one (heapam.c initscan), so a parallel scan
//   counts once for the leader and once for each worker launched, while seq_tup_read counts each row
//   once, whichever process read it. 150 runs of a query with 2 workers are 450 seq_scan of a third of
//   the table each; counting those, the rows per scan fell with every worker added and a table scanned
//   by enough workers looked like one read under LIMIT. The full reads are exact for whole-table scans,
//   parallel or not, as exact as n_live_tup; scans that stop early (LIMIT, EXISTS) add only the rows they
//   read, so peeks at a few rows count for little. PostgreSQL's seq_scan is kept in the
//   metrics, and the detail says when it counted more scans than full reads, and why.
// - The newest sampled plans of the costliest statements say why a table is scanned. A Seq Scan of it
//   with a Filter estimated to keep few of its rows is an index missing: then a share of sequential
//   scans from 5 % (PgHero flags index use under 95 %) is a warning. Plans that read it whole (no such
//   filter) and account for its scans mean it is read whole on purpose: no finding.
// - The index to create is read from the plans too (index-advice.ts): the columns the Seq Scan's Filter
//   and the joins above it compare, equality first (the most selective first by the table's column
//   statistics, from the column_stats collector; in the plan's order without them), then one range;
//   with the statements whose plans an index leading with those columns would serve and their share of
//   the statement time, and the existing index that already leads with them, if any (then the planner
//   chose the Seq Scan anyway: stale statistics, a type mismatch or too little selectivity, and no new
//   index is proposed).
// - Without a plan that says either, the statistics alone decide: more than half of the scans
//   sequential is a note, and a warning on tables of 100 MB or more, where each scan reads that much.
import type { StoredPlan } from '../../../store/statements/plans.ts'
import type { IndexRow, TableRow } from '../../../store/objects/types.ts'
import type { ColumnStat } from '../../../../shared/wire.ts'
import type { DoctorContext } from '../../context.ts'
import {
  type ColumnCondition,
  type IndexAdvice,
  type IndexShapeAdvice,
  type PlanNode,
  adviseIndex,
  indexShape,
  scanConditions,
  seqScanNodes,
} from '../../index-advice.ts'
import { type FindingDraft, type Rule, pct } from '../../types.ts'
import { tableSizeMetrics, tableSizeText } from '../../table-size-text.ts'
import { commentText, pgIdent, pgQualified, pgRegclass, pgString, urlSegment, pgObject } from '../../sql-text.ts'

const defaults = {
  /** Tables with fewer live rows are left out. */
  min_live_rows: 10_000,
  /** Fewer full reads (rows read by sequential scans / live rows) than this in the window are left out. */
  min_seq_scans: 100,
  /** Share of the window's scans that were sequential (full reads against index scans), from the statistics alone. */
  min_seq_share: 0.5,
  /** The same share when a plan filters the table by a Seq Scan (PgHero: index use under 95 %). */
  min_seq_share_with_plan: 0.05,
  /** A plan's Seq Scan filter estimated to keep at most this share of the rows is one an index would serve. */
  max_filter_share: 0.1,
  /** From this share of the full reads explained by plans that read the table whole, it is read whole on purpose. */
  whole_read_share: 0.9,
  /** The costliest statements of the window whose newest plans are read. */
  top_statements: 20,
  /** From this table size a warning, below it a note (unless a plan filters the table by a Seq Scan). */
  warning_table_bytes: 100 * 1024 * 1024,
  window_s: 3600,
  /** Largest tables examined. */
  max_tables: 200,
  /** Tables named one finding each, the most rows read first; the rest are counted in one more. */
  max_findings: 10,
}

const n = (v: number) => v.toLocaleString('en-US')
const flat = (text: string, max: number) => {
  const one = text.replace(/\s+/g, ' ').trim()
  return one.length > max ? `${one.slice(0, max)}…` : one
}

type ScanNode = PlanNode & { Schema?: string; 'Plan Rows'?: number }

/** A Seq Scan in the newest plan of one of the costliest statements. */
interface SeqScanNode {
  query_hash: string
  query_text: string
  calls: number
  mean_time_ms: number
  total_time_ms: number
  /** The conditions on the scanned relation: its Filter's and those of the joins above it. */
  conditions: ColumnCondition[]
  /** EXPLAIN names the relation; the schema only under VERBOSE, so a same-named table of another schema matches too. */
  relation: string
  schema: string | null
  filter: string | null
  plan_rows: number | null
}

/** The Seq Scans in the newest plans (sampled or from auto_explain) of the window's costliest statements. */
async function planScans(ctx: DoctorContext, windowMs: number, top: number): Promise<SeqScanNode[]> {
  const found: SeqScanNode[] = []
  for (const q of await ctx.queries(windowMs, 'total_time', top)) {
    const [newest]: StoredPlan[] = await ctx.plans(q.query_hash, windowMs)
    const plan = (newest?.plan_json as { Plan?: ScanNode } | null | undefined)?.Plan
    for (const node of seqScanNodes(plan)) {
      found.push({
        query_hash: q.query_hash,
        query_text: q.query_text,
        calls: q.total_calls,
        mean_time_ms: q.mean_time_ms,
        total_time_ms: q.total_time_ms,
        conditions: scanConditions(plan!, node),
        relation: node['Relation Name']!,
        schema: node.Schema ?? null,
        filter: node.Filter ?? null,
        plan_rows: typeof node['Plan Rows'] === 'number' ? node['Plan Rows'] : null,
      })
    }
  }
  return found
}

interface Scanned {
  table: TableRow
  /** PostgreSQL's seq_scan: one per process taking part in a scan. */
  seq: number
  /** seq_tup_read / n_live_tup: how many times the table's rows were read by sequential scans. */
  fullReads: number
  idx: number
  rows: number
  /** Full reads against index scans. */
  share: number
  /** The costliest statement whose plan filters the table by a Seq Scan, when one does. */
  filtered: SeqScanNode | undefined
  /** The index those plans ask for, when their conditions name columns. */
  advice?: Advice
}

interface Advice extends IndexAdvice {
  /** What ordered the equality columns, and why (indexShape's). */
  order: IndexShapeAdvice['order']
  reason?: string
  /** The filter's distinct equality columns: two or more make their order a choice. */
  equalityColumns: number
  /** The statements whose plans filter the table by a Seq Scan that an index leading with advice's first column serves, costliest first. */
  statements: SeqScanNode[]
}

/** The index for the table from the filtering scans' conditions: the costliest statement's, and every statement it serves. */
function advise(
  table: TableRow,
  filtering: SeqScanNode[],
  indexes: IndexRow[],
  columnStats: ColumnStat[],
): Advice | undefined {
  const stats = columnStats.filter((c) => c.schema_name === table.schema_name && c.table_name === table.table_name)
  const shape = indexShape(filtering[0]!.conditions, stats)
  if (shape.columns.length === 0) return undefined
  const own = indexes.filter((i) => i.schema_name === table.schema_name && i.table_name === table.table_name)
  const advice = adviseIndex(table.schema_name, table.table_name, shape.columns, own, shape.whereNull)
  const served = filtering.filter((f) => indexShape(f.conditions, stats).columns[0] === shape.columns[0])
  const statements = [...new Map(served.map((f) => [f.query_hash, f])).values()]
  const equalityColumns = new Set(
    filtering[0]!.conditions.filter((c) => c.kind === 'equality' && !c.join).map((c) => c.column),
  ).size
  return {
    ...advice,
    order: shape.order,
    ...(shape.reason ? { reason: shape.reason } : {}),
    equalityColumns,
    statements,
  }
}

export const sequentialScans: Rule<typeof defaults> = {
  id: 'pg_sequential_scans',
  summary:
    'Large tables read by frequent full sequential scans, with the index to create from the sampled plans and column statistics.',
  collectors: ['tables', 'indexes', 'query_stats', 'explain_plans', 'column_stats'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(sequentialScans)
    const windowMs = t.window_s * 1000
    const window = { since: ctx.now - windowMs, until: ctx.now }
    // A table counts at least as many scans since the statistics reset as in the window (barring a reset
    // within it), and at least one per full read, so fewer rule it out without reading its timeseries.
    const candidates = (await ctx.tables())
      .filter((table) => (table.n_live_tup ?? 0) >= t.min_live_rows && (table.seq_scan ?? 0) >= t.min_seq_scans)
      .slice(0, t.max_tables)
    let plans: SeqScanNode[] | undefined
    const scanned: Scanned[] = []
    for (const table of candidates) {
      const { points } = await ctx.store.objects.tableSeries(ctx.db.id, table.schema_name, table.table_name, window)
      let seq = 0
      let idx = 0
      let rows = 0
      for (const p of points) {
        seq += p.seq_scan ?? 0
        idx += p.idx_scan ?? 0
        rows += p.seq_tup_read ?? 0
      }
      const live = table.n_live_tup ?? 0
      const fullReads = live > 0 ? rows / live : 0
      const share = fullReads + idx > 0 ? fullReads / (fullReads + idx) : 0
      if (fullReads < t.min_seq_scans || share < Math.min(t.min_seq_share, t.min_seq_share_with_plan)) continue

      plans ??= await planScans(ctx, windowMs, t.top_statements)
      const own = plans.filter(
        (p) => p.relation === table.table_name && (p.schema === null || p.schema === table.schema_name),
      )
      const selective = (p: SeqScanNode) =>
        p.filter !== null && p.plan_rows !== null && p.plan_rows <= t.max_filter_share * live
      // The statements are the costliest first, so the first filtering one is the one to name.
      const filtering = own.filter(selective)
      const filtered = filtering[0]
      if (filtered) {
        if (share >= t.min_seq_share_with_plan)
          scanned.push({
            table,
            seq,
            fullReads,
            idx,
            rows,
            share,
            filtered,
            advice: advise(table, filtering, await ctx.indexes(), (await ctx.columnStats()).entries),
          })
        continue
      }
      // One call of a statement reads the table once for each of its plan's scans of it (or more, inside a
      // loop), however many processes share a parallel scan.
      const wholeReads = own.reduce((sum, p) => sum + p.calls, 0)
      if (wholeReads >= t.whole_read_share * fullReads) continue
      if (share >= t.min_seq_share) scanned.push({ table, seq, fullReads, idx, rows, share, filtered: undefined })
    }
    const severityOf = (s: Scanned) =>
      s.filtered || (s.table.table_size_bytes ?? 0) >= t.warning_table_bytes ? 'warning' : 'info'
    scanned.sort(
      (a, b) => (severityOf(a) === severityOf(b) ? 0 : severityOf(a) === 'warning' ? -1 : 1) || b.rows - a.rows,
    )
    const span =
      t.window_s % 3600 === 0 ? `${t.window_s / 3600 === 1 ? 'hour' : `${t.window_s / 3600} hours`}` : `${t.window_s} s`
    // The statement time of the window, for each advised index's share (the 100 costliest, as pg_slow_statements counts it).
    const allMs = scanned.some((s) => s.advice)
      ? (await ctx.queries(windowMs, 'total_time', 100)).reduce((sum, q) => sum + q.total_time_ms, 0)
      : 0

    const findings: FindingDraft[] = scanned.slice(0, t.max_findings).map((s) => {
      const name = pgQualified(s.table.schema_name, s.table.table_name)
      // Labelled as the Tables page labels them (table-size-text.ts): the heap is what a sequential scan reads.
      const sizes = tableSizeText(s.table)
      const size = sizes === '' ? '' : `, ${sizes}`
      const f = s.filtered
      const reads = Math.round(s.fullReads)
      const times = `${Math.abs(s.fullReads - reads) < 0.01 ? '' : 'about '}${n(reads)} ${reads === 1 ? 'time' : 'times'}`
      // PostgreSQL's count differs from the full reads by more than n_live_tup's rounding: say whose is whose.
      const counted =
        s.seq > s.fullReads * 1.05 + 1
          ? ` PostgreSQL counted ${n(s.seq)} sequential scans (seq_scan): each process of a parallel scan counts one, and a scan that stops early counts one too.`
          : ''
      const a = s.advice
      const columns = a ? `(${a.columns.map((c) => pgIdent(c)).join(', ')})` : ''
      // Why the equality columns come in this order, when there was a choice.
      const order =
        a && a.equalityColumns > 1
          ? a.order === 'n_distinct'
            ? ` Equality columns ordered by their statistics (pg_stats), the most selective first: ${a.reason}.`
            : ` Equality columns in the plan's order: no column statistics of ${name} for each of them (the agent's column_stats collector reads them for the tables most read by sequential scans, where its role may: pg_read_all_data or SELECT on the table).`
          : ''
      const evidence = f
        ? ` Statement ${f.query_hash} (${n(f.calls)} calls in the last ${span}, ${f.mean_time_ms.toFixed(1)} ms mean), among the costliest, reads it by a Seq Scan with Filter: ${flat(f.filter!, 200)}, estimated to keep ${n(Math.round(f.plan_rows!))} of its ${n(s.table.n_live_tup ?? 0)} rows: ${a ? `an index on ${columns} would read those alone` : 'an index on the filtered columns would read those alone'}.${order} Text: ${flat(f.query_text, 300)}`
        : ''
      const timeMs = a ? a.statements.reduce((sum, q) => sum + q.total_time_ms, 0) : 0
      const benefit = a
        ? ` An index leading with ${pgIdent(a.columns[0]!)} serves ${
            a.statements.length === 1
              ? 'that statement'
              : `${a.statements.length} of the costliest statements (${a.statements
                  .slice(0, 5)
                  .map((q) => q.query_hash)
                  .join(', ')}${a.statements.length > 5 ? ', …' : ''})`
          }: ${allMs > 0 ? `${pct(timeMs / allMs)} of the statement time in the last ${span}` : 'their time'}.`
        : ''
      const existing = a?.existing
        ? a.existing.complete
          ? ` Index ${pgIdent(a.existing.index_name)} already leads with ${columns}, yet the planner chose the Seq Scan: its statistics may be stale (ANALYZE), the statement may compare the column with another type (a cast on the column side defeats the index), or the planner may think the filter keeps too many rows.`
          : ` Index ${pgIdent(a.existing.index_name)} starts with some of these columns but not all of ${columns}: extend it or create the one below.`
        : ''
      return {
        severity: severityOf(s),
        object: pgObject(s.table.schema_name, s.table.table_name),
        title: `Sequential scans on ${name}`,
        detail: `In the last ${span} ${name} (${n(s.table.n_live_tup ?? 0)} rows${size}) was read whole ${times} by sequential scans (${n(s.rows)} rows, seq_tup_read, over its ${n(s.table.n_live_tup ?? 0)} live rows) against ${n(s.idx)} index scans (${pct(s.share)} sequential).${counted}${evidence}${benefit}${existing}`,
        recommendation: a?.existing?.complete
          ? `Refresh ${name}'s statistics and look at the statement's plan with its real parameters before adding another index.`
          : a
            ? `Create the index on ${columns} below (built CONCURRENTLY, so writes go on), then check the statements' next plans.`
            : f
              ? `Index the columns that statement filters ${name} on (and check the other statements that scan it); build the index CONCURRENTLY so writes go on.`
              : `Find the statements that scan ${name} in pg_stat_statements and index the columns they filter or join on; scans that need the whole table anyway (reports, exports) are expected.`,
        how_to_investigate: [
          `SELECT seq_scan, seq_tup_read, idx_scan, n_live_tup FROM pg_stat_user_tables WHERE relid = ${pgRegclass(s.table.schema_name, s.table.table_name)};`,
          `SELECT queryid, calls, rows, round(mean_exec_time::numeric, 2) AS mean_ms, query FROM pg_stat_statements WHERE query ILIKE ${pgString(`%${s.table.table_name}%`)} ORDER BY total_exec_time DESC LIMIT 10;`,
          ...(f
            ? [`GET /api/v1/databases/${ctx.db.id}/queries/${urlSegment(f.query_hash)}/explain   -- its sampled plans`]
            : []),
          `EXPLAIN (ANALYZE, BUFFERS) <one of those statements>;   -- a Seq Scan on ${name} with a Filter names the columns to index`,
          ...(a && a.columns.length > 1
            ? [
                `SELECT attname, n_distinct, null_frac, correlation FROM pg_stats WHERE schemaname = ${pgString(s.table.schema_name)} AND tablename = ${pgString(s.table.table_name)} AND attname IN (${a.columns.map(pgString).join(', ')});   -- of the equality columns, the most distinct first narrows the index best`,
              ]
            : []),
        ],
        how_to_fix: a?.existing?.complete
          ? [
              `ANALYZE ${name};   -- then compare the statement's plan: EXPLAIN (ANALYZE, BUFFERS) with its real parameters`,
            ]
          : a
            ? [
                `${a.create}   -- for statement ${commentText(f!.query_hash, 64)}${a.statements.length > 1 ? ` and ${a.statements.length - 1} more` : ''}`,
              ]
            : [
                `CREATE INDEX CONCURRENTLY ON ${name} (<filtered columns>);${f ? `   -- the columns of the Filter of statement ${commentText(f.query_hash, 64)}, named in the detail` : ''}`,
              ],
        metrics: {
          full_reads: Number(s.fullReads.toFixed(2)),
          seq_scan: s.seq,
          idx_scan: s.idx,
          seq_share: Number(s.share.toFixed(4)),
          seq_tup_read: s.rows,
          n_live_tup: s.table.n_live_tup,
          table_size_bytes: s.table.table_size_bytes,
          ...tableSizeMetrics(s.table),
          ...(f ? { query_hash: f.query_hash, filter: f.filter } : {}),
          ...(a
            ? {
                index_columns: a.columns.map((c) => pgIdent(c)).join(', '),
                column_order: a.order,
                statements_served: a.statements.length,
                statement_time_share: allMs > 0 ? Number((timeMs / allMs).toFixed(4)) : null,
                existing_index: a.existing?.index_name ?? null,
              }
            : {}),
        },
      }
    })

    const rest = scanned.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((s) => severityOf(s) === 'warning') ? 'warning' : 'info',
        title: `${rest.length} more tables read by frequent sequential scans`,
        detail: `Besides the tables named above, ${rest.length} more tables of ${n(t.min_live_rows)} rows or more were read by frequent full sequential scans in the last ${span}: ${rest
          .slice(0, 20)
          .map(
            (s) =>
              `${pgObject(s.table.schema_name, s.table.table_name)} (read whole ${n(Math.round(s.fullReads))} times)`,
          )
          .join(', ')}${rest.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Index the columns their statements filter on, the busiest first.',
        how_to_investigate: [
          `SELECT relid::regclass, seq_scan, seq_tup_read, idx_scan, n_live_tup FROM pg_stat_user_tables WHERE n_live_tup >= ${t.min_live_rows} ORDER BY seq_tup_read DESC LIMIT 20;`,
        ],
        how_to_fix: ['CREATE INDEX CONCURRENTLY ON <schema>.<table> (<filtered columns>);'],
        objects: rest.slice(0, 100).map((s) => pgObject(s.table.schema_name, s.table.table_name)),
        metrics: { tables: rest.length },
      })
    }
    return findings
  },
}
