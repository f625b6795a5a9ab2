// A classified log entry made into the wire's LogEvent: every text passes the secret masking
// (maskSecretStatements, then redactSecrets for URLs and password=...) whatever log_text says; then
// log_text decides what is kept of statements and parameter values: `full` as logged, `redacted`
// (default) with literals replaced, `none` without statements, parameters or quoted row values. Texts are
// cut to the wire's caps and cleared of NULs and lone surrogates.
import { ingestTextLimits } from '../../shared/ingest-limits.ts'
import type { LogTextMode } from '../../shared/log-kinds.ts'
import { redactSecrets } from '../../shared/redact.ts'
import type { LogEvent } from '../../shared/wire.ts'
import { maskSecretStatements } from '../secret-statements.ts'
import type { Classified, FieldValue } from './classify.ts'
import { deadlockFields, fingerprint, safeNumber } from './classify.ts'
import type { RawLogEntry } from './entry.ts'
import { redactLiterals, redactParameters, redactRowValues } from './literals.ts'

const SHORT = 1_000

function clean(text: string, max: number): string {
  let t = text.includes('\u0000') ? text.replaceAll('\u0000', '') : text
  t = t.toWellFormed()
  if (t.length <= max) return t
  const code = t.charCodeAt(max - 1)
  return t.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max)
}

const mask = (text: string): string => redactSecrets(maskSecretStatements(text))
const short = (v: string | null): string | null => (v === null ? null : clean(v, SHORT))

/** A message that carries its statement (`duration: 1 ms  execute S_1: SELECT ...`, `statement: ...`): the head and the statement. */
export function splitStatement(message: string): { head: string; statement: string | null } {
  const plan = /^(duration: [\d.]+ ms {2}plan:)/.exec(message)
  // auto_explain's plan (read by the explain_plans collector) holds the statement's text: not kept here.
  if (plan) return { head: plan[1]!, statement: null }
  const m = /^((?:duration: [\d.]+ ms {2})?(?:statement|execute [^:\n]*|parse [^:\n]*|bind [^:\n]*)): /.exec(message)
  if (!m) return { head: message, statement: null }
  return { head: m[1]!, statement: message.slice(m[0].length) }
}

function keepStatement(text: string, mode: LogTextMode): string | null {
  if (mode === 'none') return null
  const masked = mask(text)
  return mode === 'full' ? masked : redactLiterals(masked)
}

/** `SQL statement "..."` lines of a CONTEXT with their statement per log_text, and bind parameter values out. */
function contextText(context: string, mode: LogTextMode): string {
  if (mode === 'full') return context
  const statements = context.replace(/^SQL statement "(.*)"$/gms, (_all, sql: string) =>
    mode === 'none' ? 'SQL statement (not kept: log_text is none)' : `SQL statement "${redactLiterals(sql)}"`,
  )
  return redactParameters(statements)
}

function detailText(e: RawLogEntry, c: Classified, mode: LogTextMode): string | null {
  const parts: string[] = []
  if (e.detail !== null) {
    let d = mask(e.detail)
    if (c.kind === 'deadlock') {
      // The processes' statements follow their wait lines.
      const parsed = deadlockFields(d)
      const waits = d.split('\n').slice(0, parsed.pids.length)
      const statements =
        mode === 'none'
          ? []
          : parsed.statements.map((s, i) => `Process ${parsed.pids[i]}: ${mode === 'redacted' ? redactLiterals(s) : s}`)
      d = [...waits, ...statements].join('\n')
    } else if (c.kind === 'archive_failed') {
      // The archive command may hold a secret (a token, a key): only the WAL file is kept.
      d = d.replace(/^(The failed archive command was: ).*$/ms, '$1(not sent)')
    } else if (mode === 'none') {
      d = redactParameters(d.replace(/^[Pp]arameters: .*$/gms, ''))
        .replace(/^(Key \(.*?\)=\().*(\) .*)$/gm, '$1?$2')
        .replace(/^(Failing row contains \().*(\)\.)$/gm, '$1?$2')
        .trim()
    } else if (mode === 'redacted') {
      d = redactRowValues(redactParameters(d))
    }
    if (d !== '') parts.push(d)
  }
  if (e.hint !== null) parts.push(`HINT:  ${mask(e.hint)}`)
  if (e.internalQuery !== null && mode !== 'none') parts.push(`QUERY:  ${keepStatement(e.internalQuery, mode)}`)
  if (e.context !== null) parts.push(`CONTEXT:  ${contextText(mask(e.context), mode)}`)
  return parts.length === 0 ? null : clean(parts.join('\n'), ingestTextLimits.logMessage)
}

function fieldValue(v: FieldValue): FieldValue {
  if (typeof v === 'string') return clean(mask(v), ingestTextLimits.logMessage)
  if (typeof v === 'number') return safeNumber(v)
  if (Array.isArray(v)) {
    const out: (number | string)[] = []
    for (const x of v) {
      if (out.length >= 64) break
      if (typeof x === 'string') out.push(clean(mask(x), ingestTextLimits.logMessage))
      else if (safeNumber(x) !== null) out.push(x)
    }
    return out
  }
  return v
}

/** The latest time the wire takes (9999-12-31). */
const MAX_TS = 253_402_300_799_999

function timeOf(ts: number | null, now: number): number {
  const t = ts !== null && Number.isFinite(ts) && ts >= 0 && ts <= MAX_TS ? ts : now
  return Math.max(0, Math.min(MAX_TS, Math.round(t)))
}

/** An input error quoting the value it refused (a bind parameter's, often): the value, unless log_text is full. */
const INPUT_ERROR =
  /^((?:invalid input syntax for (?:type )?[^:\n]*|invalid input value for enum [^:\n]*|malformed [a-z ]+ literal|value too long for type [^:\n]*|invalid value for parameter "[^"\n]*")): "(.*)"( at character \d+)?$/s

function messageText(head: string, mode: LogTextMode): string {
  if (mode === 'full' || (!head.startsWith('in') && !head.startsWith('malformed') && !head.startsWith('value')))
    return head
  return head.replace(INPUT_ERROR, '$1: "?"$3')
}

export function toLogEvent(e: RawLogEntry, c: Classified, mode: LogTextMode, now: number): LogEvent {
  const { head, statement: inMessage } = splitStatement(e.message)
  const message = clean(mask(messageText(head, mode)), ingestTextLimits.logMessage)
  const fields: Record<string, FieldValue> = {}
  let userFromMessage: string | null = null
  for (const [key, value] of Object.entries(c.fields)) {
    if (key === 'user_name') {
      userFromMessage = typeof value === 'string' ? value : null
      continue
    }
    if (key === 'statements' && Array.isArray(value)) {
      fields.statements =
        mode === 'none'
          ? []
          : value.map((s) => clean(keepStatement(String(s), mode) ?? '', ingestTextLimits.logMessage))
      continue
    }
    fields[key] = fieldValue(value)
  }
  const rawStatement = e.statement ?? inMessage
  const statement = rawStatement === null ? null : keepStatement(rawStatement, mode)
  return {
    ts: timeOf(e.ts, now),
    kind: c.kind,
    severity: c.severity,
    sqlstate: e.sqlstate,
    message,
    fingerprint: clean(fingerprint(message), 512),
    pid: e.pid !== null && Number.isInteger(e.pid) && e.pid >= 0 && e.pid <= 2_147_483_647 ? e.pid : null,
    user: short(e.user ?? userFromMessage),
    database: short(e.database),
    application: short(e.application),
    client: short(e.client),
    detail: detailText(e, c, mode),
    statement: statement === null ? null : clean(statement, ingestTextLimits.logStatement),
    query_id: e.queryId !== null && e.queryId.length <= ingestTextLimits.id ? e.queryId : null,
    fields,
  }
}
