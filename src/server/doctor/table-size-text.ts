// A table's sizes as a finding quotes them: each figure by its label (src/shared/table-size.ts, the
// dashboard's definitions), `Heap 256.1 MB, Total 261.4 MB`, so that the number in a finding is found on
// the Tables page under the same name. Heap is what a sequential scan reads and VACUUM walks; Total what
// the table takes on disk.
import { TABLE_SIZE_LABELS, type TableSizes, tableTotalBytes } from '../../shared/table-size.ts'
import { bytes } from './types.ts'

/** `Heap 256.1 MB, Total 261.4 MB` (the figures known; '' when none is). */
export function tableSizeText(t: TableSizes): string {
  const total = tableTotalBytes(t)
  return [
    t.heap_bytes == null ? null : `${TABLE_SIZE_LABELS.heap} ${bytes(t.heap_bytes)}`,
    total === null ? null : `${TABLE_SIZE_LABELS.total} ${bytes(total)}`,
  ]
    .filter(Boolean)
    .join(', ')
}

/** The sizes as a finding's metrics: the figures quoted, by their API field names. */
export function tableSizeMetrics(t: TableSizes): { heap_bytes: number | null; total_bytes: number | null } {
  return { heap_bytes: t.heap_bytes ?? null, total_bytes: tableTotalBytes(t) }
}
