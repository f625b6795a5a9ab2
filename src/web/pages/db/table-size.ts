// One definition of a table's size for every page that shows one (Tables, the table's page and its
// chart): the tables collector's one sample of the heap's main fork (pg_relation_size), the TOAST table
// with its index, pg_indexes_size, and the total, pg_total_relation_size (pg_table_size plus
// pg_indexes_size, as the API's total_bytes). The total also counts the heap's free-space and
// visibility maps, so it is a little more than the other three added up. Labels and their hints.
export const SIZE_LABELS = {
  heap: 'Heap',
  indexes: 'Indexes',
  toast: 'TOAST',
  total: 'Total',
} as const

export const SIZE_HINTS = {
  heap: "pg_relation_size: the heap's main fork, the table's rows outside TOAST, at the latest sample",
  indexes: 'pg_indexes_size: every index of the table, at the same sample',
  toast:
    'The TOAST table with its index (pg_total_relation_size of reltoastrelid): values stored out of line, at the same sample',
  total:
    "pg_total_relation_size: heap, TOAST, indexes and the heap's free-space and visibility maps, at the same sample",
} as const

/** The four figures in the order every page shows them, with the API field each reads. */
export const SIZE_PARTS = [
  { part: 'heap', field: 'heap_bytes', sort: 'heap_size' },
  { part: 'indexes', field: 'index_size_bytes', sort: 'index_size' },
  { part: 'toast', field: 'toast_bytes', sort: 'toast_size' },
  { part: 'total', field: 'total_bytes', sort: 'total_size' },
] as const

export type SizedTable = Record<(typeof SIZE_PARTS)[number]['field'], number | null>
