// mutations: ALTER ... UPDATE/DELETE still to finish, and those created within the last day
// (system.mutations). A mutation is stuck when it is not done and either its latest attempt failed or
// it is older than STUCK_AFTER_SECONDS; the age is taken on the server's clock.
import type { MutationEntry } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { MAX_TEXT, select } from './common.ts'

/** A mutation running longer than this is reported as stuck. */
export const STUCK_AFTER_SECONDS = 3600
const MAX_MUTATIONS = 10_000

interface Row {
  database: string
  table: string
  mutation_id: string
  command: string
  create_time: number | string
  is_done: number | string
  parts_to_do: number | string
  latest_fail_reason: string
  latest_fail_time: number | string | null
  stuck: number | string
}

export const mutations = registerCollector<ClickHouseContext>({
  name: 'mutations',
  engine: 'clickhouse',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await select<Row>(
      ctx,
      `SELECT database, table, mutation_id, substringUTF8(command, 1, {max_text:UInt32}) AS command,
              toUnixTimestamp(create_time) * 1000 AS create_time, is_done, parts_to_do, latest_fail_reason,
              if(toUnixTimestamp(latest_fail_time) = 0, NULL, toUnixTimestamp(latest_fail_time) * 1000) AS latest_fail_time,
              NOT is_done AND (latest_fail_reason != '' OR create_time < now() - toIntervalSecond({stuck_after:UInt32})) AS stuck
       FROM system.mutations
       WHERE NOT is_done OR create_time > now() - INTERVAL 1 DAY
       ORDER BY create_time DESC
       LIMIT {limit:UInt32}`,
      { max_text: MAX_TEXT, stuck_after: STUCK_AFTER_SECONDS, limit: MAX_MUTATIONS },
    )
    const out: MutationEntry[] = rows.map((r) => ({
      database: r.database,
      table: r.table,
      mutation_id: r.mutation_id,
      command: r.command,
      create_time: num(r.create_time) ?? 0,
      is_done: num(r.is_done) === 1,
      parts_to_do: Math.max(0, num(r.parts_to_do) ?? 0),
      latest_fail_reason: r.latest_fail_reason,
      latest_fail_time: num(r.latest_fail_time),
      stuck: num(r.stuck) === 1,
    }))
    return { mutations: out }
  },
})
