// Where `dbm local` keeps its store, secrets, agent buffers and lock: a per-user data directory
// (Linux and BSD: $XDG_DATA_HOME/dbm, else ~/.local/share/dbm; macOS: ~/Library/Application Support/dbm;
// Windows: %LOCALAPPDATA%\dbm), or --data-dir. Created readable by its owner alone (0700).
import { chmodSync, mkdirSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, join, resolve } from 'node:path'

/** The per-user data directory of `dbm local` on `platform`. */
export function defaultDataDir(platform: NodeJS.Platform, env: Record<string, string | undefined>, home = homedir()): string {
  if (platform === 'darwin') return join(home, 'Library', 'Application Support', 'dbm')
  if (platform === 'win32') return join(env.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'dbm')
  // The XDG base directory spec: a relative $XDG_DATA_HOME is invalid and ignored.
  const xdg = env.XDG_DATA_HOME
  return join(xdg && isAbsolute(xdg) ? xdg : join(home, '.local', 'share'), 'dbm')
}

/**
 * Creates `dir` (and its missing parents) with mode 0700, and narrows an existing one of this user's
 * to 0700: it holds the store, the token secret and the agent's buffers. Returns the absolute path.
 */
export function prepareDataDir(dir: string): string {
  const path = resolve(dir)
  mkdirSync(path, { recursive: true, mode: 0o700 })
  if (process.platform !== 'win32') {
    const stat = statSync(path)
    if (!stat.isDirectory()) throw new Error(`${path} is not a directory`)
    if (stat.uid === process.getuid?.() && (stat.mode & 0o077) !== 0) chmodSync(path, 0o700)
  }
  return path
}
