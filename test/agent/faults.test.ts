// Faults the agent must ride out: a database restart (it reconnects, notices the new server
// identity, restarts its baselines and keeps exact counts) and a hung database (a server that accepts
// connections and never answers), which must not delay another database's batches.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type PostgresServer, startPostgres, statementsDatabase } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, createApiKey, startTestServer } from '../support/server.ts'
import { waitForCycles } from '../support/agent.ts'
import { until } from '../support/wait.ts'

let pg: PostgresServer
let dsn: string
let server: TestServer
let account: Account
let key: string
const dirs: string[] = []

beforeAll(async () => {
  pg = await startPostgres(16, ['-c', 'shared_preload_libraries=pg_stat_statements'])
  dsn = await statementsDatabase(pg)
  server = await startTestServer('sqlite')
  ;({ account, key } = await agentAccount(server))
})

afterAll(async () => {
  await server?.stop()
  await pg?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function agentWith(databases: string, logs: string[]): Agent {
  return agentAt(databases, logs).agent
}

/** An agent and the path of its config file, which a test may edit and reload. */
function agentAt(databases: string, logs: string[], apiKey = key): { agent: Agent; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-faults-'))
  dirs.push(dir)
  const path = join(dir, 'config.yaml')
  writeFileSync(path, `api:\n  endpoint: ${server.base}\n  key: ${apiKey}\ndatabases:\n${databases}`)
  const agent = new Agent({
    configPath: path,
    bufferDir: dir,
    log: createLogger('debug', (l) => logs.push(l)),
    timings: { pingIntervalMs: 200, connectTimeoutS: 2, statementTimeoutMs: 1000, collectorDeadlineMs: 2000 },
  })
  return { agent, path }
}

async function calls(dbName: string, marker: string): Promise<number | undefined> {
  const dbs = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as any[]
  const db = dbs.find((d) => d.name === dbName)
  if (!db) return undefined
  const rows = (await server.call('GET', `/api/v1/databases/${db.id}/queries?limit=100`, { token: account.token }))
    .body as any[]
  return rows.find((r) => r.query_text.includes(marker))?.total_calls
}

async function registered(dbName: string): Promise<boolean> {
  const dbs = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as any[]
  return dbs.some((d) => d.name === dbName)
}

describe('agent faults', () => {
  test('a database restart is survived: reconnect, the same baseline, exact counts on both sides of it', async () => {
    const logs: string[] = []
    const agent = agentWith(`  - name: restarted\n    dsn: ${dsn}\n    poll_interval: 1s\n`, logs)
    await agent.start()
    try {
      // The first batch carries the baseline cycle: statements from here on count.
      await until('the first batch', async () => ((await registered('restarted')) ? true : undefined))
      let session = postgres(dsn, { max: 1, onnotice: () => {} })
      for (let i = 0; i < 11; i++) await session`SELECT id AS restart_marker FROM t WHERE id = ${i + 1}`
      await session.end()
      await until('11 calls before the restart', async () =>
        (await calls('restarted', 'restart_marker')) === 11 ? true : undefined,
      )

      await pg.restart()
      // Right after the restart, before the agent's next cycle: pg_stat_statements kept its counters
      // through the clean shutdown, and so does the agent's baseline.
      session = postgres(dsn, { max: 1, onnotice: () => {} })
      for (let i = 0; i < 6; i++) await session`SELECT id AS restart_marker FROM t WHERE id = ${i + 1}`
      await session.end()
      await until('the restart to be noticed', async () =>
        logs.some((l) => l.includes('the server restarted')) ? true : undefined,
      )
      await until('11 + 6 calls', async () => ((await calls('restarted', 'restart_marker')) === 17 ? true : undefined))
      await waitForCycles(agent, 'restarted', 2)
      expect(await calls('restarted', 'restart_marker')).toBe(17)
      expect(logs.join('\n')).not.toContain('changed identity')
    } finally {
      await agent.stop()
    }
  })

  test('config edits and a key rotation restart a database without losing a call', async () => {
    const logs: string[] = []
    const entry = (env: string) =>
      `  - name: edited\n    dsn: ${dsn}\n    poll_interval: 1s\n    tags: { env: ${env} }\n`
    const { agent, path } = agentAt(entry('a'), logs)
    const run = async (times: number) => {
      const session = postgres(dsn, { max: 1, onnotice: () => {} })
      for (let i = 0; i < times; i++) await session`SELECT id, 'edited' AS edited_marker FROM t WHERE id = ${i + 1}`
      await session.end()
    }
    await agent.start()
    try {
      await until('the first batch', async () => ((await registered('edited')) ? true : undefined))
      await run(5)
      // An edit of the entry's tags restarts its runner, which goes on from the baseline the old one saved.
      writeFileSync(path, `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n${entry('b')}`)
      await agent.reload()
      await waitForCycles(agent, 'edited', 1)
      await run(4)
      // A new API key restarts every runner the same way.
      const rotated = (await createApiKey(server, account, 'rotated')).key
      writeFileSync(path, `api:\n  endpoint: ${server.base}\n  key: ${rotated}\ndatabases:\n${entry('b')}`)
      await agent.reload()
      await waitForCycles(agent, 'edited', 1)
      await run(3)
      await until('5 + 4 + 3 calls', async () => ((await calls('edited', 'edited_marker')) === 12 ? true : undefined))
      await waitForCycles(agent, 'edited', 2)
      expect(await calls('edited', 'edited_marker')).toBe(12)
      expect(logs.filter((l) => l.includes('statistics go on from the saved baseline')).length).toBe(2)
    } finally {
      await agent.stop()
    }
  })

  test('a hung database does not delay another database', async () => {
    // Accepts TCP connections and never says a word: the PostgreSQL handshake hangs.
    const blackHole = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
    const logs: string[] = []
    const agent = agentWith(
      `  - name: hung\n    dsn: postgres://u:secret@127.0.0.1:${blackHole.port}/x\n    poll_interval: 1s\n` +
        `  - name: healthy\n    dsn: ${dsn}\n    poll_interval: 1s\n`,
      logs,
    )
    await agent.start()
    try {
      const healthy = await until('the healthy database to register', async () => {
        const dbs = (await server.call('GET', '/api/v1/databases', { token: account.token })).body as any[]
        return dbs.find((d) => d.name === 'healthy')
      })
      const batchesNow = async () =>
        Number(
          (await server.store.driver.get<{ n: number }>(
            'SELECT COUNT(*) AS n FROM ingest_batches WHERE database_id = $1',
            [healthy.id],
          ))!.n,
        )
      const before = await batchesNow()
      // Batches keep coming from the healthy database while the other hangs.
      await until('three more batches from the healthy database', async () =>
        (await batchesNow()) - before >= 3 ? true : undefined,
      )
      expect(agent.runner('hung')!.status.state).not.toBe('connected')
      expect(logs.join('\n')).not.toContain('secret')
    } finally {
      await agent.stop()
      blackHole.stop(true)
    }
  })
})
