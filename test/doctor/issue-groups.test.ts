// One cause, one issue, one alert (issue 26), on real PostgreSQL 17 watched by the real agent and a
// real health monitor mailing to the server's log. One session idle in a REPEATABLE READ transaction
// holds back VACUUM on a table of 19,990 dead rows and blocks an UPDATE: four findings (idle session,
// xmin holder, dead rows, blocked session) are one group led by the session, and the monitor opens one
// alert and sends one mail for it, with the four listed under it; it resolves (one mail) once the
// session ends and VACUUM has run. Two sessions idle alike get titles that tell them apart. One missing
// index on orders.customer_id (sequential scans, a slow statement, an unindexed foreign key, an invalid
// unique index) is one group, with one CREATE INDEX for the column.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { explainSampling } from '../../src/agent/collectors/postgres/explain-plans.ts'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { type PostgresDoctorRig, postgresDoctorRig, settled, workload } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(120_000)

let rig: PostgresDoctorRig
const clients: postgres.Sql[] = []
const connect = (application: string) => {
  const sql = postgres(rig.dsn, { max: 1, onnotice: () => {}, connection: { application_name: application } })
  clients.push(sql)
  return sql
}

beforeAll(async () => {
  rig = await postgresDoctorRig(17, {
    thresholds: {
      pg_idle_in_transaction: { warning_s: 0, critical_s: 0 },
      pg_blocked_sessions: { warning_wait_s: 0, critical_wait_s: 3600 },
      pg_slow_statements: { warning_mean_ms: 0.5, min_calls: 10 },
      pg_sequential_scans: { min_seq_scans: 50 },
    },
  })
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end({ timeout: 1 }).catch(() => {})))
  await rig?.stop()
})

/** The mails the server logged whose subject starts with `prefix`. */
const mails = (prefix: string) =>
  rig.server.logs.filter((l) => l.includes(' INFO mail ') && l.includes(`subject="${prefix}`))

describe('an xmin holder', () => {
  test('one group led by the session, one alert and one mail with its consequences; resolved once with one mail', async () => {
    await workload(rig.dsn, async (s) => {
      await s.unsafe('CREATE TABLE held (id int PRIMARY KEY, v int)')
      await s.unsafe('INSERT INTO held SELECT g, 0 FROM generate_series(1, 20000) g')
    })
    const holder = connect('holder "app"\n*/')
    const { pid } = (await holder<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!
    const release = Promise.withResolvers<void>()
    const holding = holder
      .begin('ISOLATION LEVEL REPEATABLE READ', async (tx) => {
        await tx`SELECT count(*) FROM held`
        await tx`SELECT * FROM held WHERE id = 1 FOR UPDATE`
        // Idle in the transaction until the test ends it.
        await release.promise
        throw new Error('rollback')
      })
      .catch(() => {})
    try {
      await workload(rig.dsn, async (s) => {
        await s.unsafe('DELETE FROM held WHERE id > 10')
      })
      await rig.sql.unsafe('VACUUM held')
      await settled(
        rig,
        'the dead rows VACUUM could not remove',
        `SELECT n_dead_tup::int FROM pg_stat_user_tables WHERE relname = 'held'`,
        19_990,
      )
      const waiter = connect('waiter')
      const waiting = waiter`UPDATE held SET v = 1 WHERE id = 1`.catch(() => {})
      await settled(
        rig,
        'the UPDATE waiting',
        `SELECT count(*)::int FROM pg_stat_activity WHERE ${pid} = ANY(pg_blocking_pids(pid))`,
        1,
      )

      const cause = `session:pid ${pid}`
      const expected = [
        `pg_idle_in_transaction:pid ${pid}`,
        `pg_blocked_sessions:pid ${pid}`,
        `pg_dead_tuples:public.held`,
        `pg_xmin_horizon:pid ${pid}`,
      ]
      const doctor = await until('the four findings of the holder', async () => {
        await rig.cycle()
        const d = await rig.api('/doctor')
        const keys = (d.top_issues as any[]).filter((f) => f.cause === cause).map((f) => f.key)
        return expected.every((k) => keys.includes(k)) ? d : undefined
      })
      const group = (doctor.groups as any[]).find((g) => g.key === cause)
      expect(group).toMatchObject({ kind: 'session', severity: 'critical', lead: `pg_idle_in_transaction:pid ${pid}` })
      expect([...group.findings].sort()).toEqual([...expected].sort())
      expect(group.findings[0]).toBe(group.lead)
      // Every finding of the holder names it; no other group holds any of them.
      expect((doctor.groups as any[]).filter((g) => g.findings.some((k: string) => expected.includes(k)))).toHaveLength(
        1,
      )
      // Ending the session is offered once, though three of its findings say so.
      const terminations = (group.how_to_fix as string[]).filter((c) =>
        c.startsWith(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ${pid} `),
      )
      expect(terminations).toHaveLength(1)
      const perFinding = (doctor.top_issues as any[])
        .filter((f) => expected.includes(f.key))
        .flatMap((f) => f.how_to_fix as string[])
      expect(
        perFinding.filter((c) =>
          c.startsWith(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ${pid} `),
        ).length,
      ).toBeGreaterThanOrEqual(3)
      // The title names the session: pid, user, application (as plain text) and the table it holds.
      const lead = (doctor.top_issues as any[]).find((f) => f.key === group.lead)
      // (The agent writes a control character of an application name as \x0a.)
      expect(lead.title).toMatch(
        new RegExp(
          `^Session idle in a transaction for [\\d.]+ (s|min): pid ${pid}, user postgres, application "holder "app"\\\\x0a\\*/", on public\\.held$`,
        ),
      )

      const monitor = createMonitor(rig.server.deps, { retentionDays: 30 })
      const opened = await monitor.runOnce(rig.server.deps.clock())
      expect(opened.alerts).toEqual({ opened: 1, resolved: 0 })
      await rig.server.deps.mailer.idle()
      expect(mails('dbm alert:')).toHaveLength(1)
      const alerts = await rig.api('/alerts')
      expect(alerts).toHaveLength(1)
      expect(alerts[0]).toMatchObject({
        key: cause,
        rule: 'pg_idle_in_transaction',
        severity: 'critical',
        title: lead.title,
      })
      expect(alerts[0].consequences.map((c: any) => c.key)).toEqual(group.findings)
      // The next evaluation, the holder still there: no other alert, no other mail.
      expect((await monitor.runOnce(rig.server.deps.clock() + 60_000)).alerts).toEqual({ opened: 0, resolved: 0 })

      release.resolve()
      await holding
      await waiting
      await rig.sql.unsafe('VACUUM held')
      await settled(
        rig,
        'the dead rows removed',
        `SELECT n_dead_tup::int FROM pg_stat_user_tables WHERE relname = 'held'`,
        0,
      )
      await until('the holder gone from the doctor', async () => {
        await rig.cycle()
        return ((await rig.api('/doctor')).top_issues as any[]).some((f) => f.cause === cause) ? undefined : true
      })
      expect((await monitor.runOnce(rig.server.deps.clock() + 120_000)).alerts).toEqual({ opened: 0, resolved: 1 })
      await rig.server.deps.mailer.idle()
      expect(mails('dbm alert:')).toHaveLength(1)
      expect(mails('dbm resolved:')).toHaveLength(1)
      const [resolved] = await rig.api('/alerts?status=resolved')
      expect(resolved).toMatchObject({ key: cause, resolved_at: expect.any(String) })
    } finally {
      release.resolve()
    }
  })

  test('two sessions idle in a transaction alike have titles that tell them apart', async () => {
    const sessions = [connect('billing'), connect('reports')]
    const pids: number[] = []
    const done = Promise.withResolvers<void>()
    // Each session's pid at its own index (they start at once: whichever answers first must not swap them).
    const holds = sessions.map((s, i) =>
      s.begin(async (tx) => {
        pids[i] = (await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
        await tx`SELECT 1 FROM held WHERE id = 1`
        await done.promise
      }),
    )
    try {
      await until('both idle', async () => (pids.filter(Boolean).length === 2 ? true : undefined))
      const found = await until('both findings', async () => {
        await rig.cycle()
        const f = await rig.findings('pg_idle_in_transaction')
        const ours = f.filter((x: any) => pids.some((p) => x.key === `pg_idle_in_transaction:pid ${p}`))
        return ours.length === 2 ? ours : undefined
      })
      const titles = found.map((f: any) => f.title as string)
      expect(new Set(titles).size).toBe(2)
      for (const [i, application] of ['billing', 'reports'].entries()) {
        expect(
          titles.filter(
            (t: string) =>
              t.includes(`pid ${pids[i]}, `) &&
              t.includes(`application "${application}"`) &&
              t.endsWith(', on public.held'),
          ),
        ).toHaveLength(1)
      }
    } finally {
      done.resolve()
      await Promise.all(holds)
    }
  })
})

test('a missing index: sequential scans, a slow statement, an unindexed foreign key and an invalid index are one group with one CREATE INDEX', async () => {
  const interval = explainSampling.intervalMs
  explainSampling.intervalMs = 0 // sample plans every cycle
  try {
    await workload(rig.dsn, async (s) => {
      await s.unsafe('CREATE TABLE customers (id int PRIMARY KEY)')
      await s.unsafe('INSERT INTO customers SELECT g FROM generate_series(1, 5000) g')
      await s.unsafe(
        'CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, note text)',
      )
      await s.unsafe(`INSERT INTO orders SELECT g, 1 + g % 5000, 'order ' || g FROM generate_series(1, 100000) g`)
    })
    // A unique index on a column with duplicates: its concurrent build fails and leaves it invalid.
    await rig.sql
      .unsafe('CREATE UNIQUE INDEX CONCURRENTLY orders_customer_once ON orders (customer_id)')
      .catch(() => {})
    await rig.sql.unsafe('ANALYZE orders')
    await settled(
      rig,
      'the inserts',
      `SELECT n_live_tup::int FROM pg_stat_user_tables WHERE relname = 'orders'`,
      100_000,
    )
    await rig.sql`SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`
    await rig.cycle() // the tables' first sample carries no deltas
    const before = (
      await rig.sql<{ seq: number }[]>`SELECT seq_scan::int AS seq FROM pg_stat_user_tables WHERE relname = 'orders'`
    )[0]!.seq
    await workload(rig.dsn, async (s) => {
      await s`SET max_parallel_workers_per_gather = 0`
      for (let i = 0; i < 60; i++) await s.unsafe('SELECT * FROM orders WHERE customer_id = $1', [1 + i])
    })
    await settled(
      rig,
      'the scans',
      `SELECT seq_scan::int FROM pg_stat_user_tables WHERE relname = 'orders'`,
      before + 60,
    )
    const cause = 'index:public.orders(customer_id)'
    const rules = ['pg_invalid_indexes', 'pg_sequential_scans', 'pg_slow_statements', 'pg_unindexed_foreign_keys']
    const doctor = await until('the four findings of the index', async () => {
      await rig.cycle()
      const d = await rig.api('/doctor')
      const found = (d.top_issues as any[]).filter((f) => f.cause === cause).map((f) => f.rule)
      return rules.every((r) => found.includes(r)) ? d : undefined
    }).catch(async (e) => {
      const d = await rig.api('/doctor')
      throw new Error(`${e.message}: ${JSON.stringify((d.top_issues as any[]).map((f) => [f.key, f.cause]))}`)
    })
    const group = (doctor.groups as any[]).find((g) => g.key === cause)
    expect(group).toMatchObject({ kind: 'index', lead: 'pg_invalid_indexes:public.orders_customer_once' })
    expect(group.findings.map((k: string) => k.split(':')[0]).sort()).toEqual(rules)
    // The plain index for the column once (three findings offer one each), beside the unique index's rebuild.
    const plain = (group.how_to_fix as string[]).filter((c) =>
      /^CREATE INDEX CONCURRENTLY (\S+ )?ON public\.orders \(customer_id/.test(c),
    )
    expect(plain).toHaveLength(1)
    const offered = (doctor.top_issues as any[])
      .filter((f) => f.cause === cause)
      .flatMap((f) => f.how_to_fix as string[])
    expect(
      offered.filter((c) => /^CREATE INDEX CONCURRENTLY (\S+ )?ON public\.orders \(customer_id/.test(c)).length,
    ).toBe(3)
    // No other group is about this index's table and column.
    expect((doctor.groups as any[]).filter((g) => g.key.startsWith('index:'))).toHaveLength(1)
  } finally {
    explainSampling.intervalMs = interval
  }
})
