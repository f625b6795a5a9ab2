// pg_wal grown past max_wal_size (the agent's `wal_dir` collector: pg_ls_waldir()'s files and bytes).
// Checkpoints keep pg_wal near max_wal_size (a soft limit a burst may pass for a while); twice that
// means something keeps WAL the checkpoints would otherwise remove, and pg_wal grows until its disk is
// full and the server stops. The finding names what holds it, the largest first: a replication slot's
// restart_lsn (the `replication` collector's slots), wal_keep_size (the server's settings), files waiting
// for the archiver (`archiver`, failing or behind), and a checkpoint overdue (the WAL since the last
// checkpoint's redo LSN, which crash recovery needs). wal_keep_size alone is a choice, not a fault: info.
import type { ArchiverStatus } from '../../../../shared/wire.ts'
import { pgString } from '../../sql-text.ts'
import { type Rule, bytes, severityAbove } from '../../types.ts'
import { archivingFailing } from './archiver.ts'
import { settingBytes, settings } from './log-evidence.ts'

const defaults = {
  /** pg_wal at this many times max_wal_size is a warning (max_wal_size is a soft limit a burst may pass). */
  warning_ratio: 2,
  /** pg_wal at this many times max_wal_size is critical. */
  critical_ratio: 4,
  /** A holder is named when it keeps at least this share of pg_wal. */
  holder_share: 0.1,
}

const MB = 1024 ** 2
/** PostgreSQL's default max_wal_size, used when the server's settings have not arrived. */
const DEFAULT_MAX_WAL_SIZE = 1024 * MB

interface Holder {
  bytes: number
  words: string
  fix: string[]
  /** Held on purpose (wal_keep_size), not by a fault. */
  chosen?: boolean
}

export const walSize: Rule<typeof defaults> = {
  id: 'pg_wal_size',
  engine: 'postgres',
  category: 'capacity',
  summary:
    'pg_wal grown past max_wal_size, naming what holds the WAL: a replication slot, wal_keep_size, the archiver failing or behind, an overdue checkpoint.',
  collectors: ['wal_dir', 'replication', 'archiver'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(walSize)
    const found = await ctx.walDir()
    const size = found?.status.wal_bytes
    if (!found || size === null || size === undefined || size <= 0) return []
    const s = await settings(ctx)
    const maxWal = settingBytes(s?.max_wal_size, MB) ?? DEFAULT_MAX_WAL_SIZE
    const ratio = size / maxWal
    const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
    if (!severity) return []

    const holders: Holder[] = []
    const replication = (await ctx.replication())?.payload
    const slots = replication?.slots ?? []
    for (const slot of slots) {
      const held = slot.lag_bytes ?? 0
      if (held <= 0) continue
      const name = pgString(slot.slot_name)
      holders.push({
        bytes: held,
        words: `the ${slot.active ? 'active' : 'inactive'} ${slot.slot_type} replication slot ${name} keeps ${bytes(held)} from its restart_lsn${slot.active ? ' (its consumer lags)' : ' (nobody consumes it)'}`,
        fix: slot.active ? [] : [`SELECT pg_drop_replication_slot(${name});   -- if its consumer is gone for good`],
      })
    }
    const keep = settingBytes(s?.wal_keep_size, MB) ?? 0
    if (keep > 0) {
      holders.push({
        bytes: Math.min(keep, size),
        words: `wal_keep_size keeps ${bytes(keep)} for standbys without a slot`,
        fix: ['ALTER SYSTEM RESET wal_keep_size; SELECT pg_reload_conf();   -- if no standby without a slot needs it'],
        chosen: true,
      })
    }
    const archiver = await ctx.once('archiver', async () => {
      const snapshot = await ctx.store.latestSnapshot(ctx.db.id, 'archiver')
      return { ts: snapshot?.ts ?? null, status: (snapshot?.payload ?? null) as ArchiverStatus | null }
    })
    const a = archiver.status
    if (a && a.archive_mode !== 'off' && (a.ready_bytes ?? 0) > 0) {
      const failing = archivingFailing(a)
      holders.push({
        bytes: a.ready_bytes!,
        words: `${a.ready_count} WAL files (${bytes(a.ready_bytes!)}) wait for the archiver, ${failing ? 'whose command fails (see pg_archiver_failing)' : 'which is behind'}`,
        fix: [],
      })
    }
    const sinceRedo = found.status.wal_since_redo_bytes
    if (sinceRedo !== null && sinceRedo > maxWal) {
      holders.push({
        bytes: sinceRedo,
        words: `${bytes(sinceRedo)} were written since the last checkpoint's redo point${found.status.redo_lsn ? ` (${found.status.redo_lsn})` : ''}, more than max_wal_size: a checkpoint is overdue, and crash recovery needs all of it`,
        fix: ['CHECKPOINT;   -- needs a superuser or pg_checkpoint (PostgreSQL 15+)'],
      })
    }
    const named = holders.filter((h) => h.bytes >= t.holder_share * size).sort((x, y) => y.bytes - x.bytes)
    const onPurpose = named.length > 0 && named.every((h) => h.chosen)
    const files = found.status.wal_files
    const cause =
      named.length === 0
        ? ` No ${replication ? 'slot, ' : ''}wal_keep_size, archiver backlog or overdue checkpoint accounts for it${replication ? '' : ' (replication slots are not collected: the replication collector is off)'}: a burst of writes faster than checkpoints complete (max_wal_size is a soft limit), or files left from one; the next checkpoints should shrink it.`
        : ` What keeps it: ${named.map((h) => h.words).join('; ')}.`
    return [
      {
        severity: onPurpose ? 'info' : severity,
        object: 'pg_wal',
        title: `pg_wal holds ${bytes(size)}, ${ratio.toFixed(1)} times max_wal_size`,
        detail:
          `The WAL directory holds ${files === null ? '' : `${files.toLocaleString('en-US')} files, `}${bytes(size)}, against a max_wal_size of ${bytes(maxWal)}.${cause}` +
          ' WAL that is held is never removed: pg_wal grows until its disk is full, and then the server stops.',
        recommendation: onPurpose
          ? 'wal_keep_size keeps this much on purpose; make sure the disk of pg_wal has room for it, or lower it once the standbys that need it have slots.'
          : 'Release what holds the WAL: drop a slot whose consumer is gone (and cap all of them with max_slot_wal_keep_size), fix or speed up the archive command, lower wal_keep_size; a checkpoint then removes the files nothing holds. Watch the free space of pg_wal meanwhile.',
        how_to_investigate: [
          'SELECT count(*) AS files, pg_size_pretty(sum(size)) AS size FROM pg_ls_waldir();',
          'SELECT slot_name, slot_type, active, wal_status, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)) AS retained FROM pg_replication_slots ORDER BY pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) DESC NULLS LAST;',
          'SELECT archived_count, last_archived_wal, failed_count, last_failed_wal, last_failed_time FROM pg_stat_archiver;',
          'SELECT checkpoint_time, redo_lsn, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)) AS since_redo FROM pg_control_checkpoint();',
          "SELECT name, setting, unit FROM pg_settings WHERE name IN ('max_wal_size', 'min_wal_size', 'wal_keep_size', 'max_slot_wal_keep_size', 'archive_mode');",
        ],
        how_to_fix: [
          ...named.flatMap((h) => h.fix),
          ...(slots.length > 0 && !/^\d/.test(s?.max_slot_wal_keep_size ?? '')
            ? [
                "ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf();   -- a cap on what any slot may keep",
              ]
            : []),
          ...(named.some((h) => h.fix.some((f) => f.startsWith('CHECKPOINT')))
            ? []
            : ['CHECKPOINT;   -- once released: removes the WAL files nothing holds (a superuser or pg_checkpoint)']),
        ],
        metrics: {
          wal_bytes: size,
          wal_files: files,
          max_wal_size_bytes: maxWal,
          ratio: Number(ratio.toFixed(2)),
          wal_keep_size_bytes: keep,
          wal_since_redo_bytes: sinceRedo,
          largest_holder_bytes: named[0]?.bytes ?? null,
        },
        as_of: found.ts,
      },
    ]
  },
}
