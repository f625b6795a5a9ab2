// bgwriter: checkpoint and background-writer counters as deltas since the previous sample, under one
// key set on every version: PostgreSQL 17 moved the checkpoint counters to pg_stat_checkpointer (which
// also counts restartpoints apart) and dropped the backend write counters (now in pg_stat_io).
// The first sample only sets the baseline.
import { BGWRITER_KEYS } from '../../../shared/metrics.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { singleRowDeltas } from './common.ts'

const KEYS = BGWRITER_KEYS

const SQL = {
  10: `
    SELECT checkpoints_timed, checkpoints_req,
           checkpoint_write_time AS checkpoint_write_time_ms, checkpoint_sync_time AS checkpoint_sync_time_ms,
           buffers_checkpoint, buffers_clean, maxwritten_clean, buffers_backend, buffers_backend_fsync, buffers_alloc,
           NULL::bigint AS restartpoints_timed, NULL::bigint AS restartpoints_req, NULL::bigint AS restartpoints_done,
           stats_reset::text AS stats_reset
    FROM pg_stat_bgwriter`,
  17: `
    SELECT c.num_timed AS checkpoints_timed, c.num_requested AS checkpoints_req,
           c.write_time AS checkpoint_write_time_ms, c.sync_time AS checkpoint_sync_time_ms,
           c.buffers_written AS buffers_checkpoint, b.buffers_clean, b.maxwritten_clean,
           NULL::bigint AS buffers_backend, NULL::bigint AS buffers_backend_fsync, b.buffers_alloc,
           c.restartpoints_timed, c.restartpoints_req, c.restartpoints_done,
           concat_ws(' ', c.stats_reset, b.stats_reset) AS stats_reset
    FROM pg_stat_checkpointer c CROSS JOIN pg_stat_bgwriter b`,
}

export const bgwriter = registerCollector<PostgresContext>({
  name: 'bgwriter',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const delta = await singleRowDeltas(ctx, 'bgwriter', SQL, KEYS)
    return delta ? { bgwriter: delta } : {}
  },
})
