// log_events: PostgreSQL's server log, read every cycle from where the last sent batch stopped, each
// entry classified (src/agent/logs/classify.ts) and counted per minute, kind and severity; the entries
// themselves up to MAX_ENTRIES (BACKLOG_MAX_ENTRIES while a backlog is read) and about MAX_ENTRY_BYTES of
// JSON per batch, the most severe first, the rest counted in `dropped`; the count rows stop at what one
// batch may carry (the read stops before the entry that would need one more, and the next cycle starts
// with it). Sources: the files in pg_log_dir when set (the agent beside the server), otherwise
// pg_ls_logdir() and pg_read_binary_file() over SQL when the role may call them. Format: the server's
// log_destination (jsonlog, else csvlog, else stderr parsed by its own log_line_prefix).
// When no source works the collector says why in a note, once, and sends nothing.
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import {
  type LogKind,
  LOG_KIND_NAMES,
  type LogSeverity,
  LOG_SEVERITIES,
  type LogTextMode,
} from '../../../shared/log-kinds.ts'
import type { LogCount, LogEvent, LogEventsSection } from '../../../shared/wire.ts'
import { type ClassifyMemory, type Classified, classify } from '../../logs/classify.ts'
import { detached, type RawLogEntry } from '../../logs/entry.ts'
import { toLogEvent } from '../../logs/event.ts'
import { logEventProblem } from '../../logs/wire-check.ts'
import type { LogFormat } from '../../logs/parse.ts'
import { buildPrefixParser, type PrefixParser } from '../../logs/prefix.ts'
import { DEFAULT_BUDGET_BYTES, type LogPosition, readLogs } from '../../logs/reader.ts'
import { fileSource, type LogSource, sqlSource } from '../../logs/source.ts'
import type postgres from 'postgres'
import type { DatabaseConfig } from '../../config.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'

export const NAME = 'log_events'
/** Entries sent whole per batch, and about how many bytes of JSON they may take. */
export const MAX_ENTRIES = 1_000
/**
 * While a backlog is read (more than BACKLOG_BYTES waiting when a cycle starts), the entries sent whole per
 * batch: every entry kept to send costs a copy and its masking, and with 1,000 of them the agent's memory
 * rose past its budget (bench/log-events-rss.ts). The counts and the position stay exact; the rest is in
 * `dropped`, and the agent logs once per backlog that it sends fewer.
 */
export const BACKLOG_MAX_ENTRIES = 200
/** More than this waiting when a cycle starts is a backlog. */
export const BACKLOG_BYTES = 1024 * 1024
export const MAX_ENTRY_BYTES = 4 * 1024 * 1024
const POSITION_KEY = 'log_events:position'
/** Set while a backlog is read: its start was logged. */
const BACKLOG_KEY = 'log_events:backlog'
const MEMORY_KEY = 'log_events:checkpoint_reason'

// From pg_settings, which leaves out what the role may not see (log_directory needs pg_read_all_settings,
// which pg_monitor has): a missing value is null rather than an error.
const SETTINGS_SQL = `
  SELECT max(setting) FILTER (WHERE name = 'logging_collector') AS logging_collector,
         max(setting) FILTER (WHERE name = 'log_destination') AS log_destination,
         max(setting) FILTER (WHERE name = 'log_line_prefix') AS log_line_prefix,
         max(setting) FILTER (WHERE name = 'log_directory') AS log_directory,
         max(setting) FILTER (WHERE name = 'lc_messages') AS lc_messages,
         max(setting) FILTER (WHERE name = 'log_lock_waits') AS log_lock_waits,
         max(setting) FILTER (WHERE name = 'log_checkpoints') AS log_checkpoints,
         max(setting) FILTER (WHERE name = 'log_autovacuum_min_duration') AS log_autovacuum_min_duration,
         max(setting) FILTER (WHERE name = 'log_temp_files') AS log_temp_files,
         max(setting) FILTER (WHERE name = 'log_min_duration_statement') AS log_min_duration_statement,
         (extract(epoch FROM (now() AT TIME ZONE current_setting('log_timezone')) - (now() AT TIME ZONE 'UTC')) * 1000)::float8 AS tz_offset_ms
  FROM pg_settings
  WHERE name IN ('logging_collector', 'log_destination', 'log_line_prefix', 'log_directory', 'lc_messages', 'log_lock_waits', 'log_checkpoints',
                 'log_autovacuum_min_duration', 'log_temp_files', 'log_min_duration_statement')`

export interface LogSettings {
  logging_collector: string
  log_destination: string
  log_line_prefix: string
  /** Null when the role may not see it (no pg_read_all_settings). */
  log_directory: string | null
  lc_messages: string
  tz_offset_ms: number
  /** The settings that make PostgreSQL log what the kinds need (null when the role may not see one). */
  log_lock_waits?: string | null
  log_checkpoints?: string | null
  log_autovacuum_min_duration?: string | null
  log_temp_files?: string | null
  log_min_duration_statement?: string | null
}

/** The logging settings the kinds need: when each is off, and the value to set (one pasteable list). */
const KIND_SETTINGS: { name: keyof LogSettings; off: (v: string) => boolean; recommended: string; kinds: string }[] = [
  { name: 'log_lock_waits', off: (v) => v === 'off', recommended: 'on', kinds: 'lock_wait' },
  { name: 'log_checkpoints', off: (v) => v === 'off', recommended: 'on', kinds: 'checkpoint' },
  { name: 'log_autovacuum_min_duration', off: (v) => v === '-1', recommended: "'10s'", kinds: 'autovacuum' },
  { name: 'log_temp_files', off: (v) => v === '-1', recommended: "'10MB'", kinds: 'temp_file' },
  { name: 'log_min_duration_statement', off: (v) => v === '-1', recommended: "'1s'", kinds: 'slow_statement' },
]

/** The prefix `--check` recommends for stderr: everything the parser reads, and --check is silent on it. */
export const RECOMMENDED_PREFIX = '%m [%p] %q%u@%d %r %e %Q '

/** A role's name as an SQL identifier ("" for a quote inside). */
const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`

/** Why the log is not read over SQL, and the GRANTs for this role (pg_monitor only when it lacks it). */
export function grantsNote(role: string, hasMonitor: boolean): string {
  const r = quoteIdent(role)
  return (
    'server log not read: set pg_log_dir in the agent config when the agent runs beside the server, or let the role read the log over SQL: ' +
    `${hasMonitor ? '' : `GRANT pg_monitor TO ${r}; `}GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint, boolean) TO ${r};`
  )
}

/** The role the agent connects as, and whether it has pg_monitor (for the GRANTs note). */
export async function roleOf(sql: PostgresContext['sql']): Promise<{ role: string; hasMonitor: boolean }> {
  const [row] = await sql<
    { role: string; monitor: boolean }[]
  >`SELECT current_user::text AS role, pg_has_role('pg_monitor', 'MEMBER') AS monitor`
  return { role: row?.role ?? 'current_user', hasMonitor: row?.monitor === true }
}

export async function logSettings(ctx: Pick<PostgresContext, 'sql'>): Promise<LogSettings> {
  const [row] = await ctx.sql.unsafe<LogSettings[]>(SETTINGS_SQL)
  return {
    logging_collector: row?.logging_collector ?? 'off',
    log_destination: row?.log_destination ?? 'stderr',
    log_line_prefix: row?.log_line_prefix ?? '',
    log_directory: row?.log_directory ?? null,
    lc_messages: row?.lc_messages ?? '',
    tz_offset_ms: Number(row?.tz_offset_ms ?? 0),
    log_lock_waits: row?.log_lock_waits ?? null,
    log_checkpoints: row?.log_checkpoints ?? null,
    log_autovacuum_min_duration: row?.log_autovacuum_min_duration ?? null,
    log_temp_files: row?.log_temp_files ?? null,
    log_min_duration_statement: row?.log_min_duration_statement ?? null,
  }
}

/** The format the reader takes: the one structured format the server writes, else stderr; undefined when it writes no file. */
export function formatOf(settings: LogSettings): LogFormat | undefined {
  const destinations = settings.log_destination.toLowerCase().split(/[\s,]+/)
  if (destinations.includes('jsonlog')) return 'jsonlog'
  if (destinations.includes('csvlog')) return 'csvlog'
  if (destinations.includes('stderr')) return 'stderr'
  return undefined
}

/** The formats the server does not write now: files of theirs left from before a switch are read to their end. */
export function finishedFormats(settings: LogSettings): LogFormat[] {
  const destinations = settings.log_destination.toLowerCase().split(/[\s,]+/)
  return (['stderr', 'csvlog', 'jsonlog'] as const).filter((f) => !destinations.includes(f))
}

/** What keeps the server's log settings from being read well, for notes and `--check` (empty: nothing). */
export function settingsProblems(settings: LogSettings, filesGiven: boolean): string[] {
  const out: string[] = []
  const format = formatOf(settings)
  if (!format)
    out.push(
      `log_destination is '${settings.log_destination}': add stderr, csvlog or jsonlog (ALTER SYSTEM SET log_destination = 'csvlog'; logging_collector on)`,
    )
  else if (settings.logging_collector !== 'on' && !filesGiven)
    out.push(
      'logging_collector is off: the server writes no log files to read (ALTER SYSTEM SET logging_collector = on; restart)',
    )
  if (!/^(C|POSIX|en([_.].*)?)?$/i.test(settings.lc_messages))
    out.push(
      `lc_messages is '${settings.lc_messages}': messages are classified in English only (set lc_messages = 'C')`,
    )
  if (format === 'stderr') {
    const lacks = buildPrefixParser(settings.log_line_prefix).lacks
    if (lacks.length > 0) {
      out.push(
        `log_line_prefix '${settings.log_line_prefix}' lacks ${lacks.join('; ')} (set '${RECOMMENDED_PREFIX}': %e adds the SQLSTATE, %Q the query id; ` +
          'or use csvlog or jsonlog, which carry both and are the safe formats where untrusted clients can connect: a user or database name with a newline cannot forge a line there)',
      )
    }
  }
  return out
}

/** The logging settings the kinds need that are off, with a pasteable fix; null when all are on. */
export function settingsAdvice(settings: LogSettings): string | null {
  const off = KIND_SETTINGS.filter((s) => {
    const v = settings[s.name]
    return typeof v === 'string' && s.off(v)
  })
  if (off.length === 0) return null
  const names = off.map((s) => `${s.name} (${s.kinds})`).join(', ')
  const fix = off.map((s) => `ALTER SYSTEM SET ${s.name} = ${s.recommended};`).join(' ')
  return `logging settings off, their kinds never appear: ${names}; to turn them on: ${fix} SELECT pg_reload_conf();`
}

const rank = (s: LogSeverity) => LOG_SEVERITIES.indexOf(s)
const KIND_INDEX = new Map<string, number>(LOG_KIND_NAMES.map((k, i) => [k, i]))
const SEVERITY_INDEX = new Map<string, number>(LOG_SEVERITIES.map((s, i) => [s, i]))

interface Candidate {
  entry: RawLogEntry
  classified: Classified
  order: number
}

/** More important first: severity, then a classified kind before `other`, then the order read. */
function compare(a: Candidate, b: Candidate): number {
  return compareTo(a.classified, a.order, b)
}

/** compare() of an entry not made a Candidate (yet). */
function compareTo(a: Classified, order: number, b: Candidate): number {
  return (
    rank(b.classified.severity) - rank(a.severity) ||
    Number(a.kind === 'other') - Number(b.classified.kind === 'other') ||
    order - b.order
  )
}

/**
 * Classifies and counts entries; keeps the most important MAX_ENTRIES for sending. The count rows are
 * capped at what one batch may carry (ingestMaxItems.log_counts): an entry that would need one more row is
 * refused (`add` answers false, nothing of it counted) and the reader stops before it, to go on next cycle.
 */
export class LogTally {
  /** One row per minute, kind and severity, under a numeric key (no string built per entry). */
  private readonly counts = new Map<number, LogCount>()
  private candidates: Candidate[] = []
  private seen = 0
  private maxEntries: number
  /** An entry was refused: the count rows are full. */
  refused = false
  readonly memory: ClassifyMemory

  constructor(
    private readonly now: number,
    private readonly prefixHasUser: boolean,
    checkpointReason?: string,
    maxEntries = MAX_ENTRIES,
    private readonly maxCounts: number = ingestMaxItems.log_counts,
  ) {
    this.memory = { checkpointReason }
    this.maxEntries = maxEntries
  }

  /** Keeps at most `n` entries to send from now on (before the first entry: a backlog is read). */
  keepAtMost(n: number): void {
    this.maxEntries = Math.min(this.maxEntries, n)
  }

  /** Counts the entry (false: refused, the count rows are full; the entry is left for the next cycle). */
  add(entry: RawLogEntry): boolean {
    const reasonBefore = this.memory.checkpointReason
    const classified = classify(entry, this.memory, this.prefixHasUser)
    const ts = entry.ts ?? this.now
    const minute = Math.max(0, Math.floor(ts / 60_000) * 60_000)
    const key =
      (minute / 60_000) * 4096 + KIND_INDEX.get(classified.kind)! * 16 + SEVERITY_INDEX.get(classified.severity)!
    const count = this.counts.get(key)
    if (count) count.count++
    else if (this.counts.size >= this.maxCounts) {
      // Read again next cycle: the classifier's memory goes back to before it.
      this.memory.checkpointReason = reasonBefore
      this.refused = true
      return false
    } else this.counts.set(key, { minute, kind: classified.kind as LogKind, severity: classified.severity, count: 1 })
    if (this.memory.checkpointReason !== reasonBefore && this.memory.checkpointReason !== undefined)
      this.memory.checkpointReason = detached(this.memory.checkpointReason)
    const order = this.seen++
    // Once the list is full, an entry no more important than the least one kept is only counted.
    if (this.worst && compareTo(classified, order, this.worst) >= 0) return true
    // Kept past this slice: copied, so that it does not hold the slice's text in memory.
    this.candidates.push({ ...detached({ entry, classified }), order })
    if (this.candidates.length >= this.maxEntries * 2) this.trim()
    return true
  }

  private worst: Candidate | undefined

  private trim(): void {
    this.candidates.sort(compare)
    if (this.candidates.length >= this.maxEntries) {
      this.candidates.length = this.maxEntries
      this.worst = this.candidates[this.maxEntries - 1]
    }
  }

  get total(): number {
    return this.seen
  }

  /**
   * The entries to send (oldest first) and how many were left out; `invalid`: how many of those the wire
   * would have refused (logEventProblem), and the first one's problem.
   */
  events(mode: LogTextMode): { entries: LogEvent[]; dropped: number; invalid: number; problem?: string } {
    this.trim()
    const entries: LogEvent[] = []
    let bytes = 0
    let invalid = 0
    let problem: string | undefined
    for (const c of this.candidates) {
      const event = toLogEvent(c.entry, c.classified, mode, this.now)
      const wrong = logEventProblem(event)
      if (wrong !== null) {
        invalid++
        problem ??= `${c.classified.kind}: ${wrong}`
        continue
      }
      const size = JSON.stringify(event).length
      if (bytes + size > MAX_ENTRY_BYTES) continue
      bytes += size
      entries.push(event)
    }
    entries.sort((a, b) => a.ts - b.ts)
    return { entries, dropped: this.seen - entries.length, invalid, problem }
  }

  countRows(): LogCount[] {
    return [...this.counts.values()].sort((a, b) => a.minute - b.minute)
  }
}

async function sourceFor(ctx: PostgresContext, settings: LogSettings): Promise<LogSource | undefined> {
  if (ctx.pgLogDir) return fileSource(ctx.pgLogDir)
  if (settings.log_directory === null) return undefined
  const source = sqlSource(ctx.sql, settings.log_directory)
  try {
    await source.list()
    return source
  } catch (e) {
    if ((e as { code?: string }).code === '42501') return undefined
    throw e
  }
}

export const logEvents = registerCollector<PostgresContext>({
  name: NAME,
  engine: 'postgres',
  defaultEnabled: true,
  checkNotes: ({ sql, db }) => logNotes(sql, db),
  async collect(ctx) {
    const settings = await logSettings(ctx)
    const format = formatOf(settings)
    const problems = settingsProblems(settings, ctx.pgLogDir !== undefined)
    if (!format || (settings.logging_collector !== 'on' && !ctx.pgLogDir)) {
      ctx.notes.set(NAME, `server log not read: ${problems[0]}`)
      return {}
    }
    const source = await sourceFor(ctx, settings)
    if (!source) {
      const { role, hasMonitor } = await roleOf(ctx.sql)
      ctx.notes.set(NAME, grantsNote(role, hasMonitor))
      return {}
    }
    if (problems.length > 0) ctx.notes.set(NAME, problems.join('; '))
    else ctx.notes.delete(NAME)
    const finished = finishedFormats(settings)
    // Built for stderr, and for the tail of a stderr file left from before a switch to csvlog or jsonlog.
    const prefix: PrefixParser | undefined =
      format === 'stderr' || finished.includes('stderr') ? buildPrefixParser(settings.log_line_prefix) : undefined
    const prefixHasUser =
      format !== 'stderr' || !prefix || prefix.fields.includes('user') || prefix.fields.includes('database')
    const tally = new LogTally(ctx.now, prefixHasUser, ctx.state.get(MEMORY_KEY) as string | undefined)
    const previous = ctx.state.get(POSITION_KEY) as LogPosition | undefined
    let backlog = false
    const result = await readLogs(
      source,
      previous,
      {
        format,
        finishedFormats: finished,
        prefix,
        tzOffsetMs: settings.tz_offset_ms,
        now: Date.now(),
        budgetBytes: ctx.logReadBudgetBytes ?? DEFAULT_BUDGET_BYTES,
        onPending: (bytes) => {
          backlog = bytes > BACKLOG_BYTES
          if (backlog) tally.keepAtMost(BACKLOG_MAX_ENTRIES)
          if (backlog && !ctx.state.has(BACKLOG_KEY))
            ctx.log.info(
              `reading a backlog of the server log: at most ${BACKLOG_MAX_ENTRIES} entries per batch are sent whole until it is read, the others counted (dropped)`,
              { database: ctx.name, backlog_bytes: bytes },
            )
        },
      },
      (entry) => tally.add(entry),
    )
    // New objects, never the ones read: the state keeps them only once the batch is kept.
    ctx.state.set(POSITION_KEY, result.position)
    if (backlog) ctx.state.set(BACKLOG_KEY, true)
    else ctx.state.delete(BACKLOG_KEY)
    if (tally.memory.checkpointReason !== undefined) ctx.state.set(MEMORY_KEY, tally.memory.checkpointReason)
    else ctx.state.delete(MEMORY_KEY)
    if (tally.refused)
      ctx.log.info('log read stopped at the per-batch cap of count rows; the rest is read next cycle', {
        database: ctx.name,
        backlog_bytes: result.backlogBytes,
      })
    const { entries, dropped, invalid, problem } = tally.events(ctx.logText ?? 'redacted')
    if (invalid > 0)
      ctx.log.warn('log entries the server would refuse were left out (counted in dropped)', {
        database: ctx.name,
        invalid,
        first: problem,
      })
    if (dropped > 0 && !backlog && entries.length >= MAX_ENTRIES)
      ctx.log.info('log entries counted but not sent whole (past the per-batch cap)', { database: ctx.name, dropped })
    const section: LogEventsSection = {
      source: source.kind,
      entries,
      counts: tally.countRows(),
      dropped,
      bytes_read: result.bytesRead,
      backlog_bytes: result.backlogBytes,
    }
    return { log_events: section }
  },
})

/** What keeps log_events from reading the server log well: settings, log_line_prefix, the role's rights. */
async function logNotes(sql: postgres.Sql, db: DatabaseConfig): Promise<string[]> {
  const settings = await logSettings({ sql })
  const notes = settingsProblems(settings, db.pgLogDir !== undefined).map((p) => `log_events: ${p}`)
  // No log files at all: that is the one thing to fix first.
  if (!formatOf(settings) || (settings.logging_collector !== 'on' && !db.pgLogDir)) return notes.slice(0, 1)
  if (!db.pgLogDir) {
    const [row] = await sql<{ may: boolean }[]>`
      SELECT has_function_privilege('pg_ls_logdir()', 'EXECUTE')
         AND has_function_privilege('pg_read_binary_file(text, bigint, bigint, boolean)', 'EXECUTE')
         AND ${settings.log_directory !== null} AS may`
    if (!row?.may) {
      const { role, hasMonitor } = await roleOf(sql)
      notes.push(`log_events: ${grantsNote(role, hasMonitor)}`)
    }
  }
  const advice = settingsAdvice(settings)
  if (advice) notes.push(`log_events: ${advice}`)
  return notes
}
