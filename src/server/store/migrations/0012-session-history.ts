// Migration 12: session and lock history. Every batch's activity and lock snapshot is kept (compactly:
// the sessions the agent sends, which are the non-idle ones and those idle in a transaction, and only
// the locks that wait or block), one row per database and collection time, with the figures retention
// compacts by (blocked sessions, the longest lock wait, the longest statement or transaction); and each lock chain (a root
// blocker's transaction and the sessions it held up, directly or through others) with its members, first
// and last seen, so a chain stays readable after it ended and after its snapshots were compacted.
// Rowid tables on SQLite (migration 10's rule): their rows hold JSON and statement texts.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 12,
  name: 'session and lock history: every snapshot of activity and blocking locks, and lock chains with their members',
  sqlite: `
CREATE TABLE session_snapshots (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  ts INTEGER NOT NULL,
  blocked INTEGER NOT NULL,
  longest_wait_ms REAL,
  longest_ms REAL,
  activity TEXT,
  locks TEXT,
  PRIMARY KEY (database_id, ts)
);
CREATE TABLE lock_chains (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  root_pid INTEGER NOT NULL,
  root_xact_start INTEGER NOT NULL,
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  max_blocked INTEGER NOT NULL,
  root_user TEXT,
  root_application TEXT,
  root_state TEXT,
  root_statement TEXT,
  PRIMARY KEY (database_id, root_pid, root_xact_start)
);
CREATE INDEX lock_chains_last_seen ON lock_chains(database_id, last_seen);
CREATE TABLE lock_chain_members (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  root_pid INTEGER NOT NULL,
  root_xact_start INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  wait_started INTEGER NOT NULL,
  blocked_by TEXT NOT NULL,
  user_name TEXT,
  application TEXT,
  statement TEXT,
  PRIMARY KEY (database_id, root_pid, root_xact_start, pid)
);
`,
  postgres: `
CREATE TABLE session_snapshots (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  ts BIGINT NOT NULL,
  blocked INTEGER NOT NULL,
  longest_wait_ms DOUBLE PRECISION,
  longest_ms DOUBLE PRECISION,
  activity TEXT,
  locks TEXT,
  PRIMARY KEY (database_id, ts)
);
CREATE TABLE lock_chains (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  root_pid INTEGER NOT NULL,
  root_xact_start BIGINT NOT NULL,
  first_seen BIGINT NOT NULL,
  last_seen BIGINT NOT NULL,
  started_at BIGINT NOT NULL,
  samples INTEGER NOT NULL,
  max_blocked INTEGER NOT NULL,
  root_user TEXT,
  root_application TEXT,
  root_state TEXT,
  root_statement TEXT,
  PRIMARY KEY (database_id, root_pid, root_xact_start)
);
CREATE INDEX lock_chains_last_seen ON lock_chains(database_id, last_seen);
CREATE TABLE lock_chain_members (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  root_pid INTEGER NOT NULL,
  root_xact_start BIGINT NOT NULL,
  pid INTEGER NOT NULL,
  first_seen BIGINT NOT NULL,
  last_seen BIGINT NOT NULL,
  wait_started BIGINT NOT NULL,
  blocked_by TEXT NOT NULL,
  user_name TEXT,
  application TEXT,
  statement TEXT,
  PRIMARY KEY (database_id, root_pid, root_xact_start, pid)
);
`,
}
