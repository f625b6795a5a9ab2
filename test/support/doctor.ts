// What the doctor's rule tests share: a real database (a fresh one on the shared PostgreSQL of a major,
// or a ClickHouse rig), a test server with a verified account, and the real agent in this process
// watching that database with its cycles driven by the test (the poll interval is an hour, so only
// cycle() runs one). A test puts the database into a state, runs cycles, and reads the doctor through
// the API; then cures the state and sees the finding go.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import type { Deps } from '../../src/server/context.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type ClickHouseRig, startClickHouse } from './clickhouse.ts'
import { type PostgresServer, sharedPostgres } from './postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from './server.ts'
import { until } from './wait.ts'

export interface DoctorRig {
  server: TestServer
  account: Account
  agent: Agent
  /** The registered database's id (known after the first cycle). */
  dbId: string
  /** Runs one agent cycle of the database; its batch has been ingested when this resolves. */
  cycle(): Promise<void>
  /** GET /api/v1/databases/{id}{path} with the account's API key (200 expected). */
  api(path: string): Promise<any>
  /** The doctor's findings of one rule. */
  findings(rule: string): Promise<any[]>
  stop(): Promise<void>
}

export interface PostgresDoctorRig extends DoctorRig {
  pg: PostgresServer
  /** DSN of the fresh database (superuser). */
  dsn: string
  /** A superuser connection to the fresh database (closed by stop()). */
  sql: postgres.Sql
}

export interface ClickHouseDoctorRig extends DoctorRig {
  ch: ClickHouseRig
}

export interface RigOptions {
  /** Rule thresholds replaced for this server (by rule id), e.g. to make a long-running query of seconds count. */
  thresholds?: Deps['doctorThresholds']
  /** Extra lines of the agent config's database entry (e.g. `    enabled_collectors: [activity]`). */
  entry?: string
}

/** The real agent watching `dsn` (cycles driven by the test) and pushing to a test server of its own. */
export async function watchDatabase(dsn: string, options: RigOptions = {}): Promise<DoctorRig> {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-doctor-'))
  const server = await startTestServer('sqlite', { doctorThresholds: options.thresholds })
  const { account, key } = await agentAccount(server)
  // Registered first with an hour's poll interval, so the server's settings never schedule a cycle of their own.
  const created = await server.call('POST', '/api/v1/databases', {
    token: account.token,
    body: { name: 'target', engine: dsn.startsWith('postgres') ? 'postgres' : 'clickhouse', host: '127.0.0.1' },
  })
  if (created.status !== 201) throw new Error(`register: ${created.status} ${JSON.stringify(created.body)}`)
  await server.call('PATCH', `/api/v1/databases/${created.body.id}`, {
    token: account.token,
    body: { poll_interval_seconds: 3600 },
  })
  const config = join(dir, 'config.yaml')
  writeFileSync(
    config,
    `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: target\n    dsn: ${dsn}\n    poll_interval: 1h\n${options.entry ?? ''}`,
  )
  const agent = new Agent({
    configPath: config,
    bufferDir: dir,
    log: createLogger('error', () => {}),
    timings: { pingIntervalMs: 60_000 },
  })
  await agent.start()
  const api = async (path: string) => {
    // With the API key, not the access token: tests move the server's clock past the token's life.
    const res = await server.call('GET', `/api/v1/databases/${rig.dbId}${path}`, { apiKey: key })
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body
  }
  const rig = {
    server,
    account,
    agent,
    dbId: created.body.id as string,
    cycle: () => agent.cycleAll(),
    api,
    async findings(rule: string) {
      return ((await api('/doctor')).top_issues as any[]).filter((f) => f.rule === rule)
    },
    async stop() {
      await agent.stop()
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  // The agent's first cycle runs on start; wait for its batch.
  await until('the first batch', async () => ((await api('')).last_seen_at ? true : undefined))
  return rig
}

/** A fresh database on the shared PostgreSQL `major` (pg_stat_statements preloaded), watched by the agent. */
export async function postgresDoctorRig(major = 17, options: RigOptions = {}): Promise<PostgresDoctorRig> {
  const pg = await sharedPostgres(major)
  const dsn = await pg.freshDatabase()
  const sql = postgres(dsn, { max: 2, onnotice: () => {} })
  await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
  const rig = await watchDatabase(dsn, options)
  return {
    ...rig,
    pg,
    dsn,
    sql,
    async stop() {
      await rig.stop()
      await sql.end({ timeout: 1 })
    },
  }
}

/** A ClickHouse rig (system log tables created) watched by the agent. */
export async function clickhouseDoctorRig(options: RigOptions = {}): Promise<ClickHouseDoctorRig> {
  const ch = await startClickHouse()
  const { createSystemLogTables } = await import('./clickhouse-system-tables.ts')
  await createSystemLogTables(ch)
  const rig = await watchDatabase(ch.dsn, options)
  return {
    ...rig,
    ch,
    async stop() {
      await rig.stop()
      await ch.stop()
    },
  }
}

/** Runs statements in a session of their own and makes it flush its statistics as it ends. */
export async function workload(dsn: string, run: (sql: postgres.Sql) => Promise<unknown>) {
  const sql = postgres(dsn, { max: 1, onnotice: () => {} })
  try {
    await run(sql)
    await sql`SELECT pg_stat_force_next_flush()`
  } finally {
    await sql.end({ timeout: 5 })
  }
}

/** Waits until `query` (one row, one value) on the rig's database returns `expected`. */
export async function settled(r: PostgresDoctorRig, what: string, query: string, expected: unknown) {
  let seen: unknown
  await until(what, async () => {
    const [row] = await r.sql.unsafe(query)
    seen = row ? Object.values(row)[0] : undefined
    return seen === expected ? true : undefined
  }).catch((e: Error) => {
    throw new Error(`${e.message}; last seen ${JSON.stringify(seen)}`)
  })
}
