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
import { postgresConnection, postgresHost } from '../../src/agent/postgres-dsn.ts'
import { dsnEndpoint } from '../../src/agent/postgres-runner.ts'
import { databaseName } from '../../src/local/databases.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'

describe('postgresConnection', () => {
  test('a socket directory in the host or a host parameter becomes the host option; other DSNs are left as they are', () => {
    expect(postgresConnection('postgres://me:pw@db.example:6432/app?sslmode=require')).toEqual({ url: 'postgres://me:pw@db.example:6432/app?sslmode=require' })
    expect(postgresConnection('postgres://me@%2Fvar%2Frun%2Fpostgresql:5433/app')).toEqual({ url: 'postgres://me@localhost:5433/app', socket: '/var/run/postgresql' })
    expect(postgresConnection('postgresql:///app?host=/tmp/pg%20sock&application_name=x')).toEqual({ url: 'postgresql://localhost/app?application_name=x', socket: '/tmp/pg sock' })
    expect(postgresConnection('postgres:///app?host=/tmp/s&port=5433&user=me')).toEqual({ url: 'postgres://me@localhost:5433/app', socket: '/tmp/s' })
    // A host parameter that is a host name, not a directory, is not a socket.
    expect(postgresConnection('postgres:///app?host=db.example')).toEqual({ url: 'postgres:///app?host=db.example' })
    expect(postgresConnection('not a url')).toEqual({ url: 'not a url' })
    expect(postgresHost('postgres://me@%2Fvar%2Frun%2Fpostgresql/app')).toBe('/var/run/postgresql')
    expect(postgresHost('postgres://me@db.example/app')).toBe('db.example')
    expect(postgresHost('postgres:///app')).toBe('localhost')
    expect(dsnEndpoint('postgres:///app?host=/tmp/s')).toEqual({ host: '/tmp/s', port: 5432 })
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
        const config = parseAgentConfig(`api: { key: dbm_ak_0123456789abcdef_${"x".repeat(43)} }\ndatabases:\n  - name: sock\n    dsn: ${JSON.stringify(dsn)}\n`)
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
