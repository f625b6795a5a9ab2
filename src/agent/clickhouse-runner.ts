// The ClickHouse side of the runner: one @clickhouse/client per database over HTTP(S), every query
// under max_execution_time (the statement deadline, in whole seconds) with the HTTP request deadline
// a little longer, so the server gives up first and says why. The server's identity is its host name
// and server UUID: a load balancer that moves the DSN to another node restarts the deltas. (A restart
// of the same server needs nothing: system.events deltas are reset-aware and query_log is read by time.)
// Deadlines cancel: a run's requests carry its AbortSignal and a query id of their own; when the signal
// aborts, the requests are aborted (the server cancels a read-only query whose client went away) and
// the queries the run started are killed by id (KILL QUERY ... ASYNC, bounded by the cancel grace).
import type { ClickHouseClient } from '@clickhouse/client'
import { type ClickHouseConnection, connectClickHouse } from './clickhouse-connection.ts'
import { clickhouseCollectors } from './collectors/clickhouse/index.ts'
import type { ClickHouseCollector, ClickHouseContext } from './collectors/types.ts'
import { clickhouseTarget } from './config.ts'
import { clickhouseFacts } from './server-state.ts'
import type { AgentLogger } from './collectors/types.ts'
import {
  Runner,
  type RunnerTimings,
  type Session,
  type SessionBase,
  abortable,
  planFor,
  withDeadline,
} from './runner.ts'
import type { DatabaseConfig } from './config.ts'
import type { CollectorPlan } from './runner.ts'

/** Which ClickHouse collectors run (the same rules as PostgreSQL's; none has a minimum version yet). */
export function planClickHouseCollectors(
  config: Pick<DatabaseConfig, 'enabledCollectors'>,
  major: number,
): CollectorPlan<ClickHouseContext>[] {
  return planFor(clickhouseCollectors, config, major)
}

/** Connection deadlines from the runner's timings. */
export function clickhouseOptions(timings: RunnerTimings) {
  const maxExecutionTimeS = Math.max(1, Math.ceil(timings.statementTimeoutMs / 1000))
  return { maxExecutionTimeS, requestTimeoutMs: maxExecutionTimeS * 1000 + 2_000 }
}

/** Host and HTTP(S) port the agent talks to, for the batch's database description. */
export function clickhouseEndpoint(dsn: string): { host: string; port: number } {
  const url = new URL(clickhouseTarget(dsn).url)
  return { host: url.hostname, port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80) }
}

async function serverIdentity(client: ClickHouseClient): Promise<string> {
  const [row] = await (
    await client.query({ query: 'SELECT hostName() AS host, toString(serverUUID()) AS uuid', format: 'JSONEachRow' })
  ).json<{
    host: string
    uuid: string
  }>()
  return `${row?.host ?? '?'}/${row?.uuid ?? '?'}`
}

/** The client methods that send a statement: each takes query_id and abort_signal. */
const SENDING = new Set<PropertyKey>(['query', 'command', 'exec', 'insert'])

/**
 * `client` as one run sees it: every request carries the run's signal and a query id of its own, none
 * starts once the signal aborted, and at the abort the queries started are killed on the server.
 */
export function cancellableClient(
  client: ClickHouseClient,
  signal: AbortSignal,
  graceMs: number,
  log: AgentLogger,
  database: string,
): ClickHouseClient {
  const started: string[] = []
  signal.addEventListener(
    'abort',
    () => {
      if (started.length === 0) return
      // Parameterised: the ids never become SQL text. ASYNC: the kill is requested, not waited for.
      client
        .command({
          query: 'KILL QUERY WHERE query_id IN {ids:Array(String)} ASYNC',
          query_params: { ids: started },
          abort_signal: AbortSignal.timeout(graceMs),
        })
        .catch((e: Error) => log.debug('KILL QUERY after a deadline failed', { database, cause: e.message }))
    },
    { once: true },
  )
  return new Proxy(client, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown
      if (typeof value !== 'function') return value
      if (!SENDING.has(property)) return value.bind(target)
      return (params: { query_id?: string; abort_signal?: AbortSignal }) => {
        signal.throwIfAborted()
        const queryId = params.query_id ?? crypto.randomUUID()
        started.push(queryId)
        const abortSignal = params.abort_signal ? AbortSignal.any([signal, params.abort_signal]) : signal
        return value.call(target, { ...params, query_id: queryId, abort_signal: abortSignal })
      }
    },
  })
}

export class ClickHouseRunner extends Runner<ClickHouseContext> {
  protected readonly collectors: ClickHouseCollector[] = clickhouseCollectors

  protected endpoint() {
    return clickhouseEndpoint(this.config.dsn)
  }

  protected target() {
    const { url, username, database } = clickhouseTarget(this.config.dsn)
    return `${url}/${database} as ${username}`
  }

  protected async open(base: SessionBase, signal: AbortSignal): Promise<Session<ClickHouseContext>> {
    const connecting = connectClickHouse(this.config.dsn, clickhouseOptions(this.timings))
    let conn: ClickHouseConnection
    try {
      conn = await abortable(withDeadline(connecting, this.timings.connectTimeoutS * 1000, 'connecting'), signal)
    } catch (e) {
      // A connection that arrives after the deadline or the stop is closed.
      void connecting.then(
        (late) => late.close(),
        () => {},
      )
      throw e
    }
    const { cancelGraceMs } = this
    const runClient = (run: AbortSignal) => cancellableClient(conn.client, run, cancelGraceMs, base.log, base.name)
    try {
      const identity = await abortable(serverIdentity(conn.client), signal)
      return {
        version: conn.version,
        major: conn.major,
        identity,
        // Host name and server UUID survive the server's restarts.
        lineage: identity,
        context: (now, _settings, run) => ({
          ...base,
          client: run ? runClient(run) : conn.client,
          version: conn.version,
          versionNum: conn.versionNum,
          major: conn.major,
          now,
          customMetrics: this.config.customMetrics,
          settings: { collectExplainPlans: false, collectReplication: false },
        }),
        ping: async (run) => {
          if (!(await conn.ping(run))) throw new Error('ClickHouse did not answer /ping')
        },
        sameServer: async (run) => (await serverIdentity(runClient(run))) === identity,
        facts: (run) => clickhouseFacts(runClient(run)),
        close: () => conn.close(),
      }
    } catch (e) {
      await conn.close().catch(() => {})
      throw e
    }
  }
}
