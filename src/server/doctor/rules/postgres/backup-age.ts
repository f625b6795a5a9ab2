// Backups too old, failing, or unreadable (collected by `backups`, from the backup command named in the
// agent's config: pgBackRest or WAL-G). A database whose last good backup is days old loses those days
// of data, or all of it, when its disk or its host is lost; and a failing backup job is silent until
// someone needs a restore. Findings, one per cause:
// - no successful backup within max_age_hours (default 26: a daily job, late by two hours): warning,
//   critical past critical_age_hours (default 72) or when the tool lists no successful backup at all;
// - no successful full backup within max_full_age_days (default 8: a weekly full, a day late): warning,
//   as every diff, incr or delta restore needs its full and the WAL since;
// - the newest backup failed (pgBackRest's `error` flag: checksum errors found while copying): warning;
// - the backup command gave no list (its exit code and first line of output): warning, as nothing can
//   be said of the backups until it works.
// Silent when the agent has no backup command configured: there is no way to know.
import type { BackupEntry, BackupStatus } from '../../../../shared/wire.ts'
import { commentText } from '../../sql-text.ts'
import { type FindingDraft, type Rule, bytes, duration } from '../../types.ts'

const defaults = {
  max_age_hours: 26,
  critical_age_hours: 72,
  max_full_age_days: 8,
}

const iso = (ms: number) => new Date(ms).toISOString()
const HOUR = 3_600_000

/** When a backup ended, else began. */
export const backupTime = (b: BackupEntry): number | null => b.finished_at ?? b.started_at

/** The newest successful backup, and the newest successful full one (the list is newest first, but the order is not trusted). */
export function lastBackups(s: Pick<BackupStatus, 'backups'>): {
  latest: BackupEntry | null
  successful: BackupEntry | null
  full: BackupEntry | null
} {
  const sorted = [...s.backups].sort((a, b) => (backupTime(b) ?? 0) - (backupTime(a) ?? 0))
  return {
    latest: sorted[0] ?? null,
    successful: sorted.find((b) => b.ok) ?? null,
    full: sorted.find((b) => b.ok && b.type === 'full') ?? null,
  }
}

/** What to run to investigate, per tool: placeholders for the stanza, named in a comment (its text is the monitored output's). */
function investigate(s: BackupStatus, stanza: string | null): string[] {
  const named = stanza === null ? '' : `   # <stanza>: ${commentText(stanza, 100)}`
  if (s.tool === 'walg') {
    return [
      'wal-g backup-list --detail   # the backups WAL-G sees in its storage, with their times',
      'wal-g wal-verify integrity timeline   # WAL archived without gaps since the oldest backup',
      'journalctl -u <the unit or cron job running wal-g backup-push> --since -2d   # why the last runs failed',
    ]
  }
  return [
    `pgbackrest --stanza=<stanza> info${named}`,
    `pgbackrest --stanza=<stanza> check   # archiving and the repository, end to end`,
    'grep -h -E "ERROR|WARN" /var/log/pgbackrest/*-backup.log | tail -n 20   # the repository host\'s log: why backups failed',
  ]
}

function takeBackup(s: BackupStatus, type: 'full' | 'any'): string[] {
  if (s.tool === 'walg')
    return [
      type === 'full'
        ? 'wal-g backup-push --full "$PGDATA"   # as the database\'s OS user'
        : 'wal-g backup-push "$PGDATA"   # as the database\'s OS user',
    ]
  return [type === 'full' ? 'pgbackrest --stanza=<stanza> --type=full backup' : 'pgbackrest --stanza=<stanza> backup']
}

const describeBackup = (b: BackupEntry) => {
  const when = backupTime(b)
  return `${commentText(b.label, 200)} (${b.type}${when === null ? '' : `, ${iso(when)}`}${b.size_bytes === null ? '' : `, ${bytes(b.size_bytes)}`})`
}

export const backupAge: Rule<typeof defaults> = {
  id: 'pg_backup_age',
  summary: "Backups too old, failing or unreadable, from the backup tool's own listing (pgBackRest or WAL-G).",
  collectors: ['backups'],
  engine: 'postgres',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(backupAge)
    const snapshot = await ctx.once('backups', async () => ctx.store.latestSnapshot(ctx.db.id, 'backups'))
    const s = (snapshot?.payload ?? null) as BackupStatus | null
    if (!s) return []
    const tool = s.tool === 'walg' ? 'WAL-G' : 'pgBackRest'
    const { latest, successful, full } = lastBackups(s)
    const stanza = (successful ?? latest)?.stanza ?? null
    const metrics = {
      tool: s.tool,
      checked_at: iso(s.checked_at),
      backups: s.backups.length,
      last_successful: successful ? commentText(successful.label, 200) : null,
      last_successful_time: successful && backupTime(successful) !== null ? iso(backupTime(successful)!) : null,
      last_full: full ? commentText(full.label, 200) : null,
      last_full_time: full && backupTime(full) !== null ? iso(backupTime(full)!) : null,
    }
    const findings: FindingDraft[] = []
    if (s.error !== null) {
      findings.push({
        severity: 'warning',
        object: 'backup_command',
        title: `The ${tool} backup listing fails`,
        detail: `The agent's backup command gave ${s.backups.length === 0 ? 'no list' : 'an incomplete list'} at ${iso(s.checked_at)}: ${commentText(s.error, 500)}. Until it works, the age of the backups cannot be checked.`,
        recommendation: `Run the command the agent runs (backup_command in its config) as the agent's user and fix what it reports: the repository unreachable, credentials or a stanza missing, the user not allowed to read the ${tool} configuration.`,
        how_to_investigate: investigate(s, stanza),
        how_to_fix: [],
        metrics: { ...metrics, error: commentText(s.error, 500) },
      })
    }
    if (s.error === null || s.backups.length > 0) {
      const age = successful && backupTime(successful) !== null ? Math.max(0, ctx.now - backupTime(successful)!) : null
      if (age === null || age > t.max_age_hours * HOUR) {
        findings.push({
          severity: age === null || age > t.critical_age_hours * HOUR ? 'critical' : 'warning',
          title:
            successful === null
              ? `No successful backup in ${tool}`
              : `The last successful backup is ${duration(age!)} old`,
          detail:
            (successful === null
              ? `${tool} lists ${s.backups.length === 0 ? 'no backup at all' : `${s.backups.length} backups, none of them successful`}.`
              : `The newest successful backup is ${describeBackup(successful)}, ${duration(age!)} ago (more than ${t.max_age_hours} h).`) +
            (latest && latest !== successful ? ` The newest backup, ${describeBackup(latest)}, failed.` : '') +
            ' Losing the disk or the host now loses everything written since, or the whole database when there is no backup.',
          recommendation: `Find out why the scheduled backup did not run or did not finish (the scheduler's log, ${tool}'s log), fix it, and take a backup now.`,
          how_to_investigate: investigate(s, stanza),
          how_to_fix: takeBackup(s, successful === null ? 'full' : 'any'),
          metrics: { ...metrics, age_hours: age === null ? null : Math.round((age / HOUR) * 10) / 10 },
        })
      }
      const fullAge = full && backupTime(full) !== null ? Math.max(0, ctx.now - backupTime(full)!) : null
      if (successful !== null && (fullAge === null || fullAge > t.max_full_age_days * 24 * HOUR)) {
        findings.push({
          severity: 'warning',
          object: 'full',
          title: full === null ? 'No successful full backup' : `The last full backup is ${duration(fullAge!)} old`,
          detail:
            (full === null
              ? `${tool} lists no successful full backup.`
              : `The newest successful full backup is ${describeBackup(full)}, more than ${t.max_full_age_days} days ago.`) +
            ' A restore needs a full backup plus every later differential or incremental one and all WAL since: the older the full, the longer and the more fragile the restore.',
          recommendation:
            'Check that the full backups are still scheduled (and that retention keeps one), then take a full backup.',
          how_to_investigate: investigate(s, stanza),
          how_to_fix: takeBackup(s, 'full'),
          metrics: {
            ...metrics,
            full_age_days: fullAge === null ? null : Math.round((fullAge / (24 * HOUR)) * 10) / 10,
          },
        })
      }
      if (latest !== null && !latest.ok) {
        findings.push({
          severity: 'warning',
          object: commentText(latest.label, 200),
          title: 'The newest backup failed',
          detail: `${tool} reports errors in the newest backup, ${describeBackup(latest)} (pgBackRest: page checksum errors found while copying, so some data files may be damaged on the database itself).`,
          recommendation: `Read the backup's details (pgbackrest info --set=<label>) and the log for the files with errors, check those relations on the database (amcheck, pg_checksums on a stopped copy), and take a new backup once resolved.`,
          how_to_investigate: investigate(s, stanza),
          how_to_fix: [],
          metrics,
        })
      }
    }
    return findings
  },
}
