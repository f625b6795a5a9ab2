// The schema of version 10, frozen: what migrations 1 to 10 build, created in one go on a new store
// (migrations.ts migrate()) instead of applying the ten one by one. On SQLite that saves creating eleven
// tables twice (migration 10 rebuilds them WITHOUT ROWID; on an empty store it did nothing but DDL, about
// 10 ms of a fresh `dbm serve` start's time before it could listen; bench/RESULTS.md, Start-up).
// Generated once from the migrations (SQLite: sqlite_master's text of every table, then every index, of a
// store that applied 1 to 10, in creation order; PostgreSQL: the ten migrations' texts one after the
// other, as one script: migration 10 changes nothing there, and one exchange replaces ten). Never edit it:
// test/store/migrations.test.ts checks that it builds exactly the schema the ten migrations build, on both
// stores. Migrations after 10 are applied after it as usual, so a new migration needs no change here.
import type { Migration } from './migration.ts'

/** The versions the baseline stands for, applied by one script; recorded in schema_migrations as each of them. */
export const baseline: Pick<Migration, 'version' | 'sqlite' | 'postgres'> = {
  version: 10,
  sqlite: `
CREATE TABLE organizations (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  slug TEXT NOT NULL UNIQUE,
  plan TEXT NOT NULL,
  verified INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  email_verified_at INTEGER,
  created_at INTEGER NOT NULL
, tokens_valid_after INTEGER);
CREATE TABLE refresh_tokens (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  family_id TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER,
  created_at INTEGER NOT NULL
, replaced_by TEXT);
CREATE TABLE email_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  key_id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  secret_hash TEXT NOT NULL,
  created_by TEXT,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER
);
CREATE TABLE databases (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  engine TEXT NOT NULL,
  engine_version TEXT,
  host TEXT NOT NULL,
  port INTEGER NOT NULL,
  tags TEXT NOT NULL,
  poll_interval_seconds INTEGER NOT NULL,
  collect_explain_plans INTEGER NOT NULL,
  collect_replication INTEGER NOT NULL,
  disabled_collectors TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  last_seen_at INTEGER,
  UNIQUE (org_id, name)
);
CREATE TABLE rate_events (
  key TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE TABLE query_texts (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  query_hash TEXT NOT NULL,
  query_text TEXT NOT NULL,
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  PRIMARY KEY (database_id, query_hash)
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
CREATE TABLE snapshots (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts INTEGER NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
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
CREATE TABLE internals_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts INTEGER NOT NULL,
  interval_seconds REAL NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
CREATE TABLE clickhouse_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts INTEGER NOT NULL,
  interval_seconds REAL NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
CREATE TABLE recommendations (
  id TEXT PRIMARY KEY,
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  rule TEXT NOT NULL,
  severity TEXT NOT NULL,
  category TEXT NOT NULL,
  title TEXT NOT NULL,
  detail TEXT NOT NULL,
  recommendation TEXT NOT NULL,
  remediation_sql TEXT NOT NULL,
  first_seen_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  resolved_at INTEGER
);
CREATE TABLE alerts (
  id TEXT PRIMARY KEY,
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  rule TEXT NOT NULL,
  severity TEXT NOT NULL,
  title TEXT NOT NULL,
  detail TEXT NOT NULL,
  opened_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  resolved_at INTEGER
);
CREATE TABLE alert_notifications (
  id TEXT PRIMARY KEY,
  alert_id TEXT NOT NULL REFERENCES alerts(id) ON DELETE CASCADE,
  event TEXT NOT NULL,
  channel TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  sent_at INTEGER,
  gave_up_at INTEGER,
  last_error TEXT,
  UNIQUE (alert_id, event, channel)
);
CREATE TABLE organization_webhooks (
  org_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  last_success_at INTEGER,
  last_failure_at INTEGER,
  last_error TEXT
);
CREATE TABLE database_health (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  evaluated_at INTEGER,
  status TEXT,
  score INTEGER,
  critical INTEGER,
  warning INTEGER,
  info INTEGER,
  active_queries INTEGER,
  claimed_by TEXT,
  claimed_until INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE "ingest_batches" (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  batch_id TEXT NOT NULL,
  collected_at INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, batch_id)
) WITHOUT ROWID;
CREATE TABLE "query_stats" (
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
CREATE TABLE "table_stats" (
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
CREATE TABLE "index_stats" (
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
CREATE TABLE "latest_tables" (
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
CREATE TABLE "wait_stats" (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  wait_event_type TEXT NOT NULL,
  wait_event TEXT NOT NULL,
  count INTEGER NOT NULL,
  total_duration_ms REAL NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, wait_event_type, wait_event)
) WITHOUT ROWID;
CREATE TABLE "replication_lag" (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  replication_lag_bytes INTEGER,
  replication_lag_seconds REAL,
  PRIMARY KEY (database_id, resolution, bucket)
) WITHOUT ROWID;
CREATE TABLE "replication_slot_lag" (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  slot_name TEXT NOT NULL,
  lag_bytes INTEGER NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, slot_name)
) WITHOUT ROWID;
CREATE TABLE "metric_counters" (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  source TEXT NOT NULL,
  subject TEXT NOT NULL,
  metric TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (database_id, source, resolution, bucket, subject, metric)
) WITHOUT ROWID;
CREATE TABLE "metric_gauges" (
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
CREATE TABLE "query_rollups" (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  spans_until INTEGER NOT NULL,
  hours_until INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX users_org ON users(org_id);
CREATE INDEX refresh_tokens_user ON refresh_tokens(user_id);
CREATE INDEX refresh_tokens_family ON refresh_tokens(family_id);
CREATE INDEX email_tokens_user ON email_tokens(user_id, kind);
CREATE INDEX api_keys_org ON api_keys(org_id);
CREATE INDEX rate_events_key_at ON rate_events(key, at);
CREATE INDEX explain_plans_query ON explain_plans(database_id, query_hash, ts);
CREATE UNIQUE INDEX recommendations_open ON recommendations(database_id, key) WHERE resolved_at IS NULL;
CREATE INDEX recommendations_database ON recommendations(database_id, resolved_at);
CREATE UNIQUE INDEX alerts_open ON alerts(database_id, key) WHERE resolved_at IS NULL;
CREATE INDEX alerts_database ON alerts(database_id, resolved_at);
CREATE INDEX alert_notifications_pending ON alert_notifications(next_attempt_at) WHERE sent_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX ingest_batches_received ON ingest_batches(received_at);
CREATE INDEX table_stats_age ON table_stats(database_id, resolution, bucket);
CREATE INDEX index_stats_age ON index_stats(database_id, resolution, bucket);
`,
  postgres: `
-- migration 1: accounts, api keys, registered databases, rate limits
CREATE TABLE organizations (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  slug TEXT NOT NULL UNIQUE,
  plan TEXT NOT NULL,
  verified BOOLEAN NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  email_verified_at BIGINT,
  created_at BIGINT NOT NULL
);
CREATE INDEX users_org ON users(org_id);
CREATE TABLE refresh_tokens (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  family_id TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  revoked_at BIGINT,
  created_at BIGINT NOT NULL
);
CREATE INDEX refresh_tokens_user ON refresh_tokens(user_id);
CREATE INDEX refresh_tokens_family ON refresh_tokens(family_id);
CREATE TABLE email_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  used_at BIGINT,
  created_at BIGINT NOT NULL
);
CREATE INDEX email_tokens_user ON email_tokens(user_id, kind);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  key_id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  secret_hash TEXT NOT NULL,
  created_by TEXT,
  created_at BIGINT NOT NULL,
  last_used_at BIGINT,
  revoked_at BIGINT
);
CREATE INDEX api_keys_org ON api_keys(org_id);
CREATE TABLE databases (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  name TEXT COLLATE "C" NOT NULL,
  engine TEXT NOT NULL,
  engine_version TEXT,
  host TEXT NOT NULL,
  port INTEGER NOT NULL,
  tags TEXT NOT NULL,
  poll_interval_seconds INTEGER NOT NULL,
  collect_explain_plans BOOLEAN NOT NULL,
  collect_replication BOOLEAN NOT NULL,
  disabled_collectors TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  last_seen_at BIGINT,
  UNIQUE (org_id, name)
);
CREATE TABLE rate_events (
  key TEXT NOT NULL,
  at BIGINT NOT NULL
);
CREATE INDEX rate_events_key_at ON rate_events(key, at);
-- migration 2: access-token cut-off per user, ingest batches, statement statistics in 60 s and 1 h buckets, latest snapshots
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
-- migration 3: table and index statistics over time, latest tables and indexes
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
-- migration 4: wait events, replication, bgwriter, WAL, I/O and database statistics over time
CREATE TABLE wait_stats (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  wait_event_type TEXT COLLATE "C" NOT NULL,
  wait_event TEXT COLLATE "C" NOT NULL,
  count BIGINT NOT NULL,
  total_duration_ms DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, wait_event_type, wait_event)
);
CREATE TABLE replication_lag (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  replication_lag_bytes BIGINT,
  replication_lag_seconds DOUBLE PRECISION,
  PRIMARY KEY (database_id, resolution, bucket)
);
CREATE TABLE replication_slot_lag (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  slot_name TEXT COLLATE "C" NOT NULL,
  lag_bytes BIGINT NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, slot_name)
);
CREATE TABLE metric_counters (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  source TEXT NOT NULL,
  subject TEXT COLLATE "C" NOT NULL,
  metric TEXT NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (database_id, source, resolution, bucket, subject, metric)
);
CREATE TABLE metric_gauges (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  source TEXT NOT NULL,
  subject TEXT COLLATE "C" NOT NULL,
  metric TEXT NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  sampled_at BIGINT NOT NULL,
  PRIMARY KEY (database_id, source, resolution, bucket, subject, metric)
);
CREATE TABLE internals_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts BIGINT NOT NULL,
  interval_seconds DOUBLE PRECISION NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
-- migration 5: latest ClickHouse parts, merges, mutations and server metrics
CREATE TABLE clickhouse_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts BIGINT NOT NULL,
  interval_seconds DOUBLE PRECISION NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
-- migration 6: recommendations, alerts and their notifications, organization webhooks, telemetry age indexes for retention
CREATE TABLE recommendations (
  id TEXT PRIMARY KEY,
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  key TEXT COLLATE "C" NOT NULL,
  rule TEXT NOT NULL,
  severity TEXT NOT NULL,
  category TEXT NOT NULL,
  title TEXT NOT NULL,
  detail TEXT NOT NULL,
  recommendation TEXT NOT NULL,
  remediation_sql TEXT NOT NULL,
  first_seen_at BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  resolved_at BIGINT
);
CREATE UNIQUE INDEX recommendations_open ON recommendations(database_id, key) WHERE resolved_at IS NULL;
CREATE INDEX recommendations_database ON recommendations(database_id, resolved_at);
CREATE TABLE alerts (
  id TEXT PRIMARY KEY,
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  key TEXT COLLATE "C" NOT NULL,
  rule TEXT NOT NULL,
  severity TEXT NOT NULL,
  title TEXT NOT NULL,
  detail TEXT NOT NULL,
  opened_at BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  resolved_at BIGINT
);
CREATE UNIQUE INDEX alerts_open ON alerts(database_id, key) WHERE resolved_at IS NULL;
CREATE INDEX alerts_database ON alerts(database_id, resolved_at);
CREATE TABLE alert_notifications (
  id TEXT PRIMARY KEY,
  alert_id TEXT NOT NULL REFERENCES alerts(id) ON DELETE CASCADE,
  event TEXT NOT NULL,
  channel TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  next_attempt_at BIGINT NOT NULL,
  attempts INTEGER NOT NULL,
  sent_at BIGINT,
  gave_up_at BIGINT,
  last_error TEXT,
  UNIQUE (alert_id, event, channel)
);
CREATE INDEX alert_notifications_pending ON alert_notifications(next_attempt_at) WHERE sent_at IS NULL AND gave_up_at IS NULL;
CREATE TABLE organization_webhooks (
  org_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  last_success_at BIGINT,
  last_failure_at BIGINT,
  last_error TEXT
);
CREATE INDEX table_stats_age ON table_stats(database_id, resolution, bucket);
CREATE INDEX index_stats_age ON index_stats(database_id, resolution, bucket);
-- migration 7: statement statistics: 10-minute buckets, and 10-minute and hourly buckets rolled up from minute buckets after their span
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
-- migration 8: latest tables: autovacuum_enabled from the table's storage parameters
ALTER TABLE latest_tables ADD COLUMN autovacuum_enabled BOOLEAN;
-- migration 9: each database's latest diagnosis and the lease of the process evaluating it
CREATE TABLE database_health (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  evaluated_at BIGINT,
  status TEXT,
  score INTEGER,
  critical INTEGER,
  warning INTEGER,
  info INTEGER,
  active_queries INTEGER,
  claimed_by TEXT,
  claimed_until BIGINT NOT NULL
);
-- migration 10: SQLite: the bucket tables, batch ids, rollup marks and latest tables are stored WITHOUT ROWID, in their primary key (no duplicate index of it)
-- PostgreSQL has no WITHOUT ROWID: its tables are heaps with the primary key as a separate index.
SELECT 1;
`,
}
