// One diagnosis per database and moment, the one every reader shows: the database list (its summary
// columns), the overview, the doctor, the configuration page, /metrics, and the monitor, which applies
// it to alerts and recommendations. currentDiagnosis() answers the stored diagnosis (store diagnoses/)
// while it is current: it covered the database's latest batch, settings and the doctor's thresholds,
// the database's own included (its basis, so a change of them makes the stored one stale), and is under REUSE_MS old. Else it diagnoses now, records the result as the latest (the
// later one wins when several `serve` processes write at once) and answers what it recorded, so a fresh
// answer and a reused one are the same JSON. The monitor asks for a new diagnosis at every pass (maxAgeMs
// 0): its pass is the moment the list and the pages then show until the next batch or REUSE_MS. An API
// caller waits at most API_WAIT_MS (Deps.diagnosisWaitMs in tests) for it, on either thread, then gets
// DiagnosisBusy (the routes' 503), before the HTTP server would close its idle connection.
import type { Deps } from '../context.ts'
import type { RegisteredDatabase } from '../store/types.ts'
import type { StoredDiagnosis } from '../store/diagnoses/types.ts'
import { type Diagnosis, breathe, diagnose } from './index.ts'
import { API_WAIT_MS, DiagnosisBusy } from './diagnosis-worker.ts'
import { type ThresholdOverrides, overridesOf } from './thresholds.ts'

/** How long a diagnosis is reused while its basis holds (a page polls the overview and the doctor at once). */
export const REUSE_MS = 5_000

type CurrentDeps = Parameters<typeof diagnose>[0] & Pick<Deps, 'diagnoser' | 'diagnosisWaitMs'>

export interface CurrentOptions {
  /** Reuse a stored diagnosis at most this old (default REUSE_MS; 0: always diagnose anew). */
  maxAgeMs?: number
  /** Who asks: the monitor's diagnoses go first in the diagnosis worker and yield the loop between rules. */
  by?: 'monitor' | 'api'
}

/** The part of a diagnosis kept as JSON beside the summary columns. */
interface Body {
  findings: Diagnosis['findings']
  groups: Diagnosis['groups']
  failed_rules: string[]
  metrics_summary: Diagnosis['metrics_summary']
}

/**
 * What a diagnosis of the database covers: its latest batch, its settings and the doctor's thresholds
 * (the server's, a test hook, and the database's own: `own`, in the store's rule and key order).
 */
function basisOf(deps: CurrentDeps, db: RegisteredDatabase, own: ThresholdOverrides): string {
  const none = Object.keys(own).length === 0
  const thresholds =
    deps.doctorThresholds === undefined && none
      ? '-'
      : Bun.hash(JSON.stringify(deps.doctorThresholds ?? null) + (none ? '' : JSON.stringify(own))).toString(36)
  return `${db.last_seen_at ?? '-'}:${db.updated_at}:${thresholds}`
}

/**
 * The telemetryVersion each diagnosis this process recorded saw, by database: a batch this process
 * applied since (in the same millisecond as the recorded last_seen_at: a frozen test clock) makes it stale.
 */
const recordedHere = new Map<string, { evaluated_at: number; version: number }>()
/** Diagnoses under way in this process, by database: the overview and the doctor asked at once share one. */
const underWay = new Map<string, { basis: string; diagnosis: Promise<Diagnosis> }>()

function fromStored(s: StoredDiagnosis): Diagnosis {
  const body = JSON.parse(s.body) as Body
  return { status: s.status as Diagnosis['status'], score: s.score, evaluated_at: s.evaluated_at, ...body }
}

function isCurrent(
  deps: CurrentDeps,
  db: RegisteredDatabase,
  s: StoredDiagnosis,
  basis: string,
  now: number,
  maxAgeMs: number,
): boolean {
  if (s.basis !== basis || s.evaluated_at > now || now - s.evaluated_at >= maxAgeMs) return false
  const mine = recordedHere.get(db.id)
  return mine?.evaluated_at !== s.evaluated_at || mine.version === deps.store.telemetryVersion(db.id)
}

/** Diagnoses the database now, records it as its latest, and answers it as recorded. */
async function diagnoseAndRecord(
  deps: CurrentDeps,
  db: RegisteredDatabase,
  basis: string,
  own: ThresholdOverrides,
  now: number,
  by: 'monitor' | 'api',
): Promise<Diagnosis> {
  const version = deps.store.telemetryVersion(db.id)
  let fresh: Diagnosis
  if (by === 'monitor') {
    // In the diagnosis worker when `dbm serve` runs one (another core: it reads the database's thresholds
    // from its own store), else here between turns of the loop.
    fresh = deps.diagnoser?.running
      ? await deps.diagnoser.diagnose(db, now)
      : await diagnose(deps, db, now, { between: breathe, thresholds: own })
  } else {
    // In the diagnosis worker when there is one (its thresholds are the server's); else, on SQLite, the
    // rules run one after the other with the event loop free between them.
    fresh =
      deps.diagnoser?.running && deps.doctorThresholds === undefined
        ? await deps.diagnoser.diagnose(db, now, 'api')
        : await diagnose(
            deps,
            db,
            now,
            deps.store.dialect === 'sqlite' ? { between: breathe, thresholds: own } : { thresholds: own },
          )
  }
  const counts = fresh.metrics_summary.findings
  const active = fresh.metrics_summary.active_queries
  const body: Body = {
    findings: fresh.findings,
    groups: fresh.groups,
    failed_rules: fresh.failed_rules,
    metrics_summary: fresh.metrics_summary,
  }
  const stored: StoredDiagnosis = {
    database_id: db.id,
    evaluated_at: now,
    basis,
    status: fresh.status,
    score: fresh.score,
    findings: { critical: counts.critical, warning: counts.warning, info: counts.info },
    active_queries: typeof active === 'number' ? active : null,
    body: JSON.stringify(body),
  }
  if (await deps.store.diagnoses.recordLatestDiagnosis(stored)) {
    if (recordedHere.size >= 100_000) recordedHere.clear()
    recordedHere.set(db.id, { evaluated_at: now, version })
  }
  return fromStored(stored)
}

/**
 * The database's diagnosis at `now`: the stored one while it is current (see the header), else a new one,
 * recorded. A rule that fails is left out (and logged) as diagnose() does; a busy diagnosis worker, or
 * no answer within the API's wait (callers other than the monitor), rejects with DiagnosisBusy (the
 * routes answer 503).
 */
export function currentDiagnosis(
  deps: CurrentDeps,
  db: RegisteredDatabase,
  now: number,
  options: CurrentOptions = {},
): Promise<Diagnosis> {
  const answer = storedOrNew(deps, db, now, options)
  return (options.by ?? 'api') === 'api' ? within(answer, deps.diagnosisWaitMs ?? API_WAIT_MS) : answer
}

/** `answer`, or DiagnosisBusy once `ms` passed without it (the diagnosis goes on, and is recorded, unwaited). */
function within(answer: Promise<Diagnosis>, ms: number): Promise<Diagnosis> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new DiagnosisBusy(`no diagnosis within ${ms / 1000} s; try again in a few seconds`)),
      ms,
    )
  })
  return Promise.race([answer, late]).finally(() => clearTimeout(timer))
}

async function storedOrNew(
  deps: CurrentDeps,
  db: RegisteredDatabase,
  now: number,
  options: CurrentOptions,
): Promise<Diagnosis> {
  const maxAgeMs = options.maxAgeMs ?? REUSE_MS
  const by = options.by ?? 'api'
  const own = overridesOf(await deps.store.thresholds.databaseThresholds(db.id))
  const basis = basisOf(deps, db, own)
  if (maxAgeMs > 0) {
    const pending = underWay.get(db.id)
    if (pending?.basis === basis) return pending.diagnosis
    const stored = await deps.store.diagnoses.latestDiagnosis(db.id)
    if (stored && isCurrent(deps, db, stored, basis, now, maxAgeMs)) return fromStored(stored)
  }
  const diagnosis = diagnoseAndRecord(deps, db, basis, own, now, by)
  if (underWay.size >= 1000) underWay.clear()
  const entry = { basis, diagnosis }
  underWay.set(db.id, entry)
  const done = () => {
    if (underWay.get(db.id) === entry) underWay.delete(db.id)
  }
  diagnosis.then(done, done)
  return diagnosis
}
