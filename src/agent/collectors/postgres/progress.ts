// progress: the VACUUM, ANALYZE, CREATE INDEX / REINDEX and CLUSTER / VACUUM FULL commands running now
// in the connected database, from pg_stat_progress_vacuum, _analyze, _create_index and _cluster
// (PostgreSQL 13+ has all four), with their phase and the percentage of the phase's counter pair:
// blocks scanned or vacuumed of the table's blocks, sample blocks, child tables, extended statistics,
// lockers waited for (CREATE INDEX CONCURRENTLY's "waiting for ..." phases), blocks, tuples or
// partitions of an index build. A phase without such a pair has no percentage. Other databases'
// commands belong to their own entries in the agent config (their relation names resolve only there).
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import type { ProgressEntry } from '../../../shared/wire.ts'
import { epoch, num } from '../delta.ts'
import type { PostgresCollector } from '../types.ts'

const MAX_ENTRIES = ingestMaxItems.progress

// Each view's rows as (pid, command, phase, relid, index relid, unit, done, total). The phase decides the pair.
const PROGRESS_SQL = `
  WITH running AS (
    SELECT p.pid, 'VACUUM' AS command, p.phase, p.relid, NULL::oid AS index_relid,
           CASE p.phase WHEN 'scanning heap' THEN 'heap blocks scanned' WHEN 'vacuuming heap' THEN 'heap blocks vacuumed' END AS unit,
           CASE p.phase WHEN 'scanning heap' THEN p.heap_blks_scanned WHEN 'vacuuming heap' THEN p.heap_blks_vacuumed END AS done,
           CASE WHEN p.phase IN ('scanning heap', 'vacuuming heap') THEN p.heap_blks_total END AS total
    FROM pg_stat_progress_vacuum p WHERE p.datname = current_database()
    UNION ALL
    SELECT p.pid, 'ANALYZE', p.phase, p.relid, NULL,
           CASE p.phase WHEN 'acquiring sample rows' THEN 'sample blocks scanned' WHEN 'acquiring inherited sample rows' THEN 'child tables sampled'
                        WHEN 'computing extended statistics' THEN 'extended statistics computed' END,
           CASE p.phase WHEN 'acquiring sample rows' THEN p.sample_blks_scanned WHEN 'acquiring inherited sample rows' THEN p.child_tables_done
                        WHEN 'computing extended statistics' THEN p.ext_stats_computed END,
           CASE p.phase WHEN 'acquiring sample rows' THEN p.sample_blks_total WHEN 'acquiring inherited sample rows' THEN p.child_tables_total
                        WHEN 'computing extended statistics' THEN p.ext_stats_total END
    FROM pg_stat_progress_analyze p WHERE p.datname = current_database()
    UNION ALL
    SELECT p.pid, p.command, p.phase, p.relid, p.index_relid,
           CASE WHEN p.lockers_total > 0 THEN 'lockers waited for' WHEN p.blocks_total > 0 THEN 'blocks'
                WHEN p.tuples_total > 0 THEN 'tuples' WHEN p.partitions_total > 0 THEN 'partitions' END,
           CASE WHEN p.lockers_total > 0 THEN p.lockers_done WHEN p.blocks_total > 0 THEN p.blocks_done
                WHEN p.tuples_total > 0 THEN p.tuples_done WHEN p.partitions_total > 0 THEN p.partitions_done END,
           CASE WHEN p.lockers_total > 0 THEN p.lockers_total WHEN p.blocks_total > 0 THEN p.blocks_total
                WHEN p.tuples_total > 0 THEN p.tuples_total WHEN p.partitions_total > 0 THEN p.partitions_total END
    FROM pg_stat_progress_create_index p WHERE p.datname = current_database()
    UNION ALL
    SELECT p.pid, p.command, p.phase, p.relid, p.cluster_index_relid,
           CASE WHEN p.phase = 'seq scanning heap' THEN 'heap blocks scanned' END,
           CASE WHEN p.phase = 'seq scanning heap' THEN p.heap_blks_scanned END,
           CASE WHEN p.phase = 'seq scanning heap' THEN p.heap_blks_total END
    FROM pg_stat_progress_cluster p WHERE p.datname = current_database()
  )
  SELECT r.pid, CASE WHEN a.backend_type = 'autovacuum worker' THEN 'autovacuum: ' || r.command ELSE r.command END AS command,
         r.phase, tn.nspname AS schema_name, t.relname AS table_name, i.relname AS index_name,
         r.unit, r.done, r.total, a.query_start
  FROM running r
  LEFT JOIN pg_stat_activity a ON a.pid = r.pid
  LEFT JOIN pg_class t ON t.oid = r.relid
  LEFT JOIN pg_namespace tn ON tn.oid = t.relnamespace
  LEFT JOIN pg_class i ON i.oid = r.index_relid
  ORDER BY a.query_start NULLS LAST, r.pid
  LIMIT $1`

interface Row {
  pid: number
  command: string
  phase: string
  schema_name: string | null
  table_name: string | null
  index_name: string | null
  unit: string | null
  done: string | number | null
  total: string | number | null
  query_start: Date | null
}

/** done / total as a percentage within 0..100, to one decimal; null without a positive total. */
export function percentOf(done: number | null, total: number | null): number | null {
  if (done === null || total === null || total <= 0) return null
  return Math.min(100, Math.max(0, Math.round((done / total) * 1000) / 10))
}

export const progress: PostgresCollector = {
  name: 'progress',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<Row[]>(PROGRESS_SQL, [MAX_ENTRIES])
    return {
      progress: rows.map((r): ProgressEntry => {
        const done = num(r.done)
        const total = num(r.total)
        return {
          pid: r.pid,
          command: r.command,
          phase: r.phase,
          schema_name: r.schema_name,
          table_name: r.table_name,
          index_name: r.index_name,
          unit: r.unit,
          done,
          total,
          percent: percentOf(done, total),
          started_at: epoch(r.query_start),
        }
      }),
    }
  },
}
