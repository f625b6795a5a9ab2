// Engine internals over time: wait events, replication lag and slots, bgwriter/checkpointer, WAL,
// I/O and database-wide statistics.
import type { IngestBatch } from '../../shared/wire.ts'
import type { SqlDriver } from './driver.ts'
import type { Migration } from './migrations.ts'

/** Schema of this part (migration 4). */
export const internalsMigration: Omit<Migration, 'version'> = {
  name: 'wait events, replication, bgwriter, WAL, I/O and database statistics over time',
  sqlite: 'SELECT 1',
  postgres: 'SELECT 1',
}

/** Applies the batch's waits, replication, bgwriter, wal_stats, io_stats and database_stats sections. */
export async function applyInternals(_tx: SqlDriver, _databaseId: string, _batch: IngestBatch): Promise<void> {}

/** Reads for the routes of this part. */
export function internalsReader(_driver: SqlDriver) {
  return {}
}
export type InternalsReader = ReturnType<typeof internalsReader>
