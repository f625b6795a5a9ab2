// Versioned schema migrations, one entry per version with its SQLite and PostgreSQL DDL side by
// side. They are applied in order at start-up; a store whose schema is newer than this list refuses
// to open. Times are epoch milliseconds (INTEGER / BIGINT) in both stores.
import { both } from './ddl.ts'
import type { SqlDriver } from './driver.ts'
import { clickhouseMigration } from './sql-clickhouse.ts'
import { healthMigration } from './sql-health.ts'
import { internalsMigration } from './sql-internals.ts'
import { objectsMigration, tableSettingsMigration } from './sql-objects.ts'
import { rollupMigration } from './sql-rollups.ts'

export interface Migration {
  version: number
  name: string
  sqlite: string
  postgres: string
}

export const migrations: Migration[] = [
  {
    version: 1,
    name: 'accounts, api keys, registered databases, rate limits',
    ...both(`
CREATE TABLE organizations (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  slug TEXT NOT NULL UNIQUE,
  plan TEXT NOT NULL,
  verified {bool} NOT NULL,
  created_at {bigint} NOT NULL
);
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  email_verified_at {bigint},
  created_at {bigint} NOT NULL
);
CREATE INDEX users_org ON users(org_id);
CREATE TABLE refresh_tokens (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  family_id TEXT NOT NULL,
  expires_at {bigint} NOT NULL,
  revoked_at {bigint},
  created_at {bigint} NOT NULL
);
CREATE INDEX refresh_tokens_user ON refresh_tokens(user_id);
CREATE INDEX refresh_tokens_family ON refresh_tokens(family_id);
CREATE TABLE email_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  expires_at {bigint} NOT NULL,
  used_at {bigint},
  created_at {bigint} NOT NULL
);
CREATE INDEX email_tokens_user ON email_tokens(user_id, kind);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  key_id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  secret_hash TEXT NOT NULL,
  created_by TEXT,
  created_at {bigint} NOT NULL,
  last_used_at {bigint},
  revoked_at {bigint}
);
CREATE INDEX api_keys_org ON api_keys(org_id);
CREATE TABLE databases (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  name {ctext} NOT NULL,
  engine TEXT NOT NULL,
  engine_version TEXT,
  host TEXT NOT NULL,
  port INTEGER NOT NULL,
  tags TEXT NOT NULL,
  poll_interval_seconds INTEGER NOT NULL,
  collect_explain_plans {bool} NOT NULL,
  collect_replication {bool} NOT NULL,
  disabled_collectors TEXT NOT NULL,
  created_at {bigint} NOT NULL,
  updated_at {bigint} NOT NULL,
  last_seen_at {bigint},
  UNIQUE (org_id, name)
);
CREATE TABLE rate_events (
  key TEXT NOT NULL,
  at {bigint} NOT NULL
);
CREATE INDEX rate_events_key_at ON rate_events(key, at);
`),
  },
  {
    version: 2,
    name: 'access-token cut-off per user, ingest batches, statement statistics in 60 s and 1 h buckets, latest snapshots',
    ...both(`
ALTER TABLE users ADD COLUMN tokens_valid_after {bigint};
ALTER TABLE refresh_tokens ADD COLUMN replaced_by TEXT;
CREATE TABLE ingest_batches (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  batch_id TEXT NOT NULL,
  collected_at {bigint} NOT NULL,
  received_at {bigint} NOT NULL,
  PRIMARY KEY (database_id, batch_id)
);
CREATE INDEX ingest_batches_received ON ingest_batches(received_at);
CREATE TABLE query_texts (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  query_hash TEXT NOT NULL,
  query_text TEXT NOT NULL,
  first_seen {bigint} NOT NULL,
  last_seen {bigint} NOT NULL,
  PRIMARY KEY (database_id, query_hash)
);
CREATE TABLE query_stats (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  resolution INTEGER NOT NULL,
  bucket {bigint} NOT NULL,
  query_hash TEXT NOT NULL,
  calls {bigint} NOT NULL,
  total_time_ms {double} NOT NULL,
  rows {bigint} NOT NULL,
  shared_blks_hit {bigint} NOT NULL,
  shared_blks_read {bigint} NOT NULL,
  shared_blks_dirtied {bigint} NOT NULL,
  shared_blks_written {bigint} NOT NULL,
  temp_blks_read {bigint} NOT NULL,
  temp_blks_written {bigint} NOT NULL,
  blk_read_time_ms {double} NOT NULL,
  blk_write_time_ms {double} NOT NULL,
  read_bytes {bigint} NOT NULL,
  memory_bytes {bigint} NOT NULL,
  errors {bigint} NOT NULL,
  p99_ms {double},
  PRIMARY KEY (database_id, resolution, bucket, query_hash)
);
CREATE TABLE explain_plans (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  query_hash TEXT NOT NULL,
  ts {bigint} NOT NULL,
  plan_hash TEXT NOT NULL,
  source TEXT NOT NULL,
  total_cost {double},
  actual_time_ms {double},
  seq_scans INTEGER NOT NULL,
  index_scans INTEGER NOT NULL,
  rows_estimated {double},
  rows_actual {double},
  plan_json TEXT NOT NULL
);
CREATE INDEX explain_plans_query ON explain_plans(database_id, query_hash, ts);
CREATE TABLE snapshots (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts {bigint} NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);
`),
  },
  { version: 3, ...objectsMigration },
  { version: 4, ...internalsMigration },
  { version: 5, ...clickhouseMigration },
  { version: 6, ...healthMigration },
  { version: 7, ...rollupMigration },
  { version: 8, ...tableSettingsMigration },
]

export const latestVersion = migrations.reduce((max, m) => Math.max(max, m.version), 0)

/** Raised when the store was written by a newer dbm than this one. */
export class SchemaTooNewError extends Error {
  constructor(found: number, known: number) {
    super(
      `the store's schema is version ${found}, but this dbm knows versions up to ${known}: ` +
        'upgrade dbm (or point it at another data directory / database URL)',
    )
    this.name = 'SchemaTooNewError'
  }
}

/** Applies every pending migration; returns the versions applied (empty when up to date). */
export async function migrate(driver: SqlDriver, now: () => number = Date.now): Promise<number[]> {
  return driver.transaction(async (tx) => {
    await tx.exec(
      `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at ${
        tx.dialect === 'sqlite' ? 'INTEGER' : 'BIGINT'
      } NOT NULL)`,
    )
    const row = await tx.get<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations')
    const current = Number(row?.v ?? 0)
    if (current > latestVersion) throw new SchemaTooNewError(current, latestVersion)
    const applied: number[] = []
    for (const m of migrations) {
      if (m.version <= current) continue
      await tx.exec(tx.dialect === 'sqlite' ? m.sqlite : m.postgres)
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
        m.version,
        m.name,
        now(),
      ])
      applied.push(m.version)
    }
    return applied
  }, 'dbm:migrate')
}
