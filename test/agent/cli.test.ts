// `dbm agent` as a process: config location and its errors, --check against a real PostgreSQL, the
// health endpoint, hot reload that keeps the running config on a bad edit, and a clean stop.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, sharedPostgres } from '../support/postgres.ts'
import { cleanEnv, runCommand } from '../support/process.ts'
import { createApiKey, signup, startTestServer, type TestServer, verify } from '../support/server.ts'

const CLI = ['bun', 'src/cli.ts', 'agent']
const KEY = `dbm_ak_0123456789abcdef_${'A'.repeat(43)}`
const dirs: string[] = []
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'dbm-agent-cli-'))
  dirs.push(d)
  return d
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe('config location and errors', () => {
  test('no config anywhere: exit 1 with "no config file found"', async () => {
    const dir = tempDir()
    const res = await runCommand(['bun', join(process.cwd(), 'src/cli.ts'), 'agent'], { cwd: dir })
    expect({ exit: res.exitCode, stderr: res.stderr }).toEqual({ exit: 1, stderr: 'no config file found\n' })
  })

  test('SERVICE_CONFIG is used, and an invalid config names the problem', async () => {
    const dir = tempDir()
    const path = join(dir, 'agent.yaml')
    writeFileSync(path, `api:\n  key: ${KEY}\ndatabases:\n  - name: a\n    dsn: postgres://u:secret@h/db\n  - name: a\n    dsn: postgres://u:secret@h/db2\n`)
    const res = await runCommand(CLI, { env: { SERVICE_CONFIG: path } })
    expect(res.exitCode).toBe(1)
    expect(res.stderr).toBe('databases[1].name: duplicate name "a"\n')
  })

  test('agent --help lists its flags; a bad flag exits 2', async () => {
    const help = await runCommand([...CLI, '--help'])
    expect(help.exitCode).toBe(0)
    for (const flag of ['--config', '--check', '--buffer-dir', '--log-level']) expect(help.stdout).toContain(flag)
    const bad = await runCommand([...CLI, '--frobnicate'])
    expect({ exit: bad.exitCode, stderr: bad.stderr }).toEqual({ exit: 2, stderr: 'dbm agent: unknown flag --frobnicate (see dbm agent --help)\n' })
  })
})

describe('against a real PostgreSQL', () => {
  let dsn: string
  let server: TestServer
  let key: string
  beforeAll(async () => {
    dsn = await (await sharedPostgres(13)).freshDatabase()
    server = await startTestServer('sqlite')
    const account = await signup(server)
    await verify(server, account)
    key = (await createApiKey(server, account)).key
  })
  afterAll(async () => {
    await server.stop()
  })

  test('--check prints one line per database and exits by the worst result', async () => {
    const dir = tempDir()
    const path = join(dir, 'config.yaml')
    writeFileSync(path, `api:\n  key: ${KEY}\ndatabases:\n  - name: pg13\n    dsn: ${dsn}\n`)
    const ok = await runCommand([...CLI, '--check', '--config', path])
    expect(ok.exitCode).toBe(0)
    expect(ok.stdout).toMatch(/^ok {4}pg13: postgres 13\.\d+; collectors: query_stats, .*; skipped: wal_stats \(needs PostgreSQL 14\+\), io_stats \(needs PostgreSQL 16\+\)\n$/)

    const port = await freePort()
    writeFileSync(path, `api:\n  key: ${KEY}\ndatabases:\n  - name: pg13\n    dsn: ${dsn}\n  - name: gone\n    dsn: postgres://u:hunter2@127.0.0.1:${port}/x\n`)
    const bad = await runCommand([...CLI, '--check', '--config', path])
    expect(bad.exitCode).toBe(1)
    const lines = bad.stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(2)
    expect(lines[1]).toStartWith('FAIL  gone: postgres: ')
    expect(bad.stdout + bad.stderr).not.toContain('hunter2')
  })

  test('serves /healthz, reloads a changed config, keeps running on a bad edit, stops on SIGTERM', async () => {
    const dir = tempDir()
    const path = join(dir, 'config.yaml')
    const healthPort = await freePort()
    const config = (names: string[]) =>
      `api:\n  endpoint: ${server.base}\n  key: ${key}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\ndatabases:\n${names
        .map((n) => `  - name: ${n}\n    dsn: ${dsn}\n    poll_interval: 1s\n`)
        .join('')}`
    writeFileSync(path, config(['first']))
    const proc = Bun.spawn([...CLI, '--config', path, '--buffer-dir', dir], { env: cleanEnv(), stdout: 'ignore', stderr: 'pipe', timeout: 60_000 })
    let stderr = ''
    const drained = (async () => {
      for await (const chunk of proc.stderr) stderr += new TextDecoder().decode(chunk)
    })()
    const health = async () => (await fetch(`http://127.0.0.1:${healthPort}/healthz`).then((r) => r.json(), () => undefined)) as any
    const waitFor = async (what: string, ok: (h: any) => boolean) => {
      for (let i = 0; i < 100; i++) {
        const h = await health()
        if (h && ok(h)) return h
        await Bun.sleep(100)
      }
      throw new Error(`timed out waiting for ${what}; stderr:\n${stderr}`)
    }
    try {
      const first = await waitFor('first connected', (h) => h.databases.some((d: any) => d.name === 'first' && d.state === 'connected'))
      expect(first.status).toBe('ok')
      expect(first.databases[0]).toMatchObject({ name: 'first', engine: 'postgres', server_version: expect.stringMatching(/^13\./) })

      writeFileSync(path, config(['first', 'second']))
      await waitFor('second started', (h) => h.databases.some((d: any) => d.name === 'second' && d.state === 'connected'))

      writeFileSync(path, 'databases: [ this is not yaml')
      await Bun.sleep(1500)
      expect((await health()).databases.map((d: any) => d.name).sort()).toEqual(['first', 'second'])
      expect(stderr).toContain('config reload failed; keeping the running configuration')

      writeFileSync(path, config(['second']))
      await waitFor('first stopped', (h) => h.databases.map((d: any) => d.name).join() === 'second')
      // The reload is logged once it has finished, a moment after the health state changed.
      for (let i = 0; i < 50 && !stderr.includes('stopped=first'); i++) await Bun.sleep(100)
      expect(stderr).toContain('config reloaded started=none stopped=first restarted=none')
    } finally {
      proc.kill('SIGTERM')
      expect(await proc.exited).toBe(0)
      await drained
    }
    expect(stderr).not.toContain(key)
  })
})
