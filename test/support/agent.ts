// The real agent in this process watching one database (polled every second, a PostgreSQL one's tables
// and indexes too: object_stats_interval 0s) and pushing to a test server of its own with a verified
// account: what the agent's end-to-end tests share. The tests read the results back through the API,
// and wait on the agent's cycles rather than on the clock.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Agent, type AgentOptions } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from './server.ts'
import { until } from './wait.ts'

export interface AgentRig {
  server: TestServer
  account: Account
  agent: Agent
  /** The database's id, once the agent has registered it. */
  dbId: string
  /** GET /api/v1/databases/{dbId}{path} with the account's token (200 expected). */
  api(path: string): Promise<any>
  /** Stops the agent, then the server. */
  stop(): Promise<void>
}

/**
 * Starts a server and the agent with `dsn` under `name` (config and buffer in `dir`; `entry`: more YAML
 * lines of the database's entry, indented by four spaces) and waits until the database registers.
 */
export async function startAgentRig(
  dsn: string,
  name: string,
  dir: string,
  timings?: AgentOptions['timings'],
  entry = '',
): Promise<AgentRig> {
  const server = await startTestServer('sqlite')
  const { account, key } = await agentAccount(server)
  const config = join(dir, 'config.yaml')
  writeFileSync(
    config,
    `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: ${name}\n    dsn: ${dsn}\n    poll_interval: 1s\n${/^postgres(ql)?:/.test(dsn) ? '    object_stats_interval: 0s\n' : ''}${entry}`,
  )
  const agent = new Agent({ configPath: config, bufferDir: dir, log: createLogger('error', () => {}), timings })
  await agent.start()
  const dbId = await until('the database to register', async () => {
    const list = await server.call('GET', '/api/v1/databases', { token: account.token })
    return (list.body as any[]).find((d) => d.name === name)?.id as string | undefined
  })
  return {
    server,
    account,
    agent,
    dbId,
    async api(path) {
      const res = await server.call('GET', `/api/v1/databases/${dbId}${path}`, { token: account.token })
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body
    },
    async stop() {
      await agent.stop()
      await server.stop()
    },
  }
}

/**
 * Waits until `count` cycles of the runner of `name` that began after this call have finished: their
 * batches are delivered (or buffered, with the API down). A cycle's start is its last_cycle_at; the next
 * start means the one before has ended, so `count` + 1 new starts are waited for. A start missed between
 * two looks only makes the wait longer.
 */
export async function waitForCycles(agent: Agent, name: string, count: number, timeoutMs = 20_000): Promise<void> {
  const before = agent.runner(name)?.status.last_cycle_at
  const starts = new Set<string>()
  await until(
    `${count} more cycles of ${name}`,
    async () => {
      const at = agent.runner(name)?.status.last_cycle_at
      if (at && at !== before) starts.add(at)
      return starts.size > count ? true : undefined
    },
    { everyMs: 20, timeoutMs },
  )
}

/**
 * Waits until the runner of `name` has taken its query_stats baseline: statements run from then on are
 * counted in a later cycle's deltas.
 */
export async function waitForBaseline(agent: Agent, name: string): Promise<void> {
  await until(
    `the query_stats baseline of ${name}`,
    async () => (agent.runner(name)?.status.collectors.query_stats?.startsWith('ok') ? true : undefined),
    {
      everyMs: 20,
    },
  )
}
