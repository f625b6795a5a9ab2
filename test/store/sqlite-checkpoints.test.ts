// The SQLite store's checkpoints run in a worker thread (src/server/store/sqlite/checkpointer.ts), not in
// the commits of the store's connection: commits never checkpoint (wal_autocheckpoint 0); the worker's
// checkpoint copies the WAL into the database file while the store stays open and usable; the WAL is then
// reused from its beginning instead of growing; and the store file is locked for one owner (its .lock file).
import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SqliteDriver } from '../../src/server/store/sqlite/driver.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function freshPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-checkpoints-'))
  dirs.push(dir)
  return join(dir, 'dbm.sqlite')
}

/** 200 transactions of 20 rows of 1 KB each: about 4 MB of WAL. */
async function write(driver: SqliteDriver, round: number) {
  for (let t = 0; t < 200; t++) {
    await driver.transaction(async (tx) => {
      for (let r = 0; r < 20; r++) await tx.run('INSERT INTO t (round, payload) VALUES ($1, $2)', [round, 'x'.repeat(1000)])
    })
  }
}

test("commits do not checkpoint; the worker's checkpoint copies the WAL and it is reused from its start", async () => {
  const path = freshPath()
  const driver = new SqliteDriver(path)
  try {
    expect(await driver.get<{ wal_autocheckpoint: number }>('PRAGMA wal_autocheckpoint')).toEqual({ wal_autocheckpoint: 0 })
    await driver.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, round INTEGER NOT NULL, payload TEXT NOT NULL)')
    await write(driver, 1)
    const first = await driver.checkpoint()
    expect(first).not.toBeNull()
    // Nothing wrote meanwhile: the worker copied every frame.
    expect(first!.checkpointed).toBe(first!.log)
    expect(first!.log).toBeGreaterThan(900)
    const walAfterFirst = statSync(`${path}-wal`).size
    // The same writes again start the WAL over: it stays about its size (a few more pages as the table
    // grows), where without the restart it would double.
    await write(driver, 2)
    expect(statSync(`${path}-wal`).size).toBeLessThan(1.5 * walAfterFirst)
    const second = await driver.checkpoint()
    expect(second!.checkpointed).toBe(second!.log)
    expect(await driver.get<{ n: number }>('SELECT COUNT(*) AS n FROM t WHERE round = 2')).toEqual({ n: 4000 })
  } finally {
    await driver.close()
  }
  // Closed: the WAL went into the file, which holds every row.
  const reopened = new SqliteDriver(path)
  try {
    expect(await reopened.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 8000 })
  } finally {
    await reopened.close()
  }
})

test('a store open in this process cannot be opened a second time until it is closed', async () => {
  const path = freshPath()
  const driver = new SqliteDriver(path)
  try {
    expect(() => new SqliteDriver(path)).toThrow(/database is locked/)
  } finally {
    await driver.close()
  }
  const again = new SqliteDriver(path)
  await again.close()
})
