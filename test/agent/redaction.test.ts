// Passwords in URLs never reach the agent's output: the one redaction (src/shared/redact.ts) on a table
// of URLs and DSNs, then `dbm agent` as a process with a password in api.endpoint and in its databases'
// DSNs (one that works, one the server refuses, one ClickHouse that is not there): neither its log at
// debug level (startup, connection errors, shipping errors after the endpoint moves to a closed port),
// nor /healthz, nor --check shows any of them; the endpoint is shown as http://***@host:port.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { redactSecrets } from '../../src/shared/redact.ts'
import { freePort, sharedPostgres } from '../support/postgres.ts'
import { cleanEnv, runCommand } from '../support/process.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

describe('redactSecrets', () => {
  test('hides the password of every URL and password-like parameter, and nothing else', () => {
    const cases: [string, string][] = [
      ['https://agent:s3cret@dbm.example.com:8443/base', 'https://***@dbm.example.com:8443/base'],
      ['https://tok3n@dbm.example.com/', 'https://***@dbm.example.com/'],
      ['http://dbm.internal:8080', 'http://dbm.internal:8080'],
      ['postgres://monitor:s3cret@db:5432/app?sslmode=require', 'postgres://monitor:***@db:5432/app?sslmode=require'],
      ['postgresql://monitor:p@ss@word@db/app', 'postgresql://monitor:***@db/app'],
      ['postgres://monitor@db/app', 'postgres://monitor@db/app'],
      [
        'postgres://db/app?user=monitor&password=s3cret&sslmode=require',
        'postgres://db/app?user=monitor&password=***&sslmode=require',
      ],
      ['clickhouse://default:s3cret@ch:9000/?secure=true', 'clickhouse://default:***@ch:9000/?secure=true'],
      ['host=db user=monitor password=s3cret dbname=app', 'host=db user=monitor password=*** dbname=app'],
      ["host=db password='s3 cret' dbname=app", 'host=db password=*** dbname=app'],
      [
        'connect to postgres://u:s3cret@db/x failed; retrying https://k:s3cret@api/ later',
        'connect to postgres://u:***@db/x failed; retrying https://***@api/ later',
      ],
      [
        '{"dsn":"postgres://u:s3cret@db/x","sslpassword=s3cret":1}',
        '{"dsn":"postgres://u:***@db/x","sslpassword=***":1}',
      ],
      ['https://dbm.example.com/#/verify?token=abc', 'https://dbm.example.com/#/verify?token=abc'],
      ['SELECT 1 WHERE passenger = 2', 'SELECT 1 WHERE passenger = 2'],
      ['monitor:s3cret@db:5432/app', 'monitor:***@db:5432/app'],
      ['dsn=monitor:p@ss@db/app next', 'dsn=monitor:***@db/app next'],
      ['mail alice@example.com at 12:30', 'mail alice@example.com at 12:30'],
    ]
    expect(cases.map(([input]) => redactSecrets(input))).toEqual(cases.map(([, output]) => output))
  })
})

describe('dbm agent with passwords in its URLs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-agent-redaction-'))
  const endpointSecret = `endpoint-secret-${crypto.randomUUID()}`
  const pgSecret = `pg-secret-${crypto.randomUUID()}`
  const refusedSecret = `refused-secret-${crypto.randomUUID()}`
  const chSecret = `ch-secret-${crypto.randomUUID()}`
  const secrets = [endpointSecret, pgSecret, refusedSecret, chSecret]
  const role = `dbm_redact_${Math.random().toString(36).slice(2, 8)}`
  let server: TestServer
  let key = ''
  let dsn = ''
  let refusedDsn = ''
  let admin: postgres.Sql

  beforeAll(async () => {
    const pg = await sharedPostgres()
    const database = await pg.freshDatabase()
    admin = postgres(database, { max: 1, onnotice: () => {} })
    await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD '${pgSecret}' IN ROLE pg_monitor`)
    const url = new URL(database)
    url.username = role
    url.password = pgSecret
    dsn = url.href
    url.password = refusedSecret
    refusedDsn = url.href
    server = await startTestServer('sqlite')
    key = (await agentAccount(server)).key
  })
  afterAll(async () => {
    await server?.stop()
    await admin?.unsafe(`DROP ROLE IF EXISTS ${role}`).catch(() => {})
    await admin?.end()
    rmSync(dir, { recursive: true, force: true })
  })

  const withCredentials = (base: string) => base.replace('http://', `http://dbm-proxy-user:${endpointSecret}@`)
  const config = async (endpoint: string, healthPort: number) =>
    [
      'api:',
      `  endpoint: ${endpoint}`,
      `  key: ${key}`,
      'health:',
      `  listen_addr: 127.0.0.1:${healthPort}`,
      'databases:',
      '  - name: works',
      `    dsn: ${dsn}`,
      '    poll_interval: 1s',
      '  - name: refused',
      `    dsn: ${refusedDsn}`,
      '    poll_interval: 1s',
      '  - name: absent',
      `    dsn: clickhouse://default:${chSecret}@127.0.0.1:${await freePort()}/default`,
      '    poll_interval: 1s',
      '',
    ].join('\n')

  test('neither the log, nor /healthz, nor --check shows a password', async () => {
    const path = join(dir, 'config.yaml')
    const healthPort = await freePort()
    writeFileSync(path, await config(withCredentials(server.base), healthPort))

    const check = await runCommand(['bun', 'src/cli.ts', 'agent', '--check', '--config', path], { timeoutMs: 30_000 })
    const checkLines = check.stdout.trimEnd().split('\n')
    expect(checkLines[0]).toBe(`ok    api: ${server.base.replace('http://', 'http://***@')} accepts the key`)
    expect(checkLines.slice(1).map((l) => l.split(':')[0])).toEqual(['ok    works', 'FAIL  refused', 'FAIL  absent'])

    const proc = Bun.spawn(
      ['bun', 'src/cli.ts', 'agent', '--config', path, '--buffer-dir', dir, '--log-level', 'debug'],
      {
        env: cleanEnv(),
        stdout: 'pipe',
        stderr: 'pipe',
        timeout: 60_000,
      },
    )
    let output = ''
    const decoder = new TextDecoder()
    const drained = Promise.all(
      [proc.stdout, proc.stderr].map(async (stream) => {
        for await (const chunk of stream) output += decoder.decode(chunk, { stream: true })
      }),
    )
    const healthBodies: string[] = []
    const health = async () => {
      const text = await fetch(`http://127.0.0.1:${healthPort}/healthz`).then(
        (r) => r.text(),
        () => undefined,
      )
      if (text === undefined) return undefined
      healthBodies.push(text)
      return JSON.parse(text)
    }
    const waitFor = <T>(what: string, probe: () => Promise<T | undefined>) =>
      until(what, probe, { timeoutMs: 20_000 }).catch((e: Error) => {
        throw new Error(`${e.message}; output:\n${output}`)
      })
    try {
      // Delivered through the endpoint with credentials; the two others failing with their errors.
      const delivered = await waitFor('a batch delivered and both failures reported', async () => {
        const h = await health()
        const byName = Object.fromEntries((h?.databases ?? []).map((d: any) => [d.name, d]))
        return h?.api.reachable === true &&
          byName.works?.state === 'connected' &&
          byName.refused?.last_error &&
          byName.absent?.last_error
          ? h
          : undefined
      })
      expect(delivered.api.endpoint).toBe(server.base.replace('http://', 'http://***@'))

      // The endpoint moves to a closed port: shipping fails and says why, in the log and in /healthz.
      writeFileSync(path, await config(withCredentials(`http://127.0.0.1:${await freePort()}`), healthPort))
      await waitFor('a shipping failure', async () => ((await health())?.api.last_error ? true : undefined))
      await waitFor('the shipping failure in the log', async () =>
        output.includes('API unreachable; buffering batches') ? true : undefined,
      )
    } finally {
      proc.kill('SIGTERM')
      await proc.exited
      await drained
    }
    expect(output).toContain(`api=${server.base.replace('http://', 'http://***@')}`)
    expect(output).toContain('cannot connect database=refused')
    const printed = [check.stdout, check.stderr, output, ...healthBodies].join('\n')
    expect(secrets.filter((secret) => printed.includes(secret))).toEqual([])
  }, 60_000)
})
