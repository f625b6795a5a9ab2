// One definition of a table's size for every page that shows one (Tables, the table's page,
// Maintenance): the tables collector's sample of pg_table_size (heap with its TOAST and maps) and
// pg_indexes_size, their sum being pg_total_relation_size at the same sample. Labels and their hints.
export const SIZE_LABELS = {
  table: 'Table',
  indexes: 'Indexes',
  total: 'Total',
} as const

export const SIZE_HINTS = {
  table: 'pg_table_size: the heap with its TOAST and free-space and visibility maps, at the latest sample',
  indexes: 'pg_indexes_size: every index of the table, at the same sample',
  total: 'pg_total_relation_size: table and indexes, at the same sample',
} as const

/** Table plus indexes (pg_total_relation_size); unknown when either is. */
export const totalSize = (t: { table_size_bytes: number | null; index_size_bytes: number | null }) =>
  t.table_size_bytes === null || t.index_size_bytes === null ? null : t.table_size_bytes + t.index_size_bytes
