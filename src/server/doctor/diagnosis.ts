// What a diagnosis is and what runs one: the doctor's answer for one database at one moment (index.ts
// computes it) and the worker that computes it off the main thread (diagnosis-worker.ts). A leaf module:
// the server's context names the Diagnoser without importing the doctor, which imports the context back.
import type { RegisteredDatabase } from '../store/types.ts'
import type { FindingGroup } from './grouping.ts'
import type { DoctorStatus } from './score.ts'
import type { ClickHouseFigures, CommonFigures, PostgresFigures } from './figures.ts'
import type { Finding, Severity } from './types.ts'

export interface Diagnosis {
  status: DoctorStatus
  score: number
  evaluated_at: number
  findings: Finding[]
  /** The findings grouped by cause (grouping.ts), worst first: one issue, and one alert, per cause. */
  groups: FindingGroup[]
  /** Rules that failed this time (logged): their earlier findings are neither confirmed nor resolved. */
  failed_rules: string[]
  metrics_summary: DiagnosisFigures
}

/**
 * The doctor's hand-off of its key figures (to the overview, the doctor's answer and the monitor's
 * record): the API's MetricsSummary (src/shared/api/doctor.ts) with its points in time in epoch ms,
 * the engine's own figures present for that engine only.
 */
export type DiagnosisFigures = CommonFigures &
  Partial<PostgresFigures> &
  Partial<ClickHouseFigures> & {
    /** When the figures' data was collected (epoch ms); null before any. */
    as_of: number | null
    findings: Record<Severity, number>
    rules_evaluated: number
  }

export interface Diagnoser {
  /**
   * `priority` `monitor` goes first; `api` (the overview and doctor routes) is limited to
   * API_DIAGNOSES_PER_ORGANIZATION waiting per organization and rejects with DiagnosisBusy beyond that.
   */
  diagnose(db: RegisteredDatabase, now: number, priority?: 'monitor' | 'api'): Promise<Diagnosis>
  /** False once the worker stopped: callers diagnose on their own thread. */
  readonly running: boolean
  close(): Promise<void>
}
