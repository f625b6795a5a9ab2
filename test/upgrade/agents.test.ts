// Agents and servers one release apart, both ways, with exact counts. The previous release's agent: the
// batches v0.1.0's agent sent (captured by scripts/upgrade-fixtures.ts) go to the current server. The
// current agent: against the real v0.1.0 binary (built once into a cache, test/upgrade/fixtures.ts), and
// against a server older still that refuses unknown fields with a 400 (as builds before v0.1.0 did); and
// a server that drops its batches never leaves the agent's /healthz saying ok.
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { IngestBatch } from '../../src/shared/wire.ts'
import {
  FIRST_WIRE_VERSION,
  WIRE_ADDITIONS,
  WIRE_VERSION,
  WIRE_VERSION_HEADER,
  addedAfter,
  schemaPaths,
} from '../../src/shared/wire-contract.ts'
import { sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { request, startServe, stopAllServers } from '../support/process.ts'
import { agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'
import { batchesOf, expected, fixtureDir, previousRelease } from './fixtures.ts'

const root = mkdtempSync(join(tmpdir(), 'dbm-upgrade-agents-'))
afterAll(async () => {
  await stopAllServers()
  rmSync(root, { recursive: true, force: true })
})

const MARKERS = expected.sqlite.markers
const tagOf = (text: string) => text.slice(text.indexOf('/*'))

/** Each marker's calls over the last hour, summed over its rows, from a server's GET /queries. */
async function markerCalls(
  base: string,
  auth: { token?: string; apiKey?: string },
  dbId: string,
  since: number,
): Promise<number[]> {
  const window = `since=${encodeURIComponent(new Date(since).toISOString())}&until=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`
  const q = await request(base, 'GET', `/api/v1/databases/${dbId}/queries?${window}&limit=500`, auth)
  if (q.status !== 200) throw new Error(`queries: ${q.status} ${JSON.stringify(q.body)}`)
  return MARKERS.map((m) =>
    (q.body as any[]).filter((r) => r.query_text.includes(tagOf(m.text))).reduce((sum, r) => sum + r.total_calls, 0),
  )
}

/** The current agent in this process, watching a fresh database as `app`, pushing to `endpoint`. */
async function startAgent(endpoint: string, key: string) {
  const dsn = await statementsDatabase(await sharedPostgres())
  const dir = mkdtempSync(join(root, 'agent-'))
  writeFileSync(
    join(dir, 'config.yaml'),
    `api:\n  endpoint: ${endpoint}\n  key: ${key}\ndatabases:\n  - name: app\n    dsn: ${dsn}\n    poll_interval: 1s\n    object_stats_interval: 0s\n`,
  )
  const agent = new Agent({
    configPath: join(dir, 'config.yaml'),
    bufferDir: dir,
    log: createLogger('error', () => {}),
  })
  await agent.start()
  await until(
    'the baseline',
    async () => (agent.runner('app')?.status.collectors.query_stats?.startsWith('ok') ? true : undefined),
    { timeoutMs: 30_000 },
  )
  const runMarkers = async () => {
    const sql = postgres(dsn, { max: 1, onnotice: () => {} })
    for (const m of MARKERS) for (let i = 0; i < m.runs; i++) await sql.unsafe(m.text, [i + 1])
    await sql.end()
  }
  return { agent, runMarkers, database: () => agent.status().databases[0]! }
}

describe('the wire contract', () => {
  test("what this build added to v0.1.0's batch is exactly the lists of versions 2 to 4, and nothing was removed", () => {
    const previous = new Set<string>(JSON.parse(readFileSync(join(fixtureDir, 'wire-v0.1.0-paths.json'), 'utf8')))
    const current = schemaPaths(IngestBatch)
    const added = current.filter((p) => !previous.has(p))
    const listed = [...WIRE_ADDITIONS[2]!, ...WIRE_ADDITIONS[3]!, ...WIRE_ADDITIONS[4]!]
    const under = (p: string, top: string) => p === top || p.startsWith(`${top}.`) || p.startsWith(`${top}[]`)
    expect(added.filter((p) => !listed.some((top) => under(p, top)))).toEqual([])
    expect(listed.filter((top) => !added.includes(top))).toEqual([])
    expect([...previous].filter((p) => !current.includes(p))).toEqual([])
    expect(WIRE_VERSION).toBe(4)
    expect(addedAfter(FIRST_WIRE_VERSION)).toEqual([...listed])
  })
})

describe("v0.1.0's agent against the current server", () => {
  test('its captured batches are all taken, the counts are exact, and a replay changes nothing', async () => {
    const server = await startTestServer('sqlite')
    try {
      const { account, key } = await agentAccount(server)
      const batches = batchesOf('batches-v0.1.0.json')
      expect(batches.map((b) => b.status)).toEqual(batches.map(() => 200))
      // Moved to the last minutes (the fixture's day may be past any retention), spacing kept.
      const shift = Date.now() - 5_000 - Math.max(...batches.map((b) => b.body.collected_at))
      const bodies = batches.map((b) => ({ ...b.body, collected_at: b.body.collected_at + shift }))
      const since = Math.min(...bodies.map((b) => b.collected_at)) - 60_000
      for (const body of bodies) {
        const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body })
        expect({ status: res.status, duplicate: res.body.duplicate }).toEqual({ status: 200, duplicate: false })
        expect(res.headers.get(WIRE_VERSION_HEADER)).toBe(String(WIRE_VERSION))
      }
      const dbId = (await server.call('GET', '/api/v1/databases', { token: account.token })).body[0].id
      expect(await markerCalls(server.base, { token: account.token }, dbId, since)).toEqual(MARKERS.map((m) => m.runs))
      for (const body of bodies)
        expect((await server.call('POST', '/api/v1/ingest', { apiKey: key, body })).body.duplicate).toBe(true)
      expect(await markerCalls(server.base, { token: account.token }, dbId, since)).toEqual(MARKERS.map((m) => m.runs))
    } finally {
      await server.stop()
    }
  }, 30_000)
})

describe('the current agent against older servers', () => {
  test('the real v0.1.0 binary: every batch taken, the counts exact, new fields left out and counted', async () => {
    const binary = await previousRelease()
    if (typeof binary !== 'string') {
      console.warn(`skipped: ${binary.skip}`)
      return
    }
    const serve = await startServe([binary], { dataDir: mkdtempSync(join(root, 'v010-')) })
    const owner = {
      email: 'agent-owner@example.com',
      password: 'upgrade correct horse battery',
      name: 'A',
      org_name: 'Agents',
    }
    const signup = await request(serve.base, 'POST', '/api/v1/auth/signup', { body: owner })
    const key = (
      await request(serve.base, 'POST', '/api/v1/api-keys', {
        token: signup.body.access_token,
        body: { name: 'agent', scopes: ['ingest'] },
      })
    ).body.key
    const since = Date.now() - 60_000
    const { agent, runMarkers, database } = await startAgent(serve.base, key)
    try {
      await runMarkers()
      const dbId = await until(
        'the database',
        async () =>
          (await request(serve.base, 'GET', '/api/v1/databases', { token: signup.body.access_token })).body[0]?.id as
            | string
            | undefined,
      )
      const wanted = MARKERS.map((m) => m.runs)
      await until(
        'the exact calls',
        async () => {
          const calls = await markerCalls(serve.base, { token: signup.body.access_token }, dbId, since)
          return calls.every((c, i) => c >= wanted[i]!) ? calls : undefined
        },
        { timeoutMs: 30_000 },
      )
      expect(await markerCalls(serve.base, { token: signup.body.access_token }, dbId, since)).toEqual(wanted)
      const db = database()
      expect({
        dropped: db.dropped_batches,
        lost: db.lost_batches,
        retries: db.unknown_field_retries,
        wire: db.server_wire_version,
      }).toEqual({ dropped: 0, lost: 0, retries: 0, wire: 1 })
      expect(db.left_out.fields).toContain('tables[].heap_bytes')
      expect(db.left_out.values).toBeGreaterThan(0)
      expect(agent.status().status).toBe('ok')
    } finally {
      await agent.stop()
      await serve.stop()
    }
  }, 90_000)

  test('a server that refuses unknown fields with a 400 (builds before v0.1.0): retried without them, nothing dropped', async () => {
    const server = await startTestServer('sqlite')
    const { account, key } = await agentAccount(server)
    const refused: string[] = []
    // In front of the current server: no version announced, and a 400 naming the first field v0.1.0 lacks.
    const strict = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      async fetch(req) {
        const url = new URL(req.url)
        if (url.pathname !== '/api/v1/ingest')
          return fetch(server.base + url.pathname + url.search, { headers: req.headers })
        const body = await req.text()
        const batch = JSON.parse(body)
        const unknown = addedAfter(FIRST_WIRE_VERSION).find((path) => holds(batch, path))
        if (unknown) {
          refused.push(unknown)
          return Response.json({ error: `unknown field: ${unknown}` }, { status: 400 })
        }
        const res = await fetch(server.base + new URL(req.url).pathname, { method: 'POST', headers: req.headers, body })
        return new Response(await res.text(), { status: res.status, headers: { 'content-type': 'application/json' } })
      },
    })
    const since = Date.now() - 60_000
    const { agent, runMarkers, database } = await startAgent(`http://127.0.0.1:${strict.port}`, key)
    try {
      await runMarkers()
      const dbId = await until(
        'the database',
        async () =>
          (await server.call('GET', '/api/v1/databases', { token: account.token })).body[0]?.id as string | undefined,
      )
      const wanted = MARKERS.map((m) => m.runs)
      await until(
        'the exact calls',
        async () => {
          const calls = await markerCalls(server.base, { token: account.token }, dbId, since)
          return calls.every((c, i) => c >= wanted[i]!) ? calls : undefined
        },
        { timeoutMs: 30_000 },
      )
      expect(await markerCalls(server.base, { token: account.token }, dbId, since)).toEqual(wanted)
      const db = database()
      expect(refused.length).toBeGreaterThan(0)
      expect({ dropped: db.dropped_batches, retries: db.unknown_field_retries, wire: db.server_wire_version }).toEqual({
        dropped: 0,
        retries: refused.length,
        wire: 1,
      })
      expect(agent.status().status).toBe('ok')
    } finally {
      await agent.stop()
      strict.stop(true)
      await server.stop()
    }
  }, 60_000)

  test("a server that drops every batch leaves the agent's /healthz degraded, naming the drops", async () => {
    const refusing = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: (req) =>
        new URL(req.url).pathname === '/api/v1/ingest'
          ? Response.json({ error: 'invalid batch: collected_at' }, { status: 400 })
          : Response.json({ error: 'not found' }, { status: 404 }),
    })
    const { agent, database } = await startAgent(
      `http://127.0.0.1:${refusing.port}`,
      'dbm_ak_0123456789abcdef_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',
    )
    try {
      await until('a dropped batch', async () => (database().dropped_batches > 0 ? true : undefined), {
        timeoutMs: 20_000,
      })
      const health = agent.status()
      expect(health.status).toBe('degraded')
      expect(
        health.reasons.some(
          (r) =>
            r.startsWith('app: the API refused batches as malformed and they were dropped') &&
            r.includes('HTTP 400: invalid batch: collected_at'),
        ),
      ).toBe(true)
    } finally {
      await agent.stop()
      refusing.stop(true)
    }
  }, 30_000)
})

/** Whether `batch` has a value at `path` (`a.b`, `a[].b`: in any item). */
function holds(value: unknown, path: string): boolean {
  const [head, ...rest] = path.replaceAll('[]', '.[]').split('.')
  if (head === undefined) return value !== undefined
  if (head === '[]') return Array.isArray(value) && value.some((item) => holds(item, rest.join('.')))
  if (typeof value !== 'object' || value === null || !(head in value)) return false
  return rest.length === 0 || holds((value as Record<string, unknown>)[head], rest.join('.'))
}
