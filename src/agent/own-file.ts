// Checks on the files the agent keeps beside the buffer (batches with query texts, the collectors'
// saved baselines): in a directory other users can write to, one of them could plant such a file, or a
// symbolic link that makes the agent write where they choose. A file is used only when it is not a link,
// belongs to the agent's own user and no one else may write to it.
import { constants, lstatSync, statSync } from 'node:fs'

/** Why the agent must not use the file at `path`; null when it is absent or fine. */
export function unsafeFileReason(path: string): string | null {
  let info: ReturnType<typeof lstatSync>
  try {
    info = lstatSync(path)
  } catch {
    return null
  }
  if (info.isSymbolicLink()) return 'it is a symbolic link'
  const uid = process.getuid?.()
  if (uid !== undefined && info.uid !== uid) return `it belongs to another user (uid ${info.uid})`
  if ((Number(info.mode) & 0o022) !== 0) return 'other users may write to it'
  return null
}

/** True when users other than the owner may create files in `dir` (group- or world-writable). */
export function othersMayWrite(dir: string): boolean {
  try {
    return (Number(statSync(dir).mode) & 0o022) !== 0
  } catch {
    return false
  }
}

/** open(2) flags that create a file for appending without following a symbolic link at its path. */
export const CREATE_NO_FOLLOW = constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW
