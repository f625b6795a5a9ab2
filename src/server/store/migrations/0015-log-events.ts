// Migration 15: the server log's entries and their exact counts (issue 25). `log_entries` holds each
// entry the agent sent whole (classified: kind, severity, SQLSTATE, message and its fingerprint, the
// session's pid, user, database, application and client, DETAIL/HINT/CONTEXT, the statement, its query
// id, the kind's own fields as JSON, and how many occurrences it stands for), read newest first by
// (ts, id). `log_counts` holds how many entries of each kind and severity the log held, per minute and
// per hour (both written at ingest, summed across batches, like the other bucketed sections); the
// entries the agent counted but did not send whole are counted under the empty kind and severity.
// log_entries is a rowid table on SQLite (its rows hold texts and JSON: migration 10's rule);
// log_counts is WITHOUT ROWID like the other bucket tables.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 15,
  name: 'log events: the server log entries the agent classified, and exact counts per minute and hour by kind and severity',
  sqlite: `
CREATE TABLE log_entries (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  ts INTEGER NOT NULL,
  id TEXT NOT NULL,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  sqlstate TEXT,
  message TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  pid INTEGER,
  user_name TEXT,
  database_name TEXT,
  application TEXT,
  client TEXT,
  detail TEXT,
  statement TEXT,
  query_id TEXT,
  fields TEXT NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (database_id, ts, id)
);
CREATE INDEX log_entries_kind ON log_entries(database_id, kind, ts);
CREATE TABLE log_counts (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, kind, severity)
) WITHOUT ROWID;
`,
  postgres: `
CREATE TABLE log_entries (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  ts BIGINT NOT NULL,
  id TEXT COLLATE "C" NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  severity TEXT COLLATE "C" NOT NULL,
  sqlstate TEXT,
  message TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  pid INTEGER,
  user_name TEXT,
  database_name TEXT,
  application TEXT,
  client TEXT,
  detail TEXT,
  statement TEXT,
  query_id TEXT,
  fields TEXT NOT NULL,
  count BIGINT NOT NULL,
  PRIMARY KEY (database_id, ts, id)
);
CREATE INDEX log_entries_kind ON log_entries(database_id, kind, ts);
CREATE TABLE log_counts (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket BIGINT NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  severity TEXT COLLATE "C" NOT NULL,
  count BIGINT NOT NULL,
  PRIMARY KEY (database_id, resolution, bucket, kind, severity)
);
`,
}
