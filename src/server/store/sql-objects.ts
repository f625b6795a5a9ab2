// Telemetry about a database's objects and sessions: tables and indexes (latest statistics plus
// per-interval timeseries), active queries and locks (latest snapshot).
import type { IngestBatch } from '../../shared/wire.ts'
import type { SqlDriver } from './driver.ts'
import type { Migration } from './migrations.ts'

/** Schema of this part (migration 3). */
export const objectsMigration: Omit<Migration, 'version'> = {
  name: 'table and index statistics over time',
  sqlite: 'SELECT 1',
  postgres: 'SELECT 1',
}

/** Applies the batch's tables, indexes, activity and locks sections. */
export async function applyObjects(_tx: SqlDriver, _databaseId: string, _batch: IngestBatch): Promise<void> {}

/** Reads for the routes of this part. */
export function objectsReader(_driver: SqlDriver) {
  return {}
}
export type ObjectsReader = ReturnType<typeof objectsReader>
