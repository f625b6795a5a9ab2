// Under `dbm local` (the serve's signup mode 'local', as src/local/main.ts starts it) agent_disconnected
// and database_unreachable tell its user what to do: give the database's DSN to dbm local, read its start
// lines, check the DSN and the role, restart it. Never `dbm agent --check`, a config file or an agent's
// health address, which a dbm local user does not have. The same states on a `dbm serve` keep the
// agent's advice.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const servers: Record<'local' | 'serve', { server: TestServer; key: string }> = {} as never

beforeAll(async () => {
  for (const mode of ['local', 'serve'] as const) {
    const server = await startTestServer('sqlite')
    server.freeze(true)
    servers[mode] = { server, key: (await agentAccount(server)).key }
    // dbm local makes its account itself (no signup), then serves with this mode (src/local/main.ts).
    if (mode === 'local') server.deps.signup = 'local'
  }
})
afterAll(async () => {
  for (const { server } of Object.values(servers)) await server?.stop()
})

/** Every text of a finding a user reads or pastes. */
const texts = (f: any) => [f.title, f.detail, f.recommendation, ...f.how_to_investigate, ...f.how_to_fix].join('\n')
const AGENT_ONLY = /dbm agent|config\.yaml|healthz|systemctl|kubectl/

async function findings(mode: 'local' | 'serve', id: string, rule: string) {
  const { server, key } = servers[mode]
  const res = await server.call('GET', `/api/v1/databases/${id}/doctor`, { apiKey: key })
  expect(res.status).toBe(200)
  return (res.body.top_issues as any[]).filter((f) => f.rule === rule)
}

async function ingest(mode: 'local' | 'serve', body: unknown): Promise<string> {
  const { server, key } = servers[mode]
  const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body })
  expect(res.status).toBe(200)
  return res.body.database_id
}

const down = (mode: 'local' | 'serve', name: string, since: number) => ({
  batch_id: crypto.randomUUID(),
  collected_at: servers[mode].server.deps.clock(),
  interval_seconds: 10,
  agent_version: 'test',
  database: { name, engine: 'postgres', host: 'localhost', port: 5432 },
  availability: {
    state: 'down',
    since,
    cause: 'authentication',
    message: 'password authentication failed for user "me"',
  },
})

describe('dbm local', () => {
  test('a database with no data yet: start dbm local with its DSN, read its start line', async () => {
    const { server, key } = servers.local
    const res = await server.call('POST', '/api/v1/databases', {
      apiKey: key,
      body: { name: 'localhost:5432/app', engine: 'postgres', host: 'localhost', port: 5432 },
    })
    expect(res.status).toBe(201)
    const [f] = await findings('local', res.body.id, 'agent_disconnected')
    expect(f).toMatchObject({ severity: 'warning', title: 'No data from the agent yet' })
    expect(texts(f)).not.toMatch(AGENT_ONLY)
    expect(f.recommendation).toContain('dbm local watches the databases whose DSNs are on its command line')
    expect(f.how_to_fix).toEqual([
      'dbm local postgres://<user>@localhost:5432/app   # with the DSNs of the other databases you watch',
    ])
    expect(f.how_to_investigate[0]).toStartWith('the lines dbm local printed at start')
  })

  test('a database of an earlier run, silent: restart dbm local with its DSN', async () => {
    const id = await ingest('local', pgBatch('db.internal:5432/orders', servers.local.server.deps.clock()))
    servers.local.server.advance(5 * 60_000)
    const [f] = await findings('local', id, 'agent_disconnected')
    expect(f).toMatchObject({ severity: 'critical', title: 'The agent has stopped sending data' })
    expect(texts(f)).not.toMatch(AGENT_ONLY)
    expect(f.recommendation).toContain("Restart dbm local (Ctrl-C, then the command) with this database's DSN")
    expect(f.how_to_fix).toEqual([
      'dbm local postgres://<user>@db.internal:5432/orders   # with the DSNs of the other databases you watch',
    ])
  })

  test('unreachable: check the DSN and role given to dbm local; restart it once its agent is silent', async () => {
    const { server } = servers.local
    const id = await ingest('local', down('local', 'localhost:5432/shop', server.deps.clock()))
    let [f] = await findings('local', id, 'database_unreachable')
    expect(f).toMatchObject({ severity: 'critical', title: 'PostgreSQL is unreachable: authentication failed' })
    expect(texts(f)).not.toMatch(AGENT_ONLY)
    expect(f.recommendation).toContain("check the DSN's user and password")
    expect(f.recommendation).toContain(
      'The DSN and role are those given to dbm local on its command line (a password may come from PGPASSWORD or ~/.pgpass',
    )
    expect(f.how_to_investigate).toContain(
      'psql "<the DSN given to dbm local>" -c "SELECT 1"   # the same DSN, user and password (PGPASSWORD or ~/.pgpass)',
    )
    server.advance(5 * 60_000)
    ;[f] = await findings('local', id, 'database_unreachable')
    expect(f.title).toEndWith('(as last reported; the agent is silent)')
    expect(texts(f)).not.toMatch(AGENT_ONLY)
    expect(f.recommendation).toContain('restart dbm local (Ctrl-C, then the command)')
    // One finding for the outage: agent_disconnected stays quiet.
    expect(await findings('local', id, 'agent_disconnected')).toEqual([])
  })
})

describe('dbm serve', () => {
  test("the same states keep the agent operator's advice", async () => {
    const { server } = servers.serve
    const silent = await ingest('serve', pgBatch('orders', server.deps.clock()))
    const unreachable = await ingest('serve', down('serve', 'shop', server.deps.clock()))
    server.advance(5 * 60_000)
    const [disconnected] = await findings('serve', silent, 'agent_disconnected')
    expect(disconnected.how_to_investigate).toContain('dbm agent --check --config config.yaml')
    const [f] = await findings('serve', unreachable, 'database_unreachable')
    expect(f.how_to_investigate).toContain('dbm agent --check --config config.yaml')
    expect(f.recommendation).not.toContain('dbm local')
  })
})
