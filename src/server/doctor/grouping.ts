// One cause, one issue: the doctor's findings grouped by what causes them. A finding's cause is read from
// the finding alone (so a cause's key stays the same whichever of its findings come and go, and its alert
// neither resolves nor reopens when a consequence joins): a session (`pid 3161`) idle in a transaction,
// running long, blocking others or holding back the xmin horizon, the dead rows, bloat and wraparound it
// keeps VACUUM from curing, and an index build that waits for it; another holder of the horizon (a
// replication slot, a prepared transaction); a missing (or invalid) index, named by its table and leading
// column, that the sequential scans, the slow statement, the unindexed foreign key and the invalid index
// point at; a statement (its regression, its plan change, its slowness, and the temporary files when the
// finding names it as the one that wrote most of them); a table. Any other finding is its own cause. One
// exception to "the finding alone": the temporary files that name a statement go where that statement's
// slow finding went (to the index its plan asks for, when it asks for one), so that the memory for that
// statement is one issue's fix. The cause's own finding leads, the others are its consequences, and a fix
// that cures several of them is offered once (the same command, a second CREATE INDEX for the same column,
// a second termination of the same pid, a second memory setting for the same statement). Names in keys
// are quoted part by part as pgIdent quotes them, so no two tables' keys read alike.
import type { Static } from '@sinclair/typebox'
import type { CauseKind as CauseKindSchema, FindingGroup as FindingGroupSchema } from '../../shared/api/doctor.ts'
import { SEVERITY_ORDER } from './score.ts'
import { pgIdent } from './sql-text.ts'
import type { Finding, Severity } from './types.ts'

export type CauseKind = Static<typeof CauseKindSchema>

/**
 * One cause and its findings: the API's FindingGroup (src/shared/api/doctor.ts), but for
 * `how_to_fix_locked`, which the view adds. Its key names each object as pgIdent quotes it
 * (`index:"Shop".orders("customerId")`).
 */
export type FindingGroup = Omit<Static<typeof FindingGroupSchema>, 'how_to_fix_locked'>

/** Rules whose finding is about the session its object names (`pid N`). */
const SESSION_RULES = new Set([
  'pg_idle_in_transaction',
  'pg_long_running_queries',
  'pg_blocked_sessions',
  'pg_xmin_horizon',
])
/** Rules whose finding names, beside its own object, the holder of the xmin horizon that keeps VACUUM from curing it. */
const HELD_RULES = new Set(['pg_dead_tuples', 'pg_bloat', 'pg_wraparound', 'pg_xmin_horizon'])
/** Rules whose finding is about one table (object `schema.table`). */
const TABLE_RULES = new Set([
  'pg_dead_tuples',
  'pg_bloat',
  'pg_autovacuum_disabled',
  'pg_missing_primary_key',
  'pg_sequential_scans',
])
/** Rules whose finding is about one statement (object: its query hash). */
const STATEMENT_RULES = new Set(['pg_slow_statements', 'pg_plan_changed', 'pg_statement_regressed'])
/**
 * Database-wide findings that name, in their metric `statement`, the statement that caused most of what
 * they measured (pg_temp_files: the one that wrote at least half the window's temporary bytes): they
 * join that statement's group. Without one (many statements spill a little each) they stand alone.
 */
const NAMED_STATEMENT_RULES = new Set(['pg_temp_files'])
/** Rules whose finding may name, in its metric `blocker_pid`, the session it waits for (an index build): it joins that session's issue. */
const BLOCKED_RULES = new Set(['pg_invalid_indexes'])
/** Rules whose fix names an index to create or rebuild: they group by that index's table and leading column. */
const INDEX_RULES = new Set([
  'pg_sequential_scans',
  'pg_slow_statements',
  'pg_unindexed_foreign_keys',
  'pg_invalid_indexes',
])

/** Which finding of a group describes the cause itself, by kind: the first rule listed that is present leads. */
const LEADS: Record<CauseKind, string[]> = {
  session: ['pg_idle_in_transaction', 'pg_long_running_queries', 'pg_xmin_horizon', 'pg_blocked_sessions'],
  holder: ['pg_xmin_horizon'],
  index: ['pg_invalid_indexes', 'pg_sequential_scans', 'pg_unindexed_foreign_keys', 'pg_slow_statements'],
  // The regression leads: its mean time measured against its own before is the damage, and its finding
  // already names the plan change as what changed (when, and the plans' shapes). The plan change is
  // listed under it as the evidence of why: a cost the planner estimated, which can also grow with no
  // slowdown at all (a table that grew), so it never stands for the regression itself. The temporary
  // files the statement wrote are a consequence of its plan (a sort or hash outgrowing work_mem).
  statement: ['pg_statement_regressed', 'pg_slow_statements', 'pg_plan_changed', 'pg_temp_files'],
  table: [],
  finding: [],
}

const PID = /^pid \d+$/
const HOLDER = /^(?:slot |prepared transaction )/

/** The object a finding's key names (`pg_dead_tuples:public.t` → `public.t`); undefined for a database-wide one. */
export function findingObject(f: Pick<Finding, 'rule' | 'key'>): string | undefined {
  return f.key.startsWith(`${f.rule}:`) ? f.key.slice(f.rule.length + 1) : undefined
}

/**
 * The SQL of a fix command without its trailing `-- comment`, blanks folded: quoted strings (also E'...'
 * with backslashes) and quoted identifiers are skipped, so a `--` inside a name or a value from the
 * monitored database never ends it. A line that is only a comment gives ''.
 */
export function commandSql(command: string): string {
  let i = 0
  while (i < command.length) {
    const c = command[i]!
    if (c === "'" || c === '"') {
      const escapes = c === "'" && i > 0 && /[eE]/.test(command[i - 1]!)
      i++
      while (i < command.length) {
        if (escapes && command[i] === '\\') i += 2
        else if (command[i] === c && command[i + 1] === c) i += 2
        else if (command[i] === c) break
        else i++
      }
      i++
      continue
    }
    if (c === '-' && command[i + 1] === '-') break
    i++
  }
  return command.slice(0, i).replace(/\s+/g, ' ').trim()
}

/** A name as written in a command (`U&"t\\000A"`, `"Order"` or `orders`). */
const IDENT = String.raw`(?:U&"(?:[^"]|"")*"|"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*)`
/**
 * A name of a command as the key of a cause: quoted as pgIdent quotes it (bare only when PostgreSQL reads
 * it back unchanged), so that the parts of `x."a.b"` and `"x.a".b` stay apart once joined with dots. A
 * `U&"..."` name is pgIdent's own writing of a name with control characters: kept as it is.
 */
function keyIdent(id: string): string {
  if (id.startsWith('U&"')) return id
  return pgIdent(id.startsWith('"') ? id.slice(1, -1).replaceAll('""', '"') : id.toLowerCase())
}
const CREATE_INDEX = new RegExp(
  String.raw`^CREATE (?:UNIQUE )?INDEX (?:CONCURRENTLY )?(?:IF NOT EXISTS )?(?:${IDENT} )?ON (?:ONLY )?(${IDENT})\.(${IDENT}) (?:USING \w+ )?\((${IDENT})`,
)

/**
 * The table and leading column of a `CREATE INDEX` command (after a leading `-- or:`), as
 * `schema.table(column)` with each part quoted as pgIdent quotes it (`x."a.b"(c)`); undefined for any other.
 */
export function indexTarget(command: string): string | undefined {
  const sql = command.startsWith('-- or: ') ? command.slice('-- or: '.length) : command
  const start = sql.indexOf('CREATE ')
  if (start < 0) return undefined
  const m = CREATE_INDEX.exec(commandSql(sql.slice(start)))
  return m ? `${keyIdent(m[1]!)}.${keyIdent(m[2]!)}(${keyIdent(m[3]!)})` : undefined
}

/** The pid a `SELECT pg_terminate_backend(pid) ... WHERE pid = N` command ends; undefined for any other. */
const terminatedPid = (command: string) =>
  /^SELECT pg_terminate_backend\(pid\) FROM pg_stat_activity WHERE pid = (\d+)\b/.exec(command)?.[1]

/** A finding's cause: its key and kind, from the finding alone. */
export function causeOf(
  f: Pick<Finding, 'rule' | 'key' | 'objects' | 'how_to_fix'> & Partial<Pick<Finding, 'metrics'>>,
): { key: string; kind: CauseKind } {
  const named = f.metrics?.statement
  if (NAMED_STATEMENT_RULES.has(f.rule) && typeof named === 'string' && named !== '')
    return { key: `statement:${named}`, kind: 'statement' }
  const blocker = f.metrics?.blocker_pid
  if (BLOCKED_RULES.has(f.rule) && typeof blocker === 'number' && Number.isInteger(blocker) && blocker > 0)
    return { key: `session:pid ${blocker}`, kind: 'session' }
  const object = findingObject(f)
  if (object !== undefined) {
    if (HELD_RULES.has(f.rule)) {
      const holder = f.objects.find((o) => PID.test(o) || HOLDER.test(o))
      if (holder)
        return PID.test(holder)
          ? { key: `session:${holder}`, kind: 'session' }
          : { key: `holder:${holder}`, kind: 'holder' }
    }
    if (SESSION_RULES.has(f.rule) && PID.test(object)) return { key: `session:${object}`, kind: 'session' }
    if (INDEX_RULES.has(f.rule)) {
      for (const command of f.how_to_fix) {
        const target = indexTarget(command)
        if (target) return { key: `index:${target}`, kind: 'index' }
      }
    }
    if (STATEMENT_RULES.has(f.rule)) return { key: `statement:${object}`, kind: 'statement' }
    if (TABLE_RULES.has(f.rule)) return { key: `table:${object}`, kind: 'table' }
  }
  return { key: f.key, kind: 'finding' }
}

/** The memory a fix command gives one execution of a statement (work-mem.ts's memoryCommand), by its SQL: the setting, or undefined for any other command. */
function memorySetting(sql: string): string | undefined {
  if (/^BEGIN; SET LOCAL work_mem = '\d+MB'; <the statement>; COMMIT;$/.test(sql)) return 'work_mem'
  if (/^SET maintenance_work_mem = '\d+MB'; <the statement>; RESET maintenance_work_mem;$/.test(sql))
    return 'maintenance_work_mem'
  return undefined
}

/**
 * Which statement a memory fix is for: a slow statement's is for itself; pg_temp_files names it in the
 * command's comment (`-- for statement <query id> alone: ...`); undefined when it names none (the log's
 * largest spill by its text).
 */
function memoryStatement(f: Finding, command: string): string | undefined {
  if (f.rule === 'pg_slow_statements') return findingObject(f)
  if (NAMED_STATEMENT_RULES.has(f.rule)) return /--\s+for statement (-?\d+) alone:/.exec(command)?.[1]
  return undefined
}

/**
 * The fix commands of a group's findings (in order, the lead's first), each cure once. The memory for one
 * statement is one cure whatever its size: the temporary files' (sized from the statement's plans when
 * there are any) is kept over a slow statement's (from its temp bytes per call), where it stands.
 */
function groupFixes(members: Finding[]): string[] {
  const fixes: string[] = []
  const seen = new Set<string>()
  // Each statement's memory fix: the command kept, by `memory:<setting>:<statement>`.
  const memory = new Map<string, string>()
  const memoryId = (f: Finding, command: string, sql: string) => {
    const setting = memorySetting(sql)
    const statement = setting && memoryStatement(f, command)
    return statement === undefined ? undefined : `memory:${setting}:${statement}`
  }
  for (const f of [...members.filter((m) => NAMED_STATEMENT_RULES.has(m.rule)), ...members]) {
    for (const command of f.how_to_fix) {
      const id = memoryId(f, command, commandSql(command))
      if (id && !memory.has(id)) memory.set(id, command)
    }
  }
  for (const f of members) {
    for (const command of f.how_to_fix) {
      const sql = commandSql(command)
      const cure = memoryId(f, command, sql)
      if (cure !== undefined) {
        // Sizes differ between rules, and two statements may need the same size: kept by statement, not by text.
        if (memory.get(cure) !== command || seen.has(cure)) continue
        seen.add(cure)
        fixes.push(command)
        continue
      }
      // A unique index is a constraint as well as a path: recreating one does not stand for a plain index, nor one for it.
      const index = /\bCREATE UNIQUE INDEX\b/.test(command) ? undefined : indexTarget(command)
      const pid = terminatedPid(command)
      // The same statement; a second index on the same column (the lead's is kept: an invalid index's
      // rebuild, whose `-- or:` line names its definition, before a new one); a second end of the same session.
      // A memory fix that names no statement is kept whole (its comment says whose it is).
      const ids = [
        sql === '' || memorySetting(sql) ? `comment:${command}` : `sql:${sql}`,
        ...(index ? [`index:${index}`] : []),
        ...(pid ? [`pid:${pid}`] : []),
      ]
      if (ids.some((id) => seen.has(id))) continue
      for (const id of ids) seen.add(id)
      fixes.push(command)
    }
  }
  return fixes
}

/**
 * The findings (worst first, as the doctor sorts them) grouped by cause, each finding with its cause's
 * key; the groups worst first, then in the order of their first finding.
 */
export function groupFindings(findings: Omit<Finding, 'cause'>[]): { findings: Finding[]; groups: FindingGroup[] } {
  const byCause = new Map<string, { kind: CauseKind; members: Finding[] }>()
  // A slow statement goes to the index its plan asks for when there is one: the temporary files that
  // name that statement go there with it, so its memory is offered in one issue, not in two.
  const slowCause = new Map<string, { key: string; kind: CauseKind }>()
  for (const f of findings) {
    const object = f.rule === 'pg_slow_statements' ? findingObject(f) : undefined
    if (object !== undefined) slowCause.set(`statement:${object}`, causeOf(f))
  }
  const withCause = findings.map((draft) => {
    const own = causeOf(draft)
    const cause = NAMED_STATEMENT_RULES.has(draft.rule) ? (slowCause.get(own.key) ?? own) : own
    const f: Finding = { ...draft, cause: cause.key }
    const group = byCause.get(cause.key) ?? { kind: cause.kind, members: [] }
    group.members.push(f)
    byCause.set(cause.key, group)
    return f
  })
  const groups: FindingGroup[] = []
  for (const [key, { kind, members }] of byCause) {
    const leads = LEADS[kind]
    const rank = (f: Finding) => {
      const i = leads.indexOf(f.rule)
      return i < 0 ? leads.length : i
    }
    // The lead, then the rest as they came (worst first); sort is stable.
    const ordered = [...members].sort((a, b) => rank(a) - rank(b)).slice(0, 1)
    ordered.push(...members.filter((f) => f !== ordered[0]))
    const lead = ordered[0]!
    const severity = members.reduce<Severity>(
      (worst, f) => (SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[worst] ? f.severity : worst),
      'info',
    )
    groups.push({
      key,
      kind,
      severity,
      title: lead.title,
      lead: lead.key,
      findings: ordered.map((f) => f.key),
      objects: [...new Set(ordered.flatMap((f) => f.objects))],
      how_to_fix: groupFixes(ordered),
    })
  }
  const first = new Map(groups.map((g, i) => [g.key, i]))
  groups.sort(
    (a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity] || first.get(a.key)! - first.get(b.key)!,
  )
  return { findings: withCause, groups }
}
