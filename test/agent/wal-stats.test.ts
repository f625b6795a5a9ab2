// wal_stats against PostgreSQL's own counters on 17 and 18. PostgreSQL 18 moved the WAL write and sync
// counters from pg_stat_wal to pg_stat_io (object 'wal'); the collector reads them there, so its deltas
// after known WAL activity (a committed insert, whose commit writes and fsyncs the WAL) equal
// pg_stat_io's own, as on 17 they equal pg_stat_wal's. Each collection and its ground truth are read in
// one transaction: with stats_fetch_consistency = cache (the default) both see the same snapshot.
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { walStats } from '../../src/agent/collectors/postgres/wal-stats.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(60_000)

const sessions: postgres.Sql[] = []
const connect = (url: string) => {
  const sql = postgres(url, { max: 1, onnotice: () => {}, fetch_types: false })
  sessions.push(sql)
  return sql
}
afterAll(async () => {
  await Promise.all(sessions.map((s) => s.end({ timeout: 1 }).catch(() => {})))
})

const KEYS = [
  'wal_records',
  'wal_fpi',
  'wal_bytes',
  'wal_buffers_full',
  'wal_write',
  'wal_sync',
  'wal_write_time_ms',
  'wal_sync_time_ms',
] as const
type Counters = Record<(typeof KEYS)[number], number>

/** PostgreSQL's own counters: pg_stat_wal, and on 18 the writes and syncs of pg_stat_io's WAL rows (context normal). */
const TRUTH = {
  17: `SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full, wal_write, wal_sync, wal_write_time AS wal_write_time_ms, wal_sync_time AS wal_sync_time_ms FROM pg_stat_wal`,
  18: `SELECT w.wal_records, w.wal_fpi, w.wal_bytes, w.wal_buffers_full,
               (SELECT sum(writes) FROM pg_stat_io WHERE object = 'wal' AND context = 'normal') AS wal_write,
               (SELECT sum(fsyncs) FROM pg_stat_io WHERE object = 'wal' AND context = 'normal') AS wal_sync,
               (SELECT sum(write_time) FROM pg_stat_io WHERE object = 'wal' AND context = 'normal') AS wal_write_time_ms,
               (SELECT sum(fsync_time) FROM pg_stat_io WHERE object = 'wal' AND context = 'normal') AS wal_sync_time_ms
        FROM pg_stat_wal w`,
} as const

for (const major of [17, 18] as const) {
  describe(`PostgreSQL ${major}`, () => {
    test('wal_stats: the deltas after a committed insert equal PostgreSQL’s own, writes and syncs included', async () => {
      const server = await sharedPostgres(major)
      const url = await server.freshDatabase()
      const agent = connect(url)
      const state = new Map<string, unknown>()
      const ctx = (sql: postgres.Sql): PostgresContext => ({
        name: 'test-db',
        database: '',
        sql,
        versionNum: major * 10_000,
        major,
        now: Date.now(),
        settings: { collectExplainPlans: false, collectReplication: false },
        state,
        notes: new Map(),
        log: createLogger('error', () => {}),
      })
      /** One collection and PostgreSQL's counters, from one statistics snapshot. */
      const collect = () =>
        agent.begin(async (tx) => {
          const sections = await walStats.collect(ctx(tx as unknown as postgres.Sql))
          const [row] = await tx.unsafe(TRUTH[major])
          const truth = Object.fromEntries(KEYS.map((k) => [k, Number(row![k])])) as Counters
          return { delta: sections.wal_stats as Counters | undefined, truth }
        })

      const before = await collect()
      expect(before.delta).toBeUndefined() // the first sample is the baseline

      const work = connect(url)
      await work`SET track_wal_io_timing = on`
      await work`CREATE TABLE t_wal (v int)`
      await work`INSERT INTO t_wal SELECT g FROM generate_series(1, 1000) g`
      await work`SELECT pg_stat_force_next_flush()`
      await work.end({ timeout: 5 })

      // The backend's statistics reach the views when it exits; collect until pg_stat_wal shows its
      // records, summing the collector's deltas since the baseline.
      const delta = Object.fromEntries(KEYS.map((k) => [k, 0])) as Counters
      let after = before
      await until('the inserts in pg_stat_wal', async () => {
        after = await collect()
        for (const k of KEYS) delta[k] += after.delta?.[k] ?? Number.NaN
        return after.truth.wal_records - before.truth.wal_records >= 1000 &&
          after.truth.wal_sync > before.truth.wal_sync
          ? true
          : undefined
      })
      const expected = Object.fromEntries(KEYS.map((k) => [k, after.truth[k] - before.truth[k]])) as Counters
      for (const k of KEYS) {
        if (k.endsWith('_ms')) expect(delta[k]).toBeCloseTo(expected[k], 6)
        else expect([k, delta[k]]).toEqual([k, expected[k]])
      }
      expect(delta.wal_write).toBeGreaterThan(0)
      expect(delta.wal_sync).toBeGreaterThan(0)
      expect(delta.wal_write_time_ms).toBeGreaterThan(0)
      expect(delta.wal_records).toBeGreaterThanOrEqual(1000)
    })
  })
}
