// Secrets in utility statements never reach the server: on real PostgreSQL with pg_stat_statements, the
// review's statements (ALTER SYSTEM SET of a secret-named setting, CREATE ROLE and ALTER ROLE with a
// password) and a user mapping's password go through the real agent (query_stats) to the real API, and
// GET /queries shows them masked.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { DatabaseConfig } from '../../src/agent/config.ts'
import { PostgresRunner, defaultTimings } from '../../src/agent/postgres-runner.ts'
import { Shipper } from '../../src/agent/shipper.ts'
import { stateFileName } from '../../src/agent/state.ts'
import { createLogger } from '../../src/shared/log.ts'
import { postgresMajors, sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

let server: TestServer
let account: Account
let key: string
const dir = mkdtempSync(join(tmpdir(), 'dbm-secret-statements-'))

beforeAll(async () => {
  server = await startTestServer('sqlite')
  ;({ account, key } = await agentAccount(server))
})

afterAll(async () => {
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const timings = { ...defaultTimings, pingIntervalMs: 60_000, collectorDeadlineMs: 20_000, connectTimeoutS: 5 }

describe.each([...postgresMajors])('PostgreSQL %d', (major) => {
  test('role passwords, a secret setting and a user mapping reach GET /queries masked', async () => {
    const pg = await sharedPostgres(major)
    const dsn = await statementsDatabase(pg, 1)
    const sql = postgres(dsn, { max: 1, onnotice: () => {} })
    const name = `secrets-${major}`
    const role = `dbm_secret_role_${major}`
    const log = createLogger('error', () => {})
    const shipper = new Shipper({
      endpoint: server.base,
      apiKey: key,
      databaseName: name,
      bufferDir: dir,
      retryIntervalMs: 60_000,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 15_000,
      log,
    })
    const config: DatabaseConfig = {
      name,
      engine: 'postgres',
      dsn,
      pollIntervalMs: 60_000,
      objectStatsIntervalMs: 0,
      enabledCollectors: ['query_stats'],
      tags: {},
    }
    const runner = new PostgresRunner(config, shipper, log, timings, join(dir, stateFileName(name)))
    try {
      await runner.cycle() // baseline
      // Simple-protocol statements, as psql sends them: pg_stat_statements keeps their literals.
      // The session's SET also makes the custom setting known, which ALTER SYSTEM needs before PostgreSQL 15.
      await sql.unsafe(`SET myapp.api_token = 'sk_live_SECRET0'`)
      await sql.unsafe(`ALTER SYSTEM SET myapp.api_token = 'sk_live_SECRET1'`)
      await sql.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'SECRET2''s'`)
      await sql.unsafe(`ALTER ROLE ${role} PASSWORD E'SECRET3\\'x'`)
      await sql.unsafe(`CREATE FOREIGN DATA WRAPPER dbm_fdw; CREATE SERVER dbm_remote FOREIGN DATA WRAPPER dbm_fdw`)
      await sql.unsafe(`CREATE USER MAPPING FOR ${role} SERVER dbm_remote OPTIONS (user 'remote', password 'SECRET4')`)
      const [seen] = await sql`SELECT count(*)::int AS n FROM pg_stat_statements WHERE query LIKE '%SECRET%'`
      // The view holds them verbatim (PostgreSQL 18 normalises SET and ALTER SYSTEM values itself).
      expect(seen!.n).toBeGreaterThanOrEqual(major >= 18 ? 3 : 5)
      await runner.cycle()

      const dbs = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as {
        id: string
        name: string
      }[]
      const db = dbs.find((d) => d.name === name)!
      const res = await server.call('GET', `/api/v1/databases/${db.id}/queries?limit=100`, { token: account.token })
      const texts = (res.body as { query_text: string }[]).map((r) => r.query_text)
      expect(JSON.stringify(res.body)).not.toContain('SECRET')
      const setValue = major >= 18 ? '$1' : `'***'`
      expect(texts).toContain(`SET myapp.api_token = ${setValue}`)
      expect(texts).toContain(`ALTER SYSTEM SET myapp.api_token = ${setValue}`)
      expect(texts).toContain(`CREATE ROLE ${role} LOGIN PASSWORD '***'`)
      expect(texts).toContain(`ALTER ROLE ${role} PASSWORD '***'`)
      expect(texts).toContain(`CREATE USER MAPPING FOR ${role} SERVER dbm_remote OPTIONS (user '***', password '***')`)
    } finally {
      await runner.stop()
      await sql
        .unsafe(
          `ALTER SYSTEM RESET myapp.api_token; DROP USER MAPPING IF EXISTS FOR ${role} SERVER dbm_remote; DROP SERVER IF EXISTS dbm_remote; DROP FOREIGN DATA WRAPPER IF EXISTS dbm_fdw; DROP ROLE IF EXISTS ${role}`,
        )
        .catch(() => {})
      await sql.end({ timeout: 1 })
    }
  }, 60_000)
})
