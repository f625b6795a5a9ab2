// The low cache-hit finding names its cause on a real PostgreSQL 17 watched by the real agent: a table
// read whole by sequential scans, each scan's blocks evicted from shared buffers (pg_buffercache_evict)
// so that every read misses, as a table larger than the cache would. The finding names the table, leads
// with the sequential-scan finding's own fix, and sizes the memory advice from the host's memory when
// the agent measured it (called a guess when not).
import { afterEach, expect, setDefaultTimeout, test } from 'bun:test'
import { roundedSetting } from '../../src/server/doctor/rules/postgres/memory-sizing.ts'
import { type PostgresDoctorRig, postgresDoctorRig, settled, workload } from '../support/doctor.ts'

setDefaultTimeout(90_000)

let rig: PostgresDoctorRig | undefined
afterEach(async () => {
  await rig?.stop()
  rig = undefined
})

test('a low hit ratio caused by sequential scans of one table names it and leads with its fix', async () => {
  rig = await postgresDoctorRig(17, {
    thresholds: {
      pg_sequential_scans: { warning_table_bytes: 1024 * 1024 },
      pg_cache_hit_ratio: { min_block_accesses: 1_000 },
    },
  })
  await rig.sql`CREATE EXTENSION pg_buffercache`
  await workload(rig.dsn, async (sql) => {
    await sql`CREATE TABLE orders (id int PRIMARY KEY, note text, filler text)`
    await sql`INSERT INTO orders SELECT g, 'n' || g, repeat('x', 20) FROM generate_series(1, 30000) g`
  })
  await settled(
    rig,
    'the inserts counted',
    "SELECT n_live_tup::int FROM pg_stat_user_tables WHERE relname = 'orders'",
    30_000,
  )
  await rig.sql`ANALYZE orders`
  // The baseline: the first sample of the counters carries no deltas.
  await rig.cycle()
  await workload(rig.dsn, async (sql) => {
    for (let i = 0; i < 120; i++) {
      await sql`SELECT count(*) FROM orders WHERE note = ${`n${i}`}`
      await sql`SELECT count(pg_buffercache_evict(bufferid)) FROM pg_buffercache
                WHERE relfilenode = pg_relation_filenode('orders') AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())`
    }
  })
  await settled(
    rig,
    'the scans counted',
    "SELECT seq_scan >= 120 FROM pg_stat_user_tables WHERE relname = 'orders'",
    true,
  )
  await rig.cycle()

  const [scans] = await rig.findings('pg_sequential_scans')
  expect(scans).toMatchObject({ key: 'pg_sequential_scans:public.orders' })
  const [cache] = await rig.findings('pg_cache_hit_ratio')
  expect(cache).toBeDefined()
  expect(cache.metrics.cache_hit_ratio).toBeLessThan(0.9)
  expect(cache).toMatchObject({
    severity: 'critical',
    title: 'Low buffer cache hit ratio: public.orders read by sequential scans',
    objects: ['public.orders'],
  })
  expect(cache.metrics.cause_table).toBe('public.orders')
  expect(cache.detail).toContain('The likely cause: public.orders was read whole 120 times by sequential scans')
  expect(cache.recommendation.startsWith('Fix the cause first: public.orders, give its scans an index')).toBe(true)
  // The cause's fix first: the very command of the sequential-scan finding.
  expect(cache.how_to_fix[0]).toBe(scans.how_to_fix[0])

  // The memory advice: sized from the host's memory when the agent measured it, a guess otherwise.
  const host = await rig.server.store.host.latestHost(rig.dbId)
  const total = host?.status.memory?.total_bytes
  const memoryFix = cache.how_to_fix.slice(1).join('\n')
  if (total) {
    expect(cache.metrics).toMatchObject({
      host_memory_bytes: total,
      advised_shared_buffers: roundedSetting(total * 0.25),
    })
    expect(memoryFix).toContain(`ALTER SYSTEM SET shared_buffers = '${roundedSetting(total * 0.25)}'`)
  } else {
    expect(cache.metrics).toMatchObject({ host_memory_bytes: null, advised_shared_buffers: null })
    expect(cache.recommendation).toContain('would be a guess')
  }
  expect(memoryFix).not.toContain("'4GB'")
})
