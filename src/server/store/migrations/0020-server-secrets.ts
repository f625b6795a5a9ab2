// Migration 20: secrets every `dbm serve` of one store must share, kept in the store (issue 28). The
// JWT signing secret used to live only in each data directory: serves sharing a PostgreSQL store, or an
// upgrade that starts the new binary with another data directory, signed with different secrets and
// refused each other's sessions (a 401 for every access token issued before). The first serve to start
// stores its data directory's secret; every later one signs with the stored one.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 20,
  name: 'server secrets: the JWT signing secret shared by every serve of the store',
  sqlite: `
CREATE TABLE server_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL, created_at INTEGER NOT NULL);
`,
  postgres: `
CREATE TABLE server_secrets (name TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL, created_at BIGINT NOT NULL);
`,
}
