// One definition of a table's sizes for everything that quotes one (the dashboard's Tables and table pages,
// the API's fields, the doctor's findings), all from the tables collector's one sample: the heap's main
// fork (pg_relation_size, API heap_bytes), every index (pg_indexes_size, index_size_bytes), the TOAST table
// with its index (toast_bytes), and the total, pg_total_relation_size (pg_table_size plus pg_indexes_size,
// total_bytes). The total also counts the heap's free-space and visibility maps, so it is a little more than
// the other three added up. A figure quoted anywhere is named by its label, never as a bare "size".
export const TABLE_SIZE_LABELS = {
  heap: 'Heap',
  indexes: 'Indexes',
  toast: 'TOAST',
  total: 'Total',
} as const

export type TableSizePart = keyof typeof TABLE_SIZE_LABELS

export const TABLE_SIZE_HINTS: Record<TableSizePart, string> = {
  heap: "pg_relation_size: the heap's main fork, the table's rows outside TOAST, at the latest sample",
  indexes: 'pg_indexes_size: every index of the table, at the same sample',
  toast:
    'The TOAST table with its index (pg_total_relation_size of reltoastrelid): values stored out of line, at the same sample',
  total:
    "pg_total_relation_size: heap, TOAST, indexes and the heap's free-space and visibility maps, at the same sample",
}

/** The figures a table row carries (null: not measured, or from an agent that does not send it). */
export interface TableSizes {
  heap_bytes?: number | null
  index_size_bytes?: number | null
  /** pg_table_size: heap, its maps and TOAST; with index_size_bytes, the total. */
  table_size_bytes?: number | null
  toast_bytes?: number | null
}

/** Total (pg_total_relation_size): pg_table_size plus pg_indexes_size of the same sample; null unless both are known. */
export function tableTotalBytes(t: TableSizes): number | null {
  return t.table_size_bytes == null || t.index_size_bytes == null ? null : t.table_size_bytes + t.index_size_bytes
}
