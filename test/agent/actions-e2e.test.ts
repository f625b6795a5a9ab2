// The dashboard's actions end to end: a real PostgreSQL 17, the real agent (allow_actions: cancel and
// explain, not terminate) and a real server. A pg_sleep session cancelled through the API (its exact pid
// goes idle), a reused pid left alone, terminate refused for a member (403) and by the agent's config,
// explain with a bound parameter, an untrusted role's statement refused, expiry, and another
// organization's 404s.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { ActionPoller } from '../../src/agent/actions.ts'
import type { DatabaseConfig } from '../../src/agent/config.ts'
import { ACTION_TTL_MS } from '../../src/shared/action-kinds.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type PostgresServer, sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { type Account, agentAccount, signup, uniqueIp } from '../support/server.ts'
import { until } from '../support/wait.ts'

let pg: PostgresServer
let dsn: string
let dir: string
let rig: AgentRig
let admin: postgres.Sql

beforeAll(async () => {
  pg = await sharedPostgres(17)
  dsn = await statementsDatabase(pg, 1000)
  admin = postgres(dsn, { max: 2, onnotice: () => {} })
  dir = mkdtempSync(join(tmpdir(), 'dbm-actions-'))
  rig = await startAgentRig(
    dsn,
    'actions',
    dir,
    { actionWaitSeconds: 5 } as never,
    '    allow_actions: [cancel, explain]\n',
  )
}, 60_000)

afterAll(async () => {
  await rig?.stop()
  await admin?.end({ timeout: 0 })
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const owner = () => rig.account

function ask(body: unknown, account: Account = owner(), id = rig.dbId) {
  return rig.server.call('POST', `/api/v1/databases/${id}/actions`, { token: account.token, body })
}

/** The action once it left pending and running. */
function settled(aid: string, account: Account = owner()) {
  return until(`action ${aid} to settle`, async () => {
    const res = await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/actions/${aid}`, { token: account.token })
    expect(res.status).toBe(200)
    return res.body.state === 'pending' || res.body.state === 'running' ? undefined : res.body
  })
}

/** A session sleeping in pg_sleep under application `app`, and its row as the agent reported it on /active. */
async function sleeper(app: string) {
  const conn = postgres(dsn, { max: 1, onnotice: () => {}, connection: { application_name: app } })
  const running = conn`SELECT pg_sleep(60)`.then(
    () => 'finished',
    (e) => (e as { code?: string }).code ?? 'error',
  )
  const session = await until(`the agent to report ${app}`, async () => {
    const active = (await rig.api('/active')) as any[]
    return active.find((s) => s.application_name === app && s.state === 'active' && /pg_sleep/.test(s.query_text))
  })
  const reported = {
    pid: session.pid,
    backend_start: session.backend_start,
    xact_start: session.xact_start,
    query_start: session.query_start,
    user: session.user,
    application_name: session.application_name,
  }
  return { conn, running, reported, statement: session.query_text as string }
}

async function stateOf(pid: number): Promise<string | undefined> {
  const [row] = await admin`SELECT state, query FROM pg_stat_activity WHERE pid = ${pid}`
  return row?.state
}

describe('cancel and terminate', () => {
  test('a pg_sleep session is cancelled from the API: that pid ends its statement, audited', async () => {
    const s = await sleeper('victim-cancel')
    try {
      const res = await ask({ kind: 'cancel', session: s.reported, statement: s.statement })
      expect(res.status).toBe(202)
      expect(res.body.state).toBe('pending')
      expect(res.body.command).toContain(
        `pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = ${s.reported.pid} AND`,
      )
      const done = await settled(res.body.id)
      expect(done.state).toBe('done')
      expect(done.signalled).toBe(true)
      expect(await s.running).toBe('57014')
      expect(
        await until('the statement to end', async () =>
          (await stateOf(s.reported.pid)) === 'idle' ? 'idle' : undefined,
        ),
      ).toBe('idle')
      const events = (await rig.api('/events')) as any[]
      const audit = events.filter((e) => e.kind === 'session_action').map((e) => e.title)
      expect(audit).toContain(
        `Cancel of pid ${s.reported.pid} (role "postgres", application "victim-cancel") asked by ${owner().email}`,
      )
      expect(audit).toContain(
        `Cancel of pid ${s.reported.pid} (role "postgres", application "victim-cancel") run: the backend was signalled (asked by ${owner().email})`,
      )
    } finally {
      await s.conn.end({ timeout: 0 })
    }
  }, 60_000)

  test('a reused pid is not hit: another backend_start signals nothing and the session stays', async () => {
    const s = await sleeper('victim-reused')
    try {
      const stranger = {
        ...s.reported,
        backend_start: new Date(Date.parse(s.reported.backend_start) - 1_000).toISOString(),
      }
      const res = await ask({ kind: 'cancel', session: stranger })
      const done = await settled(res.body.id)
      expect(done.state).toBe('done')
      expect(done.signalled).toBe(false)
      expect(await stateOf(s.reported.pid)).toBe('active')
    } finally {
      await admin`SELECT pg_terminate_backend(${s.reported.pid})`
      await s.conn.end({ timeout: 0 })
    }
  }, 60_000)

  test('terminate: 403 for a member and for a read key; refused by an agent that does not allow it', async () => {
    const email = `member-${Math.random().toString(36).slice(2, 9)}@example.com`
    const invite = await rig.server.call('POST', '/api/v1/organization/invites', {
      token: owner().token,
      body: { email, role: 'member' },
    })
    expect(invite.status).toBe(201)
    await rig.server.deps.mailer.idle()
    const token = new URL(rig.server.mailLink(email, /invited/)!).searchParams.get('token')
    const joined = await rig.server.call('POST', '/api/v1/auth/accept-invite', {
      ip: uniqueIp(),
      body: { token, name: 'member', password: 'joiner password 1' },
    })
    expect(joined.status).toBe(201)
    const member = { ...owner(), email, token: joined.body.access_token as string }
    const s = await sleeper('victim-terminate')
    try {
      const byMember = await ask({ kind: 'terminate', session: s.reported }, member)
      expect(byMember.status).toBe(403)
      expect(byMember.body).toEqual({ error: 'only an owner can terminate a session' })
      const readKey = await rig.server.call('POST', '/api/v1/api-keys', {
        token: owner().token,
        body: { name: 'reader', scopes: ['read'] },
      })
      const byKey = await rig.server.call('POST', `/api/v1/databases/${rig.dbId}/actions`, {
        apiKey: readKey.body.key,
        body: { kind: 'terminate', session: s.reported },
      })
      expect(byKey.status).toBe(403)
      const res = await ask({ kind: 'terminate', session: s.reported })
      expect(res.status).toBe(202)
      const refused = await settled(res.body.id)
      expect(refused.state).toBe('refused')
      expect(refused.reason).toContain(
        'does not allow terminate for database "actions" (allow_actions: [cancel, explain])',
      )
      expect(await stateOf(s.reported.pid)).toBe('active')
      const list = await rig.api('/actions')
      expect(list.allowed).toEqual(['cancel', 'explain'])
    } finally {
      await admin`SELECT pg_terminate_backend(${s.reported.pid})`
      await s.conn.end({ timeout: 0 })
    }
  }, 60_000)

  test('bad requests are 400s naming the field', async () => {
    expect((await ask({ kind: 'kill' })).status).toBe(400)
    expect((await ask({ kind: 'cancel' })).body).toEqual({
      error: 'session is required for cancel: its pid and backend_start at least',
    })
    const bad = await ask({ kind: 'cancel', session: { pid: 1, backend_start: 'yesterday' } })
    expect(bad.status).toBe(400)
    expect(bad.body).toEqual({ error: 'session.backend_start must be an RFC 3339 timestamp' })
    expect((await ask({ kind: 'explain' })).body).toEqual({ error: 'query_hash is required for explain' })
  })
})

describe('explain', () => {
  test('with a parameter value: the plan binds it', async () => {
    await admin`SELECT id FROM t WHERE id = ${42}`
    const [row] =
      await admin`SELECT queryid::text AS id FROM pg_stat_statements WHERE query = 'SELECT id FROM t WHERE id = $1' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    const res = await ask({ kind: 'explain', query_hash: row!.id, parameters: ['42'] })
    expect(res.status).toBe(202)
    const done = await settled(res.body.id)
    expect(done.state).toBe('done')
    expect(done.plan.Plan['Node Type']).toBe('Index Only Scan')
    expect(done.plan.Plan['Index Cond']).toBe('(id = 42)')
    expect(done.plan.Plan['Actual Rows']).toBeUndefined()
  }, 30_000)

  test('a statement an untrusted role ran is refused as the sampler refuses it', async () => {
    await admin.unsafe("CREATE ROLE dbm_app LOGIN PASSWORD 'app'")
    await admin`GRANT SELECT ON t TO dbm_app`
    const url = new URL(dsn)
    url.username = 'dbm_app'
    url.password = 'app'
    const app = postgres(url.toString(), { max: 1, onnotice: () => {} })
    try {
      await app`SELECT id, 1 AS by_app FROM t WHERE id = ${7}`
    } finally {
      await app.end({ timeout: 0 })
    }
    const [row] =
      await admin`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE '%by_app%' AND userid = 'dbm_app'::regrole AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    const res = await ask({ kind: 'explain', query_hash: row!.id, parameters: ['7'] })
    const refused = await settled(res.body.id)
    expect(refused.state).toBe('refused')
    expect(refused.reason).toContain('role dbm_app ran it')
    expect(refused.reason).toContain('explain_trusted_roles: ["dbm_app"]')
    expect(refused.plan).toBeUndefined()
  }, 30_000)

  test("each statement runs under a 1 s timeout, and a database's explains run one at a time", async () => {
    // Planning folds an immutable function of a constant: with 3 bound it reports the timeout in force,
    // with 1 it sleeps 5 s.
    await admin.unsafe(`CREATE FUNCTION dbm_probe(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN
      IF $1 = 3 THEN RAISE EXCEPTION 'statement_timeout is %', current_setting('statement_timeout'); END IF;
      IF $1 = 1 THEN PERFORM pg_sleep(5); END IF; RETURN $1; END $$`)
    try {
      await admin`SELECT id AS probe_id FROM t WHERE id = dbm_probe(${2})`
      const [row] =
        await admin`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE '%dbm_probe%' AND query LIKE 'SELECT%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
      const probe = await settled((await ask({ kind: 'explain', query_hash: row!.id, parameters: ['3'] })).body.id)
      expect(probe.state).toBe('failed')
      expect(probe.reason).toBe('statement_timeout is 1s (SQLSTATE P0001)')
      // Two 5 s plans asked at once: each cut at 1 s, the second begun only once the first ended.
      const first = (await ask({ kind: 'explain', query_hash: row!.id, parameters: ['1'] })).body.id
      const second = (await ask({ kind: 'explain', query_hash: row!.id, parameters: ['1'] })).body.id
      const [a, b] = [await settled(first), await settled(second)]
      for (const x of [a, b]) {
        expect(x.state).toBe('failed')
        expect(x.reason).toBe('canceling statement due to statement timeout (SQLSTATE 57014)')
      }
      expect(Date.parse(b.finished_at) - Date.parse(a.finished_at)).toBeGreaterThanOrEqual(1_000)
    } finally {
      await admin.unsafe('DROP FUNCTION dbm_probe(int)')
    }
  }, 30_000)

  test('a wrong number of values is refused', async () => {
    const [row] =
      await admin`SELECT queryid::text AS id FROM pg_stat_statements WHERE query = 'SELECT id FROM t WHERE id = $1' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    const refused = await settled((await ask({ kind: 'explain', query_hash: row!.id, parameters: [] })).body.id)
    expect(refused.reason).toBe('the statement has 1 parameter ($1…); 0 values were given')
  }, 30_000)
})

describe('expiry and isolation', () => {
  test('an action no agent takes expires and is never handed out', async () => {
    const created = await rig.server.call('POST', '/api/v1/databases', {
      token: owner().token,
      body: { name: 'no-agent', engine: 'postgres', host: 'db.example', port: 5432 },
    })
    expect(created.status).toBe(201)
    const id = created.body.id
    const session = { pid: 4242, backend_start: '2026-01-01T00:00:00.000Z', user: 'app', application_name: 'web' }
    const res = await ask({ kind: 'cancel', session }, owner(), id)
    expect(res.status).toBe(202)
    rig.server.advance(121_000)
    const read = await rig.server.call('GET', `/api/v1/databases/${id}/actions/${res.body.id}`, {
      token: owner().token,
    })
    expect(read.body.state).toBe('expired')
    expect(read.body.reason).toContain('no agent took it before it expired')
    const { key } = {
      key: (
        await rig.server.call('POST', '/api/v1/api-keys', {
          token: owner().token,
          body: { name: 'late agent', scopes: ['ingest'] },
        })
      ).body.key,
    }
    const poll = await rig.server.call('GET', '/api/v1/agent/actions?database=no-agent&wait=0', { apiKey: key })
    expect(poll.status).toBe(200)
    expect(poll.body.actions).toEqual([])
    const events = (
      await rig.server.call('GET', `/api/v1/databases/${id}/events?since=2020-01-01T00:00:00Z`, {
        token: owner().token,
      })
    ).body as any[]
    expect(events.map((e) => e.title)).toContain(
      `Cancel of pid 4242 (role "app", application "web") expired (asked by ${owner().email})`,
    )
  })

  test('an action whose expiry passed is never run: refused right before it starts, the session left alone', async () => {
    const s = await sleeper('victim-expired')
    try {
      const poller = new ActionPoller({
        endpoint: rig.server.base,
        apiKey: 'unused',
        database: { name: 'actions', dsn, allowActions: ['cancel'] } as DatabaseConfig,
        log: createLogger('error', () => {}),
      })
      const action = {
        id: crypto.randomUUID(),
        kind: 'cancel' as const,
        expires_in_ms: 60_000,
        session: {
          ...s.reported,
          backend_start: Date.parse(s.reported.backend_start),
          xact_start: Date.parse(s.reported.xact_start),
          query_start: Date.parse(s.reported.query_start),
        },
      }
      // Handed out with a minute left, but that minute is over when its turn comes.
      const result = await poller.execute(action, performance.now() - 1)
      expect(result.outcome).toBe('refused')
      expect(result.reason).toMatch(/^it expired \d+ ms before the agent could start it; it was not run$/)
      expect(await stateOf(s.reported.pid)).toBe('active')
    } finally {
      await admin`SELECT pg_terminate_backend(${s.reported.pid})`
      await s.conn.end({ timeout: 0 })
    }
  }, 30_000)

  test('a batch near its expiry: the kill runs first, a slow explain ends late and is audited so, the next one is never started', async () => {
    // Planning folds an immutable function of a constant: with 1 bound, planning it sleeps 5 s.
    await admin.unsafe(
      `CREATE FUNCTION dbm_slow(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN IF $1 = 1 THEN PERFORM pg_sleep(5); END IF; RETURN $1; END $$`,
    )
    await admin`SELECT id AS slow_id FROM t WHERE id = dbm_slow(${2})`
    const [slow] =
      await admin`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE '%dbm_slow%' AND query LIKE 'SELECT%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    await admin`SELECT id FROM t WHERE id = ${42}`
    const [quick] =
      await admin`SELECT queryid::text AS id FROM pg_stat_statements WHERE query = 'SELECT id FROM t WHERE id = $1' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    const created = await rig.server.call('POST', '/api/v1/databases', {
      token: owner().token,
      body: { name: 'batch', engine: 'postgres', host: 'h', port: 5432 },
    })
    const id = created.body.id as string
    // Asked while no agent listens: explains first, then a kill of a session that is not there.
    const a = (await ask({ kind: 'explain', query_hash: slow!.id, parameters: ['1'] }, owner(), id)).body.id
    const b = (await ask({ kind: 'explain', query_hash: quick!.id, parameters: ['42'] }, owner(), id)).body.id
    const k = (
      await ask({ kind: 'cancel', session: { pid: 2_000_000, backend_start: '2026-01-01T00:00:00Z' } }, owner(), id)
    ).body.id
    // 900 ms left when the agent takes them: time for the kill, not for the slow explain and then the next.
    rig.server.advance(ACTION_TTL_MS - 900)
    const key = (
      await rig.server.call('POST', '/api/v1/api-keys', {
        token: owner().token,
        body: { name: 'batch agent', scopes: ['ingest'] },
      })
    ).body.key
    const poller = new ActionPoller({
      endpoint: rig.server.base,
      apiKey: key,
      database: { name: 'batch', dsn, allowActions: ['cancel', 'explain'] } as DatabaseConfig,
      log: createLogger('error', () => {}),
      waitSeconds: 1,
    })
    poller.start()
    try {
      const read = (aid: string) =>
        until(`action ${aid} to settle`, async () => {
          const res = await rig.server.call('GET', `/api/v1/databases/${id}/actions/${aid}`, { token: owner().token })
          return res.body.state === 'pending' || res.body.state === 'running' ? undefined : res.body
        })
      const kill = await read(k)
      const late = await read(a)
      const never = await read(b)
      expect(kill.state).toBe('done')
      expect(kill.signalled).toBe(false)
      expect(Date.parse(kill.finished_at)).toBeLessThanOrEqual(Date.parse(late.finished_at))
      // The slow explain started in time but its result (a statement timeout) came after the expiry.
      expect(late.state).toBe('expired')
      expect(late.agent_outcome).toBe('failed')
      expect(late.late_by_ms).toBeGreaterThan(0)
      expect(late.reason).toStartWith("the agent's result came ")
      expect(late.reason).toContain(
        'after the action expired, so it is not counted as run in time; the agent reported: failed: canceling statement due to statement timeout',
      )
      // The next one was never started: refused by the agent, and that too recorded as past its expiry.
      expect(never.state).toBe('expired')
      expect(never.agent_outcome).toBe('refused')
      expect(never.reason).toMatch(
        /the agent reported: refused: it expired \d+ ms before the agent could start it; it was not run$/,
      )
      expect(never.plan).toBeUndefined()
    } finally {
      await poller.stop()
      await admin.unsafe('DROP FUNCTION dbm_slow(int)')
    }
  }, 60_000)

  test("another organization's database and actions are 404s, for users and agent keys", async () => {
    const res = await ask({ kind: 'explain', query_hash: '1', parameters: [] })
    const other = await signup(rig.server)
    expect((await ask({ kind: 'explain', query_hash: '1' }, other)).status).toBe(404)
    const read = await rig.server.call('GET', `/api/v1/databases/${rig.dbId}/actions/${res.body.id}`, {
      token: other.token,
    })
    expect(read.status).toBe(404)
    const { key } = await agentAccount(rig.server)
    const poll = await rig.server.call('GET', '/api/v1/agent/actions?database=actions&wait=0', { apiKey: key })
    expect(poll.status).toBe(404)
    const post = await rig.server.call('POST', `/api/v1/agent/actions/${res.body.id}`, {
      apiKey: key,
      body: { outcome: 'done', signalled: true },
    })
    expect(post.status).toBe(404)
    const byUser = await rig.server.call('GET', '/api/v1/agent/actions?database=actions', { token: owner().token })
    expect(byUser.status).toBe(403)
  })
})
