// The one-time sign-in link in a file of the data directory, for the two places it must not be written
// out: a browser's command line (--open: every user reads /proc/<pid>/cmdline) and a standard output that
// others may read (a log file). The file is created exclusively under a random name, mode 0600, in the
// data directory (0700), and is a small page that sends the browser on to the link (a meta refresh and a
// plain link, which also shows it to whoever reads the file). It is removed when the link is used, when
// it expires and when the process ends; a file a killed run left behind is removed by the next run.
import { type Stats, closeSync, openSync, readdirSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const PREFIX = 'sign-in-'
const SUFFIX = '.html'

export interface LinkFile {
  path: string
  /** Its file:// URL, for the browser. */
  url: string
  /** Removes the file (again: nothing). */
  remove(): void
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** Writes `link` into a new 0600 page in `dir`. */
export function writeLinkFile(dir: string, link: string): LinkFile {
  const name = `${PREFIX}${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex')}${SUFFIX}`
  const path = join(dir, name)
  const href = escapeHtml(link)
  const page = [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">',
    `<meta http-equiv="refresh" content="0; url=${href}">`,
    '<title>dbm local: sign in</title></head>',
    `<body><p><a href="${href}">Sign in to dbm local</a> (the link works once):</p><p>${href}</p></body></html>`,
    '',
  ].join('\n')
  // wx: created here and now (never an existing file or a link planted under the name), for the owner alone.
  const fd = openSync(path, 'wx', 0o600)
  try {
    writeSync(fd, page)
  } finally {
    closeSync(fd)
  }
  let removed = false
  return {
    path,
    url: pathToFileURL(path).href,
    remove() {
      if (removed) return
      removed = true
      try {
        unlinkSync(path)
      } catch {}
    },
  }
}

/** Removes the link files of earlier runs (their links died with their process). */
export function removeStaleLinkFiles(dir: string): void {
  for (const name of readdirSync(dir)) {
    if (!name.startsWith(PREFIX) || !name.endsWith(SUFFIX)) continue
    try {
      unlinkSync(join(dir, name))
    } catch {}
  }
}

/**
 * Why the link may not be printed on an output with status `stat`, or undefined: a regular file or a FIFO
 * that another user owns, or that group or others may read. (A terminal, an anonymous pipe of the user's
 * or /dev/null is fine.)
 */
export function outputExposure(stat: Stats, uid: number): string | undefined {
  if (!stat.isFile() && !stat.isFIFO()) return undefined
  const kind = stat.isFile() ? 'a file' : 'a FIFO'
  if (stat.uid !== uid) return `standard output is ${kind} of another user (uid ${stat.uid})`
  if ((stat.mode & 0o044) !== 0)
    return `standard output is ${kind} that others may read (mode ${(stat.mode & 0o777).toString(8).padStart(4, '0')})`
  return undefined
}
