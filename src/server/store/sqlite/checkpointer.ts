// The SQLite store's checkpoints, off the event loop. In WAL mode every commit appends the pages it
// changed to the -wal file, and a checkpoint copies them back into the database file. SQLite's default
// runs that checkpoint inside the commit that crosses 1,000 pages, synchronously: with ingest committing
// ~90 pages a batch, one batch in ten paid for the copy and an fsync (a third of the ingest's time on the
// event loop, and its p99). The store's connection turns that off (wal_autocheckpoint = 0) and this worker
// thread, on a connection of its own, runs PASSIVE checkpoints: they copy what no reader still needs and
// never wait for, or block, the writer. The WAL restarts from its beginning at the first write after a
// checkpoint that copied everything; while writes keep coming, the worker's checkpoint ends a few frames
// short of the end, so the store's connection copies those last frames itself (a short, bounded copy,
// between two of its own transactions: see SqliteDriver's finishCheckpoint).
// The worker's code is a string run from a Blob URL, so the compiled binary needs no second entry point.

/** How often the worker checkpoints. */
export const CHECKPOINT_EVERY_MS = 1_000

const WORKER_SOURCE = `
import { Database } from 'bun:sqlite'
let db
let timer
const checkpoint = () => {
  try {
    const r = db.query('PRAGMA wal_checkpoint(PASSIVE)').get()
    postMessage({ kind: 'checkpoint', log: r.log, checkpointed: r.checkpointed })
  } catch (e) {
    postMessage({ kind: 'error', message: String(e && e.message || e) })
  }
}
self.onmessage = (event) => {
  const m = event.data
  if (m.kind === 'open') {
    try {
      db = new Database(m.path)
      db.exec('PRAGMA busy_timeout = 1000')
    } catch (e) {
      postMessage({ kind: 'opened', error: String(e && e.message || e) })
      return
    }
    timer = setInterval(checkpoint, m.everyMs)
    postMessage({ kind: 'opened' })
  } else if (m.kind === 'checkpoint') {
    checkpoint()
  } else if (m.kind === 'close') {
    clearInterval(timer)
    try { db && db.close() } catch {}
    postMessage({ kind: 'closed' })
  }
}
`

export interface CheckpointResult {
  /** Frames in the WAL, and how many of them are in the database file now. */
  log: number
  checkpointed: number
}

export interface Checkpointer {
  /** Asks for a checkpoint now; resolves with its outcome. */
  checkpoint(): Promise<CheckpointResult>
  close(): Promise<void>
}

let workerUrl: string | undefined

/** Starts the checkpoint worker on the database at `path` (already in WAL mode). */
export async function startCheckpointer(
  path: string,
  options: {
    everyMs?: number
    onError?: (message: string) => void
    onCheckpoint?: (result: CheckpointResult) => void
  } = {},
): Promise<Checkpointer> {
  const everyMs = options.everyMs ?? CHECKPOINT_EVERY_MS
  workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'application/javascript' }))
  const worker = new Worker(workerUrl)
  /** Callers waiting for an answer, by the kind of answer they wait for (scheduled checkpoints answer nobody). */
  // biome-ignore lint/suspicious/noExplicitAny: the worker's answers are messages of several shapes, read by kind
  const waiting: { kind: string; resolve: (m: any) => void }[] = []
  let closed = false
  worker.onmessage = (event: MessageEvent) => {
    const m = event.data
    if (m.kind === 'error') options.onError?.(m.message)
    if (m.kind === 'checkpoint') options.onCheckpoint?.({ log: Number(m.log), checkpointed: Number(m.checkpointed) })
    const i = waiting.findIndex((w) => w.kind === m.kind)
    if (i >= 0) waiting.splice(i, 1)[0]!.resolve(m)
  }
  // The worker keeps the process alive only while someone waits for its answer (an unref'd worker
  // whose answer is awaited would let the process end in the middle of that await).
  const handle = worker as unknown as { ref(): void; unref(): void }
  const ask = (message: { kind: string }, answer: string) =>
    // biome-ignore lint/suspicious/noExplicitAny: as above, an answer of the kind asked for
    new Promise<any>((resolve) => {
      handle.ref()
      waiting.push({
        kind: answer,
        resolve: (m) => {
          if (waiting.length === 0) handle.unref()
          resolve(m)
        },
      })
      worker.postMessage(message)
    })
  const opened = await ask({ kind: 'open', path, everyMs } as { kind: string }, 'opened')
  if (opened.error) {
    worker.terminate()
    throw new Error(`the checkpoint worker cannot open the store: ${opened.error}`)
  }
  return {
    async checkpoint() {
      const m = await ask({ kind: 'checkpoint' }, 'checkpoint')
      return { log: Number(m.log), checkpointed: Number(m.checkpointed) }
    },
    async close() {
      if (closed) return
      closed = true
      await ask({ kind: 'close' }, 'closed')
      worker.terminate()
    },
  }
}
