// Buffer tables that cannot flush into their destination (StorageBufferErrorOnFlush): the rows stay in
// memory and the flush is retried every few seconds, and they are lost if the server stops. Altinity
// alerts on any in a minute; dbm warns from one in ten minutes and calls it critical from 20 (a flush
// failing on every retry). The error's message names the destination table.
import { signalRule } from './signals.ts'

export const bufferFlush = signalRule({
  id: 'ch_buffer_flush_errors',
  summary:
    'Buffer tables that cannot flush into their destination: the rows stay in memory and are lost if the server stops.',
  collectors: ['server_metrics', 'log_events'],
  category: 'reliability',
  thresholds: { window_s: 600, warning: 1, critical: 20 },
  signals: [
    {
      key: 'buffer_flush_errors',
      kind: 'counter',
      name: 'StorageBufferErrorOnFlush',
      what: 'failed flushes of Buffer tables',
      warning: 'warning',
      critical: 'critical',
    },
  ],
  title: () => 'Buffer tables fail to flush',
  explain:
    'A Buffer table keeps its rows in memory until it flushes them into its destination; a flush that fails (the destination refuses the rows: a constraint, a changed structure, too many parts, a full disk) is retried and the rows stay in memory, lost if the server stops.',
  recommendation:
    'Find the Buffer table and its destination (the error names the destination; system.tables lists the Buffer tables), fix what makes the destination refuse the rows, and watch StorageBufferRows fall back.',
  how_to_investigate: [
    "SELECT database, name, engine_full FROM system.tables WHERE engine = 'Buffer';",
    "SELECT metric, value FROM system.metrics WHERE metric IN ('StorageBufferRows', 'StorageBufferBytes');",
    'SELECT name, value, last_error_time, last_error_message FROM system.errors WHERE last_error_time > now() - INTERVAL 10 MINUTE ORDER BY last_error_time DESC LIMIT 10;',
  ],
  how_to_fix: [
    'OPTIMIZE TABLE <database>.<buffer table>;   -- flushes the buffer now, once the destination accepts the rows (the error says why it does not)',
  ],
  errors: [
    'VIOLATED_CONSTRAINT',
    'TOO_MANY_PARTS',
    'NOT_ENOUGH_SPACE',
    'NO_SUCH_COLUMN_IN_TABLE',
    'TYPE_MISMATCH',
    'UNKNOWN_TABLE',
    'MEMORY_LIMIT_EXCEEDED',
    'CANNOT_WRITE_TO_FILE_DESCRIPTOR',
  ],
})
