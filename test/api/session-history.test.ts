// Session and lock history through the API on both stores, from batches shaped as the agent sends them:
// every poll's snapshot is kept and /active and /locks answer the one at or before `at` (its locks only
// those that wait or block); /active/history lists the kept times; /locks/chains names each chain's
// root, members (a session blocked by two pids once, with both blockers), first and last seen and
// duration after it ended; retention keeps every poll and chain for a day, then only snapshots with a lock
// wait of 30 s or a statement or transaction of 5 minutes and chains of 30 s, then nothing past the
// retention; another organization gets 404, a bad `at` a 400. The lock-chain derivation and the lock compaction are also
// checked alone (store/sessions/lock-chains.ts).
import { describe, expect, test } from 'bun:test'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { sessionHistoryLimits } from '../../src/server/limits.ts'
import { compactLocks, lockChains } from '../../src/server/store/sessions/lock-chains.ts'
import type { ActiveQuery, LockEntry } from '../../src/shared/wire.ts'
import { agentSession, chBatch, iso, pgBatch } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const SECOND = 1000
const HOUR = 3_600_000
const DAY = 24 * HOUR

const session = (pid: number, extra: Partial<ActiveQuery> = {}): ActiveQuery => ({
  pid,
  query_text: `SELECT ${pid}`,
  state: 'active',
  wait_event_type: null,
  wait_event: null,
  duration_ms: 100,
  blocking_pids: [],
  user: 'app',
  application_name: 'web',
  client_addr: '10.0.0.5',
  database: 'shop',
  backend_type: 'client backend',
  xact_start: null,
  ...extra,
})

const lock = (pid: number, extra: Partial<LockEntry>): LockEntry => ({
  pid,
  lock_type: 'relation',
  mode: 'AccessShareLock',
  relation_name: 'public.accounts',
  granted: true,
  blocked_by_pid: null,
  duration_ms: 1000,
  query_text: `SELECT ${pid}`,
  ...extra,
})

/**
 * A chain as a poll at `ts` sees it: pid 100 idle in its transaction (since ts0 - 60 s) holds a row of
 * public.accounts; 200 waits for it (since ts0 - 5 s); 300 waits for both 100 and 200 (pg_blocking_pids
 * names both); 400 runs a query of its own. 100 also reads another table, 200's own transaction id lock
 * is waited for by nobody (300 waits for the table), and 400 holds a lock nobody wants: none is kept.
 */
function chainSnapshot(ts: number, ts0: number) {
  const activity: ActiveQuery[] = [
    session(100, {
      state: 'idle in transaction',
      query_text: "UPDATE accounts SET balance = 0 WHERE id = 1 /* 'root' */",
      duration_ms: ts - ts0 + 50_000,
      xact_start: ts0 - 60_000,
      user: 'billing',
      application_name: 'nightly',
    }),
    session(200, {
      query_text: 'UPDATE accounts SET balance = 1 WHERE id = 1',
      wait_event_type: 'Lock',
      wait_event: 'transactionid',
      duration_ms: ts - ts0 + 5_000,
      blocking_pids: [100],
      application_name: 'api',
    }),
    session(300, {
      query_text: 'LOCK TABLE accounts',
      wait_event_type: 'Lock',
      wait_event: 'relation',
      duration_ms: ts - ts0 + 2_000,
      blocking_pids: [100, 200],
      user: 'admin',
      application_name: 'psql',
    }),
    session(400, { query_text: 'SELECT count(*) FROM orders', duration_ms: 1_500 }),
  ]
  const locks: LockEntry[] = [
    lock(100, {
      lock_type: 'transactionid',
      mode: 'ExclusiveLock',
      relation_name: null,
      duration_ms: ts - ts0 + 60_000,
      query_text: activity[0]!.query_text,
    }),
    lock(100, { mode: 'RowExclusiveLock', duration_ms: ts - ts0 + 60_000, query_text: activity[0]!.query_text }),
    lock(100, { relation_name: 'public.other', duration_ms: ts - ts0 + 60_000, query_text: activity[0]!.query_text }),
    lock(200, {
      lock_type: 'transactionid',
      mode: 'ShareLock',
      granted: false,
      blocked_by_pid: 100,
      duration_ms: ts - ts0 + 5_000,
      query_text: activity[1]!.query_text,
    }),
    lock(200, { mode: 'RowExclusiveLock', duration_ms: ts - ts0 + 5_000, query_text: activity[1]!.query_text }),
    lock(200, {
      lock_type: 'transactionid',
      mode: 'ExclusiveLock',
      relation_name: null,
      duration_ms: ts - ts0 + 5_000,
      query_text: activity[1]!.query_text,
    }),
    lock(300, {
      mode: 'AccessExclusiveLock',
      granted: false,
      blocked_by_pid: 100,
      duration_ms: ts - ts0 + 2_000,
      query_text: activity[2]!.query_text,
    }),
    lock(400, { relation_name: 'public.orders', duration_ms: 1_500, query_text: activity[3]!.query_text }),
  ]
  return { activity, locks }
}

describe('lock chains and compact locks of one snapshot', () => {
  const ts0 = Date.UTC(2026, 10, 1, 12)
  const { activity, locks } = chainSnapshot(ts0, ts0)

  test('one chain rooted at 100: 200 waits for it, 300 (blocked by 100 and 200) is one member with both blockers', () => {
    expect(lockChains(ts0, activity, locks)).toEqual([
      {
        root_pid: 100,
        root_xact_start: ts0 - 60_000,
        root_user: 'billing',
        root_application: 'nightly',
        root_state: 'idle in transaction',
        root_statement: "UPDATE accounts SET balance = 0 WHERE id = 1 /* 'root' */",
        started_at: ts0 - 5_000,
        members: [
          {
            pid: 200,
            blocked_by: [100],
            user: 'app',
            application: 'api',
            statement: 'UPDATE accounts SET balance = 1 WHERE id = 1',
            wait_started: ts0 - 5_000,
          },
          {
            pid: 300,
            blocked_by: [100, 200],
            user: 'admin',
            application: 'psql',
            statement: 'LOCK TABLE accounts',
            wait_started: ts0 - 2_000,
          },
        ],
      },
    ])
  })

  test("kept locks: the waiting ones and the blockers' locks of what is waited for; 100's read of public.other, 200's transaction id lock and 400's lock go", () => {
    expect(compactLocks(activity, locks).map((l) => [l.pid, l.lock_type, l.mode, l.relation_name, l.granted])).toEqual([
      [100, 'transactionid', 'ExclusiveLock', null, true],
      [100, 'relation', 'RowExclusiveLock', 'public.accounts', true],
      [200, 'transactionid', 'ShareLock', 'public.accounts', false],
      [200, 'relation', 'RowExclusiveLock', 'public.accounts', true],
      [300, 'relation', 'AccessExclusiveLock', 'public.accounts', false],
    ])
  })

  test('a deadlock cycle (no root) is one chain from its smallest pid; pids that are not PostgreSQL pids are ignored', () => {
    const cycle = [
      session(7, { blocking_pids: [8] }),
      session(8, { blocking_pids: [7] }),
      session(9, { blocking_pids: [1e20, -1] }),
    ]
    expect(lockChains(ts0, cycle, []).map((c) => [c.root_pid, c.members.map((m) => m.pid)])).toEqual([[7, [8]]])
  })
})

for (const kind of storeKinds) {
  describe(`session and lock history (${kind})`, () => {
    const api = agentSession(kind)
    // Polls every 10 s: the chain is seen at t(0) to t(3), gone at t(4) and t(5).
    const now = Date.now()
    const ts0 = Math.floor(now / 1000) * 1000 - 10 * 60 * SECOND
    const t = (i: number) => ts0 + i * 10 * SECOND
    let id = ''

    test('every poll is kept; /active and /locks answer the snapshot at or before `at`, the latest without it', async () => {
      for (let i = 0; i <= 5; i++) {
        const snap =
          i <= 3
            ? chainSnapshot(t(i), ts0)
            : {
                activity: [session(400, { duration_ms: 10 * i })],
                locks: [lock(400, { relation_name: 'public.orders' })],
              }
        id = await api.ingest(pgBatch('shop', t(i), snap))
      }
      const history = await api.ok(id, `/active/history?since=${iso(t(0))}&until=${iso(t(5))}`)
      expect(history).toEqual({
        since: iso(t(0)),
        until: iso(t(5)),
        snapshots: [0, 1, 2, 3, 4, 5].map((i) => ({
          ts: iso(t(i)),
          at: t(i),
          blocked: i <= 3 ? 2 : 0,
          longest_wait_ms: i <= 3 ? t(i) - ts0 + 5_000 : null,
          longest_ms: i <= 3 ? t(i) - ts0 + 60_000 : 10 * i,
        })),
        earlier_left_out: false,
      })
      const limited = await api.ok(id, `/active/history?since=${iso(t(0))}&until=${iso(t(5))}&limit=2`)
      expect([limited.snapshots.map((s: any) => s.at), limited.earlier_left_out]).toEqual([[t(4), t(5)], true])

      // at t(2) + 5 s: the snapshot of t(2), longest first; at an exact time, that time's; epoch ms or RFC 3339
      const at2 = await api.ok(id, `/active?at=${t(2) + 5000}`)
      expect(at2.map((s: any) => [s.pid, s.ts])).toEqual([
        [100, iso(t(2))],
        [200, iso(t(2))],
        [300, iso(t(2))],
        [400, iso(t(2))],
      ])
      expect(at2[2]).toMatchObject({ blocking_pids: [100, 200], query_text: 'LOCK TABLE accounts', user: 'admin' })
      expect((await api.ok(id, `/active?at=${iso(t(3))}`)).map((s: any) => s.ts)).toEqual(Array(4).fill(iso(t(3))))
      expect(await api.ok(id, `/active?at=${t(0) - 1}`)).toEqual([])
      expect((await api.ok(id, '/active')).map((s: any) => [s.pid, s.ts])).toEqual([[400, iso(t(5))]])
      expect((await api.ok(id, `/active?at=${t(2)}&limit=1`)).map((s: any) => s.pid)).toEqual([100])

      const locksAt1 = await api.ok(id, `/locks?at=${t(1)}`)
      expect(
        locksAt1.map((l: any) => [l.pid, l.lock_type, l.mode, l.relation_name, l.granted, l.blocked_by_pid, l.ts]),
      ).toEqual([
        [200, 'transactionid', 'ShareLock', 'public.accounts', false, 100, iso(t(1))],
        [300, 'relation', 'AccessExclusiveLock', 'public.accounts', false, 100, iso(t(1))],
        [100, 'transactionid', 'ExclusiveLock', null, true, null, iso(t(1))],
        [100, 'relation', 'RowExclusiveLock', 'public.accounts', true, null, iso(t(1))],
        [200, 'relation', 'RowExclusiveLock', 'public.accounts', true, null, iso(t(1))],
      ])
      // the latest (t(5)) without `at`: every lock the agent sent; with `at`, only those that wait or block (none)
      expect((await api.ok(id, '/locks')).map((l: any) => l.pid)).toEqual([400])
      expect(await api.ok(id, `/locks?at=${t(5)}`)).toEqual([])
    })

    test('/locks/chains: the ended chain with its root, members, first and last seen and duration', async () => {
      const chains = await api.ok(id, `/locks/chains?since=${iso(t(0) - HOUR)}&until=${iso(t(5))}`)
      expect(chains).toEqual([
        {
          root: {
            pid: 100,
            user: 'billing',
            application: 'nightly',
            state: 'idle in transaction',
            statement: "UPDATE accounts SET balance = 0 WHERE id = 1 /* 'root' */",
            xact_start: iso(ts0 - 60_000),
          },
          members: [
            {
              pid: 200,
              blocked_by: [100],
              user: 'app',
              application: 'api',
              statement: 'UPDATE accounts SET balance = 1 WHERE id = 1',
              waiting_since: iso(ts0 - 5_000),
              first_seen: iso(t(0)),
              last_seen: iso(t(3)),
            },
            {
              pid: 300,
              blocked_by: [100, 200],
              user: 'admin',
              application: 'psql',
              statement: 'LOCK TABLE accounts',
              waiting_since: iso(ts0 - 2_000),
              first_seen: iso(t(0)),
              last_seen: iso(t(3)),
            },
          ],
          started_at: iso(ts0 - 5_000),
          first_seen: iso(t(0)),
          last_seen: iso(t(3)),
          duration_ms: t(3) - (ts0 - 5_000),
          samples: 4,
          max_blocked: 2,
          ongoing: false,
        },
      ])
      // a window after the chain ended has none; one that overlaps its end has it
      expect(await api.ok(id, `/locks/chains?since=${iso(t(4))}&until=${iso(t(5))}`)).toEqual([])
      expect((await api.ok(id, `/locks/chains?since=${iso(t(3))}&until=${iso(t(5))}`)).length).toBe(1)
    })

    test("a late batch (from the agent's buffer) of an earlier poll moves the chain's and its member's first seen back and counts its sample", async () => {
      const early = ts0 - 4_000
      const { activity, locks } = chainSnapshot(early, ts0)
      const only200 = {
        activity: activity.filter((s) => s.pid !== 300).map((s) => (s.pid === 200 ? { ...s, duration_ms: 1_000 } : s)),
        locks: locks
          .filter((l) => l.pid !== 300)
          .map((l) => (l.pid === 200 && !l.granted ? { ...l, duration_ms: 1_000 } : l)),
      }
      await api.ingest(pgBatch('shop', early, only200))
      const [chain] = await api.ok(id, `/locks/chains?since=${iso(t(0) - HOUR)}&until=${iso(t(5))}`)
      expect([chain.first_seen, chain.last_seen, chain.samples, chain.started_at, chain.duration_ms]).toEqual([
        iso(early),
        iso(t(3)),
        5,
        iso(ts0 - 5_000),
        t(3) - (ts0 - 5_000),
      ])
      expect(chain.members.map((m: any) => [m.pid, m.first_seen, m.last_seen])).toEqual([
        [200, iso(early), iso(t(3))],
        [300, iso(t(0)), iso(t(3))],
      ])
      // the root's fields stay those of its latest sighting
      expect([chain.root.statement, chain.root.xact_start]).toEqual([
        "UPDATE accounts SET balance = 0 WHERE id = 1 /* 'root' */",
        iso(ts0 - 60_000),
      ])
    })

    test('bad `at` is a 400 naming it; another organization gets 404 on every history read', async () => {
      for (const bad of ['yesterday', '-5', '1e12', '99999999999999999', '2026-13-45T99:00:00Z']) {
        for (const path of ['/active', '/locks']) {
          expect({ path, bad, ...(await api.get(id, `${path}?at=${encodeURIComponent(bad)}`)) }).toEqual({
            path,
            bad,
            status: 400,
            body: {
              error:
                'at must be a time in epoch milliseconds (like 1795644671436) or RFC 3339 (like 2026-01-31T12:00:00Z)',
            },
          })
        }
      }
      expect((await api.get(id, '/locks/chains?since=soon')).status).toBe(400)
      await api.expectHiddenFromOtherOrganizations(id, [
        `/active?at=${t(2)}`,
        `/locks?at=${t(2)}`,
        '/active/history',
        '/locks/chains',
      ])
    })

    test('order=longest lists the longest chain first, however late it began; a bad order is a 400 naming it', async () => {
      // At t(1): 10 has waited 12 min for 1 (began first); 21 waits 0.3 s for 2 and 31 0.2 s for 3 (began last).
      const waiter = (pid: number, root: number, waitedMs: number) => [
        session(pid, { wait_event_type: 'Lock', wait_event: 'relation', duration_ms: waitedMs, blocking_pids: [root] }),
        session(root, {
          state: 'idle in transaction',
          duration_ms: waitedMs + 1000,
          xact_start: t(1) - waitedMs - 1000,
        }),
      ]
      const activity = [...waiter(10, 1, 12 * 60_000), ...waiter(21, 2, 300), ...waiter(31, 3, 200)]
      const db = await api.ingest(pgBatch('chain-order', t(1), { activity, locks: [] }))
      const roots = async (q: string) =>
        (await api.ok(db, `/locks/chains?since=${iso(t(0) - HOUR)}${q}`)).map((c: any) => [c.root.pid, c.duration_ms])
      expect(await roots('&order=longest')).toEqual([
        [1, 12 * 60_000],
        [2, 300],
        [3, 200],
      ])
      expect((await roots('')).map(([pid]: number[]) => pid)).toEqual([3, 2, 1])
      expect(await roots('&order=longest&limit=1')).toEqual([[1, 12 * 60_000]])
      const bad = await api.get(db, '/locks/chains?order=shortest')
      expect([bad.status, bad.body.error]).toEqual([400, expect.stringContaining('order')])
    })

    test('a hostile snapshot cannot make history grow with its square: 32 blockers per waiter, 100 chains, 100 members each', async () => {
      // One waiter naming 20,000 blockers (none of them a session), and 300 waiters behind one root.
      const many = Array.from({ length: 20_000 }, (_, i) => 100_000 + i)
      const text = `SELECT '${'y'.repeat(9_000)}'`
      const waiters = Array.from({ length: 300 }, (_, i) =>
        session(1_000 + i, { query_text: text, blocking_pids: [999] }),
      )
      const started = Date.now()
      const db = await api.ingest(
        pgBatch('hostile-chains', t(0), {
          activity: [
            session(10, { query_text: text, blocking_pids: many }),
            session(999, { blocking_pids: [] }),
            ...waiters,
          ],
        }),
      )
      expect(Date.now() - started).toBeLessThan(20_000) // it took 70 s and wrote 3 GB before the caps
      const chains = await api.ok(db, `/locks/chains?since=${iso(t(0) - HOUR)}&limit=500`)
      expect(chains.length).toBe(33)
      // The largest chain first: the root 999 with its first 100 waiters by pid; then the 32 blockers of pid 10 counted.
      expect([
        chains[0].root.pid,
        chains[0].members.length,
        chains[0].members[0].pid,
        chains[0].members.at(-1).pid,
      ]).toEqual([999, 100, 1_000, 1_099])
      expect(chains[0].members[0].statement).toBe(text.slice(0, 2_000))
      const fake = chains.filter((c: any) => c.root.pid >= 100_000)
      expect(fake.length).toBe(32)
      for (const c of fake) expect(c.members.map((m: any) => [m.pid, m.blocked_by.length])).toEqual([[10, 32]])
      const direct = lockChains(t(0), [session(10, { blocking_pids: many })], [])
      expect([direct.length, direct[0]!.members[0]!.blocked_by]).toEqual([32, many.slice(0, 32)])
      // 150 separate chains: the 100 largest are kept (all of one member here: the smallest roots).
      const pairs = lockChains(
        t(0),
        Array.from({ length: 150 }, (_, i) => session(6_000 + i, { blocking_pids: [5_000 + i] })),
        [],
      )
      expect([pairs.length, pairs[0]!.root_pid, pairs.at(-1)!.root_pid]).toEqual([100, 5_000, 5_099])
    })

    test("a lock or session duration at the wire's bound (1e15 ms) leaves /locks/chains answering, its wait start at the epoch; past it, a 400 naming the field", async () => {
      // A hostile review: duration_ms 1e16 made a wait start the API could not write as a time (a 500 for
      // good, the upsert keeping the smallest), and on PostgreSQL 1e21 overflowed the BIGINT column.
      const MAX_MS = 1e15
      const snapshot = (duration: number) => ({
        activity: [
          session(1),
          session(2, { blocking_pids: [1], duration_ms: duration }),
          session(3, { blocking_pids: [1], duration_ms: duration }),
        ],
        locks: [lock(2, { mode: 'AccessExclusiveLock', granted: false, blocked_by_pid: 1, duration_ms: duration })],
      })
      const db = await api.ingest(pgBatch('huge-waits', t(0), snapshot(MAX_MS)))
      await api.ingest(pgBatch('huge-waits', t(1), snapshot(5)))
      const chains = await api.ok(db, `/locks/chains?since=${iso(t(0) - HOUR)}`)
      expect(
        chains.map((c: any) => [c.root.pid, c.started_at, c.members.map((m: any) => [m.pid, m.waiting_since])]),
      ).toEqual([
        [
          1,
          iso(0),
          [
            [2, iso(0)],
            [3, iso(0)],
          ],
        ],
      ])
      for (const [field, duration] of [
        ['locks.0.duration_ms', 1e21],
        ['activity.1.duration_ms', 1e16],
      ] as const) {
        const batch = pgBatch('huge-waits', t(2), snapshot(5)) as any
        if (field.startsWith('locks')) batch.locks[0].duration_ms = duration
        else batch.activity[1].duration_ms = duration
        const res = await api.server.call('POST', '/api/v1/ingest', { apiKey: api.key, body: batch })
        expect([res.status, String(res.body.error).startsWith(`invalid ${field}`)]).toEqual([400, true])
      }
      expect((await api.get(db, `/locks/chains?since=${iso(t(0) - HOUR)}`)).status).toBe(200)
      // The chain code alone: a start never before the epoch nor after the snapshot.
      const [direct] = lockChains(t(0), snapshot(MAX_MS).activity, snapshot(MAX_MS).locks)
      expect([direct!.started_at, direct!.members.map((m) => m.wait_started)]).toEqual([0, [0, 0]])
    })

    test("statement texts are kept as the agent bounds them (10,000 characters); a ClickHouse database's sessions are kept too, with no chains", async () => {
      const long = `SELECT '${'x'.repeat(20_000)}'`
      const db = await api.ingest(
        pgBatch('texts', t(0), {
          activity: [session(500, { query_text: long, blocking_pids: [501] })],
          locks: [lock(500, { granted: false, blocked_by_pid: 501, query_text: long })],
        }),
      )
      const [stored] = await api.ok(db, `/active?at=${t(0)}`)
      expect([stored.query_text.length, stored.query_text]).toEqual([10_000, long.slice(0, 10_000)])
      expect((await api.ok(db, `/locks?at=${t(0)}`))[0].query_text).toBe(long.slice(0, 10_000))
      const [chain] = await api.ok(db, `/locks/chains?since=${iso(t(0) - HOUR)}`)
      // A member's statement is cut at 2,000 characters (a chain repeats one for each member).
      expect([chain.root.pid, chain.root.statement, chain.members[0].statement]).toEqual([
        501,
        null,
        long.slice(0, 2_000),
      ])

      const ch = await api.ingest(
        chBatch('events', t(1), {
          activity: [session(0, { pid: 'query-1', query_text: 'SELECT 1', blocking_pids: [] }) as any],
        }),
      )
      expect((await api.ok(ch, `/active?at=${t(1)}`)).map((s: any) => [s.pid, s.ts])).toEqual([['query-1', iso(t(1))]])
      expect(
        (await api.ok(ch, `/active/history?since=${iso(t(0))}`)).snapshots.map((x: any) => [x.at, x.blocked]),
      ).toEqual([[t(1), 0]])
      expect(await api.get(ch, '/locks/chains')).toEqual({
        status: 400,
        body: { error: 'this endpoint serves postgres databases; "events" is a clickhouse database' },
      })
    })

    test('retention: every poll for a day, then only snapshots with a lock wait of 30 s or a statement or transaction of 5 min, and chains of 30 s; nothing past the retention', async () => {
      const server = api.server
      const monitor = createMonitor(server.deps, { retentionDays: 30 })
      const old = now - 2 * DAY
      const quiet = { activity: [session(400, { duration_ms: 1_000 })], locks: [] }
      const long = { activity: [session(400, { duration_ms: sessionHistoryLimits.longMs })], locks: [] }
      const openTransaction = {
        activity: [
          session(400, {
            duration_ms: 10,
            state: 'idle in transaction',
            xact_start: old - sessionHistoryLimits.longMs - 1,
          }),
        ],
        locks: [],
      }
      const db = await api.ingest(pgBatch('retained', old, quiet))
      await api.ingest(pgBatch('retained', old + 10 * SECOND, long))
      // a chain whose first waiter has waited 55 s (since old - 35 s), then one of a busy OLTP load: 5 s
      await api.ingest(pgBatch('retained', old + 20 * SECOND, chainSnapshot(old + 20 * SECOND, old - 30 * SECOND)))
      await api.ingest(pgBatch('retained', old + 30 * SECOND, openTransaction))
      await api.ingest(pgBatch('retained', old + 40 * SECOND, { ...quiet, locks: [lock(400, {})] }))
      await api.ingest(pgBatch('retained', old + 50 * SECOND, chainSnapshot(old + 50 * SECOND, old + 50 * SECOND)))
      const recent = now - DAY + HOUR
      await api.ingest(pgBatch('retained', recent, quiet))
      const times = async () =>
        (await api.ok(db, `/active/history?since=${iso(old - HOUR)}&until=${iso(now)}`)).snapshots.map((s: any) => s.at)
      const chainsWindow = `/locks/chains?since=${iso(old - HOUR)}&until=${iso(now)}`
      const chains = async () =>
        (await api.ok(db, chainsWindow)).map((c: any) => [
          c.root.xact_start,
          c.duration_ms,
          c.members.map((m: any) => m.pid),
        ])
      expect(await times()).toEqual([old, old + 10_000, old + 20_000, old + 30_000, old + 40_000, old + 50_000, recent])
      expect(await chains()).toEqual([
        [iso(old + 50_000 - 60_000), 5_000, [200, 300]],
        [iso(old - 30_000 - 60_000), 55_000, [200, 300]],
      ])

      await monitor.runRetention(now)
      expect(await times()).toEqual([old + 10_000, old + 20_000, old + 30_000, recent])
      expect((await api.ok(db, `/active?at=${old + 15_000}`)).map((s: any) => s.ts)).toEqual([iso(old + 10_000)])
      expect(await chains()).toEqual([[iso(old - 30_000 - 60_000), 55_000, [200, 300]]])
      expect(await api.rowCount('lock_chain_members', db)).toBe(2)

      // 30 days on: gone (and the recent quiet one compacted), chains and their members with them
      await monitor.runRetention(old + 30 * DAY + HOUR)
      expect(await times()).toEqual([])
      expect(await api.ok(db, chainsWindow)).toEqual([])
      expect([await api.rowCount('lock_chains', db), await api.rowCount('lock_chain_members', db)]).toEqual([0, 0])
    })
  })
}
