// The monitor that `dbm serve` runs: it decides when each database is diagnosed and what follows from
// the diagnosis. One module per job:
//   - schedule.ts: passes over the monitored databases, about once a minute each, and the leases that
//     let several `dbm serve` processes on one PostgreSQL store share them; retention every ten minutes;
//   - diagnosis.ts: a database's diagnosis applied to its recommendations and its alerts (one per cause
//     with a critical finding), queueing a notification per alert state change and repeats;
//   - notifications.ts: delivery of those notifications by mail, webhook and alert destinations, held by
//     silences and retried for a day, and the Alertmanagers' once-a-minute refresh;
//   - retention.ts: old telemetry deleted and minute buckets compacted.
// alerts/ is the alerting subsystem these call: what a message says (messages.ts, payloads.ts), where
// it goes (routing.ts, destinations.ts) and how it is posted (post.ts). The monitor shares the event
// loop with the API, so no part of it holds the loop for long. Everything takes the time as a parameter:
// tests call runOnce(now) and runRetention(now) directly.
import type { Deps } from '../context.ts'
import { healthMonitorDefaults } from '../limits.ts'
import { alertMail, webhookPayload, webhookSignature } from '../alerts/messages.ts'
import { createDiagnosisApplier } from './diagnosis.ts'
import { createNotifier } from './notifications.ts'
import { type RetentionSummary, runRetention } from './retention.ts'
import { type EvaluationSummary, TICK_MS, createSchedule } from './schedule.ts'

export { alertMail, webhookPayload, webhookSignature }
export { type WebhookAttempt, type WebhookSendOptions, postWebhook, webhookTarget } from './notifications.ts'
export type { EvaluationSummary, RetentionSummary }

export interface MonitorOptions {
  /** Telemetry retention of verified organizations (DBM_RETENTION_DAYS). */
  retentionDays: number
  evaluateEveryMs?: number
  /** How often the schedule wakes to diagnose the databases due (default TICK_MS, at most evaluateEveryMs). */
  tickMs?: number
  retentionEveryMs?: number
  webhookTimeoutMs?: number
}

export interface Monitor {
  /** One evaluation of every monitored database at `now`, then the due notifications. */
  runOnce(now?: number): Promise<EvaluationSummary>
  /** One evaluation of the monitored databases last diagnosed before `dueBefore` (what a scheduled tick does). */
  runDue(now: number, dueBefore: number, spread?: boolean): Promise<EvaluationSummary>
  /** Retention and compaction at `now`. */
  runRetention(now?: number): Promise<RetentionSummary>
  /** Runs both on their schedule (evaluation first, retention with the first evaluation and then every retentionEveryMs). */
  start(): void
  /** Stops the schedule and waits for a pass in progress. */
  stop(): Promise<void>
}

export function createMonitor(deps: Deps, options: MonitorOptions): Monitor {
  const evaluateEveryMs = options.evaluateEveryMs ?? healthMonitorDefaults.evaluateEveryMs
  const retentionEveryMs = options.retentionEveryMs ?? healthMonitorDefaults.retentionEveryMs
  const webhookTimeoutMs = options.webhookTimeoutMs ?? healthMonitorDefaults.webhookTimeoutMs
  const retention = (now: number) => runRetention(deps, options.retentionDays, now)
  const schedule = createSchedule(
    deps,
    { evaluateEveryMs, retentionEveryMs, tickMs: options.tickMs ?? TICK_MS },
    {
      evaluate: createDiagnosisApplier(deps).evaluate,
      notifier: createNotifier(deps, { evaluateEveryMs, webhookTimeoutMs }),
      retention,
    },
  )
  return {
    runOnce: (now = deps.clock()) => schedule.pass(now),
    runDue: (now, dueBefore, spread) => schedule.pass(now, dueBefore, spread),
    runRetention: (now = deps.clock()) => retention(now),
    start: schedule.start,
    stop: schedule.stop,
  }
}
