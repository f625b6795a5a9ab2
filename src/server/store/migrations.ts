// Versioned schema migrations, applied in order at start-up; a store whose schema is newer than this
// list refuses to open. Times are epoch milliseconds (INTEGER / BIGINT) in both stores.
//
// NEVER EDIT A RELEASED MIGRATION: stores out there have applied its text, and an edit reaches only
// new stores (old ones keep the schema they got, and ingest fails on the difference). To change the
// schema, add a new migration: the next file in ./migrations/ (NNNN-what.ts) holding the literal SQLite
// and PostgreSQL text, with no interpolation of constants the live code uses (those change later), and
// its entry in the list below. test/store/migrations.test.ts records a checksum of every migration,
// builds a store at every past version, fills it, migrates it and ingests into it.
//
// A new store is built to version 10 by one frozen script (migrations/baseline-0010.ts: exactly the schema
// the first ten build, as test/store/migrations.test.ts checks), then the later migrations as usual.
//
// Counter families (src/shared/families.ts) are the exception: a field added to a family reaches
// existing stores through the family step (family-columns.ts), which adds the columns a family lists and
// its tables lack, on every start (before pending migrations and after them; see migrate()). No migration
// for that.
import type { SqlDriver } from './driver.ts'
import { FAMILY_TABLES } from '../../shared/families.ts'
import { type AddedColumn, addFamilyColumns, familyColumnsMissing, isLockContention } from './family-columns.ts'
import { migration as accounts } from './migrations/0001-accounts.ts'
import { migration as statements } from './migrations/0002-statements.ts'
import { migration as objects } from './migrations/0003-objects.ts'
import { migration as internals } from './migrations/0004-internals.ts'
import { migration as clickhouse } from './migrations/0005-clickhouse.ts'
import { migration as health } from './migrations/0006-health.ts'
import { migration as statementRollups } from './migrations/0007-statement-rollups.ts'
import { migration as tableAutovacuum } from './migrations/0008-table-autovacuum.ts'
import { migration as databaseHealth } from './migrations/0009-database-health.ts'
import { migration as withoutRowid } from './migrations/0010-without-rowid.ts'
import { migration as events } from './migrations/0011-events.ts'
import { migration as sessionHistory } from './migrations/0012-session-history.ts'
import { migration as invites } from './migrations/0013-invites.ts'
import { migration as apiKeyScopes } from './migrations/0014-api-key-scopes.ts'
import { migration as logEvents } from './migrations/0015-log-events.ts'
import { migration as availability } from './migrations/0016-availability.ts'
import { migration as serverSettings } from './migrations/0017-server-settings.ts'
import { migration as actions } from './migrations/0018-actions.ts'
import { migration as alertCauses } from './migrations/0019-alert-causes.ts'
import { migration as serverSecrets } from './migrations/0020-server-secrets.ts'
import { migration as alertDestinations } from './migrations/0021-alert-destinations.ts'
import { migration as alertRouting } from './migrations/0022-alert-routing.ts'
import { migration as customMetrics } from './migrations/0023-custom-metrics.ts'
import { migration as diagnoses } from './migrations/0024-diagnoses.ts'
import { migration as databaseThresholds } from './migrations/0025-database-thresholds.ts'
import { migration as agentClocks } from './migrations/0026-agent-clocks.ts'
import { baseline } from './migrations/baseline-0010.ts'
import type { Migration } from './migrations/migration.ts'
import { join, sql } from './sql.ts'

export type { Migration }

export const migrations: Migration[] = [
  accounts,
  statements,
  objects,
  internals,
  clickhouse,
  health,
  statementRollups,
  tableAutovacuum,
  databaseHealth,
  withoutRowid,
  events,
  sessionHistory,
  invites,
  apiKeyScopes,
  logEvents,
  availability,
  serverSettings,
  actions,
  alertCauses,
  serverSecrets,
  alertDestinations,
  alertRouting,
  customMetrics,
  diagnoses,
  databaseThresholds,
  agentClocks,
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

/**
 * Applies every pending migration up to `target` (default: all of them); returns the versions applied
 * (empty when up to date). A target below the latest version builds an older schema (for tests).
 * Migrating to the latest version also runs the family step (family-columns.ts) before the pending
 * migrations (so a migration that rebuilds a family table finds every column the families had when it was
 * written, and lists them) and after them (what the migrations dropped or did not make). On PostgreSQL
 * the step's lock may time out or lose a deadlock against serves ingesting meanwhile: the whole
 * transaction is tried again, up to about two minutes, `retrying` told each time.
 */
export async function migrate(
  driver: SqlDriver,
  now: () => number = Date.now,
  target = latestVersion,
  /** Told each migration before it is applied, and the version the store had (0: a new store). */
  applying: (m: Migration, from: number) => void = () => {},
  /**
   * Told each column the family step added, which runs when migrating to the latest version; false: no
   * family step (a test of the frozen migrations alone).
   */
  columnAdded: ((column: AddedColumn) => void) | false = () => {},
  retrying: (attempt: number, cause: unknown) => void = () => {},
): Promise<number[]> {
  // The common case, a start on a current store, in two reads and no write transaction (start-up time).
  if (target === latestVersion && columnAdded !== false && (await isCurrent(driver))) return []
  for (let attempt = 1; ; attempt++) {
    try {
      return await migrateOnce(driver, now, target, applying, columnAdded)
    } catch (e) {
      if (!isLockContention(e) || attempt >= MIGRATE_ATTEMPTS) throw e
      retrying(attempt, e)
      await Bun.sleep(Math.min(500 * attempt, 5_000) * (0.5 + Math.random()))
    }
  }
}

/** Whether the store is at the latest version with every family column: nothing for migrate() to do. */
async function isCurrent(driver: SqlDriver): Promise<boolean> {
  const row = await driver
    .get<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations')
    .catch(() => undefined)
  if (Number(row?.v ?? 0) !== latestVersion) return false
  return !(await familyColumnsMissing(driver))
}

/** Tries of migrate() against lock contention: with its waits, about two minutes. */
const MIGRATE_ATTEMPTS = 30

async function migrateOnce(
  driver: SqlDriver,
  now: () => number,
  target: number,
  applying: (m: Migration, from: number) => void,
  columnAdded: ((column: AddedColumn) => void) | false,
): Promise<number[]> {
  // Columns are told once the transaction committed (a retried one would tell them twice).
  const added: AddedColumn[] = []
  const applied = await driver.transaction(async (tx) => {
    await tx.exec(
      `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at ${
        tx.dialect === 'sqlite' ? 'INTEGER' : 'BIGINT'
      } NOT NULL)`,
    )
    const row = await tx.get<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations')
    const current = Number(row?.v ?? 0)
    if (current > latestVersion) throw new SchemaTooNewError(current, latestVersion)
    const familyStep = target === latestVersion && columnAdded !== false
    const pending = migrations.filter((m) => m.version > current && m.version <= target)
    if (familyStep && pending.length > 0 && current > 0)
      added.push(...(await addFamilyColumns(tx, FAMILY_TABLES, 'skip')))
    const versions: number[] = []
    // A new store built to the baseline's version or past it: the baseline's one script stands for the
    // migrations up to that version (baseline-0010.ts), each of which is recorded as applied.
    if (current === 0 && target >= baseline.version) {
      const covered = pending.filter((m) => m.version <= baseline.version)
      for (const m of covered) applying(m, current)
      await tx.exec(tx.dialect === 'sqlite' ? baseline.sqlite : baseline.postgres)
      const at = now()
      const insert = sql`INSERT INTO schema_migrations (version, name, applied_at) VALUES ${join(covered.map((m) => sql`(${m.version}, ${m.name}, ${at})`))}`
      await tx.run(insert.sql, insert.params)
      versions.push(...covered.map((m) => m.version))
    }
    for (const m of pending) {
      if (versions.includes(m.version)) continue
      applying(m, current)
      await tx.exec(tx.dialect === 'sqlite' ? m.sqlite : m.postgres)
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
        m.version,
        m.name,
        now(),
      ])
      versions.push(m.version)
    }
    if (familyStep) {
      const columns = await addFamilyColumns(tx)
      // A new store's columns are not news: told only for a store that existed.
      if (current > 0) added.push(...columns)
    }
    return versions
  }, 'dbm:migrate')
  if (columnAdded) {
    // A column the step before the migrations added and one of them rebuilt away is added again after: told once.
    const told = new Set<string>()
    for (const column of added) {
      const name = `${column.table}.${column.column}`
      if (told.has(name)) continue
      told.add(name)
      columnAdded(column)
    }
  }
  return applied
}
