// `dbm agent` as a process: config location and its errors, --check against a real PostgreSQL, the
// health endpoint, hot reload that keeps the running config on a bad edit, and a clean stop.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { checkConfig } from '../../src/agent/check.ts'
import { parseAgentConfig } from '../../src/agent/config.ts'
import { freePort, sharedPostgres } from '../support/postgres.ts'
import { cleanEnv, runCommand } from '../support/process.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

const CLI = ['bun', 'src/cli.ts', 'agent']
const loadAgentConfigText = (text: string) => parseAgentConfig(text, 'config.yaml')
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
    expect(res.exitCode).toBe(1)
    expect(res.stderr).toStartWith('no config file found')
    expect(res.stderr).toContain('--config, $SERVICE_CONFIG, ')
  })

  test('a malformed DSN parameter is a config error before any connection: --check and the agent say what dbm local says', async () => {
    const dir = tempDir()
    const path = join(dir, 'agent.yaml')
    writeFileSync(
      path,
      `api:\n  key: ${KEY}\ndatabases:\n  - name: a\n    dsn: postgres://u:secret@h/db?sslmode=bogus\n  - name: c\n    dsn: clickhouse://u:secret@ch/db?skip_verify=true\n`,
    )
    const [check, run] = await Promise.all([
      runCommand([...CLI, '--check', '--config', path]),
      runCommand([...CLI, '--config', path, '--buffer-dir', dir]),
    ])
    const line =
      'databases[0].dsn: sslmode: expected one of disable, allow, prefer, require, verify-ca, verify-full, got "bogus"\n'
    expect([check.exitCode, check.stdout, check.stderr]).toEqual([1, '', line])
    expect([run.exitCode, run.stderr]).toEqual([1, line])
    writeFileSync(
      path,
      `api:\n  key: ${KEY}\ndatabases:\n  - name: c\n    dsn: clickhouse://u:secret@ch/db?skip_verify=true\n`,
    )
    const ch = await runCommand([...CLI, '--check', '--config', path])
    expect([ch.exitCode, ch.stderr]).toEqual([
      1,
      'databases[0].dsn: unknown parameter "skip_verify" (the agent reads username, password, database, secure)\n',
    ])
  })

  test('SERVICE_CONFIG is used, and an invalid config names the problem', async () => {
    const dir = tempDir()
    const path = join(dir, 'agent.yaml')
    writeFileSync(
      path,
      `api:\n  key: ${KEY}\ndatabases:\n  - name: a\n    dsn: postgres://u:secret@h/db\n  - name: a\n    dsn: postgres://u:secret@h/db2\n`,
    )
    const res = await runCommand([...CLI, '--buffer-dir', dir], { env: { SERVICE_CONFIG: path } })
    expect(res.exitCode).toBe(1)
    expect(res.stderr).toBe('databases[1].name: duplicate name "a"\n')
  })

  test("a second agent on the same buffer directory exits 1 with one line; a killed agent's lock is taken over", async () => {
    const dir = tempDir()
    const path = join(dir, 'agent.yaml')
    // Nothing to reach: the agent runs on, retrying, which is all this needs.
    writeFileSync(
      path,
      `api:\n  endpoint: http://127.0.0.1:1\n  key: ${KEY}\ndatabases:\n  - name: a\n    dsn: postgres://u:secret@127.0.0.1:1/db\n`,
    )
    const start = () =>
      Bun.spawn([...CLI, '--config', path, '--buffer-dir', dir], {
        env: cleanEnv(),
        stdout: 'ignore',
        stderr: 'ignore',
        timeout: 60_000,
      })
    const holder = async (pid: number) =>
      (
        await Bun.file(join(dir, 'agent.pid'))
          .text()
          .catch(() => '')
      ).trim() === String(pid)
    const first = start()
    try {
      await until('the first agent holds the lock', async () => ((await holder(first.pid)) ? true : undefined))
      const second = await runCommand([...CLI, '--config', path, '--buffer-dir', dir])
      expect([second.exitCode, second.stderr]).toEqual([
        1,
        `dbm agent: another dbm agent (pid ${first.pid}) is running on ${dir}; stop it first, or give this one another --buffer-dir\n`,
      ])
    } finally {
      first.kill('SIGKILL')
      await first.exited
    }
    const third = start()
    try {
      await until("the next agent takes the dead one's lock", async () =>
        (await holder(third.pid)) ? true : undefined,
      )
    } finally {
      third.kill('SIGTERM')
      // 0 once the agent's handler is installed; 143 (the signal's default) when SIGTERM lands in the moment
      // between taking the lock and starting, which is all this test waits for.
      expect([0, 143]).toContain(await third.exited)
    }
  })

  test('agent --help lists its flags; a bad flag exits 2', async () => {
    const help = await runCommand([...CLI, '--help'])
    expect(help.exitCode).toBe(0)
    for (const flag of ['--config', '--check', '--buffer-dir', '--log-level']) expect(help.stdout).toContain(flag)
    const bad = await runCommand([...CLI, '--frobnicate'])
    expect({ exit: bad.exitCode, stderr: bad.stderr }).toEqual({
      exit: 2,
      stderr: 'dbm agent: unknown flag --frobnicate (see dbm agent --help)\n',
    })
  })
})

describe('against a real PostgreSQL', () => {
  let dsn: string
  let server: TestServer
  let key: string
  beforeAll(async () => {
    dsn = await (await sharedPostgres(13)).freshDatabase()
    server = await startTestServer('sqlite')
    // Only the ingest scope: --check asks GET /auth/me, which any key of the organization may.
    key = (await agentAccount(server, { scopes: ['ingest'] })).key
  })
  afterAll(async () => {
    await server.stop()
  })

  test('--check prints the API line and one line per database, and exits by the worst result', async () => {
    const dir = tempDir()
    const path = join(dir, 'config.yaml')
    writeFileSync(
      path,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: pg13\n    dsn: ${dsn}\n`,
    )
    const ok = await runCommand([...CLI, '--check', '--config', path])
    expect(ok.exitCode).toBe(0)
    const [api, pg13] = ok.stdout.trimEnd().split('\n')
    expect(api).toBe(`ok    api: ${server.base} accepts the key`)
    expect(pg13).toMatch(
      /^ok {4}pg13: postgres 13\.\d+; collectors: query_stats, .*; skipped: wal_stats \(needs PostgreSQL 14\+\), io_stats \(needs PostgreSQL 16\+\), backups \(no backup_command configured\); host: on the database host \([^;]*postmaster\.pid names the server's port[^;]*\), measures data [^;]*; actions the dashboard may run: explain \(allow_actions\); note: pg_stat_statements is not installed in this database: query_stats will be empty \(CREATE EXTENSION pg_stat_statements;/,
    )

    const port = await freePort()
    writeFileSync(
      path,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: pg13\n    dsn: ${dsn}\n  - name: gone\n    dsn: postgres://u:hunter2@127.0.0.1:${port}/x\n`,
    )
    const bad = await runCommand([...CLI, '--check', '--config', path])
    expect(bad.exitCode).toBe(1)
    const lines = bad.stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(3)
    expect(lines[2]).toStartWith('FAIL  gone: postgres: ')
    expect(bad.stdout + bad.stderr).not.toContain('hunter2')
  })

  test('--check: a refused key and an unreachable API fail; a pg_monitor-only role gets notes on what it lacks', async () => {
    const dir = tempDir()
    const path = join(dir, 'config.yaml')
    const admin = postgres(dsn, { max: 1, onnotice: () => {} })
    const role = `dbm_check_${Math.random().toString(36).slice(2, 8)}`
    try {
      await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'check-pw'`)
      await admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
      await admin`CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY)`
      const u = new URL(dsn)
      u.username = role
      u.password = 'check-pw'
      writeFileSync(
        path,
        `api:\n  endpoint: ${server.base}\n  key: ${KEY}\ndatabases:\n  - name: pg13\n    dsn: ${u}\n`,
      )
      const refused = await runCommand([...CLI, '--check', '--config', path])
      expect(refused.exitCode).toBe(1)
      const [api, pg13] = refused.stdout.trimEnd().split('\n')
      expect(api).toBe(`FAIL  api: ${server.base} refused the API key (HTTP 401: invalid API key)`)
      // PostgreSQL 13 lets everyone create in public: plans would not be sampled, and --check says why.
      expect(pg13).toContain(
        '; plans will not be sampled: roles the agent does not trust own objects in, or may create them in, schema public on its search_path',
      )
      expect(pg13).toContain(`; role ${role} is not a member of pg_monitor`)
      expect(pg13).toContain(
        `role ${role} cannot read 1 tables: their statements are not explained, their sequences not checked and their column statistics not read (GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role};`,
      )

      await admin.unsafe('REVOKE CREATE ON SCHEMA public FROM PUBLIC')
      await admin.unsafe(`GRANT pg_monitor TO ${role}`)
      await admin.unsafe(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`)
      // A key the server knows that cannot send batches: --check fails, naming the scope.
      const readOnly = await server.call('POST', '/api/v1/api-keys', {
        apiKey: (await agentAccount(server)).key,
        body: { name: 'reader', scopes: ['read', 'admin'] },
      })
      writeFileSync(
        path,
        `api:\n  endpoint: ${server.base}\n  key: ${readOnly.body.key}\ndatabases:\n  - name: pg13\n    dsn: ${u}\n`,
      )
      const unscoped = await runCommand([...CLI, '--check', '--config', path])
      expect(unscoped.exitCode).toBe(1)
      expect(unscoped.stdout.split('\n')[0]).toBe(
        `FAIL  api: ${server.base} knows the key, but it lacks the 'ingest' scope the agent's batches need (it has: read, admin); create one with ingest`,
      )
      const port = await freePort()
      writeFileSync(
        path,
        `api:\n  endpoint: http://127.0.0.1:${port}\n  key: ${key}\ndatabases:\n  - name: pg13\n    dsn: ${u}\n`,
      )
      const unreachable = await runCommand([...CLI, '--check', '--config', path])
      expect(unreachable.exitCode).toBe(1)
      const [down, granted] = unreachable.stdout.trimEnd().split('\n')
      expect(down).toStartWith(`FAIL  api: http://127.0.0.1:${port} unreachable: `)
      // What is left to say: PostgreSQL 13's pg_stat_statements cannot back plan sampling, and the security
      // advisors cannot see MD5 hashes or pg_hba.conf without a superuser or a GRANT (the collectors' own
      // notes come in the order of the collectors' table).
      expect(granted).toMatch(
        /^ok {4}pg13: postgres 13\.\d+; collectors: [^;]*; skipped: [^;]*\); host: [^;]*; actions the dashboard may run: explain \(allow_actions\); note: plans will not be sampled: this pg_stat_statements \(before 1\.9, PostgreSQL 13\)[^;]*; update the extension \(PostgreSQL 14\+\), or use auto_explain with pg_log_dir; security: role dbm_check_\w+ cannot read everything: MD5 password hashes of roles are not checked \(pg_authid needs a superuser[^;]*, and pg_hba\.conf lines are not checked \(GRANT SELECT ON pg_hba_file_rules TO dbm_check_\w+, GRANT EXECUTE ON FUNCTION pg_hba_file_rules\(\) TO dbm_check_\w+\); log_events: logging_collector is off: [^;]*; restart\)$/,
      )

      // A function of another non-superuser role stops plan sampling: --check says so, naming it, unless the role is trusted.
      await admin.unsafe(`CREATE ROLE ${role}_app`)
      await admin.unsafe(
        `CREATE FUNCTION public.slug(t text) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT lower(t) $$`,
      )
      await admin.unsafe(`ALTER FUNCTION public.slug(text) OWNER TO ${role}_app`)
      const untrusted = (await runCommand([...CLI, '--check', '--config', path])).stdout.trimEnd().split('\n')[1]
      // The note leads with what to set, then says why.
      expect(untrusted).toContain(
        `; explain_trusted_roles: ["${role}_app"] (add it to database "pg13" in the agent config if you trust ${role}_app, or use auto_explain with pg_log_dir): ` +
          `plans will not be sampled while public.slug(t text) (owned by ${role}_app) would run with the agent's rights while planning`,
      )
      // Trusted: no such note; a name that is no role (case matters) is pointed out.
      writeFileSync(
        path,
        `api:\n  endpoint: http://127.0.0.1:${port}\n  key: ${key}\ndatabases:\n  - name: pg13\n    dsn: ${u}\n    explain_trusted_roles: [${role}_app, ${role.toUpperCase()}_APP]\n`,
      )
      const trusted = (await runCommand([...CLI, '--check', '--config', path])).stdout
      expect(trusted).not.toContain('would run with the agent')
      expect(trusted).toContain(
        `; explain_trusted_roles names no role "${role.toUpperCase()}_APP" (role names are case-sensitive)`,
      )

      // Cancel and terminate allowed: without pg_signal_backend the role signals only its own sessions, and --check says the GRANT.
      writeFileSync(
        path,
        `api:\n  endpoint: http://127.0.0.1:${port}\n  key: ${key}\ndatabases:\n  - name: pg13\n    dsn: ${u}\n    allow_actions: [cancel, terminate, explain]\n`,
      )
      const signal = `; role ${role} may signal only its own sessions: cancel and terminate of other roles' sessions from the dashboard will be refused (GRANT pg_signal_backend TO ${role};)`
      const ungranted = (await runCommand([...CLI, '--check', '--config', path])).stdout
      expect(ungranted).toContain('; actions the dashboard may run: cancel, terminate, explain (allow_actions)')
      expect(ungranted).toContain(signal)
      await admin.unsafe(`GRANT pg_signal_backend TO ${role}`)
      const signalling = (await runCommand([...CLI, '--check', '--config', path])).stdout
      expect(signalling).toContain('; actions the dashboard may run: cancel, terminate, explain (allow_actions)')
      expect(signalling).not.toContain('may signal only its own sessions')
    } finally {
      await admin.unsafe(`DROP FUNCTION IF EXISTS public.slug(text)`).catch(() => {})
      await admin.unsafe(`DROP ROLE IF EXISTS ${role}_app`).catch(() => {})
      await admin.unsafe(`DROP OWNED BY ${role}`).catch(() => {})
      await admin.unsafe(`DROP ROLE IF EXISTS ${role}`).catch(() => {})
      await admin.end()
    }
  })

  test('--check against a port that is not PostgreSQL (an HTTP server) fails within the deadline', async () => {
    const http = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('not postgres') })
    try {
      const config = loadAgentConfigText(
        `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: web\n    dsn: postgres://u:p@127.0.0.1:${http.port}/x\n`,
      )
      const started = Date.now()
      const [line] = await checkConfig(config, 1)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(line).toEqual({
        ok: false,
        line: `FAIL  web: postgres: no PostgreSQL answered at 127.0.0.1:${http.port} within 1 s`,
      })
    } finally {
      http.stop(true)
    }
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
    const proc = Bun.spawn([...CLI, '--config', path, '--buffer-dir', dir], {
      env: cleanEnv(),
      stdout: 'ignore',
      stderr: 'pipe',
      timeout: 60_000,
    })
    let stderr = ''
    const drained = (async () => {
      for await (const chunk of proc.stderr) stderr += new TextDecoder().decode(chunk)
    })()
    const health = async () =>
      (await fetch(`http://127.0.0.1:${healthPort}/healthz`).then(
        (r) => r.json(),
        () => undefined,
      )) as any
    /** Waits for `probe` to return a value; a timeout names what it waited for, with the agent's stderr. */
    const waitFor = async <T>(what: string, probe: () => Promise<T | undefined>): Promise<T> =>
      until(what, probe).catch((e: Error) => {
        throw new Error(`${e.message}; stderr:\n${stderr}`)
      })
    const healthWhere = (what: string, ok: (h: any) => boolean) =>
      waitFor(what, async () => {
        const h = await health()
        return h && ok(h) ? h : undefined
      })
    const logged = (line: string) =>
      waitFor(`"${line}" in the log`, async () => (stderr.includes(line) ? true : undefined))
    try {
      const first = await healthWhere('first connected', (h) =>
        h.databases.some((d: any) => d.name === 'first' && d.state === 'connected'),
      )
      expect(first.status).toBe('ok')
      expect(first.databases[0]).toMatchObject({
        name: 'first',
        engine: 'postgres',
        server_version: expect.stringMatching(/^13\./),
      })

      writeFileSync(path, config(['first', 'second']))
      await healthWhere('second started', (h) =>
        h.databases.some((d: any) => d.name === 'second' && d.state === 'connected'),
      )

      writeFileSync(path, 'databases: [ this is not yaml')
      await logged('config reload failed; keeping the running configuration')
      expect((await health()).databases.map((d: any) => d.name).sort()).toEqual(['first', 'second'])

      writeFileSync(path, config(['second']))
      await healthWhere('first stopped', (h) => h.databases.map((d: any) => d.name).join() === 'second')
      // The reload is logged once it has finished, a moment after the health state changed.
      await logged('config reloaded started=none stopped=first restarted=none')
    } finally {
      proc.kill('SIGTERM')
      expect(await proc.exited).toBe(0)
      await drained
    }
    expect(stderr).not.toContain(key)
  })
})
