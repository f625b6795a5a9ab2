// dbm local's parts that need no database: where the data directory is on each platform, which
// --listen hosts count as loopback, how a DSN becomes a stable database name (never with its user or
// password), the browser command of --open, the one-time links' lifetime, and the data directory's lock.
import { expect, test } from 'bun:test'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { UsageError } from '../../src/server/config.ts'
import { defaultDataDir, prepareDataDir } from '../../src/local/data-dir.ts'
import { databaseName, localAgentConfig } from '../../src/local/databases.ts'
import { lockDataDir } from '../../src/local/lock.ts'
import { isLoopback } from '../../src/local/main.ts'
import { openCommand } from '../../src/local/open-browser.ts'
import { SIGN_IN_LIFETIME_MS, SignInLinks } from '../../src/local/sign-in.ts'

test('the per-user data directory of each platform', () => {
  expect(defaultDataDir('linux', { XDG_DATA_HOME: '/x/data' }, '/home/u')).toBe('/x/data/dbm')
  expect(defaultDataDir('linux', {}, '/home/u')).toBe('/home/u/.local/share/dbm')
  // A relative XDG_DATA_HOME is invalid by the spec and ignored.
  expect(defaultDataDir('freebsd', { XDG_DATA_HOME: 'rel' }, '/home/u')).toBe('/home/u/.local/share/dbm')
  expect(defaultDataDir('darwin', { XDG_DATA_HOME: '/x' }, '/Users/u')).toBe('/Users/u/Library/Application Support/dbm')
  expect(defaultDataDir('win32', { LOCALAPPDATA: 'C:/Users/u/AppData/Local' }, 'C:/Users/u')).toBe(join('C:/Users/u/AppData/Local', 'dbm'))
})

test('the data directory is created, and narrowed, to 0700; its lock admits one process', () => {
  const root = mkdtempSync(join(tmpdir(), 'dbm-local-parts-'))
  try {
    const dir = prepareDataDir(join(root, 'a', 'dbm'))
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    require('node:fs').chmodSync(dir, 0o755)
    prepareDataDir(dir)
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    const first = lockDataDir(dir)
    expect('release' in first).toBe(true)
    expect(lockDataDir(dir)).toEqual({ holder: String(process.pid) })
    if ('release' in first) first.release()
    const again = lockDataDir(dir)
    expect('release' in again).toBe(true)
    if ('release' in again) again.release()
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})

test('--listen: loopback hosts only', () => {
  for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) expect(isLoopback(host)).toBe(true)
  for (const host of ['0.0.0.0', '::', '192.168.1.2', '10.0.0.1', 'example.com', '127.0.0.1.example.com', '']) expect(isLoopback(host)).toBe(false)
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
  const config = localAgentConfig(['postgres://mon:secret@db.local:5433/app', 'clickhouse://u:secret@ch.local/logs'], env)
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
  expect(links.consume(late, now + SIGN_IN_LIFETIME_MS)).toMatchObject({ ok: false, status: 410, title: 'Sign-in link expired' })
  // Only hashes are kept.
  expect(JSON.stringify([...(links as unknown as { links: Map<string, unknown> }).links.keys()])).not.toContain(token)
})
