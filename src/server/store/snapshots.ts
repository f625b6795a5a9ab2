// Sections kept as their latest snapshot only, one row per database and kind in `snapshots`: written
// with each batch that carries them (a late batch never replaces a newer one), read whole.
import type { IngestBatch } from '../../shared/wire.ts'
import type { SqlDriver } from './driver.ts'
import type { Writes } from './ingest/batch.ts'

/** Sections kept as the latest snapshot only (replaced by each newer batch that carries them); tables,
 * indexes and the internals sections keep theirs in objects/ and internals/. */
const SNAPSHOT_KINDS = [
  'activity',
  'locks',
  'sequences',
  'unindexed_foreign_keys',
  'collector_notes',
  'xmin_holders',
  'invalid_constraints',
  'bloat',
  'column_stats',
  'connections',
  'progress',
  'archiver',
  'backups',
  'disabled_triggers',
  'wal_dir',
  'security',
  'clickhouse_users',
] as const
export type SnapshotKind = (typeof SNAPSHOT_KINDS)[number]

export async function latestSnapshot(
  driver: SqlDriver,
  databaseId: string,
  kind: SnapshotKind,
): Promise<{ ts: number; payload: unknown } | undefined> {
  const row = await driver.get<{ ts: number; payload: string }>(
    'SELECT ts, payload FROM snapshots WHERE database_id = $1 AND kind = $2',
    [databaseId, kind],
  )
  return row ? { ts: Number(row.ts), payload: JSON.parse(row.payload) } : undefined
}

/** The batch's snapshot sections; a batch delivered late (from the agent's buffer) never replaces a newer snapshot. */
export function applySnapshots(writes: Writes, databaseId: string, batch: IngestBatch): void {
  writes.upsert(
    'snapshots',
    ['database_id', 'kind', 'ts', 'payload'],
    SNAPSHOT_KINDS.filter((kind) => batch[kind] !== undefined).map((kind) => [
      databaseId,
      kind,
      batch.collected_at,
      JSON.stringify(batch[kind]),
    ]),
    {
      key: ['database_id', 'kind'],
      update: { ts: 'excluded.ts', payload: 'excluded.payload' },
      onlyIf: 'excluded.ts >= snapshots.ts',
    },
  )
}
