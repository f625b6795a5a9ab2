// What the doctor is made of: rules, one per file under rules/, each with its thresholds in one table
// and a check that turns the stored telemetry of one database (DoctorContext) into findings. A finding
// carries the measured numbers and the objects involved, what to do, the queries that investigate it
// and the commands that fix it.
import type { Engine } from '../store/types.ts'
import type { DoctorContext } from './context.ts'

export type Severity = 'critical' | 'warning' | 'info'

export type Category =
  | 'availability'
  | 'performance'
  | 'maintenance'
  | 'capacity'
  | 'configuration'
  | 'replication'
  | 'schema'
  | 'reliability'
  | 'security'

export interface Finding {
  /** The rule that raised it, e.g. `pg_cache_hit_ratio`. */
  rule: string
  /** Stable identity: the rule plus the object (`pg_dead_tuples:public.orders`); recommendations and alerts are keyed by it. */
  key: string
  severity: Severity
  category: Category
  title: string
  /** What was measured, with the numbers and the objects involved. */
  detail: string
  recommendation: string
  /** Steps, mostly queries to run on the database, that show the problem for yourself. */
  how_to_investigate: string[]
  /** Commands that fix it (left out for unverified organizations). */
  how_to_fix: string[]
  /** Objects involved (`schema.table`, `pid 123`, `slot x`, ...). */
  objects: string[]
  /** The measured values the rule judged, by name. */
  metrics: Record<string, number | string | null>
  /**
   * When the data the finding was drawn from was collected (epoch ms): the collected_at of the latest
   * batch the rule read (see DoctorContext.forRule), or of the object's own data when the rule says.
   * Null only when nothing has arrived yet.
   */
  as_of: number | null
  /** The key of its cause's group (grouping.ts): `session:pid 3161`, `index:public.orders(customer_id)`, or its own key. */
  cause: string
}

export interface Rule<T extends Record<string, number> = Record<string, number>> {
  id: string
  engine: Engine | 'any'
  category: Category
  /** One line: what the rule finds (docs/doctor-rules.md is generated from it). */
  summary: string
  /** The agent's collectors whose data it reads; empty: only what every batch carries (server_state, availability). */
  collectors: readonly string[]
  /** The rule's thresholds, in one table (docs/doctor-rules.md lists them from here). */
  thresholds: T
  /** Reads its thresholds through ctx.thresholds(rule), which applies configured overrides. */
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
