// database_stats: the connected database's pg_stat_database counters as deltas since the previous
// sample, plus gauges: backends and connections, size, wraparound ages, the oldest open transaction
// and a few settings as 0/1. The first sample carries the gauges only.
import { DATABASE_COUNTER_KEYS, DATABASE_GAUGE_KEYS } from '../../../shared/metrics.ts'
import { num } from '../delta.ts'
import type { PostgresCollector } from '../types.ts'
import { type Counters, deltaSince, nonNegative, resetStamp, type Sample } from './common.ts'

const COUNTERS = DATABASE_COUNTER_KEYS

const GAUGES = DATABASE_GAUGE_KEYS

// connections_total counts client backends of the whole server, the ones max_connections limits
// (autovacuum, background workers and WAL senders have slots of their own). oldest_xact_age_s is the
// age of the oldest transaction open in this database other than the agent's, 0 when there is none.
const SQL = `
  SELECT d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit, d.tup_returned, d.tup_fetched,
         d.tup_inserted, d.tup_updated, d.tup_deleted, d.conflicts, d.temp_files, d.temp_bytes, d.deadlocks,
         d.stats_reset::text AS stats_reset,
         d.numbackends,
         pg_database_size(db.oid) AS database_size_bytes,
         (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS connections_total,
         current_setting('max_connections')::int AS max_connections,
         age(db.datfrozenxid) AS xid_age,
         mxid_age(db.datminmxid) AS mxid_age,
         coalesce((SELECT extract(epoch FROM clock_timestamp() - min(xact_start)) FROM pg_stat_activity
                   WHERE datid = db.oid AND pid <> pg_backend_pid()), 0) AS oldest_xact_age_s,
         (current_setting('fsync') = 'on')::int AS fsync_on,
         (current_setting('track_counts') = 'on')::int AS track_counts_on,
         EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')::int AS pg_stat_statements_installed
  FROM pg_database db
  JOIN pg_stat_database d ON d.datid = db.oid
  WHERE db.datname = current_database()`

type Row = Record<(typeof COUNTERS)[number] | (typeof GAUGES)[number], string | number | null> & { stats_reset: string | null }

export const databaseStats: PostgresCollector = {
  name: 'database_stats',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const [row] = await ctx.sql.unsafe<Row[]>(SQL)
    if (!row) return {}
    const values = Object.fromEntries(COUNTERS.map((k) => [k, num(row[k])])) as Counters<(typeof COUNTERS)[number]>
    const sample: Sample<(typeof COUNTERS)[number]> = { resetAt: resetStamp(row.stats_reset), values }
    const delta = deltaSince(ctx.state.get('database_stats') as typeof sample | undefined, sample)
    ctx.state.set('database_stats', sample)
    const gauges = Object.fromEntries(GAUGES.map((k) => [k, num(row[k])])) as Counters<(typeof GAUGES)[number]>
    gauges.oldest_xact_age_s = nonNegative(gauges.oldest_xact_age_s)
    return { database_stats: { ...delta, ...gauges } }
  },
}
