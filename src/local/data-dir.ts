// Where `dbm local` keeps its store, secrets, agent buffers and lock: a per-user data directory
// (Linux and BSD: $XDG_DATA_HOME/dbm, else ~/.local/share/dbm; macOS: ~/Library/Application Support/dbm;
// Windows: %LOCALAPPDATA%\dbm), or --data-dir. Created readable by its owner alone (0700). One that another
// user owns, or may write to, is refused: the token secret in it signs the sessions, and whoever can put a
// file there could choose it. So are its files that another user owns or may write to, and a token secret
// others may read; files of the owner's that others may only read are narrowed to the owner alone (0600).
// A symbolic link on the way is judged by its own owner (lstat), not only by what it points at: whoever
// owns a link may point it elsewhere at any time. The data directory itself, or a file in it, may be a
// link only when the link is the user's; a link higher up the path the user's or root's (macOS's /tmp).
// A directory on the path must be the user's or root's, and writable by nobody else unless sticky (/tmp):
// whoever may rename entries in it could swap the data directory, or the page --open hands the browser,
// for one of theirs while a run goes on (as OpenSSH's StrictModes judges a key's path). Group write is
// allowed on a directory of the user's own group (a user private group).
// Windows has no such modes: nothing is checked there.
import { chmodSync, lstatSync, mkdirSync, readdirSync, statSync, type Stats } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, isAbsolute, join, resolve, sep } from 'node:path'

/** The file of the secret that signs the sessions (src/server/config.ts, loadJwtSecret). */
const JWT_SECRET_FILE = 'jwt-secret'

/** The per-user data directory of `dbm local` on `platform`. */
export function defaultDataDir(
  platform: NodeJS.Platform,
  env: Record<string, string | undefined>,
  home = homedir(),
): string {
  if (platform === 'darwin') return join(home, 'Library', 'Application Support', 'dbm')
  if (platform === 'win32') return join(env.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'dbm')
  // The XDG base directory spec: a relative $XDG_DATA_HOME is invalid and ignored.
  const xdg = env.XDG_DATA_HOME
  return join(xdg && isAbsolute(xdg) ? xdg : join(home, '.local', 'share'), 'dbm')
}

const modeOf = (stat: Stats) => (stat.mode & 0o7777).toString(8).padStart(4, '0')

/** Why `stat` (of `what`) may not be used by `uid`, or undefined; `ownerOnly`: its mode means nothing (a link's). */
function refusal(what: string, stat: Stats, uid: number, ownerOnly = false): string | undefined {
  if (stat.uid !== uid) return `${what} belongs to another user (uid ${stat.uid}; this is uid ${uid})`
  if (!ownerOnly && (stat.mode & 0o022) !== 0)
    return `${what} is writable by other users (mode ${modeOf(stat)}), who could have put or changed files in it`
  return undefined
}

const STICKY = 0o1000

/**
 * Why a directory among `path`'s parents may not be trusted by `uid` (of group `gid`), or undefined: a
 * symbolic link another user owns (who may repoint it), a directory another user owns, or one that
 * others may write to without the sticky bit (who may rename what is in it).
 */
function unsafeOnTheWay(path: string, uid: number, gid: number): string | undefined {
  const parts = dirname(path).split(sep).filter(Boolean)
  let at = ''
  for (const part of parts) {
    at += `${sep}${part}`
    const stat = lstatSync(at, { throwIfNoEntry: false })
    if (!stat) break
    const theirs = stat.uid !== uid && stat.uid !== 0
    if (stat.isSymbolicLink()) {
      if (theirs)
        return `${at}, on its path, is a symbolic link of another user (uid ${stat.uid}; this is uid ${uid}), who may point it elsewhere at any time`
      continue
    }
    if (theirs)
      return `${at}, on its path, belongs to another user (uid ${stat.uid}; this is uid ${uid}), who may rename or replace what is in it`
    const othersWrite = (stat.mode & 0o002) !== 0 || ((stat.mode & 0o020) !== 0 && stat.gid !== gid)
    if (othersWrite && (stat.mode & STICKY) === 0) {
      return `${at}, on its path, is writable by other users (mode ${modeOf(stat)}, not sticky), who may rename or replace what is in it`
    }
  }
  return undefined
}

/**
 * Creates `dir` (and its missing parents) with mode 0700, checks it and its entries (above), and narrows
 * what others may read to the owner alone. Returns the absolute path; throws an Error whose message says
 * what is wrong and what to do.
 */
export function prepareDataDir(dir: string): string {
  const path = resolve(dir)
  const uid = process.platform === 'win32' ? -1 : process.getuid!()
  // Before anything is created under a link that is not the user's.
  const onTheWay = uid === -1 ? undefined : unsafeOnTheWay(path, uid, process.getgid!())
  if (onTheWay) throw new Error(`${onTheWay}; give dbm local a directory of your own (--data-dir)`)
  mkdirSync(path, { recursive: true, mode: 0o700 })
  const stat = statSync(path)
  if (!stat.isDirectory()) throw new Error('it is not a directory')
  if (uid === -1) return path
  const own = lstatSync(path)
  const refused =
    (own.isSymbolicLink() ? refusal('it (a symbolic link)', own, uid, true) : undefined) ??
    refusal(own.isSymbolicLink() ? 'it (what it links to)' : 'it', stat, uid)
  if (refused) throw new Error(`${refused}; give dbm local a directory of your own, created by it (--data-dir)`)
  if ((stat.mode & 0o077) !== 0) chmodSync(path, 0o700)
  for (const name of readdirSync(path)) {
    const file = join(path, name)
    const link = lstatSync(file)
    // A link: its own owner (its mode means nothing), then what it points at; a dangling one is left to whoever opens it.
    const isLink = link.isSymbolicLink()
    const entry = isLink ? statSync(file, { throwIfNoEntry: false }) : link
    const wrong =
      (isLink ? refusal(name, link, uid, true) : undefined) ??
      (entry && refusal(isLink ? `${name} (what it links to)` : name, entry, uid))
    if (wrong) throw new Error(`${wrong}; remove it if it is not yours, or give dbm local a new directory (--data-dir)`)
    if (!entry) continue
    if ((entry.mode & 0o044) !== 0 && name === JWT_SECRET_FILE) {
      throw new Error(
        `${name} is readable by other users (mode ${modeOf(entry)}), and whoever read it can sign in; delete it (a new one is made, and every session ends), or chmod 600 it if you made it so yourself`,
      )
    }
    if (!isLink && (entry.mode & 0o077) !== 0) chmodSync(file, entry.mode & 0o700)
  }
  return path
}
