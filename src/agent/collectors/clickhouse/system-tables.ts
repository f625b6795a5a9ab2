// The optional system log tables this server has now (query_log, text_log, crash_log), looked up in
// system.tables once per cycle for every collector that reads one. Querying a missing table is itself an
// UNKNOWN_TABLE error, which system.errors counts and log_events would report as the server's own: so
// the agent asks system.tables first and never probes. ClickHouse creates a log table at its first flush
// (crash_log at the first crash), so a missing one may also be one that has had nothing to write yet.
import type { ClickHouseContext } from '../types.ts'
import { select } from './common.ts'

export const OPTIONAL_SYSTEM_TABLES = ['query_log', 'text_log', 'crash_log'] as const
export type OptionalSystemTable = (typeof OPTIONAL_SYSTEM_TABLES)[number]

const SQL = "SELECT name FROM system.tables WHERE database = 'system' AND name IN {names:Array(String)}"

/** The optional system tables present now (shared by the collectors of one cycle through a `cache:` state entry). */
export function systemTables(
  ctx: Pick<ClickHouseContext, 'client' | 'now' | 'state'>,
): Promise<Set<OptionalSystemTable>> {
  const cached = ctx.state.get('cache:system_tables') as
    | { now: number; tables: Promise<Set<OptionalSystemTable>> }
    | undefined
  if (cached && cached.now === ctx.now) return cached.tables
  const tables = select<{ name: OptionalSystemTable }>(ctx as ClickHouseContext, SQL, {
    names: OPTIONAL_SYSTEM_TABLES,
  }).then((rows) => new Set(rows.map((r) => r.name)))
  ctx.state.set('cache:system_tables', { now: ctx.now, tables })
  return tables
}
