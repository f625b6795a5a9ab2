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
/** The largest number any threshold takes (a petabyte, in bytes). */
const MAX_VALUE = 1e15

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
 * name: a share (`*ratio*`, `*share*`, `*below*` whose default is at most 1) from 0 to 1, a window
 * (`window_*`) at least 1, a count (`max_*`, `top_*`, `*_named`) whole; anything else from 0.
 */
export function rangeOf(rule: Rule, key: string): ThresholdRange {
  const ranges = rule.ranges as Record<string, ThresholdRange | undefined> | undefined
  if (ranges && Object.hasOwn(ranges, key)) return ranges[key]!
  const fallback = rule.thresholds[key] ?? 0
  const whole = /^(max|top)_|_named$/.test(key)
  if (/ratio|share|below/.test(key) && fallback <= 1) return { min: 0, max: 1 }
  if (/^window_/.test(key)) return { min: 1, max: MAX_VALUE, whole }
  return { min: 0, max: MAX_VALUE, whole }
}

/** The rules of a database's engine. */
export function rulesOfEngine(engine: Engine, rules: readonly Rule[] = allRules): Rule[] {
  return rules.filter((r) => r.engine === 'any' || r.engine === engine)
}

/** The stored overrides as the diagnosis applies them; a value of the wrong kind for its key is left out. */
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
export function mergeOverrides(server: Record<string, Record<string, number>> | undefined, database: ThresholdOverrides): ThresholdOverrides {
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
  if (typeof value === 'number') return isNumberKey(rule, key)
  return Array.isArray(value) && isListKey(rule, key)
}

/** Every threshold of the engine's rules, in the rules' order, with the database's values. */
export function thresholdEntries(engine: Engine, stored: readonly StoredThreshold[], rules: readonly Rule[] = allRules): ThresholdEntry[] {
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
      return { error: other ? `${ruleId}: the rule does not apply to a ${engine === 'postgres' ? 'PostgreSQL' : 'ClickHouse'} database` : `${ruleId}: no such rule` }
    }
    if (values === null || typeof values !== 'object' || Array.isArray(values)) return { error: `${ruleId}: must be an object of thresholds (key: value)` }
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
    if (typeof name !== 'string' || name.length === 0 || name.includes('\0') || Buffer.byteLength(name) > MAX_NAME_BYTES) return error
  }
  return [...new Set(value as string[])]
}

/**
 * A warning/critical pair (`warning_s` and `critical_s`, `queue_warning` and `queue_critical`) whose
 * values, after the changes, are in the other order than the defaults (a warning past its critical).
 */
function checkOrder(byId: Map<string, Rule>, stored: readonly StoredThreshold[], changes: readonly ThresholdChange[]): string | undefined {
  for (const ruleId of new Set(changes.map((c) => c.rule))) {
    const rule = byId.get(ruleId)!
    const values: Record<string, number> = { ...rule.thresholds }
    for (const s of stored) if (s.rule === ruleId && typeof s.value === 'number' && isNumberKey(rule, s.key)) values[s.key] = s.value
    for (const c of changes) if (c.rule === ruleId && isNumberKey(rule, c.key)) values[c.key] = c.value === null ? rule.thresholds[c.key]! : (c.value as number)
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
