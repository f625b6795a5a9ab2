// Migration 19: one alert per cause (issue 26). An alert is now keyed by its cause (a session, an index,
// a statement, ...; src/server/doctor/grouping.ts) and keeps the findings that cause raised beside its
// own, as a JSON array of {key, rule, severity, title}: `consequences`, '[]' for alerts opened before.
// A recommendation (still one per finding) keeps the key of its finding's cause: `cause`, null before.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 19,
  name: 'alert causes: the findings of an alert\'s cause, and the cause of each recommendation',
  sqlite: `
ALTER TABLE alerts ADD COLUMN consequences TEXT NOT NULL DEFAULT '[]';
ALTER TABLE recommendations ADD COLUMN cause TEXT;
`,
  postgres: `
ALTER TABLE alerts ADD COLUMN consequences TEXT NOT NULL DEFAULT '[]';
ALTER TABLE recommendations ADD COLUMN cause TEXT COLLATE "C";
`,
}
