// One `dbm local` per data directory: the lock of src/agent/dir-lock.ts on `local.lock`, held for the
// life of the process (released by the operating system however the process ends).
import { type DirLock, type DirLockProblem, lockDirectory } from '../agent/dir-lock.ts'

export type DataDirLock = DirLock

/** Takes the data directory's lock; `{ holder }` when another process holds it (its pid, when known), `{ problem }` when a planted link or odd file stands in its way. */
export function lockDataDir(dir: string): DataDirLock | { holder: string | undefined } | DirLockProblem {
  return lockDirectory(dir, 'local')
}
