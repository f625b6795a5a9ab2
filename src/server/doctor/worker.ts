// The diagnosis worker: a thread of `dbm serve` that runs the doctor for the monitor (monitor/), so that the
// rules' reads and work use the machine's second core instead of the event loop that serves the API and
// ingest. It opens its own connection to the store (SQLite: a query-only second connection to the
// file; PostgreSQL: a small pool of its own) and answers each `diagnose` message with the diagnosis,
// reading the database's thresholds from that store as diagnose() does on the main thread.
// The monitor applies what was found (recommendations, alerts, notifications) on the main thread. It says
// when each diagnosis starts: the main thread ends a worker whose diagnosis overruns, and starts another.
// Started by diagnosis-worker.ts; an entry point of the build of its own (scripts/build.ts).
import type { WriteRefusalSpan } from '../store/write-faults.ts'
import { join } from 'node:path'
import { createLogger, type LogLevel } from '../../shared/log.ts'
import type { RegisteredDatabase } from '../store/types.ts'
import { SqlStore } from '../store/sql-store.ts'
import { SqliteDriver } from '../store/sqlite/driver.ts'
import { diagnose } from './index.ts'

export interface WorkerOpen {
  kind: 'open'
  dataDir: string
  databaseUrl?: string
  logLevel: LogLevel
  thresholds?: Record<string, Record<string, number>>
  /** The serve is `dbm local`'s: the doctor's advice is for its user (DoctorContext.setup). */
  local?: boolean
  /** When the serve began serving (Deps.servingSince). */
  servingSince?: number
}
export interface WorkerDiagnose {
  kind: 'diagnose'
  id: number
  db: RegisteredDatabase
  now: number
  /** The monitor's diagnoses go before those the API asks for. */
  priority: 'monitor' | 'api'
  /** Epoch ms after which nobody waits for the answer: a request still queued then is dropped. */
  deadline: number
  /** The main store's refused writes (DoctorContext.setup.storeRefusals). */
  storeRefusals?: WriteRefusalSpan
  /** The serve's batches shed for want of room (DoctorContext.setup.ingestShedding). */
  ingestShedding?: WriteRefusalSpan
}
export interface WorkerClose {
  kind: 'close'
}
export type WorkerRequest = WorkerOpen | WorkerDiagnose | WorkerClose

declare const self: Worker

let deps: Parameters<typeof diagnose>[0] | undefined
let store: SqlStore | undefined

async function open(m: WorkerOpen) {
  const driver = m.databaseUrl
    ? new (await import('../store/postgres/driver.ts')).PostgresDriver(m.databaseUrl, { max: 4 })
    : new SqliteDriver(join(m.dataDir, 'dbm.sqlite'), { reader: true })
  store = new SqlStore(driver, { reader: true })
  deps = {
    store,
    log: createLogger(m.logLevel),
    doctorThresholds: m.thresholds,
    signup: m.local ? 'local' : undefined,
    servingSince: m.servingSince,
  }
}

/**
 * Diagnoses one at a time, the monitor's first: a flood of API requests (a tenant polling its own
 * database's doctor) waits behind the monitor's work instead of delaying every organization's alerts, and
 * a request whose caller gave up before it started is dropped, not run.
 */
const queues: Record<WorkerDiagnose['priority'], WorkerDiagnose[]> = { monitor: [], api: [] }
let draining = false

async function drain() {
  if (draining) return
  draining = true
  try {
    for (let m = queues.monitor.shift() ?? queues.api.shift(); m; m = queues.monitor.shift() ?? queues.api.shift()) {
      if (Date.now() > m.deadline) continue // its caller stopped waiting
      try {
        if (!deps) throw new Error('the diagnosis worker has no store')
        // The main thread ends this thread if the diagnosis runs past its limit (diagnosis-worker.ts).
        postMessage({ kind: 'started', id: m.id, database: m.db.id })
        const { context: _context, ...diagnosis } = await diagnose(deps, m.db, m.now, {
          storeRefusals: m.storeRefusals,
          ingestShedding: m.ingestShedding,
        })
        postMessage({ kind: 'diagnosis', id: m.id, diagnosis })
      } catch (e) {
        postMessage({
          kind: 'diagnosis',
          id: m.id,
          error: String((e as Error)?.message ?? e),
          unreachable: (e as { code?: string })?.code,
        })
      }
    }
  } finally {
    draining = false
  }
}

self.onmessage = async (event: MessageEvent<WorkerRequest>) => {
  const m = event.data
  if (m.kind === 'open') {
    try {
      await open(m)
      postMessage({ kind: 'opened' })
    } catch (e) {
      postMessage({ kind: 'opened', error: String((e as Error)?.message ?? e) })
    }
  } else if (m.kind === 'diagnose') {
    queues[m.priority].push(m)
    void drain()
  } else if (m.kind === 'close') {
    await store?.close().catch(() => {})
    postMessage({ kind: 'closed' })
  }
}
