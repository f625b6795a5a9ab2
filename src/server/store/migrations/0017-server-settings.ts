// Migration 17: what the Configuration page shows of each setting beyond its value (issue 26): its unit,
// source (file and line), defaults, context, type, description, whether it awaits a restart and whether
// it differs from the built-in default. `server_settings` holds the latest map the agent sent, one row
// per database (the agent sends it only when it changed, so it is kept with the database, not expired
// by retention); the values themselves stay in event_baselines.settings (migration 11).
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 17,
  name: 'server settings: the latest detail of each setting (unit, source, defaults, context) per database',
  sqlite: `
CREATE TABLE server_settings (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  collected_at INTEGER NOT NULL,
  details TEXT NOT NULL
);
`,
  postgres: `
CREATE TABLE server_settings (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  collected_at BIGINT NOT NULL,
  details TEXT NOT NULL
);
`,
}
