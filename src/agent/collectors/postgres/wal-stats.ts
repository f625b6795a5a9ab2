// wal_stats: WAL generation counters of pg_stat_wal (PostgreSQL 14+) as deltas since the previous
// sample. PostgreSQL 18 moved the write and sync counters out of pg_stat_wal into pg_stat_io (object
// 'wal'): there they are summed over the backend types of context 'normal', the writes and fsyncs of
// WAL that pg_stat_wal's wal_write and wal_sync counted (context 'init', the zero-filling of new
// segments, was never in those). The times are in milliseconds in both views, and zero unless
// track_wal_io_timing is on. On 18 a reset of either view (pg_stat_reset_shared('wal') or 'io')
// counts as a reset of the sample. The first sample only sets the baseline.
import { WAL_KEYS } from '../../../shared/metrics.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { singleRowDeltas } from './common.ts'

const KEYS = WAL_KEYS

const SQL = {
  14: `
    SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full, wal_write, wal_sync,
           wal_write_time AS wal_write_time_ms, wal_sync_time AS wal_sync_time_ms, stats_reset::text AS stats_reset
    FROM pg_stat_wal`,
  18: `
    SELECT w.wal_records, w.wal_fpi, w.wal_bytes, w.wal_buffers_full,
           io.writes AS wal_write, io.fsyncs AS wal_sync, io.write_time AS wal_write_time_ms, io.fsync_time AS wal_sync_time_ms,
           concat_ws(' / ', w.stats_reset::text, io.stats_reset::text) AS stats_reset
    FROM pg_stat_wal w,
         (SELECT sum(writes)::bigint AS writes, sum(fsyncs)::bigint AS fsyncs, sum(write_time)::float8 AS write_time,
                 sum(fsync_time)::float8 AS fsync_time, max(stats_reset) AS stats_reset
          FROM pg_stat_io WHERE object = 'wal' AND context = 'normal') io`,
}

export const walStats = registerCollector<PostgresContext>({
  name: 'wal_stats',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const delta = await singleRowDeltas(ctx, 'wal_stats', SQL, KEYS)
    return delta ? { wal_stats: delta } : {}
  },
})
