// Migration 8: latest_tables.autovacuum_enabled.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 8,
  name: "latest tables: autovacuum_enabled from the table's storage parameters",
  sqlite: `ALTER TABLE latest_tables ADD COLUMN autovacuum_enabled INTEGER;`,
  postgres: `ALTER TABLE latest_tables ADD COLUMN autovacuum_enabled BOOLEAN;`,
}
