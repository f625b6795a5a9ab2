// PostgreSQL driver over postgres.js. Every statement runs under a statement_timeout, int8 values
// come back as JS numbers (epoch milliseconds and counters stay well below 2^53).
import postgres from 'postgres'
import { type SqlDriver, StoreError, UniqueViolation } from '../driver.ts'

export interface PostgresDriverOptions {
  /** Deadline for each statement, in milliseconds. */
  statementTimeoutMs?: number
  /** Pool size. */
  max?: number
}

function wrap(error: unknown, sql: string): Error {
  if ((error as { code?: string }).code === '23505') {
    return new UniqueViolation((error as Error).message, { cause: error })
  }
  return new StoreError(`postgres: ${(error as Error).message}`, sql, { cause: error })
}

type Sql = postgres.Sql<Record<string, never>> | postgres.TransactionSql<Record<string, never>>

function driverOver(sql: Sql, root: PostgresDriver): SqlDriver {
  const q = async <T>(text: string, params: unknown[] = []): Promise<T[]> => {
    try {
      return (await sql.unsafe(text, params as postgres.ParameterOrJSON<never>[])) as unknown as T[]
    } catch (e) {
      throw wrap(e, text)
    }
  }
  return {
    dialect: 'postgres',
    all: q,
    get: async (text, params) => (await q(text, params))[0] as any,
    run: async (text, params = []) => {
      try {
        const result = await sql.unsafe(text, params as postgres.ParameterOrJSON<never>[])
        return result.count
      } catch (e) {
        throw wrap(e, text)
      }
    },
    exec: async (script) => {
      try {
        await sql.unsafe(script).simple()
      } catch (e) {
        throw wrap(e, script)
      }
    },
    transaction: (fn, lockKey) => root.transaction(fn, lockKey),
    close: () => root.close(),
  }
}

export class PostgresDriver implements SqlDriver {
  readonly dialect = 'postgres' as const
  private readonly sql: postgres.Sql<Record<string, never>>
  private readonly inner: SqlDriver

  constructor(url: string, options: PostgresDriverOptions = {}) {
    this.sql = postgres(url, {
      max: options.max ?? 10,
      connect_timeout: 10,
      idle_timeout: 60,
      onnotice: () => {},
      connection: { statement_timeout: options.statementTimeoutMs ?? 15_000, application_name: 'dbm' },
      types: {
        bigint: {
          to: 20,
          from: [20],
          serialize: (x: number | bigint) => x.toString(),
          parse: (x: string) => Number(x),
        },
      } as any,
    })
    this.inner = driverOver(this.sql, this)
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

  async transaction<T>(fn: (tx: SqlDriver) => Promise<T>, lockKey?: string): Promise<T> {
    return (await this.sql.begin(async (tx) => {
      const d = driverOver(tx, this)
      if (lockKey) await d.run('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKey])
      return fn({ ...d, transaction: (f) => f(d) })
    })) as T
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 5 })
  }
}
