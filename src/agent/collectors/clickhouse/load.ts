// The server's load against its limits, read by server_metrics: the queries running now
// (system.processes, the agent's own left out by their log_comment) against max_concurrent_queries,
// and the open connections of the protocols server_metrics does not read already (system.metrics
// MySQLConnection, PostgreSQLConnection, InterserverConnection; TCP and HTTP are its own) beside
// max_connections, the size of the thread pool every protocol's listener shares. Both limits come from system.server_settings
// (ClickHouse 23.4 and later; older servers keep them in config.xml, which the agent cannot read, so
// the limit keys are left out); 0 means no limit and leaves the key out too.
import type { ServerGaugeKey } from '../../../shared/metrics.ts'
import { AGENT_LOG_COMMENT } from '../../clickhouse-connection.ts'
import { num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { select, selectOptional } from './common.ts'

/** system.metrics gauges of open connections, by protocol (TCP and HTTP: server-metrics.ts). */
const CONNECTION_METRICS: Record<string, ServerGaugeKey> = {
  MySQLConnection: 'mysql_connections',
  PostgreSQLConnection: 'postgresql_connections',
  InterserverConnection: 'interserver_connections',
}

const LIMITS: Record<string, ServerGaugeKey> = {
  max_concurrent_queries: 'max_concurrent_queries',
  max_connections: 'max_connections',
}

type Named = { name: string; value: number | string }

/** running_queries, the connections of MySQL, PostgreSQL and interserver, and the limits, as server_metrics keys. */
export async function readLoad(ctx: ClickHouseContext): Promise<Partial<Record<ServerGaugeKey, number | null>>> {
  const [running, connections, limits] = await Promise.all([
    select<{ queries: number | string }>(
      ctx,
      "SELECT count() AS queries FROM system.processes WHERE Settings['log_comment'] != {own:String}",
      { own: AGENT_LOG_COMMENT },
    ),
    selectOptional<Named>(
      ctx,
      'SELECT metric AS name, value FROM system.metrics WHERE metric IN {names:Array(String)}',
      { names: Object.keys(CONNECTION_METRICS) },
    ),
    selectOptional<Named>(ctx, 'SELECT name, value FROM system.server_settings WHERE name IN {names:Array(String)}', {
      names: Object.keys(LIMITS),
    }),
  ])
  const out: Partial<Record<ServerGaugeKey, number | null>> = { running_queries: num(running[0]?.queries) }
  for (const r of connections ?? []) {
    const key = CONNECTION_METRICS[r.name]
    if (key) out[key] = num(r.value)
  }
  for (const r of limits ?? []) {
    const key = LIMITS[r.name]
    const value = num(r.value)
    if (key && value !== null && value > 0) out[key] = value
  }
  return out
}
