// The `dbm` command line as a user runs it (`bun src/cli.ts ...` in a real process): help and
// version output, one-line usage errors with exit 2, refusing a store with a newer schema, the
// generated JWT secret (mode 0600, reused across restarts) and clean shutdown on signals.
import { Database } from 'bun:sqlite'
import { afterAll, afterEach, describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import pkg from '../package.json' with { type: 'json' }
import { cleanEnv, repoRoot, request, runCommand, startServe, stopAllServers } from './support/process.ts'
import { until } from './support/wait.ts'
import { migrations } from '../src/server/store/migrations.ts'
import { openSignupWarning, resolveServeConfig } from '../src/server/config.ts'

/** What a first start applies: every migration, as the start-up line lists them. */
const ALL_MIGRATIONS = migrations.map((m) => m.version).join(',')

const CLI = ['bun', 'src/cli.ts']
const dbm = (args: string[], env: Record<string, string> = {}) => runCommand([...CLI, ...args], { env })

const tmpRoot = mkdtempSync(join(tmpdir(), 'dbm-cli-test-'))
let dirCounter = 0
const freshDir = () => join(tmpRoot, `data-${++dirCounter}`)

afterEach(async () => {
  await stopAllServers()
})
afterAll(() => {
  rmSync(tmpRoot, { recursive: true, force: true })
})

describe('help and version', () => {
  test('`dbm help`, `dbm --help`, `dbm -h` and no arguments print the usage and exit 0', async () => {
    const outputs = await Promise.all([dbm(['help']), dbm([]), dbm(['--help']), dbm(['-h'])])
    for (const out of outputs) {
      expect(out.exitCode).toBe(0)
      expect(out.stderr).toBe('')
      expect(out.stdout).toBe(outputs[0]!.stdout)
    }
    const usage = outputs[0]!.stdout
    expect(usage).toStartWith(`dbm ${pkg.version}: self-hosted monitoring for PostgreSQL and ClickHouse\n`)
    expect(usage).toContain('\nUsage:\n')
    expect(usage).toMatch(/^ {2}dbm serve \[flags\] +run the API server/m)
    expect(usage).toMatch(/^ {2}dbm version +print the version$/m)
    expect(usage).toMatch(/^ {2}dbm help +show this help$/m)
    expect(usage).toContain('Run "dbm <command> --help" for a command\'s flags.')
  })

  test('`dbm version` and `--version` from source print the version, the checkout\'s commit and "source"', async () => {
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+$/)
    const [out, long] = await Promise.all([dbm(['version']), dbm(['--version'])])
    expect(long).toEqual(out)
    expect(out.exitCode).toBe(0)
    expect(out.stderr).toBe('')
    const head = (await runCommand(['git', 'rev-parse', 'HEAD'])).stdout.trim()
    expect(head).toMatch(/^[0-9a-f]{40}$/)
    const lines = out.stdout.split('\n')
    expect(lines).toEqual([
      `dbm ${pkg.version}`,
      expect.stringMatching(new RegExp(`^commit: {3}${head}(-dirty)? \\(the checkout's: running from source\\)$`)),
      'built:    source (not a build)',
      `bun:      ${Bun.version}`,
      `platform: ${process.platform}-${process.arch}`,
      '',
    ])
  })

  test('`dbm serve` listens on loopback until told otherwise; --listen or DBM_LISTEN opens it to the network', () => {
    const at = (flags: Record<string, string>, env: Record<string, string>) => {
      const { hostname, port } = resolveServeConfig(flags, env)
      return `${hostname}:${port}`
    }
    expect(at({}, {})).toBe('127.0.0.1:8080')
    expect(at({ listen: '0.0.0.0:8080' }, {})).toBe('0.0.0.0:8080')
    expect(at({}, { DBM_LISTEN: ':9090' })).toBe('0.0.0.0:9090')
  })

  test('`dbm serve --help` and `-h` list every flag and environment variable', async () => {
    const [long, short] = await Promise.all([dbm(['serve', '--help']), dbm(['serve', '-h'])])
    expect(long.exitCode).toBe(0)
    expect(long.stderr).toBe('')
    expect(short).toEqual(long)
    const help = long.stdout
    expect(help).toStartWith('Usage: dbm serve [flags]\n')
    const rows: [string, string, string][] = [
      ['--listen HOST:PORT', 'DBM_LISTEN', '(127.0.0.1:8080)'],
      ['--data-dir DIR', 'DBM_DATA_DIR', '(./dbm-data)'],
      ['--database-url URL', 'DBM_DATABASE_URL', '(unset: SQLite in the data dir)'],
      ['--public-url URL', 'DBM_PUBLIC_URL', '(http://localhost:8080)'],
      ['--log-level LEVEL', 'DBM_LOG_LEVEL', '(info)'],
    ]
    for (const [flag, variable, fallback] of rows) {
      const line = help.split('\n').find((l) => l.trimStart().startsWith(`${flag} `))
      expect(line).toBeDefined()
      expect(line).toContain(` ${variable} `)
      expect(line).toEndWith(fallback)
    }
    for (const variable of [
      'DBM_JWT_SECRET',
      'DBM_SMTP_URL',
      'DBM_TRUST_PROXY',
      'DBM_WEBHOOK_ALLOW_PRIVATE',
      'DBM_SIGNUP',
    ]) {
      expect(help).toMatch(new RegExp(`^ {2}${variable} +\\S`, 'm'))
    }
  })
})

describe('usage errors exit 2 with one line naming the flag or variable', () => {
  const secret31 = 'x'.repeat(31)
  // [what, args after `dbm`, environment, the exact stderr line]
  const cases: [string, string[], Record<string, string>, string][] = [
    ['unknown command', ['frobnicate'], {}, 'dbm: unknown command "frobnicate" (see dbm help)'],
    ['unknown flag', ['serve', '--bogus'], {}, 'dbm serve: unknown flag --bogus (see dbm serve --help)'],
    [
      'unknown flag on version',
      ['version', '--bogus'],
      {},
      'dbm version: unknown flag --bogus (see dbm version --help)',
    ],
    ['stray argument', ['serve', 'now'], {}, 'dbm serve: unexpected argument "now" (see dbm serve --help)'],
    ['flag missing its value at the end', ['serve', '--listen'], {}, 'dbm serve: --listen needs a value'],
    [
      'flag followed by another flag',
      ['serve', '--data-dir', '--listen', ':8080'],
      {},
      'dbm serve: --data-dir needs a value',
    ],
    ['switch given a value', ['serve', '--help=yes'], {}, 'dbm serve: --help takes no value'],
    [
      '--listen without a port',
      ['serve', '--listen', 'localhost'],
      {},
      '--listen: expected host:port (for example 0.0.0.0:8080 or :8080), got "localhost"',
    ],
    [
      '--listen with a port out of range',
      ['serve', '--listen=127.0.0.1:70000'],
      {},
      '--listen: expected host:port (for example 0.0.0.0:8080 or :8080), got "127.0.0.1:70000"',
    ],
    [
      'DBM_LISTEN bad',
      ['serve'],
      { DBM_LISTEN: 'nowhere' },
      'DBM_LISTEN: expected host:port (for example 0.0.0.0:8080 or :8080), got "nowhere"',
    ],
    ['--log-level bad', ['serve', '--log-level', 'loud'], {}, '--log-level: expected one of debug, info, warn, error'],
    [
      'DBM_LOG_LEVEL bad',
      ['serve'],
      { DBM_LOG_LEVEL: 'verbose' },
      'DBM_LOG_LEVEL: expected one of debug, info, warn, error',
    ],
    [
      '--database-url not postgres://',
      ['serve', '--database-url', 'mysql://root@127.0.0.1/dbm'],
      {},
      '--database-url: expected a postgres:// URL (leave it unset for embedded SQLite)',
    ],
    [
      'DBM_DATABASE_URL not postgres://',
      ['serve'],
      { DBM_DATABASE_URL: 'sqlite:///tmp/dbm.sqlite' },
      'DBM_DATABASE_URL: expected a postgres:// URL (leave it unset for embedded SQLite)',
    ],
    [
      '--public-url not http(s)',
      ['serve', '--public-url', 'dbm.example.org'],
      {},
      '--public-url: expected an http:// or https:// URL',
    ],
    [
      'DBM_JWT_SECRET shorter than 32 characters',
      ['serve'],
      { DBM_JWT_SECRET: secret31 },
      'DBM_JWT_SECRET: must be at least 32 characters',
    ],
    [
      'DBM_TRUST_PROXY not a boolean',
      ['serve'],
      { DBM_TRUST_PROXY: 'maybe' },
      'DBM_TRUST_PROXY: expected true or false, got "maybe"',
    ],
    [
      'DBM_SIGNUP not open or closed',
      ['serve'],
      { DBM_SIGNUP: 'invite-only' },
      'DBM_SIGNUP: expected open or closed, got "invite-only"',
    ],
    [
      'DBM_SIGNUP in capitals',
      ['serve'],
      { DBM_SIGNUP: 'CLOSED' },
      'DBM_SIGNUP: expected open or closed, got "CLOSED"',
    ],
    [
      'DBM_WEBHOOK_ALLOW_PRIVATE not a boolean',
      ['serve'],
      { DBM_WEBHOOK_ALLOW_PRIVATE: 'internal' },
      'DBM_WEBHOOK_ALLOW_PRIVATE: expected true or false, got "internal"',
    ],
  ]

  test.each(cases)('%s', async (_what, args, env, line) => {
    // Were the value accepted, the server would start here (port 0, a fresh dir) and the
    // spawn deadline would kill it; a usage error must not even create the data dir.
    const dataDir = freshDir()
    const out = await dbm(args, { DBM_DATA_DIR: dataDir, DBM_LISTEN: '127.0.0.1:0', ...env })
    expect(out).toEqual({ exitCode: 2, stdout: '', stderr: `${line}\n` })
    expect(existsSync(dataDir)).toBe(false)
  })
})

describe('dbm serve', () => {
  test('a store whose schema is newer than this dbm is refused with exit 1 and left untouched', async () => {
    const dataDir = freshDir()
    mkdirSync(dataDir, { mode: 0o700 })
    const file = join(dataDir, 'dbm.sqlite')
    const db = new Database(file)
    db.run(
      'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
    )
    db.run("INSERT INTO schema_migrations VALUES (999, 'from the future', 0)")
    db.close()

    const out = await dbm(['serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir])
    expect(out.exitCode).toBe(1)
    expect(out.stdout).toBe('')
    const lines = out.stderr.trimEnd().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ERROR cannot open the store cause="the store's schema is version 999, but this dbm knows versions up to \d+: upgrade dbm \(or point it at another data directory \/ database URL\)"$/,
    )

    const after = new Database(file, { readonly: true })
    const tables = after.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all()
    const versions = after.query('SELECT version FROM schema_migrations').all()
    after.close()
    expect(tables).toEqual([{ name: 'schema_migrations' }])
    expect(versions).toEqual([{ version: 999 }])
    expect(existsSync(join(dataDir, 'jwt-secret'))).toBe(false)
  })

  test('DBM_SIGNUP=closed: the first signup sets up the fresh server, later ones are refused', async () => {
    const server = await startServe(CLI, { dataDir: freshDir(), env: { DBM_SIGNUP: 'closed' } })
    const body = (n: number) => ({
      email: `closed-${n}@example.com`,
      password: 'correct horse battery',
      name: 'Admin',
      org_name: `Closed ${n}`,
    })
    expect((await request(server.base, 'POST', '/api/v1/auth/signup', { body: body(1) })).status).toBe(201)
    expect(await request(server.base, 'POST', '/api/v1/auth/signup', { body: body(2) })).toEqual({
      status: 403,
      body: { error: 'signup is closed on this server' },
    })
    expect(await server.stop('SIGTERM')).toBe(0)
  })

  test('the generated JWT secret has mode 0600 and is reused on restart, so tokens stay valid', async () => {
    const dataDir = freshDir()
    const first = await startServe(CLI, { dataDir })
    const secretFile = join(dataDir, 'jwt-secret')
    expect(statSync(secretFile).mode & 0o777).toBe(0o600)
    expect(statSync(dataDir).mode & 0o777).toBe(0o700)
    const secret = readFileSync(secretFile, 'utf8')
    expect(secret).toMatch(/^[A-Za-z0-9_-]{64}\n$/)

    const email = 'restart@example.com'
    const signup = await request(first.base, 'POST', '/api/v1/auth/signup', {
      body: { email, password: 'correct horse battery', name: 'Re Start', org_name: 'Restarts' },
    })
    expect(signup.status).toBe(201)
    const token: string = signup.body.access_token
    expect((await request(first.base, 'GET', '/api/v1/auth/me', { token })).status).toBe(200)
    expect(await first.stop('SIGTERM')).toBe(0)
    expect(first.stderr()).toContain(` migrations_applied=${ALL_MIGRATIONS} `)

    const second = await startServe(CLI, { dataDir })
    expect(readFileSync(secretFile, 'utf8')).toBe(secret)
    expect(statSync(secretFile).mode & 0o777).toBe(0o600)
    expect(second.stderr()).toContain(' migrations_applied=none ')
    const me = await request(second.base, 'GET', '/api/v1/auth/me', { token })
    expect(me.status).toBe(200)
    expect(me.body.user.email).toBe(email)
    expect(me.body.organization).toMatchObject({ id: signup.body.organization.id, name: 'Restarts', verified: false })
    expect(await second.stop('SIGTERM')).toBe(0)

    // Control: a process signing with another secret (DBM_JWT_SECRET) rejects the same token.
    const other = await startServe(CLI, {
      dataDir,
      env: { DBM_JWT_SECRET: 'another-secret-that-is-long-enough-0123456789' },
    })
    const rejected = await request(other.base, 'GET', '/api/v1/auth/me', { token })
    expect(rejected).toEqual({ status: 401, body: { error: 'invalid or expired access token' } })
    expect(await other.stop('SIGTERM')).toBe(0)
    expect(readFileSync(secretFile, 'utf8')).toBe(secret)
  })

  test('a jwt-secret file shorter than 32 characters is refused with exit 1 naming the file', async () => {
    // A truncated secret file (crash between create and write, full disk, a hand edit) must not
    // make dbm sign tokens with a short or empty key; DBM_JWT_SECRET has the same 32-character floor.
    for (const content of ['', 'short\n']) {
      const dataDir = freshDir()
      mkdirSync(dataDir, { mode: 0o700 })
      writeFileSync(join(dataDir, 'jwt-secret'), content, { mode: 0o600 })
      const out = await runCommand([...CLI, 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
        timeoutMs: 3000,
      })
      expect(out.exitCode).toBe(1)
      const lines = out.stderr.trimEnd().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(join(dataDir, 'jwt-secret'))
      expect(lines[0]).toContain('at least 32 characters')
    }
  })

  test('a port held by another listener makes serve exit 1 with "cannot listen"', async () => {
    const holder = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
    try {
      const out = await runCommand(
        [...CLI, 'serve', '--listen', `127.0.0.1:${holder.port}`, '--data-dir', freshDir()],
        { timeoutMs: 5000 },
      )
      expect(out.exitCode).toBe(1)
      expect(out.stderr).toMatch(
        new RegExp(
          `^\\S+ ERROR cannot listen address=127\\.0\\.0\\.1:${holder.port} cause="Failed to start server\\. Is port ${holder.port} in use\\?"\n$`,
        ),
      )
    } finally {
      holder.stop(true)
    }
  })

  test('a second serve on the port of a running one exits 1 instead of sharing the port', async () => {
    // Elysia's listen() turns SO_REUSEPORT on by default: without `reusePort: false` a second dbm
    // (say with another data dir) binds the same port and the kernel splits requests between them.
    const first = await startServe(CLI, { dataDir: freshDir() })
    const port = new URL(first.base).port
    const out = await runCommand([...CLI, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', freshDir()], {
      timeoutMs: 3000,
    })
    expect(out.exitCode).toBe(1)
    expect(out.stderr).toContain(` ERROR cannot listen address=127.0.0.1:${port} `)
    expect(await first.stop('SIGTERM')).toBe(0)
  })

  test.each(['SIGTERM', 'SIGINT'] as const)('%s stops serve with exit 0', async (signal) => {
    const server = await startServe(CLI, { dataDir: freshDir() })
    expect(await server.stop(signal)).toBe(0)
    const lines = server.stderr().trimEnd().split('\n')
    const version = pkg.version.replaceAll('.', '\\.')
    // The start line says who may sign up; on loopback, open signup is no warning.
    expect(lines[0]).toMatch(
      new RegExp(
        ` INFO dbm serve listening version=${version} address=127\\.0\\.0\\.1:\\d+ store="sqlite \\S+/dbm\\.sqlite" migrations_applied=(\\S+) mail=log signup=open$`,
      ),
    )
    expect(lines[0]!.match(/migrations_applied=(\S+)/)![1]).toBe(ALL_MIGRATIONS)
    expect(lines.at(-1)).toMatch(new RegExp(`^\\S+ INFO stopping signal=${signal}$`))
    expect(lines).toHaveLength(2)
  })

  test('the start line names the signup mode; open signup on an address beyond loopback adds a WARN line, closed none', async () => {
    expect(['127.0.0.1', '127.8.9.10', '::1', 'localhost'].map((h) => openSignupWarning('open', [h]))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ])
    expect(
      ['0.0.0.0', '::', '192.168.1.5'].map((h) => openSignupWarning('open', ['127.0.0.1', h]) !== undefined),
    ).toEqual([true, true, true])
    expect([openSignupWarning('closed', ['0.0.0.0']), openSignupWarning('local', ['0.0.0.0'])]).toEqual([
      undefined,
      undefined,
    ])
    const closed = await startServe(CLI, { dataDir: freshDir(), env: { DBM_SIGNUP: 'closed' } })
    expect(await closed.stop('SIGTERM')).toBe(0)
    expect(closed.stderr()).toMatch(/ INFO dbm serve listening .* mail=log signup=closed\n/)
    expect(closed.stderr()).not.toContain(' WARN ')
    // 0.0.0.0 (every address of this machine), port from the OS, stopped as soon as it has said so.
    const proc = Bun.spawn([...CLI, 'serve', '--listen', '0.0.0.0:0', '--data-dir', freshDir()], {
      cwd: repoRoot,
      env: cleanEnv(),
      stdin: 'ignore',
      stdout: 'ignore',
      stderr: 'pipe',
      timeout: 60_000,
      killSignal: 'SIGKILL',
    })
    let stderr = ''
    const drained = (async () => {
      const decoder = new TextDecoder()
      for await (const chunk of proc.stderr) stderr += decoder.decode(chunk, { stream: true })
    })()
    try {
      await until('the warning', async () => (stderr.includes(' WARN ') ? true : undefined))
    } finally {
      proc.kill('SIGTERM')
      await proc.exited
      await drained
    }
    const lines = stderr.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^\S+ INFO dbm serve listening .*address=0\.0\.0\.0:(\d+) .* signup=open$/)
    const port = /address=0\.0\.0\.0:(\d+)/.exec(lines[0]!)![1]
    expect(lines[1]).toBe(
      `${lines[1]!.split(' ')[0]} WARN signup is open on an address beyond this machine: anyone who reaches it can create an account; set DBM_SIGNUP=closed once yours exists address=0.0.0.0:${port}`,
    )
  })

  test('Ctrl-C on `bun run serve` (SIGINT to the process group: the server gets it from the terminal and from bun run) stops cleanly: "stopping" logged last, the write-ahead log folded in', async () => {
    // Three starts: a second SIGINT with no handler left killed the server mid-stop in about one of three.
    for (let run = 0; run < 3; run++) {
      const dataDir = freshDir()
      const child = spawn('bun', ['run', 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
        cwd: repoRoot,
        env: cleanEnv(),
        detached: true,
        stdio: ['ignore', 'ignore', 'pipe'],
      })
      let stderr = ''
      child.stderr!.on('data', (d) => (stderr += d))
      // The server's stderr ends when the server itself has exited (bun run may die of the SIGINT first).
      const ended = new Promise<void>((resolve) => child.stderr!.on('close', () => resolve()))
      await until('serve listening', async () => (stderr.includes(' INFO dbm serve listening ') ? true : undefined))
      process.kill(-child.pid!, 'SIGINT')
      await ended
      expect({ run, last: stderr.trimEnd().split('\n').at(-1)?.replace(/^\S+ /, '') }).toEqual({
        run,
        last: 'INFO stopping signal=SIGINT',
      })
      expect(readdirSync(dataDir).filter((f) => f.startsWith('dbm.sqlite-'))).toEqual([])
    }
  })
})

describe('one SQLite data directory, one server', () => {
  test('a second serve on the same data directory exits 1 saying it is in use', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'dbm-lock-'))
    const first = await startServe(CLI, { dataDir })
    try {
      const second = await runCommand([...CLI, 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir])
      expect(second.exitCode).toBe(1)
      expect(second.stderr).toContain(
        `cannot open the store cause="${join(dataDir, 'dbm.sqlite')} is in use by another process (another dbm serve on this data directory?)"`,
      )
      // The first server is unaffected.
      expect((await fetch(`${first.base}/healthz`)).status).toBe(200)
    } finally {
      expect(await first.stop()).toBe(0)
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
