// Responses of the engine-internals routes (src/server/routes/internals.ts): waits, replication (+ lag and
// slot history), bgwriter, wal-stats, io-stats and database-stats, current and over time. The counter
// maps are built from the key lists of src/shared/metrics.ts, so a key added there is documented here too.
import { t } from 'elysia'
import type { TNull, TNumber, TUnion } from '@sinclair/typebox'
import { BGWRITER_KEYS, DATABASE_COUNTER_KEYS, DATABASE_GAUGE_KEYS, IO_KEYS, WAL_KEYS } from '../metrics.ts'
import { Nullable, Timestamp } from './common.ts'

type NullableNumber = TUnion<[TNumber, TNull]>

/** What a metric's name says of its unit, for its description. */
function unitOf(key: string): string | undefined {
  if (key.endsWith('_per_s')) return 'per second, over the cycle'
  if (key.endsWith('_ms')) return 'ms'
  if (key.endsWith('_bytes')) return 'bytes'
  if (key.endsWith('_s')) return 'seconds'
  if (key.endsWith('_pct')) return 'percent, 0-100'
  if (key.endsWith('_on') || key.endsWith('_installed')) return '1 yes, 0 no'
  return undefined
}

/** One nullable number per key (null: not reported, e.g. by an older server or agent), described by its unit. */
export function nullableNumbers<K extends string>(keys: readonly K[], what?: string): { [P in K]: NullableNumber } {
  return Object.fromEntries(
    keys.map((k) => {
      const description = [what, unitOf(k)].filter(Boolean).join('; ')
      return [k, Nullable(t.Number(description ? { description } : {}))]
    }),
  ) as { [P in K]: NullableNumber }
}

/** The `<key>_per_s` names of the counters that are not durations. */
export type RateKey<K extends string> = `${Exclude<K, `${string}_ms`>}_per_s`
export const rateKeys = <K extends string>(keys: readonly K[]) =>
  keys.filter((k) => !k.endsWith('_ms')).map((k) => `${k}_per_s`) as RateKey<K>[]

const ts = Timestamp('start of the interval')
const latestTs = Nullable(Timestamp('when the agent collected the latest section; null before any'))
const intervalSeconds = Nullable(
  t.Number({ description: "the latest cycle's length in seconds, the deltas' span; null before any" }),
)
const DELTA = 'delta over the interval'

export const WaitPoint = t.Object(
  {
    ts,
    wait_event_type: t.String(),
    wait_event: t.String(),
    count: t.Integer({ description: 'samples (taken once a second) that saw a session waiting on this event' }),
    total_duration_ms: t.Number({ description: 'ms' }),
  },
  { title: 'WaitPoint' },
)

const Replica = t.Object({
  application_name: Nullable(t.String()),
  client_addr: Nullable(t.String()),
  state: Nullable(t.String()),
  sync_state: Nullable(t.String()),
  lag_bytes: Nullable(t.Number({ description: 'bytes of WAL not yet replayed by the standby' })),
  write_lag_ms: Nullable(t.Number({ description: 'ms' })),
  flush_lag_ms: Nullable(t.Number({ description: 'ms' })),
  replay_lag_ms: Nullable(t.Number({ description: 'ms' })),
})

const Slot = t.Object({
  slot_name: t.String(),
  slot_type: t.String({ description: 'physical or logical' }),
  active: t.Boolean(),
  lag_bytes: Nullable(t.Number({ description: 'bytes of WAL the slot retains' })),
  wal_status: Nullable(t.String()),
})

export const Replication = t.Object(
  {
    is_replica: Nullable(t.Boolean({ description: 'null before the first replication section' })),
    replication_lag_bytes: Nullable(t.Number({ description: 'bytes; a replica only' })),
    replication_lag_seconds: Nullable(t.Number({ description: 'seconds; a replica only' })),
    upstream_host: Nullable(t.String()),
    slots: t.Array(Slot),
    replicas: t.Array(Replica),
    ts: latestTs,
  },
  { title: 'Replication' },
)

const archiverTime = (description: string) => Nullable(Timestamp(description))

export const Archiver = t.Object(
  {
    ts: latestTs,
    archive_mode: Nullable(
      t.String({
        description: 'off, on or always; null before the first archiver section or when the role cannot read it',
      }),
    ),
    archive_command_set: Nullable(
      t.Boolean({ description: 'whether archive_command or archive_library is set (its text is never collected)' }),
    ),
    archived_count: Nullable(t.Integer({ description: 'WAL files archived since stats_reset' })),
    last_archived_wal: Nullable(t.String()),
    last_archived_time: archiverTime('when last_archived_wal was archived'),
    failed_count: Nullable(t.Integer({ description: 'failed attempts to archive a WAL file since stats_reset' })),
    last_failed_wal: Nullable(t.String()),
    last_failed_time: archiverTime('when archiving last_failed_wal last failed'),
    stats_reset: archiverTime('when pg_stat_archiver was last reset'),
    ready_count: Nullable(
      t.Integer({
        description:
          'WAL files waiting to be archived (.ready); null when the role may not list them or before PostgreSQL 12',
      }),
    ),
    ready_bytes: Nullable(t.Integer({ description: 'bytes; ready_count × wal_segment_size' })),
    oldest_ready_time: archiverTime('when the oldest waiting WAL file became ready to archive'),
    failing: t.Boolean({
      description: 'the last attempt failed after the last success (or nothing was ever archived)',
    }),
  },
  { title: 'Archiver' },
)

export const Backup = t.Object(
  {
    label: t.String({ description: "the tool's label (pgBackRest) or backup name (WAL-G)" }),
    type: t.String({ description: 'full, diff or incr (pgBackRest); full or delta (WAL-G)' }),
    started_at: Nullable(Timestamp()),
    finished_at: Nullable(Timestamp()),
    size_bytes: Nullable(t.Integer({ description: "bytes: the database's size the backup holds" })),
    stored_bytes: Nullable(t.Integer({ description: 'bytes: what the backup added to the repository (compressed)' })),
    stanza: Nullable(t.String({ description: "pgBackRest's stanza or WAL-G's storage" })),
    ok: t.Boolean({ description: 'false when the tool reports the backup as failed (pgBackRest: checksum errors)' }),
  },
  { title: 'Backup' },
)

export const Backups = t.Object(
  {
    ts: latestTs,
    tool: Nullable(
      t.Union([t.Literal('pgbackrest'), t.Literal('walg')], {
        description: 'null when no backup command is configured (or before its first answer)',
      }),
    ),
    checked_at: Nullable(Timestamp('when the agent last ran the backup command')),
    error: Nullable(
      t.String({
        description: 'why the command gave no (or an incomplete) list: its exit code and first line of output, masked',
      }),
    ),
    latest: Nullable(Backup),
    last_successful: Nullable(Backup),
    last_full: Nullable(Backup),
    backups: t.Array(Backup, { description: 'newest first, as the tool lists them' }),
  },
  { title: 'Backups' },
)

export const ReplicationLagPoint = t.Object(
  {
    ts,
    replication_lag_bytes: Nullable(t.Integer({ description: "bytes, the interval's largest" })),
    replication_lag_seconds: Nullable(t.Number({ description: "seconds, the interval's largest" })),
  },
  { title: 'ReplicationLagPoint' },
)

export const SlotLagPoint = t.Object(
  {
    ts,
    slot_name: t.String(),
    lag_bytes: t.Integer({ description: "bytes of WAL the slot retains, the interval's largest" }),
  },
  { title: 'SlotLagPoint' },
)

export const BgwriterPoint = t.Object({ ts, ...nullableNumbers(BGWRITER_KEYS, DELTA) }, { title: 'BgwriterPoint' })

export const WalStats = t.Object(
  {
    ts: latestTs,
    interval_seconds: intervalSeconds,
    ...nullableNumbers(WAL_KEYS, 'delta over the latest cycle'),
    ...nullableNumbers(rateKeys(WAL_KEYS)),
  },
  { title: 'WalStats', description: 'pg_stat_wal over the latest cycle (PostgreSQL 14+)' },
)

export const WalPoint = t.Object({ ts, ...nullableNumbers(WAL_KEYS, DELTA) }, { title: 'WalPoint' })

const ioSubject = {
  backend_type: t.String(),
  object: t.String({ description: 'relation, temp relation, ...' }),
  context: t.String({ description: 'normal, vacuum, bulkread, bulkwrite, ...' }),
}

export const IoStats = t.Object(
  {
    ts: latestTs,
    interval_seconds: intervalSeconds,
    stats: t.Array(t.Object({ ...ioSubject, ...nullableNumbers(IO_KEYS, 'delta over the latest cycle') })),
  },
  {
    title: 'IoStats',
    description: 'pg_stat_io over the latest cycle (PostgreSQL 16+), by backend type, object and context',
  },
)

export const IoPoint = t.Object({ ts, ...ioSubject, ...nullableNumbers(IO_KEYS, DELTA) }, { title: 'IoPoint' })

export const DatabaseStats = t.Object(
  {
    ts: latestTs,
    interval_seconds: intervalSeconds,
    ...nullableNumbers(DATABASE_COUNTER_KEYS, 'delta over the latest cycle'),
    ...nullableNumbers(rateKeys(DATABASE_COUNTER_KEYS)),
    ...nullableNumbers(DATABASE_GAUGE_KEYS, 'as of the latest cycle'),
  },
  { title: 'DatabaseStats', description: 'pg_stat_database and database-wide settings over the latest cycle' },
)

export const DatabaseStatsPoint = t.Object(
  {
    ts,
    ...nullableNumbers(DATABASE_COUNTER_KEYS, DELTA),
    ...nullableNumbers(DATABASE_GAUGE_KEYS, "the interval's latest value"),
  },
  { title: 'DatabaseStatsPoint' },
)
