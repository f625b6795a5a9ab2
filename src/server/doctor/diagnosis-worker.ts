// The main thread's side of the diagnosis worker (worker.ts): `dbm serve` starts one and the health
// monitor sends it each database to diagnose, one at a time, so the doctor's reads and rules run on
// another core while the event loop serves the API and ingest. The worker runs one diagnosis at a time,
// the monitor's before the API's; an organization may have API_DIAGNOSES_PER_ORGANIZATION of the API's
// waiting (more are answered 503), so no tenant's polling can hold back another's alerts or pages. A
// diagnosis that takes longer than DIAGNOSIS_TIMEOUT_MS is given up (and dropped by the worker if it had
// not started; the monitor logs it and tries the database at its next pass). When the worker cannot
// start, or stops, the monitor diagnoses on the main thread as before (logged once).
import type { LogLevel, Logger } from '../../shared/log.ts'
import type { Diagnoser, Diagnosis } from './diagnosis.ts'
import type { WorkerRequest } from './worker.ts'

export const DIAGNOSIS_TIMEOUT_MS = 60_000

/** API diagnoses one organization may have waiting in the worker at once; more are refused (DiagnosisBusy). */
export const API_DIAGNOSES_PER_ORGANIZATION = 2

/** The worker holds as many of the organization's API diagnoses as it takes: the route answers 503. */
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

export async function startDiagnosisWorker(options: {
  dataDir: string
  databaseUrl?: string
  logLevel: LogLevel
  thresholds?: Record<string, Record<string, number>>
  /** `dbm local`'s serve: its diagnoses say what a dbm local user does. */
  local?: boolean
  /** When the serve began serving (Deps.servingSince). */
  servingSince?: number
  log: Logger
}): Promise<Diagnoser> {
  const worker = new Worker(workerUrl())
  const handle = worker as unknown as { ref(): void; unref(): void }
  let running = true
  let nextId = 1
  /** API diagnoses waiting in the worker, by organization. */
  const apiWaiting = new Map<string, number>()
  const pending = new Map<number, { resolve(d: Diagnosis): void; reject(e: Error): void; timer: ReturnType<typeof setTimeout> }>()
  let opened: ((m: { error?: string }) => void) | undefined
  let closed: (() => void) | undefined

  const stopped = (why: string) => {
    if (!running) return
    running = false
    options.log.error('diagnosis worker stopped; diagnosing on the main thread', { cause: why })
    for (const [, p] of pending) {
      clearTimeout(p.timer)
      p.reject(new Error(`diagnosis worker stopped: ${why}`))
    }
    pending.clear()
    opened?.({ error: why })
  }
  worker.onmessage = (event: MessageEvent) => {
    const m = event.data
    if (m.kind === 'opened') opened?.(m)
    else if (m.kind === 'closed') closed?.()
    else if (m.kind === 'diagnosis') {
      const p = pending.get(m.id)
      if (!p) return // given up already
      pending.delete(m.id)
      clearTimeout(p.timer)
      if (pending.size === 0) handle.unref()
      if (m.error !== undefined) p.reject(Object.assign(new Error(m.error), m.unreachable ? { code: m.unreachable } : {}))
      else p.resolve(m.diagnosis as Diagnosis)
    }
  }
  worker.onerror = (event) => stopped((event as ErrorEvent).message ?? 'error')
  worker.addEventListener('close', () => stopped('exited'))

  const send = (m: WorkerRequest) => worker.postMessage(m)
  const answer = await new Promise<{ error?: string }>((resolve) => {
    opened = resolve
    send({ kind: 'open', dataDir: options.dataDir, databaseUrl: options.databaseUrl, logLevel: options.logLevel, thresholds: options.thresholds, local: options.local, servingSince: options.servingSince })
  })
  opened = undefined
  if (answer.error !== undefined) {
    running = false
    worker.terminate()
    throw new Error(`the diagnosis worker cannot open the store: ${answer.error}`)
  }
  handle.unref()

  return {
    get running() {
      return running
    },
    diagnose(db, now, priority = 'monitor') {
      if (!running) return Promise.reject(new Error('diagnosis worker stopped'))
      if (priority === 'api') {
        const waiting = apiWaiting.get(db.org_id) ?? 0
        if (waiting >= API_DIAGNOSES_PER_ORGANIZATION) {
          return Promise.reject(new DiagnosisBusy(`the doctor is busy with this organization's requests; try again in a few seconds`))
        }
        apiWaiting.set(db.org_id, waiting + 1)
      }
      const id = nextId++
      const deadline = Date.now() + DIAGNOSIS_TIMEOUT_MS
      const settled = <T>(f: (v: T) => void) => (v: T) => {
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
          if (pending.size === 0) handle.unref()
          settled(reject)(new DiagnosisBusy(`no diagnosis within ${DIAGNOSIS_TIMEOUT_MS / 1000} s`))
        }, DIAGNOSIS_TIMEOUT_MS)
        ;(timer as { unref?: () => void }).unref?.()
        pending.set(id, { resolve: settled(resolve), reject: settled(reject), timer })
        handle.ref()
        send({ kind: 'diagnose', id, db, now, priority, deadline })
      })
    },
    async close() {
      if (!running) return
      handle.ref()
      await Promise.race([new Promise<void>((resolve) => {
        closed = resolve
        send({ kind: 'close' })
      }), Bun.sleep(5_000)])
      running = false
      worker.terminate()
    },
  }
}
