// An overloaded server: reads of files slower than read_backoff_* allows (SlowRead; the server then
// lowers the threads of the query) and queries paused now by the 'priority' setting (system.metrics
// QueryPreempted). Altinity alerts on any slow read in a minute and on any preempted query; slow reads
// come in bursts on a busy disk, so dbm warns from ten in ten minutes (critical from 1,000) and from one
// preempted query (critical from ten).
import { signalRule } from './signals.ts'

export const slowReads = signalRule({
  id: 'ch_slow_reads',
  summary: 'An overloaded server: slow file reads and queries paused by the priority setting.',
  collectors: ['server_metrics', 'log_events'],
  category: 'performance',
  thresholds: {
    window_s: 600,
    slow_reads_warning: 10,
    slow_reads_critical: 1000,
    preempted_warning: 1,
    preempted_critical: 10,
  },
  signals: [
    {
      key: 'slow_reads',
      kind: 'counter',
      name: 'SlowRead',
      what: 'slow reads of files',
      warning: 'slow_reads_warning',
      critical: 'slow_reads_critical',
    },
    {
      key: 'queries_preempted',
      kind: 'gauge',
      name: 'QueryPreempted',
      what: "queries paused by the 'priority' setting",
      warning: 'preempted_warning',
      critical: 'preempted_critical',
    },
  ],
  title: (hits) =>
    hits.some((h) => h.signal.key === 'slow_reads')
      ? 'Reads from disk are slow'
      : 'Queries wait for higher-priority ones',
  explain:
    "Slow reads mean the disks cannot keep up (the server then gives the query fewer threads, so it runs longer); preempted queries wait while queries of a higher 'priority' run.",
  recommendation:
    "Find the queries that read most at the time (query_log) and the disks' load; spread heavy reports over time, or give the disks more throughput.",
  how_to_investigate: [
    "SELECT name, value FROM system.settings WHERE name LIKE 'read_backoff_%';",
    'SELECT query_id, user, elapsed, read_bytes, left(query, 200) AS query FROM system.processes ORDER BY read_bytes DESC LIMIT 10;',
    "SELECT event_time, user, query_duration_ms, read_bytes, ProfileEvents['SlowRead'] AS slow_reads, left(query, 200) AS query FROM system.query_log WHERE type = 'QueryFinish' AND ProfileEvents['SlowRead'] > 0 AND event_time > now() - INTERVAL 10 MINUTE ORDER BY slow_reads DESC LIMIT 10;",
  ],
  how_to_fix: [
    '-- host: iostat -x 5   -- disk utilisation; lower concurrent heavy queries (max_concurrent_queries_for_user) or add disk throughput',
  ],
  errors: [],
})
