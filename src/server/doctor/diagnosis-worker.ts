// The main thread's side of the diagnosis worker (worker.ts): `dbm serve` starts one and the health
// monitor sends it each database to diagnose, one at a time, so the doctor's reads and rules run on
// another core while the event loop serves the API and ingest. The worker runs one diagnosis at a time,
// the monitor's before the API's; an organization may have API_DIAGNOSES_PER_ORGANIZATION of the API's
// waiting (more are answered 503), so no tenant's polling can hold back another's alerts or pages.
// Deadlines: the monitor waits DIAGNOSIS_TIMEOUT_MS for an answer and an API caller API_WAIT_MS (under
// the HTTP server's idle timeout, so the route answers 503 before the connection is closed); a request
// whose caller gave up before it started is dropped by the worker. A diagnosis that has run
// DIAGNOSIS_RUN_LIMIT_MS is stuck (whatever it is stuck on): the worker thread is ended, its caller
// answered DiagnosisBusy, and a new worker takes the requests still waiting, so one organization's
// database never holds up every other's. When the worker cannot start, or stops, the monitor diagnoses
// on the main thread as before (logged once).
import type { WriteRefusalSpan } from '../store/write-faults.ts'
import type { LogLevel, Logger } from '../../shared/log.ts'
import type { Diagnoser, Diagnosis } from './diagnosis.ts'
import type { WorkerDiagnose, WorkerRequest } from './worker.ts'

/** How long the health monitor waits for one diagnosis. */
export const DIAGNOSIS_TIMEOUT_MS = 60_000

/**
 * How long an API request (overview, doctor, configuration) waits for a diagnosis before it is answered
 * 503 with Retry-After: well under the 30 s after which Bun closes an idle connection (serve.ts).
 */
export const API_WAIT_MS = 20_000

/** A diagnosis still running after this long is stuck: the worker is ended and started again. */
export const DIAGNOSIS_RUN_LIMIT_MS = 30_000

/** API diagnoses one organization may have waiting in the worker at once; more are refused (DiagnosisBusy). */
export const API_DIAGNOSES_PER_ORGANIZATION = 2

/** No diagnosis for the caller now (the worker is busy, or the diagnosis overran): the routes answer 503. */
export class DiagnosisBusy extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'DiagnosisBusy'
  }
}

/**
 * Where worker.ts is. From source, next to this file. In the compiled binary it is an entry point of its
 * own (scripts/build.ts), embedded under the entry points' common root (src/) beside the binary's own
 * module, whose import.meta.url is `file:///$bunfs/root/<binary name>`.
 */
function workerUrl(): string {
  const compiled = import.meta.url.includes('/$bunfs/')
  return new URL(compiled ? './server/doctor/worker.ts' : './worker.ts', import.meta.url).href
}

interface Waiting {
  request: WorkerDiagnose
  resolve(d: Diagnosis): void
  reject(e: Error): void
  timer: ReturnType<typeof setTimeout>
}

export async function startDiagnosisWorker(options: {
  dataDir: string
  databaseUrl?: string
  logLevel: LogLevel
  thresholds?: Record<string, Record<string, number>>
  /** `dbm local`'s serve: its diagnoses say what a dbm local user does. */
  local?: boolean
  /** When the serve began serving (Deps.servingSince). */
  servingSince?: number
  /** The main store's refused writes (store.writeFaults), sent with each diagnosis: the doctor's setup. */
  storeRefusals?: () => WriteRefusalSpan | undefined
  /** The serve's batches shed for want of room (ingest-admission.ts), sent with each diagnosis likewise. */
  ingestShedding?: () => WriteRefusalSpan | undefined
  log: Logger
  /** Tests shorten the waits and the run limit (defaults: API_WAIT_MS, DIAGNOSIS_TIMEOUT_MS, DIAGNOSIS_RUN_LIMIT_MS). */
  limits?: { apiWaitMs?: number; monitorWaitMs?: number; runMs?: number }
  /** Tests start a worker module of their own (one that adds a rule that never ends). */
  url?: string
}): Promise<Diagnoser> {
  const apiWaitMs = options.limits?.apiWaitMs ?? API_WAIT_MS
  const monitorWaitMs = options.limits?.monitorWaitMs ?? DIAGNOSIS_TIMEOUT_MS
  const runMs = options.limits?.runMs ?? DIAGNOSIS_RUN_LIMIT_MS
  let running = true
  let nextId = 1
  /** API diagnoses waiting in the worker, by organization. */
  const apiWaiting = new Map<string, number>()
  /** Every request whose caller still waits, in the order asked (ids grow). */
  const pending = new Map<number, Waiting>()
  /** The worker in use; `ready` once it opened its store (requests asked before are sent then). */
  let worker: Worker
  let ready = false
  /** The diagnosis the worker said it started, with the timer that ends the worker if it overruns. */
  let current: { id: number; database: string; timer: ReturnType<typeof setTimeout> } | undefined
  let closed: (() => void) | undefined

  // The worker keeps the process alive only while someone waits for it.
  const hold = () => {
    const handle = worker as unknown as { ref(): void; unref(): void }
    if (pending.size > 0) handle.ref()
    else handle.unref()
  }
  const send = (m: WorkerRequest) => worker.postMessage(m)
  const clearCurrent = () => {
    if (current) clearTimeout(current.timer)
    current = undefined
  }

  const stopped = (why: string) => {
    if (!running) return
    running = false
    ready = false
    clearCurrent()
    options.log.error('diagnosis worker stopped; diagnosing on the main thread', { cause: why })
    for (const [, p] of pending) {
      clearTimeout(p.timer)
      p.reject(new Error(`diagnosis worker stopped: ${why}`))
    }
    pending.clear()
  }

  /** A new worker thread with its store open; rejects with why it could not open it. */
  const spawn = () =>
    new Promise<void>((resolve, reject) => {
      const w = new Worker(options.url ?? workerUrl())
      worker = w
      ready = false
      const mine = () => w === worker && running
      w.onmessage = (event: MessageEvent) => {
        if (!mine()) return
        const m = event.data
        if (m.kind === 'opened') {
          if (m.error !== undefined) reject(new Error(m.error))
          else resolve()
        } else if (m.kind === 'closed') closed?.()
        else if (m.kind === 'started') {
          clearCurrent()
          const timer = setTimeout(() => overran(m.id), runMs)
          ;(timer as { unref?: () => void }).unref?.()
          current = { id: m.id, database: m.database, timer }
        } else if (m.kind === 'diagnosis') {
          if (current?.id === m.id) clearCurrent()
          const p = pending.get(m.id)
          if (!p) return // given up already
          pending.delete(m.id)
          clearTimeout(p.timer)
          hold()
          if (m.error !== undefined)
            p.reject(Object.assign(new Error(m.error), m.unreachable ? { code: m.unreachable } : {}))
          else p.resolve(m.diagnosis as Diagnosis)
        }
      }
      w.onerror = (event) => {
        if (mine()) stopped((event as ErrorEvent).message ?? 'error')
        reject(new Error((event as ErrorEvent).message ?? 'error'))
      }
      w.addEventListener('close', () => {
        if (mine()) stopped('exited')
        reject(new Error('exited'))
      })
      send({
        kind: 'open',
        dataDir: options.dataDir,
        databaseUrl: options.databaseUrl,
        logLevel: options.logLevel,
        thresholds: options.thresholds,
        local: options.local,
        servingSince: options.servingSince,
      })
    })

  /** The worker and its requests once it can take them: every request still waited for, in order. */
  const takeOver = () => {
    ready = true
    for (const [, p] of pending) send(p.request)
    hold()
  }

  /** The diagnosis `id` ran past the run limit: end the worker, answer its caller, start another for the rest. */
  const overran = (id: number) => {
    if (!running || current?.id !== id) return
    const database = current.database
    clearCurrent()
    options.log.error('diagnosis overran; restarting the diagnosis worker', { database, limit_ms: runMs })
    const stuck = worker
    ready = false
    const p = pending.get(id)
    if (p) {
      pending.delete(id)
      clearTimeout(p.timer)
      p.reject(new DiagnosisBusy(`the diagnosis took longer than ${runMs / 1000} s and was stopped; try again later`))
    }
    const restarted = spawn()
    stuck.terminate()
    restarted.then(takeOver, (e) => {
      worker.terminate()
      stopped(`cannot restart: ${(e as Error).message}`)
    })
  }

  try {
    await spawn()
  } catch (e) {
    running = false
    worker!.terminate()
    throw new Error(`the diagnosis worker cannot open the store: ${(e as Error).message}`)
  }
  takeOver()

  return {
    get running() {
      return running
    },
    diagnose(db, now, priority = 'monitor') {
      if (!running) return Promise.reject(new Error('diagnosis worker stopped'))
      if (priority === 'api') {
        const waiting = apiWaiting.get(db.org_id) ?? 0
        if (waiting >= API_DIAGNOSES_PER_ORGANIZATION) {
          return Promise.reject(
            new DiagnosisBusy(`the doctor is busy with this organization's requests; try again in a few seconds`),
          )
        }
        apiWaiting.set(db.org_id, waiting + 1)
      }
      const id = nextId++
      const waitMs = priority === 'api' ? apiWaitMs : monitorWaitMs
      const request: WorkerDiagnose = {
        kind: 'diagnose',
        id,
        db,
        now,
        priority,
        deadline: Date.now() + waitMs,
        storeRefusals: options.storeRefusals?.(),
        ingestShedding: options.ingestShedding?.(),
      }
      const settled =
        <T>(f: (v: T) => void) =>
        (v: T) => {
          if (priority === 'api') {
            const left = (apiWaiting.get(db.org_id) ?? 1) - 1
            if (left > 0) apiWaiting.set(db.org_id, left)
            else apiWaiting.delete(db.org_id)
          }
          f(v)
        }
      return new Promise<Diagnosis>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id)
          hold()
          settled(reject)(
            new DiagnosisBusy(
              `no diagnosis within ${waitMs / 1000} s${priority === 'api' ? '; try again in a few seconds' : ''}`,
            ),
          )
        }, waitMs)
        ;(timer as { unref?: () => void }).unref?.()
        pending.set(id, { request, resolve: settled(resolve), reject: settled(reject), timer })
        hold()
        if (ready) send(request)
      })
    },
    async close() {
      if (!running) return
      ;(worker as unknown as { ref(): void }).ref()
      if (ready) {
        await Promise.race([
          new Promise<void>((resolve) => {
            closed = resolve
            send({ kind: 'close' })
          }),
          Bun.sleep(5_000),
        ])
      }
      running = false
      clearCurrent()
      worker.terminate()
    },
  }
}
