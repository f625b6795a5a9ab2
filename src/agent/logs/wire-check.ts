// The wire's LogEvent schema (src/shared/wire.ts) checked by hand, cheaply, for each entry the collector
// is about to send: the agent does not load TypeBox at runtime, and one entry the server refuses would
// cost the whole batch (400). A defence in depth behind the classifier's and event builder's own bounds:
// an entry that fails is dropped and counted. test/agent/log-events-wire.test.ts holds it to the TypeBox
// schema over many generated hostile entries.
import { ingestTextLimits } from '../../shared/ingest-limits.ts'
import type { LogEvent } from '../../shared/wire.ts'

const MAX_TS = 253_402_300_799_999
const MAX_PID = 2_147_483_647
const KIND = /^[a-z_]+$/
const SEVERITY = /^[a-z]+$/
const SQLSTATE = /^[A-Za-z0-9_]+$/
const QUERY_ID = /^-?[0-9]+$/
const FIELD_KEY = /^[a-z0-9_]+$/

const noNul = (s: string): boolean => !s.includes('\u0000')
const text = (v: unknown, max: number): boolean => typeof v === 'string' && v.length <= max && noNul(v)
const nullableText = (v: unknown, max: number): boolean => v === null || text(v, max)
const safe = (v: unknown): boolean =>
  typeof v === 'number' && Number.isFinite(v) && Math.abs(v) <= Number.MAX_SAFE_INTEGER
const integerIn = (v: unknown, min: number, max: number): boolean =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max

function fieldValueOk(v: unknown): boolean {
  if (v === null || typeof v === 'boolean') return true
  if (typeof v === 'number') return safe(v)
  if (typeof v === 'string') return text(v, ingestTextLimits.logMessage)
  if (Array.isArray(v))
    return v.length <= 64 && v.every((x) => (typeof x === 'number' ? safe(x) : text(x, ingestTextLimits.logMessage)))
  return false
}

/** What is wrong with an entry the wire would refuse (the first thing found), or null when it is valid. */
export function logEventProblem(e: LogEvent): string | null {
  if (!integerIn(e.ts, 0, MAX_TS)) return 'ts'
  if (typeof e.kind !== 'string' || e.kind.length < 1 || e.kind.length > 40 || !KIND.test(e.kind)) return 'kind'
  if (typeof e.severity !== 'string' || e.severity.length < 1 || e.severity.length > 16 || !SEVERITY.test(e.severity))
    return 'severity'
  if (
    e.sqlstate !== null &&
    (typeof e.sqlstate !== 'string' || e.sqlstate.length < 1 || e.sqlstate.length > 64 || !SQLSTATE.test(e.sqlstate))
  )
    return 'sqlstate'
  if (!text(e.message, ingestTextLimits.logMessage)) return 'message'
  if (!text(e.fingerprint, 512)) return 'fingerprint'
  if (e.pid !== null && !integerIn(e.pid, 0, MAX_PID)) return 'pid'
  if (!nullableText(e.user, 1_000)) return 'user'
  if (!nullableText(e.database, 1_000)) return 'database'
  if (!nullableText(e.application, 1_000)) return 'application'
  if (!nullableText(e.client, 1_000)) return 'client'
  if (!nullableText(e.detail, ingestTextLimits.logMessage)) return 'detail'
  if (!nullableText(e.statement, ingestTextLimits.logStatement)) return 'statement'
  if (
    e.query_id !== null &&
    (typeof e.query_id !== 'string' || e.query_id.length > ingestTextLimits.id || !QUERY_ID.test(e.query_id))
  )
    return 'query_id'
  if (e.fields === null || typeof e.fields !== 'object' || Array.isArray(e.fields)) return 'fields'
  let keys = 0
  for (const key in e.fields) {
    if (++keys > 32) return 'fields'
    if (key.length < 1 || key.length > 64 || !FIELD_KEY.test(key)) return 'fields'
    if (!fieldValueOk(e.fields[key])) return `fields.${key}`
  }
  if (e.count !== undefined && !integerIn(e.count, 1, Number.MAX_SAFE_INTEGER)) return 'count'
  return null
}
