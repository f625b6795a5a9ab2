// Migration 16: whether each database answers its agent (issue 33). `database_availability` holds the
// latest state the agent reported (up or down, since when, the failure's class and message), when it was
// reported (the agent's clock) and heard (the server's), and, while down, when the data shown was
// collected. `outages` keeps each period the agent reported the database down (open while it lasts);
// `agent_silences` each gap in which the agent sent nothing at all (neither batches nor reports), which
// availability counts as unknown, not as down.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 16,
  name: 'availability: the latest reported state of each database, its outages and the gaps in which its agent was silent',
  sqlite: `
CREATE TABLE database_availability (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  state TEXT NOT NULL,
  since INTEGER NOT NULL,
  cause TEXT,
  message TEXT,
  reported_at INTEGER NOT NULL,
  heard_at INTEGER NOT NULL,
  data_as_of INTEGER
);
CREATE TABLE outages (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  cause TEXT NOT NULL,
  message TEXT,
  PRIMARY KEY (database_id, started_at)
) WITHOUT ROWID;
CREATE TABLE agent_silences (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  started_at INTEGER NOT NULL,
  ended_at INTEGER NOT NULL,
  PRIMARY KEY (database_id, started_at)
) WITHOUT ROWID;
`,
  postgres: `
CREATE TABLE database_availability (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  state TEXT NOT NULL,
  since BIGINT NOT NULL,
  cause TEXT,
  message TEXT,
  reported_at BIGINT NOT NULL,
  heard_at BIGINT NOT NULL,
  data_as_of BIGINT
);
CREATE TABLE outages (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  started_at BIGINT NOT NULL,
  ended_at BIGINT,
  cause TEXT NOT NULL,
  message TEXT,
  PRIMARY KEY (database_id, started_at)
);
CREATE TABLE agent_silences (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  started_at BIGINT NOT NULL,
  ended_at BIGINT NOT NULL,
  PRIMARY KEY (database_id, started_at)
);
`,
}
