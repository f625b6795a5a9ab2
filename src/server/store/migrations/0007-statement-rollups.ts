// Migration 7: 10-minute statement buckets and the rollup marks, filled from the stored minute rows.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 7,
  name: 'statement statistics: 10-minute buckets, and 10-minute and hourly buckets rolled up from minute buckets after their span',
  sqlite: `
CREATE TABLE query_rollups (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  spans_until INTEGER NOT NULL,
  hours_until INTEGER NOT NULL
);
INSERT INTO query_stats (database_id, resolution, bucket, query_hash, calls, total_time_ms, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, shared_blks_written, temp_blks_read, temp_blks_written, blk_read_time_ms, blk_write_time_ms, read_bytes, memory_bytes, errors, p99_ms)
SELECT database_id, 600, (bucket / 600000) * 600000, query_hash, SUM(calls), SUM(total_time_ms), SUM(rows), SUM(shared_blks_hit), SUM(shared_blks_read), SUM(shared_blks_dirtied), SUM(shared_blks_written), SUM(temp_blks_read), SUM(temp_blks_written), SUM(blk_read_time_ms), SUM(blk_write_time_ms), SUM(read_bytes), SUM(memory_bytes), SUM(errors), MAX(p99_ms)
FROM query_stats WHERE resolution = 60
GROUP BY database_id, (bucket / 600000) * 600000, query_hash;
INSERT INTO query_rollups (database_id, spans_until, hours_until)
SELECT database_id, MAX(COALESCE(spans, 0), COALESCE(hours, first_hour)), COALESCE(hours, first_hour)
FROM (
  SELECT database_id,
         MAX(CASE WHEN resolution = 600 THEN bucket + 600000 END) AS spans,
         MAX(CASE WHEN resolution = 3600 THEN bucket + 3600000 END) AS hours,
         MIN(CASE WHEN resolution = 60 THEN (bucket / 3600000) * 3600000 END) AS first_hour
  FROM query_stats GROUP BY database_id
) marks;
`,
  postgres: `
CREATE TABLE query_rollups (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  spans_until BIGINT NOT NULL,
  hours_until BIGINT NOT NULL
);
INSERT INTO query_stats (database_id, resolution, bucket, query_hash, calls, total_time_ms, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, shared_blks_written, temp_blks_read, temp_blks_written, blk_read_time_ms, blk_write_time_ms, read_bytes, memory_bytes, errors, p99_ms)
SELECT database_id, 600, (bucket / 600000) * 600000, query_hash, SUM(calls), SUM(total_time_ms), SUM(rows), SUM(shared_blks_hit), SUM(shared_blks_read), SUM(shared_blks_dirtied), SUM(shared_blks_written), SUM(temp_blks_read), SUM(temp_blks_written), SUM(blk_read_time_ms), SUM(blk_write_time_ms), SUM(read_bytes), SUM(memory_bytes), SUM(errors), MAX(p99_ms)
FROM query_stats WHERE resolution = 60
GROUP BY database_id, (bucket / 600000) * 600000, query_hash;
INSERT INTO query_rollups (database_id, spans_until, hours_until)
SELECT database_id, GREATEST(COALESCE(spans, 0), COALESCE(hours, first_hour)), COALESCE(hours, first_hour)
FROM (
  SELECT database_id,
         MAX(CASE WHEN resolution = 600 THEN bucket + 600000 END) AS spans,
         MAX(CASE WHEN resolution = 3600 THEN bucket + 3600000 END) AS hours,
         MIN(CASE WHEN resolution = 60 THEN (bucket / 3600000) * 3600000 END) AS first_hour
  FROM query_stats GROUP BY database_id
) marks;
`,
}
