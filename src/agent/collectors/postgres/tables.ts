// tables: per-table statistics of the connected database (pg_stat_user_tables) with sizes and
// whether a primary key exists, for the 5,000 largest tables; counters also as deltas since the
// previous sample (null on a table's first sample).
import type { TableStat } from '../../../shared/wire.ts'
import { deltaOf, epoch, num } from '../delta.ts'
import type { PostgresCollector } from '../types.ts'
import type { Counters } from './common.ts'

const MAX_TABLES = 5_000

const COUNTERS = ['seq_scan', 'seq_tup_read', 'idx_scan', 'idx_tup_fetch', 'n_tup_ins', 'n_tup_upd', 'n_tup_del', 'n_tup_hot_upd'] as const
type TableCounters = Counters<(typeof COUNTERS)[number]>

// Sizing a relation takes an ACCESS SHARE lock on it and its indexes, so a table that someone holds or
// awaits an ACCESS EXCLUSIVE lock on (ALTER TABLE, VACUUM FULL, TRUNCATE, REINDEX of an index) is not
// sized this cycle: its sizes are null rather than the collector waiting out its deadline.
const SQL = `
  WITH busy AS (
    SELECT coalesce(i.indrelid, t.oid, l.relation) AS relid
    FROM pg_locks l
    LEFT JOIN pg_index i ON i.indexrelid = l.relation
    LEFT JOIN pg_class t ON t.reltoastrelid = l.relation
    WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  ), sized AS (
    SELECT s.*,
           CASE WHEN s.relid NOT IN (SELECT relid FROM busy) THEN pg_table_size(s.relid) END AS table_size_bytes,
           CASE WHEN s.relid NOT IN (SELECT relid FROM busy) THEN pg_indexes_size(s.relid) END AS index_size_bytes
    FROM pg_stat_user_tables s
  )
  SELECT relid, schemaname, relname,
         seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd,
         n_live_tup, n_dead_tup, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze,
         table_size_bytes, index_size_bytes,
         EXISTS (SELECT 1 FROM pg_index p WHERE p.indrelid = sized.relid AND p.indisprimary) AS has_primary_key
  FROM sized
  ORDER BY table_size_bytes + index_size_bytes DESC NULLS LAST, schemaname, relname
  LIMIT $1`

type Row = Record<(typeof COUNTERS)[number], string | null> & {
  relid: number
  schemaname: string
  relname: string
  n_live_tup: string | null
  n_dead_tup: string | null
  last_vacuum: Date | null
  last_autovacuum: Date | null
  last_analyze: Date | null
  last_autoanalyze: Date | null
  table_size_bytes: string | null
  index_size_bytes: string | null
  has_primary_key: boolean
}

export const tables: PostgresCollector = {
  name: 'tables',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<Row[]>(SQL, [MAX_TABLES])
    const previous = ctx.state.get('tables') as Map<number, TableCounters> | undefined
    const current = new Map<number, TableCounters>()
    const stats: TableStat[] = rows.map((r) => {
      const counters = Object.fromEntries(COUNTERS.map((k) => [k, num(r[k])])) as TableCounters
      current.set(r.relid, counters)
      return {
        schema_name: r.schemaname,
        table_name: r.relname,
        ...counters,
        n_live_tup: num(r.n_live_tup),
        n_dead_tup: num(r.n_dead_tup),
        last_vacuum: epoch(r.last_vacuum),
        last_autovacuum: epoch(r.last_autovacuum),
        last_analyze: epoch(r.last_analyze),
        last_autoanalyze: epoch(r.last_autoanalyze),
        table_size_bytes: num(r.table_size_bytes),
        index_size_bytes: num(r.index_size_bytes),
        has_primary_key: r.has_primary_key,
        delta: deltaOf(previous?.get(r.relid), counters),
      }
    })
    ctx.state.set('tables', current)
    return { tables: stats }
  },
}
