// Migration 4: wait events, replication, metric counters and gauges, and the latest internals sections.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 4,
  name: 'wait events, replication, bgwriter, WAL, I/O and database statistics over time',
  sqlite: `
CREATE TABLE wait_stats (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  wait_event_type TEXT NOT NULL,
  wait_event TEXT NOT NULL,
  count INTEGER NOT NULL,
  total_duration_ms REAL NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, wait_event_type, wait_event)
);
CREATE TABLE replication_lag (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  replication_lag_bytes INTEGER,
  replication_lag_seconds REAL,
  PRIMARY KEY (database_id, resolution, bucket)
);
CREATE TABLE replication_slot_lag (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  slot_name TEXT NOT NULL,
  lag_bytes INTEGER NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, slot_name)
);
CREATE TABLE metric_counters (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  source TEXT NOT NULL,
  subject TEXT NOT NULL,
  metric TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (database_id, source, resolution, bucket, subject, metric)
);
CREATE TABLE metric_gauges (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  source TEXT NOT NULL,
  subject TEXT NOT NULL,
  metric TEXT NOT NULL,
  value REAL NOT NULL,
  sampled_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, source, resolution, bucket, subject, metric)
);
CREATE TABLE internals_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts INTEGER NOT NULL,
  interval_seconds REAL NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
`,
  postgres: `
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
`,
}
