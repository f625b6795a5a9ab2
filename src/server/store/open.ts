// Opens the configured store: embedded SQLite in the data directory by default, PostgreSQL when a
// postgres:// URL is given. Pending migrations are applied before the store is handed out. openDriver
// stops at the migrated driver, without loading the store's code (sql-store.ts and its queries): `dbm
// serve` listens with the driver alone and loads that code after (bench/RESULTS.md, Start-up).
import { chmodSync, mkdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { redactSecrets } from '../../shared/redact.ts'
import type { SqlDriver } from './driver.ts'
import type { AddedColumn } from './family-columns.ts'
import { type Migration, migrate } from './migrations.ts'
import { SqliteDriver } from './sqlite/driver.ts'
import type { SqlStore } from './sql-store.ts'

export interface OpenStoreOptions {
  /** postgres:// or postgresql:// URL; absent = SQLite in `dataDir`. */
  databaseUrl?: string
  dataDir: string
  /** Told each migration applied to an existing store (not a new one) before it runs, with the store file's size (SQLite). */
  applying?: (m: Migration, storeBytes: number | null) => void
  /** Told each column the family step added (a counter a family gained, src/shared/families.ts). */
  columnAdded?: (column: AddedColumn) => void
  /** SqlStore's rollupSpreadMs (openStore only): 0 when absent. */
  rollupSpreadMs?: number
  /** Told each time the migrations are tried again after a lock timeout or deadlock (PostgreSQL; migrations.ts). */
  retrying?: (attempt: number, cause: unknown) => void
  /**
   * SQLite: the checkpoint worker starts at OpenedStore.startCheckpoints() instead of right after the
   * open (`dbm serve` listens and builds its API first: the worker's start is a few milliseconds of the
   * main thread, and a thread of its own starting on a 2-core machine, that no first request needs).
   */
  checkpointsWhenTold?: boolean
}

export interface OpenedStore extends OpenedDriver {
  store: SqlStore
}

export interface OpenedDriver {
  /** The migrated driver (a SqlStore over it is the store). */
  driver: SqlDriver
  /** Migration versions applied by this open (empty when the schema was current). */
  applied: number[]
  /** Where the data lives, without credentials, for the start-up log line. */
  location: string
  /** Starts the SQLite store's checkpoint worker if it waits to be told (`checkpointsWhenTold`); else nothing. */
  startCheckpoints(): void
}

function inUse(location: string, cause: unknown): Error {
  return new Error(`${location} is in use by another process (another dbm serve on this data directory?)`, { cause })
}

const isLocked = (e: unknown) => /database is locked/i.test(String((e as Error)?.message))

export async function openStore(options: OpenStoreOptions): Promise<OpenedStore> {
  const opened = await openDriver(options)
  const { SqlStore } = await import('./sql-store.ts')
  return { ...opened, store: new SqlStore(opened.driver, { rollupSpreadMs: options.rollupSpreadMs }) }
}

/** Opens and migrates the store's driver (openStore without the SqlStore). */
export async function openDriver(options: OpenStoreOptions): Promise<OpenedDriver> {
  let driver: SqlDriver
  let location: string
  if (options.databaseUrl) {
    // Loaded only for a PostgreSQL store: postgres.js is a good part of the start-up of a SQLite one otherwise.
    const { PostgresDriver } = await import('./postgres/driver.ts')
    driver = new PostgresDriver(options.databaseUrl)
    location = redactSecrets(options.databaseUrl)
  } else {
    mkdirSync(options.dataDir, { recursive: true, mode: 0o700 })
    location = join(options.dataDir, 'dbm.sqlite')
    try {
      driver = new SqliteDriver(location, { checkpointsWhenTold: options.checkpointsWhenTold })
    } catch (e) {
      throw isLocked(e) ? inUse(location, e) : e
    }
    chmodSync(location, 0o600)
    chmodSync(`${location}.lock`, 0o600)
  }
  try {
    const storeBytes = options.databaseUrl ? null : statSync(location).size
    let upgraded = false
    const applied = await migrate(
      driver,
      Date.now,
      undefined,
      (m, from) => {
        if (from > 0) {
          upgraded = true
          options.applying?.(m, storeBytes)
        }
      },
      options.columnAdded,
      options.retrying,
    )
    // A migration that rebuilt tables of an existing store leaves a write-ahead log as large as what it
    // wrote: copy it into the file and truncate it now, instead of keeping it for as long as the server
    // runs. A new store's log holds only its empty tables, which the checkpoint worker copies; truncating
    // it here cost `dbm serve`'s first start 7-30 ms of fsyncs before it could listen.
    if (upgraded && driver instanceof SqliteDriver) await driver.exec('PRAGMA wal_checkpoint(TRUNCATE)')
    const startCheckpoints = driver instanceof SqliteDriver ? () => driver.startCheckpoints() : () => {}
    return { driver, applied, location, startCheckpoints }
  } catch (e) {
    await driver.close().catch(() => {})
    throw !options.databaseUrl && isLocked(e) ? inUse(location, e) : e
  }
}
