// Migration 14: API keys get scopes and a record of the key that created them. `scopes` holds the
// scope names separated by single spaces (ingest, read, admin); every key that exists when this runs gets
// all three, which is what keys could do before. A new key's scopes are always written by the store:
// the column has no default, and a key whose scopes are NULL holds none (refused everywhere).
// `created_by_key` names the key a key was made with (created_by then names that key's creator). The
// index finds the keys a user created, which their removal or demotion revokes.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 14,
  name: 'api key scopes (existing keys get ingest, read and admin) and the creating key',
  sqlite: `
ALTER TABLE api_keys ADD COLUMN scopes TEXT;
ALTER TABLE api_keys ADD COLUMN created_by_key TEXT;
UPDATE api_keys SET scopes = 'ingest read admin';
CREATE INDEX api_keys_created_by ON api_keys(created_by) WHERE created_by IS NOT NULL;
`,
  postgres: `
ALTER TABLE api_keys ADD COLUMN scopes TEXT;
ALTER TABLE api_keys ADD COLUMN created_by_key TEXT;
UPDATE api_keys SET scopes = 'ingest read admin';
ALTER TABLE api_keys ALTER COLUMN scopes SET NOT NULL;
CREATE INDEX api_keys_created_by ON api_keys(created_by) WHERE created_by IS NOT NULL;
`,
}
