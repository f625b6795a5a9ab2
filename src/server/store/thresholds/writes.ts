// Writes of the database_thresholds table (types.ts): set or take away a database's overrides in one
// transaction (a value as JSON text), never for a database that is gone; and clear them all.
import type { SqlDriver } from '../driver.ts'
import type { ThresholdChange, ThresholdWrites } from './types.ts'

export function thresholdWrites(driver: SqlDriver): ThresholdWrites {
  return {
    async changeThresholds(databaseId: string, changes: readonly ThresholdChange[], now: number): Promise<void> {
      if (changes.length === 0) return
      await driver.transaction(async (tx) => {
        for (const c of changes) {
          if (c.value === null) {
            await tx.run('DELETE FROM database_thresholds WHERE database_id = $1 AND rule = $2 AND key = $3', [
              databaseId,
              c.rule,
              c.key,
            ])
          } else {
            await tx.run(
              `INSERT INTO database_thresholds (database_id, rule, key, value, updated_at)
               SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM databases WHERE id = $1)
               ON CONFLICT (database_id, rule, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
              [databaseId, c.rule, c.key, JSON.stringify(c.value), now],
            )
          }
        }
      })
    },
    clearThresholds(databaseId: string): Promise<number> {
      return driver.run('DELETE FROM database_thresholds WHERE database_id = $1', [databaseId])
    },
  }
}
