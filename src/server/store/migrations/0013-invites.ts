// Migration 13: invitations to join an organization. An invite names an address and the role it will
// have; only SHA-256 of its token is kept. It is pending until accepted, revoked (by an owner, by a newer
// invite of the same address, or with the owner who sent it) or past expires_at. At most one pending
// invite per organization and address (the partial unique index); tokens are looked up by their hash.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 13,
  name: 'organization invites: address, role, hashed single-use token, expiry, accepted or revoked',
  sqlite: `
CREATE TABLE invites (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email TEXT NOT NULL,
  role TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  invited_by TEXT REFERENCES users(id) ON DELETE SET NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  accepted_at INTEGER,
  accepted_by TEXT REFERENCES users(id) ON DELETE SET NULL,
  revoked_at INTEGER
);
CREATE UNIQUE INDEX invites_pending ON invites(org_id, email) WHERE accepted_at IS NULL AND revoked_at IS NULL;
CREATE INDEX invites_org ON invites(org_id, created_at);
CREATE INDEX invites_invited_by ON invites(invited_by) WHERE invited_by IS NOT NULL;
CREATE INDEX invites_accepted_by ON invites(accepted_by) WHERE accepted_by IS NOT NULL;
`,
  postgres: `
CREATE TABLE invites (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email TEXT NOT NULL,
  role TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  invited_by TEXT REFERENCES users(id) ON DELETE SET NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  accepted_at BIGINT,
  accepted_by TEXT REFERENCES users(id) ON DELETE SET NULL,
  revoked_at BIGINT
);
CREATE UNIQUE INDEX invites_pending ON invites(org_id, email) WHERE accepted_at IS NULL AND revoked_at IS NULL;
CREATE INDEX invites_org ON invites(org_id, created_at);
CREATE INDEX invites_invited_by ON invites(invited_by) WHERE invited_by IS NOT NULL;
CREATE INDEX invites_accepted_by ON invites(accepted_by) WHERE accepted_by IS NOT NULL;
`,
}
