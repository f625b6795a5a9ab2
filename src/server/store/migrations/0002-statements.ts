// Migration 2: ingest batches, statement texts and statistics, explain plans and snapshots.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 2,
  name: 'access-token cut-off per user, ingest batches, statement statistics in 60 s and 1 h buckets, latest snapshots',
  sqlite: `
ALTER TABLE users ADD COLUMN tokens_valid_after INTEGER;
ALTER TABLE refresh_tokens ADD COLUMN replaced_by TEXT;
CREATE TABLE ingest_batches (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  batch_id TEXT NOT NULL,
  collected_at INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, batch_id)
);
CREATE INDEX ingest_batches_received ON ingest_batches(received_at);
CREATE TABLE query_texts (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  query_hash TEXT NOT NULL,
  query_text TEXT NOT NULL,
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  PRIMARY KEY (database_id, query_hash)
);
CREATE TABLE query_stats (
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
);
CREATE TABLE explain_plans (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  query_hash TEXT NOT NULL,
  ts INTEGER NOT NULL,
  plan_hash TEXT NOT NULL,
  source TEXT NOT NULL,
  total_cost REAL,
  actual_time_ms REAL,
  seq_scans INTEGER NOT NULL,
  index_scans INTEGER NOT NULL,
  rows_estimated REAL,
  rows_actual REAL,
  plan_json TEXT NOT NULL
);
CREATE INDEX explain_plans_query ON explain_plans(database_id, query_hash, ts);
CREATE TABLE snapshots (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts INTEGER NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
`,
  postgres: `
ALTER TABLE users ADD COLUMN tokens_valid_after BIGINT;
ALTER TABLE refresh_tokens ADD COLUMN replaced_by TEXT;
CREATE TABLE ingest_batches (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  batch_id TEXT NOT NULL,
  collected_at BIGINT NOT NULL,
  received_at BIGINT NOT NULL,
  PRIMARY KEY (database_id, batch_id)
);
CREATE INDEX ingest_batches_received ON ingest_batches(received_at);
CREATE TABLE query_texts (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  query_hash TEXT NOT NULL,
  query_text TEXT NOT NULL,
  first_seen BIGINT NOT NULL,
  last_seen BIGINT NOT NULL,
  PRIMARY KEY (database_id, query_hash)
);
CREATE TABLE query_stats (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  query_hash TEXT NOT NULL,
  calls BIGINT NOT NULL,
  total_time_ms DOUBLE PRECISION NOT NULL,
  rows BIGINT NOT NULL,
  shared_blks_hit BIGINT NOT NULL,
  shared_blks_read BIGINT NOT NULL,
  shared_blks_dirtied BIGINT NOT NULL,
  shared_blks_written BIGINT NOT NULL,
  temp_blks_read BIGINT NOT NULL,
  temp_blks_written BIGINT NOT NULL,
  blk_read_time_ms DOUBLE PRECISION NOT NULL,
  blk_write_time_ms DOUBLE PRECISION NOT NULL,
  read_bytes BIGINT NOT NULL,
  memory_bytes BIGINT NOT NULL,
  errors BIGINT NOT NULL,
  p99_ms DOUBLE PRECISION,
  PRIMARY KEY (database_id, resolution, bucket, query_hash)
);
CREATE TABLE explain_plans (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  query_hash TEXT NOT NULL,
  ts BIGINT NOT NULL,
  plan_hash TEXT NOT NULL,
  source TEXT NOT NULL,
  total_cost DOUBLE PRECISION,
  actual_time_ms DOUBLE PRECISION,
  seq_scans INTEGER NOT NULL,
  index_scans INTEGER NOT NULL,
  rows_estimated DOUBLE PRECISION,
  rows_actual DOUBLE PRECISION,
  plan_json TEXT NOT NULL
);
CREATE INDEX explain_plans_query ON explain_plans(database_id, query_hash, ts);
CREATE TABLE snapshots (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts BIGINT NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
`,
}
