// Migration 10: on SQLite, the tables whose primary key (composite, or TEXT) is the whole point of
// the table are stored WITHOUT ROWID. A rowid table with such a key is stored twice: the rows in rowid
// order, and an automatic index holding every key column again plus the rowid. In these tables every
// read and every upsert goes through the key, so that index only cost space and writes (38 % of a 1 GB
// store). A WITHOUT ROWID table is one b-tree ordered by the key, the rest of the row beside it.
// Rebuilt: the bucket tables (query_stats, table_stats, index_stats, wait_stats, replication_lag,
// replication_slot_lag, metric_counters, metric_gauges), ingest_batches, query_rollups and
// latest_tables. Their rows are 50-130 bytes (dbstat on a store filled with real-shaped batches), well
// under the 1/20 of a 4 KiB page beyond which SQLite advises against WITHOUT ROWID (such a table keeps
// whole rows in its interior pages, so large rows cut its fan-out).
// Left as they are: tables with large or unbounded text or JSON in their rows (query_texts: statement
// texts; snapshots, internals_latest and clickhouse_latest: JSON payloads; explain_plans: plan JSON,
// and no primary key; latest_indexes: index definitions, ~190 bytes on average and unbounded), and
// the account tables (small, and referenced by the others' foreign keys).
// Each table is rebuilt the way SQLite documents for a change ALTER TABLE cannot make: a new table
// with exactly the columns, types, constraints and foreign key of the old one (as migrations 2, 3, 4,
// 7 and 8 left it), the rows copied in key order, the old table dropped, the new one renamed, and the
// old table's secondary indexes (migration 6's retention indexes, ingest_batches_received) created
// again. sqlite_master then names each rebuilt table in quotes (CREATE TABLE "query_stats"), as
// SQLite's rename writes it. A WITHOUT ROWID table's key is NOT NULL: query_rollups' database_id now
// is, as on PostgreSQL (dbm never wrote it NULL: migration 7 and the rollups fill it with a database's id).
// PostgreSQL keeps every table as a heap with its primary key as a separate index and has no WITHOUT
// ROWID: its side changes nothing.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 10,
  name: 'SQLite: the bucket tables, batch ids, rollup marks and latest tables are stored WITHOUT ROWID, in their primary key (no duplicate index of it)',
  sqlite: `
CREATE TABLE ingest_batches_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  batch_id TEXT NOT NULL,
  collected_at INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, batch_id)
) WITHOUT ROWID;
INSERT INTO ingest_batches_new (database_id, batch_id, collected_at, received_at)
SELECT database_id, batch_id, collected_at, received_at FROM ingest_batches ORDER BY database_id, batch_id;
DROP TABLE ingest_batches;
ALTER TABLE ingest_batches_new RENAME TO ingest_batches;
CREATE INDEX ingest_batches_received ON ingest_batches(received_at);
CREATE TABLE query_stats_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  query_hash TEXT NOT NULL,
  calls INTEGER NOT NULL,
  total_time_ms REAL NOT NULL,
  rows INTEGER NOT NULL,
  shared_blks_hit INTEGER NOT NULL,
  shared_blks_read INTEGER NOT NULL,
  shared_blks_dirtied INTEGER NOT NULL,
  shared_blks_written INTEGER NOT NULL,
  temp_blks_read INTEGER NOT NULL,
  temp_blks_written INTEGER NOT NULL,
  blk_read_time_ms REAL NOT NULL,
  blk_write_time_ms REAL NOT NULL,
  read_bytes INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  errors INTEGER NOT NULL,
  p99_ms REAL,
  PRIMARY KEY (database_id, resolution, bucket, query_hash)
) WITHOUT ROWID;
INSERT INTO query_stats_new (database_id, resolution, bucket, query_hash, calls, total_time_ms, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, shared_blks_written, temp_blks_read, temp_blks_written, blk_read_time_ms, blk_write_time_ms, read_bytes, memory_bytes, errors, p99_ms)
SELECT database_id, resolution, bucket, query_hash, calls, total_time_ms, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, shared_blks_written, temp_blks_read, temp_blks_written, blk_read_time_ms, blk_write_time_ms, read_bytes, memory_bytes, errors, p99_ms FROM query_stats ORDER BY database_id, resolution, bucket, query_hash;
DROP TABLE query_stats;
ALTER TABLE query_stats_new RENAME TO query_stats;
CREATE TABLE table_stats_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT NOT NULL,
  table_name TEXT NOT NULL,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  sampled_at INTEGER NOT NULL,
  seq_scan INTEGER,
  seq_tup_read INTEGER,
  idx_scan INTEGER,
  idx_tup_fetch INTEGER,
  n_tup_ins INTEGER,
  n_tup_upd INTEGER,
  n_tup_del INTEGER,
  n_tup_hot_upd INTEGER,
  n_live_tup INTEGER,
  n_dead_tup INTEGER,
  table_size_bytes INTEGER,
  index_size_bytes INTEGER,
  PRIMARY KEY (database_id, schema_name, table_name, resolution, bucket)
) WITHOUT ROWID;
INSERT INTO table_stats_new (database_id, schema_name, table_name, resolution, bucket, sampled_at, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_live_tup, n_dead_tup, table_size_bytes, index_size_bytes)
SELECT database_id, schema_name, table_name, resolution, bucket, sampled_at, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_live_tup, n_dead_tup, table_size_bytes, index_size_bytes FROM table_stats ORDER BY database_id, schema_name, table_name, resolution, bucket;
DROP TABLE table_stats;
ALTER TABLE table_stats_new RENAME TO table_stats;
CREATE INDEX table_stats_age ON table_stats(database_id, resolution, bucket);
CREATE TABLE index_stats_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT NOT NULL,
  index_name TEXT NOT NULL,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  sampled_at INTEGER NOT NULL,
  idx_scan INTEGER,
  idx_tup_read INTEGER,
  idx_tup_fetch INTEGER,
  size_bytes INTEGER,
  PRIMARY KEY (database_id, schema_name, index_name, resolution, bucket)
) WITHOUT ROWID;
INSERT INTO index_stats_new (database_id, schema_name, index_name, resolution, bucket, sampled_at, idx_scan, idx_tup_read, idx_tup_fetch, size_bytes)
SELECT database_id, schema_name, index_name, resolution, bucket, sampled_at, idx_scan, idx_tup_read, idx_tup_fetch, size_bytes FROM index_stats ORDER BY database_id, schema_name, index_name, resolution, bucket;
DROP TABLE index_stats;
ALTER TABLE index_stats_new RENAME TO index_stats;
CREATE INDEX index_stats_age ON index_stats(database_id, resolution, bucket);
CREATE TABLE latest_tables_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT NOT NULL,
  table_name TEXT NOT NULL,
  ts INTEGER NOT NULL,
  seq_scan INTEGER,
  seq_tup_read INTEGER,
  idx_scan INTEGER,
  idx_tup_fetch INTEGER,
  n_tup_ins INTEGER,
  n_tup_upd INTEGER,
  n_tup_del INTEGER,
  n_tup_hot_upd INTEGER,
  n_live_tup INTEGER,
  n_dead_tup INTEGER,
  table_size_bytes INTEGER,
  index_size_bytes INTEGER,
  last_vacuum INTEGER,
  last_autovacuum INTEGER,
  last_analyze INTEGER,
  last_autoanalyze INTEGER,
  has_primary_key INTEGER,
  autovacuum_enabled INTEGER,
  PRIMARY KEY (database_id, schema_name, table_name)
) WITHOUT ROWID;
INSERT INTO latest_tables_new (database_id, schema_name, table_name, ts, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_live_tup, n_dead_tup, table_size_bytes, index_size_bytes, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze, has_primary_key, autovacuum_enabled)
SELECT database_id, schema_name, table_name, ts, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_live_tup, n_dead_tup, table_size_bytes, index_size_bytes, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze, has_primary_key, autovacuum_enabled FROM latest_tables ORDER BY database_id, schema_name, table_name;
DROP TABLE latest_tables;
ALTER TABLE latest_tables_new RENAME TO latest_tables;
CREATE TABLE wait_stats_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  wait_event_type TEXT NOT NULL,
  wait_event TEXT NOT NULL,
  count INTEGER NOT NULL,
  total_duration_ms REAL NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, wait_event_type, wait_event)
) WITHOUT ROWID;
INSERT INTO wait_stats_new (database_id, resolution, bucket, wait_event_type, wait_event, count, total_duration_ms)
SELECT database_id, resolution, bucket, wait_event_type, wait_event, count, total_duration_ms FROM wait_stats ORDER BY database_id, resolution, bucket, wait_event_type, wait_event;
DROP TABLE wait_stats;
ALTER TABLE wait_stats_new RENAME TO wait_stats;
CREATE TABLE replication_lag_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  replication_lag_bytes INTEGER,
  replication_lag_seconds REAL,
  PRIMARY KEY (database_id, resolution, bucket)
) WITHOUT ROWID;
INSERT INTO replication_lag_new (database_id, resolution, bucket, replication_lag_bytes, replication_lag_seconds)
SELECT database_id, resolution, bucket, replication_lag_bytes, replication_lag_seconds FROM replication_lag ORDER BY database_id, resolution, bucket;
DROP TABLE replication_lag;
ALTER TABLE replication_lag_new RENAME TO replication_lag;
CREATE TABLE replication_slot_lag_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  slot_name TEXT NOT NULL,
  lag_bytes INTEGER NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, slot_name)
) WITHOUT ROWID;
INSERT INTO replication_slot_lag_new (database_id, resolution, bucket, slot_name, lag_bytes)
SELECT database_id, resolution, bucket, slot_name, lag_bytes FROM replication_slot_lag ORDER BY database_id, resolution, bucket, slot_name;
DROP TABLE replication_slot_lag;
ALTER TABLE replication_slot_lag_new RENAME TO replication_slot_lag;
CREATE TABLE metric_counters_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  source TEXT NOT NULL,
  subject TEXT NOT NULL,
  metric TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (database_id, source, resolution, bucket, subject, metric)
) WITHOUT ROWID;
INSERT INTO metric_counters_new (database_id, resolution, bucket, source, subject, metric, value)
SELECT database_id, resolution, bucket, source, subject, metric, value FROM metric_counters ORDER BY database_id, source, resolution, bucket, subject, metric;
DROP TABLE metric_counters;
ALTER TABLE metric_counters_new RENAME TO metric_counters;
CREATE TABLE metric_gauges_new (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  source TEXT NOT NULL,
  subject TEXT NOT NULL,
  metric TEXT NOT NULL,
  value REAL NOT NULL,
  sampled_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, source, resolution, bucket, subject, metric)
) WITHOUT ROWID;
INSERT INTO metric_gauges_new (database_id, resolution, bucket, source, subject, metric, value, sampled_at)
SELECT database_id, resolution, bucket, source, subject, metric, value, sampled_at FROM metric_gauges ORDER BY database_id, source, resolution, bucket, subject, metric;
DROP TABLE metric_gauges;
ALTER TABLE metric_gauges_new RENAME TO metric_gauges;
CREATE TABLE query_rollups_new (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  spans_until INTEGER NOT NULL,
  hours_until INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO query_rollups_new (database_id, spans_until, hours_until)
SELECT database_id, spans_until, hours_until FROM query_rollups ORDER BY database_id;
DROP TABLE query_rollups;
ALTER TABLE query_rollups_new RENAME TO query_rollups;
`,
  postgres: `
-- PostgreSQL has no WITHOUT ROWID: its tables are heaps with the primary key as a separate index.
SELECT 1;
`,
}
