// The doctor's thresholds per database: each rule's defaults (its `thresholds` numbers and `lists` of
// names) with the values an operator set for one database (store thresholds/), the ranges a value must
// fall in, and the checking of a change before it is stored. A change names known rules and keys of the
// database's engine, gives a number in the key's range (or a list of names to a list), and keeps each
// warning/critical pair in the order its defaults have. The diagnosis applies the result through
// DoctorContext.thresholds() and .names().
import type { Engine } from '../store/types.ts'
import type { StoredThreshold, ThresholdChange, ThresholdValue } from '../store/thresholds/types.ts'
import type { ThresholdOverrides } from './context.ts'
import { rules as allRules } from './rules/index.ts'
import type { Rule, ThresholdRange } from './types.ts'

export type { ThresholdOverrides }

/** The most names a list takes, and the longest name (PostgreSQL's identifiers are at most 63 bytes). */
export const MAX_NAMES = 100
export const MAX_NAME_BYTES = 63
/**
 * The bounds of the ranges read from a threshold's name (rangeOf). A window (how far back a rule reads:
 * `window_*`, `recent_*`, `baseline_*`, `keep_*`, `*_lookback_*`) is at most 7 days: the rules judge what
 * happens now against at most a week before; minute rows are kept 48 hours and an unverified organization's
 * data 24 hours, so a longer window reads no more than a shorter one there, and each window's reads (the
 * buckets summed, the log lines counted) grow with it. Another duration (an age, a wait) is at most a year,
 * a transaction-ID age at most 2^31 (PostgreSQL's wraparound limit), a size at most a petabyte, a number of
 * findings, statements or tables named at most 1000, any other count or rate at most 10^12.
 */
export const MAX_WINDOW_DAYS = 7
const MAX_DURATION_DAYS = 365
const MAX_XID_AGE = 2 ** 31
const MAX_BYTES = 1e15
const MAX_LISTED = 1000
const MAX_COUNT = 1e12
/** Seconds in each unit a threshold's name may end with. */
const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, seconds: 1, minutes: 60, hours: 3600, days: 86_400 }

/** One threshold of a rule as the API shows it: its default, the database's value and the range it takes. */
export interface ThresholdEntry {
  rule: string
  key: string
  kind: 'number' | 'names'
  default: ThresholdValue
  value: ThresholdValue
  overridden: boolean
  /** When the database's value was set (epoch ms); null for a default. */
  updated_at: number | null
  /** A number's range (null for a list). */
  minimum: number | null
  maximum: number | null
  /** Whether a number must be whole (a count). */
  whole: boolean
}

/**
 * The range a number of `rule` takes under `key`: the rule's own (its `ranges`), else one read from the
 * name (the bounds above): a share (`*ratio*`, `*share*`, `*below*` whose default is at most 1) from 0 to
 * 1; a window from 1 to 7 days in its unit (`_s`, `_minutes`, `_hours`...); another duration from 0 to a
 * year; a size (`*_bytes`), a transaction-ID age (`*_age`, `*_xids`) or a number named (`max_findings`,
 * `top_statements`, `*_named`) from 0 to its bound; anything else from 0 to 10^12. Counts (`max_*`,
 * `top_*`, `*_named`) are whole.
 */
export function rangeOf(rule: Rule, key: string): ThresholdRange {
  const ranges = rule.ranges as Record<string, ThresholdRange | undefined> | undefined
  if (ranges && Object.hasOwn(ranges, key)) return ranges[key]!
  const fallback = rule.thresholds[key] ?? 0
  const whole = /^(max|top)_|_named$/.test(key)
  if (/ratio|share|below/.test(key) && fallback <= 1) return { min: 0, max: 1 }
  const unit = /_(ms|s|seconds|minutes|hours|days)$/.exec(key)?.[1]
  const perUnit = unit === undefined ? undefined : 86_400 / UNIT_SECONDS[unit]!
  if (/^(window|recent|baseline|keep)_|_lookback_/.test(key))
    return { min: 1, max: MAX_WINDOW_DAYS * (perUnit ?? 86_400), whole }
  if (perUnit !== undefined) return { min: 0, max: MAX_DURATION_DAYS * perUnit, whole }
  if (/_bytes$/.test(key)) return { min: 0, max: MAX_BYTES, whole }
  if (/_age$|_xids$/.test(key)) return { min: 0, max: MAX_XID_AGE, whole }
  if (/^(max|top)_[a-z]+$|_named$/.test(key)) return { min: 0, max: MAX_LISTED, whole }
  return { min: 0, max: MAX_COUNT, whole }
}

/** Whether a number lies in the key's range (and is whole where it must be). */
function inRange(rule: Rule, key: string, value: number): boolean {
  const range = rangeOf(rule, key)
  return Number.isFinite(value) && value >= range.min && value <= range.max && (!range.whole || Number.isInteger(value))
}

/** The rules of a database's engine. */
export function rulesOfEngine(engine: Engine, rules: readonly Rule[] = allRules): Rule[] {
  return rules.filter((r) => r.engine === 'any' || r.engine === engine)
}

/**
 * The stored overrides as the diagnosis applies them; a value of the wrong kind for its key, or a number
 * outside its range (stored before the range narrowed), is left out: the default applies.
 */
export function overridesOf(stored: readonly StoredThreshold[], rules: readonly Rule[] = allRules): ThresholdOverrides {
  const byId = new Map(rules.map((r) => [r.id, r]))
  const out: ThresholdOverrides = {}
  for (const s of stored) {
    const rule = byId.get(s.rule)
    if (!rule || !fitsKind(rule, s.key, s.value)) continue
    ;(out[s.rule] ??= {})[s.key] = s.value
  }
  return out
}

/** The server's overrides (a test hook: Deps.doctorThresholds) with the database's over them. */
export function mergeOverrides(
  server: Record<string, Record<string, number>> | undefined,
  database: ThresholdOverrides,
): ThresholdOverrides {
  if (!server) return database
  const out: ThresholdOverrides = {}
  for (const [rule, values] of Object.entries(server)) out[rule] = { ...values }
  for (const [rule, values] of Object.entries(database)) out[rule] = { ...out[rule], ...values }
  return out
}

/** Whether `key` is one of the rule's numbers, or one of its lists (own keys only: never `constructor`). */
const isNumberKey = (rule: Rule, key: string) => Object.hasOwn(rule.thresholds, key)
const isListKey = (rule: Rule, key: string) => rule.lists !== undefined && Object.hasOwn(rule.lists, key)

function fitsKind(rule: Rule, key: string, value: ThresholdValue): boolean {
  if (typeof value === 'number') return isNumberKey(rule, key) && inRange(rule, key, value)
  return Array.isArray(value) && isListKey(rule, key)
}

/** Every threshold of the engine's rules, in the rules' order, with the database's values. */
export function thresholdEntries(
  engine: Engine,
  stored: readonly StoredThreshold[],
  rules: readonly Rule[] = allRules,
): ThresholdEntry[] {
  const set = new Map(stored.map((s) => [`${s.rule}\0${s.key}`, s]))
  const entries: ThresholdEntry[] = []
  for (const rule of rulesOfEngine(engine, rules)) {
    const keys: [string, ThresholdValue][] = [
      ...Object.entries(rule.thresholds),
      ...Object.entries(rule.lists ?? {}).map(([k, v]) => [k, [...v]] as [string, string[]]),
    ]
    for (const [key, fallback] of keys) {
      const found = set.get(`${rule.id}\0${key}`)
      const own = found && fitsKind(rule, key, found.value) ? found : undefined
      const range = typeof fallback === 'number' ? rangeOf(rule, key) : undefined
      entries.push({
        rule: rule.id,
        key,
        kind: typeof fallback === 'number' ? 'number' : 'names',
        default: fallback,
        value: own ? own.value : fallback,
        overridden: own !== undefined,
        updated_at: own ? own.updated_at : null,
        minimum: range ? range.min : null,
        maximum: range ? range.max : null,
        whole: range?.whole === true,
      })
    }
  }
  return entries
}

/** A change of thresholds as a request sends it: rule → key → value (null: back to the default). */
export type ThresholdRequest = Record<string, Record<string, unknown>>

/**
 * The changes `request` asks of a database of `engine` whose overrides are `stored`, checked: an unknown
 * rule or key, a value of the wrong kind or out of range, or a warning/critical pair put out of its order
 * (with the values the database keeps) is an error naming the rule and key.
 */
export function checkRequest(
  engine: Engine,
  stored: readonly StoredThreshold[],
  request: ThresholdRequest,
  rules: readonly Rule[] = allRules,
): { changes: ThresholdChange[] } | { error: string } {
  const byId = new Map(rulesOfEngine(engine, rules).map((r) => [r.id, r]))
  const changes: ThresholdChange[] = []
  for (const [ruleId, values] of Object.entries(request)) {
    const rule = byId.get(ruleId)
    if (!rule) {
      const other = rules.some((r) => r.id === ruleId)
      return {
        error: other
          ? `${ruleId}: the rule does not apply to a ${engine === 'postgres' ? 'PostgreSQL' : 'ClickHouse'} database`
          : `${ruleId}: no such rule`,
      }
    }
    if (values === null || typeof values !== 'object' || Array.isArray(values))
      return { error: `${ruleId}: must be an object of thresholds (key: value)` }
    for (const [key, value] of Object.entries(values)) {
      const at = `${ruleId}.${key}`
      if (isNumberKey(rule, key)) {
        if (value === null) {
          changes.push({ rule: ruleId, key, value: null })
          continue
        }
        const range = rangeOf(rule, key)
        if (typeof value !== 'number' || !Number.isFinite(value)) return { error: `${at} must be a number or null` }
        if (value < range.min || value > range.max) return { error: `${at} must be from ${range.min} to ${range.max}` }
        if (range.whole && !Number.isInteger(value)) return { error: `${at} must be a whole number` }
        changes.push({ rule: ruleId, key, value })
      } else if (isListKey(rule, key)) {
        if (value === null) {
          changes.push({ rule: ruleId, key, value: null })
          continue
        }
        const names = checkNames(at, value)
        if (typeof names === 'string') return { error: names }
        changes.push({ rule: ruleId, key, value: names })
      } else {
        const known = [...Object.keys(rule.thresholds), ...Object.keys(rule.lists ?? {})]
        return { error: `${at}: no such threshold (${ruleId} has ${known.length === 0 ? 'none' : known.join(', ')})` }
      }
    }
  }
  const order = checkOrder(byId, stored, changes)
  return order ? { error: order } : { changes }
}

function checkNames(at: string, value: unknown): string[] | string {
  const error = `${at} must be a list of at most ${MAX_NAMES} names of 1 to ${MAX_NAME_BYTES} bytes, or null`
  if (!Array.isArray(value) || value.length > MAX_NAMES) return error
  for (const name of value) {
    if (
      typeof name !== 'string' ||
      name.length === 0 ||
      name.includes('\0') ||
      Buffer.byteLength(name) > MAX_NAME_BYTES
    )
      return error
  }
  return [...new Set(value as string[])]
}

/**
 * A warning/critical pair (`warning_s` and `critical_s`, `queue_warning` and `queue_critical`) whose
 * values, after the changes, are in the other order than the defaults (a warning past its critical).
 */
function checkOrder(
  byId: Map<string, Rule>,
  stored: readonly StoredThreshold[],
  changes: readonly ThresholdChange[],
): string | undefined {
  for (const ruleId of new Set(changes.map((c) => c.rule))) {
    const rule = byId.get(ruleId)!
    const values: Record<string, number> = { ...rule.thresholds }
    for (const s of stored)
      if (s.rule === ruleId && typeof s.value === 'number' && isNumberKey(rule, s.key)) values[s.key] = s.value
    for (const c of changes)
      if (c.rule === ruleId && isNumberKey(rule, c.key))
        values[c.key] = c.value === null ? rule.thresholds[c.key]! : (c.value as number)
    for (const warningKey of Object.keys(rule.thresholds)) {
      if (!warningKey.includes('warning')) continue
      const criticalKey = warningKey.replace('warning', 'critical')
      const dw = rule.thresholds[warningKey]!
      const dc = rule.thresholds[criticalKey]
      if (dc === undefined || dw === dc) continue
      const w = values[warningKey]!
      const c = values[criticalKey]!
      if (dw < dc && w > c) return `${ruleId}.${warningKey} (${w}) must not be above ${criticalKey} (${c})`
      if (dw > dc && w < c) return `${ruleId}.${warningKey} (${w}) must not be below ${criticalKey} (${c})`
    }
  }
  return undefined
}
