// database_stats: the connected database's pg_stat_database counters as deltas since the previous
// sample, plus gauges: backends and connections, size, wraparound ages and the freeze settings, the
// oldest open transaction, what holds back the xmin horizon, and a few settings as 0/1. The first
// sample carries the gauges only.
import { DATABASE_COUNTER_KEYS, DATABASE_GAUGE_KEYS } from '../../../shared/metrics.ts'
import { num } from '../delta.ts'
import type { PostgresCollector } from '../types.ts'
import { type Counters, deltaSince, nonNegative, resetStamp, type Sample } from './common.ts'

const COUNTERS = DATABASE_COUNTER_KEYS

const GAUGES = DATABASE_GAUGE_KEYS

// connections_total counts client backends of the whole server, the ones max_connections limits
// (autovacuum, background workers and WAL senders have slots of their own). oldest_xact_age_s is the
// age of the oldest transaction open in this database other than the agent's, 0 when there is none.
// The xmin_* gauges say what holds back this database's xmin horizon, so that VACUUM can neither
// remove dead rows nor freeze: the oldest transaction ID or snapshot of a backend of this database or
// of a WAL sender (hot_standby_feedback), in XIDs with its pid and transaction age; the oldest xmin or
// catalog_xmin of the replication slots (server-wide); the oldest prepared transaction of this
// database. Each is null when nothing of that kind holds one. Every snapshot taken while a transaction
// runs has that transaction's XID as its xmin, so among backends of equal age the one whose own XID
// it is (the cause, not a bystander) is picked, then the oldest transaction.
const SQL = `
  SELECT d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit, d.tup_returned, d.tup_fetched,
         d.tup_inserted, d.tup_updated, d.tup_deleted, d.conflicts, d.temp_files, d.temp_bytes, d.deadlocks,
         d.stats_reset::text AS stats_reset,
         d.numbackends,
         pg_database_size(db.oid) AS database_size_bytes,
         (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS connections_total,
         current_setting('max_connections')::int AS max_connections,
         current_setting('superuser_reserved_connections')::int AS superuser_reserved_connections,
         age(db.datfrozenxid) AS xid_age,
         mxid_age(db.datminmxid) AS mxid_age,
         coalesce((SELECT extract(epoch FROM clock_timestamp() - min(xact_start)) FROM pg_stat_activity
                   WHERE datid = db.oid AND pid <> pg_backend_pid()), 0) AS oldest_xact_age_s,
         (current_setting('fsync') = 'on')::int AS fsync_on,
         (current_setting('track_counts') = 'on')::int AS track_counts_on,
         (current_setting('full_page_writes') = 'on')::int AS full_page_writes_on,
         (current_setting('autovacuum') = 'on')::int AS autovacuum_on,
         EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')::int AS pg_stat_statements_installed,
         current_setting('autovacuum_freeze_max_age')::bigint AS autovacuum_freeze_max_age,
         current_setting('autovacuum_multixact_freeze_max_age')::bigint AS autovacuum_multixact_freeze_max_age,
         hx.age AS xmin_backend_age, hx.pid AS xmin_backend_pid, hx.xact_age_s AS xmin_backend_xact_age_s,
         (SELECT max(greatest(age(xmin), age(catalog_xmin))) FROM pg_replication_slots) AS xmin_slot_age,
         px.n AS prepared_xacts, px.age AS xmin_prepared_age, px.age_s AS xmin_prepared_age_s
  FROM pg_database db
  JOIN pg_stat_database d ON d.datid = db.oid
  LEFT JOIN LATERAL (
    SELECT a.pid, greatest(age(a.backend_xid), age(a.backend_xmin)) AS age,
           extract(epoch FROM clock_timestamp() - a.xact_start) AS xact_age_s
    FROM pg_stat_activity a
    WHERE (a.datid = db.oid OR a.datid IS NULL) AND a.pid <> pg_backend_pid()
      AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
    ORDER BY 2 DESC, age(a.backend_xid) DESC NULLS LAST, a.xact_start
    LIMIT 1
  ) hx ON true
  CROSS JOIN LATERAL (
    SELECT count(*) AS n, max(age(p.transaction)) AS age, extract(epoch FROM clock_timestamp() - min(p.prepared)) AS age_s
    FROM pg_prepared_xacts p WHERE p.database = db.datname
  ) px
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
    gauges.xmin_backend_xact_age_s = nonNegative(gauges.xmin_backend_xact_age_s)
    gauges.xmin_prepared_age_s = nonNegative(gauges.xmin_prepared_age_s)
    return { database_stats: { ...delta, ...gauges } }
  },
}
