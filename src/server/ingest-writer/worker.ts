// The ingest writer: a thread of `dbm serve` that parses, checks and applies agent batches (apply.ts), so
// that the event loop only speaks HTTP. It opens its own connection to the store (SQLite: a second
// writing connection to the file, which waits for the main thread's transactions on busy_timeout;
// PostgreSQL: a small pool of its own) and answers each batch once its transaction committed (or with
// the refusal the route would have answered). Started by client.ts; an entry point of the build of its own
// (scripts/build.ts).
import { join } from 'node:path'
import { type LogFields, type LogLevel, type Logger, logLevels } from '../../shared/log.ts'
import { HttpError } from '../http-error.ts'
import { storeTryLater } from '../store/driver.ts'
import type { WriteRefusal } from '../store/write-faults.ts'
import { storeFaultAnswer } from '../store-outages.ts'
import { isStoreUnreachable } from '../store/reachability.ts'
import { SqlStore } from '../store/sql-store.ts'
import { SqliteDriver, isSqliteBusy } from '../store/sqlite/driver.ts'
import { type ApplyContext, type IngestOutcome, type RefusalMessage, applyIngest, toRefusal } from './apply.ts'

export interface WriterOpen {
  kind: 'open'
  dataDir: string
  databaseUrl?: string
  logLevel: LogLevel
  /** SqlStore's rollupSpreadMs (the main thread's store has the same). */
  rollupSpreadMs: number
}
export interface WriterIngest {
  kind: 'ingest'
  id: number
  orgId: string
  /** The request body's bytes, transferred (not copied) to this thread. */
  body: ArrayBuffer
  /** The main thread's clock as it sent the batch (a test's clock may be moved; Date.now otherwise). */
  now: number
  /** How long the agent held the batch (batch-age.ts), when its header said. */
  ageMs?: number
  /** The agent's clock as it sent the batch (X-Dbm-Sent-At, batch-age.ts), when its header said. */
  sentAt?: number
}
export interface WriterClose {
  kind: 'close'
}
export type WriterRequest = WriterOpen | WriterIngest | WriterClose

/** An error that is neither a refusal nor the store being away, as the main thread logs it. */
export interface FailureMessage {
  name: string
  message: string
  sql?: string
  /** The error's code, or the one that made the store unreachable (isStoreUnreachable reads it). */
  code?: string
}

export type WriterAnswer =
  | { kind: 'opened'; error?: string }
  | { kind: 'ingested'; id: number; outcome: IngestOutcome }
  | {
      kind: 'refused'
      id: number
      refusal: RefusalMessage
      /** A write the store refused for a reason that passes (StoreTryLater): the main thread's episodes learn it. */
      writeFault?: WriteRefusal
    }
  | { kind: 'failed'; id: number; failure: FailureMessage; unreachable: boolean }
  | { kind: 'closed' }
  | { kind: 'log'; level: LogLevel; message: string; fields?: LogFields }

declare const self: Worker

let store: SqlStore | undefined

/** Lines of `level` and above go to the main thread, which writes them with its own logger (its format, its sink). */
function forwardingLogger(level: LogLevel): Logger {
  const min = logLevels.indexOf(level)
  const line = (l: LogLevel) => (message: string, fields?: LogFields) => {
    if (logLevels.indexOf(l) >= min) answer({ kind: 'log', level: l, message, fields })
  }
  return {
    enabled: (l) => logLevels.indexOf(l) >= min,
    debug: line('debug'),
    info: line('info'),
    warn: line('warn'),
    error: line('error'),
  }
}

let log = forwardingLogger('info')

async function open(m: WriterOpen) {
  log = forwardingLogger(m.logLevel)
  const driver = m.databaseUrl
    ? new (await import('../store/postgres/driver.ts')).PostgresDriver(m.databaseUrl, { max: 4 })
    : new SqliteDriver(join(m.dataDir, 'dbm.sqlite'), { writer: true })
  store = new SqlStore(driver, { rollupSpreadMs: m.rollupSpreadMs })
}

const answer = (m: WriterAnswer) => postMessage(m)

async function ingest(m: WriterIngest) {
  try {
    if (!store) throw new Error('the ingest writer has no store')
    // The batch's times are the main thread's clock at its arrival, moved on by the time spent here.
    const offset = m.now - Date.now()
    const ctx: ApplyContext = { store, clock: () => Date.now() + offset, log }
    answer({ kind: 'ingested', id: m.id, outcome: await applyIngest(ctx, m.orgId, m.body, m.ageMs, m.sentAt) })
  } catch (e) {
    // A fault of the store that passes (SQLITE_FULL, PostgreSQL's class 53...) or the store away: the
    // app's 503 naming the cause (store-outages.ts), as when the route applied the batch itself.
    const fault = e instanceof HttpError ? e : storeFaultAnswer(e)
    const tryLater = storeTryLater(e)
    const writeFault = tryLater
      ? { code: tryLater.code, reason: tryLater.reason, message: tryLater.message }
      : undefined
    if (fault) answer({ kind: 'refused', id: m.id, refusal: toRefusal(fault), writeFault })
    else if (isSqliteBusy(e)) {
      // The main thread's connection held the SQLite store's write lock past busy_timeout (a long
      // retention pass): the batch was not applied, and is taken when sent again.
      answer({
        kind: 'refused',
        id: m.id,
        refusal: { status: 503, message: 'the store is busy; send the batch again', headers: { 'retry-after': '5' } },
      })
    } else {
      const error = e as Error & { sql?: string; code?: unknown }
      answer({
        kind: 'failed',
        id: m.id,
        unreachable: isStoreUnreachable(e),
        failure: {
          name: String(error?.name ?? 'Error'),
          message: String(error?.message ?? e),
          sql: typeof error?.sql === 'string' ? error.sql : undefined,
          code: typeof error?.code === 'string' ? error.code : undefined,
        },
      })
    }
  }
}

self.onmessage = async (event: MessageEvent<WriterRequest>) => {
  const m = event.data
  if (m.kind === 'ingest') void ingest(m)
  else if (m.kind === 'open') {
    try {
      await open(m)
      answer({ kind: 'opened' })
    } catch (e) {
      answer({ kind: 'opened', error: String((e as Error)?.message ?? e) })
    }
  } else if (m.kind === 'close') {
    await store?.close().catch(() => {})
    store = undefined
    answer({ kind: 'closed' })
  }
}
