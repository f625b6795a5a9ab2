// parts: active parts per table and partition (system.parts), with the MergeTree thresholds that
// delay and refuse inserts: the server defaults (system.merge_tree_settings), replaced by a table's own
// SETTINGS where it has them (read from system.tables engine_full, which lists a table's SETTINGS
// clause, ALTER ... MODIFY SETTING included). Too many parts in one partition is the ClickHouse
// failure this watches.
import type { PartStat } from '../../../shared/wire.ts'
import { num } from '../delta.ts'
import type { ClickHouseContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { select, selectOptional } from './common.ts'

const MAX_PARTITIONS = 50_000
const THRESHOLDS = ['parts_to_delay_insert', 'parts_to_throw_insert'] as const
/** `parts_to_delay_insert = 20` in engine_full (RE2; \b keeps `inactive_parts_to_delay_insert` out). */
const settingPattern = (name: string) => `\\b${name}\\s*=\\s*(\\d+)`

interface Row {
  database: string
  table: string
  partition_id: string
  active_parts: number | string
  rows: number | string
  bytes_on_disk: number | string
}

export const parts = registerCollector<ClickHouseContext>({
  name: 'parts',
  engine: 'clickhouse',
  defaultEnabled: true,
  async collect(ctx) {
    const settings = await selectOptional<{ name: string; value: string }>(
      ctx,
      'SELECT name, value FROM system.merge_tree_settings WHERE name IN {names:Array(String)}',
      { names: THRESHOLDS },
    )
    const threshold = (name: (typeof THRESHOLDS)[number]) => num(settings?.find((s) => s.name === name)?.value)
    const delay = threshold('parts_to_delay_insert')
    const refuse = threshold('parts_to_throw_insert')
    const overrides = await select<{ database: string; table: string; delay: string; refuse: string }>(
      ctx,
      `SELECT database, name AS table, extract(engine_full, {delay:String}) AS delay, extract(engine_full, {refuse:String}) AS refuse
       FROM system.tables
       WHERE engine LIKE '%MergeTree' AND (match(engine_full, {delay:String}) OR match(engine_full, {refuse:String}))
       LIMIT {limit:UInt32}`,
      {
        delay: settingPattern('parts_to_delay_insert'),
        refuse: settingPattern('parts_to_throw_insert'),
        limit: MAX_PARTITIONS,
      },
    )
    const own = new Map(overrides.map((o) => [`${o.database}\0${o.table}`, o]))
    const rows = await select<Row>(
      ctx,
      `SELECT database, table, partition_id, count() AS active_parts, sum(rows) AS rows, sum(bytes_on_disk) AS bytes_on_disk
       FROM system.parts
       WHERE active
       GROUP BY database, table, partition_id
       ORDER BY active_parts DESC, database, table, partition_id
       LIMIT {limit:UInt32}`,
      { limit: MAX_PARTITIONS },
    )
    const out: PartStat[] = rows.map((r) => {
      const table = own.get(`${r.database}\0${r.table}`)
      return {
        database: r.database,
        table: r.table,
        partition_id: r.partition_id,
        active_parts: num(r.active_parts) ?? 0,
        rows: num(r.rows) ?? 0,
        bytes_on_disk: num(r.bytes_on_disk) ?? 0,
        parts_to_delay_insert: (table?.delay ? num(table.delay) : null) ?? delay,
        parts_to_throw_insert: (table?.refuse ? num(table.refuse) : null) ?? refuse,
      }
    })
    return { parts: out }
  },
})
