// The one table of collectors, per engine: each one's name, the lowest server major it needs, the
// server-side switch that turns it off, and what the monitored server or the agent config must provide
// for it to send anything. Used by the agent to pick collectors (each collector module registers its
// implementation under a name of this table: src/agent/collectors/registry.ts) and by the server and the
// dashboard to validate and list `disabled_collectors`.

export type EngineName = 'postgres' | 'clickhouse'

export interface CollectorName {
  name: string
  engine: EngineName
  /** Lowest server major the collector supports (below it the agent skips it, saying so); absent = any. */
  minVersion?: number
  /** The database setting on the server (beside disabled_collectors) that turns it off. */
  serverSwitch?: 'collect_explain_plans' | 'collect_replication'
  /** What it needs of the monitored server or the agent config to send anything; absent = nothing beyond a login. */
  needs?: readonly string[]
}

export const collectorNames: readonly CollectorName[] = [
  {
    engine: 'postgres',
    name: 'query_stats',
    needs: ['pg_stat_statements in shared_preload_libraries', 'CREATE EXTENSION pg_stat_statements'],
  },
  {
    engine: 'postgres',
    name: 'explain_plans',
    serverSwitch: 'collect_explain_plans',
    needs: ['pg_stat_statements 1.9+', 'explain_trusted_roles for statements of other roles'],
  },
  { engine: 'postgres', name: 'activity' },
  { engine: 'postgres', name: 'locks' },
  { engine: 'postgres', name: 'waits' },
  { engine: 'postgres', name: 'tables' },
  { engine: 'postgres', name: 'indexes' },
  { engine: 'postgres', name: 'replication', serverSwitch: 'collect_replication' },
  { engine: 'postgres', name: 'bgwriter' },
  {
    engine: 'postgres',
    name: 'wal_stats',
    minVersion: 14,
    needs: ['track_wal_io_timing on for its write and sync times'],
  },
  { engine: 'postgres', name: 'io_stats', minVersion: 16 },
  {
    engine: 'postgres',
    name: 'database_stats',
    needs: ['track_counts on', "track_io_timing on for statements' read and write times"],
  },
  { engine: 'postgres', name: 'constraints' },
  { engine: 'postgres', name: 'bloat' },
  { engine: 'postgres', name: 'connections' },
  { engine: 'postgres', name: 'progress' },
  { engine: 'postgres', name: 'column_stats' },
  { engine: 'postgres', name: 'archiver' },
  { engine: 'postgres', name: 'backups', needs: ['backup_command in the agent config'] },
  { engine: 'postgres', name: 'triggers' },
  { engine: 'postgres', name: 'wal_dir' },
  { engine: 'postgres', name: 'security' },
  { engine: 'postgres', name: 'host' },
  {
    engine: 'postgres',
    name: 'log_events',
    needs: ['log_destination stderr, csvlog or jsonlog', 'logging_collector on, or pg_log_dir in the agent config'],
  },
  { engine: 'postgres', name: 'custom_metrics', needs: ['custom_metrics in the agent config'] },
  { engine: 'clickhouse', name: 'query_stats', needs: ['system.query_log (<query_log> in the server config)'] },
  { engine: 'clickhouse', name: 'activity' },
  { engine: 'clickhouse', name: 'parts' },
  { engine: 'clickhouse', name: 'merges' },
  { engine: 'clickhouse', name: 'mutations' },
  { engine: 'clickhouse', name: 'server_metrics' },
  {
    engine: 'clickhouse',
    name: 'log_events',
    needs: ['system.text_log (<text_log> in the server config) for warnings and fatal messages'],
  },
  { engine: 'clickhouse', name: 'host' },
  { engine: 'clickhouse', name: 'security', needs: ['SHOW USERS (GRANT SHOW USERS ON *.*) to read system.users'] },
  { engine: 'clickhouse', name: 'custom_metrics', needs: ['custom_metrics in the agent config'] },
]

export function collectorsFor(engine: EngineName): string[] {
  return collectorNames.filter((c) => c.engine === engine).map((c) => c.name)
}
