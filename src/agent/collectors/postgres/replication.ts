// replication: whether this server is a replica and how far behind it is (replica side), the
// replicas streaming from it and its replication slots with the WAL each holds back. Runs only when
// the server-side setting collect_replication is on. The WAL position functions differ by side
// (pg_current_wal_lsn() fails during recovery), so the queries branch on pg_is_in_recovery().
import type { ReplicationStatus } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { forVersion, nonNegative } from './common.ts'
import { PREPARED } from '../../own-statements.ts'

// Replica side. The lag in seconds is 0 when everything received has been replayed (an idle primary
// sends nothing, so the time since the last replayed transaction would grow without any real lag).
const REPLICA_SQL = {
  10: `
    SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) AS lag_bytes,
           CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
                ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END AS lag_seconds,
           NULL::text AS upstream_host`,
  11: `
    SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) AS lag_bytes,
           CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
                ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END AS lag_seconds,
           (SELECT sender_host FROM pg_stat_wal_receiver LIMIT 1) AS upstream_host`,
}

// Downstream replicas and slots are measured from the server's own WAL position: the current insert
// position on a primary, the last replayed one on a replica (cascading replication, standby slots).
const replicasSql = (position: string) => `
  SELECT application_name, host(client_addr) AS client_addr, state, sync_state,
         pg_wal_lsn_diff(${position}, replay_lsn) AS lag_bytes,
         extract(epoch FROM write_lag) * 1000 AS write_lag_ms,
         extract(epoch FROM flush_lag) * 1000 AS flush_lag_ms,
         extract(epoch FROM replay_lag) * 1000 AS replay_lag_ms
  FROM pg_stat_replication
  ORDER BY application_name, client_addr`

const slotsSql = (position: string, walStatus: string) => `
  SELECT slot_name, slot_type, active, pg_wal_lsn_diff(${position}, restart_lsn) AS lag_bytes, ${walStatus} AS wal_status
  FROM pg_replication_slots
  ORDER BY slot_name`

const PRIMARY_POSITION = 'pg_current_wal_lsn()'
const REPLICA_POSITION = 'pg_last_wal_replay_lsn()'

const REPLICAS_SQL = { primary: replicasSql(PRIMARY_POSITION), replica: replicasSql(REPLICA_POSITION) }
const SLOTS_SQL = {
  10: { primary: slotsSql(PRIMARY_POSITION, 'NULL::text'), replica: slotsSql(REPLICA_POSITION, 'NULL::text') },
  13: { primary: slotsSql(PRIMARY_POSITION, 'wal_status'), replica: slotsSql(REPLICA_POSITION, 'wal_status') },
}

interface ReplicaRow {
  lag_bytes: string | null
  lag_seconds: string | number | null
  upstream_host: string | null
}

interface ReplicasRow {
  application_name: string | null
  client_addr: string | null
  state: string | null
  sync_state: string | null
  lag_bytes: string | null
  write_lag_ms: string | number | null
  flush_lag_ms: string | number | null
  replay_lag_ms: string | number | null
}

interface SlotRow {
  slot_name: string
  slot_type: string
  active: boolean
  lag_bytes: string | null
  wal_status: string | null
}

export const replication = registerCollector<PostgresContext>({
  name: 'replication',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    if (!ctx.settings.collectReplication) return {}
    const [recovery] = await ctx.sql<{ is_replica: boolean }[]>`SELECT pg_is_in_recovery() AS is_replica`
    const isReplica = recovery?.is_replica === true
    const side = isReplica ? 'replica' : 'primary'
    const [upstream, replicas, slots] = await Promise.all([
      isReplica
        ? ctx.sql.unsafe<ReplicaRow[]>(forVersion(REPLICA_SQL, ctx.major), [], PREPARED)
        : Promise.resolve([] as ReplicaRow[]),
      ctx.sql.unsafe<ReplicasRow[]>(REPLICAS_SQL[side], [], PREPARED),
      ctx.sql.unsafe<SlotRow[]>(forVersion(SLOTS_SQL, ctx.major)[side], [], PREPARED),
    ])
    const lag = upstream[0]
    const status: ReplicationStatus = {
      is_replica: isReplica,
      replication_lag_bytes: nonNegative(num(lag?.lag_bytes)),
      replication_lag_seconds: nonNegative(num(lag?.lag_seconds)),
      upstream_host: lag?.upstream_host ?? null,
      replicas: replicas.map((r) => ({
        application_name: r.application_name,
        client_addr: r.client_addr,
        state: r.state,
        sync_state: r.sync_state,
        lag_bytes: nonNegative(num(r.lag_bytes)),
        write_lag_ms: num(r.write_lag_ms),
        flush_lag_ms: num(r.flush_lag_ms),
        replay_lag_ms: num(r.replay_lag_ms),
      })),
      slots: slots.map((s) => ({
        slot_name: s.slot_name,
        slot_type: s.slot_type,
        active: s.active,
        lag_bytes: nonNegative(num(s.lag_bytes)),
        wal_status: s.wal_status,
      })),
    }
    return { replication: status }
  },
})
