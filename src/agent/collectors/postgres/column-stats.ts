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

/** Tables read, the most rows read by sequential scans first. */
export const MAX_TABLES = 50
/** Columns read per table, in column order. */
export const MAX_COLUMNS = 64
const RECOMPUTE_MS = 3600_000

// The tables, with what says their statistics changed: the last (auto)analyze and whether the role may read them.
const TOP_TABLES_SQL = `
  SELECT s.relid::int8::text AS relid, s.schemaname::text AS schemaname, s.relname::text AS relname,
         coalesce(greatest(s.last_analyze, s.last_autoanalyze)::text, '') AS analyzed,
         has_any_column_privilege(s.relid, 'SELECT') AS readable, c.reltuples::float8 AS reltuples
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE s.seq_tup_read > 0
  ORDER BY s.seq_tup_read DESC, s.schemaname, s.relname
  LIMIT $1`

// One table's column statistics, its own (not those of its inheritance tree) when it has both. Asked
// table by table with the names as parameters, so that pg_stats is read through the catalogs' name
// index: joined with a list of tables, the planner may compute every column's privilege check in the
// database first (130 ms for 16,000 columns, measured on PostgreSQL 17).
const STATS_SQL = `
  SELECT DISTINCT ON (a.attnum) s.attname::text AS column_name, s.n_distinct, s.null_frac, s.correlation
  FROM pg_stats s
  JOIN pg_attribute a ON a.attrelid = $1::text::oid AND a.attname = s.attname AND a.attnum > 0 AND NOT a.attisdropped
  WHERE s.schemaname = $2 AND s.tablename = $3
  ORDER BY a.attnum, s.inherited
  LIMIT $4`

interface TopRow {
  relid: string
  schemaname: string
  relname: string
  analyzed: string
  readable: boolean
  reltuples: number | string | null
}

interface StatRow {
  column_name: string
  n_distinct: number | string | null
  null_frac: number | string | null
  correlation: number | string | null
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

export const columnStats = registerCollector<PostgresContext>({
  name: 'column_stats',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const top = await ctx.sql.unsafe<TopRow[]>(TOP_TABLES_SQL, [MAX_TABLES])
    const readable = top.filter((t) => t.readable)
    reportUnreadable(ctx, top.length - readable.length, top.length)
    const fingerprint = top
      .map((t) => `${t.relid}:${t.analyzed}:${t.readable ? 1 : 0}`)
      .sort()
      .join(',')
    const last = ctx.state.get('column_stats') as { fingerprint: string; at: number } | undefined
    if (last && last.fingerprint === fingerprint && ctx.now - last.at < RECOMPUTE_MS) return {}
    // Sent together: postgres.js pipelines them on the pool's connections.
    const perTable = await Promise.all(readable.map((t) => ctx.sql.unsafe<StatRow[]>(STATS_SQL, [t.relid, t.schemaname, t.relname, MAX_COLUMNS])))
    const stats: ColumnStat[] = []
    for (const [i, t] of readable.entries()) {
      const reltuples = Math.max(-1, num(t.reltuples) ?? -1)
      for (const r of perTable[i]!) {
        stats.push({
          schema_name: t.schemaname,
          table_name: t.relname,
          column_name: r.column_name,
          n_distinct: Math.max(-1, num(r.n_distinct) ?? 0),
          null_frac: clamp(num(r.null_frac) ?? 0, 0, 1),
          correlation: r.correlation === null ? null : clamp(num(r.correlation) ?? 0, -1, 1),
          reltuples,
        })
      }
    }
    ctx.state.set('column_stats', { fingerprint, at: ctx.now })
    return { column_stats: stats.slice(0, ingestMaxItems.column_stats) }
  },
})
