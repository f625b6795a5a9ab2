// Availability of ClickHouse end to end: the real agent against the real ClickHouse engine (the chdb rig,
// a process of its own) reached through a loopback port that a small TCP relay in this test keeps: the
// engine's process is stopped for real and, with it, the port closed (as a stopped server's is), then a
// new engine is started behind the same port. Asserted: down within two pings, cause refused, the agent
// not blamed; up within two pings of the start; the outage on the timeline.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Socket, TCPSocketListener } from 'bun'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'
import { until } from '../support/wait.ts'

const PING_MS = 1_000
const SLACK_MS = 500
const USER = 'dbm_agent'
const PASSWORD = 'ch-secret'

let ch: ClickHouseRig | undefined
let relay: TCPSocketListener<{ upstream?: Socket; pending: Uint8Array[] }> | undefined
let relayPort = 0
let dir: string
let rig: AgentRig

/** Listens on relayPort (0: a free one) and relays every connection to the engine's port. */
function listen(upstreamPort: number) {
  relay = Bun.listen<{ upstream?: Socket; pending: Uint8Array[] }>({
    hostname: '127.0.0.1',
    port: relayPort,
    socket: {
      open(client) {
        client.data = { pending: [] }
        void Bun.connect({
          hostname: '127.0.0.1',
          port: upstreamPort,
          socket: {
            data: (_, chunk) => void client.write(chunk),
            close: () => void client.end(),
            error: () => void client.end(),
          },
        }).then(
          (upstream) => {
            client.data.upstream = upstream
            for (const chunk of client.data.pending.splice(0)) upstream.write(chunk)
          },
          () => void client.end(),
        )
      },
      data(client, chunk) {
        if (client.data.upstream) client.data.upstream.write(chunk)
        else client.data.pending.push(new Uint8Array(chunk))
      },
      close: (client) => void client.data.upstream?.end(),
    },
  })
  relayPort = relay.port
}

beforeAll(async () => {
  ch = await startClickHouse({ user: USER, password: PASSWORD })
  listen(ch.port)
  dir = mkdtempSync(join(tmpdir(), 'dbm-clickhouse-availability-'))
  const dsn = `clickhouse://${USER}:${PASSWORD}@127.0.0.1:${relayPort}/default`
  rig = await startAgentRig(dsn, 'ch-avail', dir, {
    pingIntervalMs: PING_MS,
    connectTimeoutS: 2,
    statementTimeoutMs: 1_000,
    collectorDeadlineMs: 2_000,
  })
})

afterAll(async () => {
  await rig?.stop()
  relay?.stop(true)
  await ch?.stop()
  rmSync(dir, { recursive: true, force: true })
})

async function statusWhen(what: string, pick: (h: any) => boolean, from: number) {
  const answer = await until(
    what,
    async () => {
      const h = await rig.api('/health')
      return pick(h) ? h : undefined
    },
    { everyMs: 50, timeoutMs: 30_000 },
  )
  return { answer, ms: Date.now() - from }
}

describe('availability (ClickHouse)', () => {
  test("the engine's process stopped: down within two pings, refused; started again: up within two pings", async () => {
    await statusWhen('connected', (h) => h.status === 'connected', Date.now())
    const stoppedAt = Date.now()
    relay!.stop(true)
    await ch!.stop()
    ch = undefined
    const down = await statusWhen('down', (h) => h.reason === 'database_down', stoppedAt)
    console.log(`ClickHouse down after ${down.ms} ms (ping every ${PING_MS} ms)`)
    expect(down.ms).toBeLessThan(2 * PING_MS + SLACK_MS)
    expect(down.answer).toMatchObject({ status: 'disconnected', cause: 'refused' })
    expect(down.answer.cause_message).not.toContain(PASSWORD)
    const doctor = await rig.api('/doctor')
    const rules = doctor.top_issues.map((f: any) => f.rule)
    expect(rules).toContain('database_unreachable')
    expect(rules).not.toContain('agent_disconnected')

    ch = await startClickHouse({ user: USER, password: PASSWORD })
    listen(ch.port)
    const startedAt = Date.now()
    const up = await statusWhen('up', (h) => h.status === 'connected', startedAt)
    console.log(`ClickHouse up after ${up.ms} ms (ping every ${PING_MS} ms)`)
    expect(up.ms).toBeLessThan(2 * PING_MS + SLACK_MS)
    const events = (await rig.api('/events')) as any[]
    expect(events.find((e) => e.kind === 'database_down')).toMatchObject({
      ts: down.answer.down_since,
      title: 'ClickHouse unreachable: connection refused',
    })
    expect(events.find((e) => e.kind === 'database_up')).toBeDefined()
    const availability = await rig.api('/availability?days=1')
    expect(availability.outages).toHaveLength(1)
    expect(availability.outages[0]).toMatchObject({ started_at: down.answer.down_since, cause: 'refused' })
  })
})
