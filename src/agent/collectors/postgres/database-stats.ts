// database_stats: the connected database's pg_stat_database counters as deltas since the previous
// sample, plus gauges: backends and connections, size, wraparound ages and the freeze settings, the
// oldest open transaction, what holds back the xmin horizon, and a few settings as 0/1. The first
// sample carries the gauges only. The holders of the xmin horizon also travel named, in the
// xmin_holders section (sessions, WAL senders, replication slots, prepared transactions).
import { DATABASE_COUNTER_KEYS, DATABASE_GAUGE_KEYS } from '../../../shared/metrics.ts'
import type { XminHolder } from '../../../shared/wire.ts'
import { epoch, num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { type Counters, deltaSince, nonNegative, resetStamp, type Sample } from './common.ts'
import { maskSecretStatements } from '../../secret-statements.ts'
import { PREPARED } from '../../own-statements.ts'

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
// pg_database_size stats every file of the database (20 ms with 1,000 tables, PostgreSQL 17, the most
// of this statement): it is read only when the rows written to the database (inserted, updated,
// deleted, in tables and catalogs alike: DDL, index builds and temporary tables write catalog rows)
// moved since the last reading, $1, and at least every SIZE_MAX_AGE_MS (what no counter shows: a VACUUM
// giving pages back); otherwise database_size_bytes is null and the last reading is sent.
const SQL = `
  SELECT d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit, d.tup_returned, d.tup_fetched,
         d.tup_inserted, d.tup_updated, d.tup_deleted, d.conflicts, d.temp_files, d.temp_bytes, d.deadlocks,
         d.stats_reset::text AS stats_reset,
         d.numbackends,
         concat_ws(',', d.tup_inserted, d.tup_updated, d.tup_deleted, d.stats_reset) AS size_fingerprint,
         CASE WHEN $1::text IS NOT DISTINCT FROM concat_ws(',', d.tup_inserted, d.tup_updated, d.tup_deleted, d.stats_reset)
              THEN NULL ELSE pg_database_size(db.oid) END AS database_size_bytes,
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
         (current_setting('track_io_timing') = 'on')::int AS track_io_timing_on,
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

// The holders of the xmin horizon by name, the oldest first within each kind: backends of this database
// and WAL senders (a standby's hot_standby_feedback without a slot), autovacuum workers left out (other
// vacuums ignore their xmin); the slots holding an xmin or catalog_xmin (server-wide); this database's
// prepared transactions (with the count of locks each holds). Raw xid values identify "the same xmin" across cycles; seen_at is the server's
// clock, as the other times are. A statement is cut to 1,000 characters (2,000 UTF-16 units at most).
const HOLDERS_SQL = `
  SELECT 'backend' AS kind, a.pid, a.backend_type, a.usename, a.application_name, host(a.client_addr) AS client_addr,
         a.state, a.xact_start, a.state_change, a.query_start, left(coalesce(a.query, ''), 1000) AS query_text,
         greatest(age(a.backend_xid), age(a.backend_xmin)) AS xmin_age, NULL::bigint AS catalog_xmin_age,
         coalesce(a.backend_xid::text, '') || '/' || coalesce(a.backend_xmin::text, '') AS xmin_raw, NULL::text AS name, NULL::text AS type, NULL::bool AS active,
         a.datname AS database, NULL::timestamptz AS prepared_at, clock_timestamp() AS seen_at, a.backend_start, NULL::bigint AS locks
  FROM (SELECT * FROM pg_stat_activity a
        WHERE (a.datname = current_database() OR a.datid IS NULL) AND a.pid <> pg_backend_pid()
          AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
          AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
        ORDER BY greatest(age(a.backend_xid), age(a.backend_xmin)) DESC, age(a.backend_xid) DESC NULLS LAST, a.xact_start
        LIMIT 5) a
  UNION ALL
  SELECT 'slot', s.active_pid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         age(s.xmin), age(s.catalog_xmin), coalesce(s.xmin::text, '') || '/' || coalesce(s.catalog_xmin::text, ''), s.slot_name::text, s.slot_type, s.active,
         s.database::text, NULL, clock_timestamp(), NULL, NULL
  FROM (SELECT * FROM pg_replication_slots WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
        ORDER BY greatest(age(xmin), age(catalog_xmin)) DESC LIMIT 20) s
  UNION ALL
  SELECT 'prepared', NULL, NULL, p.owner::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         age(p.transaction), NULL, p.transaction::text, p.gid, NULL, NULL, p.database::text, p.prepared, clock_timestamp(), NULL,
         (SELECT count(*) FROM pg_locks l WHERE l.pid IS NULL AND l.virtualtransaction = (SELECT x.virtualtransaction FROM pg_locks x WHERE x.locktype = 'transactionid' AND x.transactionid = p.transaction AND x.pid IS NULL LIMIT 1))
  FROM (SELECT * FROM pg_prepared_xacts WHERE database = current_database() ORDER BY age(transaction) DESC LIMIT 5) p`

interface HolderRow {
  kind: 'backend' | 'slot' | 'prepared'
  pid: number | null
  backend_type: string | null
  usename: string | null
  application_name: string | null
  client_addr: string | null
  state: string | null
  xact_start: Date | null
  state_change: Date | null
  query_start: Date | null
  query_text: string | null
  xmin_age: string | number | null
  catalog_xmin_age: string | number | null
  xmin_raw: string | null
  name: string | null
  type: string | null
  active: boolean | null
  database: string | null
  prepared_at: Date | null
  seen_at: Date
  backend_start: Date | null
  /** A prepared transaction's locks (pg_locks rows without a pid, of the virtual transaction holding its XID). */
  locks: string | number | null
}

/** First cycle each holder was seen at its present xmin, by identity (kept across cycles in the collector's state). */
type FirstSeen = Record<string, number>

const earliest = (...times: (number | null)[]) => {
  const known = times.filter((t): t is number => t !== null)
  return known.length > 0 ? Math.min(...known) : null
}

/** The rows as xmin_holders entries, with `since` from the first-seen memory (updated in `seen`). */
function holdersOf(rows: HolderRow[], previous: FirstSeen, seen: FirstSeen): XminHolder[] {
  return rows.map((r) => {
    const identity = `${r.kind}:${r.kind === 'slot' ? r.name : r.kind === 'prepared' ? r.name : r.pid}:${r.xmin_raw}`
    const firstSeen = previous[identity] ?? epoch(r.seen_at)
    if (firstSeen !== null) seen[identity] = firstSeen
    if (r.kind === 'slot') {
      return {
        kind: 'slot',
        xmin_age: num(r.xmin_age),
        catalog_xmin_age: num(r.catalog_xmin_age),
        since: firstSeen,
        slot_name: r.name,
        slot_type: r.type,
        active: r.active,
        pid: r.pid,
        database: r.database,
      }
    }
    if (r.kind === 'prepared') {
      const preparedAt = epoch(r.prepared_at)
      return {
        kind: 'prepared',
        xmin_age: num(r.xmin_age),
        since: earliest(firstSeen, preparedAt),
        gid: r.name,
        owner: r.usename,
        database: r.database,
        prepared_at: preparedAt,
        locks: num(r.locks),
      }
    }
    // A session holds its xmin at the latest since its statement began (running) or ended (idle in a transaction).
    const walsender = r.backend_type === 'walsender'
    const held =
      r.state === 'active'
        ? epoch(r.query_start)
        : r.state?.startsWith('idle in transaction')
          ? epoch(r.state_change)
          : null
    return {
      kind: walsender ? 'walsender' : 'backend',
      xmin_age: num(r.xmin_age),
      since: earliest(firstSeen, walsender ? null : held),
      pid: r.pid,
      backend_type: r.backend_type,
      user: r.usename,
      application_name: r.application_name,
      client_addr: r.client_addr,
      state: r.state,
      xact_start: epoch(r.xact_start),
      backend_start: epoch(r.backend_start),
      state_change: epoch(r.state_change),
      query_text: r.query_text === null ? null : maskSecretStatements(r.query_text),
      database: r.database,
    }
  })
}

type Row = Record<(typeof COUNTERS)[number] | (typeof GAUGES)[number], string | number | null> & {
  stats_reset: string | null
  size_fingerprint: string
}

/** How long a database size read at one fingerprint is reused at most. */
const SIZE_MAX_AGE_MS = 5 * 60_000
/** The last size read (a cache: never saved). */
const SIZE = 'cache:database_stats:size'
interface KnownSize {
  at: number
  fingerprint: string
  bytes: string | number
}

export const databaseStats = registerCollector<PostgresContext>({
  name: 'database_stats',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const kept = ctx.state.get(SIZE) as KnownSize | undefined
    const known = kept && ctx.now - kept.at < SIZE_MAX_AGE_MS ? kept : undefined
    const [row] = await ctx.sql.unsafe<Row[]>(SQL, [known?.fingerprint ?? null], PREPARED)
    if (!row) return {}
    if (row.database_size_bytes === null && known) row.database_size_bytes = known.bytes
    else if (row.database_size_bytes !== null)
      ctx.state.set(SIZE, {
        at: ctx.now,
        fingerprint: row.size_fingerprint,
        bytes: row.database_size_bytes,
      } satisfies KnownSize)
    const values = Object.fromEntries(COUNTERS.map((k) => [k, num(row[k])])) as Counters<(typeof COUNTERS)[number]>
    const sample: Sample<(typeof COUNTERS)[number]> = { resetAt: resetStamp(row.stats_reset), values }
    const delta = deltaSince(ctx.state.get('database_stats') as typeof sample | undefined, sample)
    ctx.state.set('database_stats', sample)
    const gauges = Object.fromEntries(GAUGES.map((k) => [k, num(row[k])])) as Counters<(typeof GAUGES)[number]>
    gauges.oldest_xact_age_s = nonNegative(gauges.oldest_xact_age_s)
    gauges.xmin_backend_xact_age_s = nonNegative(gauges.xmin_backend_xact_age_s)
    gauges.xmin_prepared_age_s = nonNegative(gauges.xmin_prepared_age_s)
    // The named holders are extra: if their query fails, the gauges above still go (the server then names what they say).
    let holderRows: HolderRow[]
    try {
      holderRows = await ctx.sql.unsafe<HolderRow[]>(HOLDERS_SQL, [], PREPARED)
    } catch (e) {
      ctx.log.warn('database_stats: the holders of the xmin horizon could not be read', {
        database: ctx.name,
        cause: (e as Error).message,
      })
      return { database_stats: { ...delta, ...gauges } }
    }
    const seen: FirstSeen = {}
    const xminHolders = holdersOf(holderRows, (ctx.state.get('xmin_holders') as FirstSeen | undefined) ?? {}, seen)
    ctx.state.set('xmin_holders', seen)
    return { database_stats: { ...delta, ...gauges }, xmin_holders: xminHolders }
  },
})
