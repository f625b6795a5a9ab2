// Passwords of `dbm local`'s databases from outside its command line, which every user of the machine can
// read (ps, /proc/PID/cmdline). PostgreSQL as libpq finds them: the DSN's own, else PGPASSWORD, else the
// password file (PGPASSFILE, else ~/.pgpass; %APPDATA%\postgresql\pgpass.conf on Windows) in libpq's format,
// read only when nobody but its owner may access it (as libpq, not checked on Windows). ClickHouse: the DSN's
// own, else CLICKHOUSE_PASSWORD (as clickhouse-client). The password found goes into the agent's DSN, in
// this process's memory only. A DSN that carries a password itself gets one warning line at start.
import { readFileSync, statSync } from 'node:fs'
import { homedir, userInfo } from 'node:os'
import { join } from 'node:path'
import { type AgentConfig, detectEngine } from '../agent/config.ts'

type Env = Record<string, string | undefined>

function decode(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

/** Whether a DSN the agent's parser accepted holds a password: in its user info or a `password=` parameter. */
export function dsnHasPassword(dsn: string): boolean {
  const url = new URL(dsn)
  return url.password !== '' || Boolean(url.searchParams.get('password'))
}

/** The warning for DSNs of the command line that carry a password (their 0-based places), or undefined. */
export function commandLineWarning(dsns: readonly string[]): string | undefined {
  const carrying = dsns.flatMap((dsn, i) => (dsnHasPassword(dsn) ? [i] : []))
  if (carrying.length === 0) return undefined
  const places = carrying.map((i) => i + 1)
  const which =
    places.length === 1
      ? `DSN ${places[0]} carries`
      : `DSNs ${places.slice(0, -1).join(', ')} and ${places.at(-1)} carry`
  const engines = new Set(carrying.map((i) => detectEngine(dsns[i]!)))
  const ways = [
    ...(engines.has('postgres') ? ['PGPASSWORD or a ~/.pgpass line (PostgreSQL)'] : []),
    ...(engines.has('clickhouse') ? ['CLICKHOUSE_PASSWORD (ClickHouse)'] : []),
  ]
  return `dbm local: warning: ${which} a password, and this command line is visible to every user of this machine (ps); leave the password out of the DSN and give it in ${ways.join(' or ')} instead`
}

/** What libpq matches a password file's lines against: the connection's host, port, database and user. */
export interface PgpassTarget {
  host: string
  port: string
  database: string
  user: string
}

/** Host, port, database and user a postgres:// DSN connects to, as postgres.js resolves them. */
export function pgpassTarget(dsn: string, env: Env): PgpassTarget {
  const url = new URL(dsn)
  const host = url.hostname || env.PGHOST || 'localhost'
  const user = decode(url.username) || env.PGUSERNAME || env.PGUSER || userInfo().username
  return {
    // As libpq: a Unix socket directory matches the password file's `localhost`.
    host: host.startsWith('/') ? 'localhost' : host,
    port: url.port || env.PGPORT || '5432',
    database: decode(url.pathname.replace(/^\//, '')) || env.PGDATABASE || user,
    user,
  }
}

/** The rest of `line` after a field matching `value` (libpq's pwdfMatchesString): `*`, or `value` with `\` escapes. */
function matchField(line: string, value: string): string | undefined {
  if (line.startsWith('*:')) return line.slice(2)
  let i = 0
  let v = 0
  while (i < line.length) {
    let escaped = false
    if (line[i] === '\\') {
      i++
      escaped = true
    }
    if (line[i] === ':' && v === value.length && !escaped) return line.slice(i + 1)
    if (v === value.length || line[i] !== value[v]) return undefined
    i++
    v++
  }
  return undefined
}

/** The password of the first line of a password file's `text` that matches `target`, as libpq reads it. */
export function pgpassPassword(text: string, target: PgpassTarget): string | undefined {
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r+$/, '')
    if (line === '' || line.startsWith('#')) continue
    let rest: string | undefined = line
    for (const value of [target.host, target.port, target.database, target.user]) {
      rest = matchField(rest, value)
      if (rest === undefined) break
    }
    if (rest === undefined) continue
    // The password field ends at an unescaped colon; `\x` is x.
    let password = ''
    for (let i = 0; i < rest.length && rest[i] !== ':'; i++) {
      if (rest[i] === '\\' && i + 1 < rest.length) i++
      password += rest[i]
    }
    return password
  }
  return undefined
}

/** The password file's path: PGPASSFILE, else libpq's default of the platform. */
export function pgpassPath(env: Env, platform: NodeJS.Platform, home = homedir()): string {
  if (env.PGPASSFILE) return env.PGPASSFILE
  if (platform === 'win32') return join(env.APPDATA || join(home, 'AppData', 'Roaming'), 'postgresql', 'pgpass.conf')
  return join(home, '.pgpass')
}

/** The password file's text; none when absent; a warning (and no text) when libpq would not read it either. */
export function readPgpass(path: string, platform: NodeJS.Platform): { text?: string; warning?: string } {
  const stat = statSync(path, { throwIfNoEntry: false })
  if (!stat) return {}
  if (!stat.isFile())
    return { warning: `dbm local: warning: password file ${path} is not a plain file; it is not read` }
  if (platform !== 'win32' && (stat.mode & 0o077) !== 0) {
    const mode = (stat.mode & 0o777).toString(8).padStart(4, '0')
    return {
      warning: `dbm local: warning: password file ${path} has group or world access (mode ${mode}), so it is not read; chmod 600 it`,
    }
  }
  try {
    return { text: readFileSync(path, 'utf8') }
  } catch (e) {
    return {
      warning: `dbm local: warning: password file ${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); it is not used`,
    }
  }
}

/** `dsn` with `password` in its user info. */
function withPassword(dsn: string, password: string): string {
  const url = new URL(dsn)
  // The setter escapes only some characters; the drivers decode the field, so every one is escaped first.
  url.password = encodeURIComponent(password)
  return url.toString()
}

/**
 * Gives each database of `config` whose DSN holds no password the one of the environment or the password
 * file, in place. Returns the warnings to print (a password file that was needed but is not read).
 */
export function applyPasswords(
  config: AgentConfig,
  env: Env,
  platform: NodeJS.Platform = process.platform,
  home = homedir(),
): string[] {
  const warnings: string[] = []
  let pgpass: { text?: string } | undefined
  for (const db of config.databases) {
    if (dsnHasPassword(db.dsn)) continue
    let password: string | undefined
    if (db.engine === 'clickhouse') {
      password = env.CLICKHOUSE_PASSWORD || undefined
    } else if (env.PGPASSWORD) {
      password = env.PGPASSWORD
    } else {
      if (!pgpass) {
        const read = readPgpass(pgpassPath(env, platform, home), platform)
        if (read.warning) warnings.push(read.warning)
        pgpass = read
      }
      if (pgpass.text !== undefined) password = pgpassPassword(pgpass.text, pgpassTarget(db.dsn, env)) || undefined
    }
    if (password !== undefined) db.dsn = withPassword(db.dsn, password)
  }
  return warnings
}
