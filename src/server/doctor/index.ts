// The doctor: runs every rule of the database's engine over its stored telemetry and answers with the
// status, the score (score.ts), the findings worst first, and the key figures. A rule that fails is
// logged and left out; it never fails the diagnosis. For an organization that has not verified its
// email, the findings keep their prose and investigation queries but not the commands that fix them.
import type { WriteRefusalSpan } from '../store/write-faults.ts'
import { rfc3339 } from '../views.ts'
import type { Deps } from '../context.ts'
import type { RegisteredDatabase } from '../store/types.ts'
import { DoctorContext } from './context.ts'
import { clickhouseFigures, commonFigures, postgresFigures } from './figures.ts'
import { rules } from './rules/index.ts'
import { SEVERITY_ORDER, doctorStatus, healthScore } from './score.ts'
import type { Finding, Rule, Severity } from './types.ts'
import { type FindingGroup, groupFindings } from './grouping.ts'
import type { Diagnosis } from './diagnosis.ts'
import { type ThresholdOverrides, mergeOverrides, overridesOf } from './thresholds.ts'

export type { Diagnosis, DiagnosisFigures } from './diagnosis.ts'

export const LOCKED_FIX = 'Verify your email address to unlock the commands that fix this.'

export function rulesFor(db: RegisteredDatabase): Rule[] {
  return rules.filter((r) => r.engine === 'any' || r.engine === db.engine)
}

async function runRule(rule: Rule, ctx: DoctorContext, log: Deps['log']): Promise<Omit<Finding, 'cause'>[] | null> {
  try {
    const reads = ctx.forRule()
    const drafts = await rule.check(reads)
    const asOf = reads.asOf()
    return drafts.map(({ object, objects, metrics, category, as_of, ...draft }) => ({
      rule: rule.id,
      key: object === undefined ? rule.id : `${rule.id}:${object}`,
      category: category ?? rule.category,
      ...draft,
      objects: objects ?? (object === undefined ? [] : [object]),
      metrics: metrics ?? {},
      as_of: as_of === undefined ? asOf : as_of,
    }))
  } catch (e) {
    log.error('doctor rule failed', { rule: rule.id, database: ctx.db.id, cause: (e as Error).message })
    return null
  }
}

export interface DiagnoseOptions {
  /**
   * Awaited between rules, which then run one after the other: the monitor passes a yield to
   * the event loop, so a diagnosis never holds it for more than one rule's reads. Without it the rules
   * run concurrently (their reads overlap on the PostgreSQL store).
   */
  between?: () => Promise<void>
  /** The main store's refused writes, from the diagnosis worker's caller; absent: deps.store.writeFaults. */
  storeRefusals?: WriteRefusalSpan
  /** The serve's batches shed for want of room (ingest-admission.ts), from the diagnosis worker's caller; absent: deps'. */
  ingestShedding?: WriteRefusalSpan
  /** The database's thresholds as its caller read them (doctor/thresholds.ts overridesOf); absent: read from the store here. */
  thresholds?: ThresholdOverrides
}

export async function diagnose(
  deps: Pick<Deps, 'store' | 'log' | 'doctorThresholds' | 'signup' | 'servingSince'> &
    Partial<Pick<Deps, 'ingestAdmission'>>,
  db: RegisteredDatabase,
  now: number,
  options: DiagnoseOptions = {},
): Promise<Diagnosis & { context: DoctorContext }> {
  const { log } = deps
  // `dbm local`'s server (signup 'local'): its rules say what a dbm local user does, not what an agent's operator does.
  // The database's thresholds over the defaults: the diagnosis worker reads them here, from its own store.
  const own = options.thresholds ?? overridesOf(await deps.store.thresholds.databaseThresholds(db.id))
  const ctx = new DoctorContext(deps.store, db, now, mergeOverrides(deps.doctorThresholds, own), {
    local: deps.signup === 'local',
    servingSince: deps.servingSince,
    storeRefusals: options.storeRefusals ?? deps.store.writeFaults?.refusals(),
    ingestShedding: options.ingestShedding ?? deps.ingestAdmission?.shedSpan(),
  })
  const ruleList = rulesFor(db)
  let results: (Omit<Finding, 'cause'>[] | null)[]
  if (options.between) {
    results = []
    for (const rule of ruleList) {
      results.push(await runRule(rule, ctx, log))
      await options.between()
    }
  } else {
    results = await Promise.all(ruleList.map((rule) => runRule(rule, ctx, log)))
  }
  const order = new Map(ruleList.map((r, i) => [r.id, i]))
  const sorted = results
    .flatMap((r) => r ?? [])
    .sort(
      (a, b) =>
        SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity] ||
        order.get(a.rule)! - order.get(b.rule)! ||
        (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
    )
  const { findings, groups } = groupFindings(sorted)
  const figuresRead = ctx.forRule()
  const figures = {
    ...(await commonFigures(figuresRead)),
    ...(db.engine === 'postgres' ? await postgresFigures(figuresRead) : await clickhouseFigures(figuresRead)),
  }
  const counts: Record<Severity, number> = { critical: 0, warning: 0, info: 0 }
  for (const f of findings) counts[f.severity]++
  return {
    status: doctorStatus(findings),
    score: healthScore(findings),
    evaluated_at: now,
    findings,
    groups,
    failed_rules: ruleList.filter((_, i) => results[i] === null).map((r) => r.id),
    // as_of: when the figures' data was collected (epoch ms), the overview's too.
    metrics_summary: { ...figures, as_of: figuresRead.asOf(), findings: counts, rules_evaluated: ruleList.length },
    context: ctx,
  }
}

/** Lets the event loop run whatever waits (requests) before the caller goes on: SQLite reads are synchronous. */
export const breathe = () => new Promise<void>((resolve) => setImmediate(resolve))

/** A finding as the API shows it; without the fix commands for unverified organizations. */
/**
 * Metrics that are points in time (named after a catalog column, or ending in _at or _since: the doctor
 * keeps them as epoch ms) as the API writes every time: RFC 3339 (the spec's "all timestamps").
 */
const TIME_METRICS = new Set([
  'last_vacuum',
  'last_autovacuum',
  'last_analyze',
  'last_autoanalyze',
  'stats_reset',
  'xact_start',
  'query_start',
  'backend_start',
  'state_change',
  'as_of',
])
const isTimeMetric = (key: string) => /_(at|since)$/.test(key) || TIME_METRICS.has(key)

/**
 * A metrics map with its points in time in RFC 3339, and a number that is not finite (a rule's division
 * by zero) as null: what JSON would write for it, and what the response schemas allow.
 */
export function timesAsRfc3339<T extends object>(metrics: T): T {
  const out: Record<string, unknown> = { ...metrics } as Record<string, unknown>
  for (const [key, value] of Object.entries(metrics)) {
    if (typeof value !== 'number') continue
    if (!Number.isFinite(value)) out[key] = null
    else if (isTimeMetric(key)) out[key] = rfc3339(value)
  }
  return out as T
}

/** A group as the API answers it: without its fix commands for an unverified organization. */
export function groupView(g: FindingGroup, verified: boolean) {
  return verified ? { ...g } : { ...g, how_to_fix: [], how_to_fix_locked: LOCKED_FIX }
}

/** A finding as the API answers it: times in RFC 3339, and without its fix commands for an unverified organization. */
export function findingView(f: Finding, verified: boolean) {
  const view = { ...f, as_of: f.as_of === null ? null : rfc3339(f.as_of), metrics: timesAsRfc3339(f.metrics) }
  return verified ? view : { ...view, how_to_fix: [], how_to_fix_locked: LOCKED_FIX }
}
