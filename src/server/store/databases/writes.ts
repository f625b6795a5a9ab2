// Registering, changing and removing databases (databases/types.ts DatabaseWrites), and registration by
// an agent's first batch (registerFromBatch, in the ingest's transaction). Registrations of one
// organization take its lock, so concurrent ones count each other against a limit.
import { DEFAULT_POLL_INTERVAL_SECONDS } from '../../../shared/database-limits.ts'
import type { IngestBatch } from '../../../shared/wire.ts'
import { num } from '../rows.ts'
import type { SqlDriver } from '../driver.ts'
import { type Fragment, ident, join, sql } from '../sql.ts'
import { getDatabase } from './reads.ts'
import type { DatabasePatch, DatabaseWrites, NewDatabase, RegisteredDatabase } from './types.ts'

/** The only columns updateDatabase writes; the patch's keys never reach the SQL text otherwise. */
const PATCHABLE_COLUMNS = [
  'name',
  'host',
  'port',
  'tags',
  'poll_interval_seconds',
  'collect_explain_plans',
  'collect_replication',
  'disabled_collectors',
] as const satisfies readonly (keyof DatabasePatch)[]

/** The lock held while an organization's set of databases changes (registration within a limit). */
export const databasesLock = (orgId: string) => `dbm:databases:${orgId}`
export const DB_DEFAULTS = {
  poll_interval_seconds: DEFAULT_POLL_INTERVAL_SECONDS,
  collect_explain_plans: true,
  collect_replication: true,
}

/** `onDeleted`: told each database deleted (the store's caches of its telemetry forget it). */
export function databaseWrites(driver: SqlDriver, onDeleted: (databaseId: string) => void): DatabaseWrites {
  return {
    async createDatabase(orgId: string, input: NewDatabase, now: number, limit?: number) {
      return driver.transaction(async (tx) => {
        if (limit !== undefined) {
          const r = await tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM databases WHERE org_id = $1', [orgId])
          if (num(r?.n ?? 0) >= limit) return 'limit' as const
        }
        const db: RegisteredDatabase = {
          id: Bun.randomUUIDv7(),
          org_id: orgId,
          ...input,
          ...DB_DEFAULTS,
          disabled_collectors: [],
          created_at: now,
          updated_at: now,
          last_seen_at: null,
        }
        await tx.run(
          `INSERT INTO databases (id, org_id, name, engine, engine_version, host, port, tags, poll_interval_seconds,
             collect_explain_plans, collect_replication, disabled_collectors, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
          [
            db.id,
            orgId,
            db.name,
            db.engine,
            db.engine_version,
            db.host,
            db.port,
            JSON.stringify(db.tags),
            db.poll_interval_seconds,
            db.collect_explain_plans,
            db.collect_replication,
            JSON.stringify(db.disabled_collectors),
            now,
            now,
          ],
        )
        return db
      }, databasesLock(orgId))
    },

    async updateDatabase(orgId: string, id: string, patch: DatabasePatch, now: number) {
      const sets: Fragment[] = []
      for (const column of PATCHABLE_COLUMNS) {
        const value = patch[column]
        if (value === undefined) continue
        sets.push(
          sql`${ident(column, PATCHABLE_COLUMNS)} = ${column === 'tags' || column === 'disabled_collectors' ? JSON.stringify(value) : value}`,
        )
      }
      sets.push(sql`updated_at = ${now}`)
      const q = sql`UPDATE databases SET ${join(sets)} WHERE id = ${id} AND org_id = ${orgId}`
      const changed = await driver.run(q.sql, q.params)
      return changed > 0 ? getDatabase(driver, orgId, id) : undefined
    },

    async deleteDatabase(orgId: string, id: string) {
      const deleted = (await driver.run('DELETE FROM databases WHERE id = $1 AND org_id = $2', [id, orgId])) > 0
      if (deleted) onDeleted(id)
      return deleted
    },
  }
}

/**
 * Registers the batch's database, or finds it registered meanwhile, under the organization's lock:
 * the lock createDatabase takes, so concurrent registrations of different names (agents, POST
 * /databases) count each other against `limit`, and one of the same name is found, not duplicated.
 */
export function registerFromBatch(
  tx: SqlDriver,
  orgId: string,
  batch: IngestBatch,
  now: number,
  limit: number | undefined,
) {
  return tx.transaction(async (locked): Promise<Record<string, unknown> | 'limit'> => {
    const registered = await locked.get('SELECT * FROM databases WHERE org_id = $1 AND name = $2', [
      orgId,
      batch.database.name,
    ])
    if (registered) return registered
    if (limit !== undefined) {
      const r = await locked.get<{ n: number }>('SELECT COUNT(*) AS n FROM databases WHERE org_id = $1', [orgId])
      if (num(r?.n ?? 0) >= limit) return 'limit'
    }
    const id = Bun.randomUUIDv7()
    await locked.run(
      `INSERT INTO databases (id, org_id, name, engine, engine_version, host, port, tags, poll_interval_seconds,
         collect_explain_plans, collect_replication, disabled_collectors, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $12, $8, $9, $10, '[]', $11, $11)`,
      [
        id,
        orgId,
        batch.database.name,
        batch.database.engine,
        batch.database.engine_version ?? null,
        batch.database.host,
        batch.database.port,
        Math.max(1, Math.round(batch.interval_seconds)) || DB_DEFAULTS.poll_interval_seconds,
        DB_DEFAULTS.collect_explain_plans,
        DB_DEFAULTS.collect_replication,
        now,
        // The agent config's tags apply on registration only: later edits through the API stay.
        JSON.stringify(batch.database.tags ?? {}),
      ],
    )
    return (await locked.get('SELECT * FROM databases WHERE id = $1', [id]))!
  }, databasesLock(orgId))
}
