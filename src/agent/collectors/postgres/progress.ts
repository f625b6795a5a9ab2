// progress: the VACUUM, ANALYZE, CREATE INDEX / REINDEX and CLUSTER / VACUUM FULL commands running now
// in the connected database, from pg_stat_progress_vacuum, _analyze, _create_index and _cluster
// (PostgreSQL 13+ has all four), with their phase and the percentage of the phase's counter pair:
// blocks scanned or vacuumed of the table's blocks, sample blocks, child tables, extended statistics,
// lockers waited for (CREATE INDEX CONCURRENTLY's "waiting for ..." phases), blocks, tuples or
// partitions of an index build. A phase without such a pair has no percentage. Other databases'
// commands belong to their own entries in the agent config (their relation names resolve only there).
// What a command waits on: its backend's wait event, and the session it waits for, from
// current_locker_pid (CREATE INDEX CONCURRENTLY's "waiting for ..." phases name it) or, on a lock wait,
// the first of pg_blocking_pids(); that session as pg_stat_activity shows it, in any database (an old
// snapshot in another database holds back a build too), its statement masked as activity's are.
import { ingestMaxItems, ingestTextLimits } from '../../../shared/ingest-limits.ts'
import type { MaintenanceBlocker, ProgressEntry } from '../../../shared/wire.ts'
import { maskSecretStatements } from '../../secret-statements.ts'
import { epoch, num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { PREPARED } from '../../own-statements.ts'

const MAX_ENTRIES = ingestMaxItems.progress
/** The blocker's statement, cut short enough that masking keeps it within the wire's limit. */
const MAX_BLOCKER_QUERY = ingestTextLimits.holderQueryText

// Each view's rows as (pid, command, phase, relid, index relid, unit, done, total, lockers done, lockers
// total, current locker). The phase decides the pair.
const PROGRESS_SQL = `
  WITH running AS (
    SELECT p.pid, 'VACUUM' AS command, p.phase, p.relid, NULL::oid AS index_relid,
           CASE p.phase WHEN 'scanning heap' THEN 'heap blocks scanned' WHEN 'vacuuming heap' THEN 'heap blocks vacuumed' END AS unit,
           CASE p.phase WHEN 'scanning heap' THEN p.heap_blks_scanned WHEN 'vacuuming heap' THEN p.heap_blks_vacuumed END AS done,
           CASE WHEN p.phase IN ('scanning heap', 'vacuuming heap') THEN p.heap_blks_total END AS total,
           NULL::int8 AS lockers_done, NULL::int8 AS lockers_total, NULL::int4 AS locker_pid
    FROM pg_stat_progress_vacuum p WHERE p.datname = current_database()
    UNION ALL
    SELECT p.pid, 'ANALYZE', p.phase, p.relid, NULL,
           CASE p.phase WHEN 'acquiring sample rows' THEN 'sample blocks scanned' WHEN 'acquiring inherited sample rows' THEN 'child tables sampled'
                        WHEN 'computing extended statistics' THEN 'extended statistics computed' END,
           CASE p.phase WHEN 'acquiring sample rows' THEN p.sample_blks_scanned WHEN 'acquiring inherited sample rows' THEN p.child_tables_done
                        WHEN 'computing extended statistics' THEN p.ext_stats_computed END,
           CASE p.phase WHEN 'acquiring sample rows' THEN p.sample_blks_total WHEN 'acquiring inherited sample rows' THEN p.child_tables_total
                        WHEN 'computing extended statistics' THEN p.ext_stats_total END,
           NULL, NULL, NULL
    FROM pg_stat_progress_analyze p WHERE p.datname = current_database()
    UNION ALL
    SELECT p.pid, p.command, p.phase, p.relid, p.index_relid,
           CASE WHEN p.lockers_total > 0 THEN 'lockers waited for' WHEN p.blocks_total > 0 THEN 'blocks'
                WHEN p.tuples_total > 0 THEN 'tuples' WHEN p.partitions_total > 0 THEN 'partitions' END,
           CASE WHEN p.lockers_total > 0 THEN p.lockers_done WHEN p.blocks_total > 0 THEN p.blocks_done
                WHEN p.tuples_total > 0 THEN p.tuples_done WHEN p.partitions_total > 0 THEN p.partitions_done END,
           CASE WHEN p.lockers_total > 0 THEN p.lockers_total WHEN p.blocks_total > 0 THEN p.blocks_total
                WHEN p.tuples_total > 0 THEN p.tuples_total WHEN p.partitions_total > 0 THEN p.partitions_total END,
           p.lockers_done, p.lockers_total, p.current_locker_pid::int4
    FROM pg_stat_progress_create_index p WHERE p.datname = current_database()
    UNION ALL
    SELECT p.pid, p.command, p.phase, p.relid, p.cluster_index_relid,
           CASE WHEN p.phase = 'seq scanning heap' THEN 'heap blocks scanned' END,
           CASE WHEN p.phase = 'seq scanning heap' THEN p.heap_blks_scanned END,
           CASE WHEN p.phase = 'seq scanning heap' THEN p.heap_blks_total END,
           NULL, NULL, NULL
    FROM pg_stat_progress_cluster p WHERE p.datname = current_database()
  )
  SELECT r.pid, CASE WHEN a.backend_type = 'autovacuum worker' THEN 'autovacuum: ' || r.command ELSE r.command END AS command,
         r.phase, tn.nspname AS schema_name, t.relname AS table_name, i.relname AS index_name,
         r.unit, r.done, r.total, a.query_start, a.wait_event_type, a.wait_event,
         r.lockers_done, r.lockers_total, r.locker_pid, w.blocker_pid, w.via,
         b.usename AS b_user, b.application_name AS b_application, host(b.client_addr) AS b_client, b.backend_type AS b_backend_type,
         b.state AS b_state, b.xact_start AS b_xact_start, b.state_change AS b_state_change, left(b.query, ${MAX_BLOCKER_QUERY}) AS b_query
  FROM running r
  LEFT JOIN pg_stat_activity a ON a.pid = r.pid
  LEFT JOIN LATERAL (
    SELECT CASE WHEN coalesce(r.locker_pid, 0) > 0 THEN r.locker_pid
                WHEN a.wait_event_type = 'Lock' THEN (pg_blocking_pids(r.pid))[1] END AS blocker_pid,
           CASE WHEN coalesce(r.locker_pid, 0) > 0 THEN 'current_locker_pid' ELSE 'pg_blocking_pids' END AS via
  ) w ON true
  LEFT JOIN pg_stat_activity b ON b.pid = w.blocker_pid
  LEFT JOIN pg_class t ON t.oid = r.relid
  LEFT JOIN pg_namespace tn ON tn.oid = t.relnamespace
  LEFT JOIN pg_class i ON i.oid = r.index_relid
  ORDER BY a.query_start NULLS LAST, r.pid
  LIMIT ${MAX_ENTRIES}`

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
  wait_event_type: string | null
  wait_event: string | null
  lockers_done: string | number | null
  lockers_total: string | number | null
  locker_pid: number | null
  blocker_pid: number | null
  via: 'current_locker_pid' | 'pg_blocking_pids'
  b_user: string | null
  b_application: string | null
  b_client: string | null
  b_backend_type: string | null
  b_state: string | null
  b_xact_start: Date | null
  b_state_change: Date | null
  b_query: string | null
}

/** The session the command waits for, as the wire carries it; null when it waits for none. */
function blockerOf(r: Row): MaintenanceBlocker | null {
  if (r.blocker_pid === null) return null
  return {
    pid: r.blocker_pid,
    via: r.via,
    user: r.b_user,
    application_name: r.b_application,
    client_addr: r.b_client,
    backend_type: r.b_backend_type,
    state: r.b_state,
    xact_start: epoch(r.b_xact_start),
    state_change: epoch(r.b_state_change),
    query_text: r.b_query === null ? null : maskSecretStatements(r.b_query).slice(0, MAX_BLOCKER_QUERY),
  }
}

/** done / total as a percentage within 0..100, to one decimal; null without a positive total. */
export function percentOf(done: number | null, total: number | null): number | null {
  if (done === null || total === null || total <= 0) return null
  return Math.min(100, Math.max(0, Math.round((done / total) * 1000) / 10))
}

export const progress = registerCollector<PostgresContext>({
  name: 'progress',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<Row[]>(PROGRESS_SQL, [], PREPARED)
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
          wait_event_type: r.wait_event_type,
          wait_event: r.wait_event,
          ...(r.command.includes('INDEX')
            ? {
                lockers_done: num(r.lockers_done),
                lockers_total: num(r.lockers_total),
                current_locker_pid: r.locker_pid ? r.locker_pid : null,
              }
            : {}),
          blocker: blockerOf(r),
        }
      }),
    }
  },
})
