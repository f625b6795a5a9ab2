// Memory advice for spilling statements against the server's own figures, on a real PostgreSQL 17
// watched by the real agent: a sort of 300,000 wide rows under work_mem 4MB is advised the work_mem of
// one execution (its temp bytes per call), within 2× of the memory EXPLAIN ANALYZE shows the sort takes
// when it fits, and that work_mem keeps it in memory; a real plan's sort and hash figures size it too
// (within 2× of their memory when they fit; the planner's own estimate of a hash may still ask for 2
// batches at that work_mem, as it counts its overheads from estimates); a
// CREATE INDEX that spills is offered maintenance_work_mem, never work_mem.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { memoryAdvice, memorySettingFor, planMemoryNeed } from '../../src/server/doctor/work-mem.ts'
import { type PostgresDoctorRig, postgresDoctorRig, workload } from '../support/doctor.ts'

const MB = 1024 * 1024
const KB = 1024

let rig: PostgresDoctorRig

beforeAll(async () => {
  rig = await postgresDoctorRig(17, { thresholds: { pg_temp_files: { info_bytes: 1 * MB, warning_bytes: 1024 * MB, critical_bytes: 4096 * MB } } })
  await rig.sql`CREATE TABLE w AS SELECT g AS id, repeat(md5(g::text), 4) AS wide FROM generate_series(1, 300000) g`
  await rig.sql`ANALYZE w`
})
afterAll(async () => {
  await rig?.stop()
})

/** EXPLAIN (ANALYZE, FORMAT JSON) of `query` under `work_mem`, one sort or hash at a time (no parallel workers). */
async function explained(query: string, workMem: string): Promise<any> {
  const sql = postgres(rig.dsn, { max: 1, onnotice: () => {}, connection: { work_mem: workMem, max_parallel_workers_per_gather: '0' } })
  try {
    const [row] = await sql.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${query}`)
    return (row as any)['QUERY PLAN'][0]
  } finally {
    await sql.end({ timeout: 1 })
  }
}

/** The plan's nodes, depth first. */
const nodes = (plan: any): any[] => {
  const out: any[] = []
  const visit = (n: any) => {
    out.push(n)
    for (const c of n.Plans ?? []) visit(c)
  }
  visit(plan.Plan)
  return out
}

const SORT = 'SELECT * FROM w ORDER BY wide'
// The hash is built on the smaller side (100,000 of the rows): it still spills at 4MB, at a third of the cost.
const JOIN = 'SELECT count(*) FROM w a JOIN (SELECT * FROM w WHERE id <= 100000) b USING (wide)'

test('a spilling sort gets SET LOCAL work_mem for one execution, within 2× of what EXPLAIN ANALYZE shows it takes', async () => {
  await workload(rig.dsn, async (sql) => {
    await sql`SET work_mem = '4MB'`
    await sql`SET max_parallel_workers_per_gather = 0`
    for (let i = 0; i < 2; i++) await sql.unsafe(SORT)
  })
  const [stats] = await rig.sql<{ calls: number; temp_bytes: number }[]>`
    SELECT calls::int, (temp_blks_written * current_setting('block_size')::int)::float8 AS temp_bytes
      FROM pg_stat_statements WHERE query = ${SORT} AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
  expect(stats!.calls).toBe(2)
  await rig.cycle()
  const [finding] = await rig.findings('pg_temp_files')
  expect(finding).toBeDefined()
  // Sized from the temp bytes per call (2 calls), not their sum.
  const perCall = stats!.temp_bytes / 2
  const mb = Math.max(8, Math.ceil((2 * perCall) / MB))
  expect(finding.metrics).toMatchObject({ memory_setting: 'work_mem', memory_mb: mb })
  const fix = finding.how_to_fix.find((c: string) => c.includes(`SET LOCAL work_mem = '${mb}MB'`))
  expect(fix).toStartWith(`BEGIN; SET LOCAL work_mem = '${mb}MB'; <the statement>; COMMIT;   -- for statement `)
  expect(finding.how_to_fix.join('\n')).not.toMatch(/(^|[^_])SET work_mem/)

  // The server's own figure: the sort's memory when work_mem lets it fit.
  const fits = nodes(await explained(SORT, '1GB')).find((n) => n['Node Type'] === 'Sort')
  expect(fits['Sort Space Type']).toBe('Memory')
  const needed = fits['Sort Space Used'] * KB
  expect(mb * MB).toBeGreaterThanOrEqual(needed / 2)
  expect(mb * MB).toBeLessThanOrEqual(needed * 2)
  // And the advised work_mem keeps one execution in memory.
  const advised = nodes(await explained(SORT, `${mb}MB`)).find((n) => n['Node Type'] === 'Sort')
  expect(advised['Sort Space Type']).toBe('Memory')

  // One window, labelled, in bytes: no temp blocks beside a different window.
  expect(finding.title).toMatch(/^[\d.]+ MB of temporary files in the last 60 minutes$/)
  expect(finding.detail).toContain('written to temporary files in 2 calls')
  expect(finding.detail).toContain('in the same 60 minutes')
  expect(finding.detail).not.toContain('temp blocks written')
})

test('a real plan with actual figures sizes the sort and the hash, within 2× of their memory when they fit', async () => {
  const spilled = await explained(SORT, '4MB')
  const sortNeed = planMemoryNeed(spilled)!
  const sortFits = nodes(await explained(SORT, '1GB')).find((n) => n['Node Type'] === 'Sort')['Sort Space Used'] * KB
  expect(sortNeed.bytes).toBeGreaterThanOrEqual(sortFits / 2)
  expect(sortNeed.bytes).toBeLessThanOrEqual(sortFits * 2)
  expect(sortNeed.node).toStartWith('Sort (')

  // A hash join's inner side in 8 batches: its work_mem is the whole hash over hash_mem_multiplier.
  const multiplier = (await rig.sql<{ multiplier: number }[]>`SELECT current_setting('hash_mem_multiplier')::float8 AS multiplier`)[0]!.multiplier
  const hashSpilled = await explained(JOIN, '4MB')
  expect(nodes(hashSpilled).find((n) => n['Node Type'] === 'Hash')['Hash Batches']).toBeGreaterThan(1)
  const advice = memoryAdvice({ text: JOIN, plans: [hashSpilled], tempBytes: 1, calls: 1, settings: { hash_mem_multiplier: String(multiplier) } })!
  expect(advice.basis).toStartWith("its plan's Hash (")
  const hashFits = nodes(await explained(JOIN, '1GB')).find((n) => n['Node Type'] === 'Hash')
  expect(hashFits['Hash Batches']).toBe(1)
  const hashNeeded = (hashFits['Peak Memory Usage'] * KB) / multiplier
  expect(advice.needed_bytes).toBeGreaterThanOrEqual(hashNeeded / 2)
  expect(advice.needed_bytes).toBeLessThanOrEqual(hashNeeded * 2)
})

test('an index build that spills is offered maintenance_work_mem, never work_mem', async () => {
  const build = 'CREATE INDEX w_wide ON w (wide)'
  await workload(rig.dsn, async (sql) => {
    await sql`SET maintenance_work_mem = '1MB'`
    await sql`SET max_parallel_maintenance_workers = 0`
    await sql.unsafe(build)
  })
  const [stats] = await rig.sql<{ queryid: string; temp_bytes: number }[]>`
    SELECT queryid::text, (temp_blks_written * current_setting('block_size')::int)::float8 AS temp_bytes FROM pg_stat_statements
     WHERE query = ${build} AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
  expect(stats!.temp_bytes).toBeGreaterThan(1 * MB)
  await rig.cycle()
  const [finding] = await rig.findings('pg_temp_files')
  const mb = Math.max(8, Math.ceil((2 * stats!.temp_bytes) / MB))
  const fixes: string[] = finding.how_to_fix
  const forBuild = fixes.find((c) => c.startsWith(`SET maintenance_work_mem = '${mb}MB'; <the statement>; RESET maintenance_work_mem;`))
  expect(forBuild).toContain('index builds, CLUSTER and VACUUM sort under maintenance_work_mem, not work_mem')
  expect(forBuild).toContain(`-- for statement ${stats!.queryid} alone`)
  // The build gets no work_mem.
  expect(fixes.filter((c) => c.includes(`statement ${stats!.queryid} `) && /(^|[^_])work_mem =/.test(c))).toEqual([])
  expect(finding.detail).toMatch(new RegExp(`needing about ${mb} MB of maintenance_work_mem per execution: CREATE INDEX w_wide`))

  expect(['REINDEX INDEX w_wide', 'create unique index concurrently x on w (id)', 'CLUSTER w USING w_wide', 'VACUUM (FULL) w', '/* c */ ALTER TABLE w ADD PRIMARY KEY (id)'].map(memorySettingFor)).toEqual(
    Array(5).fill('maintenance_work_mem'),
  )
  expect(['SELECT * FROM w ORDER BY wide', 'WITH x AS (SELECT 1) SELECT * FROM x', 'INSERT INTO w SELECT * FROM w'].map(memorySettingFor)).toEqual(Array(3).fill('work_mem'))
})
