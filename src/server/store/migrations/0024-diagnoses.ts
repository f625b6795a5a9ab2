// Migration 24: each database's latest diagnosis, the one every reader shows (issue 27: the list, the
// overview, the doctor, the configuration page and the alerts read the same one). evaluated_at is the
// moment it stands for; basis says what it covered (the latest batch, the settings and the thresholds);
// status, score, findings by severity and active queries are the columns the database list reads; body
// is the rest (findings, groups, failed rules, key figures) as JSON, read for one database at a time. In
// SQLite body is the last column, so the list's read of the others never walks its overflow pages.
// The monitor's latest summaries (database_health) are copied in with an empty basis, which no diagnosis
// matches: the list keeps its scores across the upgrade, and the pages diagnose anew.
// Released: stores have applied this text as it is. Never edit it (the checksum in
// test/store/migrations.test.ts fails if you do); change the schema with a new migration instead.
import type { Migration } from './migration.ts'

export const migration: Migration = {
  version: 24,
  name: "each database's latest diagnosis, read by the list, the pages and the monitor",
  sqlite: `
CREATE TABLE diagnoses (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  evaluated_at INTEGER NOT NULL,
  basis TEXT NOT NULL,
  status TEXT NOT NULL,
  score INTEGER NOT NULL,
  critical INTEGER NOT NULL,
  warning INTEGER NOT NULL,
  info INTEGER NOT NULL,
  active_queries INTEGER,
  body TEXT NOT NULL
);
INSERT INTO diagnoses (database_id, evaluated_at, basis, status, score, critical, warning, info, active_queries, body)
SELECT database_id, evaluated_at, '', status, score, critical, warning, info, active_queries, '{}' FROM database_health
WHERE evaluated_at IS NOT NULL AND status IS NOT NULL AND score IS NOT NULL AND critical IS NOT NULL AND warning IS NOT NULL AND info IS NOT NULL;
`,
  postgres: `
CREATE TABLE diagnoses (
  database_id TEXT PRIMARY KEY REFERENCES databases(id) ON DELETE CASCADE,
  evaluated_at BIGINT NOT NULL,
  basis TEXT NOT NULL,
  status TEXT NOT NULL,
  score INTEGER NOT NULL,
  critical INTEGER NOT NULL,
  warning INTEGER NOT NULL,
  info INTEGER NOT NULL,
  active_queries INTEGER,
  body TEXT NOT NULL
);
INSERT INTO diagnoses (database_id, evaluated_at, basis, status, score, critical, warning, info, active_queries, body)
SELECT database_id, evaluated_at, '', status, score, critical, warning, info, active_queries, '{}' FROM database_health
WHERE evaluated_at IS NOT NULL AND status IS NOT NULL AND score IS NOT NULL AND critical IS NOT NULL AND warning IS NOT NULL AND info IS NOT NULL;
`,
}
