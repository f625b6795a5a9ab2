// The PostgreSQL activity rules on the shared PostgreSQL 17, each driven by the real agent over a
// fresh database put into the state: an inactive replication slot retaining WAL, requested
// checkpoints, slow statements, and a top statement whose plan changed. Each finding is asserted
// through the API with its severity and numbers, then cured and seen to go.
import { afterEach, expect, setSystemTime, test } from 'bun:test'
import { explainSampling } from '../../src/agent/collectors/postgres/explain-plans.ts'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'

const MB = 1024 ** 2
const HOUR = 3600_000

let rig: PostgresDoctorRig | undefined
afterEach(async () => {
  await rig?.stop()
  rig = undefined
})

/**
 * Runs one agent cycle and reads the rule's findings with the process clock (the agent's and the
 * server's alike) `ms` ahead, so the data of earlier cycles has left the rule's window. setSystemTime
 * freezes the clock, so it is given back at once.
 */
async function later<T>(ms: number, step: () => Promise<T>): Promise<T> {
  setSystemTime(new Date(performance.timeOrigin + performance.now() + ms))
  try {
    return await step()
  } finally {
    setSystemTime()
  }
}

test('an inactive slot: warning past 1 MB retained, critical past 6 MB, gone once dropped', async () => {
  rig = await postgresDoctorRig(17, {
    thresholds: { pg_inactive_replication_slot: { warning_bytes: MB, critical_bytes: 6 * MB } },
  })
  const { sql } = rig
  // Slots are server-wide on the shared server: a name of this test's own, dropped at the end.
  const slot = `dbm_idle_${Math.random().toString(36).slice(2, 8)}`
  const retained = async () =>
    (
      await sql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::float8 AS b FROM pg_replication_slots WHERE slot_name = ${slot}`
    )[0]!.b as number
  // A new slot reserves the WAL from the last checkpoint's redo point: a checkpoint first, so it starts near zero.
  await sql`CHECKPOINT`
  await sql`SELECT pg_create_physical_replication_slot(${slot}, true)`
  try {
    expect(await retained()).toBeLessThan(MB)
    await rig.cycle()
    expect(
      await rig.findings('pg_inactive_replication_slot').then((f) => f.filter((x) => x.key.endsWith(slot))),
    ).toEqual([])

    await sql`CREATE TABLE filler AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 8000) g`
    const warned = await retained()
    expect(warned).toBeGreaterThan(MB)
    expect(warned).toBeLessThan(6 * MB)
    await rig.cycle()
    const [warning] = (await rig.findings('pg_inactive_replication_slot')).filter(
      (f) => f.key === `pg_inactive_replication_slot:${slot}`,
    )
    expect(warning).toMatchObject({
      severity: 'warning',
      category: 'replication',
      title: 'An inactive replication slot retains WAL',
      objects: [slot],
      metrics: { slot_type: 'physical', wal_status: 'reserved' },
    })
    expect(warning.metrics.retained_bytes).toBeGreaterThanOrEqual(warned)
    expect(warning.metrics.retained_bytes).toBeLessThan(6 * MB)
    expect(warning.detail).toContain(`The physical slot '${slot}' is not in use and holds back`)
    expect(warning.how_to_fix).toContain(`SELECT pg_drop_replication_slot('${slot}');`)

    await sql`INSERT INTO filler SELECT g, repeat('y', 200) FROM generate_series(1, 30000) g`
    const critical = await retained()
    expect(critical).toBeGreaterThan(6 * MB)
    await rig.cycle()
    const [worse] = (await rig.findings('pg_inactive_replication_slot')).filter(
      (f) => f.key === `pg_inactive_replication_slot:${slot}`,
    )
    expect(worse).toMatchObject({ severity: 'critical', objects: [slot] })
    expect(worse.metrics.retained_bytes).toBeGreaterThanOrEqual(critical)
  } finally {
    await sql`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ${slot}`
  }
  await rig.cycle()
  expect((await rig.findings('pg_inactive_replication_slot')).filter((f) => f.key.endsWith(slot))).toEqual([])
})

test('CHECKPOINT commands are requested checkpoints that little WAL explains: an info, no max_wal_size; gone once the window has passed', async () => {
  rig = await postgresDoctorRig(17, { thresholds: { pg_requested_checkpoints: { min_checkpoints: 3 } } })
  await rig.cycle()
  expect(await rig.findings('pg_requested_checkpoints')).toEqual([])

  // PostgreSQL 17 counts CHECKPOINT commands in pg_stat_checkpointer.num_requested.
  for (let i = 0; i < 4; i++) await rig.sql`CHECKPOINT`
  await rig.cycle()
  const [finding] = await rig.findings('pg_requested_checkpoints')
  // The WAL written per checkpoint_timeout (pg_stat_wal) fits in max_wal_size many times: forced, not WAL-driven.
  expect(finding).toMatchObject({
    key: 'pg_requested_checkpoints',
    severity: 'info',
    category: 'configuration',
    title: 'Checkpoints are forced by CHECKPOINT commands or backups',
  })
  // Other tests on the shared server may request checkpoints too, and a timed one may fall in between.
  expect(finding.metrics.checkpoints_req).toBeGreaterThanOrEqual(4)
  expect(finding.metrics.requested_share).toBeGreaterThanOrEqual(0.5)
  expect(finding.detail).toContain(
    `${finding.metrics.checkpoints_req} of ${finding.metrics.checkpoints_req + finding.metrics.checkpoints_timed} checkpoints`,
  )
  expect(finding.detail).toContain('which already holds that: the requested checkpoints come from elsewhere')
  expect(finding.how_to_fix.join('\n')).not.toContain('max_wal_size')

  // Six hours later (max_wal_size raised, no more CHECKPOINT commands) the window holds no requested checkpoints.
  const after = await later(6 * HOUR + 2 * 60_000, async () => {
    await rig!.cycle()
    const recent = (await rig!.api(`/bgwriter?since=${new Date(Date.now() - 6 * HOUR).toISOString()}`)) as {
      checkpoints_req: number | null
    }[]
    expect(recent.length).toBeGreaterThan(0)
    expect(recent.reduce((sum, p) => sum + (p.checkpoints_req ?? 0), 0)).toBeLessThan(3)
    return rig!.findings('pg_requested_checkpoints')
  })
  expect(after).toEqual([])
})

test('slow statements: named with their numbers, critical past the critical mean; gone once fast in a later hour', async () => {
  rig = await postgresDoctorRig(17, {
    thresholds: { pg_slow_statements: { min_calls: 3, warning_mean_ms: 100, critical_mean_ms: 300 } },
  })
  const { sql } = rig
  await rig.cycle()
  for (let i = 0; i < 4; i++) await sql`SELECT pg_sleep(${0.15})`
  for (let i = 0; i < 3; i++) await sql`SELECT 1 FROM pg_sleep(${0.35})`
  for (let i = 0; i < 50; i++) await sql`SELECT ${i}::int + 1 AS fast`
  await rig.cycle()

  const statements = (await rig.api('/queries?sort_by=total_time')) as { query_hash: string; query_text: string }[]
  const hashOf = (text: string) => statements.find((q) => q.query_text === text)!.query_hash
  const sleepy = hashOf('SELECT pg_sleep($1)')
  const sleepier = hashOf('SELECT $2 FROM pg_sleep($1)')

  const findings = await rig.findings('pg_slow_statements')
  expect(findings.map((f) => [f.key, f.severity])).toEqual([
    [`pg_slow_statements:${sleepier}`, 'critical'],
    [`pg_slow_statements:${sleepy}`, 'warning'],
  ])
  const [critical, warning] = findings
  expect(critical).toMatchObject({
    category: 'performance',
    objects: [sleepier],
    metrics: { query_hash: sleepier, calls: 3 },
  })
  expect(critical.metrics.mean_time_ms).toBeGreaterThanOrEqual(350)
  expect(critical.metrics.mean_time_ms).toBeLessThan(1000)
  expect(warning.metrics).toMatchObject({ query_hash: sleepy, calls: 4 })
  expect(warning.metrics.mean_time_ms).toBeGreaterThanOrEqual(150)
  expect(warning.metrics.mean_time_ms).toBeLessThan(300)
  expect(warning.metrics.share).toBeGreaterThan(0.05)
  expect(warning.title).toBe('Slow statement: SELECT pg_sleep($1)')
  // A minute of data, not the hour of the window.
  expect(warning.detail).toContain(
    `Statement ${sleepy} ran 4 times in the last 1.0 min (its statistics cover no more of the 1.0 h window) with a mean of`,
  )
  // The statement's text stays in the detail; the command fetches it by its queryid.
  expect(warning.how_to_investigate).toContain(
    `SELECT query FROM pg_stat_statements WHERE queryid = ${sleepy};   -- its text, to run under EXPLAIN (ANALYZE, BUFFERS) with typical values for the $n parameters`,
  )
  expect(warning.how_to_investigate).toContain(
    `GET /api/v1/databases/${rig.dbId}/queries/${sleepy}   -- its calls and time over time`,
  )

  // An hour later the statement is fast (the fix): it is in the window, and not slow.
  const after = await later(HOUR + 2 * 60_000, async () => {
    for (let i = 0; i < 4; i++) await sql`SELECT pg_sleep(${0.001})`
    await rig!.cycle()
    const recent = (await rig!.api(
      `/queries?sort_by=total_time&since=${new Date(Date.now() - HOUR).toISOString()}`,
    )) as { query_hash: string; total_calls: number }[]
    expect(recent.find((q) => q.query_hash === sleepy)?.total_calls).toBe(4)
    return rig!.findings('pg_slow_statements')
  })
  expect(after).toEqual([])
})

test('a top statement whose plan changed for a costlier one: warning with both costs; gone once the plan is back', async () => {
  const interval = explainSampling.intervalMs
  explainSampling.intervalMs = 0 // sample plans every cycle instead of every 5 minutes
  try {
    rig = await postgresDoctorRig(17)
    const { sql } = rig
    await sql`CREATE TABLE plan_t (id serial PRIMARY KEY, grp int NOT NULL, v int NOT NULL)`
    await sql`INSERT INTO plan_t (grp, v) SELECT g % 1000, g FROM generate_series(1, 100000) g`
    await sql`CREATE INDEX plan_t_grp ON plan_t (grp)`
    await sql`ANALYZE plan_t`
    const workload = async (n: number) => {
      for (let i = 0; i < n; i++) await sql`SELECT count(*), sum(v) FROM plan_t WHERE grp = ${i % 1000}`
    }
    await workload(300)
    await rig.cycle()
    await rig.cycle()
    const statements = (await rig.api('/queries?sort_by=total_time')) as { query_hash: string; query_text: string }[]
    const hash = statements.find(
      (q) => q.query_text === 'SELECT count(*), sum(v) FROM plan_t WHERE grp = $1',
    )!.query_hash
    const indexed = (await rig.api(`/queries/${hash}/explain`)) as {
      plan_hash: string
      index_scans: number
      total_cost: number
      ts: string
    }[]
    expect(indexed.length).toBe(2)
    expect(indexed.every((p) => p.index_scans === 1 && p.plan_hash === indexed[0]!.plan_hash)).toBe(true)
    expect(await rig.findings('pg_plan_changed')).toEqual([])

    // The index goes: the statement falls back to a sequential scan of 100,000 rows.
    await sql`DROP INDEX plan_t_grp`
    await workload(20)
    await rig.cycle()
    const plans = (await rig.api(`/queries/${hash}/explain`)) as {
      plan_hash: string
      seq_scans: number
      total_cost: number
      ts: string
    }[]
    expect(plans.length).toBe(3)
    const [scanning] = plans
    expect(scanning!.seq_scans).toBe(1)
    const [finding] = await rig.findings('pg_plan_changed')
    expect(finding).toMatchObject({
      key: `pg_plan_changed:${hash}`,
      severity: 'warning',
      category: 'performance',
      objects: [hash, 'plan_t'],
      metrics: {
        query_hash: hash,
        changed_at: scanning!.ts,
        cost_before: indexed[0]!.total_cost,
        cost_after: scanning!.total_cost,
        plan_before: indexed[0]!.plan_hash,
        plan_after: scanning!.plan_hash,
      },
    })
    // 261 for the bitmap scan of one group, 1792 for the sequential scan: 6.9 ×, past 2 × and below 10 ×.
    expect(finding.metrics.cost_ratio).toBeGreaterThanOrEqual(2)
    expect(finding.metrics.cost_ratio).toBeLessThan(10)
    expect(finding.detail).toContain('Before: 0 sequential and 1 index scans')
    expect(finding.detail).toContain('now: 1 sequential and 0 index scans')
    expect(finding.how_to_fix).toEqual(['ANALYZE plan_t;'])
    expect(finding.how_to_investigate).toContain(
      `GET /api/v1/databases/${rig.dbId}/queries/${hash}/explain   -- the plans before and after`,
    )

    // Cured: the index is back, and so is the cheap plan.
    await sql`CREATE INDEX plan_t_grp ON plan_t (grp)`
    await rig.cycle()
    expect(((await rig.api(`/queries/${hash}/explain`)) as { plan_hash: string }[])[0]!.plan_hash).toBe(
      indexed[0]!.plan_hash,
    )
    expect(await rig.findings('pg_plan_changed')).toEqual([])
  } finally {
    explainSampling.intervalMs = interval
  }
})
