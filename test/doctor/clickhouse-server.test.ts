// The ClickHouse server rules. On the chdb rig watched by the real agent: memory against the server's
// real max_server_memory_usage with the resident memory seeded (chdb has no system.asynchronous_metrics;
// the rig's is seeded) until it drops; disk space judged on the real disk's numbers, with thresholds set
// around its measured free share (a test cannot fill or free a disk). From crafted batches: a disk that
// fills and is freed, the memory limit taken from RAM, and replication, because chdb runs no Keeper and
// so cannot create Replicated tables (system.replicas stays empty there).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { agentSession, chBatch } from '../support/batches.ts'
import { seedAsynchronousMetrics } from '../support/clickhouse-system-tables.ts'
import { type ClickHouseDoctorRig, clickhouseDoctorRig } from '../support/doctor.ts'

const GB = 1024 ** 3

describe('on the chdb rig', () => {
  let rig: ClickHouseDoctorRig
  // The server reads this object on every diagnosis: a test may change it between calls.
  const thresholds: Record<string, Record<string, number>> = {}

  beforeAll(async () => {
    rig = await clickhouseDoctorRig({ thresholds })
  })
  afterAll(async () => {
    await rig?.stop()
  })

  test('memory against max_server_memory_usage: warning at 85 %, critical at 95 %, none at 10 %', async () => {
    const [setting] = await rig.ch.query<{ value: string }>(
      "SELECT value FROM system.server_settings WHERE name = 'max_server_memory_usage'",
    )
    const limit = Number(setting!.value)
    expect(limit).toBeGreaterThan(GB)
    const resident = async (ratio: number) => {
      await rig.ch.command('TRUNCATE TABLE system.asynchronous_metrics')
      await seedAsynchronousMetrics(rig.ch, [
        { metric: 'MemoryResident', value: Math.round(limit * ratio) },
        { metric: 'OSMemoryTotal', value: 2 * limit },
        { metric: 'OSMemoryAvailable', value: limit / 2 },
      ])
      await rig.cycle()
    }

    await resident(0.85)
    const [warning] = await rig.findings('ch_memory')
    expect(warning).toMatchObject({
      key: 'ch_memory',
      severity: 'warning',
      category: 'capacity',
      title: 'ClickHouse is close to its memory limit',
      metrics: {
        used_bytes: Math.round(limit * 0.85),
        limit_bytes: limit,
        used_ratio: 0.85,
        memory_resident_bytes: Math.round(limit * 0.85),
      },
    })
    // What ClickHouse tracks (system.metrics MemoryTracking) is real: the rig's engine uses far less.
    expect(warning.metrics.memory_tracked_bytes).toBeGreaterThan(0)
    expect(warning.metrics.memory_tracked_bytes).toBeLessThan(limit * 0.85)
    expect(warning.detail).toStartWith(
      `The server uses ${((limit * 0.85) / GB).toFixed(1)} GB, 85.0 % of max_server_memory_usage (${(limit / GB).toFixed(1)} GB)`,
    )
    expect(warning.detail).toContain(`the machine has ${(limit / 2 / GB).toFixed(1)} GB available`)

    await resident(0.95)
    expect(await rig.findings('ch_memory')).toEqual([
      expect.objectContaining({ severity: 'critical', metrics: expect.objectContaining({ used_ratio: 0.95 }) }),
    ])
    expect((await rig.api('/doctor')).status).toBe('unhealthy')

    await resident(0.1)
    expect(await rig.findings('ch_memory')).toEqual([])
  })

  test("disk space on the real disk's numbers: a warning and critical with thresholds around its free share, none below", async () => {
    await rig.cycle()
    const [disk] = await rig.ch.query<{ free_space: number; total_space: number }>(
      "SELECT free_space, total_space FROM system.disks WHERE name = 'default'",
    )
    const share = disk!.free_space / disk!.total_space
    try {
      thresholds.ch_disk_space = { warning_free_below: share + 0.05, critical_free_below: share - 0.05 }
      const [warning] = await rig.findings('ch_disk_space')
      expect(warning).toMatchObject({
        key: 'ch_disk_space:disk default',
        severity: 'warning',
        category: 'capacity',
        objects: ['disk default'],
        metrics: { total_bytes: disk!.total_space },
      })
      // Free space moves a little with whatever else writes to this disk.
      expect(Math.abs(warning.metrics.free_bytes - disk!.free_space)).toBeLessThan(GB)
      // From the exact bytes the rule judged (free_ratio is rounded to 4 digits, which can tip a .5 the other way).
      expect(warning.title).toBe(
        `Disk default is ${((1 - warning.metrics.free_bytes / warning.metrics.total_bytes) * 100).toFixed(0)} % full`,
      )
      expect(warning.how_to_investigate[1]).toContain("WHERE active AND disk_name = 'default'")

      thresholds.ch_disk_space = { warning_free_below: share + 0.1, critical_free_below: share + 0.05 }
      expect(await rig.findings('ch_disk_space')).toEqual([
        expect.objectContaining({ key: 'ch_disk_space:disk default', severity: 'critical' }),
      ])

      thresholds.ch_disk_space = { warning_free_below: share - 0.05, critical_free_below: share - 0.1 }
      expect(await rig.findings('ch_disk_space')).toEqual([])
    } finally {
      delete thresholds.ch_disk_space
    }
  })
})

describe('from crafted batches', () => {
  const session = agentSession('sqlite')
  const findings = async (id: string, rule: string) =>
    ((await session.ok(id, '/doctor')).top_issues as any[]).filter((f) => f.rule === rule)
  const ingest = (name: string, server_metrics: Record<string, number>) =>
    session.ingest(chBatch(name, Date.now(), { server_metrics }))

  test('disks: one filling up is a warning below 20 % free and critical below 10 %; freed, no finding', async () => {
    const disks = (hotFree: number) => ({
      'disk.default.free_bytes': 50 * GB,
      'disk.default.total_bytes': 100 * GB,
      'disk.hot.free_bytes': hotFree,
      'disk.hot.total_bytes': 200 * GB,
    })
    const id = await ingest('disks', disks(30 * GB))
    expect((await findings(id, 'ch_disk_space')).map((f) => [f.key, f.severity, f.metrics])).toEqual([
      [
        'ch_disk_space:disk hot',
        'warning',
        {
          free_bytes: 30 * GB,
          total_bytes: 200 * GB,
          free_ratio: 0.15,
          rate_bytes_per_s: null,
          fills_at: null,
          basis_seconds: null,
        },
      ],
    ])
    const [finding] = await findings(id, 'ch_disk_space')
    expect(finding.title).toBe('Disk hot is 85 % full')
    expect(finding.detail).toStartWith(
      'ClickHouse disk hot has 30.0 GB free of 200.0 GB (15.0 % free; a warning below 20 %, critical below 10 %)',
    )
    await ingest('disks', disks(10 * GB))
    expect((await findings(id, 'ch_disk_space')).map((f) => [f.key, f.severity])).toEqual([
      ['ch_disk_space:disk hot', 'critical'],
    ])
    await ingest('disks', disks(120 * GB))
    expect(await findings(id, 'ch_disk_space')).toEqual([])
  })

  test('memory without max_server_memory_usage: the limit is 90 % of RAM', async () => {
    const id = await ingest('ram', {
      memory_resident_bytes: 8 * GB,
      memory_tracked_bytes: 7 * GB,
      os_memory_total_bytes: 10 * GB,
    })
    const [finding] = await findings(id, 'ch_memory')
    expect(finding).toMatchObject({
      severity: 'warning',
      metrics: { used_bytes: 8 * GB, limit_bytes: 9 * GB, used_ratio: 0.8889 },
    })
    expect(finding.detail).toContain("88.9 % of 90 % of the machine's 10.0 GB, ClickHouse's default limit (9.0 GB)")
    await ingest('ram', { memory_resident_bytes: 4 * GB, memory_tracked_bytes: 3 * GB, os_memory_total_bytes: 10 * GB })
    expect(await findings(id, 'ch_memory')).toEqual([])
  })

  test('replication: read-only replicas are critical; queue and delay a warning, then critical; caught up, nothing', async () => {
    const id = await ingest('replicated', {
      replicas_readonly: 2,
      replication_queue_size: 150,
      max_replica_delay_s: 400,
    })
    expect((await findings(id, 'ch_replication')).map((f) => [f.key, f.severity, f.title, f.metrics])).toEqual([
      ['ch_replication:readonly', 'critical', '2 read-only replicas', { replicas_readonly: 2 }],
      ['ch_replication:delay', 'warning', 'A replica is 6.7 min behind', { max_replica_delay_s: 400 }],
      ['ch_replication:queue', 'warning', 'Replication queue of 150 entries', { replication_queue_size: 150 }],
    ])
    const [readonly] = await findings(id, 'ch_replication')
    expect(readonly.detail).toStartWith('2 Replicated tables are read-only on this server')
    expect(readonly.how_to_investigate[0]).toContain('FROM system.replicas WHERE is_readonly')
    expect((await session.ok(id, '/doctor')).status).toBe('unhealthy')

    await ingest('replicated', { replicas_readonly: 0, replication_queue_size: 1500, max_replica_delay_s: 4000 })
    expect((await findings(id, 'ch_replication')).map((f) => [f.key, f.severity])).toEqual([
      ['ch_replication:delay', 'critical'],
      ['ch_replication:queue', 'critical'],
    ])
    await ingest('replicated', { replicas_readonly: 0, replication_queue_size: 3, max_replica_delay_s: 0 })
    expect(await findings(id, 'ch_replication')).toEqual([])
    // A server without Replicated tables sends none of these keys.
    expect(await findings(await ingest('plain', { uptime_s: 100 }), 'ch_replication')).toEqual([])
  })
})
