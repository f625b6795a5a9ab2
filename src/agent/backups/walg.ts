// WAL-G's `backup-list --json --detail` into BackupEntry rows: an array of backups, each with
// backup_name (base_<WAL file>, or base_<WAL file>_D_<base's WAL file> for a delta backup), time (when
// it was stored), start_time and finish_time (RFC 3339), uncompressed_size and compressed_size, and
// is_permanent. WAL-G lists only backups whose sentinel was written, i.e. finished ones: every entry is
// ok. Without --detail the times and sizes are missing and stay null. `null` (no backup) is an empty list.
import type { BackupEntry } from '../../shared/wire.ts'
import { type ParsedBackups, bytes, fromRfc3339, isObject, newestFirst, parseJson, text } from './parse-common.ts'

const COMMAND = '`wal-g backup-list --json --detail`'

export function parseWalgBackupList(output: string): ParsedBackups {
  const parsed = parseJson(output, 'wal-g', COMMAND)
  if ('error' in parsed) return { backups: [], error: parsed.error }
  const list = parsed.value
  if (list === null) return { backups: [], error: null }
  if (!Array.isArray(list))
    return { backups: [], error: `wal-g printed JSON that is not a list of backups: expected the output of ${COMMAND}` }
  const backups: BackupEntry[] = []
  for (const b of list) {
    if (!isObject(b)) continue
    const label = text(b.backup_name, 200)
    if (label === null) continue
    backups.push({
      label,
      type: label.includes('_D_') ? 'delta' : 'full',
      started_at: fromRfc3339(b.start_time),
      finished_at: fromRfc3339(b.finish_time) ?? fromRfc3339(b.time),
      size_bytes: bytes(b.uncompressed_size),
      stored_bytes: bytes(b.compressed_size),
      stanza: text(b.storage_name, 200),
      ok: true,
    })
  }
  return { backups: newestFirst(backups), error: null }
}
