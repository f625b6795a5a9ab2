// When the monitor works, and which process does: a pass diagnoses the monitored databases (sent data or
// were registered in the last 7 days) least recently diagnosed first, one at a time with the event loop
// free between them, then delivers the due notifications. A scheduled tick takes at most its share of the
// databases (perTickShare), so the first pass after a start, or a fleet's arrival, is spread over the minute. The schedule wakes every few seconds (TICK_MS)
// and passes over the databases that are due (last diagnosed a minute ago or more, or whose agent reported
// them down or up since); retention runs with the first tick and then every ten minutes. Each database's
// evaluation is leased in database_health, so several `dbm serve` processes on one PostgreSQL store share
// the work instead of each doing all of it. Once a minute it logs what it did (`health monitor`: databases
// diagnosed, time spent, and the oldest diagnosis, which says whether it keeps up).
import type { Deps } from '../context.ts'
import { breathe } from '../doctor/index.ts'
import { healthMonitorDefaults } from '../limits.ts'
import { serverMetrics } from '../metrics.ts'
import { isStoreFault } from '../store-outages.ts'
import type { DiagnosisSummary, MonitoredDatabase } from '../store/monitor/evaluations.ts'
import { type AppliedChanges, type PassLookups, newPassLookups } from './diagnosis.ts'
import type { DeliverySummary, Notifier } from './notifications.ts'

const diagnosisOutcomes = {
  ok: serverMetrics.healthMonitorDiagnoses.labels('ok'),
  failed: serverMetrics.healthMonitorDiagnoses.labels('failed'),
}

/** How often the scheduled monitor wakes to diagnose the databases that are due (at most evaluateEveryMs). */
export const TICK_MS = 5_000
/** A process diagnosing a database holds it this long at most; another process may take it after. */
const EVALUATION_LEASE_MS = 60_000

/**
 * The most databases one tick diagnoses: twice an even share of the minute's (so the ticks of a minute
 * can diagnose every database twice over and a backlog clears within half a minute), at least 4.
 */
export function perTickShare(databases: number, tickMs: number, evaluateEveryMs: number): number {
  return Math.max(4, Math.ceil((2 * databases * tickMs) / evaluateEveryMs))
}

export interface EvaluationSummary extends AppliedChanges {
  /** Databases diagnosed. */
  databases: number
  /** Milliseconds spent diagnosing them (the pass's duration, from its first database to its last). */
  duration_ms: number
  /** Databases whose evaluation failed (logged). */
  failed: number
  notifications: DeliverySummary
}

/** Diagnoses one leased database and applies the diagnosis; its summary, or undefined when the database is gone. */
export type Evaluate = (
  monitored: MonitoredDatabase,
  now: number,
  summary: EvaluationSummary,
  lookups: PassLookups,
) => Promise<DiagnosisSummary | undefined>

export interface ScheduleSettings {
  evaluateEveryMs: number
  retentionEveryMs: number
  tickMs: number
}

export interface Schedule {
  /**
   * One pass at `now`: every monitored database, or with `dueBefore` those last diagnosed before it; then
   * the due notifications. `spread`: at most a tick's share of them (perTickShare), the least recently
   * diagnosed first, as the scheduled ticks do.
   */
  pass(now: number, dueBefore?: number, spread?: boolean): Promise<EvaluationSummary>
  start(): void
  stop(): Promise<void>
}

export function createSchedule(
  deps: Deps,
  settings: ScheduleSettings,
  jobs: { evaluate: Evaluate; notifier: Notifier; retention(now: number): Promise<unknown> },
): Schedule {
  const { store, log } = deps
  const health = store.monitor
  const { evaluateEveryMs, retentionEveryMs } = settings

  /** Logs a failed pass, unless the store could not be reached or refused writes: each episode is logged once by the app. */
  function failed(what: string, error: unknown, fields: Record<string, unknown> = {}) {
    if (!isStoreFault(error)) log.error(what, { ...fields, cause: (error as Error).message })
  }

  /** This monitor's name in database_health's leases. */
  const instance = Bun.randomUUIDv7()
  /** How old the least recently diagnosed database's diagnosis was at the latest pass. */
  let oldestDiagnosisMs = 0

  /**
   * Diagnoses the monitored databases this process can lease, least recently diagnosed first, with the
   * event loop free between them; with `dueBefore`, only those last diagnosed before it. Then delivers
   * the notifications that are due.
   */
  async function pass(now: number, dueBefore?: number, spread = false): Promise<EvaluationSummary> {
    const summary: EvaluationSummary = {
      databases: 0,
      duration_ms: 0,
      failed: 0,
      recommendations: { opened: 0, resolved: 0 },
      alerts: { opened: 0, resolved: 0 },
      notifications: { sent: 0, failed: 0, given_up: 0 },
    }
    const started = performance.now()
    const lookups = newPassLookups()
    const monitored = await health.monitoredDatabases(now - healthMonitorDefaults.silentDatabaseMs)
    // The list is least recently diagnosed first: the first one's age is the oldest diagnosis's.
    const oldest = monitored[0]?.evaluated_at
    oldestDiagnosisMs = oldest === null || oldest === undefined ? 0 : Math.max(0, now - oldest)
    // A tick diagnoses at most its share of the databases (those reported down or up excepted), so that
    // when a fleet arrives (or the server starts) its first diagnoses are spread over the minute instead
    // of one pass over every database at once, whose writes would show in the ingest tail.
    let left = spread ? perTickShare(monitored.length, settings.tickMs, evaluateEveryMs) : Number.POSITIVE_INFINITY
    for (const m of monitored) {
      // A database that went down or came back since its diagnosis is due at once: its alert opens (or
      // resolves) within a tick of the agent's report, not at the next minute's pass. Ingest keeps
      // state_since at or before the server's clock when the report came, so a forged or fast clock cannot
      // keep it "changed"; and not within changedFloorMs of the previous diagnosis, so a flapping database
      // is diagnosed at most twice a minute.
      const changed =
        m.state_since !== null &&
        m.evaluated_at !== null &&
        m.state_since > m.evaluated_at &&
        now - m.evaluated_at >= healthMonitorDefaults.changedFloorMs
      if (dueBefore !== undefined && m.evaluated_at !== null && m.evaluated_at >= dueBefore && !changed) continue
      if (!changed && left <= 0) continue
      let claimed = false
      try {
        claimed = await health.claimEvaluation(
          m.id,
          instance,
          now,
          now + EVALUATION_LEASE_MS,
          changed ? undefined : dueBefore,
        )
        if (claimed) {
          if (!changed) left--
          const recorded = await jobs.evaluate(m, now, summary, lookups)
          // Recording the evaluation gives up the lease (a deleted database's row went with it).
          if (recorded) await health.recordDiagnosis(m.id, instance, recorded, now)
          diagnosisOutcomes.ok.inc()
        }
      } catch (e) {
        summary.failed++
        diagnosisOutcomes.failed.inc()
        failed('health evaluation failed', e, { database: m.id })
        // Another process (or the next pass) may try it at once.
        if (claimed) await health.releaseEvaluation(m.id, instance).catch(() => {})
      }
      if (claimed) await breathe()
    }
    summary.duration_ms = Math.round(performance.now() - started)
    summary.notifications = await jobs.notifier.deliver(now)
    await jobs.notifier.refreshAlertmanagers(now).catch((e) => failed('alertmanager refresh failed', e))
    serverMetrics.healthMonitorRunDuration.labels().since(started)
    if (log.enabled('debug')) {
      log.debug('health evaluation', {
        databases: summary.databases,
        duration_ms: summary.duration_ms,
        failed: summary.failed,
        alerts_opened: summary.alerts.opened,
        alerts_resolved: summary.alerts.resolved,
        notifications_sent: summary.notifications.sent,
      })
    }
    return summary
  }

  let timer: ReturnType<typeof setInterval> | undefined
  let running: Promise<void> | undefined
  let lastRetention = Number.NEGATIVE_INFINITY
  const tickMs = Math.min(settings.tickMs, evaluateEveryMs)
  /** What the scheduled ticks did since the last `health monitor` log line. */
  let period = { since: deps.clock(), databases: 0, busy_ms: 0, failed: 0, oldest_ms: 0 }

  const tick = async () => {
    const now = deps.clock()
    try {
      // Due: last diagnosed at least a minute ago, less one tick (so each is diagnosed every 55 to 60 s).
      const done = await pass(now, now - evaluateEveryMs + tickMs, true)
      period.oldest_ms = Math.max(period.oldest_ms, oldestDiagnosisMs)
      period.databases += done.databases
      period.busy_ms += done.duration_ms
      period.failed += done.failed
    } catch (e) {
      failed('health evaluation failed', e)
    }
    if (now - period.since >= evaluateEveryMs) {
      // The oldest diagnosis seen at a tick: above evaluateEveryMs + a tick, the monitor is falling behind.
      if (period.databases > 0) {
        log.info('health monitor', {
          diagnoses: period.databases,
          busy_ms: period.busy_ms,
          failed: period.failed,
          oldest_diagnosis_s: Math.round(period.oldest_ms / 1000),
        })
      }
      period = { since: now, databases: 0, busy_ms: 0, failed: 0, oldest_ms: 0 }
    }
    if (now - lastRetention < retentionEveryMs) return
    lastRetention = now
    try {
      await jobs.retention(now)
    } catch (e) {
      failed('retention failed', e)
    }
  }

  return {
    pass,
    start() {
      if (timer) return
      timer = setInterval(() => {
        if (running) return // the previous tick is still going: this one is skipped
        running = tick().finally(() => {
          running = undefined
        })
      }, tickMs)
    },
    async stop() {
      if (timer) clearInterval(timer)
      timer = undefined
      await running
    },
  }
}
