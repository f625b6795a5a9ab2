// ClickHouse's findings made like PostgreSQL's, and one finding per cause, from batches as the agent
// sends them (one SQLite-backed test server; the collectors are tested on the real engine under
// test/agent): ClickHouse's errors far above their baseline, counted by each entry's `count`, name the
// top error; a ClickHouse disk that fills at a known rate gets its exact fill time, with hostile disk
// and table names reaching commands only escaped; out-of-memory entries on a swapping host are one
// finding (host_memory_pressure), not two; without the swapping they stay pg_log_resource_faults'.
import { describe, expect, test } from 'bun:test'
import { chString, chTable } from '../../src/server/doctor/sql-text.ts'
import type { HostStatus } from '../../src/shared/wire.ts'
import { agentSession, chBatch, pgBatch } from '../support/batches.ts'
import { logEntry, logSection } from '../support/log-events.ts'

const MINUTE = 60_000
const GB = 1024 ** 3
const HOSTILE = 'we\'ird\\"; DROP TABLE x; */ --\n\u202ename'

const host = (over: Partial<HostStatus> = {}): HostStatus => ({
  source: 'proc',
  evidence: 'connected over a Unix socket',
  cpu_count: 4,
  cpu: null,
  load: null,
  memory: null,
  filesystems: [],
  devices: [],
  ...over,
})

describe('parity and causes', () => {
  const s = agentSession('sqlite')
  const findings = async (id: string, rule: string) =>
    (await s.ok(id, '/doctor')).top_issues.filter((f: any) => f.rule === rule)

  test("ClickHouse errors 480 times their baseline: a warning naming the top error, counted by each entry's count", async () => {
    const t = Date.now()
    // The baseline: 24 errors over the day before, one an hour; now system.errors entries standing for 70 and 10.
    const baseline = Array.from({ length: 24 }, (_, i) =>
      logEntry('error', t - (i + 1) * 55 * MINUTE - 10 * MINUTE, {
        severity: 'error',
        sqlstate: 'SYNTAX_ERROR',
        count: 1,
      }),
    )
    const recent = [
      logEntry('error', t - 3 * MINUTE, {
        severity: 'error',
        sqlstate: 'UNKNOWN_TABLE',
        count: 40,
        message: `old message ${HOSTILE}`,
        fields: { code: 60, remote: false },
      }),
      logEntry('error', t - 2 * MINUTE, {
        severity: 'error',
        sqlstate: 'UNKNOWN_TABLE',
        count: 30,
        message: `Table default.${HOSTILE} does not exist`,
        fields: { code: 60, remote: false },
      }),
      logEntry('out_of_memory', t - 2 * MINUTE, {
        severity: 'error',
        sqlstate: 'MEMORY_LIMIT_EXCEEDED',
        count: 10,
        fields: { code: 241, remote: false },
      }),
    ]
    const section = { ...logSection([...baseline, ...recent]), source: 'system_tables' as const }
    const id = await s.ingest(chBatch('ch-errors', t - 60_000, { log_events: section }))
    const [rate] = await findings(id, 'ch_log_error_rate')
    expect(rate).toMatchObject({
      key: 'ch_log_error_rate',
      severity: 'warning',
      category: 'reliability',
      title: '80 errors on the ClickHouse server in 10 minutes, 480 times the usual rate',
    })
    expect(rate.metrics).toEqual({
      errors_recent: 80,
      errors_baseline: 24,
      per_minute: 8,
      baseline_per_minute: 0.0167,
      top_error: 'UNKNOWN_TABLE',
      top_code: 60,
      top_count: 70,
    })
    // The latest message, on one line; the name reaches the query only as a string constant.
    expect(rate.detail).toContain(
      `The most frequent: UNKNOWN_TABLE (code 60), 70 times, last: "Table default.we'ird\\"; DROP TABLE x; */ -- \u202ename does not exist".`,
    )
    expect(rate.how_to_investigate[1]).toBe(
      "SELECT name, code, value, last_error_time, last_error_message, last_error_trace FROM system.errors WHERE name = 'UNKNOWN_TABLE';",
    )
    expect(rate.how_to_investigate[2]).toStartWith(
      'SELECT event_time, user, left(query, 300) AS query, exception FROM system.query_log WHERE exception_code = 60 AND ',
    )
  })

  test('a ClickHouse disk losing 1 GB every 5 minutes with 400 GB left: a warning with the exact fill time; faster, critical; one finding per disk', async () => {
    const t0 = Date.now() - 60 * MINUTE
    const table = `events_${HOSTILE}`
    const parts = [
      { database: HOSTILE, table, partition_id: '202601', active_parts: 10, rows: 1000, bytes_on_disk: 300 * GB },
      { database: HOSTILE, table, partition_id: '202602', active_parts: 5, rows: 500, bytes_on_disk: 100 * GB },
      { database: 'default', table: 'small', partition_id: 'all', active_parts: 1, rows: 1, bytes_on_disk: GB },
    ]
    const disk = (available: number) => ({
      roles: [`disk:${HOSTILE}`],
      path: '/var/lib/clickhouse/',
      mount: null,
      device: null,
      total_bytes: 1000 * GB,
      available_bytes: available,
      inodes_total: null,
      inodes_available: null,
    })
    const send = async (name: string, stepBytes: number) => {
      let id = ''
      for (let i = 0; i <= 12; i++) {
        id = await s.ingest(
          chBatch(name, t0 + i * 5 * MINUTE, {
            host: host({ source: 'clickhouse', evidence: null, filesystems: [disk(400 * GB + (12 - i) * stepBytes)] }),
            parts,
          }),
        )
      }
      return id
    }
    const slow = await send('ch-disk-slow', GB)
    const [warning] = await findings(slow, 'ch_disk_space')
    const last = t0 + 60 * MINUTE
    // 400 GB at 1 GB per 300 s: 120,000 s after the last sample.
    expect(warning).toMatchObject({
      key: `ch_disk_space:disk ${HOSTILE}`,
      severity: 'warning',
      title: `Disk ${HOSTILE} fills in 1.4 days`,
      metrics: {
        free_bytes: 400 * GB,
        total_bytes: 1000 * GB,
        free_ratio: 0.4,
        fills_at: new Date(last + 120_000_000).toISOString(),
        basis_seconds: 3600,
      },
    })
    expect(warning.metrics.rate_bytes_per_s).toBeCloseTo(-GB / 300, 0)
    expect(warning.detail).toContain('Free space shrinks by 288.0 GB a day (fitted over 1.0 h of samples)')
    expect(warning.detail).toContain(
      `the biggest tables now (all disks): ${chTable(HOSTILE, table)} 400.0 GB in 2 partitions, default.small 1.0 GB in 1 partition.`,
    )
    // Hostile names reach commands only through ClickHouse's quoting.
    expect(warning.how_to_fix[0]).toBe(
      `SELECT partition_id, formatReadableSize(sum(bytes_on_disk)) AS size, min(min_time) AS oldest FROM system.parts WHERE active AND database = ${chString(HOSTILE)} AND table = ${chString(table)} GROUP BY partition_id ORDER BY partition_id LIMIT 20;   -- then drop the old partitions you no longer need, or set a TTL`,
    )
    expect(warning.how_to_fix[2]).toBe(
      `ALTER TABLE ${chTable(HOSTILE, table)} MODIFY TTL <date column> + INTERVAL 90 DAY;   -- expire data from now on`,
    )
    expect(
      warning.how_to_investigate.some((q: string) =>
        q.includes(`FROM system.part_log WHERE event_type = 'NewPart' AND disk_name = ${chString(HOSTILE)}`),
      ),
    ).toBe(true)

    // 20 GB every 5 minutes: 400 GB last 100 minutes.
    const fast = await send('ch-disk-fast', 20 * GB)
    expect((await findings(fast, 'ch_disk_space')).map((f: any) => [f.key, f.severity, f.title])).toEqual([
      [`ch_disk_space:disk ${HOSTILE}`, 'critical', `Disk ${HOSTILE} fills in 1.7 h`],
    ])
  })

  test('out of memory on a swapping host: one critical host_memory_pressure naming the entries; without swapping, pg_log_resource_faults', async () => {
    const t = Date.now()
    const ooms = Array.from({ length: 3 }, (_, i) =>
      logEntry('out_of_memory', t - (5 - i) * MINUTE, {
        severity: 'error',
        sqlstate: '53200',
        message: `out of memory ${HOSTILE}`,
        detail: 'Failed on request of size 8192.',
      }),
    )
    const swapping = host({
      memory: { total_bytes: 16 * GB, available_bytes: GB / 2, swap_total_bytes: 4 * GB, swap_used_bytes: 2 * GB },
    })
    const id = await s.ingest(pgBatch('oom-swapping', t - 60_000, { host: swapping, log_events: logSection(ooms) }))
    const [memory] = await findings(id, 'host_memory_pressure')
    expect(memory).toMatchObject({
      key: 'host_memory_pressure',
      severity: 'critical',
      metrics: { out_of_memory_entries: 3, swap_used_bytes: 2 * GB },
    })
    expect(memory.title).toStartWith(
      'Out of memory 3 times in the last hour: The host is swapping: 50 % of swap in use',
    )
    expect(memory.detail).toContain(
      `The server logged 3 out-of-memory entries in the last hour, the first at ${new Date(t - 5 * MINUTE).toISOString()}: "out of memory we'ird\\"; DROP TABLE x; */ -- \u202ename".`,
    )
    expect(await findings(id, 'pg_log_resource_faults')).toEqual([])
    expect(await findings(id, 'pg_log_error_rate')).toEqual([])

    // Plenty of memory: the log's out of memory is the resource-faults finding, alone.
    const calm = host({
      memory: { total_bytes: 16 * GB, available_bytes: 8 * GB, swap_total_bytes: 4 * GB, swap_used_bytes: 0 },
    })
    const other = await s.ingest(pgBatch('oom-calm', t - 60_000, { host: calm, log_events: logSection(ooms) }))
    expect(await findings(other, 'host_memory_pressure')).toEqual([])
    expect(
      (await findings(other, 'pg_log_resource_faults')).map((f: any) => [f.key, f.severity, f.metrics.out_of_memory]),
    ).toEqual([['pg_log_resource_faults', 'critical', 3]])
  })
})
