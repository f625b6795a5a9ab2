// Migration 5: the latest ClickHouse sections.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 5,
  name: 'latest ClickHouse parts, merges, mutations and server metrics',
  sqlite: `
CREATE TABLE clickhouse_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts INTEGER NOT NULL,
  interval_seconds REAL NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
`,
  postgres: `
CREATE TABLE clickhouse_latest (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts BIGINT NOT NULL,
  interval_seconds DOUBLE PRECISION NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
`,
}
