// What the server compares from one batch to the next to derive the events timeline (the batch's
// `server_state`, src/shared/wire.ts): when the database server started, its settings, and when its
// statistics views were last reset. Read once per cycle by the runner, outside the collectors (it is
// not a collector of its own: nothing to enable or disable, and a failure only leaves the section out).
// The settings travel whole only when their digest changed since the runner last sent them.
import type { ClickHouseClient } from '@clickhouse/client'
import type postgres from 'postgres'
import { maskSecretSettings } from '../shared/secret-settings.ts'
import type { ServerState } from '../shared/wire.ts'

/** What a session reads each cycle; the runner adds agent_started_at and decides whether the settings go. */
export interface ServerFacts {
  started_at?: number
  settings: Record<string, string>
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

  section(facts: ServerFacts, agentStartedAt: number): ServerState {
    const hash = settingsHash(facts.settings)
    const state: ServerState = { agent_started_at: agentStartedAt, settings_hash: hash }
    if (facts.started_at !== undefined) state.started_at = facts.started_at
    if (facts.stats_resets) state.stats_resets = facts.stats_resets
    // The digest covers the real values (a secret's change still sends the map); the map has them masked.
    if (hash !== this.sent) state.settings = maskSecretSettings(facts.settings)
    this.sent = hash
    return state
  }

  lost(): void {
    this.sent = undefined
  }
}

const epochMs = (v: unknown): number | null => (v === null || v === undefined ? null : Math.floor(Number(v)))

/**
 * PostgreSQL: settings set by the agent's own session (its startup options: application_name and the
 * timeouts; SET) are left out, they say nothing about the server. Values as SHOW prints them.
 */
// transaction_isolation, transaction_read_only and transaction_deferrable describe the reading
// transaction itself (the agent's, read-only or not by turns), not the server: they made events flap.
const SETTINGS_SQL = `SELECT name, current_setting(name, true) AS value FROM pg_settings
  WHERE source NOT IN ('client', 'session') AND name NOT IN ('transaction_isolation', 'transaction_read_only', 'transaction_deferrable')
  ORDER BY name`

/**
 * The reset times of the statistics views this server version has, as epoch ms (truncated to the
 * millisecond; extract() is exact numeric from PostgreSQL 14 on).
 */
function resetsSql(major: number): string {
  const at = (expression: string) => `floor(extract(epoch FROM ${expression}) * 1000)::int8`
  const views = [
    `${at("(SELECT stats_reset FROM pg_stat_database WHERE datname = current_database())")} AS pg_stat_database`,
    `${at('(SELECT stats_reset FROM pg_stat_bgwriter)')} AS pg_stat_bgwriter`,
  ]
  if (major >= 14) views.push(`${at('(SELECT stats_reset FROM pg_stat_wal)')} AS pg_stat_wal`)
  if (major >= 17) views.push(`${at('(SELECT stats_reset FROM pg_stat_checkpointer)')} AS pg_stat_checkpointer`)
  return `SELECT ${at('pg_postmaster_start_time()')} AS started_at, ${views.join(', ')},
    (SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements') AS pgss_version`
}

export async function postgresFacts(sql: postgres.Sql, major: number): Promise<ServerFacts> {
  const [row] = await sql.unsafe(resetsSql(major))
  const settingsRows = await sql.unsafe<{ name: string; value: string | null }[]>(SETTINGS_SQL)
  const settings: Record<string, string> = {}
  for (const r of settingsRows) if (r.value !== null) settings[r.name] = r.value
  const resets: Record<string, number | null> = {}
  for (const view of ['pg_stat_database', 'pg_stat_bgwriter', 'pg_stat_wal', 'pg_stat_checkpointer']) {
    if (row && view in row) resets[view] = epochMs(row[view])
  }
  // pg_stat_statements_info (extension 1.9+): its stats_reset moves on a full pg_stat_statements_reset().
  const [extMajor = 0, extMinor = 0] = String(row?.pgss_version ?? '0.0').split('.').map(Number)
  if (extMajor > 1 || (extMajor === 1 && extMinor >= 9)) {
    try {
      const [info] = await sql.unsafe(`SELECT floor(extract(epoch FROM stats_reset) * 1000)::int8 AS at FROM pg_stat_statements_info`)
      resets.pg_stat_statements = epochMs(info?.at)
    } catch {
      // Installed in a schema off the search_path, or not loaded: no reset time for it.
    }
  }
  return { started_at: epochMs(row?.started_at) ?? undefined, settings, stats_resets: resets }
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
  const [up] = await json<{ started_ms: number | string }>('SELECT toUnixTimestamp64Milli(now64(3)) - uptime() * 1000 AS started_ms')
  const rows = await json<{ name: string; value: string }>('SELECT name, value FROM system.settings WHERE changed ORDER BY name')
  const settings: Record<string, string> = {}
  for (const r of rows) if (!CLICKHOUSE_CLIENT_SETTINGS.includes(r.name)) settings[r.name] = String(r.value)
  const started = epochMs(up?.started_ms)
  return { ...(started === null ? {} : { started_at: started }), settings }
}
