// The ClickHouse parts rules on the chdb rig watched by the real agent: inserts with merges stopped
// fill a partition up to its table's own parts_to_delay_insert (delayed inserts, then refused ones on
// a tighter table), many partitions raise the server's part count, and ALTER ... DETACH PART leaves
// detached parts; merging, dropping and attaching cure each state.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { ClickHouseLogLevel } from '@clickhouse/client'
import { type ClickHouseDoctorRig, clickhouseDoctorRig } from '../support/doctor.ts'

let rig: ClickHouseDoctorRig

beforeAll(async () => {
  rig = await clickhouseDoctorRig({
    thresholds: { ch_total_parts: { warning_parts: 40, critical_parts: 80 }, ch_detached_parts: { critical_parts: 2 } },
  })
})
afterAll(async () => {
  await rig?.stop()
})

/** `n` inserts of one row each into partition `p`: `n` new parts while merges are stopped. */
async function insertParts(table: string, n: number, p = 1) {
  for (let i = 0; i < n; i++) await rig.ch.insert(table, [{ p, id: i }])
}

test("parts per partition against the table's own thresholds; delayed then refused inserts; merging cures both", async () => {
  await rig.ch.command(
    'CREATE TABLE events (p UInt8, id UInt64) ENGINE = MergeTree PARTITION BY p ORDER BY id SETTINGS parts_to_delay_insert = 20, parts_to_throw_insert = 40',
  )
  await rig.ch.command('SYSTEM STOP MERGES events')
  await insertParts('events', 9)
  await rig.cycle()
  expect(await rig.findings('ch_parts_per_partition')).toEqual([]) // 9 of 20: 45 %

  await insertParts('events', 1)
  await rig.cycle()
  const [warning] = await rig.findings('ch_parts_per_partition')
  expect(warning).toMatchObject({
    key: 'ch_parts_per_partition:default.events:1',
    severity: 'warning',
    category: 'performance',
    title: 'Too many parts in partition 1 of default.events',
    objects: ['default.events', 'default.events:1'],
    metrics: { active_parts: 10, parts_to_delay_insert: 20, parts_to_throw_insert: 40, delay_ratio: 0.5, rows: 10 },
  })
  expect(warning.detail).toContain('Partition 1 of default.events has 10 active parts (10 rows')
  expect(warning.detail).toContain('50 % of parts_to_delay_insert (20)')
  expect(warning.how_to_fix).toContain(
    "OPTIMIZE TABLE default.events PARTITION ID '1' FINAL;   -- merges the partition now: rewrites it whole (heavy I/O, needs free disk for a copy), so off-peak and only once inserts are batched",
  )
  expect(warning.how_to_investigate[0]).toContain("WHERE active AND database = 'default' AND table = 'events'")
  expect(await rig.findings('ch_delayed_inserts')).toEqual([])

  // The 21st insert finds 20 parts: ClickHouse delays it.
  await insertParts('events', 11)
  await rig.cycle()
  expect(await rig.findings('ch_parts_per_partition')).toEqual([
    expect.objectContaining({
      severity: 'critical',
      metrics: expect.objectContaining({ active_parts: 21, delay_ratio: 1.05 }),
    }),
  ])
  const [delayed] = await rig.findings('ch_delayed_inserts')
  expect(delayed).toMatchObject({
    key: 'ch_delayed_inserts',
    severity: 'warning',
    title: '1 INSERT delayed for too many parts',
    objects: ['default.events:1'],
    metrics: { delayed_inserts: 1, rejected_inserts: 0 },
  })
  expect(delayed.detail).toStartWith(
    "In the last 5 minutes ClickHouse slowed down 1 INSERT, because a partition had reached its table's parts_to_delay_insert. ",
  )
  expect(delayed.detail).toContain('default.events partition 1 (21 parts; delay from 20, refused from 40)')

  // A tighter table: the third insert is delayed, the fourth refused ("Too many parts").
  await rig.ch.command(
    'CREATE TABLE tight (p UInt8, id UInt64) ENGINE = MergeTree ORDER BY id SETTINGS parts_to_delay_insert = 2, parts_to_throw_insert = 3',
  )
  await rig.ch.command('SYSTEM STOP MERGES tight')
  await insertParts('tight', 3)
  const quiet = rig.ch.createClient({ log: { level: ClickHouseLogLevel.OFF } })
  expect(
    await quiet.insert({ table: 'tight', values: [{ p: 1, id: 9 }], format: 'JSONEachRow' }).catch((e) => e.type),
  ).toBe('TOO_MANY_PARTS')
  await rig.cycle()
  const [refused] = await rig.findings('ch_delayed_inserts')
  expect(refused).toMatchObject({
    severity: 'critical',
    title: '1 INSERT refused for too many parts',
    metrics: { delayed_inserts: 2, rejected_inserts: 1 },
  })
  expect(refused.objects).toEqual(['default.tight:all', 'default.events:1'])
  expect(refused.detail).toStartWith(
    'In the last 5 minutes ClickHouse refused 1 INSERT ("Too many parts") and slowed down 2 INSERTs, because',
  )
  // The doctor lists findings of one severity and rule by key.
  const partitions = await rig.findings('ch_parts_per_partition')
  expect(partitions.map((f) => [f.key, f.severity, f.metrics.active_parts])).toEqual([
    ['ch_parts_per_partition:default.events:1', 'critical', 21],
    ['ch_parts_per_partition:default.tight:all', 'critical', 3],
  ])
  expect(partitions[1].detail).toContain(
    'it has reached parts_to_throw_insert (3): INSERTs into it fail with "Too many parts"',
  )
  expect((await rig.api('/doctor')).status).toBe('unhealthy')
  // Judged over the last minutes: past the window the counts are gone though the partitions are still full.
  rig.server.advance(5 * 60_000 + 60_000)
  try {
    expect(await rig.findings('ch_delayed_inserts')).toEqual([])
  } finally {
    rig.server.advance(-(5 * 60_000 + 60_000))
  }
  expect(await rig.findings('ch_delayed_inserts')).toHaveLength(1)

  // Cured: merges run again and the partition is merged into one part; the tight table is dropped.
  await rig.ch.command('SYSTEM START MERGES events')
  await rig.ch.command('OPTIMIZE TABLE events FINAL')
  await rig.ch.command('DROP TABLE tight SYNC')
  await rig.cycle()
  expect(await rig.findings('ch_parts_per_partition')).toEqual([])
  // Resolved at once: the parts show every partition under its threshold, though the window still counts the delays.
  expect(await rig.findings('ch_delayed_inserts')).toEqual([])
})

test('total active parts on the server: warning, then critical; dropping the table cures it', async () => {
  await rig.ch.command('CREATE TABLE many (p UInt16, id UInt64) ENGINE = MergeTree PARTITION BY p ORDER BY id')
  await rig.ch.command('SYSTEM STOP MERGES many')
  // One INSERT touching 45 partitions writes 45 parts.
  await rig.ch.insert(
    'many',
    Array.from({ length: 45 }, (_, p) => ({ p, id: 1 })),
  )
  const activeParts = async () =>
    Number((await rig.ch.query<{ n: string }>('SELECT count() AS n FROM system.parts WHERE active'))[0]!.n)
  await rig.cycle()
  const total = await activeParts()
  expect(total).toBeGreaterThanOrEqual(45)
  expect(total).toBeLessThan(80)
  const [warning] = await rig.findings('ch_total_parts')
  expect(warning).toMatchObject({
    key: 'ch_total_parts',
    severity: 'warning',
    category: 'capacity',
    title: 'Too many active parts on the server',
    metrics: { active_parts: total },
  })
  expect(warning.objects[0]).toBe('default.many')
  expect(warning.detail).toContain(`The server has ${total} active parts`)
  expect(warning.detail).toContain('The most: default.many (45 parts in 45 partitions)')
  expect(warning.how_to_fix[0]).toStartWith('OPTIMIZE TABLE default.many FINAL;')

  await rig.ch.insert(
    'many',
    Array.from({ length: 40 }, (_, p) => ({ p, id: 2 })),
  )
  await rig.cycle()
  expect(await rig.findings('ch_total_parts')).toEqual([
    expect.objectContaining({ severity: 'critical', metrics: expect.objectContaining({ active_parts: total + 40 }) }),
  ])

  await rig.ch.command('DROP TABLE many SYNC')
  await rig.cycle()
  expect(await rig.findings('ch_total_parts')).toEqual([])
})

test('detached parts: DETACH PART raises a warning, two are critical (lowered threshold); ATTACH PART cures it', async () => {
  await rig.ch.command('CREATE TABLE kept (id UInt64) ENGINE = MergeTree ORDER BY id')
  await rig.ch.command('SYSTEM STOP MERGES kept')
  for (let i = 0; i < 2; i++) await rig.ch.insert('kept', [{ id: i }])
  const names = (
    await rig.ch.query<{ name: string }>("SELECT name FROM system.parts WHERE table = 'kept' AND active ORDER BY name")
  ).map((r) => r.name)
  expect(names).toHaveLength(2)

  await rig.ch.command(`ALTER TABLE kept DETACH PART '${names[0]}'`)
  await rig.cycle()
  const [warning] = await rig.findings('ch_detached_parts')
  expect(warning).toMatchObject({
    key: 'ch_detached_parts',
    severity: 'warning',
    category: 'reliability',
    title: '1 detached part',
    metrics: { detached_parts: 1 },
  })
  expect(warning.how_to_investigate[0]).toContain('FROM system.detached_parts')

  await rig.ch.command(`ALTER TABLE kept DETACH PART '${names[1]}'`)
  await rig.cycle()
  expect(await rig.findings('ch_detached_parts')).toEqual([
    expect.objectContaining({ severity: 'critical', title: '2 detached parts', metrics: { detached_parts: 2 } }),
  ])

  for (const name of names) await rig.ch.command(`ALTER TABLE kept ATTACH PART '${name}'`)
  await rig.cycle()
  expect(await rig.findings('ch_detached_parts')).toEqual([])
  expect(Number((await rig.ch.query<{ n: string }>('SELECT count() AS n FROM kept'))[0]!.n)).toBe(2)
})
