// column_stats: the planner's statistics of the columns (pg_stats: n_distinct, null_frac, correlation,
// with the table's pg_class.reltuples) of the tables most read by sequential scans (pg_stat_user_tables
// seq_tup_read, the 50 first, 64 columns each in column order): the tables the doctor's index advice may
// concern, where they order an index's equality columns, the most selective first.
// A collector of its own rather than part of `tables`: it runs on another rhythm (the statistics change
// only with ANALYZE), it reads pg_stats, which needs more than pg_monitor, and it can be turned off alone.
// pg_stats shows a column's statistics only to a role that may read the column (pg_read_all_data, 14+,
// or SELECT on the table or column): a table the agent's role may not read is left out, counted in an
// info note (the advice keeps the plan's column order for it), and logged once per count.
// The statistics are read again only when the set of tables, one's last analyze or the role's access
// changed, or an hour has passed (as `bloat` does); in between the section is not sent and the server
// keeps the last one.
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import type { ColumnStat } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { type SeqRead, SEQ_READ, byBytes } from './tables.ts'
import { PREPARED } from '../../own-statements.ts'

/** Tables read, the most rows read by sequential scans first. */
export const MAX_TABLES = 50
/** Columns read per table, in column order. */
export const MAX_COLUMNS = 64
const RECOMPUTE_MS = 3600_000

// The tables, with what says their statistics changed: the last (auto)analyze and whether the role may
// read them. The tables of pg_stat_user_tables (its relkinds and schemas), with its seq_tup_read,
// last_analyze and last_autoanalyze read from the functions that view reads them from: the view itself
// also joins and groups every index (12 ms against 4 ms with 1,000 tables, PostgreSQL 17).
const TOP_TABLES_SQL = `
  SELECT c.oid::int8::text AS relid, n.nspname::text AS schemaname, c.relname::text AS relname,
         coalesce(floor(extract(epoch FROM greatest(pg_stat_get_last_analyze_time(c.oid), pg_stat_get_last_autoanalyze_time(c.oid))) * 1000)::int8::text, '') AS analyzed,
         has_any_column_privilege(c.oid, 'SELECT') AS readable, c.reltuples::float8 AS reltuples
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 't', 'm', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
    AND pg_stat_get_tuples_returned(c.oid) > 0
  ORDER BY pg_stat_get_tuples_returned(c.oid) DESC, n.nspname, c.relname
  LIMIT ${MAX_TABLES}`

// Whether the role may read each of the tables named by $1 (an array literal of OIDs), with reltuples:
// what TOP_TABLES_SQL adds to the tables, for tables taken from the tables collector's read (SEQ_READ).
const TOP_FACTS_SQL = `
  SELECT u.ord, has_any_column_privilege(c.oid, 'SELECT') AS readable, c.reltuples::float8 AS reltuples
  FROM unnest($1::text::oid[]) WITH ORDINALITY AS u(oid, ord)
  JOIN pg_class c ON c.oid = u.oid
  ORDER BY u.ord`

// The tables' column statistics (those of each table itself, not of its inheritance tree, when it has
// both), in one statement: the tables come as a JSON list (names travel as parameters) and pg_stats is
// read table by table in a LATERAL subquery, through the catalogs' name index: joined with the list as
// a whole, the planner may compute every column's privilege check in the database first (130 ms for
// 16,000 columns, measured on PostgreSQL 17). One statement per table cost 50 × 0.9 ms; this one 3 ms.
const STATS_SQL = `
  SELECT t.ord, x.column_name, x.n_distinct, x.null_frac, x.correlation
  FROM json_to_recordset($1::text::json) AS t(ord int, relid oid, schemaname name, relname name)
  CROSS JOIN LATERAL (
    SELECT DISTINCT ON (a.attnum) s.attname::text AS column_name, s.n_distinct, s.null_frac, s.correlation, a.attnum
    FROM pg_stats s
    JOIN pg_attribute a ON a.attrelid = t.relid AND a.attname = s.attname AND a.attnum > 0 AND NOT a.attisdropped
    WHERE s.schemaname = t.schemaname AND s.tablename = t.relname
    ORDER BY a.attnum, s.inherited
    LIMIT $2
  ) x
  ORDER BY t.ord, x.attnum`

interface TopRow {
  relid: string
  schemaname: string
  relname: string
  analyzed: string
  readable: boolean
  reltuples: number | string | null
}

interface StatRow {
  ord: number
  column_name: string
  n_distinct: number | string | null
  null_frac: number | string | null
  correlation: number | string | null
}

/**
 * The column statistics read before, by table (relid): a table's are read again only when its name or
 * last (auto)analyze changed (pg_stats changes with ANALYZE), and every table's once an hour, as the
 * whole section was before. The tables most read by sequential scans may change every cycle while
 * their statistics stay (they did in bench/agent.ts: pg_stats read for 50 tables every cycle, 4-5 ms).
 * A cache (`cache:` key): never saved, kept even when the run fails.
 */
const CACHE = 'cache:column_stats:tables'
/** Columns kept in the cache at most (the least recently used tables go first). */
const MAX_CACHED_COLUMNS = 20 * MAX_TABLES * 8

interface Cached {
  /** Schema, name and last analyze the columns were read at. */
  key: string
  columns: [
    name: string,
    nDistinct: StatRow['n_distinct'],
    nullFrac: StatRow['null_frac'],
    correlation: StatRow['correlation'],
  ][]
}

interface Cache {
  /** When every table's statistics were last read afresh (epoch ms). */
  at: number
  /** By relid, the least recently used first. */
  tables: Map<string, Cached>
  columns: number
}

function readCache(ctx: PostgresContext): Cache {
  const kept = ctx.state.get(CACHE) as Cache | undefined
  if (kept && ctx.now - kept.at < RECOMPUTE_MS) return kept
  const fresh: Cache = { at: ctx.now, tables: new Map(), columns: 0 }
  ctx.state.set(CACHE, fresh)
  return fresh
}

function remember(cache: Cache, relid: string, entry: Cached): void {
  cache.columns += entry.columns.length - (cache.tables.get(relid)?.columns.length ?? 0)
  cache.tables.delete(relid)
  cache.tables.set(relid, entry)
  for (const [oldest, cached] of cache.tables) {
    if (cache.columns <= MAX_CACHED_COLUMNS || oldest === relid) break
    cache.tables.delete(oldest)
    cache.columns -= cached.columns.length
  }
}

const clamp = (v: number, min: number, max: number) => Math.min(max, Math.max(min, v))

/** Tables the role may not read: an info note while there are any, a log line when their count changes. */
function reportUnreadable(ctx: PostgresContext, unreadable: number, of: number): void {
  const logged = ctx.state.get('column_stats:unreadable') as number | undefined
  if (unreadable === 0) {
    ctx.infos?.delete('column_stats')
    ctx.state.delete('column_stats:unreadable')
    return
  }
  const fix = ctx.major >= 14 ? 'grant pg_read_all_data' : 'grant SELECT on them'
  ctx.infos?.set(
    'column_stats',
    `column statistics of ${unreadable} of the ${of} tables most read by sequential scans unreadable (${fix}): index advice keeps the plan's column order for them`,
  )
  if (logged !== unreadable) {
    ctx.log.info('column statistics unreadable by the agent role: index advice keeps the plan column order', {
      database: ctx.name,
      collector: 'column_stats',
      unreadable,
      fix: ctx.major >= 14 ? 'GRANT pg_read_all_data TO <agent role>' : 'GRANT SELECT ON <table> TO <agent role>',
    })
  }
  ctx.state.set('column_stats:unreadable', unreadable)
}

/**
 * The tables most read by sequential scans: from the tables collector's statistics of this cycle when
 * it ran before (its pg_stat_user_tables read, in the order TOP_TABLES_SQL gives: seq_tup_read, then
 * names in byte order), else read here.
 */
async function topTables(ctx: PostgresContext): Promise<TopRow[]> {
  const shared = ctx.state.get(SEQ_READ) as SeqRead | undefined
  ctx.state.delete(SEQ_READ)
  if (!shared || shared.at !== ctx.now) return ctx.sql.unsafe<TopRow[]>(TOP_TABLES_SQL, [], PREPARED)
  const picked = shared.tables
    .map((t) => ({ t, reads: BigInt(t.seq_tup_read) }))
    .sort((a, b) =>
      a.reads !== b.reads
        ? b.reads > a.reads
          ? 1
          : -1
        : byBytes(a.t.schemaname, b.t.schemaname) || byBytes(a.t.relname, b.t.relname),
    )
    .slice(0, MAX_TABLES)
    .map(({ t }) => t)
  if (picked.length === 0) return []
  const facts = await ctx.sql.unsafe<{ ord: string; readable: boolean; reltuples: number | null }[]>(TOP_FACTS_SQL, [
    `{${picked.map((t) => t.relid).join(',')}}`,
  ])
  // A table dropped since the statistics were read has no row: left out, as TOP_TABLES_SQL would.
  return facts.map((f) => ({ ...picked[Number(f.ord) - 1]!, readable: f.readable, reltuples: f.reltuples }))
}

export const columnStats = registerCollector<PostgresContext>({
  name: 'column_stats',
  engine: 'postgres',
  defaultEnabled: true,
  cadence: 'object_stats',
  async collect(ctx) {
    const top = await topTables(ctx)
    const readable = top.filter((t) => t.readable)
    reportUnreadable(ctx, top.length - readable.length, top.length)
    const fingerprint = top
      .map((t) => `${t.relid}:${t.analyzed}:${t.readable ? 1 : 0}`)
      .sort()
      .join(',')
    const last = ctx.state.get('column_stats') as { fingerprint: string; at: number } | undefined
    if (last && last.fingerprint === fingerprint && ctx.now - last.at < RECOMPUTE_MS) return {}
    const cache = readCache(ctx)
    const keyOf = (t: TopRow) => `${t.schemaname}\u0000${t.relname}\u0000${t.analyzed}`
    const columnsOf = new Map<string, Cached['columns']>()
    for (const t of readable) {
      const cached = cache.tables.get(t.relid)
      if (cached?.key === keyOf(t)) columnsOf.set(t.relid, cached.columns)
    }
    const unknown = readable.filter((t) => !columnsOf.has(t.relid))
    const list = unknown.map((t, ord) => ({ ord, relid: t.relid, schemaname: t.schemaname, relname: t.relname }))
    const rows =
      unknown.length > 0 ? await ctx.sql.unsafe<StatRow[]>(STATS_SQL, [JSON.stringify(list), MAX_COLUMNS]) : []
    for (const t of unknown) columnsOf.set(t.relid, [])
    for (const r of rows)
      columnsOf.get(unknown[r.ord]!.relid)!.push([r.column_name, r.n_distinct, r.null_frac, r.correlation])
    // Used now: the last to be evicted.
    for (const t of readable) remember(cache, t.relid, { key: keyOf(t), columns: columnsOf.get(t.relid)! })
    const stats: ColumnStat[] = []
    for (const t of readable) {
      for (const [column_name, n_distinct, null_frac, correlation] of columnsOf.get(t.relid)!)
        stats.push({
          schema_name: t.schemaname,
          table_name: t.relname,
          column_name,
          n_distinct: Math.max(-1, num(n_distinct) ?? 0),
          null_frac: clamp(num(null_frac) ?? 0, 0, 1),
          correlation: correlation === null ? null : clamp(num(correlation) ?? 0, -1, 1),
          reltuples: Math.max(-1, num(t.reltuples) ?? -1),
        })
    }
    ctx.state.set('column_stats', { fingerprint, at: ctx.now })
    return { column_stats: stats.slice(0, ingestMaxItems.column_stats) }
  },
})
