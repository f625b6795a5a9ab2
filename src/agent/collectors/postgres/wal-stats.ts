// wal_stats: WAL generation counters of pg_stat_wal (PostgreSQL 14+) as deltas since the previous
// sample. PostgreSQL 18 moved the write and sync counters to pg_stat_io; there they are null.
// The first sample only sets the baseline.
import { WAL_KEYS } from '../../../shared/metrics.ts'
import type { PostgresCollector } from '../types.ts'
import { singleRowDeltas } from './common.ts'

const KEYS = WAL_KEYS

const SQL = {
  14: `
    SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full, wal_write, wal_sync,
           wal_write_time AS wal_write_time_ms, wal_sync_time AS wal_sync_time_ms, stats_reset::text AS stats_reset
    FROM pg_stat_wal`,
  18: `
    SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full,
           NULL::bigint AS wal_write, NULL::bigint AS wal_sync,
           NULL::float8 AS wal_write_time_ms, NULL::float8 AS wal_sync_time_ms, stats_reset::text AS stats_reset
    FROM pg_stat_wal`,
}

export const walStats: PostgresCollector = {
  name: 'wal_stats',
  engine: 'postgres',
  minVersion: 14,
  defaultEnabled: true,
  async collect(ctx) {
    const delta = await singleRowDeltas(ctx, 'wal_stats', SQL, KEYS)
    return delta ? { wal_stats: delta } : {}
  },
}
