// Writes the store refuses for a while, at the driver: a SQLite store whose file may not grow (max_page_count
// at its page count answers SQLITE_FULL, as a full disk does) fails a transaction with SQLITE_FULL, not with
// the ROLLBACK that followed it ("no transaction is active": SQLite had rolled back itself), and takes
// writes again once the limit is raised, without reopening. PostgreSQL's real errors of class 53 and a
// read-only database (25006) are StoreTryLater too, not outages. writeFaults follows the episodes.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { StoreTryLater } from '../../src/server/store/driver.ts'
import { openDriver } from '../../src/server/store/open.ts'
import { PostgresDriver } from '../../src/server/store/postgres/driver.ts'
import type { SqliteDriver } from '../../src/server/store/sqlite/driver.ts'
import { StoreWriteFaults, type WriteFaultChange } from '../../src/server/store/write-faults.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

/** The error `promise` rejects with. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (e) {
    return e as Error
  }
  throw new Error('expected a rejection')
}

describe('SQLite: a store that may not grow', () => {
  let dir: string
  let driver: SqliteDriver

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dbm-full-'))
    driver = (await openDriver({ dataDir: dir })).driver as SqliteDriver
    await driver.exec('CREATE TABLE filler (b BLOB)')
    // No free pages left for a write to take: each needs new ones.
    await driver.exec('VACUUM')
    const { page_count } = (await driver.get<{ page_count: number }>('PRAGMA page_count'))!
    await driver.get(`PRAGMA max_page_count = ${page_count}`)
  })

  afterAll(async () => {
    await driver?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  test('a transaction fails with SQLITE_FULL (not the ROLLBACK after it), a StoreTryLater; so does the probe', async () => {
    const changes: WriteFaultChange[] = []
    driver.writeFaults.onChange((c) => changes.push(c))
    const error = await rejection(
      driver.transaction(async (tx) => {
        await tx.run('INSERT INTO filler (b) VALUES (randomblob(100000))')
      }),
    )
    expect(error).toBeInstanceOf(StoreTryLater)
    expect(error.message).toBe("the store's disk is full (SQLITE_FULL): database or disk is full")
    expect((error as StoreTryLater).code).toBe('SQLITE_FULL')
    expect(driver.writeFaults.failing?.code).toBe('SQLITE_FULL')
    // Outside a transaction too, and the probe: the episode goes on, started once.
    expect(await rejection(driver.run('INSERT INTO filler (b) VALUES (randomblob(100000))'))).toBeInstanceOf(
      StoreTryLater,
    )
    expect(await rejection(driver.probeWrite())).toBeInstanceOf(StoreTryLater)
    expect(changes).toEqual([{ failing: true, error: expect.objectContaining({ code: 'SQLITE_FULL' }) }])
    // The connection is usable: reads answer, and no transaction was left open.
    expect(await driver.get('SELECT COUNT(*) AS n FROM filler')).toEqual({ n: 0 })
  })

  test('once the file may grow, the next write succeeds and the refusal is over, without reopening', async () => {
    await driver.get('PRAGMA max_page_count = 1000000')
    await driver.probeWrite()
    expect(driver.writeFaults.failing).toBeUndefined()
    await driver.transaction(async (tx) => {
      await tx.run('INSERT INTO filler (b) VALUES (randomblob(100000))')
    })
    expect(await driver.get('SELECT COUNT(*) AS n FROM filler')).toEqual({ n: 1 })
    // The probe left nothing behind.
    expect(await driver.get(`SELECT COUNT(*) AS n FROM rate_events WHERE key LIKE 'dbm:write-probe:%'`)).toEqual({
      n: 0,
    })
  })
})

describe('PostgreSQL: errors of class 53 and a read-only database', () => {
  let url: string
  let admin: postgres.Sql
  let driver: PostgresDriver

  beforeAll(async () => {
    url = await (await sharedPostgres()).freshDatabase()
    admin = postgres(url, { max: 1, onnotice: () => {} })
    // The server's own error, with the SQLSTATE a full disk gives (PostgreSQL cannot be made to run out
    // of disk without root here): raised by a trigger, as a write to a full disk would fail.
    await admin.unsafe(`
      CREATE TABLE target (n int);
      CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'could not extend file "base/1/2": No space left on device' USING ERRCODE = TG_ARGV[0];
      END $$;
      CREATE FUNCTION raise_state(state text) RETURNS void LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'refused' USING ERRCODE = state;
      END $$;
      CREATE TRIGGER full_disk BEFORE INSERT ON target FOR EACH ROW EXECUTE FUNCTION refuse('disk_full');`)
    driver = new PostgresDriver(url, { max: 2 })
  })

  afterAll(async () => {
    await driver?.close()
    await admin?.end()
  })

  test('53100 disk_full: a StoreTryLater with the cause, in a transaction or not, and no outage', async () => {
    const outside = await rejection(driver.run('INSERT INTO target VALUES (1)'))
    expect(outside).toBeInstanceOf(StoreTryLater)
    expect(outside.message).toBe(
      `the store's disk is full (SQLSTATE 53100): could not extend file "base/1/2": No space left on device`,
    )
    const inside = await rejection(
      driver.transaction(async (tx) => {
        await tx.run('INSERT INTO target VALUES (2)')
      }),
    )
    expect(inside).toBeInstanceOf(StoreTryLater)
    expect((inside as StoreTryLater).code).toBe('SQLSTATE 53100')
    expect(driver.reachability.available).toBe(true)
    expect(driver.writeFaults.failing?.code).toBe('SQLSTATE 53100')

    await admin`DROP TRIGGER full_disk ON target`
    await driver.transaction(async (tx) => {
      await tx.run('INSERT INTO target VALUES (3)')
    })
    expect(driver.writeFaults.failing).toBeUndefined()
    expect(await driver.all('SELECT n FROM target')).toEqual([{ n: 3 }])
  })

  test('out of memory, too many connections, a read-only transaction: each a StoreTryLater naming it', async () => {
    const answers: string[] = []
    for (const state of ['53200', '53300', '53400', '25006']) {
      const e = await rejection(driver.get('SELECT raise_state($1)', [state]))
      expect(e).toBeInstanceOf(StoreTryLater)
      answers.push(e.message)
    }
    expect(answers).toEqual([
      'the store is out of memory (SQLSTATE 53200): refused',
      'the store has too many connections (SQLSTATE 53300): refused',
      'the store reached a configured limit (SQLSTATE 53400): refused',
      'the store is read-only (a standby, or default_transaction_read_only) (SQLSTATE 25006): refused',
    ])
    // Any other error stays what it was.
    expect(await rejection(driver.get('SELECT raise_state($1)', ['22012']))).not.toBeInstanceOf(StoreTryLater)
  })

  test('a database that only reads (as a standby does): its own 25006 is a StoreTryLater', async () => {
    const name = new URL(url).pathname.slice(1)
    await admin.unsafe(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`)
    const readOnly = new PostgresDriver(url, { max: 1 })
    try {
      const e = await rejection(readOnly.run('INSERT INTO target VALUES (4)'))
      expect(e).toBeInstanceOf(StoreTryLater)
      expect(e.message).toBe(
        'the store is read-only (a standby, or default_transaction_read_only) (SQLSTATE 25006): cannot execute INSERT in a read-only transaction',
      )
      expect(readOnly.reachability.available).toBe(true)
    } finally {
      await readOnly.close()
      await admin.unsafe(`ALTER DATABASE "${name}" RESET default_transaction_read_only`)
    }
  })
})

describe('StoreWriteFaults', () => {
  const full = { code: 'SQLITE_FULL', reason: "the store's disk is full", message: 'full' }

  test('an episode starts at the first refusal and ends only when writes went unrefused for the hold', async () => {
    const changes: WriteFaultChange[] = []
    const faults = new StoreWriteFaults(50, 1_000)
    faults.onChange((c) => changes.push(c))
    faults.wrote() // no episode: nothing
    faults.failed(full)
    faults.failed(full)
    expect(faults.failing).toBe(full)
    expect(faults.probeDue()).toBe(true)
    expect(faults.probeDue()).toBe(false) // at most once per probe interval
    // A small write succeeds, a large one is refused again: still one episode, refused again at once.
    faults.wrote()
    expect(faults.failing).toBeUndefined()
    faults.failed(full)
    expect(faults.failing).toBe(full)
    expect(faults.probeDue()).toBe(false)
    faults.wrote()
    await until('the episode to end', async () => (changes.length === 2 ? true : undefined))
    expect(changes).toEqual([
      { failing: true, error: full },
      { failing: false, failedForMs: expect.any(Number), refused: 3, error: full },
    ])
    expect(faults.failing).toBeUndefined()
  })
})
