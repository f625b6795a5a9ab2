// dbm local's parts that need no database: where the data directory is on each platform, which
// --listen hosts count as loopback, how a DSN becomes a stable database name (never with its user or
// password), the browser command of --open, the one-time links' lifetime, the data directory's lock and
// what it refuses, and the passwords found outside the command line (environment, ~/.pgpass per libpq);
// symbolic links judged by their own owner; the run's host name, its Host check and its listeners on both
// loopback addresses; the link's file for --open and for an output others may read.
import { expect, test } from 'bun:test'
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  closeSync,
  fstatSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { UsageError } from '../../src/server/config.ts'
import { defaultDataDir, prepareDataDir } from '../../src/local/data-dir.ts'
import { databaseName, localAgentConfig } from '../../src/local/databases.ts'
import { lockDataDir } from '../../src/local/lock.ts'
import {
  applyPasswords,
  commandLineWarning,
  pgpassPassword,
  pgpassPath,
  pgpassTarget,
  readPgpass,
} from '../../src/local/passwords.ts'
import { clickhouseTarget } from '../../src/agent/config.ts'
import { explainLine, isLoopback } from '../../src/local/main.ts'
import { parseFlagLists } from '../../src/cli-args.ts'
import {
  noToplevelAdvice,
  untrustedAdvice,
  untrustedCheckNote,
} from '../../src/agent/collectors/postgres/explain-plans.ts'
import { openBrowser, openCommand } from '../../src/local/open-browser.ts'
import { outputExposure, removeStaleLinkFiles, writeLinkFile } from '../../src/local/link-file.ts'
import { ListenError, PORT_ATTEMPTS, hostScreen, listenLoopback, randomHostName } from '../../src/local/listen.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { Server } from 'bun'
import { SIGN_IN_LIFETIME_MS, SignInLinks } from '../../src/local/sign-in.ts'

test('the per-user data directory of each platform', () => {
  expect(defaultDataDir('linux', { XDG_DATA_HOME: '/x/data' }, '/home/u')).toBe('/x/data/dbm')
  expect(defaultDataDir('linux', {}, '/home/u')).toBe('/home/u/.local/share/dbm')
  // A relative XDG_DATA_HOME is invalid by the spec and ignored.
  expect(defaultDataDir('freebsd', { XDG_DATA_HOME: 'rel' }, '/home/u')).toBe('/home/u/.local/share/dbm')
  expect(defaultDataDir('darwin', { XDG_DATA_HOME: '/x' }, '/Users/u')).toBe('/Users/u/Library/Application Support/dbm')
  expect(defaultDataDir('win32', { LOCALAPPDATA: 'C:/Users/u/AppData/Local' }, 'C:/Users/u')).toBe(
    join('C:/Users/u/AppData/Local', 'dbm'),
  )
})

test('the data directory is created, and narrowed, to 0700; its lock admits one process', () => {
  const root = mkdtempSync(join(tmpdir(), 'dbm-local-parts-'))
  try {
    const dir = prepareDataDir(join(root, 'a', 'dbm'))
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    chmodSync(dir, 0o755)
    prepareDataDir(dir)
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    const first = lockDataDir(dir)
    expect('release' in first).toBe(true)
    expect(statSync(join(dir, 'local.lock')).mode & 0o777).toBe(0o600)
    expect(statSync(join(dir, 'local.pid')).mode & 0o777).toBe(0o600)
    expect(lockDataDir(dir)).toEqual({ holder: String(process.pid) })
    if ('release' in first) first.release()
    const again = lockDataDir(dir)
    expect('release' in again).toBe(true)
    if ('release' in again) again.release()
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})

/** Why prepareDataDir refuses `dir`, or undefined when it takes it. */
function refusal(dir: string): string | undefined {
  try {
    prepareDataDir(dir)
  } catch (e) {
    return (e as Error).message
  }
  return undefined
}

test('a data directory, or a file in it, that another user owns or may write to is refused; a token secret others may read too', () => {
  const root = mkdtempSync(join(tmpdir(), 'dbm-local-parts-'))
  const uid = process.getuid!()
  try {
    const open = join(root, 'open')
    mkdirSync(open)
    chmodSync(open, 0o777)
    expect(refusal(open)).toBe(
      'it is writable by other users (mode 0777), who could have put or changed files in it; give dbm local a directory of your own, created by it (--data-dir)',
    )
    chmodSync(open, 0o770)
    expect(refusal(open)).toStartWith('it is writable by other users (mode 0770)')
    // Nothing was narrowed on the way: the directory is left as it was found.
    expect(statSync(open).mode & 0o777).toBe(0o770)

    // A planted token secret (mode 0644, as a file written with the default umask is).
    const planted = prepareDataDir(join(root, 'planted'))
    writeFileSync(join(planted, 'jwt-secret'), `${'x'.repeat(48)}\n`, { mode: 0o644 })
    chmodSync(join(planted, 'jwt-secret'), 0o644)
    expect(refusal(planted)).toBe(
      'jwt-secret is readable by other users (mode 0644), and whoever read it can sign in; delete it (a new one is made, and every session ends), or chmod 600 it if you made it so yourself',
    )
    chmodSync(join(planted, 'jwt-secret'), 0o600)
    expect(refusal(planted)).toBeUndefined()
    // A store file others may write to is refused; one they may only read is narrowed to the owner.
    writeFileSync(join(planted, 'dbm.sqlite'), '')
    chmodSync(join(planted, 'dbm.sqlite'), 0o666)
    expect(refusal(planted)).toBe(
      'dbm.sqlite is writable by other users (mode 0666), who could have put or changed files in it; remove it if it is not yours, or give dbm local a new directory (--data-dir)',
    )
    chmodSync(join(planted, 'dbm.sqlite'), 0o644)
    expect(refusal(planted)).toBeUndefined()
    expect(statSync(join(planted, 'dbm.sqlite')).mode & 0o777).toBe(0o600)
    // A link to a token secret others may write to.
    const elsewhere = join(root, 'elsewhere-secret')
    writeFileSync(elsewhere, 'x'.repeat(48))
    chmodSync(elsewhere, 0o666)
    rmSync(join(planted, 'jwt-secret'))
    symlinkSync(elsewhere, join(planted, 'jwt-secret'))
    expect(refusal(planted)).toStartWith('jwt-secret (what it links to) is writable by other users (mode 0666)')

    // Another user's directory or file: only root can make one here (tests as another user check what they can).
    if (uid === 0) {
      const foreign = join(root, 'foreign')
      mkdirSync(foreign, { mode: 0o700 })
      chownSync(foreign, 65534, 65534)
      expect(refusal(foreign)).toBe(
        'it belongs to another user (uid 65534; this is uid 0); give dbm local a directory of your own, created by it (--data-dir)',
      )
      const mine = prepareDataDir(join(root, 'mine'))
      writeFileSync(join(mine, 'jwt-secret'), 'x'.repeat(48), { mode: 0o600 })
      chownSync(join(mine, 'jwt-secret'), 65534, 65534)
      expect(refusal(mine)).toBe(
        'jwt-secret belongs to another user (uid 65534; this is uid 0); remove it if it is not yours, or give dbm local a new directory (--data-dir)',
      )
    } else {
      console.log(`not root (uid ${uid}): another user's data directory is not tested`)
    }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})

test("passwords outside the command line: the DSN's own first, then PGPASSWORD, then the password file; CLICKHOUSE_PASSWORD", () => {
  const root = mkdtempSync(join(tmpdir(), 'dbm-local-parts-'))
  try {
    const pgpass = join(root, 'pgpass')
    writeFileSync(pgpass, 'db.local:5433:app:mon:from\\:file\n*:*:*:*:fallback\n', { mode: 0o600 })
    const config = () =>
      localAgentConfig(
        [
          'postgres://mon:own@db.local:5433/own',
          'postgres://mon@db.local:5433/app',
          'postgres://other@db.local/x',
          'clickhouse://u@ch.local/logs',
          'http://u:own@ch2.local:8123',
        ],
        {},
      )
    const dsnsOf = (env: Record<string, string>) => {
      const c = config()
      const warnings = applyPasswords(c, { PGPASSFILE: pgpass, ...env }, 'linux', root)
      return { dsns: c.databases.map((d) => d.dsn), warnings }
    }
    // The file: the first line that matches, with its escapes undone; a DSN's own password is kept.
    expect(dsnsOf({})).toEqual({
      dsns: [
        'postgres://mon:own@db.local:5433/own',
        'postgres://mon:from%3Afile@db.local:5433/app',
        'postgres://other:fallback@db.local/x',
        'clickhouse://u@ch.local/logs',
        'http://u:own@ch2.local:8123',
      ],
      warnings: [],
    })
    // PGPASSWORD before the file; CLICKHOUSE_PASSWORD for ClickHouse; both with characters URLs escape.
    const odd = 'p@ss:w%rd/?#é'
    const { dsns } = dsnsOf({ PGPASSWORD: odd, CLICKHOUSE_PASSWORD: odd })
    expect(dsns[0]).toBe('postgres://mon:own@db.local:5433/own')
    expect(decodeURIComponent(new URL(dsns[1]!).password)).toBe(odd)
    expect(decodeURIComponent(new URL(dsns[2]!).password)).toBe(odd)
    expect(clickhouseTarget(dsns[3]!)).toEqual({
      url: 'http://ch.local:8123',
      username: 'u',
      password: odd,
      database: 'logs',
    })
    expect(clickhouseTarget(dsns[4]!).password).toBe('own')
    // A password file others may read is not read (as libpq), with one warning.
    chmodSync(pgpass, 0o640)
    expect(dsnsOf({})).toEqual({
      dsns: [
        'postgres://mon:own@db.local:5433/own',
        'postgres://mon@db.local:5433/app',
        'postgres://other@db.local/x',
        'clickhouse://u@ch.local/logs',
        'http://u:own@ch2.local:8123',
      ],
      warnings: [
        `dbm local: warning: password file ${pgpass} has group or world access (mode 0640), so it is not read; chmod 600 it`,
      ],
    })
    expect(readPgpass(join(root, 'absent'), 'linux')).toEqual({})
    expect(readPgpass(pgpass, 'win32').text).toContain('fallback')
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})

test('the password file per libpq: host:port:database:user:password, * and \\ escapes, first match, comments', () => {
  const target = { host: 'db', port: '5432', database: 'app', user: 'mon' }
  const file = [
    '# comment',
    '',
    'other:5432:app:mon:no',
    'db:5432:app:nobody:no',
    'd\\x:*:app:mon:no',
    'db:5432:*:mon:first\\:one\\\\x:ignored',
    'db:*:*:*:second',
  ].join('\r\n')
  expect(pgpassPassword(file, target)).toBe('first:one\\x')
  expect(pgpassPassword(file, { ...target, user: 'x' })).toBe('second')
  expect(pgpassPassword(file, { ...target, host: 'd' })).toBeUndefined()
  // A backslash escapes any character: `d\\b` is the host "db".
  expect(pgpassPassword('d\\b:5432:app:mon:escaped', target)).toBe('escaped')
  // An escaped colon in a field is part of the value: a host "a:b" (a field never ends at `\:`).
  expect(pgpassPassword('a\\:b:5432:app:mon:pw', { ...target, host: 'a:b' })).toBe('pw')
  expect(pgpassPassword('a\\:b:5432:app:mon:pw', { ...target, host: 'a' })).toBeUndefined()
  // A line with fewer fields matches nothing; `*` is a wildcard only as a whole field.
  expect(pgpassPassword('db:5432:app', target)).toBeUndefined()
  expect(pgpassPassword('d*:5432:app:mon:pw', target)).toBeUndefined()
  // What the DSN connects to, as postgres.js resolves it; a Unix socket directory is `localhost`.
  expect(pgpassTarget('postgres://mon@db:5433/app', {})).toEqual({
    host: 'db',
    port: '5433',
    database: 'app',
    user: 'mon',
  })
  expect(
    pgpassTarget('postgres://', { PGHOST: '/run/postgresql', PGPORT: '6000', PGUSER: 'u', PGDATABASE: 'd' }),
  ).toEqual({ host: 'localhost', port: '6000', database: 'd', user: 'u' })
  expect(pgpassTarget('postgres://db', { PGUSER: 'u' })).toEqual({ host: 'db', port: '5432', database: 'u', user: 'u' })
  expect(pgpassPath({}, 'linux', '/home/u')).toBe('/home/u/.pgpass')
  expect(pgpassPath({ PGPASSFILE: '/x/pw' }, 'linux', '/home/u')).toBe('/x/pw')
  expect(pgpassPath({ APPDATA: 'C:/Users/u/AppData/Roaming' }, 'win32', 'C:/Users/u')).toBe(
    join('C:/Users/u/AppData/Roaming', 'postgresql', 'pgpass.conf'),
  )
})

test('a password on the command line: one warning, naming the DSNs by place and never the password', () => {
  expect(commandLineWarning(['postgres://mon@db/app', 'clickhouse://u@ch/x'])).toBeUndefined()
  expect(commandLineWarning(['postgres://mon:secret@db/app'])).toBe(
    'dbm local: warning: DSN 1 carries a password, and this command line is visible to every user of this machine (ps); leave the password out of the DSN and give it in PGPASSWORD or a ~/.pgpass line (PostgreSQL) instead',
  )
  const several = commandLineWarning([
    'postgres://mon:secret@db/app',
    'postgres://db/b',
    'http://ch:8123/?password=secret',
    'clickhouse://u:secret@ch2/x',
  ])
  expect(several).toBe(
    'dbm local: warning: DSNs 1, 3 and 4 carry a password, and this command line is visible to every user of this machine (ps); leave the password out of the DSN and give it in PGPASSWORD or a ~/.pgpass line (PostgreSQL) or CLICKHOUSE_PASSWORD (ClickHouse) instead',
  )
  expect(several).not.toContain('secret')
})

test('--listen: loopback hosts only', () => {
  for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) expect(isLoopback(host)).toBe(true)
  for (const host of ['0.0.0.0', '::', '192.168.1.2', '10.0.0.1', 'example.com', '127.0.0.1.example.com', ''])
    expect(isLoopback(host)).toBe(false)
})

test('database names: host, port and database of the DSN, never its user or password', () => {
  const env = { PGUSER: 'envuser' }
  expect(databaseName('postgres://mon:secret@db.local:5433/app', env)).toBe('db.local:5433/app')
  expect(databaseName('postgresql://mon:secret@db.local/app?sslmode=disable', env)).toBe('db.local:5432/app')
  // As postgres.js: no database is the user's, no user PGUSER's.
  expect(databaseName('postgres://mon:secret@db.local', env)).toBe('db.local:5432/mon')
  expect(databaseName('postgres://db.local', env)).toBe('db.local:5432/envuser')
  // ClickHouse: the HTTP address the agent uses (9000 is 8123) and the database.
  expect(databaseName('clickhouse://u:secret@ch.local:9000/logs', env)).toBe('ch.local:8123/logs')
  expect(databaseName('https://u:secret@ch.local:8443', env)).toBe('ch.local:8443/default')
  const config = localAgentConfig(
    ['postgres://mon:secret@db.local:5433/app', 'clickhouse://u:secret@ch.local/logs'],
    env,
  )
  expect(config.databases.map((d) => [d.name, d.engine, d.pollIntervalMs])).toEqual([
    ['db.local:5433/app', 'postgres', 10_000],
    ['ch.local:8123/logs', 'clickhouse', 10_000],
  ])
})

test('DSNs the agent would refuse are usage errors with its message, without the password', () => {
  const message = (dsns: string[]) => {
    try {
      localAgentConfig(dsns, {})
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError)
      return (e as Error).message
    }
    return undefined
  }
  expect(message(['postgres://u:secret@[::1]:5432/app'])).toBe(
    'dbm local: DSN 1 (postgres://u:***@[::1]:5432/app): IPv6 address literals are not supported in PostgreSQL DSNs; use a host name that resolves to [::1]',
  )
  expect(message(['postgres://db/app', 'clickhouse://u:secret@a,b/x'])).toBe(
    'dbm local: DSN 2 (clickhouse://u:***@a,b/x): expected one host: the agent watches a single ClickHouse instance, not a cluster',
  )
  expect(message(['postgres://a:secret@db/app', 'postgres://b:secret@db:5432/app'])).toBe(
    'dbm local: DSN 2 (postgres://b:***@db:5432/app): names the same database as DSN 1 (db:5432/app)',
  )
})

test('--open: the desktop command of each platform, none without a desktop', () => {
  const url = 'http://127.0.0.1:1/local-sign-in?token=x'
  expect(openCommand('linux', { DISPLAY: ':0' }, url)).toEqual(['xdg-open', url])
  expect(openCommand('freebsd', { WAYLAND_DISPLAY: 'wayland-0' }, url)).toEqual(['xdg-open', url])
  expect(openCommand('linux', {}, url)).toBeUndefined()
  expect(openCommand('darwin', {}, url)).toEqual(['open', url])
  expect(openCommand('win32', {}, url)).toEqual(['cmd', '/c', 'start', '""', url])
})

test('a sign-in link works once, for 15 minutes, and only as issued', () => {
  const links = new SignInLinks()
  const now = 1_000_000
  const token = links.issue('u1', now)
  expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
  expect(links.consume(`${token}x`, now)).toMatchObject({ ok: false, status: 404 })
  expect(links.consume('', now)).toMatchObject({ ok: false, status: 404 })
  expect(links.consume(token, now + SIGN_IN_LIFETIME_MS - 1)).toEqual({ ok: true, userId: 'u1' })
  expect(links.consume(token, now)).toMatchObject({ ok: false, status: 410, title: 'Sign-in link already used' })
  const late = links.issue('u1', now)
  expect(links.consume(late, now + SIGN_IN_LIFETIME_MS)).toMatchObject({
    ok: false,
    status: 410,
    title: 'Sign-in link expired',
  })
  // Only hashes are kept.
  expect(JSON.stringify([...(links as unknown as { links: Map<string, unknown> }).links.keys()])).not.toContain(token)
})

test('symbolic links are judged by their own owner: the data directory, a file in it, a directory on its path; directories on the path too', () => {
  const root = mkdtempSync(join(tmpdir(), 'dbm-local-parts-'))
  const uid = process.getuid!()
  try {
    // The user's own link to the user's own directory is fine.
    const target = prepareDataDir(join(root, 'target'))
    symlinkSync(target, join(root, 'mine'))
    expect(refusal(join(root, 'mine'))).toBeUndefined()
    if (uid !== 0) {
      console.log(`not root (uid ${uid}): another user's links are not tested`)
      return
    }
    // Another user's link to a directory of the user's (what it points at passes every check).
    symlinkSync(target, join(root, 'theirs'))
    lchownSync(join(root, 'theirs'), 65534, 65534)
    expect(refusal(join(root, 'theirs'))).toBe(
      'it (a symbolic link) belongs to another user (uid 65534; this is uid 0); give dbm local a directory of your own, created by it (--data-dir)',
    )
    // A directory on the path that is another user's link: refused before anything is created under it.
    expect(refusal(join(root, 'theirs', 'sub'))).toBe(
      `${join(root, 'theirs')}, on its path, is a symbolic link of another user (uid 65534; this is uid 0), who may point it elsewhere at any time; give dbm local a directory of your own (--data-dir)`,
    )
    expect(existsSync(join(target, 'sub'))).toBe(false)
    // A directory on the path that another user owns, or that others may write to without the sticky bit:
    // they could rename the data directory away and put one of theirs in its place during a run.
    mkdirSync(join(root, 'shared'), { mode: 0o777 })
    chmodSync(join(root, 'shared'), 0o777)
    expect(refusal(join(root, 'shared', 'dbm'))).toBe(
      `${join(root, 'shared')}, on its path, is writable by other users (mode 0777, not sticky), who may rename or replace what is in it; give dbm local a directory of your own (--data-dir)`,
    )
    chmodSync(join(root, 'shared'), 0o1777)
    expect(refusal(join(root, 'shared', 'dbm'))).toBeUndefined()
    mkdirSync(join(root, 'theirs-dir'), { mode: 0o755 })
    chownSync(join(root, 'theirs-dir'), 65534, 65534)
    expect(refusal(join(root, 'theirs-dir', 'dbm'))).toBe(
      `${join(root, 'theirs-dir')}, on its path, belongs to another user (uid 65534; this is uid 0), who may rename or replace what is in it; give dbm local a directory of your own (--data-dir)`,
    )
    // A store file and a token secret that are another user's links to files of the user's.
    for (const name of ['dbm.sqlite', 'jwt-secret']) {
      const dir = prepareDataDir(join(root, `with-${name}`))
      writeFileSync(join(root, `real-${name}`), 'x'.repeat(48), { mode: 0o600 })
      symlinkSync(join(root, `real-${name}`), join(dir, name))
      expect(refusal(dir)).toBeUndefined()
      lchownSync(join(dir, name), 65534, 65534)
      expect(refusal(dir)).toBe(
        `${name} belongs to another user (uid 65534; this is uid 0); remove it if it is not yours, or give dbm local a new directory (--data-dir)`,
      )
    }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})

test("the run's host name: random under .localhost; the Host check lets in the name and the loopback addresses on the port only", async () => {
  const name = randomHostName()
  expect(name).toMatch(/^dbm-[a-z2-7]{26}\.localhost$/)
  expect(randomHostName()).not.toBe(name)
  const screen = hostScreen(name, () => 4321)
  const at = (host: string | undefined) =>
    screen(new Request('http://x/api/v1/auth/me', { headers: host === undefined ? {} : { host } }))
  for (const host of [`${name}:4321`, `${name.toUpperCase()}:4321`, '127.0.0.1:4321', '[::1]:4321'])
    expect(at(host)).toBeUndefined()
  for (const host of [
    `${name}:4322`,
    name,
    'localhost:4321',
    '127.0.0.2:4321',
    'evil.example:4321',
    `x.${name}:4321`,
    `${name}.evil.example:4321`,
    '',
    undefined,
  ]) {
    const refused = at(host)
    expect(refused?.status).toBe(421)
    // The refusal never names the run: a stranger who learnt it could send the owner's browser, cookies and all, to a port of theirs.
    expect(await refused!.json()).toEqual({
      error: 'this dbm local answers only at the address it printed; open the Dashboard line of its output',
    })
  }
  // A browser gets a page saying so (still without the name).
  const page = screen(
    new Request('http://x/', { headers: { host: 'localhost:4321', accept: 'text/html,application/xhtml+xml' } }),
  )!
  expect([page.status, page.headers.get('content-type')]).toEqual([421, 'text/html; charset=utf-8'])
  const html = await page.text()
  expect(html).toContain('Open the address dbm local printed')
  expect(html).not.toContain(name)
})

test('listeners: one port on 127.0.0.1 and ::1; a squatter on [::1] is a refusal for a given port and another port for port 0', () => {
  const servers: Server<unknown>[] = []
  const open = (hostname: string, port: number) => {
    const s = Bun.serve({ hostname, port, reusePort: false, fetch: () => new Response('dbm') })
    servers.push(s)
    return s
  }
  try {
    const both = listenLoopback(open, 0)
    expect(both.map((s) => s.hostname)).toEqual(['127.0.0.1', '::1'])
    expect(both[1]!.port).toBe(both[0]!.port)
    // Another process on [::1] of a given port: refused, and its 127.0.0.1 given up.
    const squatter = Bun.serve({ hostname: '::1', port: 0, fetch: () => new Response('squatter') })
    servers.push(squatter)
    let message = ''
    try {
      listenLoopback(open, squatter.port!)
    } catch (e) {
      expect(e).toBeInstanceOf(ListenError)
      message = (e as Error).message
    }
    expect(message).toBe(
      `cannot listen on [::1]:${squatter.port}: another process holds it (the printed name resolves to ::1 as well as 127.0.0.1); stop it, or pick another port (--listen)`,
    )
    const again = Bun.serve({
      hostname: '127.0.0.1',
      port: squatter.port!,
      reusePort: false,
      fetch: () => new Response(''),
    })
    servers.push(again)
  } finally {
    for (const s of servers) void s.stop(true)
  }
  // Port 0 whose ::1 is taken: another port; no IPv6 loopback: 127.0.0.1 alone; never more than PORT_ATTEMPTS.
  const fake = (failures: (string | undefined)[]) => {
    const calls: string[] = []
    let next = 40000
    const open = (hostname: string, port: number) => {
      calls.push(`${hostname}:${port}`)
      if (hostname === '::1') {
        const code = failures.shift()
        if (code) throw Object.assign(new Error(code), { code })
      }
      return { hostname, port: port || next++, stop: () => Promise.resolve() } as unknown as Server<unknown>
    }
    return { calls, open }
  }
  const busy = fake(['EADDRINUSE', undefined])
  expect(listenLoopback(busy.open, 0).map((s) => `${s.hostname}:${s.port}`)).toEqual(['127.0.0.1:40001', '::1:40001'])
  expect(busy.calls).toEqual(['127.0.0.1:0', '::1:40000', '127.0.0.1:0', '::1:40001'])
  const noV6 = fake(['EADDRNOTAVAIL'])
  expect(listenLoopback(noV6.open, 0).map((s) => s.hostname)).toEqual(['127.0.0.1'])
  const always = fake(Array(PORT_ATTEMPTS + 1).fill('EADDRINUSE'))
  expect(() => listenLoopback(always.open, 0)).toThrow(
    `cannot listen: no port free on both 127.0.0.1 and ::1 in ${PORT_ATTEMPTS} attempts`,
  )
})

test('--open hands the browser a 0600 file, never the token; the file leads to the link and is removed', () => {
  const root = mkdtempSync(join(tmpdir(), 'dbm-local-parts-'))
  try {
    const dir = prepareDataDir(join(root, 'dbm'))
    const token = `tok_${'A'.repeat(39)}`
    const link = `http://dbm-abc.localhost:1234/local-sign-in?token=${token}`
    const file = writeLinkFile(dir, link)
    expect(statSync(file.path).mode & 0o777).toBe(0o600)
    expect(file.path).toMatch(/\/sign-in-[0-9a-f]{32}\.html$/)
    const page = readFileSync(file.path, 'utf8')
    expect(page).toContain(`<meta http-equiv="refresh" content="0; url=${link}">`)
    expect(page).toContain(`<a href="${link}">`)
    const spawned: string[][] = []
    const spawn = (command: string[]) => {
      spawned.push(command)
      return { unref() {}, exited: Promise.resolve(0) }
    }
    const log = createLogger('error', () => {})
    expect(openBrowser(file, log, 'linux', { DISPLAY: ':0' }, spawn)).toEqual(['xdg-open', file.url])
    expect(openBrowser(file, log, 'darwin', {}, spawn)).toEqual(['open', file.url])
    expect(spawned).toHaveLength(2)
    for (const argv of spawned) expect(argv.join(' ')).not.toContain(token)
    expect(file.url).toBe(`file://${file.path}`)
    // Never an existing name; removed once (and again is nothing); a killed run's file by the next run.
    file.remove()
    file.remove()
    expect(existsSync(file.path)).toBe(false)
    const left = writeLinkFile(dir, link)
    removeStaleLinkFiles(dir)
    expect(existsSync(left.path)).toBe(false)
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})

test('the link is not printed on an output others may read: a file or FIFO of another user, or readable by group or others', () => {
  const root = mkdtempSync(join(tmpdir(), 'dbm-local-parts-'))
  const uid = process.getuid!()
  const exposure = (path: string) => {
    const fd = openSync(path, 'r+')
    try {
      return outputExposure(fstatSync(fd), uid)
    } finally {
      closeSync(fd)
    }
  }
  try {
    const file = join(root, 'out.log')
    writeFileSync(file, '', { mode: 0o644 })
    chmodSync(file, 0o644)
    expect(exposure(file)).toBe('standard output is a file that others may read (mode 0644)')
    chmodSync(file, 0o640)
    expect(exposure(file)).toBe('standard output is a file that others may read (mode 0640)')
    chmodSync(file, 0o600)
    expect(exposure(file)).toBeUndefined()
    const fifo = join(root, 'fifo')
    Bun.spawnSync(['mkfifo', '-m', '0644', fifo])
    expect(outputExposure(statSync(fifo), uid)).toBe('standard output is a FIFO that others may read (mode 0644)')
    expect(exposure('/dev/null')).toBeUndefined()
    if (uid === 0) {
      chownSync(file, 65534, 65534)
      expect(exposure(file)).toBe('standard output is a file of another user (uid 65534)')
    }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})

test('--explain-trusted-role: for every PostgreSQL database, with its owner trusted; the start line says whom', () => {
  const config = localAgentConfig(['postgres://mon@db.local/app', 'clickhouse://ch.local/logs'], {}, [
    'app_owner',
    'Mixed Case',
  ])
  const [pg, ch] = config.databases
  expect([pg!.explainTrustedRoles, pg!.explainTrustsOwner, pg!.local]).toEqual([
    ['app_owner', 'Mixed Case'],
    true,
    true,
  ])
  expect([ch!.explainTrustedRoles, ch!.explainTrustsOwner, ch!.local]).toEqual([undefined, undefined, true])
  expect(explainLine(config, ['app_owner'])).toBe(
    `Plans:     statements of each PostgreSQL database's owner are explained (it is your own database: its code is yours), and "app_owner" (--explain-trusted-role)`,
  )
  // Without the flag the owner alone, and the line names the flag; no PostgreSQL database, no line.
  const plain = localAgentConfig(['postgres://mon@db.local/app'], {})
  expect([plain.databases[0]!.explainTrustedRoles, plain.databases[0]!.explainTrustsOwner]).toEqual([undefined, true])
  expect(explainLine(plain, [])).toEndWith('; --explain-trusted-role NAME adds a role')
  expect(explainLine(localAgentConfig(['clickhouse://ch.local/logs'], {}), [])).toBeUndefined()
  const refused = (dsns: string[], roles: string[]) => {
    try {
      localAgentConfig(dsns, {}, roles)
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError)
      return (e as Error).message
    }
  }
  expect(refused(['postgres://db/app'], [''])).toBe(
    'dbm local: --explain-trusted-role: expected a role name of 1 to 63 bytes',
  )
  expect(refused(['postgres://db/app'], ['r'.repeat(64)])).toBe(
    'dbm local: --explain-trusted-role: expected a role name of 1 to 63 bytes',
  )
  expect(refused(['clickhouse://ch/logs'], ['app'])).toBe(
    'dbm local: --explain-trusted-role is for PostgreSQL databases, and no DSN names one',
  )
})

test('the flag parser collects a repeated flag in order, apart from the others', () => {
  const spec = { values: ['listen'], switches: ['open'], repeated: ['explain-trusted-role'] }
  expect(
    parseFlagLists(
      'local',
      ['--explain-trusted-role', 'a', '--open', '--explain-trusted-role=b c', '--listen', ':1'],
      spec,
    ),
  ).toEqual({
    flags: { open: 'true', listen: ':1' },
    lists: { 'explain-trusted-role': ['a', 'b c'] },
  })
  expect(() => parseFlagLists('local', ['--explain-trusted-role'], spec)).toThrow(
    'dbm local: --explain-trusted-role needs a value',
  )
})

test("dbm local's plan notes name its flag, never the agent config or pg_log_dir it does not have", () => {
  const found = { count: 2, examples: ["public.slugify(text) (owned by o'brien)"], owners: ["o'brien", 'app'] }
  expect(untrustedAdvice(found, 'db', true)).toBe(
    "public.slugify(text) (owned by o'brien) and 1 more function would run with the agent's rights while planning. If you trust their owners, run dbm local with --explain-trusted-role 'o'\\''brien' --explain-trusted-role app",
  )
  expect(untrustedAdvice(found, 'db')).toEndWith(
    `add to database "db" in the agent config: explain_trusted_roles: ["o'brien","app"]; otherwise use auto_explain with pg_log_dir`,
  )
  expect(noToplevelAdvice(true)).toEndWith('update the extension (PostgreSQL 14+)')
  // --check's note leads with what to set, then why; no `;` (it separates the check line's notes).
  expect(untrustedCheckNote(found, 'db', true)).toBe(
    "--explain-trusted-role 'o'\\''brien' --explain-trusted-role app (run dbm local with it if you trust their owners): plans will not be sampled while public.slugify(text) (owned by o'brien) and 1 more function would run with the agent's rights while planning",
  )
  expect(untrustedCheckNote(found, 'db')).toBe(
    `explain_trusted_roles: ["o'brien","app"] (add it to database "db" in the agent config if you trust their owners, or use auto_explain with pg_log_dir): plans will not be sampled while public.slugify(text) (owned by o'brien) and 1 more function would run with the agent's rights while planning`,
  )
})
