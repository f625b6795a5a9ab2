// Migration 21: an organization's alert destinations (issue 28): email, signed webhook, Slack, Microsoft
// Teams, PagerDuty, Opsgenie and Alertmanager, each with its kind's settings (JSON text) and, apart, its
// secret (a signing secret, routing key, API key, or a URL that is itself the credential), never
// returned in full. Notifications to a destination are alert_notifications rows whose channel is
// `destination:<id>` (that table's UNIQUE (alert_id, event, channel) keeps one per alert, event and
// destination); the counts of deliveries sent and failed are kept on the destination.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 21,
  name: 'alert destinations: several per organization, each of a kind',
  sqlite: `
CREATE TABLE alert_destinations (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  enabled INTEGER NOT NULL,
  settings TEXT NOT NULL,
  secret TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  last_success_at INTEGER,
  last_failure_at INTEGER,
  last_error TEXT,
  sent INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  UNIQUE (org_id, name)
);
`,
  postgres: `
CREATE TABLE alert_destinations (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  enabled BOOLEAN NOT NULL,
  settings TEXT NOT NULL,
  secret TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  last_success_at BIGINT,
  last_failure_at BIGINT,
  last_error TEXT,
  sent BIGINT NOT NULL DEFAULT 0,
  failed BIGINT NOT NULL DEFAULT 0,
  UNIQUE (org_id, name)
);
`,
}
