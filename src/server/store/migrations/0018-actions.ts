// Migration 18: actions the dashboard asks an agent to run on a monitored database (issue 26): cancel or
// terminate a session, explain a statement with parameter values. `actions` holds each request (who asked,
// when, until when it may start), its state (pending, running, done, refused, failed, expired) and its
// result; `action_listeners` what each database's agent last said it allows, and when it last asked for
// actions (the long-poll), so the dashboard knows whether to offer a button or the command to copy.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 18,
  name: 'actions the dashboard asks an agent to run (cancel, terminate, explain) and what each agent allows',
  sqlite: `
CREATE TABLE actions (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL,
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  request TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  requested_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  claimed_at INTEGER,
  finished_at INTEGER,
  result TEXT
);
CREATE INDEX actions_pending ON actions (database_id, state, requested_at);
CREATE TABLE action_listeners (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  allowed TEXT NOT NULL,
  heard_at INTEGER NOT NULL
);
`,
  postgres: `
CREATE TABLE actions (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL,
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  request TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  requested_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  claimed_at BIGINT,
  finished_at BIGINT,
  result TEXT
);
CREATE INDEX actions_pending ON actions (database_id, state, requested_at);
CREATE TABLE action_listeners (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  allowed TEXT NOT NULL,
  heard_at BIGINT NOT NULL
);
`,
}
