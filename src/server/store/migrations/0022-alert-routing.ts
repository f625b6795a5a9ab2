// Migration 22: routing, repeats and silences of alerts (issue 28). alert_silences: per organization,
// matchers (a database, a rule, one alert or finding key, a database tag key=value; at least one set),
// a window [starts_at, ends_at), why (comment) and who (a user or an API key); expiring one early sets
// its ends_at. alert_routes: per organization, an ordered list (position) of rules, each with its
// matchers as JSON text, the destination ids it sends to as a JSON array, whether later routes are
// tried after it matched, and its repeat interval. alert_notifications.silenced_by: the silence that
// held a notification back (it goes when the silence ends, if its alert is still open).
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 22,
  name: 'alert routing: ordered routes to destinations, repeat intervals, silences',
  sqlite: `
CREATE TABLE alert_silences (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  database_id TEXT,
  rule TEXT,
  alert_key TEXT,
  tag_key TEXT,
  tag_value TEXT,
  comment TEXT NOT NULL,
  created_by_user TEXT,
  created_by_key TEXT,
  created_at INTEGER NOT NULL,
  starts_at INTEGER NOT NULL,
  ends_at INTEGER NOT NULL,
  expired_early_at INTEGER
);
CREATE INDEX alert_silences_org ON alert_silences(org_id, ends_at);
CREATE INDEX alert_silences_database ON alert_silences(database_id, ends_at);
CREATE TABLE alert_routes (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  match TEXT NOT NULL,
  destinations TEXT NOT NULL,
  continue_matching INTEGER NOT NULL,
  repeat_interval_s INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX alert_routes_org ON alert_routes(org_id, position);
ALTER TABLE alert_notifications ADD COLUMN silenced_by TEXT;
`,
  postgres: `
CREATE TABLE alert_silences (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  database_id TEXT,
  rule TEXT,
  alert_key TEXT COLLATE "C",
  tag_key TEXT COLLATE "C",
  tag_value TEXT COLLATE "C",
  comment TEXT NOT NULL,
  created_by_user TEXT,
  created_by_key TEXT,
  created_at BIGINT NOT NULL,
  starts_at BIGINT NOT NULL,
  ends_at BIGINT NOT NULL,
  expired_early_at BIGINT
);
CREATE INDEX alert_silences_org ON alert_silences(org_id, ends_at);
CREATE INDEX alert_silences_database ON alert_silences(database_id, ends_at);
CREATE TABLE alert_routes (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  match TEXT NOT NULL,
  destinations TEXT NOT NULL,
  continue_matching BOOLEAN NOT NULL,
  repeat_interval_s INTEGER,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX alert_routes_org ON alert_routes(org_id, position);
ALTER TABLE alert_notifications ADD COLUMN silenced_by TEXT;
`,
}
