// The one table of log event kinds: what the agent classifies a server log entry (PostgreSQL's log,
// ClickHouse's system.errors, crash_log and text_log) as, the category each belongs to, and the fields
// each kind carries in its `fields` map. Shared by the agent's classifier, the server's store, rules and
// API, and the dashboard's Logs page. Plain constants: the agent loads this module without TypeBox.

export const LOG_CATEGORIES = [
  'errors',
  'connections',
  'locks',
  'queries',
  'vacuum',
  'checkpoints',
  'resources',
  'archive',
  'replication',
  'server',
  'other',
] as const
export type LogCategory = (typeof LOG_CATEGORIES)[number]

/**
 * Every kind with its category, its label, and the keys of its `fields` (all optional: a field the
 * entry does not give is left out). Durations are in milliseconds, sizes in bytes, times in epoch ms.
 */
export const LOG_KINDS = {
  /** An ERROR (or FATAL) not classified more precisely: sqlstate and the normalised message group them (ClickHouse: the error code, and whether it came from a remote server). */
  error: { category: 'errors', label: 'Error', fields: ['code', 'remote'] },
  /** password/ident/peer/cert authentication failed, or no pg_hba.conf entry. */
  auth_failed: { category: 'connections', label: 'Authentication failed', fields: ['method', 'reason'] },
  /** too many connections / remaining slots reserved / too many connections for role or database. */
  too_many_connections: { category: 'connections', label: 'Too many connections', fields: ['limit_kind'] },
  /** `still waiting for <mode> on <lock>` (log_lock_waits). */
  lock_wait: {
    category: 'locks',
    label: 'Lock wait',
    fields: ['mode', 'lock', 'relation', 'wait_ms', 'holders', 'waiters'],
  },
  /** `acquired <mode> on <lock> after <n> ms`. */
  lock_acquired: {
    category: 'locks',
    label: 'Lock acquired after a wait',
    fields: ['mode', 'lock', 'relation', 'wait_ms'],
  },
  /** `deadlock detected`: the processes, what each waited for, and their statements. */
  deadlock: { category: 'locks', label: 'Deadlock', fields: ['pids', 'waits', 'statements'] },
  /** canceling statement due to statement timeout / user request / lock timeout / conflict with recovery. */
  statement_cancelled: { category: 'queries', label: 'Statement cancelled', fields: ['reason'] },
  /** `duration: N ms` (log_min_duration_statement / log_duration). */
  slow_statement: { category: 'queries', label: 'Slow statement', fields: ['duration_ms'] },
  /** `temporary file: path ..., size N` (log_temp_files). */
  temp_file: { category: 'queries', label: 'Temporary file', fields: ['size_bytes', 'path'] },
  /** `checkpoint complete` (with the reason from its `checkpoint starting` line when read). */
  checkpoint: {
    category: 'checkpoints',
    label: 'Checkpoint',
    fields: [
      'reason',
      'restartpoint',
      'buffers_written',
      'write_ms',
      'sync_ms',
      'total_ms',
      'distance_bytes',
      'estimate_bytes',
      'wal_added',
      'wal_removed',
      'wal_recycled',
    ],
  },
  /** `checkpoints are occurring too frequently (N seconds apart)`. */
  checkpoints_too_frequent: { category: 'checkpoints', label: 'Checkpoints too frequent', fields: ['seconds_apart'] },
  /** `automatic vacuum of table ...`. */
  autovacuum: {
    category: 'vacuum',
    label: 'Autovacuum',
    fields: [
      'table',
      'aggressive',
      'elapsed_ms',
      'pages_removed',
      'pages_remaining',
      'tuples_removed',
      'tuples_remaining',
      'tuples_not_removable',
      'removable_cutoff',
      'buffer_hits',
      'buffer_misses',
      'buffer_dirtied',
      'wal_bytes',
      'index_scans',
    ],
  },
  /** `automatic analyze of table ...`. */
  autoanalyze: { category: 'vacuum', label: 'Autoanalyze', fields: ['table', 'elapsed_ms'] },
  /** `canceling autovacuum task` (with the table from its CONTEXT line, and the blocking pid when logged). */
  autovacuum_cancelled: { category: 'vacuum', label: 'Autovacuum cancelled', fields: ['table', 'blocker_pid'] },
  /** out of memory (ERROR 53200 or the postmaster's "out of memory"). */
  out_of_memory: { category: 'resources', label: 'Out of memory', fields: [] },
  /** could not fork new process / autovacuum worker / background process. */
  could_not_fork: { category: 'resources', label: 'Could not fork', fields: [] },
  /** No space left on device (SQLSTATE 53100 or ENOSPC in the message). */
  disk_full: { category: 'resources', label: 'Disk full', fields: ['path'] },
  /** could not write / fsync / extend / read a file (a storage fault). */
  io_error: { category: 'resources', label: 'I/O error', fields: ['operation', 'path'] },
  /** `archive command failed with exit code N` (and the command's WAL file from its DETAIL). */
  archive_failed: { category: 'archive', label: 'Archive command failed', fields: ['exit_code', 'wal_file'] },
  /**
   * `archiving write-ahead log file "…" failed too many times, will try again later`: the archiver pauses
   * after three failed tries of a file. Not a failure of its own (pg_stat_archiver counts the tries, which
   * are archive_failed), but it names the WAL file when the command's line cannot.
   */
  archive_gave_up: { category: 'archive', label: 'Archiver paused after failures', fields: ['wal_file'] },
  /** requested WAL segment has already been removed, walsender/walreceiver terminated, replication slot errors. */
  replication_error: { category: 'replication', label: 'Replication error', fields: ['wal_file', 'slot'] },
  /** database system is ready to accept connections. */
  server_start: { category: 'server', label: 'Server started', fields: ['version'] },
  /** received smart/fast/immediate shutdown request, database system is shut down. */
  server_shutdown: { category: 'server', label: 'Server shut down', fields: ['mode'] },
  /** a server process was terminated by a signal / exited abnormally; ClickHouse: system.crash_log. */
  server_crash: {
    category: 'server',
    label: 'Server crash',
    fields: ['signal', 'exit_code', 'process', 'version', 'trace'],
  },
  /** database system was not properly shut down; automatic recovery in progress / redo done. */
  recovery: { category: 'server', label: 'Crash recovery', fields: ['phase', 'redo_ms'] },
  /** Anything else, counted by severity; `own: true` marks an entry of the agent's own session (PostgreSQL). */
  other: { category: 'other', label: 'Other', fields: ['own'] },
} as const satisfies Record<string, { category: LogCategory; label: string; fields: readonly string[] }>

export type LogKind = keyof typeof LOG_KINDS
export const LOG_KIND_NAMES = Object.keys(LOG_KINDS) as LogKind[]

/**
 * Severities, lowest first, as PostgreSQL names them (lower case); ClickHouse's text_log levels map onto
 * them (Fatal and Critical: fatal, Error: error, Warning: warning, Notice and Information: info,
 * Debug and Trace: debug). LOG ranks as routine information here, below NOTICE, as in
 * client_min_messages, not above ERROR as in log_min_messages: "warnings and worse" means problems, not
 * every checkpoint and autovacuum run.
 */
export const LOG_SEVERITIES = ['debug', 'info', 'log', 'notice', 'warning', 'error', 'fatal', 'panic'] as const
export type LogSeverity = (typeof LOG_SEVERITIES)[number]

/**
 * Kinds that are a problem whatever level PostgreSQL logs them at, and the least severity they count as
 * (their importance): `archive command failed`, a backend killed by a signal, `could not fork` and the
 * start of crash recovery are logged at LOG, and "checkpoints are occurring too frequently" too. The
 * severity filters of the log-events API and the Logs page use an entry's importance, the higher of the
 * severity it was logged at and its kind's one here; the entry keeps the severity it was logged at.
 */
export const LOG_KIND_IMPORTANCE: Partial<Record<LogKind, LogSeverity>> = {
  archive_failed: 'error',
  archive_gave_up: 'warning',
  server_crash: 'error',
  could_not_fork: 'error',
  out_of_memory: 'error',
  disk_full: 'error',
  recovery: 'warning',
  checkpoints_too_frequent: 'warning',
}

/** An entry's importance: the severity it was logged at, raised to its kind's (LOG_KIND_IMPORTANCE). */
export function importanceOf(kind: string, severity: string): string {
  const floor = (LOG_KIND_IMPORTANCE as Record<string, LogSeverity | undefined>)[kind]
  if (floor === undefined) return severity
  const rank = (s: string) => (LOG_SEVERITIES as readonly string[]).indexOf(s)
  return rank(severity) >= rank(floor) ? severity : floor
}

/** The kinds whose own importance is one of `severities`: they match a severity filter at any logged level. */
export function kindsRaisedTo(severities: readonly string[]): LogKind[] {
  return (Object.entries(LOG_KIND_IMPORTANCE) as [LogKind, LogSeverity][])
    .filter(([, s]) => severities.includes(s))
    .map(([k]) => k)
}

/** Kinds that also appear in the database's events timeline. */
export const TIMELINE_LOG_KINDS: readonly LogKind[] = [
  'server_crash',
  'out_of_memory',
  'disk_full',
  'archive_failed',
  'recovery',
  'could_not_fork',
]

/** What the agent keeps of statement texts and parameter values in log entries (agent config `log_text`). */
export const LOG_TEXT_MODES = ['redacted', 'full', 'none'] as const
export type LogTextMode = (typeof LOG_TEXT_MODES)[number]
