// One `dbm local` per data directory: an exclusive SQLite lock on `local.lock`, held for the life of
// the process. The operating system releases it when the process ends, however it ends, so there is no
// stale lock to clean up after a crash; a second process finds it taken at once (SQLITE_BUSY).
import { Database } from 'bun:sqlite'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface DataDirLock {
  release(): void
}

/** Takes the data directory's lock; undefined when another process holds it (`holder`: its pid, when known). */
export function lockDataDir(dir: string): DataDirLock | { holder: string | undefined } {
  const path = join(dir, 'local.lock')
  // Created for the owner alone (SQLite would make it 0644 less the umask).
  closeSync(openSync(path, 'a', 0o600))
  const db = new Database(path, { create: true })
  try {
    db.exec('PRAGMA locking_mode = EXCLUSIVE')
    db.exec('BEGIN EXCLUSIVE')
  } catch (e) {
    db.close()
    if ((e as { code?: string }).code !== 'SQLITE_BUSY') throw e
    let holder: string | undefined
    try {
      holder = readFileSync(join(dir, 'local.pid'), 'utf8').trim() || undefined
    } catch {}
    return { holder }
  }
  // Only for the message a second process prints; the lock itself is the SQLite one.
  writeFileSync(join(dir, 'local.pid'), `${process.pid}\n`, { mode: 0o600 })
  return {
    release() {
      try {
        db.exec('ROLLBACK')
      } catch {}
      db.close()
    },
  }
}
