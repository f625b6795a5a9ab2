// Migration 25: the doctor's thresholds per database (issue 32): an operator's value for one key of one
// rule on one database, where operators disagree with the rule's default (a prepared transaction's age, the
// commit ratio, the superusers they mean). value is JSON text: a number, or an array of names. No row: the
// rule's default. The rows go with their database.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 25,
  name: "the doctor's thresholds per database",
  sqlite: `
CREATE TABLE database_thresholds (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  rule TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, rule, key)
);
`,
  postgres: `
CREATE TABLE database_thresholds (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  rule TEXT COLLATE "C" NOT NULL,
  key TEXT COLLATE "C" NOT NULL,
  value TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (database_id, rule, key)
);
`,
}
