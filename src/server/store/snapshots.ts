// Sections kept as their latest snapshot only, one row per database and kind in `snapshots`: written
// with each batch that carries them, read whole.
// Which snapshot is the latest is decided by the server's clock, never the agent's: each row keeps
// received_at, the batch's receipt time less the age its agent says it has (X-Dbm-Batch-Age, sent with a
// batch from the agent's buffer; absent on a current batch: 0), and a batch replaces a row only when its
// received_at is not earlier. So the snapshot received last wins whatever the agent's clock says (one
// running 9 minutes ahead used to date its snapshot in the future, and every correct one sent after it
// was refused until the clock caught up), while a batch delivered late from the buffer still never
// replaces a newer one: its age takes it back to when it was collected, before the current batches
// sent since. The age is in whole seconds, counted from when the batch was buffered (just after its
// cycle), so two cycles of one agent keep their order as long as they are more than a second apart
// (the poll interval is at least one second, ten by default). `ts` stays the agent's collected_at: the
// time the readers show, on the clock of the entries' own times.
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

/**
 * Upserts latest-snapshot rows (kind, payload JSON) of a batch collected at `collectedAt` (the agent's
 * clock) and received at `receivedAt` (the server's clock, less the batch's age): a row is replaced only
 * by one received no earlier (the header comment says why). Rows written before received_at existed
 * (NULL) are replaced by any.
 */
export function upsertSnapshots(
  writes: Writes,
  databaseId: string,
  collectedAt: number,
  receivedAt: number,
  rows: readonly (readonly [kind: string, payload: string])[],
): void {
  writes.upsert(
    'snapshots',
    ['database_id', 'kind', 'ts', 'received_at', 'payload'],
    rows.map(([kind, payload]) => [databaseId, kind, collectedAt, receivedAt, payload]),
    {
      key: ['database_id', 'kind'],
      update: { ts: 'excluded.ts', received_at: 'excluded.received_at', payload: 'excluded.payload' },
      onlyIf: 'snapshots.received_at IS NULL OR excluded.received_at >= snapshots.received_at',
    },
  )
}

/** The batch's snapshot sections; one received earlier than the stored one (a late batch from the agent's buffer) never replaces it. */
export function applySnapshots(writes: Writes, databaseId: string, batch: IngestBatch, receivedAt: number): void {
  upsertSnapshots(
    writes,
    databaseId,
    batch.collected_at,
    receivedAt,
    SNAPSHOT_KINDS.filter((kind) => batch[kind] !== undefined).map((kind) => [kind, JSON.stringify(batch[kind])]),
  )
}
