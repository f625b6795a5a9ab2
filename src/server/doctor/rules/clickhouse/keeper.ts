// The server's sessions with ZooKeeper / ClickHouse Keeper: more than one open session at a time
// (ZooKeeperSession) risks stale reads, as Altinity's rule says (critical above 1), and hardware
// exceptions (ZooKeeperHardwareExceptions: network errors and timeouts talking to Keeper, after which
// the session is re-created and Replicated tables may turn read-only) warn from one in ten minutes and
// are critical from ten. Read-only replicas themselves are ch_replication's.
import { signalRule } from './signals.ts'

export const keeper = signalRule({
  id: 'ch_keeper',
  summary:
    'Trouble with ZooKeeper or ClickHouse Keeper: several open sessions at once, or hardware exceptions talking to it.',
  collectors: ['server_metrics', 'log_events'],
  category: 'replication',
  thresholds: {
    window_s: 600,
    sessions_warning: 2,
    sessions_critical: 2,
    hardware_exceptions_warning: 1,
    hardware_exceptions_critical: 10,
  },
  signals: [
    {
      key: 'zookeeper_sessions',
      kind: 'gauge',
      name: 'ZooKeeperSession',
      what: 'open Keeper sessions',
      warning: 'sessions_warning',
      critical: 'sessions_critical',
    },
    {
      key: 'zookeeper_hardware_exceptions',
      kind: 'counter',
      name: 'ZooKeeperHardwareExceptions',
      what: 'network errors and timeouts with Keeper',
      warning: 'hardware_exceptions_warning',
      critical: 'hardware_exceptions_critical',
    },
  ],
  title: (hits) =>
    hits.some((h) => h.signal.key === 'zookeeper_sessions')
      ? 'More than one Keeper session is open'
      : 'Errors talking to Keeper (ZooKeeper)',
  explain:
    'Replicated tables, ON CLUSTER queries and replicated databases depend on the Keeper session: each failure ends it and a new one is made; in between, Replicated tables are read-only. Two sessions at once can read stale data.',
  recommendation:
    'Check the Keeper ensemble (every node up, a leader elected, latency) and the network from this server to it; the errors below and system.zookeeper_connection show which node the server talks to.',
  how_to_investigate: [
    "SELECT * FROM system.zookeeper_connection;   -- the session, its node and when it connected (older versions: SELECT * FROM system.zookeeper WHERE path = '/')",
    "SELECT database, table, is_readonly, is_session_expired, zookeeper_exception FROM system.replicas WHERE is_readonly OR is_session_expired OR zookeeper_exception != '';",
    "SELECT name, value, last_error_time, last_error_message FROM system.errors WHERE name IN ('KEEPER_EXCEPTION', 'NO_ZOOKEEPER', 'TABLE_IS_READ_ONLY') ORDER BY last_error_time DESC;",
  ],
  how_to_fix: [
    "SYSTEM RESTART REPLICAS;   -- re-initialises every Replicated table's Keeper session once Keeper is reachable",
  ],
  errors: ['KEEPER_EXCEPTION', 'NO_ZOOKEEPER', 'TABLE_IS_READ_ONLY'],
})
