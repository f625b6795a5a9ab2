// POST /databases/{id}/actions without an agent (issue 26): a database holds at most 20 pending actions,
// the 21st is a 429 with the error body and Retry-After until the first expires, and room comes back once
// they expire; another database of the organization has its own. The audit of each (events timeline,
// kind session_action, and the server log) quotes hostile role and application names (bidi overrides,
// line and paragraph separators, C0 and C1 controls, tag characters) escaped, never as they are.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ACTION_TTL_MS } from '../../src/shared/action-kinds.ts'
import { HIDDEN_CHARACTERS } from '../../src/shared/invisible.ts'
import { pendingActionsPerDatabase } from '../../src/server/limits.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

let server: TestServer
let owner: Account
let key: string

beforeAll(async () => {
  server = await startTestServer('sqlite')
  ;({ account: owner, key } = await agentAccount(server))
})
afterAll(async () => {
  await server?.stop()
})

async function database(name: string): Promise<string> {
  const res = await server.call('POST', '/api/v1/databases', { apiKey: key, body: { name, engine: 'postgres', host: 'h' } })
  expect(res.status).toBe(201)
  return res.body.id
}

const session = (pid: number, user: string, application: string) => ({ pid, backend_start: '2026-11-01T10:00:00Z', user, application_name: application })
const cancel = (id: string, body: unknown) => server.call('POST', `/api/v1/databases/${id}/actions`, { token: owner.token, body })

/** Every character a title must not carry as it is. */
const UNSAFE = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'u')

describe('pending actions per database', () => {
  test(`at most ${pendingActionsPerDatabase} wait for the agent: one more is a 429 with the error body, until they expire`, async () => {
    server.freeze(true)
    try {
      const id = await database('capped')
      for (let i = 0; i < pendingActionsPerDatabase; i++) expect((await cancel(id, { kind: 'cancel', session: session(100 + i, 'app', 'worker') })).status).toBe(202)
      const refused = await cancel(id, { kind: 'cancel', session: session(999, 'app', 'worker') })
      expect(refused.status).toBe(429)
      expect(Object.keys(refused.body)).toEqual(['error'])
      expect(refused.body.error).toStartWith(`${pendingActionsPerDatabase} actions already wait for this database's agent, at most ${pendingActionsPerDatabase} may`)
      expect(refused.body.error).toEndWith(`; try again in ${ACTION_TTL_MS / 1000} s`)
      expect(refused.headers.get('retry-after')).toBe(String(ACTION_TTL_MS / 1000))
      // An explain waits in the same queue.
      expect((await server.call('POST', `/api/v1/databases/${id}/actions`, { token: owner.token, body: { kind: 'explain', query_hash: '42' } })).status).toBe(429)
      // Nothing stored for the refused ones.
      const listed = await server.call('GET', `/api/v1/databases/${id}/actions`, { token: owner.token })
      expect(listed.body.actions).toHaveLength(pendingActionsPerDatabase)
      // Another database of the organization has its own room.
      expect((await cancel(await database('other'), { kind: 'cancel', session: session(7, 'app', 'worker') })).status).toBe(202)
      // Once expired (no agent took them), there is room again.
      server.advance(ACTION_TTL_MS)
      expect((await cancel(id, { kind: 'cancel', session: session(999, 'app', 'worker') })).status).toBe(202)
    } finally {
      server.freeze(false)
    }
  })
})

describe('the audit of an action', () => {
  test("a kill whose result came after its expiry is audited as run late, never as run", async () => {
    server.freeze(true)
    try {
      const id = await database('late')
      const asked = await cancel(id, { kind: 'cancel', session: session(31, 'app', 'worker') })
      const poll = await server.call('GET', '/api/v1/agent/actions?database=late&wait=0&allow=cancel', { apiKey: key })
      expect(poll.body.actions.map((a: { id: string }) => a.id)).toEqual([asked.body.id])
      server.advance(ACTION_TTL_MS + 2_000)
      const posted = await server.call('POST', `/api/v1/agent/actions/${asked.body.id}`, { apiKey: key, body: { outcome: 'done', signalled: true } })
      expect(posted.status).toBe(204)
      const read = await server.call('GET', `/api/v1/databases/${id}/actions/${asked.body.id}`, { token: owner.token })
      expect(read.body).toMatchObject({ state: 'expired', agent_outcome: 'done', late_by_ms: 2_000, signalled: true })
      server.advance(1) // the events window ends before now
      const events = await server.call('GET', `/api/v1/databases/${id}/events?since=2020-01-01T00:00:00Z`, { token: owner.token })
      const titles = (events.body as any[]).filter((e) => e.kind === 'session_action').map((e) => [e.severity, e.title])
      expect(titles).toContainEqual(['warning', `Cancel of pid 31 (role "app", application "worker") ran late: its result came 2.0 s after it expired, the backend was signalled (asked by ${owner.email})`])
      expect(titles.some(([, t]) => t.includes(' run: '))).toBe(false)
    } finally {
      server.freeze(false)
    }
  })

  test('quotes hostile role and application names escaped, in the events timeline and in the log', async () => {
    const id = await database('hostile')
    const application = 'psql\u202e\u2066evil\u2069\u2028line\nbreak\u0085\u001b[31mred\u{e0041}'
    const role = 'ops\u200b\u202d\r'
    const asked = await cancel(id, { kind: 'cancel', session: session(4242, role, application) })
    expect(asked.status).toBe(202)
    // The action itself keeps the names as sent (the agent matches the session by them).
    expect(asked.body.session).toMatchObject({ user: role, application_name: application })
    const events = await server.call('GET', `/api/v1/databases/${id}/events`, { token: owner.token })
    const audit = (events.body as any[]).filter((e) => e.kind === 'session_action')
    expect(audit).toHaveLength(1)
    const title = audit[0].title as string
    expect(UNSAFE.test(title)).toBe(false)
    expect(title).toBe(
      'Cancel of pid 4242 (role "ops\\u200b\\u202d\\r", application "psql\\u202e\\u2066evil\\u2069\\u2028line\\nbreak\\u0085\\u001b[31mred\\udb40\\udc41") ' +
        `asked by ${owner.email}`,
    )
    // The log line: one line, its fields escaped once more by the logger.
    const line = server.logs.find((l) => l.includes(' INFO session action ') && l.includes(asked.body.id))
    expect(line).toBeDefined()
    expect(UNSAFE.test(line!)).toBe(false)
    expect(line).toContain('state=pending')
  })
})
