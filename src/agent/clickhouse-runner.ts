// The ClickHouse side of the runner: one @clickhouse/client per database over HTTP(S), every query
// under max_execution_time (the statement deadline, in whole seconds) with the HTTP request deadline
// a little longer, so the server gives up first and says why. The server's identity is its host name
// and server UUID: a load balancer that moves the DSN to another node restarts the deltas. (A restart
// of the same server needs nothing: system.events deltas are reset-aware and query_log is read by time.)
import { type ClickHouseConnection, connectClickHouse } from './clickhouse-connection.ts'
import { clickhouseCollectors } from './collectors/clickhouse/index.ts'
import type { ClickHouseCollector, ClickHouseContext } from './collectors/types.ts'
import { clickhouseTarget } from './config.ts'
import { Runner, type RunnerTimings, type Session, type SessionBase, planFor, withDeadline } from './runner.ts'
import type { DatabaseConfig } from './config.ts'
import type { CollectorPlan } from './runner.ts'

/** Which ClickHouse collectors run (the same rules as PostgreSQL's; none has a minimum version yet). */
export function planClickHouseCollectors(config: Pick<DatabaseConfig, 'enabledCollectors'>, major: number): CollectorPlan<ClickHouseContext>[] {
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

async function serverIdentity(conn: ClickHouseConnection): Promise<string> {
  const [row] = await (await conn.client.query({ query: 'SELECT hostName() AS host, toString(serverUUID()) AS uuid', format: 'JSONEachRow' })).json<{
    host: string
    uuid: string
  }>()
  return `${row?.host ?? '?'}/${row?.uuid ?? '?'}`
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

  protected async open(base: SessionBase): Promise<Session<ClickHouseContext>> {
    const conn = await withDeadline(
      connectClickHouse(this.config.dsn, clickhouseOptions(this.timings)),
      this.timings.connectTimeoutS * 1000,
      'connecting',
    )
    try {
      const identity = await serverIdentity(conn)
      return {
        version: conn.version,
        major: conn.major,
        identity,
        // Host name and server UUID survive the server's restarts.
        lineage: identity,
        context: (now) => ({
          ...base,
          client: conn.client,
          version: conn.version,
          versionNum: conn.versionNum,
          major: conn.major,
          now,
          settings: { collectExplainPlans: false, collectReplication: false },
        }),
        ping: async () => {
          if (!(await conn.ping())) throw new Error('ClickHouse did not answer /ping')
        },
        sameServer: async () => (await serverIdentity(conn)) === identity,
        close: () => conn.close(),
      }
    } catch (e) {
      await conn.close().catch(() => {})
      throw e
    }
  }
}
