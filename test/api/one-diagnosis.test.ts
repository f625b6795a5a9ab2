// One diagnosis (issue 27): the database list, the overview, the doctor, the configuration page and the
// alerts show the same score and findings for the same moment, on real PostgreSQL 17 watched by the real
// agent. A session idle in a transaction (critical: an alert) and an invalid index are found; after the
// monitor's pass every reader shows its diagnosis. Once the session ends and a batch says so, the doctor
// page's new diagnosis is what the list shows too, before any monitor pass; the pass then resolves the alert.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(120_000)

let rig: PostgresDoctorRig
beforeAll(async () => {
  rig = await postgresDoctorRig(17, { thresholds: { pg_idle_in_transaction: { warning_s: 0, critical_s: 0 } } })
})
afterAll(async () => {
  await rig?.stop()
})

/** Every reader's view of the database at the server's (frozen) clock. */
async function readers() {
  const list = await rig.server.call('GET', '/api/v1/databases/health', { token: rig.account.token })
  expect(list.status).toBe(200)
  const row = (list.body as any[]).find((d) => d.id === rig.dbId)
  const [overview, doctor, configuration, alerts] = await Promise.all([
    rig.api('/overview'),
    rig.api('/doctor'),
    rig.api('/configuration'),
    rig.api('/alerts'),
  ])
  return { row, overview, doctor, configuration, alerts: alerts as any[] }
}

/** The score, status, moment and counts each reader shows must be one. */
function expectOneDiagnosis({ row, overview, doctor }: Awaited<ReturnType<typeof readers>>) {
  const counts = { critical: 0, warning: 0, info: 0 }
  for (const f of doctor.top_issues as any[]) counts[f.severity as keyof typeof counts]++
  expect({ score: row.health_score, status: row.doctor_status, at: row.evaluated_at, findings: row.findings }).toEqual({
    score: doctor.score,
    status: doctor.status,
    at: doctor.evaluated_at,
    findings: counts,
  })
  expect(overview.health_score).toBe(doctor.score)
}

test('the list, the overview, the doctor, the configuration page and the alerts show one diagnosis', async () => {
  await rig.sql.unsafe('CREATE TABLE dup (v int)')
  await rig.sql.unsafe('INSERT INTO dup VALUES (1), (1)')
  // A unique index built concurrently over duplicates fails and stays behind, invalid.
  await rig.sql.unsafe('CREATE UNIQUE INDEX CONCURRENTLY dup_v ON dup (v)').catch(() => {})
  const holder = postgres(rig.dsn, { max: 1, onnotice: () => {}, connection: { application_name: 'holder' } })
  const release = Promise.withResolvers<void>()
  let pid = 0
  const holding = holder
    .begin(async (tx) => {
      pid = (await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
      await tx`SELECT count(*) FROM dup`
      await release.promise
    })
    .catch(() => {})
  try {
    const idleKey = () => `pg_idle_in_transaction:pid ${pid}`
    await until('the idle session and the invalid index found', async () => {
      await rig.cycle()
      const keys = ((await rig.api('/doctor')).top_issues as any[]).map((f) => f.key)
      return pid !== 0 && keys.includes(idleKey()) && keys.some((k: string) => k.startsWith('pg_invalid_indexes:'))
        ? true
        : undefined
    })

    // The monitor's pass is the moment: every reader shows the diagnosis its alerts came from.
    rig.server.freeze(true)
    rig.server.advance(1_000)
    const monitor = createMonitor(rig.server.deps, { retentionDays: 30 })
    expect((await monitor.runOnce(rig.server.deps.clock())).alerts.opened).toBe(1)
    const held = await readers()
    expectOneDiagnosis(held)
    expect(held.doctor.evaluated_at).toBe(new Date(rig.server.deps.clock()).toISOString())
    expect(held.doctor.score).toBeLessThan(100)
    const critical = (held.doctor.groups as any[]).filter((g) => g.severity === 'critical')
    expect(held.alerts.map((a) => ({ key: a.key, consequences: a.consequences.map((c: any) => c.key) }))).toEqual(
      critical.map((g) => ({ key: g.key, consequences: g.findings })),
    )
    // The configuration page lists, under each setting, the findings that name it: only the doctor's.
    expect(held.configuration.findings_unavailable).toBe(false)
    const named = (held.configuration.settings as any[]).flatMap((s) => s.findings.map((f: any) => f.key))
    const doctorKeys = new Set((held.doctor.top_issues as any[]).map((f) => f.key))
    expect(named.filter((k: string) => !doctorKeys.has(k))).toEqual([])

    // The session ends and a batch says so: the doctor's new diagnosis is the list's too, before any pass.
    release.resolve()
    await holding
    rig.server.advance(1_000)
    await until('the idle session gone from the doctor', async () => {
      await rig.cycle()
      return ((await rig.api('/doctor')).top_issues as any[]).some((f) => f.key === idleKey()) ? undefined : true
    })
    const ended = await readers()
    expectOneDiagnosis(ended)
    expect(ended.row.health_score).toBeGreaterThan(held.row.health_score)
    // The alert stays open until the monitor's pass applies the diagnosis, which then resolves it.
    expect(ended.alerts).toHaveLength(1)
    expect((await monitor.runOnce(rig.server.deps.clock())).alerts.resolved).toBe(1)
    const resolved = await readers()
    expectOneDiagnosis(resolved)
    expect(resolved.alerts).toEqual([])
    expect((resolved.doctor.groups as any[]).filter((g) => g.severity === 'critical')).toEqual([])
  } finally {
    release.resolve()
    rig.server.freeze(false)
    await holder.end({ timeout: 1 }).catch(() => {})
  }
})
