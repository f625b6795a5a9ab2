// What the doctor is made of: rules, one per file under rules/, each with its thresholds in one table
// and a check that turns the stored telemetry of one database (DoctorContext) into findings. A finding
// carries the measured numbers and the objects involved, what to do, the queries that investigate it
// and the commands that fix it.
import type { Static } from '@sinclair/typebox'
import type { Severity as SeveritySchema } from '../../shared/api/common.ts'
import type { Category as CategorySchema, Finding as FindingSchema } from '../../shared/api/doctor.ts'
import type { Engine } from '../store/types.ts'
import type { DoctorContext } from './context.ts'

/** critical, warning or info: the API's Severity (src/shared/api/common.ts). */
export type Severity = Static<typeof SeveritySchema>

export type Category = Static<typeof CategorySchema>

/**
 * A finding as the doctor keeps it: the API's Finding (src/shared/api/doctor.ts, where each field is
 * described), but for `as_of`, kept in epoch ms until a view writes it (the collected_at of the latest
 * batch the rule read, see DoctorContext.forRule, or of the object's own data when the rule says; null
 * only when nothing has arrived yet), and `how_to_fix_locked`, which the view adds for an organization
 * that has not verified its email.
 */
export type Finding = Omit<Static<typeof FindingSchema>, 'as_of' | 'how_to_fix_locked'> & { as_of: number | null }

/** The values a threshold takes (checked when an operator sets one for a database: doctor/thresholds.ts). */
export interface ThresholdRange {
  min: number
  max: number
  /** A count: whole numbers only. */
  whole?: boolean
}

export interface Rule<
  T extends Record<string, number> = Record<string, number>,
  L extends Record<string, readonly string[]> = Record<string, readonly string[]>,
> {
  id: string
  engine: Engine | 'any'
  category: Category
  /** One line: what the rule finds (docs/doctor-rules.md is generated from it). */
  summary: string
  /** The agent's collectors whose data it reads; empty: only what every batch carries (server_state, availability). */
  collectors: readonly string[]
  /** The rule's thresholds, in one table (docs/doctor-rules.md lists them from here). */
  thresholds: T
  /**
   * The range of some thresholds, where the one read from the key's name (doctor/thresholds.ts rangeOf:
   * shares 0 to 1, counts whole, anything else from 0) is not tight enough.
   */
  ranges?: { readonly [K in keyof T]?: ThresholdRange }
  /** Lists of names an operator sets per database (an allowlist), empty by default; read through ctx.names(rule). */
  lists?: L
  /** Reads its thresholds through ctx.thresholds(rule), which applies the database's values (doctor/thresholds.ts). */
  check(ctx: DoctorContext): Promise<FindingDraft[]>
}

/** A finding as a rule writes it; the doctor adds rule, key and category. */
export type FindingDraft = Omit<Finding, 'rule' | 'key' | 'category' | 'objects' | 'metrics' | 'as_of' | 'cause'> & {
  /** When its data was collected, if not the latest batch the rule read. */
  as_of?: number | null
  /** The object this finding is about, for its key; absent for a database-wide finding. */
  object?: string
  objects?: string[]
  metrics?: Record<string, number | string | null>
  category?: Category
}

/** Severity by comparing `value` against a rule's warning and critical thresholds (higher is worse). */
export function severityAbove(value: number, warning: number, critical: number): Severity | undefined {
  if (value >= critical) return 'critical'
  if (value >= warning) return 'warning'
  return undefined
}

/** The worse of two severities that are a warning or critical (or none). */
export function worseSeverity(a: Severity | undefined, b: Severity | undefined): Severity | undefined {
  return a === 'critical' || b === 'critical' ? 'critical' : a === 'warning' || b === 'warning' ? 'warning' : undefined
}

/** Severity when lower is worse (a ratio that should stay high). */
export function severityBelow(value: number, warning: number, critical: number): Severity | undefined {
  if (value <= critical) return 'critical'
  if (value <= warning) return 'warning'
  return undefined
}

export const pct = (ratio: number, digits = 1) => `${(ratio * 100).toFixed(digits)} %`

export function bytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB']
  let v = n
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`
}

export function duration(ms: number): string {
  const s = ms / 1000
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`
  if (s < 3600) return `${(s / 60).toFixed(1)} min`
  if (s < 86_400) return `${(s / 3600).toFixed(1)} h`
  return `${(s / 86_400).toFixed(1)} days`
}
