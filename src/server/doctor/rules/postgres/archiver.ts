// The WAL archiver failing or falling behind (collected by `archiver`). While archive_command (or
// archive_library) fails, PostgreSQL keeps every WAL file not yet archived, retrying the oldest one
// forever: pg_wal grows until the disk fills and the server stops, and point-in-time recovery from the
// archive ends at the last file archived. Critical as soon as the last attempt failed after the last
// success (or failures with nothing ever archived), naming the WAL file and since when.
// Warning when the archiver keeps up badly: at least 64 WAL files waiting (1 GB with the default 16 MB
// segments; a healthy archiver has one or two waiting, since it archives each file as soon as it is
// complete) or the oldest waiting for an hour (a restore from the archive would lose that hour).
// When the server log holds archive_failed entries (log_events), the latest one since the last success
// adds the command's exit code and the WAL file it failed on.
// Critical too when archive_mode is on with no archive_command or archive_library: PostgreSQL then keeps
// every WAL file, waiting for a command, and nothing is archived at all.
import type { ArchiverStatus } from '../../../../shared/wire.ts'
import { pgString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, bytes, duration } from '../../types.ts'
import { logEntries, logExcerpt, numberField, textField } from './log-evidence.ts'

const defaults = {
  warning_ready_files: 64,
  warning_oldest_ready_minutes: 60,
}

/** The last attempt failed after the last success, or attempts failed and none ever succeeded. */
export function archivingFailing(
  s: Pick<ArchiverStatus, 'archive_mode' | 'failed_count' | 'last_failed_time' | 'last_archived_time'>,
): boolean {
  if (s.archive_mode === 'off' || s.failed_count <= 0 || s.last_failed_time === null) return false
  return s.last_archived_time === null || s.last_failed_time > s.last_archived_time
}

const iso = (ms: number) => new Date(ms).toISOString()

const INVESTIGATE = [
  'SELECT * FROM pg_stat_archiver;',
  "SELECT count(*) AS waiting, min(modification) AS oldest FROM pg_ls_archive_statusdir() WHERE name LIKE '%.ready';",
  "SELECT name, setting FROM pg_settings WHERE name IN ('archive_mode', 'archive_timeout', 'wal_segment_size');",
  "SELECT current_setting('data_directory') AS data_directory, current_setting('log_directory') AS log_directory;",
  'grep -h -B2 -A2 "archive command failed" <log_directory>/*   # the exit code and the command\'s own output say why',
]

export const archiverFailing: Rule<typeof defaults> = {
  id: 'pg_archiver_failing',
  summary:
    'The WAL archiver failing or falling behind: pg_wal grows until the disk fills, and recovery from the archive stops at the last file archived.',
  collectors: ['archiver', 'log_events'],
  engine: 'postgres',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(archiverFailing)
    const found = await ctx.once('archiver', async () => {
      const snapshot = await ctx.store.latestSnapshot(ctx.db.id, 'archiver')
      return { ts: snapshot?.ts ?? null, status: (snapshot?.payload ?? null) as ArchiverStatus | null }
    })
    const s = found.status
    if (!s || s.archive_mode === 'off') return []
    const backlog =
      s.ready_count !== null && s.ready_count > 0
        ? ` ${s.ready_count} WAL files (${bytes(s.ready_bytes ?? 0)}) are waiting to be archived` +
          (s.oldest_ready_time !== null && found.ts !== null
            ? `, the oldest for ${duration(Math.max(0, found.ts - s.oldest_ready_time))}.`
            : '.')
        : ''
    const metrics = {
      archived_count: s.archived_count,
      failed_count: s.failed_count,
      last_failed_wal: s.last_failed_wal,
      last_failed_time: s.last_failed_time === null ? null : iso(s.last_failed_time),
      last_archived_wal: s.last_archived_wal,
      last_archived_time: s.last_archived_time === null ? null : iso(s.last_archived_time),
      ready_count: s.ready_count,
      ready_bytes: s.ready_bytes,
    }
    if (archivingFailing(s)) {
      // The log's latest archive_failed entry (since the last success) gives the command's exit code and WAL file.
      // The archiver's pause after three failed tries (archive_gave_up) names the WAL file even when the command's line cannot.
      const since = (e: { ts: number }) => s.last_archived_time === null || e.ts > s.last_archived_time
      const entries = await logEntries(ctx, ['archive_failed', 'archive_gave_up'], 24 * 3_600_000)
      const logged = entries.find((e) => e.kind === 'archive_failed' && since(e))
      const paused = entries.find((e) => e.kind === 'archive_gave_up' && since(e))
      const exitCode = logged ? numberField(logged, 'exit_code') : null
      const loggedWal =
        (logged ? textField(logged, 'wal_file') : null) ?? (paused ? textField(paused, 'wal_file') : null)
      const fromLog = logged
        ? ` The server log's latest failure, at ${iso(logged.ts)}: ${exitCode !== null ? `exit code ${exitCode}` : 'no exit code'}` +
          (loggedWal ? ` on WAL file ${pgString(loggedWal)}` : '') +
          ` ("${logExcerpt(logged.message)}"${logged.detail ? `; ${logExcerpt(logged.detail)}` : ''}).`
        : ''
      const wal = s.last_failed_wal ?? loggedWal
      const finding: FindingDraft = {
        severity: 'critical',
        ...(wal ? { object: wal } : {}),
        title: 'WAL archiving is failing',
        detail:
          `Archiving ${wal ? `WAL file ${pgString(wal)}` : 'a WAL file'} failed, last at ${iso(s.last_failed_time!)} ` +
          (s.last_archived_time === null
            ? `(${s.failed_count} failed attempts, and no WAL file has ever been archived).`
            : `(${s.failed_count} failed attempts since the statistics' reset); nothing has been archived since ${iso(s.last_archived_time)}` +
              (s.last_archived_wal ? ` (${pgString(s.last_archived_wal)}).` : '.')) +
          backlog +
          fromLog +
          ' PostgreSQL keeps every WAL file until the archive command succeeds on it: pg_wal grows until the disk fills and the server stops, and a restore from the archive ends at the last archived file.',
        recommendation:
          'Find out why the archive command fails (the server log says, with its exit code) and fix it: the archive destination full or unreachable, credentials expired, a wrong path. Archiving resumes by itself with the oldest waiting file once the command succeeds; a changed archive_command takes effect on reload. Watch the free space of the WAL directory meanwhile.',
        how_to_investigate: [
          ...INVESTIGATE,
          ...(wal
            ? [`SELECT name, modification FROM pg_ls_archive_statusdir() WHERE name = ${pgString(`${wal}.ready`)};`]
            : []),
        ],
        how_to_fix: [
          'SELECT pg_reload_conf();   -- after correcting archive_command (postgresql.conf or ALTER SYSTEM)',
        ],
        metrics: { ...metrics, log_exit_code: exitCode, log_wal_file: loggedWal },
      }
      return [finding]
    }
    if (s.archive_command_set === false) {
      return [
        {
          severity: 'critical',
          title: 'WAL archiving is on without a command',
          detail:
            `archive_mode is ${pgString(s.archive_mode ?? 'on')} but neither archive_command nor archive_library is set: PostgreSQL archives nothing and keeps every WAL file, waiting for a command.` +
            backlog +
            ' pg_wal grows until the disk fills and the server stops.',
          recommendation:
            'Set archive_command (or archive_library) to what archives a WAL file to your archive (pgBackRest, WAL-G, a copy to a mounted volume), then reload; or, if no archive is wanted, set archive_mode = off (a restart), after which PostgreSQL removes the waiting files at its next checkpoints.',
          how_to_investigate: INVESTIGATE,
          how_to_fix: [
            "SELECT pg_reload_conf();   -- after setting archive_command (ALTER SYSTEM SET archive_command = '…' or postgresql.conf)",
          ],
          metrics,
        },
      ]
    }
    const oldestMs = s.oldest_ready_time !== null && found.ts !== null ? found.ts - s.oldest_ready_time : null
    const many = s.ready_count !== null && s.ready_count >= t.warning_ready_files
    const old =
      oldestMs !== null &&
      s.ready_count !== null &&
      s.ready_count > 0 &&
      oldestMs >= t.warning_oldest_ready_minutes * 60_000
    if (!many && !old) return []
    return [
      {
        severity: 'warning',
        title: 'WAL archiving is falling behind',
        detail:
          `The archive command succeeds but does not keep up:${backlog}` +
          ' Until they are archived PostgreSQL keeps them in pg_wal, and a restore from the archive would lose what they hold.',
        recommendation:
          'Make the archive command faster (compression, a closer or faster destination, a tool that archives in parallel such as pgBackRest or WAL-G with archive-async) or find what slows it (the log, the destination).',
        how_to_investigate: INVESTIGATE,
        how_to_fix: [],
        metrics: { ...metrics, oldest_ready_ms: oldestMs },
      },
    ]
  },
}
