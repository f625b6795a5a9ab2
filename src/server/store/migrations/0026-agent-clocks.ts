// Migration 26: skewed agent clocks (issue 29 d6). snapshots.received_at orders the latest snapshots by
// the server's clock (the batch's receipt time less the age its agent gave it), so a snapshot dated
// ahead by a fast agent clock no longer hides those sent after it; NULL on rows written before, which
// the next batch replaces. agent_clocks keeps, per database, how far its agent's clock is from the
// server's (offset_ms, positive: ahead), as last measured at measured_at (server clock).
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 26,
  name: "snapshots ordered by the server's clock; agents' clock offsets",
  sqlite: `
ALTER TABLE snapshots ADD COLUMN received_at INTEGER;
CREATE TABLE agent_clocks (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  offset_ms INTEGER NOT NULL,
  measured_at INTEGER NOT NULL
);
`,
  postgres: `
ALTER TABLE snapshots ADD COLUMN received_at BIGINT;
CREATE TABLE agent_clocks (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  offset_ms BIGINT NOT NULL,
  measured_at BIGINT NOT NULL
);
`,
}
