// The main thread's side of the ingest writer (worker.ts): `dbm serve` starts one, and the ingest route
// hands it each admitted batch's bytes (transferred, not copied). The answer comes once the batch's
// transaction committed; the route then answers the agent. A writer thread that dies, or that answers no
// batch for WRITER_DEADLINE_MS (hung: it is ended), answers every batch it held with 503 and Retry-After
// (the agent sends them again; their batch_id makes each apply once) and a new thread takes its place.
// When no thread can be started, the writer stops and the route applies batches itself, as before
// (logged once).
import type { LogLevel, Logger } from '../../shared/log.ts'
import { HttpError } from '../http-error.ts'
import { storeUnavailable } from '../store-outages.ts'
import type { StoreWriteFaults } from '../store/write-faults.ts'
import { IDLE_TIMEOUT_S } from '../server-options.ts'
import { type IngestOutcome, fromRefusal } from './apply.ts'
import type { FailureMessage, WriterAnswer, WriterIngest, WriterRequest } from './worker.ts'

/**
 * How long a batch may wait in the writer for its answer before the writer counts as hung: under the
 * HTTP server's idle timeout, so that the agent gets the 503 before its connection is closed.
 */
export const WRITER_DEADLINE_MS = Math.min(25_000, (IDLE_TIMEOUT_S - 5) * 1000)

/** The Retry-After of a batch the writer did not answer (it died or hung): a new writer takes it then. */
export const WRITER_RETRY_AFTER_S = 2

export interface IngestWriter {
  /** False once the writer stopped for good (no thread could start): the route applies batches itself. */
  readonly running: boolean
  /** Applies the batch of the organization `orgId` from its body's bytes (given away: transferred). */
  ingest(orgId: string, body: ArrayBuffer, ageMs?: number, sentAt?: number): Promise<IngestOutcome>
  /** Batches sent to the thread and not answered yet. */
  readonly inFlight: number
  /** Threads started after one died or hung (tests; the log says each). */
  readonly restarts: number
  /** The thread in use now (tests end it to check that no batch is lost). */
  readonly worker: Worker
  close(): Promise<void>
}

/**
 * Where worker.ts is. From source, next to this file. In the compiled binary it is an entry point of its
 * own (scripts/build.ts), embedded under the entry points' common root (src/) beside the binary's own
 * module, whose import.meta.url is `file:///$bunfs/root/<binary name>`.
 */
function workerUrl(): string {
  const compiled = import.meta.url.includes('/$bunfs/')
  return new URL(compiled ? './server/ingest-writer/worker.ts' : './worker.ts', import.meta.url).href
}

interface Waiting {
  request: WriterIngest
  resolve(outcome: IngestOutcome): void
  reject(e: Error): void
  /** performance.now() when it was sent to the thread (undefined: waiting for a thread to be ready). */
  sentAt?: number
}

/** The failure as the app's onError sees an error of the route: logged with its cause, a 500. */
function failureError(f: FailureMessage): Error {
  return Object.assign(new Error(f.message), { name: f.name, sql: f.sql, code: f.code })
}

function notAnswered(why: string): HttpError {
  return new HttpError(503, `the batch was not applied (${why}); send it again`, {
    'retry-after': String(WRITER_RETRY_AFTER_S),
  })
}

export async function startIngestWriter(options: {
  dataDir: string
  databaseUrl?: string
  logLevel: LogLevel
  log: Logger
  /** The main store's write-fault episodes, told of the writer's refused and applied batches. */
  writeFaults?: StoreWriteFaults
  /** The store's rollup spread (SqlStore's option; `dbm serve`: limits.ts rollupSpreadMs). */
  rollupSpreadMs?: number
  /** The main thread's clock (Deps.clock): the batches' times. */
  clock: () => number
  /** Tests shorten the deadline (default WRITER_DEADLINE_MS). */
  deadlineMs?: number
  /** Tests start a worker module of their own. */
  url?: string
}): Promise<IngestWriter> {
  const deadlineMs = options.deadlineMs ?? WRITER_DEADLINE_MS
  const { log } = options
  let running = true
  let ready = false
  let restarts = 0
  let nextId = 1
  const pending = new Map<number, Waiting>()
  let worker: Worker
  let closed: (() => void) | undefined

  // The thread keeps the process alive only while a batch waits for it.
  let idle: (() => void) | undefined
  const hold = () => {
    const handle = worker as unknown as { ref(): void; unref(): void }
    if (pending.size > 0) handle.ref()
    else {
      handle.unref()
      idle?.()
    }
  }
  const send = (m: WriterRequest, transfer?: Transferable[]) => worker.postMessage(m, transfer ?? [])
  const sendBatch = (p: Waiting) => {
    p.sentAt = performance.now()
    send(p.request, [p.request.body])
  }

  /** Every batch the thread held is answered 503 (it may or may not have committed: batch_id decides on the retry). */
  const failHeld = (why: string) => {
    for (const [id, p] of pending) {
      if (p.sentAt === undefined) continue
      pending.delete(id)
      p.reject(notAnswered(why))
    }
    hold()
  }

  const stopped = (why: string) => {
    if (!running) return
    running = false
    ready = false
    log.error('ingest writer stopped; the route applies batches itself', { cause: why })
    for (const [, p] of pending) p.reject(notAnswered(why))
    pending.clear()
    clearInterval(watch)
  }

  const answered = (m: WriterAnswer) => {
    if (m.kind === 'closed') {
      closed?.()
      return
    }
    if (m.kind === 'opened') return
    if (m.kind === 'log') {
      log[m.level](m.message, m.fields)
      return
    }
    const p = pending.get(m.id)
    if (!p) return
    pending.delete(m.id)
    hold()
    // The writer's own connection refused or took a write: the main thread's write-fault episodes (the
    // log's one line per episode, /healthz's reason) learn it as from the main connection's writes.
    if (m.kind === 'ingested') {
      if (m.outcome.kind === 'applied') options.writeFaults?.wrote()
      p.resolve(m.outcome)
    } else if (m.kind === 'refused') {
      if (m.writeFault) options.writeFaults?.failed(m.writeFault)
      p.reject(fromRefusal(m.refusal))
    } else p.reject(m.unreachable ? storeUnavailable() : failureError(m.failure))
  }

  /** A new thread with its store open; rejects with why it could not open it. */
  const spawn = () =>
    new Promise<void>((resolve, reject) => {
      const w = new Worker(options.url ?? workerUrl())
      worker = w
      ready = false
      const mine = () => w === worker && running
      w.onmessage = (event: MessageEvent<WriterAnswer>) => {
        if (!mine()) return
        const m = event.data
        if (m.kind === 'opened') {
          if (m.error !== undefined) reject(new Error(m.error))
          else resolve()
        } else answered(m)
      }
      w.onerror = (event) => {
        const why = (event as ErrorEvent).message ?? 'error'
        if (mine() && ready) replace(`it failed: ${why}`)
        reject(new Error(why))
      }
      w.addEventListener('close', () => {
        if (mine() && ready) replace('it exited')
        reject(new Error('exited'))
      })
      send({
        kind: 'open',
        dataDir: options.dataDir,
        databaseUrl: options.databaseUrl,
        logLevel: options.logLevel,
        rollupSpreadMs: options.rollupSpreadMs ?? 0,
      })
    })

  /** The thread and the batches waiting for one, once it can take them. */
  const takeOver = () => {
    ready = true
    for (const [, p] of pending) if (p.sentAt === undefined) sendBatch(p)
    hold()
  }

  /** The thread died or hung: its batches are answered 503, and another thread starts for the rest. */
  const replace = (why: string) => {
    if (!running || !ready) return
    ready = false
    restarts++
    log.error('ingest writer restarted; the batches it held are answered 503', { cause: why, batches: pending.size })
    const old = worker
    failHeld(why)
    old.terminate()
    spawn().then(takeOver, (e) => {
      worker.terminate()
      stopped(`cannot restart: ${(e as Error).message}`)
    })
  }

  // A thread that answered none of its batches within the deadline is hung (a batch it was sent has
  // waited that long): it is ended and replaced. One timer for all the batches, not one each.
  const watch = setInterval(
    () => {
      if (!ready) return
      const now = performance.now()
      for (const [, p] of pending) {
        if (p.sentAt !== undefined && now - p.sentAt > deadlineMs) {
          replace(`no answer within ${Math.round(deadlineMs / 1000)} s`)
          return
        }
      }
    },
    Math.max(10, Math.min(1_000, deadlineMs / 4)),
  )
  ;(watch as { unref?: () => void }).unref?.()

  try {
    await spawn()
  } catch (e) {
    running = false
    clearInterval(watch)
    worker!.terminate()
    throw new Error(`the ingest writer cannot open the store: ${(e as Error).message}`)
  }
  takeOver()

  return {
    get running() {
      return running
    },
    get restarts() {
      return restarts
    },
    get inFlight() {
      let n = 0
      for (const [, p] of pending) if (p.sentAt !== undefined) n++
      return n
    },
    get worker() {
      return worker
    },
    ingest(orgId, body, ageMs, sentAt) {
      if (!running) return Promise.reject(notAnswered('the ingest writer stopped'))
      const request: WriterIngest = {
        kind: 'ingest',
        id: nextId++,
        orgId,
        body,
        now: options.clock(),
        ageMs,
        sentAt,
      }
      return new Promise<IngestOutcome>((resolve, reject) => {
        const p: Waiting = { request, resolve, reject }
        pending.set(request.id, p)
        hold()
        if (ready) sendBatch(p)
      })
    },
    async close() {
      if (!running) return
      ;(worker as unknown as { ref(): void }).ref()
      // Batches in flight finish first (the server stopped taking new ones).
      if (pending.size > 0) await Promise.race([new Promise<void>((resolve) => (idle = resolve)), Bun.sleep(5_000)])
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
      ready = false
      clearInterval(watch)
      worker.terminate()
    },
  }
}
