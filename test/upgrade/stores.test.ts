// Upgrading a store the previous release (v0.1.0) wrote, SQLite and PostgreSQL alike: the current
// `dbm serve` (from source) opens it, every answer v0.1.0 gave reads back the same, keys and sessions
// issued before still work, the agent goes on with its config and the counts stay exact; then the
// previous release's binary refuses the upgraded store with one line and changes nothing, as the current
// code refuses a store whose schema is ahead of it.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SignJWT } from 'jose'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { latestVersion } from '../../src/server/store/migrations.ts'
import { createLogger } from '../../src/shared/log.ts'
import { sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { type ServeProcess, request, runCommand, startServe, stopAllServers } from '../support/process.ts'
import { until } from '../support/wait.ts'
import {
  differences,
  expected,
  jwtSecretOf,
  postgresStore,
  previousRelease,
  sqliteContent,
  sqliteDataDir,
} from './fixtures.ts'

const root = mkdtempSync(join(tmpdir(), 'dbm-upgrade-'))
const source = ['bun', join(import.meta.dir, '..', '..', 'src', 'cli.ts')]
/** No retention pass may thin the fixture's history, however old it is when the test runs. */
const env = { DBM_RETENTION_DAYS: '100000' }

afterAll(async () => {
  await stopAllServers()
  rmSync(root, { recursive: true, force: true })
})

/** Answers whose figures follow the clock, not the store: a database's status (and why) and its 30-day availability. */
const moving = (path: string) =>
  /^\/api\/v1\/databases(\/[^/?]+)?\.body(\[\d+\])?\.(status|reason|availability_30d\w*)$/.test(path)

/**
 * The answer as v0.1.0 would give it now: events the server added since (a silent agent noticed after
 * the restart, "Agent stopped sending", dated at its last batch) are not v0.1.0's rows.
 */
function withoutNewEvents(path: string, before: any, after: any): any {
  if (!/\/events\?/.test(path) || !Array.isArray(before) || !Array.isArray(after)) return after
  const had = new Set(before.map((e) => JSON.stringify(e)))
  return after.filter((e) => had.has(JSON.stringify(e)) || e.kind !== 'agent_disconnected')
}

for (const kind of ['sqlite', 'postgres'] as const) {
  describe(`a ${kind} store of ${expected.release}`, () => {
    const fixture = expected[kind]
    const dataDir = join(root, kind)
    let databaseUrl: string | undefined
    let serve: ServeProcess
    let token = ''
    const serveEnv = () => ({ ...env, ...(databaseUrl ? { DBM_DATABASE_URL: databaseUrl } : {}) })

    beforeAll(async () => {
      if (kind === 'sqlite') sqliteDataDir(dataDir)
      else {
        databaseUrl = await postgresStore(await sharedPostgres())
        sqliteDataDir(dataDir)
        rmSync(join(dataDir, 'dbm.sqlite'))
        writeFileSync(join(dataDir, 'jwt-secret'), `${jwtSecretOf('postgres')}\n`, { mode: 0o600 })
      }
      serve = await startServe(source, { dataDir, env: serveEnv() })
      const login = await request(serve.base, 'POST', '/api/v1/auth/login', { body: fixture.owner })
      expect(login.status).toBe(200)
      token = login.body.access_token
    }, 60_000)

    test('the migrations to the current version are applied at start', () => {
      // v0.1.0's store is at version 16: every later migration, in order, once
      const later = Array.from({ length: latestVersion - 16 }, (_, i) => 17 + i)
      expect(latestVersion).toBeGreaterThanOrEqual(23)
      expect(serve.stderr()).toMatch(new RegExp(`migrations_applied=${later.join(',')}\\b`))
    })

    test('every answer v0.1.0 gave reads back the same (fields added since aside)', async () => {
      const diffs: string[] = []
      for (const [path, before] of Object.entries(fixture.answers)) {
        const after = await request(serve.base, 'GET', path, { token })
        const body = withoutNewEvents(path, (before as any).body, after.body)
        diffs.push(...differences(before, { status: after.status, body }, path, moving))
      }
      expect(diffs).toEqual([])
      expect(fixture.markers.map((m) => m.total_calls)).toEqual(fixture.markers.map((m) => m.runs))
    })

    test('API keys issued before authenticate as before; the revoked one stays refused', async () => {
      expect((await request(serve.base, 'GET', '/api/v1/databases', { apiKey: fixture.keys.reader })).status).toBe(200)
      const revoked = await request(serve.base, 'GET', '/api/v1/databases', { apiKey: fixture.keys.revoked })
      expect(revoked).toEqual({ status: 401, body: { error: 'API key has been revoked' } })
    })

    test('an access token issued before the upgrade works until it expires, on every serve of the store', async () => {
      // v0.1.0's claims (sub, org, sid, typ), issued five minutes ago with its secret: ten minutes left.
      const now = Math.floor(Date.now() / 1000)
      const { sub, org, sid, typ } = fixture.session.access_claims
      const old = await new SignJWT({ sub, org, sid, typ })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuedAt(now - 300)
        .setExpirationTime(now + 600)
        .sign(new TextEncoder().encode(jwtSecretOf(kind)))
      expect((await request(serve.base, 'GET', '/api/v1/auth/me', { token: old })).status).toBe(200)
      const expired = await new SignJWT({ sub, org, sid, typ })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuedAt(now - 960)
        .setExpirationTime(now - 60)
        .sign(new TextEncoder().encode(jwtSecretOf(kind)))
      expect((await request(serve.base, 'GET', '/api/v1/auth/me', { token: expired })).status).toBe(401)
      if (kind !== 'postgres') return
      // Another serve of the same store with a data directory of its own (a second replica, or the new
      // binary started elsewhere): it signs and verifies with the store's secret, the one v0.1.0 used.
      const other = await startServe(source, { dataDir: mkdtempSync(join(root, 'other-')), env: serveEnv() })
      try {
        expect((await request(other.base, 'GET', '/api/v1/auth/me', { token: old })).status).toBe(200)
        const login = await request(other.base, 'POST', '/api/v1/auth/login', { body: fixture.owner })
        expect((await request(serve.base, 'GET', '/api/v1/auth/me', { token: login.body.access_token })).status).toBe(
          200,
        )
      } finally {
        await other.stop()
      }
    }, 30_000)

    test('the agent goes on with its config, and the counts stay exact', async () => {
      const pg = await sharedPostgres()
      const dsn = await statementsDatabase(pg)
      const dir = mkdtempSync(join(root, 'agent-'))
      const config = join(dir, 'config.yaml')
      writeFileSync(
        config,
        `api:\n  endpoint: ${serve.base}\n  key: ${fixture.keys.agent}\ndatabases:\n  - name: app\n    dsn: ${dsn}\n    poll_interval: 1s\n`,
      )
      const agent = new Agent({ configPath: config, bufferDir: dir, log: createLogger('error', () => {}) })
      await agent.start()
      try {
        await until(
          'the baseline',
          async () => (agent.runner('app')?.status.collectors.query_stats?.startsWith('ok') ? true : undefined),
          { timeoutMs: 30_000 },
        )
        const marker = fixture.markers[0]!
        const sql = postgres(dsn, { max: 1, onnotice: () => {} })
        for (let i = 0; i < 5; i++) await sql.unsafe(marker.text, [i + 1])
        await sql.end()
        const window = `since=${encodeURIComponent(fixture.window.since)}&until=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`
        const calls = await until(
          'the five new calls',
          async () => {
            // By its text: queryid hashes the table's OID, which differs in the database the agent watches now.
            const q = await request(
              serve.base,
              'GET',
              `/api/v1/databases/${fixture.database_id}/queries?${window}&limit=500`,
              { token },
            )
            if (q.status !== 200) throw new Error(`${q.status} ${JSON.stringify(q.body)}`)
            const tag = marker.text.slice(marker.text.indexOf('/*'))
            const total = (q.body as any[])
              .filter((r) => r.query_text.includes(tag))
              .reduce((sum, r) => sum + r.total_calls, 0)
            return total !== marker.runs ? total : undefined
          },
          { timeoutMs: 30_000 },
        )
        expect(calls).toBe(marker.runs + 5)
        const list = await request(serve.base, 'GET', '/api/v1/databases', { token })
        expect(list.body.map((d: any) => d.id)).toEqual([fixture.database_id])
      } finally {
        await agent.stop()
      }
    }, 60_000)

    test('the previous release refuses the upgraded store with one line and changes nothing', async () => {
      await serve.stop()
      const binary = await previousRelease()
      if (typeof binary !== 'string') {
        console.warn(`skipped: ${binary.skip}`)
        return
      }
      const before = await storeContent()
      const files = readdirSync(dataDir).sort()
      const run = await runCommand([binary, 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
        env: serveEnv(),
        timeoutMs: 20_000,
      })
      expect(run.exitCode).toBe(1)
      const lines = run.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(
        `the store's schema is version ${latestVersion}, but this dbm knows versions up to 16: upgrade dbm`,
      )
      expect(await storeContent()).toBe(before)
      expect(readdirSync(dataDir).sort()).toEqual(files)
    }, 120_000)

    test('the current code refuses a store whose schema is ahead of it, and changes nothing', async () => {
      await execute(
        `INSERT INTO schema_migrations (version, name, applied_at) VALUES (${latestVersion + 1}, 'a later release', 0)`,
      )
      const before = await storeContent()
      const run = await runCommand([...source, 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
        env: serveEnv(),
        timeoutMs: 20_000,
      })
      expect(run.exitCode).toBe(1)
      const lines = run.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(
        `the store's schema is version ${latestVersion + 1}, but this dbm knows versions up to ${latestVersion}: upgrade dbm`,
      )
      expect(await storeContent()).toBe(before)
    }, 60_000)

    async function execute(statement: string) {
      if (kind === 'sqlite') {
        const { Database } = await import('bun:sqlite')
        const db = new Database(join(dataDir, 'dbm.sqlite'))
        db.exec(statement)
        db.close()
        return
      }
      const sql = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
      await sql.unsafe(statement)
      await sql.end()
    }

    /** Every row of every table, hashed (PostgreSQL: row counts and the migrations, which is what a refusal could touch). */
    async function storeContent(): Promise<string> {
      if (kind === 'sqlite') return sqliteContent(join(dataDir, 'dbm.sqlite'))
      const sql = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
      try {
        const tables = await sql<
          { name: string }[]
        >`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`
        const parts: string[] = []
        for (const { name } of tables) {
          const rows = await sql.unsafe(
            `SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) AS h, count(*) AS n FROM "${name}" t`,
          )
          parts.push(`${name}:${rows[0]!.n}:${rows[0]!.h}`)
        }
        const columns =
          await sql`SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2`
        return JSON.stringify([parts, columns])
      } finally {
        await sql.end()
      }
    }
  })
}
