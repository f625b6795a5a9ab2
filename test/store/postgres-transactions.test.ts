// The PostgreSQL store's transactions and their reserved connection: a transaction whose ROLLBACK fails
// without an outage (here the connection is left in the middle of a COPY, where postgres.js refuses any
// other statement) gets its connection closed, not kept reserved or handed back: the server ends that
// session, and the pool, even one of a single connection, goes on serving without an outage episode.
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

  await until('the session left in COPY to end', async () => ((await copyingSessions()) === 0 ? true : undefined), { timeoutMs: 10_000 })
  // The pool's only connection serves again, on a fresh session.
  const answer = await Promise.race([driver.get<{ one: number }>('SELECT 1 AS one'), Bun.sleep(10_000).then(() => 'no answer')])
  expect(answer).toEqual({ one: 1 })
  expect(driver.availability.available).toBe(true)
  // Nothing of the transaction was kept.
  expect(Number((await admin`SELECT COUNT(*) AS n FROM copy_target`)[0]!.n)).toBe(0)
  // And transactions work on it as before.
  await driver.transaction(async (tx) => {
    await tx.run('INSERT INTO copy_target VALUES (2)')
  })
  expect(Number((await admin`SELECT COUNT(*) AS n FROM copy_target`)[0]!.n)).toBe(1)
})
