// Reads of the database_thresholds table (types.ts): one database's overrides, in rule and key order,
// each value parsed back from its JSON text.
import type { SqlDriver } from '../driver.ts'
import type { StoredThreshold, ThresholdReads, ThresholdValue } from './types.ts'

export function thresholdReads(driver: SqlDriver): ThresholdReads {
  return {
    async databaseThresholds(databaseId: string): Promise<StoredThreshold[]> {
      const rows = await driver.all<Record<string, unknown>>(
        'SELECT rule, key, value, updated_at FROM database_thresholds WHERE database_id = $1 ORDER BY rule, key',
        [databaseId],
      )
      return rows.map((r) => ({
        rule: String(r.rule),
        key: String(r.key),
        value: JSON.parse(String(r.value)) as ThresholdValue,
        updated_at: Number(r.updated_at),
      }))
    },
  }
}
