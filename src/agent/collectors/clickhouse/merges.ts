// merges: the merges (and mutation rewrites) running now (system.merges): progress, elapsed time,
// how many parts they merge and how many compressed bytes.
import type { MergeEntry } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { select } from './common.ts'

const MAX_MERGES = 10_000

interface Row {
  database: string
  table: string
  elapsed: number | string
  progress: number | string
  num_parts: number | string
  total_size_bytes_compressed: number | string
  result_part_name: string
  is_mutation: number | string
}

export const merges = registerCollector<ClickHouseContext>({
  name: 'merges',
  engine: 'clickhouse',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await select<Row>(
      ctx,
      `SELECT database, table, elapsed, progress, num_parts, total_size_bytes_compressed, result_part_name, is_mutation
       FROM system.merges
       ORDER BY elapsed DESC
       LIMIT {limit:UInt32}`,
      { limit: MAX_MERGES },
    )
    const out: MergeEntry[] = rows.map((r) => ({
      database: r.database,
      table: r.table,
      elapsed_s: Math.max(0, num(r.elapsed) ?? 0),
      progress: Math.min(1, Math.max(0, num(r.progress) ?? 0)),
      num_parts: num(r.num_parts) ?? 0,
      total_size_bytes_compressed: num(r.total_size_bytes_compressed) ?? 0,
      result_part_name: r.result_part_name,
      is_mutation: num(r.is_mutation) === 1,
    }))
    return { merges: out }
  },
})
