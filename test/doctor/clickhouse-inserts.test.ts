// The INSERT statements behind a partition's parts, on the chdb rig watched by the real agent: the
// parts rule names the statement that writes to the table, and ch_small_inserts flags a table that gets
// many INSERTs of few rows each (query_log is the rig's seeded one: chdb logs no queries itself).
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { insertTarget } from '../../src/server/doctor/rules/clickhouse/inserts.ts'
import { chTable } from '../../src/server/doctor/sql-text.ts'
import { seedQueryLog } from '../support/clickhouse-system-tables.ts'
import { type ClickHouseDoctorRig, clickhouseDoctorRig } from '../support/doctor.ts'

let rig: ClickHouseDoctorRig

beforeAll(async () => {
  rig = await clickhouseDoctorRig()
})
afterAll(async () => {
  await rig?.stop()
})

/** `times` finished INSERTs of `query` logged now (after the agent's watermark), `rows` written each. */
async function logInserts(query: string, times: number, rows: number) {
  const at = new Date(Date.now() + 1)
  await seedQueryLog(
    rig.ch,
    Array.from({ length: times }, () => ({
      event_time: at,
      query,
      query_kind: 'Insert',
      query_duration_ms: 2,
      written_rows: rows,
    })),
  )
}

test('the target of an INSERT statement, in the forms ClickHouse accepts', () => {
  expect(insertTarget('INSERT INTO events FORMAT JSONEachRow')).toEqual({ table: 'events' })
  expect(insertTarget('  insert into TABLE db.events (p, id) VALUES')).toEqual({ database: 'db', table: 'events' })
  expect(insertTarget('/* batch */ -- writer\nINSERT INTO `my db`.`we``ird` VALUES (1)')).toEqual({
    database: 'my db',
    table: 'we`ird',
  })
  expect(insertTarget('INSERT INTO "d\\"q" . "t\\\\x" SELECT 1')).toEqual({ database: 'd"q', table: 't\\x' })
  expect(insertTarget('INSERT INTO `*/ünï\ncode` VALUES')).toEqual({ table: '*/ünï\ncode' })
  expect(insertTarget("INSERT INTO FUNCTION s3('x') SELECT 1")).toBeUndefined()
  expect(insertTarget("INSERT INTO TABLE FUNCTION s3('x') SELECT 1")).toBeUndefined()
  expect(insertTarget('INSERT INTO TABLE function_log VALUES')).toEqual({ table: 'function_log' })
  expect(insertTarget('SELECT 1 -- INSERT INTO t')).toBeUndefined()
  expect(insertTarget('INSERTINTO t')).toBeUndefined()
  expect(insertTarget('INSERT INTO `unterminated')).toBeUndefined()
  // Every name as chTable writes it (the findings' own quoting) reads back exact: escapes and UTF-8 bytes.
  for (const name of [
    'plain',
    'with space',
    'new\nline\ttab',
    "back\\slash`tick'quote",
    '*/ ünï 𝄞',
    'nul\u0000bidi\u202e',
    '',
  ]) {
    const text = `INSERT INTO ${chTable('db', name || 'x')} VALUES`
    expect(insertTarget(text)).toEqual({ database: 'db', table: name || 'x' })
  }
})

test("a partition's parts name the INSERT that writes them; small INSERTs are a finding of their own", async () => {
  await rig.ch.command(
    'CREATE TABLE events (p UInt8, id UInt64) ENGINE = MergeTree PARTITION BY p ORDER BY id SETTINGS parts_to_delay_insert = 20, parts_to_throw_insert = 40',
  )
  await rig.ch.command('SYSTEM STOP MERGES events')
  for (let i = 0; i < 12; i++) await rig.ch.insert('events', [{ p: 1, id: i }])
  // What query_log says of the writers: 240 single-row INSERTs into events, and a well-batched writer
  // of another table, which is never flagged.
  await logInserts('INSERT INTO events FORMAT JSONEachRow', 240, 1)
  await logInserts('INSERT INTO default.batched FORMAT JSONEachRow', 200, 5000)
  await rig.cycle()

  const [parts] = await rig.findings('ch_parts_per_partition')
  expect(parts).toMatchObject({
    key: 'ch_parts_per_partition:default.events:1',
    metrics: { active_parts: 12, inserting_statements: 1, top_inserts_last_hour: 240, top_rows_per_insert: 1 },
  })
  const hash = parts.metrics.top_insert_hash
  expect(hash).toMatch(/^\d+$/)
  expect(parts.detail).toContain(
    `Written by statement ${hash} (INSERT INTO events FORMAT JSONEachRow): 240 INSERTs in the last `,
  )
  expect(parts.detail).toContain(', 1 row each.')
  expect(parts.how_to_investigate.at(-1)).toStartWith(
    `SELECT user, client_hostname, http_user_agent, count() AS inserts, avg(written_rows) AS rows_per_insert, countIf(Settings['async_insert'] = '1') AS async FROM system.query_log WHERE normalized_query_hash = ${hash} AND`,
  )

  const small = await rig.findings('ch_small_inserts')
  expect(small).toHaveLength(1)
  const [finding] = small
  expect(finding).toMatchObject({
    key: 'ch_small_inserts:events',
    category: 'performance',
    objects: ['events'],
    metrics: { inserts: 240, rows_per_insert: 1, statements: 1, top_insert_hash: hash },
  })
  // 240 INSERTs over the minute or two the statistics cover: between 2 and 4 a second, a warning.
  expect(finding.severity).toBe('warning')
  expect(finding.metrics.inserts_per_second).toBeGreaterThanOrEqual(1)
  expect(finding.metrics.inserts_per_second).toBeLessThanOrEqual(4)
  expect(finding.title).toStartWith('Small INSERTs into events: ')
  expect(finding.title).toEndWith(' a second, 1 row each')
  expect(finding.detail).toContain(
    'table events (the statements do not name its database) received 240 INSERTs of 1 row on average',
  )
  expect(finding.how_to_fix[0]).toStartWith(
    'ALTER USER <the inserting user> SETTINGS async_insert = 1, wait_for_async_insert = 1;',
  )
})

test('ten small INSERTs a second into a table with a hostile name are critical; the name stays text and quoted in SQL', async () => {
  const name = "we`ird't */ ünï"
  await logInserts("INSERT INTO `default`.`we\\`ird't */ ünï` (id) VALUES", 2400, 3)
  await rig.cycle()
  const small = await rig.findings('ch_small_inserts')
  const finding = small.find((f) => f.objects[0] === `default.${name}`)
  expect(finding).toBeDefined()
  expect(finding.severity).toBe('critical')
  expect(finding.metrics).toMatchObject({ inserts: 2400, rows_per_insert: 3 })
  expect(finding.detail).toContain("default.`we\\`ird't */ ünï` received 2,400 INSERTs of 3 rows on average")
  expect(finding.how_to_investigate[1]).toContain("database = 'default' AND table = 'we`ird\\'t */ ünï'")
  // The busiest table first.
  expect(small.map((f) => f.objects[0])).toEqual([`default.${name}`, 'events'])
})
