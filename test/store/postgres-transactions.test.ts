// The PostgreSQL store's transactions and their reserved connection: a transaction whose ROLLBACK fails
// without an outage (here the connection is left in the middle of a COPY, where postgres.js refuses any
// other statement) gets its connection closed, not kept reserved or handed back: the server ends that
// session, and the pool, even one of a single connection, goes on serving without an outage episode.
// BEGIN and the lock go out with the transaction's first statements, and runLast sends COMMIT with its
// statements: a failing statement or lock fails the transaction with its own error and keeps nothing.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Writable } from 'node:stream'
import postgres from 'postgres'
import { PostgresDriver } from '../../src/server/store/postgres/driver.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

let url = ''
let admin: postgres.Sql
let driver: PostgresDriver

beforeAll(async () => {
  url = await (await sharedPostgres()).freshDatabase()
  admin = postgres(url, { max: 1, onnotice: () => {} })
  await admin`CREATE TABLE copy_target (n int)`
  await admin`CREATE TABLE pipelined (n int PRIMARY KEY)`
  driver = new PostgresDriver(url, { max: 1 })
})

afterAll(async () => {
  await driver?.close()
  await admin?.end()
})

/** Sessions of the driver (application_name dbm) on the test database that are in a COPY. */
const copyingSessions = async () =>
  Number(
    (
      await admin`SELECT COUNT(*) AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'dbm' AND query LIKE 'COPY%' AND state <> 'idle'`
    )[0]!.n,
  )

test('a ROLLBACK that fails without an outage closes the reserved connection: the server ends the session, the pool goes on', async () => {
  const failed = driver.transaction(async (tx) => {
    await tx.run('INSERT INTO copy_target VALUES (1)')
    // postgres.js answers a COPY FROM STDIN with its input stream; closing the connection fails it.
    const input = (await tx.all('COPY copy_target FROM STDIN')) as unknown as Writable
    input.on('error', () => {})
    throw new Error('the caller failed mid-COPY')
  })
  await expect(failed).rejects.toThrow('the caller failed mid-COPY')

  await until('the session left in COPY to end', async () => ((await copyingSessions()) === 0 ? true : undefined), {
    timeoutMs: 10_000,
  })
  // The pool's only connection serves again, on a fresh session.
  const answer = await Promise.race([
    driver.get<{ one: number }>('SELECT 1 AS one'),
    Bun.sleep(10_000).then(() => 'no answer'),
  ])
  expect(answer).toEqual({ one: 1 })
  expect(driver.reachability.available).toBe(true)
  // Nothing of the transaction was kept.
  expect(Number((await admin`SELECT COUNT(*) AS n FROM copy_target`)[0]!.n)).toBe(0)
  // And transactions work on it as before.
  await driver.transaction(async (tx) => {
    await tx.run('INSERT INTO copy_target VALUES (2)')
  })
  expect(Number((await admin`SELECT COUNT(*) AS n FROM copy_target`)[0]!.n)).toBe(1)
})

const pipelinedRows = async (sql: postgres.Sql | postgres.ReservedSql = admin) =>
  (await sql`SELECT n FROM pipelined ORDER BY n`).map((r) => Number(r.n))

test('BEGIN, the lock, the statements and COMMIT (runLast) in one exchange; a statement failing there keeps nothing', async () => {
  const before = { ...driver.sent }
  const answered = await driver.transaction(
    async (tx) =>
      tx.runLast!([
        { sql: 'INSERT INTO pipelined VALUES ($1), ($2)', params: [1, 2] },
        { sql: 'SELECT COUNT(*) AS n FROM pipelined' },
      ]),
    'pipelined-lock',
  )
  expect(answered.map((r) => [r.changed, r.rows.map((row) => Number(row.n))])).toEqual([
    [2, []],
    [1, [2]],
  ])
  expect({
    statements: driver.sent.statements - before.statements,
    exchanges: driver.sent.exchanges - before.exchanges,
  }).toEqual({ statements: 5, exchanges: 1 })
  expect(await pipelinedRows()).toEqual([1, 2])

  // The second statement fails (the key exists): the first's row is not kept, the error is the statement's.
  const failed = driver.transaction(async (tx) => {
    await tx.run('INSERT INTO pipelined VALUES (3)')
    return tx.runLast!([
      { sql: 'INSERT INTO pipelined VALUES ($1)', params: [4] },
      { sql: 'INSERT INTO pipelined VALUES ($1)', params: [1] },
    ])
  }, 'pipelined-lock')
  await expect(failed).rejects.toThrow('duplicate key value violates unique constraint')
  expect(await pipelinedRows()).toEqual([1, 2])
  // The connection (the pool's only one) goes on with a transaction that commits.
  await driver.transaction(async (tx) => {
    await tx.run('INSERT INTO pipelined VALUES (5)')
  }, 'pipelined-lock')
  expect(await pipelinedRows()).toEqual([1, 2, 5])
  expect(driver.reachability.available).toBe(true)
})

test('a lock not granted in time fails the transaction with the lock error, though its statements went out with it', async () => {
  const impatient = new PostgresDriver(url, { max: 1, statementTimeoutMs: 300 })
  const holder = await admin.reserve()
  try {
    await holder`SELECT pg_advisory_lock(hashtextextended('held-lock', 0))`
    const failed = impatient.transaction(async (tx) => {
      await tx.run('INSERT INTO pipelined VALUES (6)')
      return tx.runLast!([{ sql: 'INSERT INTO pipelined VALUES ($1)', params: [7] }])
    }, 'held-lock')
    const error = (await failed.then(
      () => undefined,
      (e: unknown) => e,
    )) as { message: string; sql: string } | undefined
    expect(error?.message).toBe('postgres: canceling statement due to statement timeout')
    expect(error?.sql).toBe('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))')
    expect(await pipelinedRows(holder)).toEqual([1, 2, 5])
    await holder`SELECT pg_advisory_unlock(hashtextextended('held-lock', 0))`
    // Granted now: the same connection commits.
    await impatient.transaction(
      async (tx) => tx.runLast!([{ sql: 'INSERT INTO pipelined VALUES ($1)', params: [7] }]),
      'held-lock',
    )
    expect(await pipelinedRows(holder)).toEqual([1, 2, 5, 7])
  } finally {
    holder.release()
    await impatient.close()
  }
})
