// The one table of settings whose change is a finding (setting_changed; Altinity's
// SystemSettingsChanged, narrowed to the settings that matter): per engine, why a change matters, which
// direction is the risky one (a warning; the other direction is info), whether PostgreSQL applies it only
// at a start, and the rule that already judges its current value, if one does (then a change to that
// value is left to it: one finding per cause). Values are compared as the agent sends them: PostgreSQL's
// SHOW text ('on', '128MB', '30s'), ClickHouse's system.settings values of the settings changed from
// their defaults (a setting back at its default is absent: undefined here). archive_command and other
// settings that may hold a secret reach the server masked (src/shared/secret-settings.ts), so their
// changes cannot be seen and they are not listed.
import type { Engine } from '../../store/types.ts'
import { settingBytes, settingMs } from './postgres/log-evidence.ts'

export interface SettingRisk {
  engine: Engine
  name: string
  /** Why a change of it matters, both ways. */
  why: string
  /** Whether the change from `before` to `now` goes the risky way (undefined: not set, the default). */
  risky(before: string | undefined, now: string | undefined): boolean
  /** PostgreSQL: applied only when the server starts (SHOW gives the new value only after the restart). */
  restart?: boolean
  /** The rule that judges the current value already, and when it does. */
  judgedBy?: { rule: string; when(now: string | undefined): boolean }
}

/** A boolean setting's value: PostgreSQL's on/off, ClickHouse's 1/0; undefined when neither. */
export function flag(v: string | undefined): boolean | undefined {
  const s = v?.trim().toLowerCase()
  if (s === 'on' || s === 'true' || s === '1' || s === 'yes') return true
  if (s === 'off' || s === 'false' || s === '0' || s === 'no') return false
  return undefined
}

const num = (v: string | undefined) => {
  const n = v === undefined || v.trim() === '' ? Number.NaN : Number(v)
  return Number.isFinite(n) ? n : undefined
}

/** Turned off (from on or not set). */
const turnedOff = (_: string | undefined, now: string | undefined) => flag(now) === false
/** Turned on. */
const turnedOn = (_: string | undefined, now: string | undefined) => flag(now) === true
/** A number that went down (both known). */
const lowered =
  (read: (v: string | undefined) => number | undefined) => (before: string | undefined, now: string | undefined) => {
    const b = read(before)
    const n = read(now)
    return b !== undefined && n !== undefined && n < b
  }
/** A value in `order` that moved to an earlier (weaker) one. */
const weakened = (order: readonly string[]) => (before: string | undefined, now: string | undefined) => {
  const b = order.indexOf(before?.trim().toLowerCase() ?? '')
  const n = order.indexOf(now?.trim().toLowerCase() ?? '')
  return b >= 0 && n >= 0 && n < b
}
/** A time setting that went to 0 (no limit) from a limit. */
const limitRemoved = (before: string | undefined, now: string | undefined) =>
  (settingMs(before, 1) ?? 0) > 0 && settingMs(now, 1) === 0
/** A text setting cleared. */
const cleared = (before: string | undefined, now: string | undefined) => (before ?? '') !== '' && (now ?? '') === ''
/** ClickHouse: a limit in bytes or a count that went to 0 or default (no limit) or down. */
const chLimitLoosenedOrLowered = (before: string | undefined, now: string | undefined) =>
  (num(now) ?? 0) === 0 ? (num(before) ?? 0) > 0 : lowered(num)(before, now)
const pgBool = (rule: string, bad: boolean) => ({ rule, when: (now: string | undefined) => flag(now) === bad })

export const SETTING_RISKS: readonly SettingRisk[] = [
  // ---- PostgreSQL ----
  {
    engine: 'postgres',
    name: 'fsync',
    why: 'off: a crash or power loss can corrupt the cluster beyond repair; turned back on: if the server crashed while it was off, its data cannot be trusted',
    risky: turnedOff,
    judgedBy: pgBool('pg_risky_settings', false),
  },
  {
    engine: 'postgres',
    name: 'full_page_writes',
    why: 'off: a crash in the middle of a page write leaves a torn page recovery cannot repair, unless the storage writes pages atomically',
    risky: turnedOff,
    judgedBy: pgBool('pg_risky_settings', false),
  },
  {
    engine: 'postgres',
    name: 'synchronous_commit',
    why: 'weaker (off, local): commits acknowledged in the last moments can be lost in a crash or a failover (no corruption); stronger: every commit waits longer',
    risky: weakened(['off', 'local', 'remote_write', 'on', 'remote_apply']),
  },
  {
    engine: 'postgres',
    name: 'wal_level',
    why: 'lowered: standbys, WAL archiving and point-in-time recovery need replica, logical decoding needs logical; raised: more WAL is written',
    risky: weakened(['minimal', 'replica', 'logical']),
    restart: true,
  },
  {
    engine: 'postgres',
    name: 'archive_mode',
    why: 'off: WAL is no longer archived, so point-in-time recovery stops at this moment; on: archiving must keep up or pg_wal grows',
    risky: turnedOff,
    restart: true,
  },
  {
    engine: 'postgres',
    name: 'archive_library',
    why: 'cleared: with archive_mode on and no archive_command, WAL is kept in pg_wal until the disk fills; changed: archiving goes elsewhere',
    risky: cleared,
  },
  {
    engine: 'postgres',
    name: 'max_connections',
    why: 'lowered: clients that used the old number are refused (too many clients already); raised: every connection costs memory (work_mem per sort) and contention',
    risky: lowered(num),
    restart: true,
  },
  {
    engine: 'postgres',
    name: 'shared_buffers',
    why: 'lowered: less of the data fits in the cache and more reads go to disk; raised: less memory for sorts, connections and the OS cache',
    risky: lowered((v) => settingBytes(v, 8192)),
    restart: true,
  },
  {
    engine: 'postgres',
    name: 'autovacuum',
    why: 'off: no table is vacuumed or analyzed automatically (bloat, stale statistics, wraparound risk)',
    risky: turnedOff,
    judgedBy: pgBool('pg_risky_settings', false),
  },
  {
    engine: 'postgres',
    name: 'track_counts',
    why: 'off: autovacuum loses the counts it decides from and stops vacuuming and analyzing',
    risky: turnedOff,
    judgedBy: pgBool('pg_risky_settings', false),
  },
  {
    engine: 'postgres',
    name: 'statement_timeout',
    why: '0 server-wide: a runaway statement runs, holding its locks and its snapshot, without bound; a new limit cancels long statements (reports, migrations)',
    risky: limitRemoved,
  },
  {
    engine: 'postgres',
    name: 'idle_in_transaction_session_timeout',
    why: '0: a session left idle in a transaction holds its locks and the xmin horizon (no vacuum cleanup) without bound',
    risky: limitRemoved,
  },
  {
    engine: 'postgres',
    name: 'synchronous_standby_names',
    why: 'cleared: commits no longer wait for a standby, so a failover can lose acknowledged commits; set: every commit waits for the standbys named, and stops while none answers',
    risky: (before, now) => (before ?? '') !== (now ?? ''),
  },
  {
    engine: 'postgres',
    name: 'shared_preload_libraries',
    why: "a library removed (pg_stat_statements, auto_explain, an extension's) stops working at the next start; one added loads into every process",
    risky: (before, now) => {
      const list = (v: string | undefined) =>
        new Set(
          (v ?? '')
            .split(',')
            .map((s) => s.trim().replace(/^"|"$/g, ''))
            .filter(Boolean),
        )
      const n = list(now)
      return [...list(before)].some((lib) => !n.has(lib))
    },
    restart: true,
  },
  {
    engine: 'postgres',
    name: 'zero_damaged_pages',
    why: 'on: a damaged page is silently replaced by zeros, destroying the rows on it; meant only for salvaging data after corruption',
    risky: turnedOn,
  },
  {
    engine: 'postgres',
    name: 'ignore_checksum_failure',
    why: 'on: pages that fail their checksum are read anyway, spreading corrupt data instead of stopping at it',
    risky: turnedOn,
  },
  {
    engine: 'postgres',
    name: 'default_transaction_read_only',
    why: 'on: every transaction is read-only unless its session says otherwise, so writes fail',
    risky: turnedOn,
  },
  {
    engine: 'postgres',
    name: 'ssl',
    why: 'off: connections travel unencrypted, passwords included unless SCRAM is used',
    risky: turnedOff,
  },
  {
    engine: 'postgres',
    name: 'max_slot_wal_keep_size',
    why: '-1: a replication slot whose consumer is gone keeps WAL until the disk fills; a limit: a lagging standby past it loses its slot and must be rebuilt',
    risky: (_, now) => num(now) === -1 || now?.trim() === '-1',
  },
  // ---- ClickHouse (the profile's settings, system.settings) ----
  {
    engine: 'clickhouse',
    name: 'max_memory_usage',
    why: 'lowered: queries that fit before fail with MEMORY_LIMIT_EXCEEDED; 0 (no limit): one query can take the memory of the whole server',
    risky: chLimitLoosenedOrLowered,
  },
  {
    engine: 'clickhouse',
    name: 'max_memory_usage_for_user',
    why: "lowered: a user's concurrent queries fail sooner; 0 (no limit): one user can take the memory of the whole server",
    risky: chLimitLoosenedOrLowered,
  },
  {
    engine: 'clickhouse',
    name: 'max_concurrent_queries_for_user',
    why: "lowered: a user's queries past it are refused (TOO_MANY_SIMULTANEOUS_QUERIES); 0: no limit per user",
    risky: chLimitLoosenedOrLowered,
  },
  {
    engine: 'clickhouse',
    name: 'readonly',
    why: '1 or 2: inserts, DDL and (1) SET are refused for the users of the profile',
    risky: (before, now) => (num(now) ?? 0) > 0 && (num(before) ?? 0) === 0,
  },
  {
    engine: 'clickhouse',
    name: 'allow_ddl',
    why: '0: CREATE, ALTER and DROP are refused for the users of the profile',
    risky: turnedOff,
  },
  {
    engine: 'clickhouse',
    name: 'max_bytes_before_external_group_by',
    why: '0: large GROUP BY no longer spill to disk and fail on the memory limit instead',
    risky: (before, now) => (num(before) ?? 0) > 0 && (num(now) ?? 0) === 0,
  },
  {
    engine: 'clickhouse',
    name: 'max_bytes_before_external_sort',
    why: '0: large ORDER BY no longer spill to disk and fail on the memory limit instead',
    risky: (before, now) => (num(before) ?? 0) > 0 && (num(now) ?? 0) === 0,
  },
  {
    engine: 'clickhouse',
    name: 'max_threads',
    why: 'fewer threads make every query slower; more make concurrent queries compete for the cores',
    risky: lowered(num),
  },
  {
    engine: 'clickhouse',
    name: 'max_partitions_per_insert_block',
    why: 'lowered: inserts that touch more partitions fail (TOO_MANY_PARTS); 0: any insert may create thousands of parts',
    risky: chLimitLoosenedOrLowered,
  },
]
