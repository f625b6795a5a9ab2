// PostgreSQL driver over postgres.js. Every statement runs under a statement_timeout, int8 values
// come back as JS numbers (epoch milliseconds and counters stay well below 2^53; a counter pinned at
// BIGINT's maximum, sums.ts, reads as 2^63). Every statement's
// outcome feeds the store's reachability: postgres.js reconnects by itself once the server is back.
import postgres from 'postgres'
import { StoreReachability, isStoreUnreachable } from '../reachability.ts'
import { postgresDialect } from '../dialect.ts'
import { type RunResult, type SqlDriver, StoreError, StoreTryLater, UniqueViolation, storeTryLater } from '../driver.ts'
import type { SqlStatement } from '../sql.ts'
import { StoreWriteFaults } from '../write-faults.ts'

export interface PostgresDriverOptions {
  /** Deadline for each statement, in milliseconds. */
  statementTimeoutMs?: number
  /** Pool size. */
  max?: number
}

/**
 * SQLSTATEs of faults that pass once the operator acts (class 53, insufficient resources, and a read-only
 * server: a standby, or default_transaction_read_only): the statement is refused with StoreTryLater
 * (503), not failed as a bug (500). Not outages: the server answers, so the pool is kept (reachability.ts).
 */
const TRY_LATER_SQLSTATES: Record<string, string> = {
  '53000': 'the store is out of a resource',
  '53100': "the store's disk is full",
  '53200': 'the store is out of memory',
  '53300': 'the store has too many connections',
  '53400': 'the store reached a configured limit',
  '25006': 'the store is read-only (a standby, or default_transaction_read_only)',
}

function wrap(error: unknown, sql: string): Error {
  if (error instanceof StoreError || error instanceof UniqueViolation) return error
  const code = (error as { code?: string }).code
  if (code === '23505') {
    return new UniqueViolation((error as Error).message, { cause: error })
  }
  const reason = typeof code === 'string' ? TRY_LATER_SQLSTATES[code] : undefined
  if (reason) return new StoreTryLater(reason, `SQLSTATE ${code}`, (error as Error).message, sql, { cause: error })
  return new StoreError(`postgres: ${(error as Error).message}`, sql, { cause: error })
}

type Sql = postgres.Sql<Record<string, never>> | postgres.TransactionSql<Record<string, never>>

/** Statements sent and the exchanges they took (a pipelined group of statements is one exchange). */
export interface SentCounts {
  statements: number
  exchanges: number
}

/** Runs one exchange with the server, telling `reachability` whether the server answered it. */
async function observed<T>(
  reachability: StoreReachability,
  send: () => Promise<T>,
  sent?: SentCounts,
  statements = 1,
  exchanges = 1,
): Promise<T> {
  if (sent) {
    sent.statements += statements
    sent.exchanges += exchanges
  }
  const sentAt = performance.now()
  try {
    const result = await send()
    reachability.answered(sentAt)
    return result
  } catch (e) {
    if (isStoreUnreachable(e)) reachability.unreachable(sentAt, e)
    else reachability.answered(sentAt) // the server answered, with an error of the statement
    throw e
  }
}

/** An element of a PostgreSQL array literal: NULL, or the value double-quoted with `"` and `\\` escaped. */
function arrayElement(value: unknown): string {
  if (value === null || value === undefined) return 'NULL'
  if (typeof value === 'boolean') return value ? 't' : 'f'
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  return `"${String(value).replace(/[\\"]/g, '\\$&')}"`
}

/**
 * The parameters as postgres.js sends them, a JS array as the text of a PostgreSQL array (`{1,NULL,"a"}`),
 * which the statement casts (`$1::bigint[]`). postgres.js would type an array after its first element
 * (a bigint's type for an int8[] that starts with one, none for one that starts with a number), so one
 * statement could be prepared under several signatures, one of them wrong; a text is always untyped.
 */
function parameters(params: unknown[]): postgres.ParameterOrJSON<never>[] {
  let converted: unknown[] | undefined
  for (let i = 0; i < params.length; i++) {
    const p = params[i]
    if (!Array.isArray(p)) continue
    converted ??= params.slice()
    converted[i] = `{${p.map(arrayElement).join(',')}}`
  }
  return (converted ?? params) as postgres.ParameterOrJSON<never>[]
}

/** Whether a statement's result says it changed rows. */
function wroteRows(result: { count: number; command: string }): boolean {
  return result.count > 0 && (result.command === 'INSERT' || result.command === 'UPDATE' || result.command === 'DELETE')
}

/**
 * Where a driver's statements report their outcome: `failed` gets each wrapped error, `changed` each
 * statement that changed rows. The pool's driver tells the root's writeFaults; a transaction's, its own
 * bookkeeping (its writes count once committed).
 */
interface Outcomes {
  failed(error: Error): void
  changed(): void
}

function driverOver(sql: Sql, root: PostgresDriver, outcomes: Outcomes): SqlDriver {
  const { reachability, sent } = root
  const fail = (e: unknown, text: string): Error => {
    const wrapped = wrap(e, text)
    outcomes.failed(wrapped)
    return wrapped
  }
  const q = async <T>(text: string, params: unknown[] = []): Promise<T[]> => {
    try {
      const result = await observed(reachability, () => sql.unsafe(text, parameters(params)), sent)
      if (wroteRows(result)) outcomes.changed()
      return result as unknown as T[]
    } catch (e) {
      throw fail(e, text)
    }
  }
  return {
    dialect: 'postgres',
    sqlDialect: postgresDialect,
    all: q,
    // biome-ignore lint/suspicious/noExplicitAny: the caller names the row's type (get<T>); postgres.js rows are untyped
    get: async (text, params) => (await q(text, params))[0] as any,
    run: async (text, params = []) => {
      try {
        const result = await observed(reachability, () => sql.unsafe(text, parameters(params)), sent)
        if (wroteRows(result)) outcomes.changed()
        return result.count
      } catch (e) {
        throw fail(e, text)
      }
    },
    /**
     * Issued without waiting for one another, postgres.js pipelines the statements on the connection: one
     * exchange for all. Prepared (named, per connection): a prepared statement is sent as Bind/Execute
     * only, where an unnamed one with parameters costs a Parse/Describe exchange before its Bind/Execute
     * (postgres.js learns the parameters' types first) and holds the pipeline until its answer. A
     * statement that fails aborts the transaction, so those after it fail too; the first failure is thrown.
     */
    runAll: async (statements) => {
      if (statements.length === 0) return []
      let failed: string | undefined
      let changed = false
      try {
        const results = await observed(
          reachability,
          () =>
            Promise.all(
              statements.map((s) =>
                sql.unsafe(s.sql, parameters(s.params ?? []), { prepare: true }).then(
                  (result): RunResult => {
                    changed ||= wroteRows(result)
                    return { changed: result.count, rows: result as unknown as Record<string, unknown>[] }
                  },
                  (e: unknown) => {
                    failed ??= s.sql
                    throw e
                  },
                ),
              ),
            ),
          sent,
          statements.length,
        )
        if (changed) outcomes.changed()
        return results
      } catch (e) {
        throw fail(e, failed ?? statements[0]!.sql)
      }
    },
    exec: async (script) => {
      try {
        await observed(reachability, () => sql.unsafe(script).simple(), sent)
      } catch (e) {
        throw fail(e, script)
      }
    },
    ping: () => root.ping(),
    transaction: (fn, lockKey) => root.transaction(fn, lockKey),
    close: () => root.close(),
  }
}

/** Takes the transaction-scoped advisory lock named by `key`, waiting for whoever holds it. */
async function takeLock(tx: SqlDriver, key: string): Promise<void> {
  await tx.runAll([{ sql: LOCK_SQL, params: [key] }])
}

const LOCK_SQL = postgresDialect.lockSql!

/**
 * postgres.js's connection behind a reserved one, as its `onexecute` query option hands it over (the
 * option sql.begin() uses; answering true leaves the connection's pipelining as it was).
 */
interface ClosableConnection {
  terminate(): void
}

/** How long a pool replaced after an outage may finish what it still runs before it is closed, in seconds. */
const RETIRED_POOL_GRACE_SECONDS = 5

export class PostgresDriver implements SqlDriver {
  readonly dialect = 'postgres' as const
  readonly sqlDialect = postgresDialect
  /** Outage episodes of this server, from the outcome of every statement. */
  readonly reachability = new StoreReachability()
  /** Episodes of refused writes (a full disk, a standby...), from the outcome of every write. */
  readonly writeFaults = new StoreWriteFaults()
  /** What the pool's statements (each its own transaction) tell writeFaults. */
  private readonly poolOutcomes: Outcomes = {
    failed: (e) => this.noteRefusal(e),
    changed: () => this.writeFaults.wrote(),
  }
  /** Statements sent through this driver and the exchanges they took, for tests and benchmarks. */
  readonly sent: SentCounts = { statements: 0, exchanges: 0 }
  private sql: postgres.Sql<Record<string, never>>
  private inner: SqlDriver
  /** Pools replaced after an outage, still closing. */
  private readonly retiring = new Set<Promise<void>>()

  constructor(
    private readonly url: string,
    private readonly options: PostgresDriverOptions = {},
  ) {
    this.sql = this.pool()
    this.inner = driverOver(this.sql, this, this.poolOutcomes)
    // postgres.js (3.4.9) keeps state from a connection lost mid-statement: the next statement on it
    // fails with the old backend's error (57P01), and a lost transaction leaves its connection unable
    // to reconnect. An outage therefore starts a fresh pool; the old one is closed.
    this.reachability.onChange((change) => {
      if (!change.available) this.replacePool()
    })
  }

  private pool(): postgres.Sql<Record<string, never>> {
    return postgres(this.url, {
      max: this.options.max ?? 10,
      connect_timeout: 10,
      idle_timeout: 60,
      onnotice: () => {},
      connection: { statement_timeout: this.options.statementTimeoutMs ?? 15_000, application_name: 'dbm' },
      types: {
        bigint: {
          to: 20,
          from: [20],
          serialize: (x: number | bigint) => x.toString(),
          parse: (x: string) => Number(x),
        },
        // biome-ignore lint/suspicious/noExplicitAny: postgres.js types its custom types' options loosely
      } as any,
    })
  }

  private replacePool() {
    const retired = this.sql
    this.sql = this.pool()
    this.inner = driverOver(this.sql, this, this.poolOutcomes)
    const closing = retired
      .end({ timeout: RETIRED_POOL_GRACE_SECONDS })
      .catch(() => {})
      .finally(() => this.retiring.delete(closing))
    this.retiring.add(closing)
  }

  all<T>(sql: string, params?: unknown[]) {
    return this.inner.all<T>(sql, params)
  }
  get<T>(sql: string, params?: unknown[]) {
    return this.inner.get<T>(sql, params)
  }
  run(sql: string, params?: unknown[]) {
    return this.inner.run(sql, params)
  }
  exec(script: string) {
    return this.inner.exec(script)
  }
  runAll(statements: readonly SqlStatement[]) {
    return this.inner.runAll(statements)
  }

  async ping(): Promise<void> {
    await this.inner.get('SELECT 1')
  }

  private noteRefusal(e: unknown): void {
    const refusal = storeTryLater(e)
    if (refusal) this.writeFaults.failed(refusal)
  }

  /** Writes and deletes a row of rate_events in one transaction: a write that leaves nothing behind. */
  async probeWrite(): Promise<void> {
    await this.transaction(async (tx) => {
      await tx.run(`INSERT INTO rate_events (key, at) VALUES ('dbm:write-probe', 0)`)
      await tx.run(`DELETE FROM rate_events WHERE key = 'dbm:write-probe'`)
    })
  }

  /**
   * One transaction on a connection of its own, which the server commits whole or not at all: a
   * connection lost before COMMIT rolls the transaction back on the server. (Lost during COMMIT, the
   * outcome is unknown to the caller; ingest is safe to retry, as a batch_id is applied once.)
   * BEGIN, COMMIT and ROLLBACK are sent here rather than by sql.begin(), which sends its ROLLBACK on a
   * connection already lost: postgres.js then throws outside any caller and the connection never
   * reconnects. A lost connection gets nothing more and is not handed back; its pool is replaced.
   * A ROLLBACK that fails otherwise (the connection left mid-COPY, say) leaves a session whose state is
   * unknown, perhaps with its transaction open: that connection is closed, never handed back.
   */
  async transaction<T>(fn: (tx: SqlDriver) => Promise<T>, lockKey?: string): Promise<T> {
    const sentAt = performance.now()
    let connection: postgres.ReservedSql<Record<string, never>>
    try {
      connection = await this.sql.reserve()
    } catch (e) {
      if (isStoreUnreachable(e)) this.reachability.unreachable(sentAt, e)
      const wrapped = wrap(e, 'BEGIN')
      this.noteRefusal(wrapped)
      throw wrapped
    }
    // The transaction's writes count for writeFaults once committed; its refusal, once, where it fails.
    let wroteRows = false
    const tx = driverOver(connection, this, {
      failed: () => {},
      changed: () => {
        wroteRows = true
      },
    })
    let session: ClosableConnection | undefined
    const keepSession = (c: ClosableConnection) => ((session = c), true)
    try {
      // BEGIN and the lock are not waited for: postgres.js pipelines them with fn's first statements (the
      // lock is a prepared statement), which the server runs after them, in one exchange (counted there).
      // Should the lock fail (a statement timeout), the transaction is aborted, so fn's statements fail
      // too; its error is the one thrown.
      let failed: string | undefined
      const send = (text: string, query: Promise<unknown>) =>
        query.catch((e: unknown) => {
          failed ??= text
          throw e
        })
      const begin = send(
        'BEGIN',
        connection.unsafe('BEGIN', [], { onexecute: keepSession } as postgres.UnsafeQueryOptions),
      )
      const lock = lockKey ? send(LOCK_SQL, connection.unsafe(LOCK_SQL, [lockKey], { prepare: true })) : undefined
      const opened = observed(this.reachability, () => Promise.all([begin, lock]), this.sent, lock ? 2 : 1, 0).catch(
        (e: unknown) => {
          throw wrap(e, failed ?? 'BEGIN')
        },
      )
      opened.catch(() => {}) // thrown below, where fn's outcome is known
      // COMMIT sent behind fn's last statements (runLast), in their exchange: a statement that fails aborts
      // the transaction, and the server answers that COMMIT with a rollback (no error of its own).
      let committed = false
      const runLast = async (statements: readonly SqlStatement[]): Promise<RunResult[]> => {
        const results = tx.runAll(statements)
        const commit = observed(this.reachability, () => connection.unsafe('COMMIT'), this.sent, 1, 0)
        commit.catch(() => {}) // thrown below, after the statements' own failure if any
        committed = true
        const answered = await results
        await commit.catch((e: unknown) => {
          throw wrap(e, 'COMMIT')
        })
        return answered
      }
      // A transaction opened inside this one joins it, taking its own lock (held to this one's end).
      const result = await fn({
        ...tx,
        runLast,
        transaction: async (f, innerKey) => (innerKey ? (await takeLock(tx, innerKey), f(tx)) : f(tx)),
      }).catch(async (e: unknown) => {
        await opened
        throw e
      })
      await opened
      if (!committed) await tx.run('COMMIT')
      connection.release()
      if (wroteRows) this.writeFaults.wrote()
      return result
    } catch (e) {
      this.noteRefusal(e)
      if (!isStoreUnreachable(e)) {
        const rolledBack = await tx.run('ROLLBACK').then(
          () => true,
          () => false,
        )
        if (rolledBack) connection.release()
        else this.closeReserved(session)
      }
      throw e
    }
  }

  /**
   * Closes a reserved connection whose session cannot be trusted: the server ends the session (rolling
   * back what it had open) and the pool opens a fresh one in its place. Without a handle on it (were
   * postgres.js to stop handing one over), the whole pool is replaced, which closes it after the grace period.
   */
  private closeReserved(session: ClosableConnection | undefined): void {
    if (session) session.terminate()
    else this.replacePool()
  }

  async close(): Promise<void> {
    await Promise.all([this.sql.end({ timeout: 5 }), ...this.retiring])
  }
}
