// ch_stuck_mutations and ch_long_merges on the chdb rig watched by the real agent: an ALTER ... UPDATE
// whose expression throws keeps failing until the finding's own KILL MUTATION ends it; a merge made
// slow (a column added with a DEFAULT that sleeps, computed for the old parts while merging) is long
// past lowered thresholds until the finding's SYSTEM STOP MERGES cancels it. The age levels of a stuck
// mutation that is not failing (the agent calls it stuck after an hour) come from crafted batches.
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

  test('a failing mutation is critical with its error; its KILL MUTATION cures it', async () => {
    await rig.ch.command('CREATE TABLE mut (id UInt64, s String) ENGINE = MergeTree ORDER BY id')
    await rig.ch.insert('mut', [{ id: 1, s: 'a' }])
    await rig.ch.command("ALTER TABLE mut UPDATE s = 'b' WHERE throwIf(id = 1)", undefined, { mutations_sync: 0 })
    await until('the failed attempt', async () => ((await rig.ch.query("SELECT 1 FROM system.mutations WHERE table = 'mut' AND latest_fail_reason != ''")).length > 0 ? true : undefined), { everyMs: 50, timeoutMs: 10_000 })
    const { mutation_id } = (await rig.ch.query<{ mutation_id: string }>("SELECT mutation_id FROM system.mutations WHERE table = 'mut'"))[0]!
    await rig.cycle()
    const [finding] = await rig.findings('ch_stuck_mutations')
    expect(finding).toMatchObject({
      key: `ch_stuck_mutations:default.mut:${mutation_id}`,
      severity: 'critical',
      category: 'maintenance',
      title: `Mutation ${mutation_id} on default.mut keeps failing`,
      objects: ['default.mut', `default.mut:${mutation_id}`],
      metrics: { parts_to_do: 1, failing: 1 },
    })
    expect(finding.detail).toStartWith(`Mutation ${mutation_id} on default.mut was created`)
    expect(finding.detail).toContain('still has 1 part to do; its latest attempt')
    expect(finding.detail).toContain('FUNCTION_THROW_IF_VALUE_IS_NON_ZERO')
    expect(finding.detail).toEndWith("The command: (UPDATE s = 'b' WHERE throwIf(id = 1))")
    expect(finding.how_to_investigate[0]).toContain(`FROM system.mutations WHERE database = 'default' AND table = 'mut' AND mutation_id = '${mutation_id}'`)
    expect(finding.how_to_fix).toHaveLength(1)
    expect((await rig.api('/doctor')).status).toBe('unhealthy')

    await rig.ch.command(command(finding.how_to_fix[0]))
    await until('the mutation killed', async () => ((await rig.ch.query("SELECT 1 FROM system.mutations WHERE table = 'mut' AND NOT is_done")).length === 0 ? true : undefined), { everyMs: 50, timeoutMs: 10_000 })
    await rig.cycle()
    expect(await rig.findings('ch_stuck_mutations')).toEqual([])
  })

  test('a merge running past the thresholds: warning, then critical, with its progress; SYSTEM STOP MERGES cures it', async () => {
    // Small granules and merge blocks, so the merge's progress moves every 1,024 rows.
    await rig.ch.command('CREATE TABLE slow (id UInt64) ENGINE = MergeTree ORDER BY id SETTINGS merge_max_block_size = 1024, index_granularity = 1024')
    await rig.ch.command('SYSTEM STOP MERGES slow')
    for (let i = 0; i < 2; i++) await rig.ch.command(`INSERT INTO slow SELECT number FROM numbers(${i * 20000}, 20000)`)
    // Merging the two parts computes the new column for their 40,000 rows: 0.3 ms each, 12 s in all.
    await rig.ch.command('ALTER TABLE slow ADD COLUMN pause UInt8 DEFAULT sleepEachRow(0.0003)')
    await rig.ch.command('SYSTEM START MERGES slow')
    const other = rig.ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
    const optimize = other.command({ query: 'OPTIMIZE TABLE slow FINAL' }).then(() => 'merged', (e) => e.type)
    const elapsed = async () => Number((await rig.ch.query<{ e: number }>("SELECT max(elapsed) AS e FROM system.merges WHERE table = 'slow'"))[0]?.e ?? 0)
    try {
      await until('the merge past a second', async () => ((await elapsed()) >= 1.2 ? true : undefined), { everyMs: 50, timeoutMs: 10_000 })
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
      expect(warning.detail).toMatch(/^A merge of 2 parts of default\.slow \(.+ compressed\) into all_1_2_1 has been running for [12]\.\d s and is \d+ % done/)
      expect(warning.metrics.progress).toBeGreaterThan(0)
      expect(warning.metrics.progress).toBeLessThan(1)

      await until('the merge past three seconds', async () => ((await elapsed()) >= 3.2 ? true : undefined), { everyMs: 50, timeoutMs: 10_000 })
      await rig.cycle()
      const [critical] = await rig.findings('ch_long_merges')
      expect(critical).toMatchObject({ key: 'ch_long_merges:default.slow:all_1_2_1', severity: 'critical' })
      expect(critical.metrics.elapsed_s).toBeGreaterThanOrEqual(3)
      expect(critical.how_to_fix[0]).toStartWith('SYSTEM STOP MERGES default.slow;')

      await rig.ch.command(command(critical.how_to_fix[0]))
      await until('the merge cancelled', async () => ((await rig.ch.query("SELECT 1 FROM system.merges WHERE table = 'slow'")).length === 0 ? true : undefined), { everyMs: 50, timeoutMs: 10_000 })
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

  test('a stuck mutation that is not failing: a warning, critical once a day old', async () => {
    const now = Date.now()
    const mutation = (id: string, ageMs: number) => ({
      database: 'db',
      table: 'big',
      mutation_id: id,
      command: 'DELETE WHERE day < today() - 90',
      create_time: now - ageMs,
      is_done: false,
      parts_to_do: 40,
      latest_fail_reason: '',
      latest_fail_time: null,
      stuck: true,
    })
    const ingest = (mutations: ReturnType<typeof mutation>[]) => session.ingest(chBatch('events', Date.now(), { mutations }))
    const id = await ingest([mutation('mutation_7.txt', 2 * 3600_000), mutation('mutation_3.txt', 25 * 3600_000)])
    const findings = async () => ((await session.ok(id, '/doctor')).top_issues as any[]).filter((f) => f.rule === 'ch_stuck_mutations')
    expect((await findings()).map((f) => [f.key, f.severity, f.title, f.metrics])).toEqual([
      ['ch_stuck_mutations:db.big:mutation_3.txt', 'critical', 'Mutation mutation_3.txt on db.big is not finishing', { parts_to_do: 40, age_s: 25 * 3600, failing: 0 }],
      ['ch_stuck_mutations:db.big:mutation_7.txt', 'warning', 'Mutation mutation_7.txt on db.big is not finishing', { parts_to_do: 40, age_s: 2 * 3600, failing: 0 }],
    ])
    await ingest([{ ...mutation('mutation_7.txt', 2 * 3600_000), is_done: true, stuck: false, parts_to_do: 0 }])
    expect(await findings()).toEqual([])
  })

  test('a failing mutation is critical at once (failing_critical_age_s 0), whatever its age', async () => {
    const now = Date.now()
    const id = await session.ingest(
      chBatch('failing-young', now, {
        mutations: [
          {
            database: 'db',
            table: 'big',
            mutation_id: 'mutation_9.txt',
            command: 'UPDATE x = throwIf(1) WHERE 1',
            create_time: now - 24_000,
            is_done: false,
            parts_to_do: 1,
            latest_fail_reason: 'Code: 395. boom',
            latest_fail_time: now - 1_000,
            stuck: true,
          },
        ],
      }),
    )
    const findings = ((await session.ok(id, '/doctor')).top_issues as any[]).filter((f) => f.rule === 'ch_stuck_mutations')
    expect(findings.map((f) => [f.key, f.severity, f.metrics])).toEqual([['ch_stuck_mutations:db.big:mutation_9.txt', 'critical', { parts_to_do: 1, age_s: 24, failing: 1 }]])
    const { stuckMutations } = await import('../../src/server/doctor/rules/clickhouse/stuck-mutations.ts')
    expect(stuckMutations.thresholds).toEqual({ critical_age_s: 86_400, failing_critical_age_s: 0, max_findings: 10 })
  })

  test('past ten stuck mutations, the rest are counted in one more finding', async () => {
    const now = Date.now()
    const mutations = Array.from({ length: 13 }, (_, i) => ({
      database: 'db',
      table: 't',
      mutation_id: `mutation_${i + 1}.txt`,
      command: `UPDATE x = ${i} WHERE 1`,
      create_time: now - (20 - i) * 3600_000,
      is_done: false,
      parts_to_do: 1,
      latest_fail_reason: i === 12 ? 'Code: 395. boom' : '',
      latest_fail_time: null,
      stuck: true,
    }))
    const id = await session.ingest(chBatch('many-mutations', now, { mutations }))
    const findings = ((await session.ok(id, '/doctor')).top_issues as any[]).filter((f) => f.rule === 'ch_stuck_mutations')
    expect(findings).toHaveLength(11)
    // Failing first, then the oldest: mutation_13 (failing), mutation_1 ... mutation_9 are named; 10 to 12 are counted.
    const rest = findings.find((f) => f.key === 'ch_stuck_mutations')
    expect(rest).toMatchObject({ severity: 'warning', title: '3 more stuck mutations', objects: ['db.t:mutation_10.txt', 'db.t:mutation_11.txt', 'db.t:mutation_12.txt'], metrics: { mutations: 3 } })
    expect(findings.filter((f) => f.severity === 'critical').map((f) => f.key)).toEqual(['ch_stuck_mutations:db.t:mutation_13.txt'])
  })
})
