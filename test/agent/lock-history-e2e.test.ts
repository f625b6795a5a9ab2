// Lock chain history end to end: the real agent (polling every second) against a real PostgreSQL 17,
// read back through the API. Three sessions make a chain: the root updates a row and sits idle in its
// transaction, a second session waits for that row, a third alters the table and waits for both
// (pg_blocking_pids names two pids). Once the agent has sampled it, the chain is ended; its history then
// names the root and the members with their users, applications, statements and blockers exactly as
// pg_stat_activity and pg_blocking_pids said while it lasted, begins when pg_locks' waitstart says the
// first wait began, and its duration misses the true one by less than the poll interval around its end.
// `at` answers the snapshot of that time.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

let pg: PostgresServer
let dsn: string
let setup: postgres.Sql
let dir: string
let rig: AgentRig

beforeAll(async () => {
  pg = await startPostgres(17)
  dsn = await pg.freshDatabase()
  setup = postgres(dsn, { max: 1, onnotice: () => {} })
  await setup`CREATE TABLE accounts (id int PRIMARY KEY, balance int)`
  await setup`INSERT INTO accounts VALUES (1, 100)`
  dir = mkdtempSync(join(tmpdir(), 'dbm-lock-history-'))
  rig = await startAgentRig(dsn, 'bank', dir)
})

afterAll(async () => {
  await rig?.stop()
  await setup?.end()
  await pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const iso = (ms: number) => new Date(ms).toISOString()

interface Truth {
  pid: number
  usename: string
  application_name: string
  state: string
  query: string
  blocking: number[]
  waitstart: Date | null
}

describe('a 3-session lock chain, sampled by the agent and ended (PostgreSQL 17)', () => {
  test('its history names the root and members as PostgreSQL did, and its duration is within the poll interval', async () => {
    const connect = (application: string) =>
      postgres(dsn, { max: 1, onnotice: () => {}, connection: { application_name: application } })
    const root = connect('dbm-root')
    const waiter = connect('dbm-waiter')
    const locker = connect('dbm-locker')
    try {
      const pidOf = async (sql: postgres.Sql) => (await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
      const [rootPid, waiterPid, lockerPid] = [await pidOf(root), await pidOf(waiter), await pidOf(locker)]
      await root.unsafe('BEGIN')
      await root.unsafe("UPDATE accounts SET balance = balance - 10 WHERE id = 1 /* 'root' */")
      const waiting = waiter.unsafe('UPDATE accounts SET balance = balance + 10 WHERE id = 1 /* waiter */').execute()
      waiting.catch(() => {})
      await until('the waiter to wait', async () =>
        (await setup`SELECT 1 FROM pg_locks WHERE pid = ${waiterPid} AND NOT granted`).length > 0 ? true : undefined,
      )
      const locking = locker.unsafe('ALTER TABLE accounts ADD COLUMN note text /* locker */').execute()
      locking.catch(() => {})
      await until('the locker to wait for both', async () =>
        (await setup<{ n: number }[]>`SELECT cardinality(pg_blocking_pids(${lockerPid})) AS n`)[0]!.n === 2
          ? true
          : undefined,
      )

      // What PostgreSQL says while the chain lasts.
      const truth = async (): Promise<Map<number, Truth>> => {
        const rows = await setup<Truth[]>`
          SELECT a.pid, a.usename, a.application_name, a.state, a.query, pg_blocking_pids(a.pid) AS blocking,
                 (SELECT min(l.waitstart) FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted) AS waitstart
          FROM pg_stat_activity a WHERE a.pid IN (${rootPid}, ${waiterPid}, ${lockerPid})`
        return new Map(rows.map((r) => [r.pid, { ...r, blocking: [...r.blocking].sort((a, b) => a - b) }]))
      }
      const during = await truth()
      expect(during.get(lockerPid)!.blocking).toEqual([rootPid, waiterPid].sort((a, b) => a - b))
      expect(during.get(waiterPid)!.blocking).toEqual([rootPid])
      expect(during.get(rootPid)!.state).toBe('idle in transaction')

      // The agent samples it at least twice.
      const sampled = await until(
        'the chain sampled twice',
        async () => {
          const chains = await rig.api(`/locks/chains?since=${iso(Date.now() - 600_000)}`)
          const chain = chains.find((c: any) => c.root.pid === rootPid)
          return chain && chain.samples >= 2 && chain.members.length === 2 ? chain : undefined
        },
        { timeoutMs: 30_000 },
      )
      expect(sampled.ongoing).toBe(true)
      // Unchanged since: the truth read above is the truth of every sample.
      expect(await truth()).toEqual(during)

      // End it: the root rolls back, the waiter then the locker go through.
      await root.unsafe('ROLLBACK')
      const endedAt = Date.now()
      await waiting
      await locking

      const chain = await until(
        'the chain to end',
        async () => {
          const chains = await rig.api(`/locks/chains?since=${iso(Date.now() - 600_000)}`)
          const found = chains.find((c: any) => c.root.pid === rootPid)
          return found && !found.ongoing ? found : undefined
        },
        { timeoutMs: 30_000 },
      )
      const r = during.get(rootPid)!
      expect(chain.root).toEqual({
        pid: rootPid,
        user: r.usename,
        application: 'dbm-root',
        state: 'idle in transaction',
        statement: r.query,
        xact_start: expect.any(String),
      })
      expect(
        chain.members.map((m: any) => ({ ...m, blocked_by: [...m.blocked_by].sort((a: number, b: number) => a - b) })),
      ).toEqual(
        [waiterPid, lockerPid]
          .sort((a, b) => a - b)
          .map((pid) => {
            const t = during.get(pid)!
            return {
              pid,
              blocked_by: t.blocking,
              user: t.usename,
              application: t.application_name,
              statement: t.query,
              waiting_since: expect.any(String),
              first_seen: expect.any(String),
              last_seen: expect.any(String),
            }
          }),
      )
      expect(chain.members.map((m: any) => m.application).sort()).toEqual(['dbm-locker', 'dbm-waiter'])

      // It began when the first wait did (pg_locks.waitstart; the agent's batch time is its cycle's start,
      // a little before its pg_locks read, so a little earlier), and ended between its last sighting and the
      // next poll: the duration misses the true one by less than that poll interval.
      const began = during.get(waiterPid)!.waitstart!.getTime()
      const lastSeen = Date.parse(chain.last_seen)
      const history = await rig.api(`/active/history?since=${iso(lastSeen)}`)
      const next = history.snapshots.find((s: any) => s.at > lastSeen)!.at as number
      const interval = next - lastSeen
      const startedAt = Date.parse(chain.started_at)
      expect(startedAt).toBeLessThanOrEqual(began + 5)
      expect(began - startedAt).toBeLessThan(interval)
      expect(lastSeen).toBeLessThanOrEqual(endedAt)
      const trueDuration = endedAt - began
      expect(Math.abs(trueDuration - chain.duration_ms)).toBeLessThan(interval)
      // and the agent polled about every second around it
      expect(interval).toBeLessThan(5_000)
      console.log(
        `lock chain: true ${trueDuration} ms, history ${chain.duration_ms} ms, poll interval around its end ${interval} ms, start ${began - startedAt} ms early`,
      )

      // `at` answers the snapshot of that time: the chain's sessions as PostgreSQL showed them.
      const active = await rig.api(`/active?at=${lastSeen}`)
      const byPid = new Map(active.map((s: any) => [s.pid, s]))
      expect([rootPid, waiterPid, lockerPid].map((pid) => (byPid.get(pid) as any)?.ts)).toEqual(
        Array(3).fill(chain.last_seen),
      )
      for (const pid of [rootPid, waiterPid, lockerPid]) {
        const t = during.get(pid)!
        const s = byPid.get(pid) as any
        expect({
          pid,
          state: s.state,
          query: s.query_text,
          user: s.user,
          application: s.application_name,
          blocking: [...s.blocking_pids].sort((a: number, b: number) => a - b),
        }).toEqual({
          pid,
          state: t.state,
          query: t.query,
          user: t.usename,
          application: t.application_name,
          blocking: pid === rootPid ? [] : t.blocking,
        })
      }
      const locks = await rig.api(`/locks?at=${lastSeen}`)
      expect(
        locks
          .filter((l: any) => !l.granted)
          .map((l: any) => l.pid)
          .sort(),
      ).toEqual([waiterPid, lockerPid].sort())
      expect(locks.every((l: any) => l.ts === chain.last_seen)).toBe(true)
      // and the latest snapshot has none of them waiting
      expect((await rig.api('/active')).filter((s: any) => s.blocking_pids.length > 0)).toEqual([])
    } finally {
      await root.end()
      await waiter.end()
      await locker.end()
    }
  })
})
