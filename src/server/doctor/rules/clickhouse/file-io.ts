// Reads and writes of files that failed (ReadBufferFromFileDescriptorReadFailed,
// WriteBufferFromFileDescriptorWriteFailed; sockets are not counted): a failing disk, a full or
// read-only filesystem, a file removed underneath. Altinity alerts on any in a minute; dbm warns from
// one in ten minutes and calls ten critical.
import { signalRule } from './signals.ts'

export const fileIo = signalRule({
  id: 'ch_file_io_errors',
  summary: 'Reads and writes of files that failed: a failing disk, a full or read-only filesystem.',
  collectors: ['server_metrics', 'log_events'],
  category: 'reliability',
  thresholds: { window_s: 600, read_warning: 1, read_critical: 10, write_warning: 1, write_critical: 10 },
  signals: [
    {
      key: 'file_write_failures',
      kind: 'counter',
      name: 'WriteBufferFromFileDescriptorWriteFailed',
      what: 'failed writes to files',
      warning: 'write_warning',
      critical: 'write_critical',
    },
    {
      key: 'file_read_failures',
      kind: 'counter',
      name: 'ReadBufferFromFileDescriptorReadFailed',
      what: 'failed reads from files',
      warning: 'read_warning',
      critical: 'read_critical',
    },
  ],
  title: () => 'Reads or writes of files fail',
  explain:
    'ClickHouse could not read or write files of its data, logs or temporary files: queries and merges that needed them failed, and a part that cannot be read is reported broken.',
  recommendation:
    'Check the disks (dmesg, SMART), free space and inodes, and whether a filesystem went read-only; the errors below name the file.',
  how_to_investigate: [
    'SELECT name, path, free_space, total_space, unreserved_space FROM system.disks;',
    "SELECT name, value, last_error_time, last_error_message FROM system.errors WHERE name IN ('CANNOT_READ_FROM_FILE_DESCRIPTOR', 'CANNOT_WRITE_TO_FILE_DESCRIPTOR', 'CANNOT_OPEN_FILE', 'NOT_ENOUGH_SPACE', 'CANNOT_FSYNC') ORDER BY last_error_time DESC;",
    "SELECT database, table, name, reason FROM system.detached_parts WHERE reason = 'broken';",
  ],
  how_to_fix: [
    '-- on the host: dmesg -T | grep -i -e error -e "I/O"; df -h; df -i   -- a disk or filesystem fault, not a database setting',
  ],
  errors: [
    'CANNOT_READ_FROM_FILE_DESCRIPTOR',
    'CANNOT_WRITE_TO_FILE_DESCRIPTOR',
    'CANNOT_OPEN_FILE',
    'NOT_ENOUGH_SPACE',
    'CANNOT_FSYNC',
    'CANNOT_READ_ALL_DATA',
  ],
})
