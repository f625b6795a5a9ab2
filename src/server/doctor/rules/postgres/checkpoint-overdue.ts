// No checkpoint for more than twice checkpoint_timeout while WAL was written (the agent's `wal_dir`
// collector: pg_control_checkpoint()'s last checkpoint, aged from the later of its start and the
// server's, and the WAL written since its redo LSN). The checkpointer starts one at least every
// checkpoint_timeout when anything was written, so a last checkpoint twice that old says it is stuck
// (storage that does not answer its fsync) or crawling (a long spread checkpoint on slow storage); on a
// standby, that restartpoints wait for the primary's checkpoints. Meanwhile crash recovery grows with
// every byte written since the redo point and pg_wal keeps all of it. An idle server skips its timed
// checkpoints: with next to nothing written since the redo point (min_wal_bytes) there is no finding.
import { pgString } from '../../sql-text.ts'
import { type Rule, bytes, duration, severityAbove } from '../../types.ts'
import { settingMs, settings } from './log-evidence.ts'

const defaults = {
  /** The last checkpoint this many checkpoint_timeouts old is a warning. */
  warning_timeouts: 2,
  /** The last checkpoint this many checkpoint_timeouts old is critical. */
  critical_timeouts: 6,
  /** WAL since the redo point below this is an idle server's (a checkpoint record, standby snapshots). */
  min_wal_bytes: 65_536,
}

const DEFAULT_TIMEOUT_MS = 300_000

export const checkpointOverdue: Rule<typeof defaults> = {
  id: 'pg_checkpoint_overdue',
  engine: 'postgres',
  category: 'reliability',
  summary:
    'No checkpoint for more than twice checkpoint_timeout while WAL was written: the checkpointer stuck or crawling, crash recovery and pg_wal growing (an idle server is left alone).',
  collectors: ['wal_dir'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(checkpointOverdue)
    const found = await ctx.walDir()
    const st = found?.status
    if (!found || !st || st.checkpoint_age_ms === null || st.wal_since_redo_bytes === null) return []
    if (st.wal_since_redo_bytes < t.min_wal_bytes) return []
    const s = await settings(ctx)
    const timeoutMs = settingMs(s?.checkpoint_timeout, 1000) ?? DEFAULT_TIMEOUT_MS
    const age = st.checkpoint_age_ms
    const severity = severityAbove(age / timeoutMs, t.warning_timeouts, t.critical_timeouts)
    if (!severity) return []
    const standby = st.in_recovery
    const last =
      st.checkpoint_time === null
        ? 'The last checkpoint'
        : `The last ${standby ? 'restartpoint' : 'checkpoint'}, started at ${new Date(st.checkpoint_time).toISOString()},`
    const redo =
      st.redo_lsn === null
        ? ''
        : ` (redo LSN ${st.redo_lsn}${st.redo_wal_file ? `, WAL file ${pgString(st.redo_wal_file)}` : ''})`
    return [
      {
        severity,
        object: standby ? 'restartpoint' : 'checkpoint',
        title: `No ${standby ? 'restartpoint' : 'checkpoint'} for ${duration(age)}`,
        detail:
          `${last} is ${duration(age)} old (counted from the server's start when that is later) against a checkpoint_timeout of ${duration(timeoutMs)}, ` +
          `and ${bytes(st.wal_since_redo_bytes)} of WAL ${standby ? 'were replayed' : 'were written'} since its redo point${redo}. ` +
          (standby
            ? "A standby restarts only at the checkpoints the primary logs: the primary may not be checkpointing either, or the standby's restartpoint is stuck. "
            : 'The checkpointer starts one at least every checkpoint_timeout once anything was written, so it is stuck (storage not answering its writes or fsync) or crawling through a very long spread checkpoint. ') +
          'Until one completes, a crash replays everything since the redo point, and pg_wal keeps it all.',
        recommendation:
          'See what the checkpointer waits on (its wait event in pg_stat_activity) and whether the storage of the data directory answers; with log_checkpoints on, the log says when the current checkpoint started and how far it got. A CHECKPOINT command waits for the running checkpoint and then runs one at full speed.',
        how_to_investigate: [
          "SELECT pid, wait_event_type, wait_event, backend_start FROM pg_stat_activity WHERE backend_type = 'checkpointer';",
          standby
            ? 'SELECT checkpoint_time, redo_lsn, redo_wal_file, pg_size_pretty(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), redo_lsn)) AS since_redo FROM pg_control_checkpoint();'
            : 'SELECT checkpoint_time, redo_lsn, redo_wal_file, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)) AS since_redo FROM pg_control_checkpoint();',
          "SELECT name, setting, unit FROM pg_settings WHERE name IN ('checkpoint_timeout', 'checkpoint_completion_target', 'max_wal_size', 'log_checkpoints');",
        ],
        how_to_fix: ['CHECKPOINT;   -- needs a superuser or pg_checkpoint (PostgreSQL 15+); waits until it is done'],
        metrics: {
          checkpoint_age_ms: age,
          checkpoint_timeout_ms: timeoutMs,
          wal_since_redo_bytes: st.wal_since_redo_bytes,
          redo_lsn: st.redo_lsn,
          checkpoint_time: st.checkpoint_time === null ? null : new Date(st.checkpoint_time).toISOString(),
        },
        as_of: found.ts,
      },
    ]
  },
}
