// /api/v1/databases/{id}: waits, replication (+ history, slot history), archiver, backups, bgwriter, wal-stats,
// io-stats and database-stats, current and over time. The window (since/until) is cut into intervals of
// `bucket` seconds (waits and replication history: default 60; the other timeseries: 60 up to a
// 24-hour window, 3600 beyond); more than maxIntervals intervals is a 400 asking for a larger bucket.
// All but waits serve PostgreSQL databases only; wal-stats and io-stats check the server version.
import { Elysia, t } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest } from '../http-error.ts'
import { internalsLimits, telemetryDefaults } from '../limits.ts'
import { BGWRITER_KEYS, DATABASE_COUNTER_KEYS, DATABASE_GAUGE_KEYS, IO_KEYS, WAL_KEYS } from '../../shared/metrics.ts'
import { type MetricPoint, type MetricSource, ioSubject } from '../store/internals/types.ts'
import type { RegisteredDatabase } from '../store/types.ts'
import { archivingFailing } from '../doctor/rules/postgres/archiver.ts'
import { lastBackups } from '../doctor/rules/postgres/backup-age.ts'
import type { ArchiverStatus, BackupEntry, BackupStatus } from '../../shared/wire.ts'
import { perSecond, rfc3339 } from '../views.ts'
import {
  Archiver,
  Backups,
  BgwriterPoint,
  DatabaseStats,
  DatabaseStatsPoint,
  IoPoint,
  IoStats,
  type RateKey,
  Replication,
  ReplicationLagPoint,
  SlotLagPoint,
  WaitPoint,
  WalPoint,
  WalStats,
} from '../../shared/api/internals.ts'
import { type SeriesQuery, databaseFor, intervalsFor, seriesQuery } from './telemetry-params.ts'

/** The server's major version from engine_version ("16.2", "PostgreSQL 13.4 on ...", "17beta1"); null when unknown. */
export function majorVersion(version: string | null): number | null {
  const match = /^\s*(?:postgresql\s+)?(\d+)/i.exec(version ?? '')
  return match ? Number(match[1]) : null
}

/** 400 when the database's known server version is below `min` (an unknown version is let through). */
function requireVersion(db: RegisteredDatabase, min: number, endpoint: string) {
  const major = majorVersion(db.engine_version)
  if (major !== null && major < min) throw badRequest(`${endpoint} needs PostgreSQL ${min} or later`)
}

const round = (n: number, digits = 3) => Number(n.toFixed(digits))
const roundOrNull = (n: number | null | undefined) => (n === null || n === undefined ? null : round(n))

/** The listed keys of a value map, null where absent. */
function pickKeys<K extends string>(
  values: Record<string, number | null | undefined>,
  keys: readonly K[],
): Record<K, number | null> {
  return Object.fromEntries(keys.map((k) => [k, roundOrNull(values[k])])) as Record<K, number | null>
}

/** `<key>_per_s` for each listed counter that is not a duration, over the cycle's interval (null when not finite). */
function ratesOf<K extends string>(
  values: Record<string, number | null | undefined>,
  keys: readonly K[],
  intervalSeconds: number,
) {
  return Object.fromEntries(
    keys.filter((k) => !k.endsWith('_ms')).map((k) => [`${k}_per_s`, perSecond(values[k], intervalSeconds)]),
  ) as Record<RateKey<K>, number | null>
}

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

function splitSubject(subject: string) {
  const [backend_type = '', object = '', context = ''] = subject.split('/')
  return { backend_type, object, context }
}

export function internalsRoutes(deps: Deps) {
  const { store, clock } = deps
  const reader = store.internals
  const postgres = (principal: Parameters<typeof databaseFor>[1], id: string) =>
    databaseFor(deps, principal, id, 'postgres')
  const series = async <K extends string>(id: string, source: MetricSource, q: SeriesQuery, keys: readonly K[]) => {
    const points = await reader.metricSeries(id, source, intervalsFor(q, clock()))
    return points.map((p: MetricPoint) => ({ ts: rfc3339(p.ts), ...pickKeys(p.values, keys) }))
  }

  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/waits',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const points = await reader.waits(db.id, intervalsFor(query, clock(), telemetryDefaults.bucketSeconds))
        return points.map((p) => ({ ...p, ts: rfc3339(p.ts), total_duration_ms: round(p.total_duration_ms) }))
      },
      {
        query: seriesQuery,
        response: { 200: t.Array(WaitPoint) },
        detail: { summary: 'Wait events sampled once a second, per interval and event' },
      },
    )
    .get(
      '/replication',
      async ({ principal, params }) => {
        const db = await postgres(principal, params.id)
        const latest = await reader.latestReplication(db.id)
        const status = latest?.payload
        return {
          is_replica: status?.is_replica ?? null,
          replication_lag_bytes: status?.replication_lag_bytes ?? null,
          replication_lag_seconds: roundOrNull(status?.replication_lag_seconds),
          upstream_host: status?.upstream_host ?? null,
          slots: status?.slots ?? [],
          replicas: status?.replicas ?? [],
          ts: latest ? rfc3339(latest.ts) : null,
        }
      },
      {
        response: { 200: Replication },
        detail: { summary: "The latest replication state: the server's role, its lag, standbys and slots" },
      },
    )
    .get(
      '/replication/history',
      async ({ principal, params, query }) => {
        const db = await postgres(principal, params.id)
        const points = await reader.replicationHistory(
          db.id,
          intervalsFor(query, clock(), telemetryDefaults.bucketSeconds),
        )
        return points.map((p) => ({
          ...p,
          ts: rfc3339(p.ts),
          replication_lag_seconds: roundOrNull(p.replication_lag_seconds),
        }))
      },
      {
        query: seriesQuery,
        response: { 200: t.Array(ReplicationLagPoint) },
        detail: { summary: 'Replication lag per interval' },
      },
    )
    .get(
      '/replication/slots/history',
      async ({ principal, params, query }) => {
        const db = await postgres(principal, params.id)
        const points = await reader.slotHistory(db.id, intervalsFor(query, clock(), telemetryDefaults.bucketSeconds))
        return points.map((p) => ({ ...p, ts: rfc3339(p.ts) }))
      },
      {
        query: seriesQuery,
        response: { 200: t.Array(SlotLagPoint) },
        detail: { summary: "Replication slots' retained WAL per interval" },
      },
    )
    .get(
      '/archiver',
      async ({ principal, params }) => {
        const db = await postgres(principal, params.id)
        const latest = await store.latestSnapshot(db.id, 'archiver')
        const s = (latest?.payload ?? null) as ArchiverStatus | null
        const time = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : rfc3339(ms))
        return {
          ts: latest ? rfc3339(latest.ts) : null,
          archive_mode: s?.archive_mode ?? null,
          archive_command_set: s?.archive_command_set ?? null,
          archived_count: s?.archived_count ?? null,
          last_archived_wal: s?.last_archived_wal ?? null,
          last_archived_time: time(s?.last_archived_time),
          failed_count: s?.failed_count ?? null,
          last_failed_wal: s?.last_failed_wal ?? null,
          last_failed_time: time(s?.last_failed_time),
          stats_reset: time(s?.stats_reset),
          ready_count: s?.ready_count ?? null,
          ready_bytes: s?.ready_bytes ?? null,
          oldest_ready_time: time(s?.oldest_ready_time),
          failing: s ? archivingFailing(s) : false,
        }
      },
      {
        response: { 200: Archiver },
        detail: {
          summary:
            'The WAL archiver: archived and failed counts, the last WAL files, and the files waiting to be archived',
        },
      },
    )
    .get(
      '/backups',
      async ({ principal, params }) => {
        const db = await postgres(principal, params.id)
        const latest = await store.latestSnapshot(db.id, 'backups')
        const s = (latest?.payload ?? null) as BackupStatus | null
        const time = (ms: number | null) => (ms === null ? null : rfc3339(ms))
        const view = (b: BackupEntry | null) =>
          b === null ? null : { ...b, started_at: time(b.started_at), finished_at: time(b.finished_at) }
        const last = s ? lastBackups(s) : { latest: null, successful: null, full: null }
        return {
          ts: latest ? rfc3339(latest.ts) : null,
          tool: s?.tool ?? null,
          checked_at: s ? rfc3339(s.checked_at) : null,
          error: s?.error ?? null,
          latest: view(last.latest),
          last_successful: view(last.successful),
          last_full: view(last.full),
          backups: (s?.backups ?? []).map((b) => view(b)!),
        }
      },
      {
        response: { 200: Backups },
        detail: {
          summary:
            'Backups as pgBackRest or WAL-G lists them (backup_command in the agent config): the latest, the last successful and the last full',
        },
      },
    )
    .get(
      '/bgwriter',
      async ({ principal, params, query }) =>
        series((await postgres(principal, params.id)).id, 'bgwriter', query, BGWRITER_KEYS),
      {
        query: seriesQuery,
        response: { 200: t.Array(BgwriterPoint) },
        detail: { summary: 'Background writer and checkpointer counters per interval' },
      },
    )
    .get(
      '/wal-stats',
      async ({ principal, params }) => {
        const db = await postgres(principal, params.id)
        requireVersion(db, internalsLimits.walStatsMinVersion, 'wal-stats')
        const latest = await reader.latestCounters(db.id, 'wal_stats')
        const values = latest?.payload ?? {}
        return {
          ts: latest ? rfc3339(latest.ts) : null,
          interval_seconds: latest?.interval_seconds ?? null,
          ...pickKeys(values, WAL_KEYS),
          ...ratesOf(values, WAL_KEYS, latest?.interval_seconds ?? 0),
        }
      },
      {
        response: { 200: WalStats },
        detail: { summary: 'WAL statistics of the latest cycle, with per-second rates (PostgreSQL 14+)' },
      },
    )
    .get(
      '/wal-stats/timeseries',
      async ({ principal, params, query }) => {
        const db = await postgres(principal, params.id)
        requireVersion(db, internalsLimits.walStatsMinVersion, 'wal-stats')
        return series(db.id, 'wal', query, WAL_KEYS)
      },
      {
        query: seriesQuery,
        response: { 200: t.Array(WalPoint) },
        detail: { summary: 'WAL statistics per interval (PostgreSQL 14+)' },
      },
    )
    .get(
      '/io-stats',
      async ({ principal, params }) => {
        const db = await postgres(principal, params.id)
        requireVersion(db, internalsLimits.ioStatsMinVersion, 'io-stats')
        const latest = await reader.latestIo(db.id)
        const rows = [...(latest?.payload ?? [])].sort((a, b) => byCodePoint(ioSubject(a), ioSubject(b)))
        return {
          ts: latest ? rfc3339(latest.ts) : null,
          interval_seconds: latest?.interval_seconds ?? null,
          stats: rows.map((r) => ({
            backend_type: r.backend_type,
            object: r.object,
            context: r.context,
            ...pickKeys(r.counters, IO_KEYS),
          })),
        }
      },
      {
        response: { 200: IoStats },
        detail: { summary: 'I/O statistics of the latest cycle by backend type, object and context (PostgreSQL 16+)' },
      },
    )
    .get(
      '/io-stats/timeseries',
      async ({ principal, params, query }) => {
        const db = await postgres(principal, params.id)
        requireVersion(db, internalsLimits.ioStatsMinVersion, 'io-stats')
        const points = await reader.metricSeries(db.id, 'io', intervalsFor(query, clock()))
        return points.map((p) => ({ ts: rfc3339(p.ts), ...splitSubject(p.subject), ...pickKeys(p.values, IO_KEYS) }))
      },
      {
        query: seriesQuery,
        response: { 200: t.Array(IoPoint) },
        detail: { summary: 'I/O statistics per interval, backend type, object and context (PostgreSQL 16+)' },
      },
    )
    .get(
      '/database-stats',
      async ({ principal, params }) => {
        const db = await postgres(principal, params.id)
        const latest = await reader.latestCounters(db.id, 'database_stats')
        const values = latest?.payload ?? {}
        return {
          ts: latest ? rfc3339(latest.ts) : null,
          interval_seconds: latest?.interval_seconds ?? null,
          ...pickKeys(values, DATABASE_COUNTER_KEYS),
          ...ratesOf(values, DATABASE_COUNTER_KEYS, latest?.interval_seconds ?? 0),
          ...pickKeys(values, DATABASE_GAUGE_KEYS),
        }
      },
      {
        response: { 200: DatabaseStats },
        detail: { summary: 'Database-wide statistics and settings of the latest cycle, with per-second rates' },
      },
    )
    .get(
      '/database-stats/timeseries',
      async ({ principal, params, query }) =>
        series((await postgres(principal, params.id)).id, 'database', query, [
          ...DATABASE_COUNTER_KEYS,
          ...DATABASE_GAUGE_KEYS,
        ]),
      {
        query: seriesQuery,
        response: { 200: t.Array(DatabaseStatsPoint) },
        detail: { summary: 'Database-wide statistics per interval' },
      },
    )
}
