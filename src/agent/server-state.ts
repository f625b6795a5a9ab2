// What the server compares from one batch to the next to derive the events timeline (the batch's
// `server_state`, src/shared/wire.ts): when the database server started, its settings, and when its
// statistics views were last reset. Read once per cycle by the runner, outside the collectors (it is
// not a collector of its own: nothing to enable or disable, and a failure only leaves the section out).
// The settings travel whole only when their digest changed since the runner last sent them; so do their
// details (unit, source, defaults, context: what the server's Configuration page shows), by a digest of
// their own.
import type { ClickHouseClient } from '@clickhouse/client'
import type postgres from 'postgres'
import { settingsLimits } from '../shared/ingest-limits.ts'
import { HIDDEN, isSecretSetting, maskSecretSettings } from '../shared/secret-settings.ts'
import type { ServerState, SettingDetail } from '../shared/wire.ts'
import { PREPARED } from './own-statements.ts'

/** What a session reads each cycle; the runner adds agent_started_at and decides whether the settings go. */
export interface ServerFacts {
  started_at?: number
  settings: Record<string, string>
  /** Each setting's detail, secrets' defaults masked; absent when the server could not give them. */
  details?: Record<string, SettingDetail>
  stats_resets?: Record<string, number | null>
}

/** The digest of a settings map (its names in order with their values). */
export function settingsHash(settings: Record<string, string>): string {
  const text = Object.keys(settings)
    .sort()
    .map((name) => `${name}=${settings[name]}`)
    .join('\n')
  return new Bun.CryptoHasher('sha256').update(text).digest('hex').slice(0, 32)
}

/**
 * Tracks the settings digest the runner last sent: the map goes with the first cycle and whenever its
 * digest changes; a batch that was lost (neither delivered nor buffered) forgets the digest so the next
 * cycle sends the map again.
 */
export class SettingsTracker {
  private sent: string | undefined
  private detailsSent: string | undefined

  section(facts: ServerFacts, agentStartedAt: number): ServerState {
    const hash = settingsHash(facts.settings)
    const state: ServerState = { agent_started_at: agentStartedAt, settings_hash: hash }
    if (facts.started_at !== undefined) state.started_at = facts.started_at
    if (facts.stats_resets) state.stats_resets = facts.stats_resets
    // The digest covers the real values (a secret's change still sends the map); the map has them masked.
    if (hash !== this.sent) state.settings = maskSecretSettings(facts.settings)
    this.sent = hash
    if (facts.details) {
      const detailsHash = detailsDigest(facts.details)
      if (detailsHash !== this.detailsSent) state.settings_detail = facts.details
      this.detailsSent = detailsHash
    }
    return state
  }

  lost(): void {
    this.sent = undefined
    this.detailsSent = undefined
  }
}

/** The digest of a details map (its names in order, each detail's fields in order). */
function detailsDigest(details: Record<string, SettingDetail>): string {
  const hasher = new Bun.CryptoHasher('sha256')
  for (const name of Object.keys(details).sort()) {
    const d = details[name]!
    hasher.update(
      `${name}\u0000${JSON.stringify(
        Object.keys(d)
          .sort()
          .map((k) => [k, d[k as keyof SettingDetail]]),
      )}\n`,
    )
  }
  return hasher.digest('hex').slice(0, 32)
}

/** A default as the wire carries it: masked for a setting that may hold a secret (empty stays empty). */
const maskedDefault = (name: string, value: string | null) =>
  value === null || value === '' || !isSecretSetting(name) ? value : HIDDEN

const cut = (text: string | null, max: number) => (text === null ? null : text.slice(0, max))

const epochMs = (v: unknown): number | null => (v === null || v === undefined ? null : Math.floor(Number(v)))

/**
 * PostgreSQL: settings set by the agent's own session (its startup options: application_name and the
 * timeouts; SET) are left out, they say nothing about the server. Values as SHOW prints them.
 */
// transaction_isolation, transaction_read_only and transaction_deferrable describe the reading
// transaction itself (the agent's, read-only or not by turns), not the server: they made events flap.
// `changed`: differs from the built-in default, unless PostgreSQL set it itself (source override:
// wal_buffers sized from shared_buffers, data_checksums). sourcefile and sourceline are null for a role
// without pg_read_all_settings (pg_monitor has it).
// A session's settings change only when it reloads the configuration files (pg_conf_load_time(), the
// session's own reload), at a promotion (in_hot_standby) and by its own SET (left out here): the row
// of `signal` says which session read them under which reload, and pg_settings (350 rows, 3 ms a cycle
// with its texts) is read only when that signal is not among those ($1, comma-separated) whose settings
// the agent keeps (SettingsCache). Values a database or role setting gives apply from a session's start,
// and a new session has a new pid. A signal without settings rows is the one row `name IS NULL`.
const SETTINGS_SQL = `
  WITH sig AS (SELECT pg_backend_pid() || '/' || pg_conf_load_time() || '/' || pg_is_in_recovery() AS signal)
  SELECT sig.signal, st.* FROM sig LEFT JOIN LATERAL (
    SELECT name, current_setting(name, true) AS value, unit, source, sourcefile, sourceline, boot_val, reset_val,
           context, vartype, short_desc, pending_restart, (source NOT IN ('default', 'override') AND setting IS DISTINCT FROM boot_val) AS changed
    FROM pg_settings
    WHERE source NOT IN ('client', 'session') AND name NOT IN ('transaction_isolation', 'transaction_read_only', 'transaction_deferrable')
      AND NOT sig.signal = ANY (string_to_array($1::text, ','))
  ) st ON true
  ORDER BY st.name`

/** Settings kept between cycles, by the signal they were read under (one per session of the pool). */
export class SettingsCache {
  private readonly kept = new Map<
    string,
    { at: number; settings: Record<string, string>; details: Record<string, SettingDetail> }
  >()
  /** Kept at most this long: read afresh then whatever the signal says. */
  static readonly MAX_AGE_MS = 10 * 60_000
  private static readonly MAX_SIGNALS = 8

  known(now: number): string {
    for (const [signal, entry] of this.kept) if (now - entry.at >= SettingsCache.MAX_AGE_MS) this.kept.delete(signal)
    return [...this.kept.keys()].join(',')
  }

  get(signal: string) {
    return this.kept.get(signal)
  }

  set(signal: string, now: number, settings: Record<string, string>, details: Record<string, SettingDetail>): void {
    this.kept.delete(signal)
    this.kept.set(signal, { at: now, settings, details })
    for (const oldest of this.kept.keys()) {
      if (this.kept.size <= SettingsCache.MAX_SIGNALS) break
      this.kept.delete(oldest)
    }
  }
}

interface SettingRow {
  signal: string
  name: string
  value: string | null
  unit: string | null
  source: string
  sourcefile: string | null
  sourceline: number | null
  boot_val: string | null
  reset_val: string | null
  context: string | null
  vartype: string | null
  short_desc: string | null
  pending_restart: boolean | null
  changed: boolean
}

/** One pg_settings row's detail as the wire carries it (texts cut to the wire's limits). */
function postgresDetail(r: SettingRow): SettingDetail {
  return {
    unit: cut(r.unit, 32),
    source: r.source.slice(0, 64),
    file: cut(r.sourcefile, 4096),
    line: r.sourceline,
    boot_value: cut(maskedDefault(r.name, r.boot_val), settingsLimits.value),
    reset_value: cut(maskedDefault(r.name, r.reset_val), settingsLimits.value),
    context: cut(r.context, 32),
    type: cut(r.vartype, 128),
    description: cut(r.short_desc, 2_000),
    pending_restart: r.pending_restart === true,
    changed: r.changed === true,
  }
}

/**
 * The reset times of the statistics views this server version has, as epoch ms (truncated to the
 * millisecond; extract() is exact numeric from PostgreSQL 14 on).
 */
function resetsSql(major: number): string {
  const at = (expression: string) => `floor(extract(epoch FROM ${expression}) * 1000)::int8`
  const views = [
    `${at('(SELECT stats_reset FROM pg_stat_database WHERE datname = current_database())')} AS pg_stat_database`,
    `${at('(SELECT stats_reset FROM pg_stat_bgwriter)')} AS pg_stat_bgwriter`,
  ]
  if (major >= 14) views.push(`${at('(SELECT stats_reset FROM pg_stat_wal)')} AS pg_stat_wal`)
  if (major >= 17) views.push(`${at('(SELECT stats_reset FROM pg_stat_checkpointer)')} AS pg_stat_checkpointer`)
  return `SELECT ${at('pg_postmaster_start_time()')} AS started_at, ${views.join(', ')},
    (SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements') AS pgss_version`
}

export async function postgresFacts(
  sql: postgres.Sql,
  major: number,
  cache = new SettingsCache(),
  now = Date.now(),
): Promise<ServerFacts> {
  const [row] = await sql.unsafe(resetsSql(major), [], PREPARED)
  const settingsRows = await sql.unsafe<SettingRow[]>(SETTINGS_SQL, [cache.known(now)], PREPARED)
  const signal = settingsRows[0]?.signal ?? ''
  const kept = settingsRows[0]?.name === null ? cache.get(signal) : undefined
  const settings: Record<string, string> = kept ? { ...kept.settings } : {}
  const details: Record<string, SettingDetail> = kept ? { ...kept.details } : {}
  if (!kept) {
    for (const r of settingsRows) {
      if (r.value === null || r.name === null) continue
      settings[r.name] = r.value
      details[r.name] = postgresDetail(r)
    }
    // A session's settings are never none: without a row (the signal known, its entry gone since) none are kept.
    if (settingsRows.some((r) => r.name !== null)) cache.set(signal, now, settings, details)
  }
  const resets: Record<string, number | null> = {}
  for (const view of ['pg_stat_database', 'pg_stat_bgwriter', 'pg_stat_wal', 'pg_stat_checkpointer']) {
    if (row && view in row) resets[view] = epochMs(row[view])
  }
  // pg_stat_statements_info (extension 1.9+): its stats_reset moves on a full pg_stat_statements_reset().
  const [extMajor = 0, extMinor = 0] = String(row?.pgss_version ?? '0.0')
    .split('.')
    .map(Number)
  if (extMajor > 1 || (extMajor === 1 && extMinor >= 9)) {
    try {
      const [info] = await sql.unsafe(
        `SELECT floor(extract(epoch FROM stats_reset) * 1000)::int8 AS at FROM pg_stat_statements_info`,
        [],
        PREPARED,
      )
      resets.pg_stat_statements = epochMs(info?.at)
    } catch {
      // Installed in a schema off the search_path, or not loaded: no reset time for it.
    }
  }
  return { started_at: epochMs(row?.started_at) ?? undefined, settings, details, stats_resets: resets }
}

/**
 * Settings the agent's HTTP client sets on its own requests (clickhouse-connection.ts and the client
 * library's defaults): changed in the agent's session only, they say nothing about the server.
 */
const CLICKHOUSE_CLIENT_SETTINGS = [
  'max_execution_time',
  'output_format_json_quote_64bit_integers',
  'log_comment',
  'cancel_http_readonly_queries_on_client_close',
  'enable_http_compression',
  'http_zlib_compression_level',
  'wait_end_of_query',
  'send_progress_in_http_headers',
  'http_headers_progress_interval_ms',
  'default_format',
]

/** ClickHouse: the start time (now less uptime()) and the settings changed from their defaults (the profile's). */
export async function clickhouseFacts(client: ClickHouseClient): Promise<ServerFacts> {
  const json = async <T>(query: string) => (await client.query({ query, format: 'JSONEachRow' })).json<T>()
  const [up] = await json<{ started_ms: number | string }>(
    'SELECT toUnixTimestamp64Milli(now64(3)) - uptime() * 1000 AS started_ms',
  )
  type Row = { name: string; value: string; default?: string; type?: string; description?: string }
  // system.settings' default column is recent (ClickHouse 22.x): a server without it gives the values alone.
  const rows = await json<Row>(
    'SELECT name, value, `default`, type, description FROM system.settings WHERE changed ORDER BY name',
  ).catch(() => json<Row>('SELECT name, value FROM system.settings WHERE changed ORDER BY name'))
  const settings: Record<string, string> = {}
  const details: Record<string, SettingDetail> = {}
  for (const r of rows) {
    if (CLICKHOUSE_CLIENT_SETTINGS.includes(r.name)) continue
    settings[r.name] = String(r.value)
    if (r.default === undefined) continue
    details[r.name] = {
      source: 'profile',
      boot_value: cut(maskedDefault(r.name, String(r.default)), settingsLimits.value),
      type: cut(r.type ?? null, 128),
      description: cut(r.description ?? null, 2_000),
      changed: true,
    }
  }
  const started = epochMs(up?.started_ms)
  const hasDetails = rows.length === 0 || rows.some((r) => r.default !== undefined)
  return { ...(started === null ? {} : { started_at: started }), settings, ...(hasDetails ? { details } : {}) }
}
