// The one table of collector names, per engine, with the lowest server major they need. Used by the
// agent to pick collectors and by the server to validate `disabled_collectors`.

export type EngineName = 'postgres' | 'clickhouse'

export interface CollectorName {
  name: string
  engine: EngineName
  /** Lowest PostgreSQL major the collector supports; absent = any. */
  minVersion?: number
}

export const collectorNames: readonly CollectorName[] = [
  { engine: 'postgres', name: 'query_stats' },
  { engine: 'postgres', name: 'explain_plans' },
  { engine: 'postgres', name: 'activity' },
  { engine: 'postgres', name: 'locks' },
  { engine: 'postgres', name: 'waits' },
  { engine: 'postgres', name: 'tables' },
  { engine: 'postgres', name: 'indexes' },
  { engine: 'postgres', name: 'replication' },
  { engine: 'postgres', name: 'bgwriter' },
  { engine: 'postgres', name: 'wal_stats', minVersion: 14 },
  { engine: 'postgres', name: 'io_stats', minVersion: 16 },
  { engine: 'postgres', name: 'database_stats' },
  { engine: 'postgres', name: 'constraints' },
  { engine: 'postgres', name: 'bloat' },
  { engine: 'postgres', name: 'connections' },
  { engine: 'postgres', name: 'progress' },
  { engine: 'postgres', name: 'column_stats' },
  { engine: 'postgres', name: 'archiver' },
  { engine: 'postgres', name: 'backups' },
  { engine: 'postgres', name: 'triggers' },
  { engine: 'postgres', name: 'security' },
  { engine: 'postgres', name: 'host' },
  { engine: 'postgres', name: 'log_events' },
  { engine: 'postgres', name: 'custom_metrics' },
  { engine: 'clickhouse', name: 'query_stats' },
  { engine: 'clickhouse', name: 'activity' },
  { engine: 'clickhouse', name: 'parts' },
  { engine: 'clickhouse', name: 'merges' },
  { engine: 'clickhouse', name: 'mutations' },
  { engine: 'clickhouse', name: 'server_metrics' },
  { engine: 'clickhouse', name: 'log_events' },
  { engine: 'clickhouse', name: 'host' },
  { engine: 'clickhouse', name: 'custom_metrics' },
]

export function collectorsFor(engine: EngineName): string[] {
  return collectorNames.filter((c) => c.engine === engine).map((c) => c.name)
}
