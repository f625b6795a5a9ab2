// SQLite driver over bun:sqlite: one connection in WAL mode, plus a worker thread's that only checkpoints
// (checkpointer.ts), and the ingest writer thread's (`writer`, src/server/ingest-writer/). Statements run synchronously, so transactions are made exclusive by queueing every
// other call behind the open transaction.
import { Database, type Statement } from 'bun:sqlite'
import { sqliteDialect } from '../dialect.ts'
import { type RunResult, type SqlDriver, StoreError, StoreTryLater, UniqueViolation, storeTryLater } from '../driver.ts'
import type { SqlStatement } from '../sql.ts'
import { StoreWriteFaults } from '../write-faults.ts'
import { type CheckpointResult, type Checkpointer, startCheckpointer } from './checkpointer.ts'

const placeholder = /\$(\d+)/g

function toSqlite(sql: string): string {
  return sql.replace(placeholder, '?$1')
}

/**
 * The parameters as bun:sqlite binds them (booleans as 0/1, undefined as NULL), copied only when one
 * needs changing: bulk upserts bind thousands of numbers and strings per statement. They are passed as
 * one array, which bun:sqlite binds positionally, and cheaper than spreading thousands of arguments.
 */
// biome-ignore lint/suspicious/noExplicitAny: bun:sqlite's bindings type (SQLQueryBindings) is what these become
function bindable(params: unknown[]): any[] {
  for (let i = 0; i < params.length; i++) {
    const p = params[i]
    if (typeof p === 'boolean' || p === undefined)
      return params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p === undefined ? null : p))
  }
  return params
}

/**
 * SQLite's result codes for faults of the file's disk, which pass once the operator acts: the write is
 * refused with StoreTryLater (503), not failed as a bug (500). Extended codes (SQLITE_IOERR_WRITE,
 * SQLITE_READONLY_DBMOVED...) are matched by their primary code.
 */
const TRY_LATER_CODES: Record<string, string> = {
  SQLITE_FULL: "the store's disk is full",
  SQLITE_IOERR: "the store's disk failed a read or write",
  SQLITE_READONLY: "the store's file cannot be written",
  SQLITE_NOMEM: 'the server is out of memory',
}

function wrap(error: unknown, sql: string): Error {
  if (error instanceof StoreError || error instanceof UniqueViolation) return error
  const code = (error as { code?: string }).code ?? ''
  if (code.startsWith('SQLITE_CONSTRAINT_UNIQUE') || code.startsWith('SQLITE_CONSTRAINT_PRIMARYKEY')) {
    return new UniqueViolation((error as Error).message, { cause: error })
  }
  const primary = /^SQLITE_[A-Z]+/.exec(code)?.[0] ?? ''
  const reason = TRY_LATER_CODES[primary]
  if (reason) return new StoreTryLater(reason, code, (error as Error).message, sql, { cause: error })
  return new StoreError(`sqlite: ${(error as Error).message}`, sql, { cause: error })
}

/** WAL frames (pages) past which the store's connection helps the worker's checkpoint finish: 16 MB of 4 KB pages. */
const WAL_RESTART_FRAMES = 4096
/** The most frames that connection copies itself (about 2 MB): a few milliseconds at most. */
const FINISH_FRAMES = 512

/** How long a statement of the owner's connection is tried again while the store is busy (as busy_timeout was). */
const BUSY_RETRY_MS = 5000

/** SQLITE_BUSY, in the error or its causes: the write lock stayed taken (by the other writing connection). */
export const isSqliteBusy = (e: unknown): boolean => {
  for (let x = e as { code?: unknown; cause?: unknown } | undefined, depth = 0; x && depth <= 4; depth++) {
    if (typeof x.code === 'string' && x.code.startsWith('SQLITE_BUSY')) return true
    x = x.cause as typeof x
  }
  return false
}

/**
 * `op` again after a pause (1, 2, 4 ... 16 ms) each time it finds the store's write lock taken by the
 * ingest writer's connection, for at most BUSY_RETRY_MS: the event loop goes on meanwhile. Only statements
 * that have not begun to change anything are tried again (an autocommit statement that failed to start,
 * or BEGIN IMMEDIATE).
 */
async function busyRetry<T>(op: () => Promise<T>): Promise<T> {
  const start = performance.now()
  for (let attempt = 0; ; attempt++) {
    try {
      return await op()
    } catch (e) {
      if (!isSqliteBusy(e) || performance.now() - start > BUSY_RETRY_MS) throw e
      await Bun.sleep(Math.min(2 ** attempt, 16))
    }
  }
}

export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite' as const
  readonly sqlDialect = sqliteDialect
  private readonly db: Database
  /** Settles when the transaction in progress, if any, has finished. */
  private txTail: Promise<unknown> = Promise.resolve()
  private txOpen = false
  private readonly directDriver: SqlDriver

  /** `<store>.lock`, held with an exclusive lock while the store is open: one process per store file. */
  private readonly lock: Database | undefined
  /** The checkpoint worker (checkpointer.ts); undefined until it started, or when it could not start. */
  private checkpointer: Checkpointer | undefined
  /** Settles after the turn the checkpoint worker is started in by itself (at once when it is started when told). */
  private checkpointerStarting: Promise<void> = Promise.resolve()
  /** Settles once the checkpoint worker started or could not start (at once when it was not asked to). */
  private workerStarted: Promise<void> = Promise.resolve()
  /** Starts the checkpoint worker, once; undefined when it was started (or this connection has none). */
  private startWorker: (() => void) | undefined

  /**
   * `options.reader`: a second connection to a store another connection of this process owns (the
   * diagnosis worker's): no lock, no checkpoints, no writes (query_only), and no generation.
   * `options.checkpointsWhenTold`: the checkpoint worker starts at startCheckpoints() rather than after
   * this turn of the event loop (`dbm serve` starts it once it has listened and built the API).
   */
  constructor(path: string, options: { reader?: boolean; writer?: boolean; checkpointsWhenTold?: boolean } = {}) {
    if (options.writer) {
      // The ingest writer's connection (src/server/ingest-writer/): a second writer to a store this
      // process owns. No lock and no checkpoints (the owner's), no generation (the owner's connection
      // sees these commits through data_version); waits for the owner's transactions on busy_timeout,
      // off the event loop.
      this.lock = undefined
      this.db = new Database(path, { create: false, strict: false })
      this.db.exec('PRAGMA synchronous = NORMAL')
      this.db.exec('PRAGMA foreign_keys = ON')
      this.db.exec('PRAGMA busy_timeout = 10000')
      this.db.exec('PRAGMA wal_autocheckpoint = 0')
      this.generation = () => undefined
      this.directDriver = this.direct()
      return
    }
    if (options.reader) {
      this.lock = undefined
      this.db = new Database(path, { create: false, strict: false })
      this.db.exec('PRAGMA query_only = ON')
      this.db.exec('PRAGMA busy_timeout = 5000')
      this.generation = () => undefined
      this.directDriver = this.direct()
      return
    }
    // One process owns the store: a second `dbm serve` on the same data directory is refused ("database
    // is locked") instead of sharing it. The lock is a file of its own, locked for as long as the store is
    // open (the operating system releases it when the process ends, however it ends), so that the store's
    // own file can have a second connection: the checkpoint worker's.
    this.lock = new Database(`${path}.lock`, { create: true, strict: false })
    try {
      this.lock.exec('PRAGMA locking_mode = EXCLUSIVE')
      this.lock.exec('BEGIN EXCLUSIVE')
    } catch (e) {
      this.lock.close()
      throw e
    }
    this.db = new Database(path, { create: true, strict: false })
    this.db.exec('PRAGMA journal_mode = WAL')
    this.db.exec('PRAGMA synchronous = NORMAL')
    this.db.exec('PRAGMA foreign_keys = ON')
    // No waiting inside SQLite: while the ingest writer's thread holds the write lock, a write of this
    // connection would block the event loop for as long (busy_timeout sleeps in the call). It is answered
    // SQLITE_BUSY at once and tried again after an asynchronous pause instead (busyRetry), for as long as
    // busy_timeout allowed before.
    this.db.exec('PRAGMA busy_timeout = 0')
    // Checkpoints run in a worker thread (checkpointer.ts), not inside the commits of this connection.
    this.db.exec('PRAGMA wal_autocheckpoint = 0')
    // When the log starts over, a file grown past 64 MB (by a burst, a migration) is cut back to that.
    this.db.exec('PRAGMA journal_size_limit = 67108864')
    // Until the worker runs nothing checkpoints: the WAL only grows, by what is written meanwhile.
    this.startWorker = () => {
      this.startWorker = undefined
      this.workerStarted = startCheckpointer(path, { onCheckpoint: (r) => this.finishCheckpoint(r) }).then(
        (c) => {
          this.checkpointer = c
        },
        () => {
          // No worker thread: the commits checkpoint, as SQLite does by default.
          this.db.exec('PRAGMA wal_autocheckpoint = 1000')
        },
      )
    }
    // Started after this turn of the event loop (its Worker costs the main thread about 3 ms), or when told.
    if (!options.checkpointsWhenTold)
      this.checkpointerStarting = new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
        this.startCheckpoints(),
      )
    this.directDriver = this.direct()
  }

  /** Set by close(): no worker starts from then on. */
  private closing = false

  /**
   * Starts the checkpoint worker (checkpointer.ts) if it has not started yet: for a driver made with
   * `checkpointsWhenTold`; otherwise it starts by itself.
   */
  startCheckpoints(): void {
    if (!this.closing) this.startWorker?.()
  }

  /**
   * After the worker's checkpoint: when the WAL has grown past WAL_RESTART_FRAMES and the worker copied all
   * but a few frames, this connection copies the rest (at most FINISH_FRAMES) so that the next commit
   * starts the WAL over instead of growing it for as long as writes keep coming.
   */
  private finishCheckpoint(r: CheckpointResult): void {
    if (this.txOpen || r.log < WAL_RESTART_FRAMES || r.log - r.checkpointed > FINISH_FRAMES) return
    try {
      this.db.exec('PRAGMA wal_checkpoint(PASSIVE)')
    } catch {
      // The worker's next checkpoint tries again.
    }
  }

  /** A checkpoint now (tests, benchmarks); null when the worker is not running. */
  async checkpoint(): Promise<CheckpointResult | null> {
    await this.checkpointerStarting
    await this.workerStarted
    return this.checkpointer ? this.checkpointer.checkpoint() : null
  }

  /** Prepared statements by their `$n` text; the rewrite to `?n` and the prepare happen once. */
  private readonly statements = new Map<string, Statement>()

  private prepare(sql: string): Statement {
    let statement = this.statements.get(sql)
    if (!statement) {
      statement = this.db.prepare(toSqlite(sql))
      // Statements built from variable-length value lists (bulk upserts) are not worth keeping.
      if (this.statements.size < 2000) this.statements.set(sql, statement)
    }
    return statement
  }

  private direct(): SqlDriver {
    const db = this.db
    const prepare = (sql: string) => this.prepare(sql)
    return {
      dialect: 'sqlite',
      sqlDialect: sqliteDialect,
      async all<T>(sql: string, params: unknown[] = []) {
        try {
          return prepare(sql).all(bindable(params)) as T[]
        } catch (e) {
          throw wrap(e, sql)
        }
      },
      async get<T>(sql: string, params: unknown[] = []) {
        try {
          return (prepare(sql).get(bindable(params)) ?? undefined) as T | undefined
        } catch (e) {
          throw wrap(e, sql)
        }
      },
      async run(sql: string, params: unknown[] = []) {
        try {
          return prepare(sql).run(bindable(params)).changes
        } catch (e) {
          throw wrap(e, sql)
        }
      },
      async runAll(statements: readonly SqlStatement[]) {
        const results: RunResult[] = []
        for (const s of statements) {
          try {
            const statement = prepare(s.sql)
            const params = bindable(s.params ?? [])
            results.push(
              statement.columnNames.length > 0
                ? { changed: 0, rows: statement.all(params) as Record<string, unknown>[] }
                : { changed: statement.run(params).changes, rows: [] },
            )
          } catch (e) {
            throw wrap(e, s.sql)
          }
        }
        return results
      },
      async exec(script: string) {
        try {
          db.exec(script)
        } catch (e) {
          throw wrap(e, script)
        }
      },
      ping: () => this.ping(),
      transaction: (fn) => this.transaction(fn),
      close: () => this.close(),
    }
  }

  /**
   * Reads the schema through the connection. It does not wait for an open transaction (a large batch
   * may hold one for a while): one connection and synchronous statements make that safe, and the
   * schema is no data of the transaction.
   */
  async ping(): Promise<void> {
    try {
      this.db.query('SELECT COUNT(*) FROM sqlite_master').get()
    } catch (e) {
      throw wrap(e, 'SELECT COUNT(*) FROM sqlite_master')
    }
  }

  /** Waits for any open transaction, so statements from other callers never land inside it. */
  private async outside<T>(op: (d: SqlDriver) => Promise<T>): Promise<T> {
    while (this.txOpen) await this.txTail
    return busyRetry(() => op(this.directDriver))
  }

  /** Refused writes and the writes that succeed (rows changed), in this.writeFaults. */
  readonly writeFaults = new StoreWriteFaults()

  /**
   * `op` outside any transaction, its outcome told to writeFaults: a refusal, or rows changed (counted by
   * total_changes(): a statement's own count is stale for statements that are not INSERT, UPDATE or DELETE).
   */
  private async writing<T>(op: (d: SqlDriver) => Promise<T>): Promise<T> {
    while (this.txOpen) await this.txTail
    const before = this.totalChanges()
    try {
      const result = await busyRetry(() => op(this.directDriver))
      if (this.totalChanges() !== before) this.writeFaults.wrote()
      return result
    } catch (e) {
      this.noteRefusal(e)
      throw e
    }
  }

  private noteRefusal(e: unknown): void {
    const refusal = storeTryLater(e)
    if (refusal) this.writeFaults.failed(refusal)
  }

  all<T>(sql: string, params?: unknown[]) {
    return this.outside((d) => d.all<T>(sql, params))
  }
  get<T>(sql: string, params?: unknown[]) {
    return this.outside((d) => d.get<T>(sql, params))
  }
  run(sql: string, params?: unknown[]) {
    return this.writing((d) => d.run(sql, params))
  }
  exec(script: string) {
    return this.writing((d) => d.exec(script))
  }
  runAll(statements: readonly SqlStatement[]) {
    return this.writing((d) => d.runAll(statements))
  }

  /**
   * Writes and deletes a row of rate_events with a 16 KB key in one transaction: its table and index need
   * new pages (overflow pages), which a store whose disk is full cannot have, and it leaves nothing behind.
   */
  async probeWrite(): Promise<void> {
    await this.transaction(async (tx) => {
      await tx.run(`INSERT INTO rate_events (key, at) VALUES ('dbm:write-probe:' || hex(zeroblob(8192)), 0)`)
      await tx.run(`DELETE FROM rate_events WHERE key LIKE 'dbm:write-probe:%'`)
    })
  }

  private changesStatement: Statement | undefined
  /** The connection's data_version last read, and how many times it changed (commits of other connections). */
  private dataVersion: number | undefined
  private othersCommits = 0

  /**
   * sqlite3_total_changes() (every row inserted, updated or deleted through this connection) plus the
   * commits other connections of this process made (the ingest writer's thread), seen as changes of
   * PRAGMA data_version: any write to the store, by either, changes it.
   */
  readonly generation: () => number | undefined = () => {
    if (this.txOpen) return undefined
    return this.totalChanges() + this.othersCommitted()
  }

  private totalChanges(): number {
    this.changesStatement ??= this.db.prepare('SELECT total_changes() AS n')
    return (this.changesStatement.get() as { n: number }).n
  }

  private dataVersionStatement: Statement | undefined

  /** How many times data_version changed since this connection first read it: other connections' commits. */
  private othersCommitted(): number {
    this.dataVersionStatement ??= this.db.prepare('PRAGMA data_version')
    const v = (this.dataVersionStatement.get() as { data_version: number }).data_version
    if (v !== this.dataVersion) {
      if (this.dataVersion !== undefined) this.othersCommits++
      this.dataVersion = v
    }
    return this.othersCommits
  }

  /**
   * SQLite ends a transaction itself on some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM): a ROLLBACK
   * after one fails with "cannot rollback - no transaction is active", and must not replace the error that
   * ended the transaction. So ROLLBACK is sent only while a transaction is open, and the first error is
   * the one thrown whatever the ROLLBACK answers.
   */
  async transaction<T>(fn: (tx: SqlDriver) => Promise<T>): Promise<T> {
    while (this.txOpen) await this.txTail
    this.txOpen = true
    const inner = this.directDriver
    const work = (async () => {
      const before = this.totalChanges()
      try {
        // The write lock is taken here, for the whole transaction: only BEGIN can find it taken.
        await busyRetry(async () => this.execOrThrow('BEGIN IMMEDIATE'))
        try {
          const result = await fn({ ...inner, transaction: (f) => f(inner) })
          this.execOrThrow('COMMIT')
          if (this.totalChanges() !== before) this.writeFaults.wrote()
          return result
        } catch (e) {
          if (this.db.inTransaction) {
            try {
              this.db.exec('ROLLBACK')
            } catch {
              // The error that failed the transaction is the one worth reporting.
            }
          }
          throw e
        }
      } catch (e) {
        this.noteRefusal(e)
        throw e
      }
    })()
    this.txTail = work
      .catch(() => undefined)
      .finally(() => {
        this.txOpen = false
      })
    return work
  }

  private execOrThrow(sql: string): void {
    try {
      this.db.exec(sql)
    } catch (e) {
      throw wrap(e, sql)
    }
  }

  async close(): Promise<void> {
    while (this.txOpen) await this.txTail
    this.closing = true
    await this.checkpointerStarting
    await this.workerStarted
    await this.checkpointer?.close()
    this.checkpointer = undefined
    for (const statement of this.statements.values()) statement.finalize()
    this.statements.clear()
    this.changesStatement?.finalize()
    this.dataVersionStatement?.finalize()
    // The last connection to close checkpoints the WAL into the file and removes it.
    this.db.close()
    this.lock?.close()
  }
}
