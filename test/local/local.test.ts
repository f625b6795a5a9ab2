// `dbm local <dsn>` end to end, as a user runs it: `bun src/cli.ts local` against real PostgreSQL 17,
// driven through its printed address and one-time link. One run is followed from start to Ctrl-C
// (first data, statements with pg_stat_statements' own calls count, the link used once, a second
// instance refused, --open), then a second run, of the release binary, on the same data directory keeps
// the history (same database id, the statements still there), adds a ClickHouse DSN and one whose
// database is created only after the start (reported by the check, then shown), and Chromium follows
// its new link to the statements page. The first run has its password from PGPASSWORD, the second from
// ~/.pgpass and CLICKHOUSE_PASSWORD: neither prints the command line warning that a DSN with a password gets.
// The DSN's password is looked for in every output and every file of the data directory, whose files are
// all the user's alone; data directories that others own or may write to, or hold a planted token secret, are refused.
// Another user of the machine gets nothing (issue 23): the links name a random host of the run under
// .localhost, served on 127.0.0.1 and ::1 and nothing else (421 for another Host); the first run's
// session, access token and an API key made with it are refused by the second run; --open hands the
// browser a 0600 file, never the token, and Chromium signs in by opening it; after signing in, Chromium
// sends no dbm cookie to another server on 127.0.0.1 or localhost (the review's repro); a squatter on
// [::1] makes --listen refuse; an output others may read gets the file's path instead of the link.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { Subprocess } from 'bun'
import { builtBinary } from '../support/binary.ts'
import { launchBrowser, openPage } from '../support/browser.ts'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'
import { type PostgresServer, sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { cleanEnv, repoRoot, runCommand } from '../support/process.ts'
import { until } from '../support/wait.ts'
import { listenLoopback } from '../../src/local/listen.ts'

interface LocalProcess {
  proc: Subprocess<'ignore', 'pipe', 'pipe'>
  stdout(): string
  stderr(): string
  /** Resolves with the first match of `pattern` in stdout (fails if the process exits first). */
  printed(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  stop(signal: 'SIGINT' | 'SIGTERM'): Promise<number | null>
}

const children = new Set<Subprocess>()

/** `<command> local ...args`; the command is `bun src/cli.ts` unless given (the compiled binary). */
function startLocal(args: string[], env: Record<string, string>, command = ['bun', 'src/cli.ts']): LocalProcess {
  const proc = Bun.spawn([...command, 'local', ...args], {
    cwd: repoRoot,
    env: cleanEnv(env),
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 120_000,
    killSignal: 'SIGKILL',
  })
  children.add(proc)
  let out = ''
  let err = ''
  const read = async (stream: ReadableStream<Uint8Array>, add: (s: string) => void) => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) add(decoder.decode(chunk, { stream: true }))
  }
  const drained = Promise.all([read(proc.stdout, (s) => (out += s)), read(proc.stderr, (s) => (err += s))])
  let exited = false
  void proc.exited.then(() => (exited = true))
  return {
    proc,
    stdout: () => out,
    stderr: () => err,
    async printed(pattern, timeoutMs = 20_000) {
      return until(
        `stdout to show ${pattern}`,
        async () => {
          const m = out.match(pattern)
          if (m) return m
          if (exited) throw new Error(`dbm local exited (${proc.exitCode}) before printing ${pattern}:\n${out}\n${err}`)
          return undefined
        },
        { timeoutMs, everyMs: 25 },
      )
    },
    async stop(signal) {
      proc.kill(signal)
      await proc.exited
      await drained
      children.delete(proc)
      return proc.exitCode
    },
  }
}

/** The session cookies a response sets, as one Cookie header. */
function cookiesOf(res: Response): string {
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';', 1)[0]!)
    .filter((c) => !c.endsWith('='))
    .join('; ')
}

async function api<T = any>(base: string, path: string, cookie: string): Promise<{ status: number; body: T }> {
  const res = await fetch(base + path, { headers: { cookie } })
  return { status: res.status, body: (await res.json()) as T }
}

let pg: PostgresServer
let dsn: string
/** `dsn` without its password: what the runs are given, the password coming from elsewhere. */
let bareDsn: string
let role: string
let password: string
let dbPath: string
let statementSql: postgres.Sql
const home = mkdtempSync(join(tmpdir(), 'dbm-local-home-'))
const xdgDataHome = join(home, 'xdg')
const dataDir = join(xdgDataHome, 'dbm')
const opened = join(home, 'opened')
const outputs: string[] = []

// The release binary runs the second run: built meanwhile (once per test process, shared with the other files that need it).
let binary: Promise<string>
/** A ClickHouse for the second run, started meanwhile (with the same password, looked for too). */
let clickhouse: Promise<ClickHouseRig>

beforeAll(async () => {
  binary = builtBinary()
  binary.catch(() => {})
  // A role of its own with a password found nowhere else, to look for in every output and file.
  password = `pw-${crypto.randomUUID()}`
  clickhouse = startClickHouse({ password })
  clickhouse.catch(() => {})
  pg = await sharedPostgres(17)
  const admin = pg.url()
  const url = new URL(await statementsDatabase(pg))
  dbPath = url.pathname
  role = `local_${Math.random().toString(36).slice(2, 8)}`
  const sql = postgres(admin, { max: 1, onnotice: () => {} })
  await sql.unsafe(`CREATE ROLE ${role} LOGIN SUPERUSER PASSWORD '${password}'`)
  await sql.end()
  dsn = `postgres://${role}:${password}@127.0.0.1:${pg.port}${dbPath}`
  bareDsn = `postgres://${role}@127.0.0.1:${pg.port}${dbPath}`
  statementSql = postgres(dsn, { max: 1, onnotice: () => {} })
  // --open's browser: a fake xdg-open that writes down what it was asked to open.
  const bin = join(home, 'bin')
  require('node:fs').mkdirSync(bin)
  writeFileSync(join(bin, 'xdg-open'), `#!/bin/sh\nprintf '%s' "$1" > '${opened}'\n`)
  chmodSync(join(bin, 'xdg-open'), 0o755)
}, 60_000)

afterAll(async () => {
  for (const proc of children) proc.kill('SIGKILL')
  await (await clickhouse.catch(() => undefined))?.stop()
  await statementSql?.end()
  rmSync(home, { recursive: true, force: true })
})

const env = () => ({
  HOME: home,
  XDG_DATA_HOME: xdgDataHome,
  PATH: `${join(home, 'bin')}:${process.env.PATH}`,
  DISPLAY: ':0',
})
/** The line a DSN with a password on the command line gets. */
const commandLineWarning =
  'dbm local: warning: DSN 1 carries a password, and this command line is visible to every user of this machine (ps); leave the password out of the DSN and give it in PGPASSWORD or a ~/.pgpass line (PostgreSQL) instead\n'

test('usage errors exit 2 with one line, and the DSN password is not echoed', async () => {
  const [wide, badDsn, badParam, badChParam, unknownScheme, none, help] = await Promise.all([
    runCommand(['bun', 'src/cli.ts', 'local', '--listen', '0.0.0.0:0', 'postgres://localhost/x'], { env: env() }),
    runCommand(['bun', 'src/cli.ts', 'local', 'postgres://u:s3cret-pw@127.0.0.1:notaport/db'], { env: env() }),
    runCommand(
      ['bun', 'src/cli.ts', 'local', 'postgres://u@127.0.0.1/db', 'postgres://u:s3cret-pw@127.0.0.1/db?sslmode=bogus'],
      { env: env() },
    ),
    runCommand(['bun', 'src/cli.ts', 'local', 'clickhouse://u:s3cret-pw@127.0.0.1/db?skip_verify=1'], { env: env() }),
    runCommand(['bun', 'src/cli.ts', 'local', 'mysql://u:s3cret-pw@127.0.0.1/db'], { env: env() }),
    runCommand(['bun', 'src/cli.ts', 'local'], { env: env() }),
    runCommand(['bun', 'src/cli.ts', 'local', '--help'], { env: env() }),
  ])
  expect([wide.exitCode, wide.stderr]).toEqual([
    2,
    'dbm local: --listen must name a loopback address (127.0.0.1, ::1 or localhost), got "0.0.0.0:0"\n',
  ])
  // The agent's own message for the DSN (`databases[0].dsn: not a valid postgres:// URL` in a config file).
  expect([badDsn.exitCode, badDsn.stderr]).toEqual([
    2,
    'dbm local: DSN 1 (postgres://u:***@127.0.0.1:notaport/db): not a valid postgres:// URL\n',
  ])
  // A parameter it would not honour (sslmode=bogus was once taken as "verify the certificate" and retried forever).
  expect([badParam.exitCode, badParam.stderr.split('\n').at(-2)]).toEqual([
    2,
    'dbm local: DSN 2 (postgres://u:***@127.0.0.1/db?sslmode=bogus): sslmode: expected one of disable, allow, prefer, require, verify-ca, verify-full, got "bogus"',
  ])
  expect([badChParam.exitCode, badChParam.stderr.split('\n').at(-2)]).toEqual([
    2,
    'dbm local: DSN 1 (clickhouse://u:***@127.0.0.1/db?skip_verify=1): unknown parameter "skip_verify" (the agent reads username, password, database, secure)',
  ])
  expect([unknownScheme.exitCode, unknownScheme.stderr]).toEqual([
    2,
    'dbm local: DSN 1 (mysql://u:***@127.0.0.1/db): expected a postgres://, postgresql://, clickhouse://, tcp://, http:// or https:// URL\n',
  ])
  expect(none.exitCode).toBe(2)
  expect(none.stderr).toStartWith('dbm local: name at least one database DSN')
  expect(help.exitCode).toBe(0)
  expect(help.stdout).toStartWith('Usage: dbm local <dsn> [<dsn>...] [flags]\n')
  // Nothing was created by a refused start.
  expect(() => statSync(dataDir)).toThrow()
})

test('a data directory others may write to, or that holds a token secret others may read, is refused (exit 1, one line)', async () => {
  const open = join(home, 'open')
  mkdirSync(open)
  chmodSync(open, 0o777)
  // A token secret planted by someone else, with which they would sign session cookies that work.
  const planted = join(home, 'planted')
  mkdirSync(planted, { mode: 0o700 })
  writeFileSync(join(planted, 'jwt-secret'), `${'planted-secret-'.repeat(4)}\n`)
  chmodSync(join(planted, 'jwt-secret'), 0o644)
  const foreign = join(home, 'foreign')
  mkdirSync(foreign, { mode: 0o700 })
  const root = process.getuid!() === 0
  // Another user's directory: only root can make one (chown).
  if (root) chownSync(foreign, 65534, 65534)
  const run = (dir: string) => runCommand(['bun', 'src/cli.ts', 'local', '--data-dir', dir, bareDsn], { env: env() })
  const [openRun, plantedRun, foreignRun] = await Promise.all([
    run(open),
    run(planted),
    root ? run(foreign) : undefined,
  ])
  expect([openRun.exitCode, openRun.stderr]).toEqual([
    1,
    `dbm local: cannot use the data directory ${open}: it is writable by other users (mode 0777), who could have put or changed files in it; give dbm local a directory of your own, created by it (--data-dir)\n`,
  ])
  expect([plantedRun.exitCode, plantedRun.stderr]).toEqual([
    1,
    `dbm local: cannot use the data directory ${planted}: jwt-secret is readable by other users (mode 0644), and whoever read it can sign in; delete it (a new one is made, and every session ends), or chmod 600 it if you made it so yourself\n`,
  ])
  if (foreignRun) {
    expect([foreignRun.exitCode, foreignRun.stderr]).toEqual([
      1,
      `dbm local: cannot use the data directory ${foreign}: it belongs to another user (uid 65534; this is uid 0); give dbm local a directory of your own, created by it (--data-dir)\n`,
    ])
  } else {
    console.log("not root: another user's data directory is not tested")
  }
  // Nothing was started or created in them.
  expect(readdirSync(open)).toEqual([])
  expect(readdirSync(planted)).toEqual(['jwt-secret'])
  for (const r of [openRun, plantedRun, foreignRun]) if (r) outputs.push(r.stdout, r.stderr)
})

let databaseId: string
let expectedCalls: number
let firstLink: string
/** What the first run handed out, to be refused by the second. */
let firstRun: { access: string; refresh: string; apiKey: string }
/** The printed dashboard address: this run's random name under .localhost. */
const dashboardLine = /^Dashboard: (http:\/\/dbm-[a-z2-7]{26}\.localhost:(\d+))\/$/m

test('first run: link, first data, statements with their exact calls, one instance, Ctrl-C', async () => {
  const started = Date.now()
  // The password from PGPASSWORD, not the command line.
  const local = startLocal([bareDsn, '--open'], { ...env(), PGPASSWORD: password })
  const [, base, port] = await local.printed(dashboardLine)
  const [, link] = await local.printed(/^Sign in: +(http:\S+)$/m)
  firstLink = link!
  expect(link).toStartWith(`${base}/local-sign-in?token=`)
  // --open handed the desktop's browser a 0600 file of the data directory that leads to the link, not the link.
  const openedUrl = await until(
    'xdg-open to be run',
    async () => (existsSync(opened) && readFileSync(opened, 'utf8')) || undefined,
  )
  expect(openedUrl).toMatch(new RegExp(`^file://${dataDir}/sign-in-[0-9a-f]{32}\\.html$`))
  const linkFile = new URL(openedUrl).pathname
  expect(statSync(linkFile).mode & 0o777).toBe(0o600)
  expect(readFileSync(linkFile, 'utf8')).toContain(`<meta http-equiv="refresh" content="0; url=${link}">`)
  // Both loopback addresses are this process's; a request naming another host (DNS rebinding) is refused.
  expect((await fetch(`http://[::1]:${port}/healthz`)).status).toBe(200)
  expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200)
  const rebound = await fetch(`http://127.0.0.1:${port}/api/v1/auth/me`, {
    headers: { host: `attacker.example:${port}` },
  })
  expect([rebound.status, await rebound.json()]).toEqual([
    421,
    { error: 'this dbm local answers only at the address it printed; open the Dashboard line of its output' },
  ])
  // By a bare loopback address, whose cookies every server on the machine would get, the link signs nobody in (and stays unused).
  const byAddress = await fetch(link!.replace(new URL(base!).host, `127.0.0.1:${port}`), { redirect: 'manual' })
  expect([byAddress.status, byAddress.headers.getSetCookie()]).toEqual([403, []])
  // Nothing answered to a stranger (a bare loopback address, or another Host) names the run: the name is as
  // secret as the link, since whoever knows it can send the owner's browser to a port of theirs.
  const runName = new URL(base!).hostname
  for (const host of [`127.0.0.1:${port}`, `[::1]:${port}`, `attacker.example:${port}`, `localhost:${port}`]) {
    for (const path of [
      '/',
      '/healthz',
      '/local-sign-in',
      '/local-sign-in?token=nope',
      '/api/v1/openapi.json',
      '/api/v1/docs',
      '/api/v1/auth/me',
      '/nope',
    ]) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { host }, redirect: 'manual' })
      const seen = `${[...res.headers].join('\n')}\n${await res.text()}`
      expect({ host, path, names: seen.includes(runName) }).toEqual({ host, path, names: false })
    }
  }
  // The per-user data directory, created for the owner alone.
  expect(statSync(dataDir).mode & 0o777).toBe(0o700)
  expect(local.stdout()).toContain(`Data:      ${dataDir}\n`)
  const name = `127.0.0.1:${pg.port}/${dbPath.slice(1)}`
  expect(local.stdout()).toContain(`monitoring ${name}\n`)

  // The link signs in once: the session cookies and a redirect to the dashboard; the second use is refused.
  const first = await fetch(link!, { redirect: 'manual' })
  expect(first.status).toBe(302)
  expect(first.headers.get('location')).toBe('/#/databases')
  const cookie = cookiesOf(first)
  expect(cookie).toMatch(/dbm_access=.+; dbm_refresh=.+; dbm_session=1/)
  // Used, the link's file is gone.
  expect(existsSync(linkFile)).toBe(false)
  const again = await fetch(link!, { redirect: 'manual' })
  expect(again.status).toBe(410)
  expect(await again.text()).toContain('Sign-in link already used')
  expect((await fetch(`${base}/local-sign-in?token=nope`, { redirect: 'manual' })).status).toBe(404)
  // The local user and organization, verified without a mail (no unverified organization's limits).
  const me = (await api(base!, '/api/v1/auth/me', cookie)).body
  expect([me.user.email, me.user.email_verified, me.organization.name, me.organization.verified]).toEqual([
    'local@localhost',
    true,
    'Local',
    true,
  ])
  // No signup on this server.
  const signup = await fetch(`${base}/api/v1/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: base! },
    body: JSON.stringify({ email: 'x@example.com', password: 'long enough password', name: 'x', org_name: 'x' }),
  })
  expect(signup.status).toBe(403)
  // /healthz tells the dashboard it is dbm local's server: its sign-in page points to the printed link.
  expect((await (await fetch(`${base}/healthz`)).json()).signup).toBe('local')

  // The check's line, as `dbm agent --check` prints it.
  const [checkLine] = await local.printed(
    new RegExp(`^ok {4}${name.replace(/[./]/g, '\\$&')}: postgres 17\\.\\d+; collectors: query_stats.*$`, 'm'),
  )
  // The actions are on, and the line names no allow_actions key: dbm local has no config file to put one in.
  expect(checkLine).toContain(
    '; actions the dashboard may run: cancel, terminate, explain (dbm local: your own database)',
  )
  expect(checkLine).not.toContain('allow_actions')
  // An API key made with the session: with it and with the session's tokens, the second run is tried.
  const made = await fetch(`${base}/api/v1/api-keys`, {
    method: 'POST',
    headers: { cookie, origin: base!, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'made in run 1' }),
  })
  expect(made.status).toBe(201)
  firstRun = {
    access: cookie.match(/dbm_access=[^;]+/)![0],
    refresh: cookie.match(/dbm_refresh=[^;]+/)![0],
    apiKey: (await made.json()).key,
  }
  expect((await fetch(`${base}/api/v1/databases`, { headers: { 'x-api-key': firstRun.apiKey } })).status).toBe(200)

  // The database is registered by the agent's first cycle, at start.
  const database = await until('the database to be listed', async () => {
    const list = await api<{ id: string; name: string; last_seen_at: string | null }[]>(
      base!,
      '/api/v1/databases',
      cookie,
    )
    return list.body.find((d) => d.name === name && d.last_seen_at !== null)
  })
  const firstDataMs = Date.now() - started
  console.log(`first data ${firstDataMs} ms after the start`)
  expect(firstDataMs).toBeLessThan(15_000)
  databaseId = database.id
  // The active-sessions WebSocket over ::1 (where a browser may go first), by the run's name: upgraded by the listener that got it.
  const message = await new Promise<string>((resolve, reject) => {
    const ws = new WebSocket(`ws://[::1]:${port}/api/v1/databases/${databaseId}/active/ws`, {
      headers: { host: new URL(base!).host, cookie, origin: base! },
    } as never)
    ws.onmessage = (e) => {
      resolve(String(e.data))
      ws.close()
    }
    ws.onclose = (e) => reject(new Error(`WebSocket closed: ${e.code} ${e.reason}`))
  })
  expect(JSON.parse(message)).toHaveProperty('active')

  for (let i = 1; i <= 7; i++) await statementSql`SELECT count(*) AS local_marker FROM t WHERE id <= ${i}`
  const [row] =
    await statementSql`SELECT sum(calls)::int AS calls FROM pg_stat_statements WHERE query LIKE 'SELECT count(*) AS local_marker%'`
  expectedCalls = row!.calls
  expect(expectedCalls).toBe(7)
  const seen = await until(
    'the statement with its calls',
    async () => {
      const q = await api<{ query_text: string; total_calls: number }[]>(
        base!,
        `/api/v1/databases/${databaseId}/queries?sort_by=calls&limit=100`,
        cookie,
      )
      return q.body.find(
        (s) => s.query_text.startsWith('SELECT count(*) AS local_marker') && s.total_calls === expectedCalls,
      )
    },
    { timeoutMs: 25_000 },
  )
  expect(seen.total_calls).toBe(7)

  // A second dbm local on the same data directory is refused, and the first goes on. Its DSN carries the
  // password: the one warning line says so, first.
  const second = await runCommand(['bun', 'src/cli.ts', 'local', dsn], { env: env() })
  expect(second.exitCode).toBe(1)
  expect(second.stderr).toBe(
    `${commandLineWarning}dbm local: another dbm local (pid ${local.proc.pid}) is running on ${dataDir}; stop it first, or give this one another --data-dir\n`,
  )
  expect((await api(base!, '/api/v1/auth/me', cookie)).status).toBe(200)

  expect(await local.stop('SIGINT')).toBe(0)
  expect(local.stderr()).toContain('sign-in link used')
  expect(local.stderr()).not.toContain(link!.split('token=')[1]!)
  expect(local.stderr()).not.toContain('warning:')
  outputs.push(local.stdout(), local.stderr(), second.stdout, second.stderr)
}, 60_000)

test('second run, of dist/dbm: same database id, the statements kept, a new link; a database that comes up later shows up; Chromium shows the statement; SIGTERM', async () => {
  const browserStarting = launchBrowser()
  const dbm = await binary
  const help = await runCommand([dbm, 'local', '--help'])
  expect([help.exitCode, help.stdout.split('\n', 1)[0]]).toEqual([0, 'Usage: dbm local <dsn> [<dsn>...] [flags]'])
  // A second database that does not exist yet: reported by the check, retried by the agent.
  const later = `later_${Math.random().toString(36).slice(2, 8)}`
  const laterDsn = bareDsn.replace(/\/[^/]+$/, `/${later}`)
  const laterName = `127.0.0.1:${pg.port}/${later}`
  const ch = await clickhouse
  const chName = `127.0.0.1:${ch.port}/default`
  // The PostgreSQL password from ~/.pgpass (any database of this server and role), ClickHouse's from CLICKHOUSE_PASSWORD.
  writeFileSync(join(home, '.pgpass'), `# dbm local test\n127.0.0.1:${pg.port}:*:${role}:${password}\n`, {
    mode: 0o600,
  })
  const chDsn = new URL(ch.dsn)
  chDsn.password = ''
  rmSync(opened, { force: true })
  const local = startLocal(
    ['--data-dir', dataDir, '--open', bareDsn, laterDsn, chDsn.toString()],
    { HOME: home, CLICKHOUSE_PASSWORD: password, PATH: env().PATH, DISPLAY: ':0' },
    [dbm],
  )
  // A server of the test's own on another port of both loopback addresses: what a browser sends it is recorded.
  const received: string[] = []
  const [recorder, recorderV6] = listenLoopback(
    (hostname, port) =>
      Bun.serve({
        hostname,
        port,
        reusePort: false,
        fetch(request) {
          received.push(
            `${request.headers.get('host')}${new URL(request.url).pathname} cookie: ${request.headers.get('cookie') ?? ''}`,
          )
          return new Response('<!doctype html><title>another server</title>', {
            headers: { 'content-type': 'text/html' },
          })
        },
      }),
    0,
  )
  try {
    const [, base] = await local.printed(dashboardLine)
    const [, link] = await local.printed(/^Sign in: +(http:\S+)$/m)
    expect(new URL(link!).search).not.toBe(new URL(firstLink).search)
    // Another name than the first run's: none of its cookies would be sent here.
    expect(new URL(base!).hostname).not.toBe(new URL(firstLink).hostname)
    // Everything the first run handed out is refused: its session (access and refresh token) and the API key made with it.
    expect((await api(base!, '/api/v1/auth/me', firstRun.access)).status).toBe(401)
    const refreshed = await fetch(`${base}/api/v1/auth/refresh`, {
      method: 'POST',
      headers: { cookie: firstRun.refresh, origin: base! },
    })
    expect(refreshed.status).toBe(401)
    expect((await fetch(`${base}/api/v1/databases`, { headers: { 'x-api-key': firstRun.apiKey } })).status).toBe(401)
    // The first run's link died with it.
    expect(
      (await fetch(`${base}${new URL(firstLink).pathname}${new URL(firstLink).search}`, { redirect: 'manual' })).status,
    ).toBe(404)
    await local.printed(
      new RegExp(`^FAIL  ${laterName.replace(/[./]/g, '\\$&')}: postgres: database "${later}" does not exist$`, 'm'),
    )
    await local.printed(new RegExp(`^ok {4}${chName.replace(/[./]/g, '\\$&')}: clickhouse 2\\d\\.`, 'm'))
    await local.printed(/^The agent keeps trying the databases that failed; they show up once they answer\.$/m)
    const admin = postgres(pg.url(), { max: 1, onnotice: () => {} })
    await admin.unsafe(`CREATE DATABASE ${later}`)
    await admin.end()

    const browser = await browserStarting
    try {
      const view = await openPage(browser, { baseURL: base! })
      // What --open gave the desktop: the file, which leads Chromium to the link, which signs it in.
      const openedUrl = await until(
        'xdg-open to be run',
        async () => (existsSync(opened) && readFileSync(opened, 'utf8')) || undefined,
      )
      expect(openedUrl).toStartWith('file:///')
      await view.page.goto(openedUrl)
      await view.page.waitForURL(/#\/databases$/)
      expect(new URL(view.page.url()).origin).toBe(base!)
      expect(existsSync(new URL(openedUrl).pathname)).toBe(false)
      const sessionCookies = await view.context.cookies()
      expect(sessionCookies.map((c) => c.name).sort()).toEqual(['dbm_access', 'dbm_refresh', 'dbm_session'])
      // Host-only, for this run's name.
      for (const c of sessionCookies) expect(c.domain).toBe(new URL(base!).hostname)
      const cookie = sessionCookies.map((c) => `${c.name}=${c.value}`).join('; ')
      // The review's repro: the signed-in browser visits another server on 127.0.0.1 and on localhost (another
      // user's, on another port): it receives no dbm cookie.
      const elsewhere = await view.context.newPage()
      for (const host of [`127.0.0.1:${recorder!.port}`, `localhost:${recorder!.port}`]) {
        await elsewhere.goto(`http://${host}/`)
        await elsewhere.goto(`http://${host}/api/v1/auth/refresh`)
      }
      await elsewhere.close()
      // (The browser asks for /favicon.ico too.)
      const port2 = recorder!.port
      expect(received).toEqual(
        expect.arrayContaining([
          `127.0.0.1:${port2}/ cookie: `,
          `127.0.0.1:${port2}/api/v1/auth/refresh cookie: `,
          `localhost:${port2}/ cookie: `,
          `localhost:${port2}/api/v1/auth/refresh cookie: `,
        ]),
      )
      for (const r of received) expect(r).not.toContain('dbm_')
      const list = await api<{ id: string; name: string }[]>(base!, '/api/v1/databases', cookie)
      expect(list.body.find((d) => d.name === `127.0.0.1:${pg.port}/${dbPath.slice(1)}`)?.id).toBe(databaseId)
      const q = await api<{ query_text: string; total_calls: number }[]>(
        base!,
        `/api/v1/databases/${databaseId}/queries?sort_by=calls&limit=100`,
        cookie,
      )
      expect(q.body.find((s) => s.query_text.startsWith('SELECT count(*) AS local_marker'))?.total_calls).toBe(
        expectedCalls,
      )
      await view.page.goto(`${base}/#/databases/${databaseId}/queries?sort=calls&q=local_marker`)
      await view.page
        .getByText('SELECT count(*) AS local_marker', { exact: false })
        .first()
        .waitFor({ timeout: 20_000 })
      // No config file to write under dbm local: the agent setup says what to do instead (flags), and so does
      // the database's Settings page.
      await view.page.goto(`${base}/#/settings/agent`)
      await view.page
        .locator('[data-local-setup]')
        .getByText('This is dbm local: its agent is already running')
        .waitFor()
      expect(await view.page.locator('main').textContent()).toContain('dbm local --explain-trusted-role app')
      expect(await view.page.locator('main').textContent()).not.toContain('# config.yaml')
      await view.page.goto(`${base}/#/databases/${databaseId}/settings`)
      await view.page
        .getByText('stop dbm local and start it again without this database first', { exact: false })
        .waitFor()
      expect(await view.page.locator('main').textContent()).not.toContain("agent's config")
      view.assertNoErrors()
      await view.close()
      // Signed out (a browser without the session), the sign-in page says how to get back in: no form for a
      // user whose password nobody knows.
      const signedOut = await openPage(browser, { baseURL: base! })
      await signedOut.page.goto(`${base}/#/signin`)
      await signedOut.page
        .locator('[data-local-sign-in]')
        .getByText('sign in with the one-time link', { exact: false })
        .waitFor()
      expect(await signedOut.page.locator('input[type=password]').count()).toBe(0)
      // By a bare loopback address (which answers the agent, and signs nobody in) it says to open the printed
      // address, without naming it, and not to restart (which would end the session under the name).
      const byAddress = `http://127.0.0.1:${new URL(base!).port}`
      await signedOut.page.goto(`${byAddress}/#/signin`)
      const note = signedOut.page.locator('[data-local-sign-in]')
      await note.getByText('This address of dbm local does not sign in', { exact: false }).waitFor()
      expect(await signedOut.page.content()).not.toContain(new URL(base!).hostname)
      await signedOut.close()
      // The ClickHouse database is registered by its first cycle; the one created after the start by the agent's next attempt.
      await until('the ClickHouse database to be listed', async () =>
        (
          await api<{ name: string; engine: string; last_seen_at: string | null }[]>(base!, '/api/v1/databases', cookie)
        ).body.find((d) => d.name === chName && d.engine === 'clickhouse' && d.last_seen_at !== null),
      )
      await until(
        'the later database to be listed',
        async () =>
          (await api<{ name: string; last_seen_at: string | null }[]>(base!, '/api/v1/databases', cookie)).body.find(
            (d) => d.name === laterName && d.last_seen_at !== null,
          ),
        { timeoutMs: 25_000 },
      )
    } finally {
      await browser.close()
    }
  } finally {
    void recorder!.stop(true)
    void recorderV6?.stop(true)
    expect(await local.stop('SIGTERM')).toBe(0)
  }
  expect(local.stderr()).not.toContain('warning:')
  outputs.push(local.stdout(), local.stderr())

  // The password: in no output, and in no file of the data directory (store, write-ahead log, buffers, state).
  for (const text of outputs) expect(text).not.toContain(password)
  const files = readdirSync(dataDir, { recursive: true, withFileTypes: true }).filter((f) => f.isFile())
  expect(files.length).toBeGreaterThan(2)
  for (const f of files) expect(readFileSync(join(f.parentPath, f.name)).includes(password)).toBe(false)
  // Every file, the store's write-ahead log and locks among them, and the directory: the user's alone.
  const modes = Object.fromEntries(files.map((f) => [f.name, statSync(join(f.parentPath, f.name)).mode & 0o777]))
  expect(Object.entries(modes).filter(([, mode]) => (mode & 0o077) !== 0)).toEqual([])
  expect(Object.keys(modes)).toEqual(
    expect.arrayContaining(['dbm.sqlite', 'dbm.sqlite.lock', 'jwt-secret', 'local.lock', 'local.pid']),
  )
  expect(statSync(dataDir).mode & 0o777).toBe(0o700)
}, 60_000)

test('--listen whose [::1] another process holds: refused, nothing printed; an output others may read gets the file, not the link', async () => {
  // A squatter on [::1] of a port free on 127.0.0.1: `--listen localhost:PORT` must not print an address it does not hold.
  const squatter = Bun.serve({ hostname: '::1', port: 0, fetch: () => new Response('squatter') })
  try {
    const refused = await runCommand(
      ['bun', 'src/cli.ts', 'local', '--listen', `localhost:${squatter.port}`, '--data-dir', dataDir, bareDsn],
      { env: { ...env(), PGPASSWORD: password } },
    )
    // (Tests run in parallel: another process may hold the same port on 127.0.0.1 too, which is refused first.)
    expect([refused.exitCode, refused.stdout]).toEqual([1, ''])
    expect([
      `dbm local: cannot listen on [::1]:${squatter.port}: another process holds it (the printed name resolves to ::1 as well as 127.0.0.1); stop it, or pick another port (--listen)\n`,
      `dbm local: cannot listen on 127.0.0.1:${squatter.port}: another process holds it; stop it, or pick another port (--listen)\n`,
    ]).toContain(refused.stderr)
    outputs.push(refused.stdout, refused.stderr)
  } finally {
    void squatter.stop(true)
  }

  // Standard output to a log file that others may read (mode 0644): the link and the run's name stay out of it.
  const log = join(home, 'local.log')
  writeFileSync(log, '')
  chmodSync(log, 0o644)
  const fd = openSync(log, 'w')
  const proc = Bun.spawn(['bun', 'src/cli.ts', 'local', bareDsn], {
    cwd: repoRoot,
    env: cleanEnv({ ...env(), PGPASSWORD: password }),
    stdin: 'ignore',
    stdout: fd,
    stderr: 'pipe',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  })
  children.add(proc)
  closeSync(fd)
  try {
    const printed = await until('the sign-in line in the log', async () => {
      const text = readFileSync(log, 'utf8')
      return /^Sign in: .*$/m.test(text) ? text : undefined
    })
    expect(printed).not.toContain('token=')
    expect(printed).not.toContain('.localhost')
    const [, file] = printed.match(/^Sign in: {3}open (\S+) in the browser, or read the link in it$/m)!
    expect(printed).toContain(
      `Dashboard: its address is in ${file} (standard output is a file that others may read (mode 0644): neither it nor the link is printed here)\n`,
    )
    expect(file).toStartWith(`${dataDir}/sign-in-`)
    expect(statSync(file!).mode & 0o777).toBe(0o600)
    const link = readFileSync(file!, 'utf8').match(/<a href="([^"]+)">/)![1]!
    expect(link).toMatch(/^http:\/\/dbm-[a-z2-7]{26}\.localhost:\d+\/local-sign-in\?token=/)
    expect((await fetch(link, { redirect: 'manual' })).status).toBe(302)
    expect(existsSync(file!)).toBe(false)
  } finally {
    proc.kill('SIGTERM')
    expect(await proc.exited).toBe(0)
    children.delete(proc)
  }
}, 60_000)
