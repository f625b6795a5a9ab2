// The thin SQL driver that both store backends implement. Statements are written once with
// PostgreSQL-style `$1` placeholders; the SQLite driver rewrites them to `?1`.
import type { StoreReachability } from './reachability.ts'
import type { SqlDialect } from './dialect.ts'
import type { Dialect, SqlStatement } from './sql.ts'
import type { StoreWriteFaults } from './write-faults.ts'

/** What a statement of runAll answered: the rows it changed, and those it returned. */
export interface RunResult {
  changed: number
  rows: Record<string, unknown>[]
}

export interface SqlDriver {
  readonly dialect: Dialect
  /** What differs in this store's SQL (dialect.ts). */
  readonly sqlDialect: SqlDialect
  /** All rows of a query. */
  all<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>
  /** The first row of a query, if any. */
  get<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T | undefined>
  /** Runs a statement and returns the number of rows it changed. */
  run(sql: string, params?: unknown[]): Promise<number>
  /**
   * Runs the statements in order and returns what each answered. PostgreSQL sends them in one
   * exchange, each prepared on its connection, so their texts must be few and fixed (values only as
   * parameters, no text whose length follows the data). A failure fails the rest: use it inside a
   * transaction.
   */
  runAll(statements: readonly SqlStatement[]): Promise<RunResult[]>
  /**
   * In a PostgreSQL transaction only: runAll of the transaction's last statements with its COMMIT in the
   * same exchange; resolves once committed. Nothing may be sent after it. Elsewhere absent: use runAll.
   */
  runLast?(statements: readonly SqlStatement[]): Promise<RunResult[]>
  /** Runs a script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>
  /**
   * Runs `fn` in one transaction that also holds an exclusive lock named by `lockKey` when given
   * (a PostgreSQL advisory lock; SQLite transactions are exclusive already). Called on the driver of an
   * open transaction, `fn` runs in that transaction, which then also holds `lockKey` until it ends.
   */
  transaction<T>(fn: (tx: SqlDriver) => Promise<T>, lockKey?: string): Promise<T>
  /** A trivial query, for health checks: resolves when the store answers it. */
  ping(): Promise<void>
  /** PostgreSQL only: outage episodes of the server, from the outcome of every statement. */
  readonly reachability?: StoreReachability
  /** Episodes of writes refused with StoreTryLater (a full disk, a standby), from the outcome of every write. */
  readonly writeFaults?: StoreWriteFaults
  /**
   * A small committed write that needs new pages and leaves nothing behind, for /healthz while writes are
   * refused (its outcome is recorded in writeFaults like any write's).
   */
  probeWrite?(): Promise<void>
  /**
   * SQLite only: a number that changes whenever this store's data has changed (rows written since the
   * file was opened); undefined while a transaction is open. Lets the store keep read results in memory.
   */
  readonly generation?: () => number | undefined
  close(): Promise<void>
}

/** Raised by a driver when a UNIQUE constraint rejects a write, so the store can answer 409. */
export class UniqueViolation extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'UniqueViolation'
  }
}

/** A failed statement, keeping the driver's error as `cause` and the SQL text that failed. */
export class StoreError extends Error {
  constructor(
    message: string,
    readonly sql: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.name = 'StoreError'
  }
}

/**
 * A statement the store refused for a reason that passes, so the caller should try again later: its disk
 * is full, it is out of memory or connections, or it only reads (a PostgreSQL standby). `code` is the
 * driver's (SQLITE_FULL, SQLSTATE 53100...), `reason` says it in words; the message carries both and
 * the driver's own text. The API answers it 503 with Retry-After and this message.
 */
export class StoreTryLater extends StoreError {
  constructor(
    readonly reason: string,
    readonly code: string,
    detail: string,
    sql: string,
    options?: { cause?: unknown },
  ) {
    super(`${reason} (${code}): ${detail}`, sql, options)
    this.name = 'StoreTryLater'
  }
}

/** The StoreTryLater that `error` is or wraps (through `cause`), if any. */
export function storeTryLater(error: unknown): StoreTryLater | undefined {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 8; depth++) {
    if (e instanceof StoreTryLater) return e
    e = (e as { cause?: unknown }).cause
  }
  return undefined
}
