// bloat: an estimate, from planner statistics, of the space tables and btree indexes of the connected
// database hold beyond what their live rows need. The method is the usual statistics-based one, with
// the columns laid out as PostgreSQL lays them out: a row is its header (a heap tuple's 23 bytes and,
// when the row has a null, its null bitmap; an index entry's 8 bytes, 16 with a null), aligned to 8,
// then its columns in order, each at its average width from pg_stats (weighted by how often it is not
// null) after the padding its type's alignment asks for (a short varlena value has a 1-byte header and
// no padding), the whole padded to 8, plus a 4-byte line pointer (rowBytes below). A page (block_size, less its
// 24-byte header, and for a btree its 16-byte special space) takes rows up to the share its
// fillfactor lets inserts fill (tables 100 %, btree leaves 90 % by default; upper btree levels 70 %);
// the rows pg_class.reltuples counts need so many pages, plus for an index its metapage and upper
// levels. What pg_class.relpages has beyond that is the estimated bloat. Both numbers are the ones the
// last VACUUM, ANALYZE or index build set, so they describe the same moment.
// Where it is off: widths are averages (the padding of rows of varying width is guessed), btree
// deduplication (13+) makes indexes with repeated keys smaller than estimated (no bloat is then
// reported), statistics go stale between ANALYZEs. A relation any of whose columns has no statistics
// (never analyzed, or a column the agent's role may not read in pg_stats) is left out rather than
// guessed. Only btree indexes are estimated.
// The statistics change only with VACUUM, ANALYZE and DDL, so the estimate is computed again only when
// a cheap fingerprint of them moved, or an hour has passed; in between the section is not sent and
// the server keeps the last one.
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import type { BloatEstimate } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { TABLES_READ, type TablesRead } from './tables.ts'
import { PREPARED } from '../../own-statements.ts'

const MAX_ESTIMATES = Math.min(ingestMaxItems.bloat, 5_000)
const RECOMPUTE_MS = 3600_000

// The last (auto)vacuum and (auto)analyze of pg_stat_all_tables, read from the functions that view reads
// them from on pg_class (its relkinds): the view also joins and groups every index, which made this
// fingerprint 14 ms a cycle with 1,000 tables (PostgreSQL 17); 3 ms so.
const FINGERPRINT_SQL = `
  SELECT (SELECT count(*) || ':' || coalesce(sum(relpages), 0) || ':' || coalesce(sum(reltuples), 0)
          FROM pg_class WHERE relkind IN ('r', 'm', 'i')) || '|' ||
         coalesce((SELECT max(greatest(pg_stat_get_last_vacuum_time(c.oid), pg_stat_get_last_autovacuum_time(c.oid),
                                       pg_stat_get_last_analyze_time(c.oid), pg_stat_get_last_autoanalyze_time(c.oid)))::text
                   FROM pg_class c WHERE c.relkind IN ('r', 't', 'm', 'p')), '') AS fingerprint`

/**
 * The fingerprint of what the estimate reads: from the tables collector's read of this cycle when it
 * ran before (the catalog fingerprint, which every DDL moves, CREATE INDEX and REINDEX included, with
 * every table's (auto)vacuum counts and last (auto)analyze: relpages, reltuples and pg_stats change in
 * place only through those), else FINGERPRINT_SQL. Taken from the tables' read it costs no statement:
 * FINGERPRINT_SQL was 4-5 ms a cycle with 1,000 tables (bench/RESULTS.md, Agent).
 */
async function fingerprintOf(ctx: PostgresContext): Promise<string> {
  const shared = ctx.state.get(TABLES_READ) as TablesRead | undefined
  if (shared && shared.at === ctx.now) return `tables:${shared.signal}|${shared.maintained}`
  const [{ fingerprint } = { fingerprint: '' }] = await ctx.sql.unsafe<{ fingerprint: string }[]>(
    FINGERPRINT_SQL,
    [],
    PREPARED,
  )
  return fingerprint
}

// Each relation with its columns in order: average width, null fraction, type length and alignment.
// An index's columns are its own attributes (an expression's type), with the statistics of the table
// column it indexes, or of the expression (pg_stats lists those under the index's name).
// pg_stats is looked up column by column (LATERAL, kept a subquery by OFFSET 0, so that the view's
// name conditions reach the catalogs' indexes): joined whole, the planner, counting a handful of
// relations, ran a nested loop over the whole view for every index column, 1.2-2.8 s with 1,000 tables
// on PostgreSQL 17, past the statement timeout on a busy server; 85-120 ms so, the same rows.
const RELATIONS_SQL = `
  WITH tabs AS (
    SELECT c.oid, n.nspname, c.relname, c.relnatts, c.reltuples, c.relpages,
           coalesce((SELECT o.option_value::int FROM pg_options_to_table(c.reloptions) o WHERE o.option_name = 'fillfactor'), 100) AS fillfactor
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'm') AND c.relpages > 0 AND c.reltuples >= 0
      AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' AND NOT pg_is_other_temp_schema(n.oid)
  ),
  tab_cols AS (
    SELECT t.oid, count(*) AS columns, count(s.attname) AS with_stats,
           json_agg(json_build_array(coalesce(s.avg_width, 0), coalesce(s.null_frac, 0), a.attlen, a.attalign) ORDER BY a.attnum) AS cols
    FROM tabs t
    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN LATERAL (SELECT s.attname, s.avg_width, s.null_frac FROM pg_stats s
                       WHERE s.schemaname = t.nspname AND s.tablename = t.relname AND s.attname = a.attname AND NOT s.inherited OFFSET 0) s ON true
    GROUP BY t.oid
  ),
  idxs AS (
    SELECT i.indexrelid, i.indrelid, i.indkey, n.nspname, t.relname AS table_name, ic.relname AS index_name, ic.relnatts, ic.reltuples, ic.relpages,
           coalesce((SELECT o.option_value::int FROM pg_options_to_table(ic.reloptions) o WHERE o.option_name = 'fillfactor'), 90) AS fillfactor
    FROM pg_index i
    JOIN pg_class ic ON ic.oid = i.indexrelid
    JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'btree'
    JOIN pg_class t ON t.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE t.relkind IN ('r', 'm') AND ic.relpages > 1 AND ic.reltuples >= 0 AND i.indisvalid
      AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' AND NOT pg_is_other_temp_schema(n.oid)
  ),
  idx_cols AS (
    SELECT x.indexrelid, count(*) AS columns, count(coalesce(sc.attname, se.attname)) AS with_stats,
           json_agg(json_build_array(coalesce(sc.avg_width, se.avg_width, 0), coalesce(sc.null_frac, se.null_frac, 0), ia.attlen, ia.attalign) ORDER BY ia.attnum) AS cols
    FROM idxs x
    JOIN pg_attribute ia ON ia.attrelid = x.indexrelid AND ia.attnum > 0
    LEFT JOIN pg_attribute ta ON ta.attrelid = x.indrelid AND ta.attnum = x.indkey[ia.attnum - 1] AND ta.attnum > 0
    LEFT JOIN LATERAL (SELECT s.attname, s.avg_width, s.null_frac FROM pg_stats s
                       WHERE ta.attname IS NOT NULL AND s.schemaname = x.nspname AND s.tablename = x.table_name AND s.attname = ta.attname AND NOT s.inherited OFFSET 0) sc ON true
    LEFT JOIN LATERAL (SELECT s.attname, s.avg_width, s.null_frac FROM pg_stats s
                       WHERE ta.attname IS NULL AND s.schemaname = x.nspname AND s.tablename = x.index_name AND s.attname = ia.attname OFFSET 0) se ON true
    GROUP BY x.indexrelid
  )
  SELECT 'table' AS kind, t.nspname AS schema_name, t.relname AS table_name, NULL::name AS index_name, t.fillfactor, t.relnatts AS natts,
         t.reltuples::float8 AS reltuples, t.relpages::float8 AS relpages, c.cols
  FROM tabs t JOIN tab_cols c ON c.oid = t.oid WHERE c.with_stats = c.columns
  UNION ALL
  SELECT 'index', x.nspname, x.table_name, x.index_name, x.fillfactor, x.relnatts, x.reltuples::float8, x.relpages::float8, c.cols
  FROM idxs x JOIN idx_cols c ON c.indexrelid = x.indexrelid WHERE c.with_stats = c.columns`

/** A column as the estimate sees it: average width, null fraction, pg_attribute.attlen and attalign. */
export type Column = [avgWidth: number, nullFrac: number, attlen: number, attalign: string]

export interface Relation {
  kind: 'table' | 'index'
  fillfactor: number
  /** Attributes of the relation (the null bitmap has a bit for each). */
  natts: number
  reltuples: number
  relpages: number
  cols: Column[]
}

const ALIGN: Record<string, number> = { c: 1, s: 2, i: 4, d: 8 }
const alignUp = (n: number, to: number) => Math.ceil(n / to) * to
const maxAlign = (n: number) => alignUp(n, 8)

/** Bytes of one row's data: each column after its alignment padding, weighted by how often it is not null. */
export function dataWidth(cols: readonly Column[]): number {
  let offset = 0
  for (const [width, nullFrac, attlen, attalign] of cols) {
    // A varlena value up to 126 bytes has a 1-byte header and is stored unaligned; a longer one is aligned to its type.
    const align = attlen === -1 && width <= 126 ? 1 : (ALIGN[attalign] ?? 1)
    const present = 1 - Math.min(1, Math.max(0, nullFrac))
    offset += present * (alignUp(offset, align) - offset + width)
  }
  return offset
}

/**
 * A row's average bytes on its page: header, data and line pointer. A row carries its null bitmap
 * only when it has a null (the header is weighted by that chance), and is padded to 8 bytes: exactly
 * when its columns are all fixed-width, by 3.5 bytes on average when varying widths spread its end.
 */
export function rowBytes(r: Pick<Relation, 'kind' | 'natts' | 'cols'>): number {
  const withNull = 1 - r.cols.reduce((p, [, nullFrac]) => p * (1 - Math.min(1, Math.max(0, nullFrac))), 1)
  const [base, bitmap] = r.kind === 'table' ? [23, Math.ceil(r.natts / 8)] : [8, 4]
  const header = (1 - withNull) * maxAlign(base) + withNull * maxAlign(base + bitmap)
  const data = dataWidth(r.cols)
  const varying = r.cols.some(([, , attlen]) => attlen < 0)
  return header + (varying ? data + 3.5 : maxAlign(data)) + 4
}

/** The pages a relation's rows need packed at its fillfactor, by the method in the header. */
export function expectedPages(r: Relation, blockSize: number): number {
  const row = rowBytes(r)
  const reserved = (blockSize * (100 - r.fillfactor)) / 100
  if (r.kind === 'table') {
    // A heap page holds at most MaxHeapTuplesPerPage rows (291 with 8 kB pages).
    const perPage = Math.max(
      1,
      Math.min(Math.floor((blockSize - 24 - reserved) / row), Math.floor((blockSize - 24) / 28)),
    )
    return Math.ceil(r.reltuples / perPage)
  }
  const usable = blockSize - 24 - 16
  const leaves = Math.ceil(r.reltuples / Math.max(1, Math.floor((usable - reserved) / row)))
  const perUpper = Math.max(2, Math.floor((usable * 0.7) / row))
  let upper = 0
  for (let level = leaves; level > 1; level = Math.ceil(level / perUpper)) upper += Math.ceil(level / perUpper)
  return 1 + leaves + upper
}

type Row = Relation & { schema_name: string; table_name: string; index_name: string | null }

export const bloat = registerCollector<PostgresContext>({
  name: 'bloat',
  engine: 'postgres',
  defaultEnabled: true,
  cadence: 'object_stats',
  async collect(ctx) {
    const fingerprint = await fingerprintOf(ctx)
    const last = ctx.state.get('bloat') as { fingerprint: string; at: number } | undefined
    if (last && last.fingerprint === fingerprint && ctx.now - last.at < RECOMPUTE_MS) return {}
    const [{ bs } = { bs: '8192' }] = await ctx.sql.unsafe<{ bs: string }[]>(
      "SELECT current_setting('block_size') AS bs",
    )
    const blockSize = Number(bs)
    const rows = await ctx.sql.unsafe<Row[]>(RELATIONS_SQL)
    ctx.state.set('bloat', { fingerprint, at: ctx.now })
    const estimates = rows.map((r): BloatEstimate => {
      const relpages = num(r.relpages) ?? 0
      const expected = Math.min(
        relpages,
        expectedPages({ ...r, reltuples: num(r.reltuples) ?? 0, relpages }, blockSize),
      )
      return {
        kind: r.kind,
        schema_name: r.schema_name,
        table_name: r.table_name,
        index_name: r.index_name,
        size_bytes: relpages * blockSize,
        expected_bytes: expected * blockSize,
        bloat_bytes: (relpages - expected) * blockSize,
        fillfactor: Math.min(100, Math.max(10, num(r.fillfactor) ?? 100)),
        live_rows: Math.round(num(r.reltuples) ?? 0),
      }
    })
    estimates.sort((a, b) => b.bloat_bytes - a.bloat_bytes || b.size_bytes - a.size_bytes)
    return { bloat: estimates.slice(0, MAX_ESTIMATES) }
  },
})
