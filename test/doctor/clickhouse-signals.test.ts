// ClickHouse's error-signal rules (ch_distributed, ch_replication_errors, ch_keeper,
// ch_buffer_flush_errors, ch_file_io_errors, ch_dns_errors, ch_slow_reads) and small inserts judged from
// system.events. On the chdb rig watched by the real agent: Buffer flushes that fail and 120 one-row
// INSERTs, with the counts the engine gives. From crafted batches, the signals the rig cannot produce
// (it runs no Keeper, no shard, no failing disk): each at its thresholds, and gone once they stop.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { agentSession, chBatch } from '../support/batches.ts'
import { type ClickHouseDoctorRig, clickhouseDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

describe('on the chdb rig', () => {
  let rig: ClickHouseDoctorRig
  beforeAll(async () => {
    rig = await clickhouseDoctorRig()
  })
  afterAll(async () => {
    await rig?.stop()
  })

  const engineEvent = async (name: string) =>
    Number(
      (
        await rig.ch.query<{ v: string }>(
          'SELECT toString(sum(value)) AS v FROM system.events WHERE event = {name:String}',
          { name },
        )
      )[0]?.v ?? 0,
    )

  test('a Buffer table failing to flush: ch_buffer_flush_errors with the count the engine gives and the error naming the destination', async () => {
    await rig.cycle() // the counters' baseline
    const before = await engineEvent('StorageBufferErrorOnFlush')
    await rig.ch.command(
      'CREATE TABLE sig_dst (id UInt64, CONSTRAINT big CHECK id > 100) ENGINE = MergeTree ORDER BY id',
    )
    await rig.ch.command(
      'CREATE TABLE sig_buf (id UInt64) ENGINE = Buffer(default, sig_dst, 1, 1, 2, 1000000, 1000000, 1000000000, 1000000000)',
    )
    await rig.ch.insert('sig_buf', [{ id: 1 }])
    await until(
      'two failed flushes',
      async () => ((await engineEvent('StorageBufferErrorOnFlush')) >= before + 2 ? true : undefined),
      { everyMs: 100, timeoutMs: 30_000 },
    )
    await rig.ch.command('DROP TABLE sig_buf SYNC').catch(() => {})
    await rig.ch.command('DROP TABLE sig_dst SYNC')
    const failed = (await engineEvent('StorageBufferErrorOnFlush')) - before
    await rig.cycle()
    const [finding] = await rig.findings('ch_buffer_flush_errors')
    expect(finding).toMatchObject({
      key: 'ch_buffer_flush_errors',
      severity: 'warning',
      category: 'reliability',
      title: 'Buffer tables fail to flush',
      metrics: { buffer_flush_errors: failed, window_s: 600 },
    })
    expect(failed).toBeGreaterThanOrEqual(2)
    expect(finding.detail).toStartWith(
      `In the last 10 minutes ClickHouse counted ${failed} failed flushes of Buffer tables (StorageBufferErrorOnFlush, `,
    )
    // system.errors, read by log_events, carries the reason and names the destination table.
    expect(finding.metrics.top_error).toBe('VIOLATED_CONSTRAINT')
    expect(finding.detail).toContain('for table default.sig_dst')
  })

  test('120 one-row INSERTs without query_log: ch_small_inserts from InsertQuery and InsertedRows', async () => {
    await rig.ch.command('CREATE TABLE sig_small (id UInt64) ENGINE = MergeTree ORDER BY id')
    await rig.cycle()
    const [queries, rows] = [await engineEvent('InsertQuery'), await engineEvent('InsertedRows')]
    for (let i = 0; i < 120; i++) await rig.ch.command(`INSERT INTO sig_small VALUES (${i})`)
    const sent = {
      inserts: (await engineEvent('InsertQuery')) - queries,
      rows: (await engineEvent('InsertedRows')) - rows,
    }
    expect(sent).toEqual({ inserts: 120, rows: 120 })
    await rig.cycle()
    const [finding] = await rig.findings('ch_small_inserts')
    expect(finding).toMatchObject({
      key: 'ch_small_inserts:server',
      severity: 'warning',
      objects: ['server'],
      title: expect.stringMatching(/^Small INSERTs: [0-9.]+ a second, 1 row each$/),
      metrics: { source: 'events' },
    })
    // Earlier tests of this file inserted too: what the rule judged is all of the hour's counters.
    expect(finding.metrics.inserts).toBeGreaterThanOrEqual(120)
    expect(finding.metrics.rows_per_insert).toBeLessThan(2)
    expect(finding.detail).toContain('query_log recorded no INSERT')
  })
})

describe('from crafted batches', () => {
  const session = agentSession('sqlite')
  const findings = async (id: string, rule: string) =>
    ((await session.ok(id, '/doctor')).top_issues as any[]).filter((f) => f.rule === rule)
  const ingest = (name: string, server_metrics: Record<string, number>, ago = 0) =>
    session.ingest(chBatch(name, Date.now() - ago, { server_metrics }))

  test('each signal at its thresholds: warning, critical, and no finding once the window holds none', async () => {
    const cases: [rule: string, warning: Record<string, number>, critical: Record<string, number>][] = [
      [
        'ch_distributed',
        { distributed_connection_fail_try: 3 },
        { distributed_connection_fail_try: 3, distributed_connection_fail_at_all: 1 },
      ],
      [
        'ch_replication_errors',
        { replicated_part_failed_fetches: 2, replicated_part_checks_failed: 1 },
        { replicated_data_loss: 1 },
      ],
      ['ch_keeper', { zookeeper_hardware_exceptions: 1 }, { zookeeper_hardware_exceptions: 10 }],
      ['ch_buffer_flush_errors', { buffer_flush_errors: 2 }, { buffer_flush_errors: 42 }],
      ['ch_file_io_errors', { file_write_failures: 1 }, { file_read_failures: 10 }],
      ['ch_dns_errors', { dns_errors: 1 }, { dns_errors: 100 }],
      ['ch_slow_reads', { slow_reads: 10 }, { slow_reads: 1000 }],
    ]
    for (const [rule, warning, critical] of cases) {
      const id = await ingest(`${rule}-w`, warning)
      const [w] = await findings(id, rule)
      expect({ rule, severity: w?.severity, metrics: w?.metrics }).toEqual({
        rule,
        severity: 'warning',
        metrics: expect.objectContaining({ ...warning, window_s: 600 }),
      })
      const cid = await ingest(`${rule}-c`, critical)
      expect({ rule, severity: (await findings(cid, rule))[0]?.severity }).toEqual({ rule, severity: 'critical' })
      // Counted 11 minutes ago: out of the 10-minute window.
      const old = await ingest(`${rule}-old`, critical, 11 * 60_000)
      await ingest(`${rule}-old`, { uptime_s: 100 })
      expect({ rule, old: await findings(old, rule) }).toEqual({ rule, old: [] })
    }
  })

  test('the detail gives counts, rates and thresholds; gauges are judged at their latest value', async () => {
    const id = await ingest('dist', {
      distributed_connection_fail_try: 3,
      distributed_connection_fail_at_all: 1,
      distributed_files_to_insert: 60,
    })
    const [f] = await findings(id, 'ch_distributed')
    expect(f).toMatchObject({
      severity: 'critical',
      category: 'availability',
      title: 'Distributed queries could not reach a shard',
    })
    expect(f.detail).toStartWith(
      'In the last 10 minutes ClickHouse counted 1 connections that failed to every replica of a shard (DistributedConnectionFailAtAll, 0.1 a minute), ' +
        '3 failed connection tries to a shard (DistributedConnectionFailTry, 0.3 a minute); now: 60 files of Distributed INSERTs waiting to be sent (DistributedFilesToInsert, now) ' +
        '(DistributedConnectionFailAtAll: a warning from 1, critical from 1; DistributedConnectionFailTry: a warning from 1, critical from 1,000; DistributedFilesToInsert: a warning from 50, critical from 1,000).',
    )
    expect(f.how_to_investigate[0]).toContain('FROM system.distribution_queue')
    // The files sent: a gauge is its latest value, not a sum.
    await ingest('dist', { distributed_files_to_insert: 0 }, -1000)
    const [after] = await findings(id, 'ch_distributed')
    expect(after.metrics.distributed_files_to_insert).toBe(0)
    expect(after.title).toBe('Distributed queries could not reach a shard')

    const keeper = await ingest('keeper', { zookeeper_sessions: 2 })
    expect((await findings(keeper, 'ch_keeper')).map((k) => [k.severity, k.title])).toEqual([
      ['critical', 'More than one Keeper session is open'],
    ])
    const one = await ingest('keeper-one', { zookeeper_sessions: 1, queries_preempted: 0 })
    expect(await findings(one, 'ch_keeper')).toEqual([])
    const preempted = await ingest('preempted', { queries_preempted: 3 })
    expect((await findings(preempted, 'ch_slow_reads')).map((k) => [k.severity, k.title])).toEqual([
      ['warning', 'Queries wait for higher-priority ones'],
    ])
  })

  test('small inserts from system.events: few rows each at a rate above one a second; big batches or a slow rate, none', async () => {
    const id = await ingest('small', { insert_queries: 120, inserted_rows: 120 })
    const [f] = await findings(id, 'ch_small_inserts')
    // One cycle's counters cover at least a minute: 120 in 60 s.
    expect(f).toMatchObject({
      key: 'ch_small_inserts:server',
      severity: 'warning',
      title: 'Small INSERTs: 2 a second, 1 row each',
      metrics: { inserts: 120, inserted_rows: 120, inserts_per_second: 2, rows_per_insert: 1, source: 'events' },
    })
    expect(
      await findings(await ingest('big', { insert_queries: 120, inserted_rows: 1_200_000 }), 'ch_small_inserts'),
    ).toEqual([])
    expect(await findings(await ingest('slow', { insert_queries: 59, inserted_rows: 59 }), 'ch_small_inserts')).toEqual(
      [],
    )
    const busy = await ingest('busy', { insert_queries: 900, inserted_rows: 1800 })
    expect((await findings(busy, 'ch_small_inserts'))[0]).toMatchObject({
      severity: 'critical',
      metrics: { inserts_per_second: 15 },
    })
  })
})
