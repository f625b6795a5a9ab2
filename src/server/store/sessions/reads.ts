// Reads of sessions and locks: the latest snapshot (kept by snapshots.ts), the kept snapshot at a time,
// the snapshot times of a window, and the lock chains of a window with their members.
import type { ActiveQuery, LockEntry } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import { latestSnapshot } from '../snapshots.ts'
import { unpack } from './packed.ts'
import type { SessionReads, Snapshot, SnapshotTime, StoredChain, StoredChainMember } from './types.ts'
import { num } from '../rows.ts'

/** A stored start time, never before the epoch (rows written before the wire bounded durations may hold one). */
const startTime = (v: unknown) => Math.max(0, Number(v))

/** Longest first; unknown durations last. */
function byDurationDesc(a: { duration_ms: number | null }, b: { duration_ms: number | null }): number {
  return (b.duration_ms ?? -1) - (a.duration_ms ?? -1)
}

/** Locks waited for first, then the longest held, then by pid. */
function lockOrder(a: LockEntry, b: LockEntry): number {
  return Number(a.granted) - Number(b.granted) || byDurationDesc(a, b) || a.pid - b.pid
}

/** The latest snapshot of activity or locks, as `snapshots` keeps it. */
async function latest<T>(driver: SqlDriver, databaseId: string, kind: 'activity' | 'locks'): Promise<Snapshot<T>> {
  const found = await latestSnapshot(driver, databaseId, kind)
  return found
    ? { ts: found.ts, entries: Array.isArray(found.payload) ? (found.payload as T[]) : [] }
    : { ts: null, entries: [] }
}

function parseArray<T>(text: unknown): T[] {
  if (typeof text !== 'string') return []
  try {
    const value = JSON.parse(text.startsWith('[') ? text : unpack(text))
    return Array.isArray(value) ? (value as T[]) : []
  } catch {
    return []
  }
}

/** Reads for the routes: the latest snapshot, a snapshot at a time, the snapshot times of a window, the chains of a window. */
export function sessionReads(driver: SqlDriver): SessionReads {
  async function at<T>(
    databaseId: string,
    column: 'activity' | 'locks',
    time: number,
  ): Promise<{ ts: number | null; entries: T[] }> {
    const row = await driver.get<{ ts: number; payload: string }>(
      `SELECT ts, ${column} AS payload FROM session_snapshots WHERE database_id = $1 AND ts <= $2 AND ${column} IS NOT NULL ORDER BY ts DESC LIMIT 1`,
      [databaseId, time],
    )
    return row ? { ts: num(row.ts), entries: parseArray<T>(row.payload) } : { ts: null, entries: [] }
  }
  return {
    async activeQueries(databaseId: string, limit: number) {
      const found = await latest<ActiveQuery>(driver, databaseId, 'activity')
      return { ts: found.ts, entries: found.entries.sort(byDurationDesc).slice(0, limit) }
    },
    async locks(databaseId: string, limit: number) {
      const found = await latest<LockEntry>(driver, databaseId, 'locks')
      return { ts: found.ts, entries: found.entries.sort(lockOrder).slice(0, limit) }
    },
    /** The sessions of the kept snapshot at or before `time`, longest running first (as the latest snapshot's). */
    async activityAt(databaseId: string, time: number, limit: number) {
      const found = await at<ActiveQuery>(databaseId, 'activity', time)
      return { ts: found.ts, entries: found.entries.sort(byDurationDesc).slice(0, limit) }
    },
    /** The locks (those that wait or block) of the kept snapshot at or before `time`, waiting ones first, then the longest held. */
    async locksAt(databaseId: string, time: number, limit: number) {
      const found = await at<LockEntry>(databaseId, 'locks', time)
      return { ts: found.ts, entries: found.entries.sort(lockOrder).slice(0, limit) }
    },

    /** The kept snapshots' times in [since, until], the latest `limit` of them, oldest first; `more` when some earlier ones were left out. */
    async times(
      databaseId: string,
      since: number,
      until: number,
      limit: number,
    ): Promise<{ times: SnapshotTime[]; more: boolean }> {
      const rows = await driver.all<{
        ts: number
        blocked: number
        longest_wait_ms: number | null
        longest_ms: number | null
      }>(
        'SELECT ts, blocked, longest_wait_ms, longest_ms FROM session_snapshots WHERE database_id = $1 AND ts >= $2 AND ts <= $3 ORDER BY ts DESC LIMIT $4',
        [databaseId, since, until, limit + 1],
      )
      const more = rows.length > limit
      return {
        times: rows
          .slice(0, limit)
          .reverse()
          .map((r) => ({
            ts: num(r.ts),
            blocked: num(r.blocked),
            longest_wait_ms: r.longest_wait_ms === null ? null : num(r.longest_wait_ms),
            longest_ms: r.longest_ms === null ? null : num(r.longest_ms),
          })),
        more,
      }
    },

    /** The latest kept snapshot's time (null: none). */
    async latestTime(databaseId: string): Promise<number | null> {
      const row = await driver.get<{ ts: number | null }>(
        'SELECT MAX(ts) AS ts FROM session_snapshots WHERE database_id = $1',
        [databaseId],
      )
      return row?.ts == null ? null : num(row.ts)
    },

    /**
     * Chains seen in [since, until] with their members: the latest begun first, or (`longest`) the
     * longest first (last seen less started), so that a long chain is never pushed out of the limit by
     * many short ones.
     */
    async chains(
      databaseId: string,
      since: number,
      until: number,
      limit: number,
      order: 'started' | 'longest' = 'started',
    ): Promise<StoredChain[]> {
      const orderBy =
        order === 'longest' ? 'last_seen - started_at DESC, started_at DESC, root_pid' : 'started_at DESC, root_pid'
      const rows = await driver.all<Record<string, unknown>>(
        `SELECT * FROM lock_chains WHERE database_id = $1 AND last_seen >= $2 AND first_seen <= $3
         ORDER BY ${orderBy} LIMIT $4`,
        [databaseId, since, until, limit],
      )
      if (rows.length === 0) return []
      const members = await driver.all<Record<string, unknown>>(
        `SELECT m.* FROM lock_chain_members m
         JOIN (SELECT root_pid, root_xact_start FROM lock_chains WHERE database_id = $1 AND last_seen >= $2 AND first_seen <= $3
               ORDER BY ${orderBy} LIMIT $4) c ON c.root_pid = m.root_pid AND c.root_xact_start = m.root_xact_start
         WHERE m.database_id = $1 ORDER BY m.pid`,
        [databaseId, since, until, limit],
      )
      const byChain = new Map<string, StoredChainMember[]>()
      for (const m of members) {
        const key = `${num(m.root_pid)}:${num(m.root_xact_start)}`
        const list = byChain.get(key) ?? []
        list.push({
          pid: num(m.pid),
          blocked_by: parseArray<number>(m.blocked_by),
          user: (m.user_name as string | null) ?? null,
          application: (m.application as string | null) ?? null,
          statement: (m.statement as string | null) ?? null,
          first_seen: num(m.first_seen),
          last_seen: num(m.last_seen),
          wait_started: startTime(m.wait_started),
        })
        byChain.set(key, list)
      }
      return rows.map((r) => ({
        root_pid: num(r.root_pid),
        root_xact_start: num(r.root_xact_start) === 0 ? null : num(r.root_xact_start),
        root_user: (r.root_user as string | null) ?? null,
        root_application: (r.root_application as string | null) ?? null,
        root_state: (r.root_state as string | null) ?? null,
        root_statement: (r.root_statement as string | null) ?? null,
        first_seen: num(r.first_seen),
        last_seen: num(r.last_seen),
        started_at: startTime(r.started_at),
        samples: num(r.samples),
        max_blocked: num(r.max_blocked),
        members: byChain.get(`${num(r.root_pid)}:${num(r.root_xact_start)}`) ?? [],
      }))
    },
  }
}
