// Migration 6: recommendations, alerts, their notifications, organization webhooks, retention indexes.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 6,
  name: 'recommendations, alerts and their notifications, organization webhooks, telemetry age indexes for retention',
  sqlite: `
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
CREATE UNIQUE INDEX recommendations_open ON recommendations(database_id, key) WHERE resolved_at IS NULL;
CREATE INDEX recommendations_database ON recommendations(database_id, resolved_at);
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
CREATE UNIQUE INDEX alerts_open ON alerts(database_id, key) WHERE resolved_at IS NULL;
CREATE INDEX alerts_database ON alerts(database_id, resolved_at);
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
CREATE INDEX alert_notifications_pending ON alert_notifications(next_attempt_at) WHERE sent_at IS NULL AND gave_up_at IS NULL;
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
CREATE INDEX table_stats_age ON table_stats(database_id, resolution, bucket);
CREATE INDEX index_stats_age ON index_stats(database_id, resolution, bucket);
`,
  postgres: `
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
`,
}
