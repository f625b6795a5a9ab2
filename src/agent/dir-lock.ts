// One process per directory: an exclusive SQLite lock on `<name>.lock` in it, held for the life of the
// process. `dbm agent` takes one on its buffer and state directory (two agents on one directory would
// both send the same deltas), `dbm local` on its data directory (src/local/lock.ts). The operating system
// releases the lock when the process ends, however it ends, so a dead process's lock is simply taken
// over; a second live process finds it taken at once (SQLITE_BUSY). `<name>.pid` holds the holder's pid,
// only for the message the second process prints.
import { Database } from 'bun:sqlite'
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface DirLock {
  release(): void
}

/** Takes `dir`'s lock named `name` (created with the directory when absent); `{ holder }` when another process holds it (its pid, when known). */
export function lockDirectory(dir: string, name: string): DirLock | { holder: string | undefined } {
  mkdirSync(dir, { recursive: true })
  const path = join(dir, `${name}.lock`)
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
      holder = readFileSync(join(dir, `${name}.pid`), 'utf8').trim() || undefined
    } catch {}
    return { holder }
  }
  writeFileSync(join(dir, `${name}.pid`), `${process.pid}\n`, { mode: 0o600 })
  return {
    release() {
      try {
        db.exec('ROLLBACK')
      } catch {}
      db.close()
    },
  }
}
