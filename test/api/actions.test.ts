// POST /databases/{id}/actions without an agent (issue 26): a database holds at most 10 pending kills
// and 10 pending explains, apart; one more of either is a 429 with the error body and Retry-After until
// the first expires, and room comes back once they expire; another database of the organization has its
// own. Kills and explains have rate buckets of their own, per requester and per database, in the store
// (they hold for another serve process on the same store); a flood of explains leaves kills alone, and a
// requester's refused excess does not use up the database's room. The audit of each (events timeline,
// kind session_action, and the server log) quotes hostile role and application names (bidi overrides,
// line and paragraph separators, C0 and C1 controls, tag characters) escaped, never as they are.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ACTION_TTL_MS } from '../../src/shared/action-kinds.ts'
import { HIDDEN_CHARACTERS } from '../../src/shared/invisible.ts'
import {
  actionLimits,
  agentActionPolls,
  explainParameterLimits,
  pendingActionsPerDatabase,
} from '../../src/server/limits.ts'
import { until } from '../support/wait.ts'
import {
  type Account,
  type TestServer,
  agentAccount,
  createApiKey,
  freshStoreLocation,
  startTestServer,
} from '../support/server.ts'

let server: TestServer
let owner: Account
let key: string
let location: Awaited<ReturnType<typeof freshStoreLocation>>

beforeAll(async () => {
  location = await freshStoreLocation('sqlite')
  server = await startTestServer('sqlite', { dataDir: location.dataDir })
  ;({ account: owner, key } = await agentAccount(server))
})
afterAll(async () => {
  await server?.stop()
  location?.cleanup()
})

async function database(name: string): Promise<string> {
  const res = await server.call('POST', '/api/v1/databases', {
    apiKey: key,
    body: { name, engine: 'postgres', host: 'h' },
  })
  expect(res.status).toBe(201)
  return res.body.id
}

const session = (pid: number, user: string, application: string) => ({
  pid,
  backend_start: '2026-11-01T10:00:00Z',
  user,
  application_name: application,
})
const cancel = (id: string, body: unknown) =>
  server.call('POST', `/api/v1/databases/${id}/actions`, { token: owner.token, body })
const explainAs = (id: string, as: { token?: string; apiKey?: string }, hash = '42') =>
  server.call('POST', `/api/v1/databases/${id}/actions`, { ...as, body: { kind: 'explain', query_hash: hash } })

/** Every character a title must not carry as it is. */
const UNSAFE = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'u')

const KILLS = pendingActionsPerDatabase.kill
const EXPLAINS = pendingActionsPerDatabase.explain

describe('pending actions per database', () => {
  test(`at most ${KILLS} kills and ${EXPLAINS} explains wait for the agent, apart: one more is a 429 with the error body, until they expire`, async () => {
    server.freeze(true)
    try {
      const id = await database('capped')
      for (let i = 0; i < KILLS; i++)
        expect((await cancel(id, { kind: 'cancel', session: session(100 + i, 'app', 'worker') })).status).toBe(202)
      // Past the rate window, still before the expiry: the pending cap is what refuses.
      server.advance(actionLimits.windowMs + 1_000)
      const refused = await cancel(id, { kind: 'cancel', session: session(999, 'app', 'worker') })
      expect(refused.status).toBe(429)
      expect(Object.keys(refused.body)).toEqual(['error'])
      expect(refused.body.error).toStartWith(
        `${KILLS} cancels and terminates already wait for this database's agent, at most ${KILLS} may`,
      )
      const left = (ACTION_TTL_MS - actionLimits.windowMs - 1_000) / 1000
      expect(refused.body.error).toEndWith(`; try again in ${left} s`)
      expect(refused.headers.get('retry-after')).toBe(String(left))
      // Explains wait in a queue of their own: the kills leave them room, and they leave kills none of theirs.
      for (let i = 0; i < EXPLAINS; i++)
        expect((await explainAs(id, { token: owner.token }, String(i))).status).toBe(202)
      const eleventh = await explainAs(id, { token: owner.token })
      expect(eleventh.status).toBe(429)
      expect(eleventh.body.error).toStartWith(
        `${EXPLAINS} explains already wait for this database's agent, at most ${EXPLAINS} may`,
      )
      // Nothing stored for the refused ones.
      const listed = await server.call('GET', `/api/v1/databases/${id}/actions`, { token: owner.token })
      expect(listed.body.actions).toHaveLength(KILLS + EXPLAINS)
      // Another database of the organization has its own room.
      expect(
        (await cancel(await database('other'), { kind: 'cancel', session: session(7, 'app', 'worker') })).status,
      ).toBe(202)
      // Once expired (no agent took them), there is room again.
      server.advance(ACTION_TTL_MS)
      expect((await cancel(id, { kind: 'cancel', session: session(999, 'app', 'worker') })).status).toBe(202)
    } finally {
      server.freeze(false)
    }
  })
})

describe('rate buckets', () => {
  test("explains and kills apart, per requester and per database; refused excess uses no one else's room; held in the store", async () => {
    server.freeze(true)
    server.advance(actionLimits.windowMs) // the other tests' asks out of the owner's window
    try {
      const id = await database('flooded')
      const { explain, kill } = actionLimits
      // Taken as the agent would, so that the pending cap stays out of the way.
      const take = () =>
        server.call('GET', '/api/v1/agent/actions?database=flooded&wait=0&allow=explain', { apiKey: key })
      // The owner floods explains: their own share, then 429s naming it.
      for (let i = 0; i < explain.perRequester; i++) {
        expect((await explainAs(id, { token: owner.token }, String(i))).status).toBe(202)
        await take()
      }
      for (let i = 0; i < 5; i++) {
        const refused = await explainAs(id, { token: owner.token })
        expect(refused.status).toBe(429)
        expect(refused.body.error).toStartWith(
          `you asked for ${explain.perRequester} explains in the last minute, the most one requester may; try again in `,
        )
      }
      // Kills have their own bucket: the flood of explains leaves a cancel its room.
      const cancelled = await cancel(id, { kind: 'cancel', session: session(5, 'app', 'worker') })
      expect(cancelled.status).toBe(202)
      // Another requester (an API key) has a share of their own; the owner's 5 refused ones took none of
      // the database's, so all of it is left up to the database's limit.
      const reader = (await createApiKey(server, owner, 'reader', ['read'])).key
      const room = explain.perDatabase - explain.perRequester
      for (let i = 0; i < Math.min(room, explain.perRequester); i++) {
        const asked = await explainAs(id, { apiKey: reader }, String(i))
        if (asked.status !== 202)
          throw new Error(`explain ${i} by the reader: ${asked.status} ${JSON.stringify(asked.body)}`)
        await take()
      }
      const third = (await createApiKey(server, owner, 'third', ['read'])).key
      const full = await explainAs(id, { apiKey: third })
      expect(full.status).toBe(429)
      expect(full.body.error).toStartWith(
        `${explain.perDatabase} explains were asked of this database in the last minute, the most it takes; try again in `,
      )
      // The owner's kills: their own share of the kill bucket, then a 429 naming it.
      for (let i = 1; i < kill.perRequester; i++) {
        const asked = await cancel(id, { kind: 'cancel', session: session(10 + i, 'app', 'worker') })
        if (asked.status !== 202) throw new Error(`cancel ${i}: ${asked.status} ${JSON.stringify(asked.body)}`)
      }
      const tooMany = await cancel(id, { kind: 'cancel', session: session(99, 'app', 'worker') })
      expect(tooMany.status).toBe(429)
      expect(tooMany.body.error).toStartWith(
        `you asked for ${kill.perRequester} cancels and terminates in the last minute, the most one requester may`,
      )
      // A restarted serve keeps the buckets: they are in the store (as they are for several serve
      // processes sharing one PostgreSQL store).
      const at = server.deps.clock()
      await server.stop()
      server = await startTestServer('sqlite', { dataDir: location.dataDir })
      server.freeze(true)
      server.advance(at - server.deps.clock())
      const there = await cancel(id, { kind: 'cancel', session: session(98, 'app', 'worker') })
      expect(there.status).toBe(429)
      expect(there.body.error).toStartWith(
        `you asked for ${kill.perRequester} cancels and terminates in the last minute`,
      )
      expect((await explainAs(id, { apiKey: third })).status).toBe(429)
    } finally {
      server.freeze(false)
    }
  })
})

describe('explain parameters', () => {
  test('bounded in number and in bytes: more is a 400 naming the limit', async () => {
    server.advance(actionLimits.windowMs)
    const id = await database('params')
    const ask = (parameters: unknown) =>
      server.call('POST', `/api/v1/databases/${id}/actions`, {
        token: owner.token,
        body: { kind: 'explain', query_hash: '7', parameters },
      })
    const many = await ask(Array.from({ length: explainParameterLimits.count + 1 }, () => '1'))
    expect(many.status).toBe(400)
    expect(many.body).toEqual({ error: 'parameters: at most 100 values' })
    // 5 values of 4,000 euro signs: 3 bytes each in UTF-8, 60,000 bytes in all.
    const big = await ask(Array.from({ length: 5 }, () => '€'.repeat(4_000)))
    expect(big.status).toBe(400)
    expect(big.body).toEqual({
      error: `parameters: 60000 bytes in all, at most ${explainParameterLimits.totalBytes} are taken`,
    })
    const long = await ask(['x'.repeat(16_385)])
    expect(long.status).toBe(400)
    expect(long.body).toEqual({ error: 'parameters: 16385 bytes in all, at most 16384 are taken' })
    // Exactly at the limits: taken.
    const at = await ask([
      ...Array.from({ length: 98 }, () => null),
      'a'.repeat(explainParameterLimits.totalBytes - 2),
      'é',
    ])
    expect(at.status).toBe(202)
    expect(at.body.parameters).toHaveLength(100)
  })
})

describe("the agent's long-poll", () => {
  test("what the agent allows is heard from the database's own key only; another key gets a 409 until that one is silent", async () => {
    server.advance(actionLimits.windowMs)
    const id = await database('bound')
    const poll = (apiKey: string, allow: string) =>
      server.call('GET', `/api/v1/agent/actions?database=bound&wait=0&allow=${allow}`, { apiKey })
    expect((await poll(key, 'explain')).status).toBe(200)
    const other = await createApiKey(server, owner, 'other agent', ['ingest'])
    const refused = await poll(other.key, 'cancel,terminate,explain')
    expect(refused.status).toBe(409)
    const prefix = (await server.call('GET', '/api/v1/api-keys', { token: owner.token })).body.find(
      (k: any) => k.name === 'agent',
    ).prefix
    expect(refused.body.error).toStartWith(
      `database "bound" takes actions from its own agent's key, ${prefix} ("agent"), heard `,
    )
    expect(refused.body.error).toEndWith(
      ' s ago; another key is heard once that one has been silent 120 s (stop its agent, or revoke it)',
    )
    const listed = await server.call('GET', `/api/v1/databases/${id}/actions`, { token: owner.token })
    expect(listed.body.allowed).toEqual(['explain'])
    // Nor may it post the result of an action the own key took.
    const asked = await explainAs(id, { token: owner.token })
    expect((await poll(key, 'explain')).body.actions.map((a: any) => a.id)).toEqual([asked.body.id])
    const forged = await server.call('POST', `/api/v1/agent/actions/${asked.body.id}`, {
      apiKey: other.key,
      body: { outcome: 'done', plan: {} },
    })
    expect(forged.status).toBe(409)
    expect(forged.body).toEqual({
      error: "only the database's own agent key, which was handed the action, may post its result",
    })
    expect(
      (
        await server.call('POST', `/api/v1/agent/actions/${asked.body.id}`, {
          apiKey: key,
          body: { outcome: 'refused', reason: 'no' },
        })
      ).status,
    ).toBe(204)
    // The own key silent for two minutes: the other one takes over.
    server.advance(120_001)
    expect((await poll(other.key, 'cancel,explain')).status).toBe(200)
    expect((await server.call('GET', `/api/v1/databases/${id}/actions`, { token: owner.token })).body.allowed).toEqual([
      'cancel',
      'explain',
    ])
    expect(server.logs.some((l) => l.includes('WARN actions: another agent key took the database over'))).toBe(true)
  })

  test(`at most ${agentActionPolls.perDatabase} wait at once per database: one more is a 429 at once`, async () => {
    await database('crowded')
    const path = '/api/v1/agent/actions?database=crowded&allow=explain'
    const aborts = [new AbortController(), new AbortController()]
    const waiting = aborts.map((c) =>
      fetch(`${server.base}${path}&wait=20`, { headers: { 'x-api-key': key }, signal: c.signal }).catch(
        () => undefined,
      ),
    )
    try {
      const third = await until('the third long-poll to be refused', async () => {
        const res = await server.call('GET', `${path}&wait=0`, { apiKey: key })
        return res.status === 429 ? res : undefined
      })
      expect(third.body).toEqual({
        error: `2 long-polls for actions already wait for database "crowded", at most 2 may (does another agent poll for it?); try again in 5 s`,
      })
      expect(third.headers.get('retry-after')).toBe('5')
    } finally {
      for (const c of aborts) c.abort()
      await Promise.all(waiting)
    }
    // Once they ended, there is room again.
    await until('a long-poll to be taken again', async () =>
      (await server.call('GET', `${path}&wait=0`, { apiKey: key })).status === 200 ? true : undefined,
    )
  })
})

describe('the audit of an action', () => {
  test('a kill whose result came after its expiry is audited as run late, never as run', async () => {
    server.freeze(true)
    server.advance(actionLimits.windowMs)
    try {
      const id = await database('late')
      const asked = await cancel(id, { kind: 'cancel', session: session(31, 'app', 'worker') })
      const poll = await server.call('GET', '/api/v1/agent/actions?database=late&wait=0&allow=cancel', { apiKey: key })
      expect(poll.body.actions.map((a: { id: string }) => a.id)).toEqual([asked.body.id])
      server.advance(ACTION_TTL_MS + 2_000)
      const posted = await server.call('POST', `/api/v1/agent/actions/${asked.body.id}`, {
        apiKey: key,
        body: { outcome: 'done', signalled: true },
      })
      expect(posted.status).toBe(204)
      const read = await server.call('GET', `/api/v1/databases/${id}/actions/${asked.body.id}`, { token: owner.token })
      expect(read.body).toMatchObject({ state: 'expired', agent_outcome: 'done', late_by_ms: 2_000, signalled: true })
      server.advance(1) // the events window ends before now
      const events = await server.call('GET', `/api/v1/databases/${id}/events?since=2020-01-01T00:00:00Z`, {
        token: owner.token,
      })
      const titles = (events.body as any[]).filter((e) => e.kind === 'session_action').map((e) => [e.severity, e.title])
      expect(titles).toContainEqual([
        'warning',
        `Cancel of pid 31 (role "app", application "worker") ran late: its result came 2.0 s after it expired, the backend was signalled (asked by ${owner.email})`,
      ])
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
