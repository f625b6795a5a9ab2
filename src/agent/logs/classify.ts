// Classifies one log entry by PostgreSQL's own message texts (lc_messages = C; 13 to 18) into a kind of
// src/shared/log-kinds.ts with that kind's fields, and gives its fingerprint (the message with numbers,
// quoted literals and names replaced). Anything not recognised is `error` (ERROR and worse) or `other`.
//
// Forging: a database user can write any message through RAISE, ASSERT or a function of theirs, so
// - an entry whose CONTEXT shows a PL function (PL/pgSQL, PL/Python, PL/Perl, PL/Tcl, SQL) is
//   user-raised: `error` or `other` only, whatever its text or SQLSTATE (RAISE ... USING ERRCODE forges one);
// - the resource kinds (disk_full, out_of_memory, could_not_fork, io_error) come from their SQLSTATE when
//   the log gives one, else only from a message that starts with PostgreSQL's own wording;
// - the kinds only server processes log (checkpoints, autovacuum, archiver, start and shutdown, crashes,
//   recovery) are taken only from entries whose backend type says so (csvlog, jsonlog, %b) or, when the
//   log does not give it, that carry no user or database (client sessions always have both) and whose
//   pid did not log a client's entry before;
// - a line PostgreSQL did not format (stderr without its prefix, or a prefix broken by a newline in a
//   user or database name whose label never came) is never classified by its text;
// - numbers beyond the wire's bounds (2^53) are null, never a batch the server refuses;
// - the agent's own sessions (its marker in the statement, its application_name) are `other` with `own`.
// - the pid, user and database come from the log line's prefix or record, never from the message.
import type { LogKind, LogSeverity } from '../../shared/log-kinds.ts'
import type { RawLogEntry } from './entry.ts'
import { OWN_MARKER } from './own-marker.ts'
import { detached, severityOf } from './entry.ts'

export type FieldValue = number | boolean | null | string | (number | string)[]

export interface Classified {
  kind: LogKind
  severity: LogSeverity
  fields: Record<string, FieldValue>
}

/** What one pass over a log remembers between entries: the reason of the last `checkpoint starting`, who cancelled an autovacuum. */
export interface ClassifyMemory {
  checkpointReason?: string
  version?: string
  /** autovacuum pid → pid of the process that sent it the cancel. */
  cancelledBy?: Map<number, number>
  /** Pids that logged an entry of a client session (a user or database) in this pass. */
  clientPids?: Set<number>
  /** The pid added last to clientPids (consecutive entries of one session add it once). */
  lastClientPid?: number
}

/** Most pids remembered as clients' in one pass (then it starts over). */
const CLIENT_PIDS = 4_096

/** A number the wire takes (an integer or not, within ±2^53), else null. */
export function safeNumber(n: number): number | null {
  return Number.isFinite(n) && Math.abs(n) <= Number.MAX_SAFE_INTEGER ? n : null
}
const num = (s: string | undefined): number | null => (s === undefined ? null : safeNumber(Number(s)))
const ms = (seconds: string | undefined): number | null =>
  seconds === undefined ? null : safeNumber(Math.round(Number(seconds) * 1000))

/** Server processes' kinds, with the backend types that log them. */
const SERVER_KINDS: Partial<Record<LogKind, readonly string[]>> = {
  checkpoint: ['checkpointer'],
  checkpoints_too_frequent: ['checkpointer'],
  autovacuum: ['autovacuum worker'],
  autoanalyze: ['autovacuum worker'],
  autovacuum_cancelled: ['autovacuum worker'],
  archive_failed: ['archiver'],
  server_start: ['postmaster'],
  server_shutdown: ['postmaster'],
  server_crash: ['postmaster'],
  recovery: ['startup', 'postmaster'],
  could_not_fork: ['postmaster'],
}

/** The resource kinds and the SQLSTATEs that alone give them when the log has one (besides 00000, LOG's). */
const RESOURCE_STATES: Partial<Record<LogKind, (state: string) => boolean>> = {
  disk_full: (s) => s === '53100',
  out_of_memory: (s) => s === '53200',
  could_not_fork: (s) => s === '53000' || s === '58000',
  io_error: (s) => s.startsWith('58') || s === 'XX001' || s === 'XX002',
}

function fromServerProcess(kind: LogKind, e: RawLogEntry, prefixHasUser: boolean, memory: ClassifyMemory): boolean {
  const types = SERVER_KINDS[kind]
  if (!types) return true
  if (e.backendType !== null) return types.includes(e.backendType)
  // No backend type in the log: a client session always has a user; a server process never does, and
  // its pid never logged a client's line before.
  if (e.pid !== null && memory.clientPids?.has(e.pid)) return false
  if (prefixHasUser) return e.user === null && e.database === null
  return true
}

/**
 * Raised by a user's code: the CONTEXT names a PL function or a SQL function (a RAISE, an ASSERT, plpy.error,
 * elog) anywhere. The `s` flag: a function's name may hold a newline.
 */
const USER_CODE =
  /(?:^|\n)(?:PL\/pgSQL function |PL\/Python (?:function|anonymous code block)|PL\/Perl (?:function|anonymous code block)|PL\/Tcl function |SQL function )|^Traceback \(most recent call last\)/s

export function raisedByUser(e: RawLogEntry): boolean {
  return e.context !== null && USER_CODE.test(e.context)
}

/** The agent's own session: its marker leads the statement, or its application_name. */
export function ownSession(e: RawLogEntry): boolean {
  if (e.application === 'dbm-agent' || e.application === 'dbm-agent-check') return true
  const text = e.statement ?? e.internalQuery
  if (text?.startsWith(OWN_MARKER)) return true
  // `duration: 1 ms  statement: /* dbm-agent */ ...` and `execute <name>: /* dbm-agent */ ...` (anchored: a
  // message of another shape fails at its first characters).
  return OWN_IN_MESSAGE.test(e.message)
}

const OWN_IN_MESSAGE = new RegExp(
  `^(?:duration: [\\d.]+ ms {2})?(?:statement|execute [^:\\n]{0,200}|parse [^:\\n]{0,200}|bind [^:\\n]{0,200}): ${OWN_MARKER.replace(/[*/]/g, '\\$&')}`,
)

/** A stderr message without the ` at character N` PostgreSQL appends when the error has a position (in its last 40 characters). */
function withoutPosition(msg: string): string {
  let i = msg.length
  while (i > 0 && msg.charCodeAt(i - 1) >= 48 && msg.charCodeAt(i - 1) <= 57) i--
  const at = i - AT_CHARACTER.length
  if (i === msg.length || msg.length - at > 40 || at < 0 || !msg.startsWith(AT_CHARACTER, at)) return msg
  return msg.slice(0, at)
}
const AT_CHARACTER = ' at character '

/** The first words byMessage knows, by length: the word is one of them or no string is made for it. */
const FIRST_WORDS: string[][] = []
for (const w of [
  'duration:',
  'no',
  'pg_hba.conf',
  'role',
  'sorry,',
  'remaining',
  'too',
  'process',
  'deadlock',
  'canceling',
  'terminating',
  'temporary',
  'checkpoint',
  'restartpoint',
  'checkpoints',
  'automatic',
  'sending',
  'could',
  'out',
  'archiving',
  'archive',
  'requested',
  'replication',
  'invalidating',
  'starting',
  'database',
  'received',
  'redo',
]) {
  ;(FIRST_WORDS[w.length] ??= []).push(w)
}

/** The message's first word (up to its first space) when byMessage knows it, else ''. */
function firstWord(msg: string, length: number): string {
  const words = FIRST_WORDS[length]
  if (words) for (const w of words) if (msg.startsWith(w)) return w
  return ''
}

/** The kind and fields of a message (before the forging checks): dispatched on the message's first word. */
function byMessage(
  e: RawLogEntry,
  sev: LogSeverity,
  memory: ClassifyMemory,
): { kind: LogKind; fields: Record<string, FieldValue> } | undefined {
  const msg = withoutPosition(e.message)
  const state = e.sqlstate
  let m: RegExpExecArray | null
  const isError = sev === 'error' || sev === 'fatal' || sev === 'panic'
  const space = msg.indexOf(' ')
  const word = firstWord(msg, space < 0 ? msg.length : space)
  // `<method> authentication failed for user "..."` (password, ident, peer, cert, ldap...).
  if (
    msg.startsWith(' authentication failed for user "', space) &&
    (m = /^(\w+) authentication failed for user "(.*)"$/s.exec(msg))
  ) {
    return {
      kind: 'auth_failed',
      fields: { method: m[1]!.toLowerCase(), reason: authReason(e.detail), user_name: m[2]! },
    }
  }
  // The kinds whose texts come first; a storage fault (below) outranks the kinds after them.
  switch (word) {
    case 'duration:':
      if ((m = /^duration: ([\d.]+) ms/.exec(msg)))
        return { kind: 'slow_statement', fields: { duration_ms: num(m[1]) } }
      break
    case 'no':
      if ((m = /^no pg_hba\.conf entry for (?:replication connection from )?host "([^"]*)", user "(.*?)"/s.exec(msg))) {
        return { kind: 'auth_failed', fields: { method: 'hba', reason: 'no_hba_entry', user_name: m[2]! } }
      }
      break
    case 'pg_hba.conf':
      if (/^pg_hba\.conf rejects (?:replication )?connection for host/.test(msg))
        return { kind: 'auth_failed', fields: { method: 'reject', reason: 'hba_reject' } }
      break
    case 'role':
      if (isError && (m = /^role "(.*)" does not exist$/s.exec(msg)) && state !== '42704') {
        return { kind: 'auth_failed', fields: { method: null, reason: 'no_such_role', user_name: m[1]! } }
      }
      break
    case 'sorry,':
      if (msg === 'sorry, too many clients already')
        return { kind: 'too_many_connections', fields: { limit_kind: 'max_connections' } }
      break
    case 'remaining':
      if (/^remaining connection slots are reserved/.test(msg))
        return { kind: 'too_many_connections', fields: { limit_kind: 'reserved' } }
      break
    case 'too':
      if ((m = /^too many connections for (role|database) "/.exec(msg)))
        return { kind: 'too_many_connections', fields: { limit_kind: m[1]! } }
      break
    case 'process':
      if ((m = /^process (\d+) still waiting for (\w+) on (.+) after ([\d.]+) ms$/s.exec(msg))) {
        const queue = lockQueue(e.detail)
        return {
          kind: 'lock_wait',
          fields: {
            mode: m[2]!,
            lock: m[3]!,
            relation: relationOf(m[3]!),
            wait_ms: num(m[4]),
            holders: queue.holders,
            waiters: queue.waiters,
          },
        }
      }
      if ((m = /^process (\d+) acquired (\w+) on (.+) after ([\d.]+) ms$/s.exec(msg))) {
        return {
          kind: 'lock_acquired',
          fields: { mode: m[2]!, lock: m[3]!, relation: relationOf(m[3]!), wait_ms: num(m[4]) },
        }
      }
      break
    case 'deadlock':
      if (msg === 'deadlock detected' && (state === null || state === '40P01'))
        return { kind: 'deadlock', fields: deadlockFields(e.detail) }
      break
    case 'canceling':
      if (
        (m =
          /^canceling statement due to (statement timeout|user request|lock timeout|conflict with recovery|transaction timeout)$/.exec(
            msg,
          ))
      ) {
        return { kind: 'statement_cancelled', fields: { reason: m[1]!.replaceAll(' ', '_') } }
      }
      if (msg === 'canceling autovacuum task') {
        const table = e.context
          ? (/(?:automatic (?:vacuum|analyze) of table|relation) "(.*?)"/.exec(e.context)?.[1] ?? null)
          : null
        return {
          kind: 'autovacuum_cancelled',
          fields: { table, blocker_pid: e.pid === null ? null : (memory.cancelledBy?.get(e.pid) ?? null) },
        }
      }
      break
    case 'terminating':
      if (
        (m =
          /^terminating connection due to (idle-in-transaction timeout|idle-session timeout|transaction timeout|conflict with recovery)$/.exec(
            msg,
          ))
      ) {
        return { kind: 'statement_cancelled', fields: { reason: m[1]!.replace(/[- ]/g, '_') } }
      }
      break
    case 'temporary':
      if ((m = /^temporary file: path "(.*)", size (\d+)$/s.exec(msg)))
        return { kind: 'temp_file', fields: { path: m[1]!, size_bytes: num(m[2]) } }
      break
    case 'checkpoint':
    case 'restartpoint':
      if ((m = /^(checkpoint|restartpoint) starting: (.*)$/.exec(msg))) {
        memory.checkpointReason = m[2]!
        return undefined
      }
      if ((m = /^(checkpoint|restartpoint) complete: (.*)$/s.exec(msg)))
        return { kind: 'checkpoint', fields: checkpointFields(m[2]!, m[1] === 'restartpoint', memory) }
      break
    case 'checkpoints':
      if ((m = /^checkpoints are occurring too frequently \((\d+) seconds? apart\)$/.exec(msg)))
        return { kind: 'checkpoints_too_frequent', fields: { seconds_apart: num(m[1]) } }
      break
    case 'automatic':
      if (
        (m = /^automatic (aggressive )?vacuum (?:to prevent wraparound )?of table "(.*?)": index scans: (\d+)/s.exec(
          msg,
        ))
      ) {
        return { kind: 'autovacuum', fields: vacuumFields(msg, m[2]!, !!m[1], num(m[3])) }
      }
      if ((m = /^automatic analyze of table "(.*?)"/s.exec(msg)))
        return { kind: 'autoanalyze', fields: { table: m[1]!, elapsed_ms: ms(/elapsed: ([\d.]+) s/.exec(msg)?.[1]) } }
      break
    case 'sending':
      if ((m = /^sending cancel to blocking autovacuum PID (\d+)$/.exec(msg)) && e.pid !== null) {
        memory.cancelledBy ??= new Map()
        memory.cancelledBy.set(Number(m[1]), e.pid)
        return undefined
      }
      break
  }

  // The resource kinds: by their SQLSTATE when the log gives one (00000 is LOG's, no code), else by
  // PostgreSQL's own wording at the message's start.
  const coded = state !== null && state !== '00000'
  if (
    coded
      ? RESOURCE_STATES.disk_full!(state)
      : word === 'could' && /^could not [^\n]*: No space left on device$/.test(msg)
  ) {
    return { kind: 'disk_full', fields: { path: /^could not [^"\n]*"([^"\n]+)"/.exec(msg)?.[1] ?? null } }
  }
  if (coded ? RESOURCE_STATES.out_of_memory!(state) : word === 'out' && /^out of memory\b/.test(msg))
    return { kind: 'out_of_memory', fields: {} }

  switch (word) {
    case 'could':
      if (/^could not fork\b/.test(msg) && (!coded || RESOURCE_STATES.could_not_fork!(state)))
        return { kind: 'could_not_fork', fields: {} }
      if (
        (m = /^could not (write|fsync|extend|read)(?: to)? (?:file|block \d+ (?:in|of) (?:file|relation)) "(.*?)"/.exec(
          msg,
        )) &&
        (!coded || RESOURCE_STATES.io_error!(state))
      ) {
        return { kind: 'io_error', fields: { operation: m[1]!, path: m[2]! } }
      }
      if (/^could not receive data from WAL stream/.test(msg))
        return { kind: 'replication_error', fields: { wal_file: null, slot: null } }
      break
    case 'archiving':
      // The archiver gives up on a segment for a while (after three failed tries): its WAL file is named.
      if (
        (m =
          /^archiving write-ahead log file "([0-9A-F]{24}(?:\.partial|\.[0-9A-F]{8}\.backup|\.history)?)" failed too many times, will try again later$/.exec(
            msg,
          ))
      ) {
        return { kind: 'archive_gave_up', fields: { wal_file: m[1]! } }
      }
      break
    case 'archive':
      if ((m = /^archive command (?:failed with exit code (\d+)|was terminated by signal (\d+))/.exec(msg))) {
        return {
          kind: 'archive_failed',
          fields: {
            exit_code: num(m[1]),
            wal_file: /\b([0-9A-F]{24}(?:\.partial|\.[0-9A-F]{8}\.backup)?)\b/.exec(e.detail ?? '')?.[1] ?? null,
          },
        }
      }
      break
    case 'requested':
      if ((m = /^requested WAL segment ([0-9A-F]{24}) has already been removed$/.exec(msg)))
        return { kind: 'replication_error', fields: { wal_file: m[1]!, slot: null } }
      break
    case 'replication':
      if ((m = /^replication slot "(.*)" does not exist$/.exec(msg)) && isError)
        return { kind: 'replication_error', fields: { wal_file: null, slot: m[1]! } }
      if (/^replication terminated by primary server/.test(msg))
        return { kind: 'replication_error', fields: { wal_file: null, slot: null } }
      break
    case 'invalidating':
    case 'terminating':
      if (
        (m =
          /^(?:invalidating (?:obsolete )?replication slot|terminating process \d+ to release replication slot) "(.*?)"/.exec(
            msg,
          ))
      ) {
        return { kind: 'replication_error', fields: { wal_file: null, slot: m[1]! } }
      }
      if (msg === 'terminating walsender process due to replication timeout')
        return { kind: 'replication_error', fields: { wal_file: null, slot: null } }
      break
    case 'starting':
      if ((m = /^starting PostgreSQL (\S+)/.exec(msg))) {
        memory.version = detached(m[1]!)
        return undefined
      }
      break
    case 'database':
      if (/^database system is ready to accept (?:read-only )?connections$/.test(msg))
        return { kind: 'server_start', fields: { version: memory.version ?? null } }
      if (msg === 'database system was not properly shut down; automatic recovery in progress')
        return { kind: 'recovery', fields: { phase: 'started', redo_ms: null } }
      if (/^database system was interrupted while in recovery/.test(msg))
        return { kind: 'recovery', fields: { phase: 'interrupted', redo_ms: null } }
      break
    case 'received':
      if ((m = /^received (smart|fast|immediate) shutdown request$/.exec(msg)))
        return { kind: 'server_shutdown', fields: { mode: m[1]! } }
      break
    case 'redo':
      if (/^redo done at /.test(msg))
        return { kind: 'recovery', fields: { phase: 'redo_done', redo_ms: ms(/elapsed: ([\d.]+) s/.exec(msg)?.[1]) } }
      break
  }
  // `<process> (PID n) was terminated by signal ...`: the process is named by several words.
  const pidAt = msg.indexOf(' (PID ')
  if (
    pidAt > 0 &&
    pidAt <= 200 &&
    (m =
      /^(.+?) \(PID \d+\) (?:was terminated by signal (\d+)|exited with exit code (\d+)|was terminated by exception)/.exec(
        msg,
      ))
  ) {
    const process = m[1]!
    if (!(m[3] === '1' && /^background worker/.test(process)) && !(m[3] === '0')) {
      return { kind: 'server_crash', fields: { signal: num(m[2]), exit_code: num(m[3]), process } }
    }
  }
  return undefined
}

function authReason(detail: string | null): string | null {
  if (!detail) return null
  if (/^Password does not match for user/m.test(detail)) return 'password_mismatch'
  if (/^Role ".*" does not exist\./m.test(detail)) return 'no_such_role'
  if (/^User ".*" has no password assigned\./m.test(detail)) return 'no_password'
  if (/^User ".*" has an expired password\./m.test(detail)) return 'password_expired'
  if (/^User ".*" does not have a valid SCRAM secret\./m.test(detail)) return 'no_scram_secret'
  return null
}

function relationOf(lock: string): string | null {
  return /relation (\d+) of database \d+/.exec(lock)?.[1] ?? null
}

function lockQueue(detail: string | null): { holders: number[]; waiters: number[] } {
  const pids = (s: string | undefined) =>
    (s ?? '')
      .split(/,\s*/)
      .filter((p) => /^\d{1,15}$/.test(p))
      .map(Number)
      .slice(0, 64)
  const m = detail ? /^Process(?:es)? holding the lock: ([\d, ]*)\. Wait queue: ([\d, ]*)\./m.exec(detail) : null
  return { holders: pids(m?.[1]), waiters: pids(m?.[2]) }
}

/**
 * deadlock DETAIL: `Process A waits for M on L; blocked by process B.` per process, then `Process A: <statement>`
 * per process in the same order. A statement may span lines; it ends where the next process's line starts.
 */
export function deadlockFields(detail: string | null): { pids: number[]; waits: string[]; statements: string[] } {
  const pids: number[] = []
  const waits: string[] = []
  const statements: string[] = []
  if (!detail) return { pids, waits, statements }
  const lines = detail.split('\n')
  let i = 0
  for (; i < lines.length; i++) {
    const m = /^Process (\d+) waits for (.+); blocked by process (\d+)\.$/.exec(lines[i]!)
    if (!m) break
    const pid = safeNumber(Number(m[1]))
    if (pid === null) break
    pids.push(pid)
    waits.push(m[2]!)
  }
  const rest = lines.slice(i).join('\n')
  let from = 0
  for (let k = 0; k < pids.length && k < 64; k++) {
    const head = `Process ${pids[k]}: `
    const at = rest.indexOf(head, from)
    if (at < 0) break
    const start = at + head.length
    const nextHead = k + 1 < pids.length ? `\nProcess ${pids[k + 1]}: ` : undefined
    const end = nextHead ? rest.indexOf(nextHead, start) : -1
    statements.push(rest.slice(start, end < 0 ? undefined : end))
    from = end < 0 ? rest.length : end + 1
  }
  return { pids: pids.slice(0, 64), waits: waits.slice(0, 64), statements }
}

function checkpointFields(text: string, restartpoint: boolean, memory: ClassifyMemory): Record<string, FieldValue> {
  const wal = /(\d+) WAL file\(s\) added, (\d+) removed, (\d+) recycled/.exec(text)
  const times = /write=([\d.]+) s, sync=([\d.]+) s, total=([\d.]+) s/.exec(text)
  const distance = /distance=(\d+) kB, estimate=(\d+) kB/.exec(text)
  const reason = memory.checkpointReason ?? null
  memory.checkpointReason = undefined
  return {
    reason,
    restartpoint,
    buffers_written: num(/wrote (\d+) buffers/.exec(text)?.[1]),
    write_ms: ms(times?.[1]),
    sync_ms: ms(times?.[2]),
    total_ms: ms(times?.[3]),
    distance_bytes: distance ? safeNumber(Number(distance[1]) * 1024) : null,
    estimate_bytes: distance ? safeNumber(Number(distance[2]) * 1024) : null,
    wal_added: num(wal?.[1]),
    wal_removed: num(wal?.[2]),
    wal_recycled: num(wal?.[3]),
  }
}

function vacuumFields(
  msg: string,
  table: string,
  aggressive: boolean,
  indexScans: number | null,
): Record<string, FieldValue> {
  const pages = /pages: (\d+) removed, (\d+) remain/.exec(msg)
  const tuples =
    /tuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable(?:, oldest xmin: (\d+))?/.exec(msg)
  const buffers = /buffer usage: (\d+) hits, (\d+) (?:misses|reads), (\d+) dirtied/.exec(msg)
  return {
    table,
    aggressive,
    index_scans: indexScans,
    elapsed_ms: ms(/elapsed: ([\d.]+) s/.exec(msg)?.[1]),
    pages_removed: num(pages?.[1]),
    pages_remaining: num(pages?.[2]),
    tuples_removed: num(tuples?.[1]),
    tuples_remaining: num(tuples?.[2]),
    tuples_not_removable: num(tuples?.[3]),
    removable_cutoff: num(tuples?.[4] ?? /removable cutoff: (\d+)/.exec(msg)?.[1]),
    buffer_hits: num(buffers?.[1]),
    buffer_misses: num(buffers?.[2]),
    buffer_dirtied: num(buffers?.[3]),
    wal_bytes: num(/WAL usage: \d+ records, \d+ full page images, (\d+) bytes/.exec(msg)?.[1]),
  }
}

/**
 * The entry's kind and fields. `prefixHasUser`: the stderr prefix has %u or %d (csvlog and jsonlog always
 * have them), so an entry without a user comes from a server process.
 */
export function classify(e: RawLogEntry, memory: ClassifyMemory, prefixHasUser = true): Classified {
  const severity = severityOf(e.severity)
  if (e.pid !== null && e.pid !== memory.lastClientPid && (e.user !== null || e.database !== null)) {
    memory.clientPids ??= new Set()
    if (memory.clientPids.size >= CLIENT_PIDS) memory.clientPids.clear()
    memory.clientPids.add(e.pid)
    memory.lastClientPid = e.pid
  }
  if (ownSession(e)) return { kind: 'other', severity, fields: OWN_FIELDS }
  const found = e.foreign || raisedByUser(e) ? undefined : byMessage(e, severity, memory)
  if (!found || !fromServerProcess(found.kind, e, prefixHasUser, memory)) {
    return {
      kind: severity === 'error' || severity === 'fatal' || severity === 'panic' ? 'error' : 'other',
      severity,
      fields: NO_FIELDS,
    }
  }
  return { kind: found.kind, severity, fields: found.fields }
}

/** The fields of an entry classified by severity alone (shared, never changed). */
const NO_FIELDS: Record<string, FieldValue> = Object.freeze({})
/** The fields of an entry of the agent's own session (counted apart from the application's errors). */
const OWN_FIELDS: Record<string, FieldValue> = Object.freeze({ own: true })

/** The message with quoted literals and names, numbers and hexadecimal ids replaced: what identical events share. */
export function fingerprint(message: string): string {
  const text = message.length > 2_000 ? message.slice(0, 2_000) : message
  return text
    .replace(/"(?:[^"\\]|\\.)*"/g, '"?"')
    .replace(/'(?:[^'\\]|\\.|'')*'/g, "'?'")
    .replace(/\b[0-9A-F]{24}\b/g, '?')
    .replace(/\b[0-9A-F]+\/[0-9A-F]+\b/g, '?')
    .replace(/\b\d+(?:\.\d+)?\b/g, '?')
    .replace(/\s+/g, ' ')
    .slice(0, 512)
}
