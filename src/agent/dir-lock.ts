// One process per directory: an exclusive SQLite lock on `<name>.lock` in it, held for the life of the
// process. `dbm agent` takes one on its buffer and state directory (two agents on one directory would
// both send the same deltas), `dbm local` on its data directory (src/local/lock.ts). The operating system
// releases the lock when the process ends, however it ends, so a dead process's lock is simply taken
// over; a second live process finds it taken at once (SQLITE_BUSY). `<name>.pid` holds the holder's pid,
// only for the message the second process prints.
//
// The directory may be writable by others (a shared buffer directory), so no symlink in it is followed:
// a planted `<name>.lock` link is refused with a one-line problem naming it (the lock file is opened with
// O_NOFOLLOW, and SQLite with SQLITE_OPEN_NOFOLLOW); the pid is written to a new file (O_EXCL|O_NOFOLLOW)
// renamed over `<name>.pid`, which replaces a planted link or hard link rather than writing through it;
// and the holder's pid is read without following a link, and only when it is a number.
import { Database, constants as sqlite } from 'bun:sqlite'
import { randomBytes } from 'node:crypto'
import {
  closeSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  constants as fs,
  writeSync,
} from 'node:fs'
import { join } from 'node:path'

export interface DirLock {
  release(): void
}

/** What lockDirectory answers when it will not take the lock: why, in one line naming the file. */
export interface DirLockProblem {
  problem: string
}

/** O_NOFOLLOW where the platform has it (not on Windows, which has no such links in the way). */
const NOFOLLOW = fs.O_NOFOLLOW ?? 0
const NONBLOCK = fs.O_NONBLOCK ?? 0

/**
 * Takes `dir`'s lock named `name` (created with the directory when absent); `{ holder }` when another
 * process holds it (its pid, when known); `{ problem }` when the lock or pid file is a planted link or
 * not a regular file.
 */
export function lockDirectory(dir: string, name: string): DirLock | { holder: string | undefined } | DirLockProblem {
  mkdirSync(dir, { recursive: true })
  const path = join(dir, `${name}.lock`)
  // Created for the owner alone (SQLite would make it 0644 less the umask), and never through a link.
  const opened = openRegular(path, fs.O_RDWR | fs.O_CREAT, 0o600)
  if (typeof opened === 'string') return { problem: opened }
  closeSync(opened)
  let db: Database
  try {
    db = new Database(path, sqlite.SQLITE_OPEN_READWRITE | sqlite.SQLITE_OPEN_CREATE | sqlite.SQLITE_OPEN_NOFOLLOW)
  } catch (e) {
    // A link planted between the check above and SQLite's open.
    if ((e as { code?: string }).code === 'SQLITE_CANTOPEN_SYMLINK') return { problem: linkProblem(path) }
    throw e
  }
  try {
    db.exec('PRAGMA locking_mode = EXCLUSIVE')
    db.exec('BEGIN EXCLUSIVE')
  } catch (e) {
    db.close()
    if ((e as { code?: string }).code !== 'SQLITE_BUSY') throw e
    return { holder: readPid(join(dir, `${name}.pid`)) }
  }
  const release = () => {
    try {
      db.exec('ROLLBACK')
    } catch {}
    db.close()
  }
  const pidProblem = writePid(join(dir, `${name}.pid`))
  if (pidProblem) {
    release()
    return { problem: pidProblem }
  }
  return { release }
}

const linkProblem = (path: string) =>
  `${path} is a symbolic link: remove it (the lock and pid files are never followed through a link)`

/** `path` opened with `flags` without following a link: its descriptor, or the one-line problem when it is a link or not a regular file. */
function openRegular(path: string, flags: number, mode?: number): number | string {
  let fd: number
  try {
    fd = openSync(path, flags | NOFOLLOW | NONBLOCK, mode)
  } catch (e) {
    if ((e as { code?: string }).code === 'ELOOP') return linkProblem(path)
    throw e
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd)
    return `${path} is not a regular file: remove it`
  }
  return fd
}

/** The pid in `path` when it is a regular file holding a number; undefined otherwise (absent, a link, anything else). */
function readPid(path: string): string | undefined {
  let fd: number | string
  try {
    fd = openRegular(path, fs.O_RDONLY)
  } catch {
    return undefined
  }
  if (typeof fd === 'string') return undefined
  try {
    const buffer = Buffer.alloc(32)
    const text = buffer
      .subarray(0, readSync(fd, buffer, 0, buffer.length, 0))
      .toString('utf8')
      .trim()
    return /^\d{1,10}$/.test(text) ? text : undefined
  } catch {
    return undefined
  } finally {
    closeSync(fd)
  }
}

/** Writes this process's pid to `path` through a new file renamed over it; the one-line problem when that fails. */
function writePid(path: string): string | undefined {
  const temp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}`
  try {
    const fd = openSync(temp, fs.O_WRONLY | fs.O_CREAT | fs.O_EXCL | NOFOLLOW, 0o600)
    try {
      writeSync(fd, `${process.pid}\n`)
    } finally {
      closeSync(fd)
    }
    renameSync(temp, path)
    return undefined
  } catch (e) {
    rmSync(temp, { force: true })
    return `cannot write ${path}: ${(e as Error).message}`
  }
}
