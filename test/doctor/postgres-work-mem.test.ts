// Memory advice for spilling statements against the server's own figures, on a real PostgreSQL 17
// watched by the real agent: a sort of 300,000 wide rows under work_mem 4MB is advised the work_mem of
// one execution (its temp bytes per call), within 2× of the memory EXPLAIN ANALYZE shows the sort takes
// when it fits, and that work_mem keeps it in memory; a real plan's sort and hash figures size it too
// (within 2× of their memory when they fit; the planner's own estimate of a hash may still ask for 2
// batches at that work_mem, as it counts its overheads from estimates); a parallel plan is sized per
// process (each of its leader and workers has its own work_mem), not from all processes' spill; a
// CREATE INDEX that spills is offered maintenance_work_mem, never work_mem, sized from the one tape file
// its multi-pass sort rewrote (within 2× of the memory trace_sort reports it sorts in); and a setting in
// effect that already covers the need is never "raised" to a lower value.
// The database's maintenance_work_mem is 1MB (ALTER DATABASE, before the agent connects), so that the
// agent reports the setting the build ran under, as it would a server's.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import {
  memoryAdvice,
  memoryCommand,
  memoryReason,
  memorySettingFor,
  planMemoryNeed,
  roundedMb,
  spilledOnce,
} from '../../src/server/doctor/work-mem.ts'
import { type PostgresDoctorRig, watchDatabase, workload } from '../support/doctor.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { pgIdent } from '../../src/shared/sql-text.ts'

const MB = 1024 * 1024
const KB = 1024

let rig: PostgresDoctorRig

beforeAll(async () => {
  const pg = await sharedPostgres(17)
  const dsn = await pg.freshDatabase()
  const sql = postgres(dsn, { max: 2, onnotice: () => {} })
  await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
  const [db] = await sql<{ name: string }[]>`SELECT current_database() AS name`
  await sql.unsafe(`ALTER DATABASE ${pgIdent(db!.name)} SET maintenance_work_mem = '1MB'`)
  await sql`CREATE TABLE w AS SELECT g AS id, repeat(md5(g::text), 4) AS wide FROM generate_series(1, 300000) g`
  await sql`ANALYZE w`
  const watched = await watchDatabase(dsn, {
    thresholds: { pg_temp_files: { info_bytes: 1 * MB, warning_bytes: 1024 * MB, critical_bytes: 4096 * MB } },
  })
  rig = {
    ...watched,
    pg,
    dsn,
    sql,
    async stop() {
      await watched.stop()
      await sql.end({ timeout: 1 })
    },
  }
})
afterAll(async () => {
  await rig?.stop()
})

/** Session settings that make the planner choose two parallel workers for w (its costs of parallelism nil). */
const PARALLEL = {
  max_parallel_workers_per_gather: '2',
  parallel_setup_cost: '0',
  parallel_tuple_cost: '0',
  min_parallel_table_scan_size: '0',
}

/** EXPLAIN (ANALYZE, FORMAT JSON) of `query` under `work_mem`, one sort or hash at a time (no parallel workers) unless `session` says otherwise. */
async function explained(
  query: string,
  workMem: string,
  session: Record<string, string> = {},
  options = 'ANALYZE, FORMAT JSON',
): Promise<any> {
  const sql = postgres(rig.dsn, {
    max: 1,
    onnotice: () => {},
    connection: { work_mem: workMem, max_parallel_workers_per_gather: '0', ...session },
  })
  try {
    const [row] = await sql.unsafe(`EXPLAIN (${options}) ${query}`)
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
  // Sized from the temp bytes per call (2 calls), not their sum: one merge pass at the server's 4MB
  // (at least 11 runs of 4MB, merged 15 at a time), twice the bytes, rounded up to an eighth of 64.
  const perCall = stats!.temp_bytes / 2
  expect(spilledOnce(perCall, 4 * MB).passes).toBe(1)
  const mb = roundedMb(2 * perCall)
  expect(mb).toBe(Math.ceil(Math.ceil((2 * perCall) / MB) / 8) * 8)
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
  const multiplier = (
    await rig.sql<{ multiplier: number }[]>`SELECT current_setting('hash_mem_multiplier')::float8 AS multiplier`
  )[0]!.multiplier
  const hashSpilled = await explained(JOIN, '4MB')
  expect(nodes(hashSpilled).find((n) => n['Node Type'] === 'Hash')['Hash Batches']).toBeGreaterThan(1)
  const advice = memoryAdvice({
    text: JOIN,
    plans: [hashSpilled],
    tempBytes: 1,
    calls: 1,
    settings: { hash_mem_multiplier: String(multiplier) },
  })!
  expect(advice.basis).toStartWith("its plan's Hash (")
  const hashFits = nodes(await explained(JOIN, '1GB')).find((n) => n['Node Type'] === 'Hash')
  expect(hashFits['Hash Batches']).toBe(1)
  const hashNeeded = (hashFits['Peak Memory Usage'] * KB) / multiplier
  expect(advice.needed_bytes).toBeGreaterThanOrEqual(hashNeeded / 2)
  expect(advice.needed_bytes).toBeLessThanOrEqual(hashNeeded * 2)
})

/** Each process's figures of a node: the node's own (the leader's) and its Workers entries. */
const perProcess = (n: any): any[] => [n, ...(n.Workers ?? [])]

/** EXPLAIN ANALYZE with each worker's rows (VERBOSE adds them to the Workers entries). */
const VERBOSE_ANALYZE = 'ANALYZE, VERBOSE, FORMAT JSON'

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0)

/**
 * The rows each process of a parallel node produced, in perProcess's order: the workers' own (VERBOSE), the
 * leader's what is left of the node's total (its per-loop mean × loops, rounded to whole rows).
 */
function rowsPerProcess(n: any): number[] {
  const workers: number[] = (n.Workers ?? []).map((w: any) => w['Actual Rows'] * (w['Actual Loops'] ?? 1))
  const total = Math.round(n['Actual Rows'] * n['Actual Loops'])
  return [total - sum(workers), ...workers]
}

test('a parallel plan is sized per process: each of its leader and workers has its own work_mem', async () => {
  // Columns in another order than SORT's: `SELECT *` and `SELECT id, wide` are one statement to pg_stat_statements.
  const PSORT = 'SELECT wide, id FROM w ORDER BY wide'
  // The sort in a leader and 2 workers, each spilling its share under 4MB.
  const spilled = await explained(PSORT, '4MB', PARALLEL, VERBOSE_ANALYZE)
  const sort = nodes(spilled).find((n) => n['Node Type'] === 'Sort')
  expect(nodes(spilled).find((n) => n['Node Type'] === 'Gather Merge')['Workers Launched']).toBe(2)
  const used: number[] = perProcess(sort).map((p) => p['Sort Space Used'])
  expect(used).toHaveLength(3)
  expect(perProcess(sort).map((p) => p['Sort Space Type'])).toEqual(['Disk', 'Disk', 'Disk'])
  const need = planMemoryNeed(spilled)!
  // The busiest process's file ×2, not the three files' sum.
  expect(need.bytes).toBe(Math.max(...used) * KB * 2)
  expect(need.node).toBe(
    `Sort (${Math.max(...used)} kB on disk in the busiest of 3 processes (the leader and 2 workers), each with its own work_mem)`,
  )
  expect(need.processes).toBe(3)
  // The server's own figure: each process's sort memory when they all fit. The leader and the workers share
  // the rows differently from one run to the next, so the advice is held against what the busiest spilling
  // process's rows take in memory (the in-memory run's bytes per row, its largest): within 2×. Under it no
  // process spills.
  const fits = nodes(await explained(PSORT, '1GB', PARALLEL, VERBOSE_ANALYZE)).find((n) => n['Node Type'] === 'Sort')
  expect(perProcess(fits).map((p) => p['Sort Space Type'])).toEqual(['Memory', 'Memory', 'Memory'])
  const fitsUsed: number[] = perProcess(fits).map((p) => p['Sort Space Used'] * KB)
  const fitsRows = rowsPerProcess(fits)
  const spilledRows = rowsPerProcess(sort)
  expect(sum(fitsRows)).toBe(300_000)
  expect(sum(spilledRows)).toBe(300_000)
  const bytesPerRow = Math.max(...fitsUsed.map((bytes, i) => bytes / fitsRows[i]!))
  const busiest = used.indexOf(Math.max(...used))
  const busiestInMemory = spilledRows[busiest]! * bytesPerRow
  expect(need.bytes).toBeGreaterThanOrEqual(busiestInMemory / 2)
  expect(need.bytes).toBeLessThanOrEqual(busiestInMemory * 2)
  const advised = nodes(await explained(PSORT, `${roundedMb(need.bytes)}MB`, PARALLEL)).filter(
    (n) => n['Node Type'] === 'Sort',
  )
  expect(advised.flatMap(perProcess).map((p) => p['Sort Space Type'])).not.toContain('Disk')

  // Without a plan of actual figures: pg_stat_statements counts every process's temp blocks, so the
  // bytes per call are split over the processes a sampled plan (EXPLAIN without ANALYZE) shows.
  await workload(rig.dsn, async (sql) => {
    await sql`SET work_mem = '4MB'`
    for (const [k, v] of Object.entries(PARALLEL)) await sql.unsafe(`SET ${k} = '${v}'`)
    await sql.unsafe(PSORT)
  })
  const [stats] = await rig.sql<{ temp_bytes: number }[]>`
    SELECT (temp_blks_written * current_setting('block_size')::int)::float8 AS temp_bytes
      FROM pg_stat_statements WHERE query = ${PSORT} AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
  const sampled = await explained(PSORT, '4MB', PARALLEL, 'FORMAT JSON')
  expect(nodes(sampled)[0]['Workers Planned']).toBe(2)
  const fromBytes = memoryAdvice({
    text: PSORT,
    plans: [sampled],
    tempBytes: stats!.temp_bytes,
    calls: 1,
    settings: { work_mem: '4MB' },
  })!
  expect(fromBytes.processes).toBe(3)
  expect(fromBytes.needed_bytes).toBe((stats!.temp_bytes / 3) * 2)
  expect(fromBytes.basis).toBe(
    `twice its temp bytes per call (${(stats!.temp_bytes / MB).toFixed(1)} MB over its 3 processes (the leader and 2 workers), each with its own work_mem)`,
  )
  expect(memoryReason(fromBytes)).toContain('(per process: 3 processes each take it)')
  // Split evenly over the processes: held against the in-memory run's mean per process.
  const fitsMean = sum(fitsUsed) / fitsUsed.length
  expect(fromBytes.needed_bytes).toBeGreaterThanOrEqual(fitsMean / 2)
  expect(fromBytes.needed_bytes).toBeLessThanOrEqual(fitsMean * 2)

  // A Parallel Hash: one table shared by the leader and the 2 planned workers, sized for their work_mem
  // together × hash_mem_multiplier, so its whole table is divided by both.
  const multiplier = (
    await rig.sql<{ multiplier: number }[]>`SELECT current_setting('hash_mem_multiplier')::float8 AS multiplier`
  )[0]!.multiplier
  const hashSpilled = await explained(JOIN, '1MB', PARALLEL)
  const hash = nodes(hashSpilled).find((n) => n['Node Type'] === 'Hash')
  expect(hash['Parallel Aware']).toBe(true)
  expect(nodes(hashSpilled).find((n) => n['Node Type'] === 'Gather')['Workers Planned']).toBe(2)
  expect(hash['Hash Batches']).toBeGreaterThan(1)
  const hashNeed = planMemoryNeed(hashSpilled, multiplier)!
  expect(hashNeed.bytes).toBe((hash['Peak Memory Usage'] * KB * hash['Hash Batches']) / multiplier / 3)
  expect(hashNeed.node).toBe(
    `Parallel Hash (${hash['Hash Batches']} batches of up to ${hash['Peak Memory Usage']} kB, one table shared by 3 processes (the leader and 2 workers) whose work_mem adds up)`,
  )
  // The server's own figure: the whole table when it fits in one batch, per process.
  const hashFits = nodes(await explained(JOIN, '16MB', PARALLEL)).find((n) => n['Node Type'] === 'Hash')
  expect(hashFits['Hash Batches']).toBe(1)
  const hashFitsEach = (hashFits['Peak Memory Usage'] * KB) / multiplier / 3
  expect(hashNeed.bytes).toBeGreaterThanOrEqual(hashFitsEach / 2)
  expect(hashNeed.bytes).toBeLessThanOrEqual(hashFitsEach * 2)
  // At the need rounded up to whole MB, the shared table fits in one batch.
  const atNeed = nodes(await explained(JOIN, `${Math.ceil(hashNeed.bytes / MB)}MB`, PARALLEL)).find(
    (n) => n['Node Type'] === 'Hash',
  )
  expect(atNeed['Hash Batches']).toBe(1)
})

test('a setting in effect that covers the need is never lowered: nothing to raise', async () => {
  const spilled = await explained(SORT, '4MB')
  const sortDisk = nodes(spilled).find((n) => n['Node Type'] === 'Sort')['Sort Space Used']
  const need = sortDisk * KB * 2
  // The server's work_mem is 256MB (the statement ran with less, in its session): nothing to raise.
  const covered = memoryAdvice({ text: SORT, plans: [spilled], settings: { work_mem: '256MB' } })!
  expect(covered).toMatchObject({
    setting: 'work_mem',
    needed_bytes: need,
    raise: false,
    mb: 256,
    current_bytes: 256 * MB,
  })
  expect(memoryCommand(covered)).toBe('SHOW work_mem;')
  expect(memoryReason(covered)).toBe(
    `its plan's Sort (${sortDisk} kB on disk): about ${(need / MB).toFixed(1)} MB per execution, which the work_mem in effect (256.0 MB) already covers: nothing to raise; run SHOW work_mem in the session or as the role that runs it, which may set it lower`,
  )
  // Below the need, the raise is to the need rounded up, above the setting in effect.
  const raised = memoryAdvice({ text: SORT, plans: [spilled], settings: { work_mem: '4MB' } })!
  expect(raised).toMatchObject({ raise: true, mb: roundedMb(need), current_bytes: 4 * MB })
  expect(memoryCommand(raised)).toBe(`BEGIN; SET LOCAL work_mem = '${roundedMb(need)}MB'; <the statement>; COMMIT;`)
  // SHOW's bare number is kB: 65536 is 64MB.
  expect(memoryAdvice({ text: SORT, plans: [spilled], settings: { work_mem: '65536' } })!.current_bytes).toBe(64 * MB)

  // The same for maintenance_work_mem: a build whose 1GB in effect covers it gets no SET.
  const build = memoryAdvice({
    text: 'CREATE INDEX w_wide ON w (wide)',
    tempBytes: 127.7 * MB,
    calls: 1,
    settings: { maintenance_work_mem: '1GB' },
  })!
  expect(build).toMatchObject({ setting: 'maintenance_work_mem', raise: false, mb: 1024 })
  expect(memoryCommand(build)).toBe('SHOW maintenance_work_mem;')
})

/** trace_sort's last "... sort ... ended" line of CREATE INDEX w_wide under `memory` (serial, dropped after). */
async function tracedBuild(memory: string): Promise<string> {
  const lines: string[] = []
  const sql = postgres(rig.dsn, { max: 1, onnotice: (n) => lines.push(String(n.message)) })
  try {
    await sql.unsafe(`SET maintenance_work_mem = '${memory}'`)
    await sql`SET max_parallel_maintenance_workers = 0`
    await sql`SET trace_sort = on`
    await sql`SET client_min_messages = log`
    await sql`CREATE INDEX w_traced ON w (wide)`
    await sql`DROP INDEX w_traced`
  } finally {
    await sql.end({ timeout: 1 })
  }
  return lines.filter((l) => / sort of worker -1 ended/.test(l)).at(-1) ?? ''
}

test('an index build that spills is offered maintenance_work_mem, never work_mem, sized from its multi-pass sort', async () => {
  const build = 'CREATE INDEX w_wide ON w (wide)'
  // Under the database's maintenance_work_mem of 1MB, which the agent reports as in effect.
  await workload(rig.dsn, async (sql) => {
    await sql`SET max_parallel_maintenance_workers = 0`
    await sql.unsafe(build)
  })
  const [stats] = await rig.sql<{ queryid: string; temp_bytes: number }[]>`
    SELECT queryid::text, (temp_blks_written * current_setting('block_size')::int)::float8 AS temp_bytes FROM pg_stat_statements
     WHERE query = ${build} AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
  expect(stats!.temp_bytes).toBeGreaterThan(1 * MB)
  await rig.cycle()
  const [finding] = await rig.findings('pg_temp_files')
  // At 1MB the sort merges 6 runs at a time: its ~55 runs take 3 passes, each but the last rewriting the
  // whole tape file (127.7 MB written for a 42.5 MB file, measured). Twice the file, rounded up to an
  // eighth of its power of two; twice all it wrote was 256 MB, nearly 5× what it sorts in.
  const once = spilledOnce(stats!.temp_bytes, 1 * MB)
  expect(once.passes).toBe(3)
  const mb = roundedMb(2 * once.bytes)
  expect(mb).toBe(Math.ceil(Math.ceil((2 * stats!.temp_bytes) / 3 / MB) / 8) * 8)
  const fixes: string[] = finding.how_to_fix
  const forBuild = fixes.find((c) =>
    c.startsWith(`SET maintenance_work_mem = '${mb}MB'; <the statement>; RESET maintenance_work_mem;`),
  )
  expect(forBuild).toContain('index builds, CLUSTER and VACUUM sort under maintenance_work_mem, not work_mem')
  expect(forBuild).toContain(`-- for statement ${stats!.queryid} alone`)
  expect(forBuild).toContain('written in 3 merge passes under the 1.0 MB in effect')
  // The build gets no work_mem.
  expect(fixes.filter((c) => c.includes(`statement ${stats!.queryid} `) && /(^|[^_])work_mem =/.test(c))).toEqual([])
  expect(finding.detail).toMatch(
    new RegExp(`needing about ${mb} MB of maintenance_work_mem per execution: CREATE INDEX w_wide`),
  )

  // The server's own figure: trace_sort's memory for the build when it sorts in memory. The advice is
  // within 2× of it, and at the advised value the build sorts in memory.
  const fits = /internal sort of worker -1 ended, (\d+) KB used/.exec(await tracedBuild('1GB'))
  expect(fits).not.toBeNull()
  const needed = Number(fits![1]) * KB
  expect(mb * MB).toBeGreaterThanOrEqual(needed)
  expect(mb * MB).toBeLessThanOrEqual(needed * 2)
  expect(await tracedBuild(`${mb}MB`)).toStartWith('internal sort of worker -1 ended')

  expect(
    [
      'REINDEX INDEX w_wide',
      'create unique index concurrently x on w (id)',
      'CLUSTER w USING w_wide',
      'VACUUM (FULL) w',
      '/* c */ ALTER TABLE w ADD PRIMARY KEY (id)',
    ].map(memorySettingFor),
  ).toEqual(Array(5).fill('maintenance_work_mem'))
  expect(
    ['SELECT * FROM w ORDER BY wide', 'WITH x AS (SELECT 1) SELECT * FROM x', 'INSERT INTO w SELECT * FROM w'].map(
      memorySettingFor,
    ),
  ).toEqual(Array(3).fill('work_mem'))
})
