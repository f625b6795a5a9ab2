// A PostgreSQL DSN naming a Unix-domain socket directory, as libpq reads it: percent-encoded in the host
// (postgres://me@%2Fvar%2Frun%2Fpostgresql/app) or in a host parameter (postgres:///app?host=/var/run/...).
// postgres.js takes neither from the URL, so the agent gives it the directory as its host option: the
// agent's pool and `--check` connect through the socket, and messages and dbm local's names show it.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkConfig } from '../../src/agent/check.ts'
import { parseAgentConfig } from '../../src/agent/config.ts'
import { agentPostgres } from '../../src/agent/own-statements.ts'
import { postgresConnection, postgresDsnProblem, postgresHost } from '../../src/agent/postgres-dsn.ts'
import { dsnEndpoint } from '../../src/agent/postgres-runner.ts'
import { databaseName } from '../../src/local/databases.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'

describe('postgresConnection', () => {
  test('a socket directory in the host or a host parameter becomes the host option; other DSNs are left as they are', () => {
    expect(postgresConnection('postgres://me:pw@db.example:6432/app?sslmode=require')).toEqual({
      url: 'postgres://me:pw@db.example:6432/app?sslmode=require',
    })
    expect(postgresConnection('postgres://me@%2Fvar%2Frun%2Fpostgresql:5433/app')).toEqual({
      url: 'postgres://me@localhost:5433/app',
      socket: '/var/run/postgresql',
    })
    expect(postgresConnection('postgresql:///app?host=/tmp/pg%20sock&application_name=x')).toEqual({
      url: 'postgresql://localhost/app?application_name=x',
      socket: '/tmp/pg sock',
    })
    expect(postgresConnection('postgres:///app?host=/tmp/s&port=5433&user=me')).toEqual({
      url: 'postgres://me@localhost:5433/app',
      socket: '/tmp/s',
    })
    // A host parameter that is a host name, not a directory, is not a socket: it becomes the URL's host,
    // as port, user, dbname and password become its parts (postgres.js would send them as server settings).
    expect(postgresConnection('postgres:///app?host=db.example')).toEqual({ url: 'postgres://db.example/app' })
    expect(postgresConnection('postgres:///?port=5433&user=me&password=p%40w&dbname=my%20db')).toEqual({
      url: 'postgres://me:p%40w@localhost:5433/my%20db',
    })
    // libpq's default target_session_attrs, which postgres.js refuses: the same as leaving it out.
    expect(postgresConnection('postgres://h/a?target_session_attrs=any&sslmode=require')).toEqual({
      url: 'postgres://h/a?sslmode=require',
    })
    expect(postgresConnection('not a url')).toEqual({ url: 'not a url' })
    expect(postgresHost('postgres://me@%2Fvar%2Frun%2Fpostgresql/app')).toBe('/var/run/postgresql')
    expect(postgresHost('postgres://me@db.example/app')).toBe('db.example')
    expect(postgresHost('postgres:///app')).toBe('localhost')
    expect(dsnEndpoint('postgres:///app?host=/tmp/s')).toEqual({ host: '/tmp/s', port: 5432 })
  })
})

describe('postgresDsnProblem: every query parameter checked, with its values', () => {
  const problem = (query: string) => postgresDsnProblem(new URL(`postgres://db.example/app?${query}`))
  test.each([
    'sslmode=disable',
    'sslmode=allow',
    'sslmode=prefer',
    'sslmode=require',
    'sslmode=verify-ca',
    'sslmode=verify-full',
    'sslrootcert=system',
    'sslmode=require&sslnegotiation=direct',
    'sslnegotiation=postgres',
    'connect_timeout=0',
    'connect_timeout=10',
    'target_session_attrs=any',
    'target_session_attrs=read-write',
    'target_session_attrs=read-only',
    'target_session_attrs=primary',
    'target_session_attrs=standby',
    'target_session_attrs=prefer-standby',
    'options=-c%20geqo%3Doff',
    'options=-cgeqo%3Doff%20--work_mem%3D4MB',
    'options=-c%20search_path%3Da\\%20b',
    'host=/var/run/postgresql',
    '',
  ])('%p is accepted', (query) => {
    expect(problem(query)).toBeUndefined()
  })
  test.each([
    ['sslmode=bogus', 'sslmode: expected one of disable, allow, prefer, require, verify-ca, verify-full, got "bogus"'],
    ['sslmode=', 'sslmode: expected one of disable, allow, prefer, require, verify-ca, verify-full, got ""'],
    [
      'sslmode=REQUIRE',
      'sslmode: expected one of disable, allow, prefer, require, verify-ca, verify-full, got "REQUIRE"',
    ],
    ['sslmode=require&sslmode=disable', 'parameter "sslmode" is given twice'],
    [
      'sslrootcert=/etc/ca.pem',
      'sslrootcert: only sslrootcert=system (the system\'s certificate authorities) is supported, got "/etc/ca.pem"',
    ],
    ['sslnegotiation=direct', 'sslnegotiation=direct needs sslmode=require, verify-ca or verify-full'],
    ['sslnegotiation=fast', 'sslnegotiation: expected one of postgres, direct, got "fast"'],
    ['connect_timeout=abc', 'connect_timeout: expected a whole number of seconds, got "abc"'],
    ['connect_timeout=-1', 'connect_timeout: expected a whole number of seconds, got "-1"'],
    ['connect_timeout=2.5', 'connect_timeout: expected a whole number of seconds, got "2.5"'],
    [
      'target_session_attrs=master',
      'target_session_attrs: expected one of any, read-write, read-only, primary, standby, prefer-standby, got "master"',
    ],
    ['options=', 'options: expected server settings as -c name=value or --name=value'],
    ['options=-c', 'options: expected server settings as -c name=value or --name=value (-c without a setting)'],
    ['options=-B%2064', 'options: expected server settings as -c name=value or --name=value, got "-B"'],
    ['options=-c%20geqo', 'options: expected server settings as -c name=value or --name=value, got "geqo"'],
    ['options=--1x%3D2', 'options: expected server settings as -c name=value or --name=value, got "1x=2"'],
    [
      'application_name=app',
      'application_name: the agent names its sessions dbm-agent (its log reader and the activity pages tell its own sessions apart by it); leave it out',
    ],
    ['host=other.example', 'host: the URL names its host already; give it once'],
    ['host=', 'host: expected a host name or a socket directory'],
    ['host=/a,/b', 'host: expected one host: the agent watches a single server'],
    ['port=0', 'port: expected a port number from 1 to 65535, got "0"'],
    ['port=70000', 'port: expected a port number from 1 to 65535, got "70000"'],
    ['user=', 'user: expected a role name'],
    ['dbname=other', 'dbname: the URL names its database already; give it once'],
    [
      'sslcert=/c.pem',
      'sslcert: client certificates are not supported by the agent; use a password (in the DSN, PGPASSWORD or ~/.pgpass)',
    ],
    [
      'sslkey=/k.pem',
      'sslkey: client certificates are not supported by the agent; use a password (in the DSN, PGPASSWORD or ~/.pgpass)',
    ],
    [
      'statement_timeout=0',
      'unknown parameter "statement_timeout" (the agent reads sslmode, sslrootcert, sslnegotiation, connect_timeout, target_session_attrs, options, host, port, user, dbname, password; server settings go in options=-c name=value)',
    ],
    [
      'max=100',
      'unknown parameter "max" (the agent reads sslmode, sslrootcert, sslnegotiation, connect_timeout, target_session_attrs, options, host, port, user, dbname, password; server settings go in options=-c name=value)',
    ],
    [
      'debug=true',
      'unknown parameter "debug" (the agent reads sslmode, sslrootcert, sslnegotiation, connect_timeout, target_session_attrs, options, host, port, user, dbname, password; server settings go in options=-c name=value)',
    ],
    [
      'keepalives=1',
      'unknown parameter "keepalives" (the agent reads sslmode, sslrootcert, sslnegotiation, connect_timeout, target_session_attrs, options, host, port, user, dbname, password; server settings go in options=-c name=value)',
    ],
    [
      `x${'y'.repeat(60)}=1`,
      `unknown parameter "x${'y'.repeat(39)}…" (the agent reads sslmode, sslrootcert, sslnegotiation, connect_timeout, target_session_attrs, options, host, port, user, dbname, password; server settings go in options=-c name=value)`,
    ],
  ])('%p: %p', (query, message) => {
    expect(problem(query)).toBe(message)
  })
  test('port, user, dbname and password as parameters of a URL without them; a password is never quoted', () => {
    expect(postgresDsnProblem(new URL('postgres:///?port=5433&user=me&dbname=app&password=s3cret'))).toBeUndefined()
    expect(postgresDsnProblem(new URL('postgres://u:s3cret@h/a?password=other'))).toBe(
      'password: the URL holds a password already; give it once',
    )
    expect(postgresDsnProblem(new URL('postgres://h:5433/a?port=5434'))).toBe(
      'port: the URL names its port already; give it once',
    )
    expect(postgresDsnProblem(new URL('postgres://me@h/a?user=you'))).toBe(
      'user: the URL names its user already; give it once',
    )
  })
})

describe('connecting through a Unix-domain socket (PostgreSQL 17)', () => {
  let pg: PostgresServer
  const dir = mkdtempSync(join(tmpdir(), 'dbm-sock-'))
  beforeAll(async () => {
    chmodSync(dir, 0o777) // the server runs as its own user and creates the socket here
    pg = await startPostgres(17, ['-c', `unix_socket_directories=${dir}`])
  })
  afterAll(async () => {
    await pg?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  test('the parameters the agent accepts reach the server as libpq means them: options, dbname, user and port', async () => {
    const tcp = new URL(pg.url())
    const dsn = `postgres://127.0.0.1/?port=${tcp.port}&user=${tcp.username}&password=${tcp.password}&dbname=postgres&sslmode=disable&connect_timeout=5&target_session_attrs=any&options=-c%20work_mem%3D5MB%20--geqo%3Doff`
    expect(
      parseAgentConfig(
        `api: { key: dbm_ak_0123456789abcdef_${'x'.repeat(43)} }\ndatabases:\n  - dsn: ${JSON.stringify(dsn)}\n`,
      ).databases[0]!.dsn,
    ).toBe(dsn)
    const sql = agentPostgres(dsn, { max: 1, onnotice: () => {}, connection: { application_name: 'dbm-agent' } })
    try {
      const [row] =
        await sql`SELECT current_setting('work_mem') AS work_mem, current_setting('geqo') AS geqo, current_database() AS db, current_user AS role,
                                     current_setting('port') AS port, current_setting('application_name') AS app`
      expect(row).toEqual({
        work_mem: '5MB',
        geqo: 'off',
        db: 'postgres',
        role: tcp.username,
        port: tcp.port,
        app: 'dbm-agent',
      })
    } finally {
      await sql.end()
    }
  })

  test("both forms reach the server over the socket: the agent's pool, --check, and dbm local's name", async () => {
    const tcp = new URL(pg.url())
    const credentials = `${tcp.username}:${tcp.password}`
    const forms = [
      `postgres://${credentials}@${encodeURIComponent(dir)}:${tcp.port}/postgres`,
      `postgres:///postgres?host=${encodeURIComponent(dir)}&port=${tcp.port}&user=${tcp.username}`,
    ]
    // The second form carries no password: postgres.js reads it from the environment, as libpq does.
    const saved = { PGPASSWORD: process.env.PGPASSWORD }
    Object.assign(process.env, { PGPASSWORD: decodeURIComponent(tcp.password) })
    try {
      for (const dsn of forms) {
        const sql = agentPostgres(dsn, { max: 1, onnotice: () => {} })
        try {
          // No server address: the connection is the socket's, not TCP's.
          const [row] = await sql`SELECT inet_server_addr() AS addr, current_setting('port') AS port`
          expect({ dsn, row }).toEqual({ dsn, row: { addr: null, port: tcp.port } })
        } finally {
          await sql.end()
        }
        const config = parseAgentConfig(
          `api: { key: dbm_ak_0123456789abcdef_${'x'.repeat(43)} }\ndatabases:\n  - name: sock\n    dsn: ${JSON.stringify(dsn)}\n`,
        )
        const [line] = await checkConfig(config, 10)
        expect(line!.ok).toBe(true)
        expect(line!.line).toContain('postgres 17.')
      }
      expect(databaseName(forms[0]!, {})).toBe(`${dir}:${tcp.port}/postgres`)
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    }
  })
})
