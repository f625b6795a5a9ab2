// What the error-signal rules share (distributed, replication-errors, keeper, buffer-flush, file-io,
// network, slow-reads): each judges a few of ClickHouse's system.events counters by how many the server
// counted over a trailing window (their rate), and system.metrics gauges at their latest value, each
// against a warning and a critical threshold of its rule's table; one finding per rule, at the worst
// severity of its signals, with the rate per minute, and the errors the server counted in that window
// (system.errors through log events) whose names belong to the cause: their messages name the table or
// host where the engine does. A server that does not send a key (an older agent) gives no finding.
import type { ServerCounterKey, ServerGaugeKey } from '../../../../shared/metrics.ts'
import type { DoctorContext } from '../../context.ts'
import { type Category, type FindingDraft, type Rule, type Severity, severityAbove } from '../../types.ts'
import { count } from './common.ts'
import { type ErrorName, topErrors } from './error-names.ts'
import { figure } from './inserts.ts'

export interface Signal {
  /** The wire key (server_metrics). */
  key: ServerCounterKey | ServerGaugeKey
  /** A counter (summed over the window) or a gauge (its latest value). */
  kind: 'counter' | 'gauge'
  /** The engine's name, shown in the finding (system.events / system.metrics). */
  name: string
  /** What one of it is, plural: `refused connection tries to a shard`. */
  what: string
  /** The names of the rule's warning and critical thresholds for it. */
  warning: string
  critical: string
}

export interface SignalRuleSpec {
  id: string
  category: Category
  summary: string
  collectors: readonly string[]
  /** The thresholds: window_s and each signal's warning and critical (counts in the window, or gauge values). */
  thresholds: Record<string, number> & { window_s: number }
  signals: Signal[]
  title: (hits: Hit[]) => string
  /** What it means and what it costs, after the measured numbers. */
  explain: string
  recommendation: string
  how_to_investigate: string[]
  how_to_fix: string[]
  /** system.errors names that belong to this cause (shown with their latest message when counted in the window). */
  errors: string[]
}

export interface Hit {
  signal: Signal
  value: number
  severity: Severity
}

const ORDER: Severity[] = ['info', 'warning', 'critical']

/** The window as the detail says it. */
const windowText = (s: number) => (s % 60 === 0 ? `${s / 60} minute${s === 60 ? '' : 's'}` : `${s} s`)

/** The signals at or past their thresholds, with their values; values of all of them for the metrics. */
export async function measure(ctx: DoctorContext, t: Record<string, number>, signals: Signal[]) {
  const counters = (await ctx.totals('server', t.window_s! * 1000)).get('') ?? {}
  const gauges = (await ctx.serverMetrics())?.payload ?? {}
  const values: Record<string, number | null> = {}
  const hits: Hit[] = []
  for (const signal of signals) {
    const value = signal.kind === 'counter' ? counters[signal.key] : gauges[signal.key]
    if (value === undefined || value === null) continue
    values[signal.key] = value
    const severity = severityAbove(value, t[signal.warning]!, t[signal.critical]!)
    if (severity) hits.push({ signal, value, severity })
  }
  return { hits, values }
}

/** `3 refused connection tries to a shard (DistributedConnectionFailTry, 0.3 a minute)`. */
function describe(hit: Hit, windowS: number): string {
  const rate = hit.signal.kind === 'counter' ? `, ${figure(hit.value / (windowS / 60))} a minute` : ', now'
  return `${count(hit.value)} ${hit.signal.what} (${hit.signal.name}${rate})`
}

export function signalRule(spec: SignalRuleSpec): Rule {
  const rule: Rule = {
    id: spec.id,
    summary: spec.summary,
    collectors: spec.collectors,
    engine: 'clickhouse',
    category: spec.category,
    thresholds: spec.thresholds,
    async check(ctx) {
      const t = ctx.thresholds(rule)
      const windowS = t.window_s ?? spec.thresholds.window_s
      const { hits, values } = await measure(ctx, { ...t, window_s: windowS }, spec.signals)
      if (hits.length === 0) return []
      const severity = hits.map((h) => h.severity).reduce((a, b) => (ORDER.indexOf(b) > ORDER.indexOf(a) ? b : a))
      const errors: ErrorName[] = (await topErrors(ctx, ctx.now - windowS * 1000, ctx.now + 1))
        .filter((e) => spec.errors.includes(e.name))
        .slice(0, 3)
      const thresholds = hits.map(
        (h) =>
          `${h.signal.name}: a warning from ${count(t[h.signal.warning]!)}, critical from ${count(t[h.signal.critical]!)}`,
      )
      const finding: FindingDraft = {
        severity,
        title: spec.title(hits),
        detail:
          `In the last ${windowText(windowS)} ClickHouse counted ${
            hits
              .filter((h) => h.signal.kind === 'counter')
              .map((h) => describe(h, windowS))
              .join(', ') || 'nothing of its counters'
          }` +
          `${
            hits.some((h) => h.signal.kind === 'gauge')
              ? `; now: ${hits
                  .filter((h) => h.signal.kind === 'gauge')
                  .map((h) => describe(h, windowS))
                  .join(', ')}`
              : ''
          } (${thresholds.join('; ')}). ` +
          spec.explain +
          (errors.length > 0
            ? ` The errors the server counted in that time: ${errors.map((e) => `${e.name} × ${count(e.count)} (last: "${e.message}")`).join('; ')}.`
            : ''),
        recommendation: spec.recommendation,
        how_to_investigate: spec.how_to_investigate,
        how_to_fix: spec.how_to_fix,
        metrics: { ...values, window_s: windowS, top_error: errors[0]?.name ?? null },
      }
      return [finding]
    },
  }
  return rule
}
