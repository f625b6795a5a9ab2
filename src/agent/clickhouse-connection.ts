// The agent's connection to one ClickHouse server: an @clickhouse/client over HTTP(S) built from the
// DSN rules of clickhouseTarget(), with every query under max_execution_time, 64-bit integers quoted
// (read them with num()), and the agent's queries tagged with log_comment so that activity and
// query_stats can leave them out. The client opens HTTP connections per request from a keep-alive
// pool, so a server that went away and came back needs no explicit reconnect. A request the agent
// aborts (a deadline) also stops its query: the server cancels a read-only query whose client went away
// (cancel_http_readonly_queries_on_client_close).
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client'
import { clickhouseTarget } from './config.ts'

/** log_comment of every query the agent runs; system.processes and system.query_log show it. */
export const AGENT_LOG_COMMENT = 'dbm-agent'

export interface ClickHouseConnection {
  client: ClickHouseClient
  /** version(), e.g. `26.7.2.1`. */
  version: string
  major: number
  /** major * 1000 + minor, e.g. 26007. */
  versionNum: number
  /** True when the server answers /ping, else throws the client's error; the request is aborted with `signal`. */
  ping(signal?: AbortSignal): Promise<boolean>
  close(): Promise<void>
}

export interface ClickHouseConnectOptions {
  /** HTTP request timeout of the client, in milliseconds. */
  requestTimeoutMs: number
  /** Server-side deadline of every query, in seconds. */
  maxExecutionTimeS: number
}

/** Parses `26.7.2.1` into its major and a comparable number (major * 1000 + minor). */
export function parseClickHouseVersion(version: string): { major: number; versionNum: number } {
  const match = /^(\d+)\.(\d+)/.exec(version)
  if (!match) throw new Error(`unexpected ClickHouse version "${version}"`)
  const major = Number(match[1])
  return { major, versionNum: major * 1000 + Number(match[2]) }
}

export async function connectClickHouse(dsn: string, options: ClickHouseConnectOptions): Promise<ClickHouseConnection> {
  const target = clickhouseTarget(dsn)
  const client = createClient({
    url: target.url,
    username: target.username,
    password: target.password,
    database: target.database,
    request_timeout: options.requestTimeoutMs,
    application: 'dbm-agent',
    // The collectors report failures themselves (once, with the collector's name); the client's own
    // console logging would repeat them every cycle.
    log: { level: ClickHouseLogLevel.OFF },
    clickhouse_settings: {
      max_execution_time: options.maxExecutionTimeS,
      output_format_json_quote_64bit_integers: 1,
      log_comment: AGENT_LOG_COMMENT,
      cancel_http_readonly_queries_on_client_close: 1,
    },
  })
  try {
    const result = await client.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' })
    const [row] = await result.json<{ version: string }>()
    const version = String(row?.version ?? '')
    return {
      client,
      version,
      ...parseClickHouseVersion(version),
      async ping(signal) {
        const result = await client.ping(signal ? { select: false, abort_signal: signal } : undefined)
        // The client's own error (ECONNREFUSED, a timeout...) says why: the runner classes it (reachability.ts).
        if (!result.success) throw result.error
        return true
      },
      close: () => client.close(),
    }
  } catch (e) {
    await client.close().catch(() => {})
    throw e
  }
}
