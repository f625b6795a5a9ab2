// Migration 23: checks of one's own (issue 28, custom_metrics in the agent config). custom_metrics: per
// database and metric name, the latest definition an agent sent (kind, label and value columns as JSON
// arrays, interval, description, alert as JSON) and its latest error with a count of errors.
// custom_metric_series: one row per database, metric, value column and label set (series_key, a digest
// of them; labels as a JSON object), with the last raw reading (a counter's rate is computed against it)
// and the latest stored value; seen_at is the last batch that carried it (retention goes by it). The
// samples themselves are metric_gauges rows of source 'custom' (subject: the series_key), in the same
// minute and hour buckets and retention as the built-in gauges.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 23,
  name: 'custom metrics: definitions and series of the operator\'s own SQL checks',
  sqlite: `
CREATE TABLE custom_metrics (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  labels TEXT NOT NULL,
  value_columns TEXT NOT NULL,
  interval_s INTEGER NOT NULL,
  description TEXT,
  alert TEXT,
  last_error TEXT,
  last_error_at INTEGER,
  error_count INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, name)
);
CREATE TABLE custom_metric_series (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  series_key TEXT NOT NULL,
  name TEXT NOT NULL,
  column_name TEXT NOT NULL,
  labels TEXT NOT NULL,
  raw_value REAL,
  raw_at INTEGER,
  value REAL,
  value_at INTEGER,
  seen_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, series_key)
);
CREATE INDEX custom_metric_series_name ON custom_metric_series(database_id, name);
`,
  postgres: `
CREATE TABLE custom_metrics (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  name TEXT COLLATE "C" NOT NULL,
  kind TEXT NOT NULL,
  labels TEXT NOT NULL,
  value_columns TEXT NOT NULL,
  interval_s INTEGER NOT NULL,
  description TEXT,
  alert TEXT,
  last_error TEXT,
  last_error_at BIGINT,
  error_count BIGINT NOT NULL DEFAULT 0,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (database_id, name)
);
CREATE TABLE custom_metric_series (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  series_key TEXT COLLATE "C" NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  column_name TEXT COLLATE "C" NOT NULL,
  labels TEXT NOT NULL,
  raw_value DOUBLE PRECISION,
  raw_at BIGINT,
  value DOUBLE PRECISION,
  value_at BIGINT,
  seen_at BIGINT NOT NULL,
  PRIMARY KEY (database_id, series_key)
);
CREATE INDEX custom_metric_series_name ON custom_metric_series(database_id, name);
`,
}
