// The doctor's figures (its metrics_summary and each finding's metrics) in human units. The API names
// each figure's unit in its key, as the server's README says (sizes are bytes, durations milliseconds):
// `_bytes` sizes, `_ms` and `_s` / `_seconds` durations, `_s_ago` a time since, `_ratio` / `_share`
// shares of 1, `_pct` percentages, `_at`, `_since` and RFC 3339 strings points in time (and the catalog's time
// columns, last_vacuum, xact_start…, which the doctor sends as epoch milliseconds), `_on` / `_installed` /
// `is_…` flags of 0 and 1. The label drops the unit the value now shows; figures named after a catalog
// column (n_dead_tup, idx_scan, blks_read…) or too terse to read (age, progress) have labels of their own.
import { ago, fmtBytes, fmtNum, fmtTime } from '../../components/ui.tsx'
import { fmtDuration } from './common.tsx'

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d/

/** Labels of the figures whose key reads badly once its underscores are spaces. */
const LABELS: Record<string, string> = {
  n_live_tup: 'live rows',
  n_dead_tup: 'dead rows',
  dead_ratio: 'dead tuple ratio',
  seq_scan: 'sequential scans',
  idx_scan: 'index scans',
  blks_hit: 'blocks found in shared buffers',
  blks_read: 'blocks read from disk',
  temp_files: 'temporary files',
  temp_bytes: 'temporary file size',
  xmin_age_xids: 'xmin horizon age (transactions)',
  age: 'oldest unfrozen ID age',
  used_ratio: 'share used',
  usage_ratio: 'share of connections used',
  connections_total: 'connections',
  superuser_reserved_connections: 'reserved for superusers',
  idle_connections: 'idle connections',
  autovacuum_freeze_max_age: 'autovacuum_freeze_max_age',
  autovacuum_multixact_freeze_max_age: 'autovacuum_multixact_freeze_max_age',
  pid: 'process ID',
  root_pid: 'blocking process ID',
  fsync_on: 'fsync on',
  track_counts_on: 'track_counts on',
  autovacuum_on: 'autovacuum on',
  full_page_writes_on: 'full_page_writes on',
  pg_stat_statements_installed: 'pg_stat_statements installed',
  checkpoints_timed: 'checkpoints on schedule',
  checkpoints_req: 'checkpoints requested',
  requested_share: 'share of checkpoints requested',
  is_unique: 'unique',
  last_value: 'last value',
  max_value: 'largest value',
  wal_status: 'WAL status',
  num_parts: 'parts merged',
  progress: 'progress',
  parts_to_do: 'parts left to mutate',
  max_minute_p99_ms: 'worst minute p99',
  p99_ms: 'p99',
  read_rows: 'rows read',
  failed: 'failed queries',
  failed_ratio: 'failed share',
  free_ratio: 'share free',
  limit_bytes: 'limit',
  memory_tracked_bytes: 'memory tracked by ClickHouse',
  memory_resident_bytes: 'resident memory',
  replicas_readonly: 'read-only replicas',
  max_replica_delay_s: 'largest replica delay',
  poll_interval_seconds: 'poll interval',
}

/**
 * Points in time named after a catalog column rather than with `_at`: a number under one of these keys is
 * epoch milliseconds (the doctor's metrics carry pg_stat_user_tables' times so), never a count.
 */
const TIMES = new Set([
  'last_vacuum',
  'last_autovacuum',
  'last_analyze',
  'last_autoanalyze',
  'stats_reset',
  'xact_start',
  'query_start',
  'backend_start',
  'state_change',
  'as_of',
])

/** True when `key` names a point in time (`_at`, `_since` as in holder_since, or a catalog time column). */
export const isTimeKey = (key: string) => /_(at|since)$/.test(key) || TIMES.has(key)

/** Figures whose key does not name their unit: `progress` is a share of 1. */
const SHARES = new Set(['progress'])

/** "longest_query_ms" → "longest query"; "last_seen_s_ago" → "last seen"; "n_dead_tup" → "dead rows". */
export function figureLabel(key: string): string {
  const known = LABELS[key]
  if (known) return known
  return key
    .replace(/_s_ago$/, '')
    .replace(/_(ms|s|seconds|bytes|pct)$/, '')
    .replace(/^is_/, '')
    .replace(/_/g, ' ')
}

/** A percentage with at most `digits` decimals: shares near 100 % (cache hits) need two to tell 99.9 from 99.99. */
const percent = (pct: number, digits: number) => `${+pct.toFixed(digits)} %`

/** One figure with its unit, e.g. 1.5 MB, 2 min 5 s, 99.12 %, "3 h ago (date)". */
export function formatFigure(key: string, v: unknown): string {
  if (v === null || v === undefined) return '—'
  if (typeof v === 'string') return ISO_TIME.test(v) ? `${ago(v)} (${fmtTime(v)})` : v
  if (typeof v === 'boolean') return v ? 'yes' : 'no'
  if (typeof v !== 'number' || !Number.isFinite(v)) return typeof v === 'object' ? JSON.stringify(v) : String(v)
  if (/_s_ago$/.test(key)) return `${fmtDuration(v * 1000)} ago`
  if (isTimeKey(key)) return `${ago(v)} (${fmtTime(v)})`
  if (/_(ratio|share)$/.test(key) || SHARES.has(key)) return percent(v * 100, 2)
  if (/_pct$/.test(key)) return percent(v, 1)
  if (/_bytes($|_)/.test(key)) return fmtBytes(v)
  if (/_ms$/.test(key)) return fmtDuration(v)
  if (/_(s|seconds)$/.test(key)) return fmtDuration(v * 1000)
  if ((/_(on|installed)$/.test(key) || /^is_/.test(key)) && (v === 0 || v === 1)) return v === 1 ? 'yes' : 'no'
  return fmtNum(v)
}
