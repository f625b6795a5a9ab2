// The server log at ingest (called by planBatch in the batch's transaction): each entry sent whole with
// an id of its own, and the section's counts per minute, kind and severity added into minute and hour
// buckets, the entries counted but not sent whole under the empty kind (DROPPED_KEY).
import type { IngestBatch } from '../../../shared/wire.ts'
import { int64Counter, saturatingAdd } from '../sums.ts'
import type { Writes } from '../ingest/batch.ts'
import { HOUR_MS, MINUTE_MS, floorTo } from '../window.ts'
import { DROPPED_KEY, type LogEventWrites } from './types.ts'

const ENTRY_COLUMNS = [
  'database_id',
  'ts',
  'id',
  'kind',
  'severity',
  'sqlstate',
  'message',
  'fingerprint',
  'pid',
  'user_name',
  'database_name',
  'application',
  'client',
  'detail',
  'statement',
  'query_id',
  'fields',
  'count',
] as const

const COUNT_COLUMNS = ['database_id', 'resolution', 'bucket', 'kind', 'severity', 'count'] as const

export function applyLogEvents(writes: Writes, databaseId: string, batch: IngestBatch): void {
  const section = batch.log_events
  if (!section) return
  const entries = section.entries.map((e) => [
    databaseId,
    e.ts,
    Bun.randomUUIDv7(),
    e.kind,
    e.severity,
    e.sqlstate,
    e.message,
    e.fingerprint,
    e.pid,
    e.user,
    e.database,
    e.application,
    e.client,
    e.detail,
    e.statement,
    e.query_id,
    JSON.stringify(e.fields),
    e.count ?? 1,
  ])
  writes.upsert('log_entries', ENTRY_COLUMNS, entries, { key: ['database_id', 'ts', 'id'], update: {} })
  // One row per (resolution, bucket, kind, severity): the batch's counts added up first (an upsert may
  // not touch one row twice), both resolutions at once.
  const sums = new Map<string, unknown[]>()
  const add = (at: number, kind: string, severity: string, n: number) => {
    if (!(n > 0)) return
    for (const resolution of [MINUTE_MS, HOUR_MS]) {
      const bucket = floorTo(at, resolution)
      const key = JSON.stringify([resolution, bucket, kind, severity])
      const row = sums.get(key)
      if (row) row[5] = (row[5] as number) + n
      else sums.set(key, [databaseId, resolution / 1000, bucket, kind, severity, n])
    }
  }
  for (const c of section.counts) add(c.minute, c.kind, c.severity, Math.round(c.count))
  add(batch.collected_at, DROPPED_KEY, DROPPED_KEY, Math.round(section.dropped))
  const rows = [...sums.values()]
  for (const row of rows) row[5] = int64Counter(row[5] as number)
  writes.upsert('log_counts', COUNT_COLUMNS, rows, {
    key: ['database_id', 'resolution', 'bucket', 'kind', 'severity'],
    update: { count: saturatingAdd('log_counts.count', 'excluded.count') },
  })
}

/** The ingest side: needs no driver (its statements join the batch's writes). */
export const logEventWrites: LogEventWrites = { apply: applyLogEvents }
