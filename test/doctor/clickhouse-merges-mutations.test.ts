// ch_stuck_mutations, ch_queued_mutations and ch_long_merges on the chdb rig watched by the real
// agent: an ALTER ... UPDATE with a bad cast keeps failing and ClickHouse copies its error onto the ten
// mutations queued behind it (all created in the same second): one finding for the table, led by the
// failing one (mutation_2.txt, before mutation_10.txt by number), until the finding's own KILL
// MUTATION ends it and the queue runs; 100 mutations queued with merges stopped are a warning; a
// merge made slow (a column added with a DEFAULT that sleeps, computed for the old parts while
// merging) is long past lowered thresholds until the finding's SYSTEM STOP MERGES cancels it. The age
// levels of a stuck mutation that is not failing (the agent calls it stuck after an hour) come from
// crafted batches.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ClickHouseLogLevel } from '@clickhouse/client'
import { agentSession, chBatch } from '../support/batches.ts'
import { type ClickHouseDoctorRig, clickhouseDoctorRig } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

/** The command of a how_to_fix line, without its trailing comment. */
const command = (line: string) => line.replace(/;\s+--.*$/, '')

describe('on the chdb rig', () => {
  let rig: ClickHouseDoctorRig

  beforeAll(async () => {
    rig = await clickhouseDoctorRig({ thresholds: { ch_long_merges: { warning_s: 1, critical_s: 3 } } })
  })
  afterAll(async () => {
    await rig?.stop()
  })

  test('a failing mutation and the ten queued behind it: one critical finding for the table, led by it; its KILL MUTATION cures it', async () => {
    await rig.ch.command('CREATE TABLE mut (id UInt64, n UInt32, s String) ENGINE = MergeTree ORDER BY id')
    await rig.ch.insert('mut', [{ id: 1, n: 0, s: 'a1' }])
    // A bad cast: 'a1' is no number, so every attempt fails; the ten after it wait behind it.
    await rig.ch.command('ALTER TABLE mut UPDATE n = CAST(s AS UInt32) WHERE 1', undefined, { mutations_sync: 0 })
    for (let i = 0; i < 10; i++)
      await rig.ch.command(`ALTER TABLE mut UPDATE s = 'b${i}' WHERE 1`, undefined, { mutations_sync: 0 })
    const failing = async () =>
      (
        await rig.ch.query<{ n: number }>(
          "SELECT count() AS n FROM system.mutations WHERE table = 'mut' AND latest_fail_reason != ''",
        )
      )[0]!.n
    await until('the error on all eleven', async () => ((await failing()) === 11 ? true : undefined), {
      everyMs: 50,
      timeoutMs: 15_000,
    })
    const engine = await rig.ch.query<{ mutation_id: string; create_time: string; reason: string }>(
      "SELECT mutation_id, toString(create_time) AS create_time, latest_fail_reason AS reason FROM system.mutations WHERE table = 'mut' AND NOT is_done ORDER BY mutation_id",
    )
    // What ClickHouse shows: eleven mutations with the same error; ordered by id as text, mutation_10 comes first.
    expect(engine.map((m) => m.mutation_id)).toEqual([
      'mutation_10.txt',
      'mutation_11.txt',
      'mutation_12.txt',
      'mutation_2.txt',
      'mutation_3.txt',
      'mutation_4.txt',
      'mutation_5.txt',
      'mutation_6.txt',
      'mutation_7.txt',
      'mutation_8.txt',
      'mutation_9.txt',
    ])
    expect(new Set(engine.map((m) => m.reason)).size).toBe(1)

    await rig.cycle()
    const findings = await rig.findings('ch_stuck_mutations')
    expect(findings).toHaveLength(1)
    const [finding] = findings
    expect(finding).toMatchObject({
      key: 'ch_stuck_mutations:default.mut',
      severity: 'critical',
      category: 'maintenance',
      title: 'Mutation mutation_2.txt on default.mut keeps failing, 10 more waiting',
      objects: ['default.mut', 'default.mut:mutation_2.txt'],
      metrics: { parts_to_do: 1, failing: 1, queued: 10 },
    })
    expect(finding.detail).toStartWith('Mutation mutation_2.txt on default.mut was created')
    expect(finding.detail).toContain('still has 1 part to do; its latest attempt')
    expect(finding.detail).toContain("Cannot parse string 'a1' as UInt32")
    expect(finding.detail).toContain("The command: (UPDATE n = CAST(s, 'UInt32') WHERE 1)")
    expect(finding.detail).toContain(
      '10 more mutations of the table are not done (10 queued behind it, 10 of them showing its failure',
    )
    expect(finding.detail).toEndWith(
      ': mutation_3.txt, mutation_4.txt, mutation_5.txt, mutation_6.txt, mutation_7.txt, mutation_8.txt, mutation_9.txt, mutation_10.txt, mutation_11.txt, mutation_12.txt.',
    )
    expect(finding.how_to_investigate[0]).toContain(
      "FROM system.mutations WHERE database = 'default' AND table = 'mut' AND mutation_id = 'mutation_2.txt'",
    )
    expect(finding.how_to_fix).toHaveLength(1)
    // Alerts are keyed by the finding's key: one finding for the table is one alert, not eleven.
    expect(await rig.findings('ch_queued_mutations')).toEqual([]) // failing: ch_stuck_mutations counts the queue
    expect((await rig.api('/doctor')).status).toBe('unhealthy')

    await rig.ch.command(command(finding.how_to_fix[0]))
    // Killed, the ten behind it run.
    await until(
      'the queue run',
      async () =>
        (await rig.ch.query("SELECT 1 FROM system.mutations WHERE table = 'mut' AND NOT is_done")).length === 0
          ? true
          : undefined,
      { everyMs: 50, timeoutMs: 15_000 },
    )
    expect(await rig.ch.query('SELECT n, s FROM mut')).toEqual([{ n: 0, s: 'b9' }])
    await rig.cycle()
    expect(await rig.findings('ch_stuck_mutations')).toEqual([])
  })

  test('100 mutations queued with merges stopped, none failing: a warning for the table; 99 are not', async () => {
    await rig.ch.command('CREATE TABLE queue (id UInt64, v UInt32) ENGINE = MergeTree ORDER BY id')
    await rig.ch.insert('queue', [{ id: 1, v: 0 }])
    await rig.ch.command('SYSTEM STOP MERGES queue')
    for (let i = 1; i <= 99; i++)
      await rig.ch.command(`ALTER TABLE queue UPDATE v = ${i} WHERE 1`, undefined, { mutations_sync: 0 })
    const waiting = async () =>
      (
        await rig.ch.query<{ n: number }>(
          "SELECT count() AS n FROM system.mutations WHERE table = 'queue' AND NOT is_done AND latest_fail_reason = ''",
        )
      )[0]!.n
    expect(await waiting()).toBe(99)
    await rig.cycle()
    expect(await rig.findings('ch_queued_mutations')).toEqual([])

    await rig.ch.command('ALTER TABLE queue UPDATE v = 100 WHERE 1', undefined, { mutations_sync: 0 })
    expect(await waiting()).toBe(100)
    await rig.cycle()
    const [finding] = await rig.findings('ch_queued_mutations')
    expect(finding).toMatchObject({
      key: 'ch_queued_mutations:default.queue',
      severity: 'warning',
      category: 'maintenance',
      title: '100 mutations queued on default.queue',
      objects: ['default.queue'],
      metrics: { queued: 100, parts_to_do: 100 },
    })
    expect(finding.detail).toStartWith(
      '100 mutations of default.queue are not done (a warning from 100), none of them failing, with 100 parts still to rewrite between them. The oldest, mutation_2.txt, was created',
    )
    expect(await rig.findings('ch_stuck_mutations')).toEqual([]) // young and not failing: not stuck

    await rig.ch.command('SYSTEM START MERGES queue')
    await until('the queue run', async () => ((await waiting()) === 0 ? true : undefined), {
      everyMs: 100,
      timeoutMs: 30_000,
    })
    expect(await rig.ch.query('SELECT v FROM queue')).toEqual([{ v: 100 }])
    await rig.cycle()
    expect(await rig.findings('ch_queued_mutations')).toEqual([])
  })

  test('a merge running past the thresholds: warning, then critical, with its progress; SYSTEM STOP MERGES cures it', async () => {
    // Small granules and merge blocks, so the merge's progress moves every 1,024 rows.
    await rig.ch.command(
      'CREATE TABLE slow (id UInt64) ENGINE = MergeTree ORDER BY id SETTINGS merge_max_block_size = 1024, index_granularity = 1024',
    )
    await rig.ch.command('SYSTEM STOP MERGES slow')
    for (let i = 0; i < 2; i++) await rig.ch.command(`INSERT INTO slow SELECT number FROM numbers(${i * 20000}, 20000)`)
    // Merging the two parts computes the new column for their 40,000 rows: 0.3 ms each, 12 s in all.
    await rig.ch.command('ALTER TABLE slow ADD COLUMN pause UInt8 DEFAULT sleepEachRow(0.0003)')
    await rig.ch.command('SYSTEM START MERGES slow')
    const other = rig.ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
    const optimize = other.command({ query: 'OPTIMIZE TABLE slow FINAL' }).then(
      () => 'merged',
      (e) => e.type,
    )
    const elapsed = async () =>
      Number(
        (await rig.ch.query<{ e: number }>("SELECT max(elapsed) AS e FROM system.merges WHERE table = 'slow'"))[0]?.e ??
          0,
      )
    try {
      await until('the merge past a second', async () => ((await elapsed()) >= 1.2 ? true : undefined), {
        everyMs: 50,
        timeoutMs: 10_000,
      })
      await rig.cycle()
      const [warning] = await rig.findings('ch_long_merges')
      expect(warning).toMatchObject({
        key: 'ch_long_merges:default.slow:all_1_2_1',
        severity: 'warning',
        category: 'performance',
        objects: ['default.slow', 'default.slow:all_1_2_1'],
        metrics: { num_parts: 2 },
      })
      expect(warning.title).toMatch(/^Merge on default\.slow running for [12]\.\d s$/)
      expect(warning.detail).toMatch(
        /^A merge of 2 parts of default\.slow \(.+ compressed\) into all_1_2_1 has been running for [12]\.\d s and is \d+ % done/,
      )
      expect(warning.metrics.progress).toBeGreaterThan(0)
      expect(warning.metrics.progress).toBeLessThan(1)

      await until('the merge past three seconds', async () => ((await elapsed()) >= 3.2 ? true : undefined), {
        everyMs: 50,
        timeoutMs: 10_000,
      })
      await rig.cycle()
      const [critical] = await rig.findings('ch_long_merges')
      expect(critical).toMatchObject({ key: 'ch_long_merges:default.slow:all_1_2_1', severity: 'critical' })
      expect(critical.metrics.elapsed_s).toBeGreaterThanOrEqual(3)
      expect(critical.how_to_fix[0]).toStartWith('SYSTEM STOP MERGES default.slow;')

      await rig.ch.command(command(critical.how_to_fix[0]))
      await until(
        'the merge cancelled',
        async () =>
          (await rig.ch.query("SELECT 1 FROM system.merges WHERE table = 'slow'")).length === 0 ? true : undefined,
        { everyMs: 50, timeoutMs: 10_000 },
      )
      await rig.cycle()
      expect(await rig.findings('ch_long_merges')).toEqual([])
    } finally {
      await rig.ch.command('SYSTEM STOP MERGES slow')
      expect(await optimize).toBe('ABORTED')
    }
  })
})

describe('from crafted batches', () => {
  const session = agentSession('sqlite')

  type Entry = {
    database: string
    table: string
    mutation_id: string
    command: string
    create_time: number
    is_done: boolean
    parts_to_do: number
    latest_fail_reason: string
    latest_fail_time: number | null
    stuck: boolean
  }
  const mutation = (table: string, id: string, createTime: number, failure = '', more: Partial<Entry> = {}): Entry => ({
    database: 'db',
    table,
    mutation_id: id,
    command: `UPDATE x = 1 WHERE id = '${id}'`,
    create_time: createTime,
    is_done: false,
    parts_to_do: 40,
    latest_fail_reason: failure,
    latest_fail_time: failure ? createTime + 1000 : null,
    stuck: failure !== '' || Date.now() - createTime > 3600_000,
    ...more,
  })
  const findingsOf = async (id: string, rule: string) =>
    ((await session.ok(id, '/doctor')).top_issues as any[]).filter((f) => f.rule === rule)

  test('a stuck mutation that is not failing: a warning, critical once a day old; the queue counted under the oldest', async () => {
    const now = Date.now()
    const ingest = (mutations: Entry[]) => session.ingest(chBatch('events', Date.now(), { mutations }))
    const id = await ingest([
      mutation('big', 'mutation_7.txt', now - 2 * 3600_000),
      mutation('big', 'mutation_3.txt', now - 25 * 3600_000),
    ])
    expect((await findingsOf(id, 'ch_stuck_mutations')).map((f) => [f.key, f.severity, f.title, f.metrics])).toEqual([
      [
        'ch_stuck_mutations:db.big',
        'critical',
        'Mutation mutation_3.txt on db.big is not finishing, 1 more waiting',
        { parts_to_do: 40, age_s: 25 * 3600, failing: 0, queued: 1 },
      ],
    ])
    await ingest([mutation('big', 'mutation_7.txt', now - 2 * 3600_000)])
    expect((await findingsOf(id, 'ch_stuck_mutations')).map((f) => [f.key, f.severity, f.title, f.metrics])).toEqual([
      [
        'ch_stuck_mutations:db.big',
        'warning',
        'Mutation mutation_7.txt on db.big is not finishing',
        { parts_to_do: 40, age_s: 2 * 3600, failing: 0, queued: 0 },
      ],
    ])
    await ingest([
      mutation('big', 'mutation_7.txt', now - 2 * 3600_000, '', { is_done: true, stuck: false, parts_to_do: 0 }),
    ])
    expect(await findingsOf(id, 'ch_stuck_mutations')).toEqual([])
  })

  test('a failing mutation is critical at once (failing_critical_age_s 0), whatever its age', async () => {
    const now = Date.now()
    const id = await session.ingest(
      chBatch('failing-young', now, {
        mutations: [{ ...mutation('big', 'mutation_9.txt', now - 24_000, 'Code: 395. boom'), parts_to_do: 1 }],
      }),
    )
    expect((await findingsOf(id, 'ch_stuck_mutations')).map((f) => [f.key, f.severity, f.metrics])).toEqual([
      ['ch_stuck_mutations:db.big', 'critical', { parts_to_do: 1, age_s: 24, failing: 1, queued: 0 }],
    ])
    const { stuckMutations } = await import('../../src/server/doctor/rules/clickhouse/stuck-mutations.ts')
    expect(stuckMutations.thresholds).toEqual({ critical_age_s: 86_400, failing_critical_age_s: 0, max_findings: 10 })
  })

  test('recorded rows of a Replicated table: the failure copied onto the queue, ties broken by the mutation number', async () => {
    // As system.mutations shows them on a Replicated table (ids from ZooKeeper), all in one second and
    // listed newest first, as the agent sends them: 0000000010 before 0000000009 as text.
    const second = Math.floor(Date.now() / 1000) * 1000 - 60_000
    const reason = "Code: 6. DB::Exception: Cannot parse string 'x' as UInt32"
    const ids = ['0000000012', '0000000011', '0000000010', '0000000009', '0000000008']
    const mutations = ids.map((id) => mutation('replicated', id, second, reason))
    const id = await session.ingest(chBatch('replicated', Date.now(), { mutations }))
    const findings = await findingsOf(id, 'ch_stuck_mutations')
    expect(findings.map((f) => [f.key, f.severity, f.title, f.objects, f.metrics.queued])).toEqual([
      [
        'ch_stuck_mutations:db.replicated',
        'critical',
        'Mutation 0000000008 on db.replicated keeps failing, 4 more waiting',
        ['db.replicated', 'db.replicated:0000000008'],
        4,
      ],
    ])
    expect(findings[0].detail).toContain(
      '4 more mutations of the table are not done (4 queued behind it, 4 of them showing its failure',
    )
    expect(findings[0].detail).toEndWith(': 0000000009, 0000000010, 0000000011, 0000000012.')
    // The oldest wins over the number: one created a second earlier leads though its number is higher.
    const older = await session.ingest(
      chBatch('replicated', Date.now(), {
        mutations: [...mutations, mutation('replicated', '0000000013', second - 1000, reason)],
      }),
    )
    expect((await findingsOf(older, 'ch_stuck_mutations'))[0].objects).toEqual([
      'db.replicated',
      'db.replicated:0000000013',
    ])
  })

  test('past ten tables with stuck mutations, the rest are counted in one more finding', async () => {
    const now = Date.now()
    const mutations = Array.from({ length: 13 }, (_, i) =>
      mutation(`t${i + 1}`, `mutation_${i + 1}.txt`, now - (20 - i) * 3600_000, i === 12 ? 'Code: 395. boom' : ''),
    )
    const id = await session.ingest(chBatch('many-tables', now, { mutations }))
    const findings = await findingsOf(id, 'ch_stuck_mutations')
    expect(findings).toHaveLength(11)
    // Failing first, then the oldest: t13 (failing), t1 ... t9 are named; t10 to t12 are counted.
    const rest = findings.find((f) => f.key === 'ch_stuck_mutations')
    expect(rest).toMatchObject({
      severity: 'warning',
      title: '3 more tables with stuck mutations',
      objects: ['db.t10', 'db.t11', 'db.t12'],
      metrics: { tables: 3, mutations: 3 },
    })
    expect(findings.filter((f) => f.severity === 'critical').map((f) => f.key)).toEqual(['ch_stuck_mutations:db.t13'])
  })

  test('ch_queued_mutations: 100 not failing on a table is a warning (queue_warning); a failing one leaves it to ch_stuck_mutations', async () => {
    const now = Date.now()
    const queue = Array.from({ length: 100 }, (_, i) =>
      mutation('busy', `mutation_${i + 1}.txt`, now - 600_000 + i * 1000, '', { parts_to_do: 2 }),
    )
    const id = await session.ingest(chBatch('queued', now, { mutations: queue }))
    expect((await findingsOf(id, 'ch_queued_mutations')).map((f) => [f.key, f.severity, f.title, f.metrics])).toEqual([
      [
        'ch_queued_mutations:db.busy',
        'warning',
        '100 mutations queued on db.busy',
        { queued: 100, parts_to_do: 200, oldest_age_s: 600 },
      ],
    ])
    await session.ingest(chBatch('queued', now, { mutations: queue.slice(1) }))
    expect(await findingsOf(id, 'ch_queued_mutations')).toEqual([])
    await session.ingest(
      chBatch('queued', now, {
        mutations: [mutation('busy', 'mutation_0.txt', now - 700_000, 'Code: 6. boom'), ...queue],
      }),
    )
    expect(await findingsOf(id, 'ch_queued_mutations')).toEqual([])
    expect((await findingsOf(id, 'ch_stuck_mutations')).map((f) => [f.key, f.metrics.queued])).toEqual([
      ['ch_stuck_mutations:db.busy', 100],
    ])
    const { queuedMutations } = await import('../../src/server/doctor/rules/clickhouse/queued-mutations.ts')
    expect(queuedMutations.thresholds).toEqual({ queue_warning: 100 })
  })
})
