// wal_dir: how much WAL the server keeps and when it last checkpointed, sent every cycle (the server
// keeps the latest). From pg_ls_waldir() (pg_monitor may call it): the files in pg_wal and their total
// size, as one row however many files there are. From pg_control_checkpoint() (executable by every role
// unless revoked): the last checkpoint's start and redo LSN, with its age measured on the server from the
// later of that start and the server's own (the checkpointer counts checkpoint_timeout from its start, so
// a checkpoint older than the server is not overdue), and the WAL written since the redo LSN (replayed, on
// a standby): an idle server skips its timed checkpoints and writes next to nothing. A role that may not
// call either function gets a collector note and nulls for that part, not a failure.
import type { WalDirStatus } from '../../../shared/wire.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { PREPARED } from '../../own-statements.ts'

const WAL_DIR_SQL = 'SELECT count(*)::int8 AS wal_files, coalesce(sum(size), 0)::int8 AS wal_bytes FROM pg_ls_waldir()'

const CHECKPOINT_SQL = `
  SELECT floor(extract(epoch FROM c.checkpoint_time) * 1000)::int8 AS checkpoint_time,
         c.redo_lsn::text AS redo_lsn, c.redo_wal_file,
         greatest(0, floor(extract(epoch FROM clock_timestamp() - greatest(c.checkpoint_time, pg_postmaster_start_time())) * 1000))::int8 AS checkpoint_age_ms,
         greatest(0, pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END, c.redo_lsn))::int8 AS wal_since_redo_bytes
  FROM pg_control_checkpoint() c`

const WAL_DIR_NOTE = 'pg_wal not measured: the role may not call pg_ls_waldir() (GRANT pg_monitor TO the agent role)'
const CHECKPOINT_NOTE =
  'last checkpoint not read: the role may not call pg_control_checkpoint() (GRANT EXECUTE ON FUNCTION pg_control_checkpoint() TO the agent role)'

const int = (v: unknown): number | null => (v === null || v === undefined ? null : Math.round(Number(v)))
/** A server text, bounded before it travels. */
const bounded = (v: unknown, max: number): string | null =>
  typeof v === 'string' ? v.replaceAll('\u0000', '').slice(0, max) : null

/** Runs `query`'s one row; null when the role lacks the privilege (42501), with `note` kept for the collector's notes. */
async function permitted(
  run: () => Promise<Record<string, unknown>[]>,
  note: string,
  notes: string[],
): Promise<Record<string, unknown> | null> {
  try {
    return (await run())[0] ?? null
  } catch (e) {
    if ((e as { code?: string }).code !== '42501') throw e
    notes.push(note)
    return null
  }
}

export const walDir = registerCollector<PostgresContext>({
  name: 'wal_dir',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const notes: string[] = []
    const [recovery] = await ctx.sql.unsafe<{ in_recovery: boolean }[]>(
      'SELECT pg_is_in_recovery() AS in_recovery',
      [],
      PREPARED,
    )
    const dir = await permitted(() => ctx.sql.unsafe(WAL_DIR_SQL, [], PREPARED), WAL_DIR_NOTE, notes)
    const checkpoint = await permitted(() => ctx.sql.unsafe(CHECKPOINT_SQL, [], PREPARED), CHECKPOINT_NOTE, notes)
    if (notes.length > 0) ctx.notes.set('wal_dir', notes.join('; '))
    else ctx.notes.delete('wal_dir')
    const status: WalDirStatus = {
      wal_files: int(dir?.wal_files),
      wal_bytes: int(dir?.wal_bytes),
      checkpoint_time: int(checkpoint?.checkpoint_time),
      checkpoint_age_ms: int(checkpoint?.checkpoint_age_ms),
      redo_lsn: bounded(checkpoint?.redo_lsn, 32),
      redo_wal_file: bounded(checkpoint?.redo_wal_file, 64),
      wal_since_redo_bytes: int(checkpoint?.wal_since_redo_bytes),
      in_recovery: recovery?.in_recovery === true,
    }
    return { wal_dir: status }
  },
})
