// Migration 3: table and index statistics over time, and the latest tables and indexes.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 3,
  name: 'table and index statistics over time, latest tables and indexes',
  sqlite: `
CREATE TABLE table_stats (
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
);
CREATE TABLE index_stats (
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
);
CREATE TABLE latest_tables (
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
  PRIMARY KEY (database_id, schema_name, table_name)
);
CREATE TABLE latest_indexes (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT NOT NULL,
  index_name TEXT NOT NULL,
  table_name TEXT NOT NULL,
  ts INTEGER NOT NULL,
  idx_scan INTEGER,
  idx_tup_read INTEGER,
  idx_tup_fetch INTEGER,
  size_bytes INTEGER,
  index_def TEXT NOT NULL,
  is_unique INTEGER NOT NULL,
  is_primary INTEGER NOT NULL,
  is_valid INTEGER NOT NULL,
  PRIMARY KEY (database_id, schema_name, index_name)
);
`,
  postgres: `
CREATE TABLE table_stats (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT COLLATE "C" NOT NULL,
  table_name TEXT COLLATE "C" NOT NULL,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  sampled_at BIGINT NOT NULL,
  seq_scan BIGINT,
  seq_tup_read BIGINT,
  idx_scan BIGINT,
  idx_tup_fetch BIGINT,
  n_tup_ins BIGINT,
  n_tup_upd BIGINT,
  n_tup_del BIGINT,
  n_tup_hot_upd BIGINT,
  n_live_tup BIGINT,
  n_dead_tup BIGINT,
  table_size_bytes BIGINT,
  index_size_bytes BIGINT,
  PRIMARY KEY (database_id, schema_name, table_name, resolution, bucket)
);
CREATE TABLE index_stats (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT COLLATE "C" NOT NULL,
  index_name TEXT COLLATE "C" NOT NULL,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  sampled_at BIGINT NOT NULL,
  idx_scan BIGINT,
  idx_tup_read BIGINT,
  idx_tup_fetch BIGINT,
  size_bytes BIGINT,
  PRIMARY KEY (database_id, schema_name, index_name, resolution, bucket)
);
CREATE TABLE latest_tables (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT COLLATE "C" NOT NULL,
  table_name TEXT COLLATE "C" NOT NULL,
  ts BIGINT NOT NULL,
  seq_scan BIGINT,
  seq_tup_read BIGINT,
  idx_scan BIGINT,
  idx_tup_fetch BIGINT,
  n_tup_ins BIGINT,
  n_tup_upd BIGINT,
  n_tup_del BIGINT,
  n_tup_hot_upd BIGINT,
  n_live_tup BIGINT,
  n_dead_tup BIGINT,
  table_size_bytes BIGINT,
  index_size_bytes BIGINT,
  last_vacuum BIGINT,
  last_autovacuum BIGINT,
  last_analyze BIGINT,
  last_autoanalyze BIGINT,
  has_primary_key BOOLEAN,
  PRIMARY KEY (database_id, schema_name, table_name)
);
CREATE TABLE latest_indexes (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  schema_name TEXT COLLATE "C" NOT NULL,
  index_name TEXT COLLATE "C" NOT NULL,
  table_name TEXT COLLATE "C" NOT NULL,
  ts BIGINT NOT NULL,
  idx_scan BIGINT,
  idx_tup_read BIGINT,
  idx_tup_fetch BIGINT,
  size_bytes BIGINT,
  index_def TEXT NOT NULL,
  is_unique BOOLEAN NOT NULL,
  is_primary BOOLEAN NOT NULL,
  is_valid BOOLEAN NOT NULL,
  PRIMARY KEY (database_id, schema_name, index_name)
);
`,
}
