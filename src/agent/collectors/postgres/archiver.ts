// archiver: the WAL archiver's state, sent as it is every cycle (the server keeps the latest). From
// pg_stat_archiver: archived and failed counts and the last archived and last failed WAL file with
// their times; from pg_settings: archive_mode and whether archive_command or archive_library is set
// (never their text, which may hold a secret); from pg_ls_archive_statusdir() (PostgreSQL 12+, callable
// by pg_monitor): the WAL files waiting to be archived (`.ready`), their size and the oldest one's age.
// A role that may not list the status directory gets a collector note and null counts, not a failure.
import type { ArchiverStatus } from '../../../shared/wire.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { PREPARED } from '../../own-statements.ts'

const STATS_SQL = `
  SELECT archived_count, last_archived_wal,
         (extract(epoch FROM last_archived_time) * 1000)::float8 AS last_archived_time,
         failed_count, last_failed_wal,
         (extract(epoch FROM last_failed_time) * 1000)::float8 AS last_failed_time,
         (extract(epoch FROM stats_reset) * 1000)::float8 AS stats_reset,
         (SELECT setting FROM pg_settings WHERE name = 'archive_mode') AS archive_mode,
         (SELECT bool_or(setting <> '') FROM pg_settings WHERE name IN ('archive_command', 'archive_library')) AS archive_command_set
  FROM pg_stat_archiver`

// The status directory also holds `.done` files (archived, not yet removed) and may hold others.
const READY_SQL = `
  SELECT count(*)::bigint AS ready_count,
         (count(*) * (SELECT setting::bigint * CASE unit WHEN '8kB' THEN 8192 WHEN 'MB' THEN 1048576 ELSE 1 END
                      FROM pg_settings WHERE name = 'wal_segment_size'))::bigint AS ready_bytes,
         (extract(epoch FROM min(modification)) * 1000)::float8 AS oldest_ready_time
  FROM pg_ls_archive_statusdir()
  WHERE name LIKE '%.ready'`

const NOTE =
  'WAL files waiting to be archived not counted: the role may not call pg_ls_archive_statusdir() (GRANT pg_monitor TO the agent role)'

const int = (v: unknown): number | null => (v === null || v === undefined ? null : Math.round(Number(v)))
/** A WAL file name, cut to the wire's limit (it is the server's text, bounded before it travels). */
const walName = (v: unknown): string | null => (typeof v === 'string' ? v.replaceAll('\u0000', '').slice(0, 64) : null)

export const archiver = registerCollector<PostgresContext>({
  name: 'archiver',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const [row] = await ctx.sql.unsafe<Record<string, unknown>[]>(STATS_SQL, [], PREPARED)
    if (!row) return {}
    let ready: { ready_count: number | null; ready_bytes: number | null; oldest_ready_time: number | null } = {
      ready_count: null,
      ready_bytes: null,
      oldest_ready_time: null,
    }
    if (ctx.major >= 12) {
      try {
        const [r] = await ctx.sql.unsafe<Record<string, unknown>[]>(READY_SQL, [], PREPARED)
        ready = {
          ready_count: int(r?.ready_count) ?? 0,
          ready_bytes: int(r?.ready_bytes) ?? 0,
          oldest_ready_time: int(r?.oldest_ready_time),
        }
        ctx.notes.delete('archiver')
      } catch (e) {
        if ((e as { code?: string }).code !== '42501') throw e
        ctx.notes.set('archiver', NOTE)
      }
    }
    const status: ArchiverStatus = {
      archive_mode: typeof row.archive_mode === 'string' ? row.archive_mode.slice(0, 16) : null,
      archive_command_set: typeof row.archive_command_set === 'boolean' ? row.archive_command_set : null,
      archived_count: int(row.archived_count) ?? 0,
      last_archived_wal: walName(row.last_archived_wal),
      last_archived_time: int(row.last_archived_time),
      failed_count: int(row.failed_count) ?? 0,
      last_failed_wal: walName(row.last_failed_wal),
      last_failed_time: int(row.last_failed_time),
      stats_reset: int(row.stats_reset),
      ...ready,
    }
    return { archiver: status }
  },
})
