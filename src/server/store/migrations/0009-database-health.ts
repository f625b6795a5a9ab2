// Migration 9: each database's latest diagnosis (status, score, findings by severity, active queries)
// and the lease of the `dbm serve` process evaluating it, so several processes on one PostgreSQL store
// share the health monitor's work and the database list reads every score in one query.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 9,
  name: "each database's latest diagnosis and the lease of the process evaluating it",
  sqlite: `
CREATE TABLE database_health (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  evaluated_at INTEGER,
  status TEXT,
  score INTEGER,
  critical INTEGER,
  warning INTEGER,
  info INTEGER,
  active_queries INTEGER,
  claimed_by TEXT,
  claimed_until INTEGER NOT NULL
) WITHOUT ROWID;
`,
  postgres: `
CREATE TABLE database_health (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  evaluated_at BIGINT,
  status TEXT,
  score INTEGER,
  critical INTEGER,
  warning INTEGER,
  info INTEGER,
  active_queries INTEGER,
  claimed_by TEXT,
  claimed_until BIGINT NOT NULL
);
`,
}
