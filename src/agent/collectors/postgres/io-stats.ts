// io_stats: pg_stat_io (PostgreSQL 16+) as deltas since the previous sample, one row per backend
// type, object and context; rows where nothing happened are left out. Bytes come from the
// *_bytes columns on PostgreSQL 18 and from operations × op_bytes before. The first sample only
// sets the baseline.
import { IO_KEYS } from '../../../shared/metrics.ts'
import type { IoStatRow } from '../../../shared/wire.ts'
import { num, zerosOf } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { type Counters, deltaSince, forVersion, resetStamp, type Sample } from './common.ts'
import { PREPARED } from '../../own-statements.ts'

const KEYS = IO_KEYS

const COMMON_COLUMNS = `
  backend_type, object, context, reads, writes, extends, hits, evictions, reuses, fsyncs, writebacks,
  read_time AS read_time_ms, write_time AS write_time_ms, extend_time AS extend_time_ms,
  fsync_time AS fsync_time_ms, writeback_time AS writeback_time_ms, stats_reset::text AS stats_reset`

const SQL = {
  16: `
    SELECT ${COMMON_COLUMNS},
           reads * op_bytes AS read_bytes, writes * op_bytes AS write_bytes, extends * op_bytes AS extend_bytes
    FROM pg_stat_io`,
  18: `
    SELECT ${COMMON_COLUMNS}, read_bytes, write_bytes, extend_bytes
    FROM pg_stat_io`,
}

type IoKey = (typeof KEYS)[number]
type IoSample = Sample<IoKey>

type Row = Record<(typeof KEYS)[number], string | number | null> & {
  backend_type: string
  object: string
  context: string
  stats_reset: string | null
}

export const ioStats = registerCollector<PostgresContext>({
  name: 'io_stats',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<Row[]>(forVersion(SQL, ctx.major), [], PREPARED)
    const previous = ctx.state.get('io_stats') as Map<string, IoSample> | undefined
    const current = new Map<string, IoSample>()
    const out: IoStatRow[] = []
    for (const row of rows) {
      const values = Object.fromEntries(KEYS.map((k) => [k, num(row[k])])) as Counters<IoKey>
      const sample: IoSample = { resetAt: resetStamp(row.stats_reset), values }
      const key = `${row.backend_type}/${row.object}/${row.context}`
      current.set(key, sample)
      if (!previous) continue
      // A row new since the previous sample (none on a given version so far) counts from zero.
      const delta = deltaSince(previous.get(key) ?? { resetAt: sample.resetAt, values: zerosOf(values) }, sample)
      if (delta && Object.values(delta).some((v) => v !== null && v !== 0)) {
        out.push({ backend_type: row.backend_type, object: row.object, context: row.context, counters: delta })
      }
    }
    ctx.state.set('io_stats', current)
    return previous ? { io_stats: out } : {}
  },
})
