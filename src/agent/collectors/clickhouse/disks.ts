// system.disks, read once per cycle for the collectors that need it (server_metrics' free and total
// bytes per disk, host's filesystems): the first caller's query is shared through a `cache:` state
// entry keyed by the cycle's start, so the table is never read twice in a cycle. Undefined when the
// server has no system.disks.
import type { ClickHouseContext } from '../types.ts'
import { selectOptional } from './common.ts'

export interface DiskRow {
  name: string
  path: string
  free_space: number | string
  total_space: number | string
}

const DISKS_SQL = 'SELECT name, path, free_space, total_space FROM system.disks ORDER BY name'

export function readDisks(ctx: ClickHouseContext): Promise<DiskRow[] | undefined> {
  const cached = ctx.state.get('cache:disks') as { now: number; rows: Promise<DiskRow[] | undefined> } | undefined
  if (cached && cached.now === ctx.now) return cached.rows
  const rows = selectOptional<DiskRow>(ctx, DISKS_SQL)
  ctx.state.set('cache:disks', { now: ctx.now, rows })
  return rows
}
