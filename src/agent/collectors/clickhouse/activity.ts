// activity: the queries running now (system.processes), with their memory, bytes and rows so far.
// The agent's own queries are left out by their log_comment (set on every agent query by the
// connection), so a query that merely mentions system.processes is still listed.
import type { ActiveQuery } from '../../../shared/wire.ts'
import { AGENT_LOG_COMMENT } from '../../clickhouse-connection.ts'
import { num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { MAX_TEXT, select } from './common.ts'

const MAX_QUERIES = 10_000

interface Row {
  query_id: string
  query_text: string
  elapsed: number | string
  user: string
  database: string
  client_addr: string
  application_name: string
  memory_usage: number | string
  read_bytes: number | string
  written_bytes: number | string
  read_rows: number | string
}

const nonNegative = (value: unknown) => Math.max(0, num(value) ?? 0)

export const activity = registerCollector<ClickHouseContext>({
  name: 'activity',
  engine: 'clickhouse',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await select<Row>(
      ctx,
      `SELECT query_id, substringUTF8(query, 1, {max_text:UInt32}) AS query_text, elapsed, user,
              current_database AS database, toString(address) AS client_addr,
              if(client_name != '', client_name, http_user_agent) AS application_name,
              memory_usage, read_bytes, written_bytes, read_rows
       FROM system.processes
       WHERE Settings['log_comment'] != {own:String}
       ORDER BY elapsed DESC
       LIMIT {limit:UInt32}`,
      { max_text: MAX_TEXT, own: AGENT_LOG_COMMENT, limit: MAX_QUERIES },
    )
    const out: ActiveQuery[] = rows.map((r) => ({
      pid: r.query_id,
      query_text: r.query_text,
      state: 'active',
      wait_event_type: null,
      wait_event: null,
      duration_ms: Math.round(nonNegative(r.elapsed) * 1000 * 1000) / 1000,
      blocking_pids: [],
      user: r.user,
      database: r.database || null,
      client_addr: r.client_addr || null,
      application_name: r.application_name || null,
      // memory_usage is signed: memory freed by a query can exceed what it allocated in this thread group.
      memory_usage: nonNegative(r.memory_usage),
      read_bytes: nonNegative(r.read_bytes),
      written_bytes: nonNegative(r.written_bytes),
      read_rows: nonNegative(r.read_rows),
    }))
    return { activity: out }
  },
})
