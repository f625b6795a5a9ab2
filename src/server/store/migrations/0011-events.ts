// Migration 11: the events timeline's own rows (issue 14). `events` holds what the server derives at
// ingest by comparing a batch with what it knew (a restart, a version change, objects appearing,
// disappearing or becoming valid, setting changes, statistics resets, the agent connecting and
// disconnecting), one row per event, its key making a derivation repeated for the same batch a no-op;
// alerts and plan changes are not copied here (they are read from their own tables at query time).
// `event_baselines` is what the next batch is compared with: one row per database (the ClickHouse
// tables are those with active parts, the batch's parts section having no table list of its own; the
// digests of the tables and indexes last compared let a batch naming the same ones skip reading them).
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 11,
  name: 'events derived at ingest (restarts, versions, objects, settings, resets, agent connections) and what the next batch is compared with',
  sqlite: `
CREATE TABLE events (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  ts INTEGER NOT NULL,
  kind TEXT NOT NULL,
  object TEXT NOT NULL,
  severity TEXT,
  title TEXT NOT NULL,
  detail TEXT,
  link TEXT,
  PRIMARY KEY (database_id, ts, kind, object)
);
CREATE TABLE event_baselines (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  collected_at INTEGER NOT NULL,
  interval_seconds REAL,
  started_at INTEGER,
  agent_started_at INTEGER,
  settings_hash TEXT,
  settings TEXT,
  stats_resets TEXT,
  carried TEXT,
  clickhouse_tables TEXT,
  tables_digest TEXT,
  indexes_digest TEXT
);
`,
  postgres: `
CREATE TABLE events (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  ts BIGINT NOT NULL,
  kind TEXT NOT NULL,
  object TEXT NOT NULL,
  severity TEXT,
  title TEXT NOT NULL,
  detail TEXT,
  link TEXT,
  PRIMARY KEY (database_id, ts, kind, object)
);
CREATE TABLE event_baselines (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  collected_at BIGINT NOT NULL,
  interval_seconds DOUBLE PRECISION,
  started_at BIGINT,
  agent_started_at BIGINT,
  settings_hash TEXT,
  settings TEXT,
  stats_resets TEXT,
  carried TEXT,
  clickhouse_tables TEXT,
  tables_digest TEXT,
  indexes_digest TEXT
);
`,
}
