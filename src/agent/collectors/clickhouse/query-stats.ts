// query_stats: finished and failed initial queries from system.query_log since the previous cycle,
// grouped by normalized_query_hash. The first cycle only takes a baseline (the server's now), as on
// PostgreSQL; after that the watermark is the newest event_time_microseconds seen. `rows` is the rows
// a query returned (result_rows), or wrote for an INSERT (written_rows), like PostgreSQL's rows.
// The agent's own queries (log_comment) are left out. A server without system.query_log is one clear
// warning, then nothing each cycle until it appears; whether it is there is looked up in system.tables
// (system-tables.ts), never probed, since a query on a missing table is an error system.errors counts. The bound on event_time (whole seconds, implied by
// the one on event_time_microseconds) is what query_log's primary key (event_date, event_time) can use:
// without it every cycle reads all of the day's rows (bench/RESULTS.md, ClickHouse agent: 111 ms of
// engine time per cycle instead of 17 ms with 10 million rows logged earlier in the day).
import type { QueryStatDelta } from '../../../shared/wire.ts'
import { AGENT_LOG_COMMENT } from '../../clickhouse-connection.ts'
import { num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { isUnknownTable, MAX_TEXT, select } from './common.ts'
import { systemTables } from './system-tables.ts'

const DISABLED = 'query_log is disabled: enable <query_log> in the server config'
const MAX_STATEMENTS = 20_000

interface State {
  /** Microseconds since the epoch (as a string: 64-bit) of the newest row counted. */
  sinceUs?: string
  unavailable?: boolean
}

interface Row {
  query_hash: string
  query_text: string
  calls: string | number
  total_time_ms: string | number
  rows: string | number
  read_bytes: string | number
  memory_bytes: string | number
  p99_ms: string | number
  errors: string | number
  last_us: string | number
}

const STATS_SQL = `
  SELECT toString(normalized_query_hash) AS query_hash,
         substringUTF8(any(query), 1, {max_text:UInt32}) AS query_text,
         count() AS calls,
         sum(query_duration_ms) AS total_time_ms,
         sum(if(query_kind = 'Insert', written_rows, result_rows)) AS rows,
         sum(read_bytes) AS read_bytes,
         sum(memory_usage) AS memory_bytes,
         quantileExact(0.99)(query_duration_ms) AS p99_ms,
         countIf(exception_code != 0) AS errors,
         toString(toUnixTimestamp64Micro(max(event_time_microseconds))) AS last_us
  FROM system.query_log
  WHERE event_date >= toDate(fromUnixTimestamp64Micro({since:Int64}))
    AND event_time >= toDateTime(intDiv({since:Int64}, 1000000))
    AND event_time_microseconds > fromUnixTimestamp64Micro({since:Int64})
    AND type IN ('QueryFinish', 'ExceptionWhileProcessing')
    AND is_initial_query = 1
    AND log_comment != {own:String}
  GROUP BY normalized_query_hash
  ORDER BY total_time_ms DESC
  LIMIT {limit:UInt32}`

class MissingQueryLog extends Error {}

export const queryStats = registerCollector<ClickHouseContext>({
  name: 'query_stats',
  engine: 'clickhouse',
  defaultEnabled: true,
  // For --check: ClickHouse creates each log table at its first flush, so a missing one is either not
  // configured or has had nothing to write yet.
  checkNotes: async ({ systemTables }) =>
    systemTables.has('query_log')
      ? []
      : ['system.query_log is missing: query_stats stays empty until <query_log> is enabled'],

  async collect(ctx) {
    // A copy: the committed state changes only when this run finishes within its deadline.
    const state: State = { ...(ctx.state.get('query_stats') as State | undefined) }
    ctx.state.set('query_stats', state)
    try {
      if (!(await systemTables(ctx)).has('query_log')) throw new MissingQueryLog()
      if (state.sinceUs === undefined) {
        const [now] = await select<{ us: string }>(ctx, 'SELECT toString(toUnixTimestamp64Micro(now64(6))) AS us')
        state.sinceUs = now!.us
        if (state.unavailable)
          ctx.log.info('query_log is available now', { database: ctx.name, collector: 'query_stats' })
        state.unavailable = false
        ctx.notes.delete('query_stats')
        return {}
      }
      const rows = await select<Row>(ctx, STATS_SQL, {
        since: state.sinceUs,
        max_text: MAX_TEXT,
        own: AGENT_LOG_COMMENT,
        limit: MAX_STATEMENTS,
      })
      const out: QueryStatDelta[] = []
      let newest = BigInt(state.sinceUs)
      for (const r of rows) {
        const last = BigInt(r.last_us)
        if (last > newest) newest = last
        out.push({
          query_hash: r.query_hash,
          query_text: r.query_text,
          calls: num(r.calls) ?? 0,
          total_time_ms: num(r.total_time_ms) ?? 0,
          rows: num(r.rows) ?? 0,
          shared_blks_hit: 0,
          shared_blks_read: 0,
          read_bytes: num(r.read_bytes) ?? 0,
          memory_bytes: num(r.memory_bytes) ?? 0,
          p99_ms: num(r.p99_ms) ?? 0,
          errors: num(r.errors) ?? 0,
        })
      }
      state.sinceUs = String(newest)
      return { query_stats: out }
    } catch (e) {
      // Missing at the lookup, or dropped between the lookup and the query.
      if (!(e instanceof MissingQueryLog) && !isUnknownTable(e)) throw e
      if (!state.unavailable) ctx.log.warn(DISABLED, { database: ctx.name, collector: 'query_stats' })
      state.unavailable = true
      ctx.notes.set('query_stats', DISABLED)
      state.sinceUs = undefined
      return {}
    }
  },
})
