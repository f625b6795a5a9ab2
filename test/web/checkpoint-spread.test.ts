// The checkpoint chart's spread on a real checkpoint: PostgreSQL 17 with checkpoint_timeout = 30 s runs a
// paced checkpoint over about 27 s (checkpoint_completion_target 0.9) and counts its write time and
// buffers in pg_stat_checkpointer only when it ends, as one cycle's delta. spreadCheckpoints shares
// them among the minutes the checkpoint ran (ending with the bucket it was seen in), keeping the totals
// exactly, never more than a bucket's length of writing in a bucket. The dashboard's buckets are a minute
// or more; 10-second buckets here let a 27-second checkpoint (the shortest checkpoint_timeout is 30 s)
// cross several of them. The checkpoint is the one WAL volume requests (max_wal_size lowered to its
// minimum, then a WAL segment switched), paced exactly as a timed one is, by the same settings: it starts
// once the table is written instead of a whole checkpoint_timeout later.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { spreadCheckpoints } from '../../src/web/pages/db/internals.tsx'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

const STEP = 10_000
let pg: PostgresServer
let sql: postgres.Sql

beforeAll(async () => {
  pg = await startPostgres(17, ['-c', 'checkpoint_timeout=30s', '-c', 'checkpoint_completion_target=0.9'])
  sql = postgres(pg.url(), { max: 1, onnotice: () => {} })
})

afterAll(async () => {
  await sql?.end({ timeout: 1 })
  await pg?.stop()
})

interface Checkpointer {
  requested: number
  write: number
  sync: number
  buffers: number
}

const read = async (): Promise<Checkpointer> =>
  (
    await sql<
      Checkpointer[]
    >`SELECT num_requested::int AS requested, write_time::float8 AS write, sync_time::float8 AS sync, buffers_written::float8 AS buffers FROM pg_stat_checkpointer`
  )[0]!

test('a paced checkpoint written over about 27 s is spread over the buckets it ran in, its totals kept', async () => {
  await sql.unsafe('CHECKPOINT')
  const before = await read()
  // About 600 dirty buffers: enough for the checkpointer to pace its writes over the completion target.
  // An INSERT (not CREATE TABLE AS, which writes through a small ring) leaves the pages dirty in shared buffers.
  await sql.unsafe('CREATE TABLE filler (id int, pad text)')
  await sql.unsafe("INSERT INTO filler SELECT g, repeat('x', 40) FROM generate_series(1, 100000) g")
  // With max_wal_size at its minimum (two segments), every finished WAL segment requests a checkpoint,
  // which is not an immediate one: it paces its writes by checkpoint_timeout × checkpoint_completion_target.
  await sql.unsafe("ALTER SYSTEM SET max_wal_size = '32MB'")
  await sql.unsafe('SELECT pg_reload_conf()')
  await until('this session to read the lowered max_wal_size', async () =>
    (await sql<{ v: string }[]>`SELECT current_setting('max_wal_size') AS v`)[0]!.v === '32MB' ? true : undefined,
  )
  await sql.unsafe('SELECT pg_switch_wal()')
  const after = await until(
    'a requested checkpoint that wrote the table at its pace',
    async () => {
      const now = await read()
      return now.requested > before.requested && now.write - before.write > 10_000 ? now : undefined
    },
    { timeoutMs: 120_000, everyMs: 500 },
  )
  const write = after.write - before.write
  const sync = after.sync - before.sync
  const buffers = after.buffers - before.buffers
  // Paced: most of the 27 s target went to writing, which PostgreSQL counts in one go at the end.
  expect(write).toBeGreaterThan(10_000)

  // The checkpoint's delta lands in the bucket it ended in.
  const seen = Math.floor(Date.now() / STEP) * STEP
  const point = (ts: number, w: number, s: number, b: number) =>
    ({
      ts: new Date(ts).toISOString(),
      checkpoint_write_time_ms: w,
      checkpoint_sync_time_ms: s,
      buffers_checkpoint: b,
      checkpoints_timed: w > 0 ? 1 : 0,
    }) as never
  const points = [0, 1, 2, 3, 4, 5]
    .map((i) => point(seen - (6 - i) * STEP, 0, 0, 0))
    .concat([point(seen, write, sync, buffers)])
  const spread = spreadCheckpoints(points, STEP) as unknown as Record<string, number>[]
  const sum = (k: string) => spread.reduce((s, p) => s + (p[k] ?? 0), 0)
  expect(sum('checkpoint_write_time_ms')).toBeCloseTo(write, 6)
  expect(sum('checkpoint_sync_time_ms')).toBeCloseTo(sync, 6)
  expect(sum('buffers_checkpoint')).toBeCloseTo(buffers, 6)
  // No bucket holds more than its length of checkpoint time, and the time goes back exactly as far as it lasted.
  for (const p of spread)
    expect(p.checkpoint_write_time_ms! + p.checkpoint_sync_time_ms!).toBeLessThanOrEqual(STEP + 1e-6)
  const busy = spread.filter((p) => p.checkpoint_write_time_ms! + p.checkpoint_sync_time_ms! > 0)
  expect(busy.length).toBe(Math.ceil((write + sync) / STEP))
  expect(busy.length).toBeGreaterThanOrEqual(2)
  // The count stays in the bucket the checkpoint ended in.
  expect(spread.map((p) => p.checkpoints_timed)).toEqual([0, 0, 0, 0, 0, 0, 1])
}, 180_000)
