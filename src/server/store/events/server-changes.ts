// Reads of what ingest already keeps about the database server's own changes (events/events.ts derives
// them): the restarts, version changes and setting changes of the events timeline in a window, and the
// server's start as the event baseline holds it (PostgreSQL's pg_postmaster_start_time(), ClickHouse's
// start computed from its uptime). The doctor's restart, version and setting rules read them; nothing
// here writes. Values came from the monitored database: they are returned as text, never interpreted.
import type { SqlDriver } from '../driver.ts'
import type { Window } from '../window.ts'

/** The event kinds these reads return (events/events.ts writes them at ingest). */
export const SERVER_CHANGE_KINDS = ['restart', 'version_change', 'setting_change'] as const
export type ServerChangeKind = (typeof SERVER_CHANGE_KINDS)[number]

/** One stored event of a server change, as ingest wrote it. */
export interface ServerChange {
  ts: number
  kind: ServerChangeKind
  /** setting_change: the setting's name ('' for a batch that changed too many to list one by one); version_change: the new version. */
  object: string
  title: string
  /** restart: the start and the previous one; version_change and setting_change: `old → new` as events/events.ts shows values. */
  detail: string | null
}

export interface ServerChangeReads {
  /** The server's change events of `kinds` in the window, newest first (ts, then object, descending), at most `limit`. */
  serverChanges(
    databaseId: string,
    kinds: readonly ServerChangeKind[],
    window: Window,
    limit: number,
  ): Promise<ServerChange[]>
  /** When the database server last started (epoch ms), as the event baseline keeps it; null before any batch said. */
  serverStartedAt(databaseId: string): Promise<number | null>
}

export function serverChangeReads(driver: SqlDriver): ServerChangeReads {
  return {
    async serverChanges(databaseId, kinds, window, limit) {
      if (kinds.length === 0) return []
      const placeholders = kinds.map((_, i) => `$${i + 5}`).join(', ')
      const rows = await driver.all(
        `SELECT ts, kind, object, title, detail FROM events
         WHERE database_id = $1 AND ts >= $2 AND ts < $3 AND kind IN (${placeholders})
         ORDER BY ts DESC, object DESC LIMIT $4`,
        [databaseId, window.since, window.until, limit, ...kinds],
      )
      return rows.map((r) => ({
        ts: Number(r.ts),
        kind: String(r.kind) as ServerChangeKind,
        object: r.object === null || r.object === undefined ? '' : String(r.object),
        title: String(r.title),
        detail: r.detail === null || r.detail === undefined ? null : String(r.detail),
      }))
    },

    async serverStartedAt(databaseId) {
      const row = await driver.get('SELECT started_at FROM event_baselines WHERE database_id = $1', [databaseId])
      return row?.started_at === null || row?.started_at === undefined ? null : Number(row.started_at)
    },
  }
}
