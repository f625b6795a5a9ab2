// Availability end to end on real engines: the real agent (pinging every PING_MS) against a real
// PostgreSQL 17 that is stopped for real (a fast shutdown, as `pg_ctl stop -m fast`, during the agent's
// cycles) and started again, and whose monitoring role's password is changed under it; read back through
// GET /databases/{id}/health, /doctor, /events, /availability and the list. Asserted: "down" within two
// pings of the stop with the cause `refused` (never a ping's timeout), no data batch while down (the
// list's last_seen_at stays), "up" within two pings of the start, `authentication` after the password
// change with the failed logins the server logs bounded by the agent's backoff, a reload retrying at
// once, the outage stored with its cause and on the timeline, one critical database_unreachable finding
// and never agent_disconnected while the agent reports, and no password in any message.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { failureClass } from '../../src/agent/reachability.ts'
import { type AgentRig, startAgentRig, waitForCycles } from '../support/agent.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

const PING_MS = 1_000
/** What a status read through the API adds to the wait: the poll of until() and one request. */
const SLACK_MS = 500
const PASSWORD = `p'w"1\\x`
const NEW_PASSWORD = 'changed-under-the-agent'

let pg: PostgresServer
let setup: postgres.Sql
let dir: string
let rig: AgentRig

const pgString = (s: string) => `'${s.replaceAll("'", "''")}'`

beforeAll(async () => {
  pg = await startPostgres(17)
  setup = postgres(pg.url(), { max: 1, onnotice: () => {} })
  await setup.unsafe(`CREATE ROLE monitor LOGIN PASSWORD ${pgString(PASSWORD)} IN ROLE pg_monitor`)
  dir = mkdtempSync(join(tmpdir(), 'dbm-availability-e2e-'))
  const dsn = `postgres://monitor:${encodeURIComponent(PASSWORD)}@127.0.0.1:${pg.port}/postgres`
  rig = await startAgentRig(dsn, 'avail', dir, {
    pingIntervalMs: PING_MS,
    connectTimeoutS: 2,
    statementTimeoutMs: 1_000,
    collectorDeadlineMs: 2_000,
  })
})

afterAll(async () => {
  await rig?.stop()
  await setup?.end({ timeout: 1 }).catch(() => {})
  await pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const health = () => rig.api('/health')

/** Waits for `pick` on GET /health; resolves with the answer and the milliseconds it took from `from`. */
async function statusWhen(what: string, pick: (h: any) => boolean, from: number, timeoutMs = 30_000) {
  const answer = await until(
    what,
    async () => {
      const h = await health()
      return pick(h) ? h : undefined
    },
    { everyMs: 50, timeoutMs },
  )
  return { answer, ms: Date.now() - from }
}

describe('availability (PostgreSQL 17)', () => {
  let stoppedAt: number
  let downSince: string

  test('a server stopped fast is down within two pings, cause refused; the agent is not blamed', async () => {
    await statusWhen('connected', (h) => h.status === 'connected', Date.now())
    // A batch with data came: the data shown while down is as of it.
    const before = await health()
    expect(before).toMatchObject({ reason: null, down_since: null, cause: null })

    stoppedAt = Date.now()
    await pg.stopFast()
    const { answer, ms } = await statusWhen('down', (h) => h.reason === 'database_down', stoppedAt)
    expect(ms).toBeLessThan(2 * PING_MS + SLACK_MS)
    expect(answer).toMatchObject({ status: 'disconnected', reason: 'database_down', cause: 'refused' })
    // The first attempt to fail may reach the server while it shuts down (57P03, also "refused") or after
    // its socket is gone (ECONNREFUSED): which one is a matter of timing on a busy machine.
    expect(answer.cause_message).toMatch(/ECONNREFUSED|^57P03: the database system is shutting down$/)
    expect(answer.cause_message).not.toContain(PASSWORD)
    downSince = answer.down_since
    expect(Date.parse(downSince)).toBeGreaterThanOrEqual(stoppedAt - 50)
    // The latest data is the last batch before the stop, and the agent is heard from after it.
    expect(Date.parse(answer.data_as_of)).toBeLessThanOrEqual(Date.parse(downSince))
    expect(Date.parse(answer.agent_last_heard_at)).toBeGreaterThanOrEqual(Date.parse(downSince))
    console.log(`down after ${ms} ms (ping every ${PING_MS} ms)`)

    // Still down a few pings later: the same outage, the agent heard at each ping; one finding, the database's.
    await until(
      'two more reports',
      async () =>
        Date.parse((await health()).agent_last_heard_at) > Date.parse(answer.agent_last_heard_at) + PING_MS
          ? true
          : undefined,
      { everyMs: 100 },
    )
    const doctor = await rig.api('/doctor')
    const rules = doctor.top_issues.map((f: any) => f.rule)
    expect(rules).toContain('database_unreachable')
    expect(rules).not.toContain('agent_disconnected')
    const finding = doctor.top_issues.find((f: any) => f.rule === 'database_unreachable')
    expect(finding).toMatchObject({ severity: 'critical', title: 'PostgreSQL is unreachable: connection refused' })
    expect(finding.metrics).toMatchObject({ cause: 'refused', down_since: downSince })
    expect(JSON.stringify(doctor)).not.toContain(PASSWORD)
    const overview = await rig.api('/overview')
    expect(overview).toMatchObject({
      status: 'disconnected',
      reason: 'database_down',
      down_since: downSince,
      cause: 'refused',
    })
    const listed = async () =>
      ((await rig.server.call('GET', '/api/v1/databases', { token: rig.account.token })).body as any[]).find(
        (d) => d.id === rig.dbId,
      )
    const seen = await listed()
    expect(seen).toMatchObject({ reason: 'database_down', cause: 'refused' })
    // Cycles go on while down, but none sends a data batch: the last data stays the last data.
    await waitForCycles(rig.agent, 'avail', 1)
    expect((await listed()).last_seen_at).toBe(seen.last_seen_at)
  })

  test('started again, it is up within two pings; the outage is stored and on the timeline', async () => {
    await pg.start()
    const startedAt = Date.now()
    const { ms } = await statusWhen('up', (h) => h.status === 'connected', startedAt)
    expect(ms).toBeLessThan(2 * PING_MS + SLACK_MS)
    console.log(`up after ${ms} ms (ping every ${PING_MS} ms)`)
    const availability = await rig.api('/availability?days=1')
    expect(availability.outages).toHaveLength(1)
    const outage = availability.outages[0]
    expect(outage).toMatchObject({ started_at: downSince, cause: 'refused' })
    expect(outage.ended_at).not.toBeNull()
    const outageMs = Date.parse(outage.ended_at) - Date.parse(outage.started_at)
    expect(availability.total.down_ms).toBe(outageMs)
    expect(availability.total.ratio).toBeLessThan(1)
    expect(availability.days.length).toBeGreaterThanOrEqual(1)
    const events = (await rig.api('/events')) as any[]
    expect(events.find((e) => e.kind === 'database_down')).toMatchObject({
      ts: downSince,
      severity: 'critical',
      title: 'PostgreSQL unreachable: connection refused',
    })
    expect(events.find((e) => e.kind === 'database_up')).toMatchObject({ ts: outage.ended_at, severity: 'info' })
    expect(events.filter((e) => e.kind === 'agent_disconnected')).toEqual([])
  })

  test("the role's password changed under the agent: down with cause authentication, few logins, up at a reload", async () => {
    const failedLogins = () => pg.logText().split('password authentication failed for user "monitor"').length - 1
    const before = failedLogins()
    await setup.unsafe(`ALTER ROLE monitor PASSWORD ${pgString(NEW_PASSWORD)}`)
    // The agent's open connections stay logged in: ended, the next ones must authenticate.
    await setup`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'monitor'`
    const { answer } = await statusWhen('authentication failure', (h) => h.cause === 'authentication', Date.now())
    expect(answer).toMatchObject({ status: 'disconnected', reason: 'database_down' })
    expect(answer.cause_message).toContain('28P01')
    expect(answer.cause_message).not.toContain(PASSWORD)
    // Over five pings and cycles, the collectors and the sampler do not log in: only the retries after
    // 1, 2 and 4 pings. Without the pause: about 20 a cycle (every collector) and one a second (the sampler).
    const detected = failedLogins() - before
    const windowStart = Date.now()
    await waitForCycles(rig.agent, 'avail', 5)
    const windowMs = Date.now() - windowStart
    const retries = failedLogins() - before - detected
    console.log(
      `failed logins: ${detected} until down, ${retries} in the next ${windowMs} ms (ping every ${PING_MS} ms)`,
    )
    expect(detected).toBeGreaterThanOrEqual(1)
    expect(detected).toBeLessThanOrEqual(3)
    expect(retries).toBeLessThanOrEqual(Math.ceil(Math.log2(windowMs / PING_MS + 1)) + 1)
    // Fixed, and the config reloaded: the login is tried at once, not at the next backoff step (8 pings).
    await setup.unsafe(`ALTER ROLE monitor PASSWORD ${pgString(PASSWORD)}`)
    const reloadedAt = Date.now()
    await rig.agent.reload()
    const { ms } = await statusWhen('up again', (h) => h.status === 'connected', reloadedAt)
    expect(ms).toBeLessThan(PING_MS + SLACK_MS)
    const availability = await rig.api('/availability')
    expect(availability.outages.map((o: any) => o.ended_at === null)).toEqual([false, false])
  })
})

describe('failure classes of real PostgreSQL 17 errors', () => {
  test('22023 on statement_timeout is other, not timeout; a missing database (3D000) is permission', async () => {
    const invalid = await setup.unsafe("SET statement_timeout = 'not a duration'").catch((e) => e)
    expect(invalid.code).toBe('22023')
    expect(invalid.message).toContain('statement_timeout')
    expect(failureClass(invalid)).toBe('other')
    const missing = postgres(`postgres://monitor:${encodeURIComponent(PASSWORD)}@127.0.0.1:${pg.port}/no_such_db`, {
      max: 1,
      onnotice: () => {},
    })
    const gone = await missing`SELECT 1`.catch((e) => e)
    await missing.end({ timeout: 1 }).catch(() => {})
    expect(gone.code).toBe('3D000')
    expect(failureClass(gone)).toBe('permission')
  })
})
