// The SQLite store's checkpoints run in a worker thread (src/server/store/sqlite/checkpointer.ts), not in
// the commits of the store's connection: commits never checkpoint (wal_autocheckpoint 0); the worker's
// checkpoint copies the WAL into the database file while the store stays open and usable; the WAL is then
// reused from its beginning instead of growing; the store file is locked for one owner (its .lock file);
// an upgrade names its migrations before they run and leaves no large log behind; and a store opened for
// dbm serve (checkpointsWhenTold) starts its worker only when told.
import { afterEach, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { migrate, migrations } from '../../src/server/store/migrations.ts'
import { openStore } from '../../src/server/store/open.ts'
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
      for (let r = 0; r < 20; r++)
        await tx.run('INSERT INTO t (round, payload) VALUES ($1, $2)', [round, 'x'.repeat(1000)])
    })
  }
}

test("commits do not checkpoint; the worker's checkpoint copies the WAL and it is reused from its start", async () => {
  const path = freshPath()
  const driver = new SqliteDriver(path)
  try {
    expect(await driver.get<{ wal_autocheckpoint: number }>('PRAGMA wal_autocheckpoint')).toEqual({
      wal_autocheckpoint: 0,
    })
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

test('an upgrade names each migration before it runs and leaves no write-ahead log as large as the rebuild', async () => {
  const path = freshPath()
  const old = new SqliteDriver(path)
  await migrate(old, Date.now, 8)
  await old.exec(`INSERT INTO organizations VALUES ('o', 'o', 'o', 'free', 1, 0);
    INSERT INTO databases (id, org_id, name, engine, host, port, tags, poll_interval_seconds, collect_explain_plans, collect_replication, disabled_collectors, created_at, updated_at)
    VALUES ('d', 'o', 'n', 'postgres', 'h', 1, '{}', 10, 1, 1, '[]', 0, 0);
    WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000)
    INSERT INTO query_stats SELECT 'd', 60, x * 60000, 'q' || (x % 50), 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, NULL FROM c;`)
  await old.close()
  const bytes = statSync(path).size
  const told: [number, number | null][] = []
  const { store, applied } = await openStore({
    dataDir: dirname(path),
    applying: (m, storeBytes) => told.push([m.version, storeBytes]),
  })
  try {
    expect(applied).toEqual(migrations.filter((m) => m.version > 8).map((m) => m.version))
    expect(told).toEqual(applied.map((v) => [v, bytes]))
    // Migration 10 rebuilt query_stats (50,000 rows) through the log; it is folded into the file and cut back.
    expect(existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0).toBe(0)
    expect(await store.driver.get<{ n: number }>('SELECT COUNT(*) AS n FROM query_stats')).toEqual({ n: 50000 })
  } finally {
    await store.close()
  }
  // A new store is not an upgrade: nothing to tell.
  const fresh: number[] = []
  const created = await openStore({ dataDir: dirname(freshPath()), applying: (m) => fresh.push(m.version) })
  await created.store.close()
  expect(fresh).toEqual([])
})

test('with checkpointsWhenTold (dbm serve) no worker runs until startCheckpoints(): and a store closed before it was told starts none and leaves no WAL', async () => {
  const path = freshPath()
  const opened = await openStore({ dataDir: dirname(path), checkpointsWhenTold: true })
  const driver = opened.store.driver as SqliteDriver
  try {
    await driver.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, round INTEGER NOT NULL, payload TEXT NOT NULL)')
    await write(driver, 1)
    // a turn of the event loop and more: a worker started by itself would have started by now
    await Bun.sleep(50)
    expect(await driver.checkpoint()).toBeNull()
    opened.startCheckpoints()
    const result = await driver.checkpoint()
    expect(result).not.toBeNull()
    expect(result!.checkpointed).toBe(result!.log)
    expect(result!.log).toBeGreaterThan(900)
  } finally {
    await opened.store.close()
  }
  expect(existsSync(`${path}-wal`)).toBe(false)

  // closed before it was told: no worker starts, and the close leaves no WAL behind
  const again = await openStore({ dataDir: dirname(path), checkpointsWhenTold: true })
  await again.store.close()
  again.startCheckpoints()
  expect(existsSync(`${path}-wal`)).toBe(false)
  const reopened = new SqliteDriver(path)
  try {
    expect(await reopened.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 4000 })
  } finally {
    await reopened.close()
  }
})
