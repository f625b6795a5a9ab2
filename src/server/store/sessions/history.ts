// Session and lock history: every batch's activity and lock snapshot (session_snapshots, one row per
// database and collection time) and the lock chains seen in them (lock_chains and lock_chain_members,
// migration 12). The latest snapshot stays in `snapshots` (snapshots.ts) for the live pages.
// What a row keeps: the sessions as the agent sent them (it sends the non-idle ones and those idle in a
// transaction), and of the locks only those that wait or block (sessions/lock-chains.ts compactLocks); statement
// texts cut at the agent's own bound; each list as deflated JSON (pack). A chain is keyed by its root blocker's pid and transaction start,
// so the same transaction holding others up over many polls is one chain; each batch that sees it moves
// its first and last seen (earliest and latest, so a late batch from the agent's buffer fits in), counts
// a sample, and adds or moves its members. Nothing is read at ingest: every write is an upsert.
// Retention (compactSessionHistory, called by retention/retention.ts): every snapshot and chain is kept for
// sessionHistoryLimits.everyPollMs; then only the snapshots where a session had waited for a lock
// longWaitMs or a statement or transaction had run longMs, and the chains that lasted longWaitMs; none
// past the organization's retention. Members go with their chain. docs/session-history.md says why.
import type { ActiveQuery, IngestBatch, LockEntry } from '../../../shared/wire.ts'
import { sessionHistoryLimits } from '../../limits.ts'
import type { SqlDriver } from '../driver.ts'
import { type ChainSample, clip, compactLocks, lockChains } from './lock-chains.ts'
import type { Writes } from '../ingest/batch.ts'


/**
 * A snapshot's sessions or locks as stored: their JSON deflated, in base64 (TEXT in both stores). A
 * pgbench-like snapshot's 3.4 KB of JSON is 0.9 KB so (its field names and values repeat session after
 * session); PostgreSQL's TOAST compresses only values past about 2 KB, SQLite not at all, and the rows are
 * kept every poll for a day (docs/session-history.md). Deflating one takes about 0.15 ms.
 */
function pack(value: unknown): string {
  return Buffer.from(Bun.deflateSync(Buffer.from(JSON.stringify(value)))).toString('base64')
}

/** The JSON text of a packed snapshot (a plain JSON array is read as it is). */
function unpack(text: string): string {
  return Buffer.from(Bun.inflateSync(Buffer.from(text, 'base64'))).toString('utf8')
}

/** The longest statement or open transaction of the snapshot, in ms (null: no session). */
function longest(ts: number, activity: readonly ActiveQuery[]): number | null {
  let max: number | null = null
  for (const s of activity) {
    const running = typeof s.duration_ms === 'number' && Number.isFinite(s.duration_ms) ? s.duration_ms : 0
    const open = typeof s.xact_start === 'number' ? ts - s.xact_start : 0
    const value = Math.max(0, running, open)
    if (max === null || value > max) max = value
  }
  return max
}

/** The batch's history rows: its snapshot, and the chains it shows with their members. */
export function applySessionHistory(writes: Writes, databaseId: string, batch: IngestBatch): void {
  if (batch.activity === undefined && batch.locks === undefined) return
  const ts = batch.collected_at
  const activity = batch.activity ?? []
  const locks = batch.locks ?? []
  const chains = batch.activity !== undefined || batch.locks !== undefined ? lockChains(ts, activity, locks) : []
  const members = chains.flatMap((c) => c.members)
  const blocked = new Set(members.map((m) => m.pid)).size
  const longestWait = members.length === 0 ? null : Math.max(...members.map((m) => ts - m.wait_started))
  const kept = {
    activity: batch.activity === undefined ? null : pack(batch.activity.map((s) => ({ ...s, query_text: clip(s.query_text) ?? '' }))),
    locks: batch.locks === undefined ? null : pack(compactLocks(activity, locks)),
  }
  const { greatest, least } = writes.sqlDialect
  // A batch split into parts carries activity and locks in the same part or in two of one collected_at.
  const columns = ['database_id', 'ts', 'blocked', 'longest_wait_ms', 'longest_ms', 'activity', 'locks']
  writes.upsert('session_snapshots', columns, [[databaseId, ts, blocked, longestWait, longest(ts, activity), kept.activity, kept.locks]], {
    key: ['database_id', 'ts'],
    update: {
      blocked: greatest('session_snapshots.blocked', 'excluded.blocked'),
      longest_wait_ms: greatest('session_snapshots.longest_wait_ms', 'excluded.longest_wait_ms'),
      longest_ms: greatest('session_snapshots.longest_ms', 'excluded.longest_ms'),
      activity: 'COALESCE(excluded.activity, session_snapshots.activity)',
      locks: 'COALESCE(excluded.locks, session_snapshots.locks)',
    },
  })
  if (chains.length === 0) return
  const newer = (table: string) => `excluded.last_seen >= ${table}.last_seen`
  const latest = (table: string, column: string) => `CASE WHEN ${newer(table)} THEN excluded.${column} ELSE ${table}.${column} END`
  writes.upsert(
    'lock_chains',
    ['database_id', 'root_pid', 'root_xact_start', 'first_seen', 'last_seen', 'started_at', 'samples', 'max_blocked', 'root_user', 'root_application', 'root_state', 'root_statement'],
    chains.map((c) => [databaseId, c.root_pid, c.root_xact_start, ts, ts, c.started_at, 1, c.members.length, c.root_user, c.root_application, c.root_state, c.root_statement]),
    {
      key: ['database_id', 'root_pid', 'root_xact_start'],
      update: {
        first_seen: least('lock_chains.first_seen', 'excluded.first_seen'),
        started_at: least('lock_chains.started_at', 'excluded.started_at'),
        samples: 'lock_chains.samples + 1',
        max_blocked: greatest('lock_chains.max_blocked', 'excluded.max_blocked'),
        root_user: latest('lock_chains', 'root_user'),
        root_application: latest('lock_chains', 'root_application'),
        root_state: latest('lock_chains', 'root_state'),
        root_statement: latest('lock_chains', 'root_statement'),
        // (every SET expression reads the stored row, so the CASEs above compare with the stored last_seen)
        last_seen: greatest('lock_chains.last_seen', 'excluded.last_seen'),
      },
    },
  )
  writes.upsert(
    'lock_chain_members',
    ['database_id', 'root_pid', 'root_xact_start', 'pid', 'first_seen', 'last_seen', 'wait_started', 'blocked_by', 'user_name', 'application', 'statement'],
    chains.flatMap((c: ChainSample) =>
      c.members.map((m) => [databaseId, c.root_pid, c.root_xact_start, m.pid, ts, ts, m.wait_started, JSON.stringify(m.blocked_by), m.user, m.application, m.statement]),
    ),
    {
      key: ['database_id', 'root_pid', 'root_xact_start', 'pid'],
      update: {
        first_seen: least('lock_chain_members.first_seen', 'excluded.first_seen'),
        wait_started: least('lock_chain_members.wait_started', 'excluded.wait_started'),
        blocked_by: latest('lock_chain_members', 'blocked_by'),
        user_name: latest('lock_chain_members', 'user_name'),
        application: latest('lock_chain_members', 'application'),
        statement: latest('lock_chain_members', 'statement'),
        last_seen: greatest('lock_chain_members.last_seen', 'excluded.last_seen'),
      },
    },
  )
}

export interface SnapshotTime {
  ts: number
  /** Sessions waiting for a lock. */
  blocked: number
  /** The longest of their waits, ms (null: none waited). */
  longest_wait_ms: number | null
  /** The longest statement or open transaction, ms. */
  longest_ms: number | null
}

export interface StoredChainMember {
  pid: number
  blocked_by: number[]
  user: string | null
  application: string | null
  statement: string | null
  first_seen: number
  last_seen: number
  wait_started: number
}

export interface StoredChain {
  root_pid: number
  root_xact_start: number | null
  root_user: string | null
  root_application: string | null
  root_state: string | null
  root_statement: string | null
  first_seen: number
  last_seen: number
  started_at: number
  samples: number
  max_blocked: number
  members: StoredChainMember[]
}

const num = (v: unknown) => Number(v)
/** A stored start time, never before the epoch (rows written before the wire bounded durations may hold one). */
const startTime = (v: unknown) => Math.max(0, Number(v))

/** Longest first; unknown durations last. */
function byDurationDesc(a: { duration_ms: number | null }, b: { duration_ms: number | null }): number {
  return (b.duration_ms ?? -1) - (a.duration_ms ?? -1)
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

/** Session and lock history: snapshots at a time, their times, lock chains. */
export interface SessionHistoryReader {

  /** The sessions of the kept snapshot at or before `time`, longest running first (as the latest snapshot's). */
  activityAt(databaseId: string, time: number, limit: number): Promise<{
    ts: number | null;
    entries: {
      pid: string | number;
      query_text: string;
      state: string | null;
      wait_event_type: string | null;
      wait_event: string | null;
      duration_ms: number | null;
      blocking_pids: number[];
      user?: string | null | undefined;
      application_name?: string | null | undefined;
      client_addr?: string | null | undefined;
      database?: string | null | undefined;
      backend_type?: string | null | undefined;
      xact_start?: number | null | undefined;
      backend_start?: number | null | undefined;
      query_start?: number | null | undefined;
      memory_usage?: number | undefined;
      read_bytes?: number | undefined;
      written_bytes?: number | undefined;
      read_rows?: number | undefined;
    }[];
  }>;
  /** The locks (those that wait or block) of the kept snapshot at or before `time`, waiting ones first, then the longest held. */
  locksAt(databaseId: string, time: number, limit: number): Promise<{
    ts: number | null;
    entries: {
      pid: number;
      lock_type: string;
      mode: string;
      relation_name: string | null;
      granted: boolean;
      blocked_by_pid: number | null;
      duration_ms: number | null;
      query_text: string | null;
    }[];
  }>;
  /** The kept snapshots' times in [since, until], the latest `limit` of them, oldest first; `more` when some earlier ones were left out. */
  times(databaseId: string, since: number, until: number, limit: number): Promise<{
    times: SnapshotTime[];
    more: boolean;
  }>;
  /** The latest kept snapshot's time (null: none). */
  latestTime(databaseId: string): Promise<number | null>;
  /**
   * Chains seen in [since, until] with their members: the latest begun first, or (`longest`) the
   * longest first (last seen less started), so that a long chain is never pushed out of the limit by
   * many short ones.
   */
  chains(databaseId: string, since: number, until: number, limit: number, order?: 'started' | 'longest'): Promise<StoredChain[]>;
}

/** Reads for the routes: a snapshot at a time, the snapshot times of a window, the chains of a window. */
export function sessionHistoryReader(driver: SqlDriver): SessionHistoryReader {
  async function at<T>(databaseId: string, column: 'activity' | 'locks', time: number): Promise<{ ts: number | null; entries: T[] }> {
    const row = await driver.get<{ ts: number; payload: string }>(
      `SELECT ts, ${column} AS payload FROM session_snapshots WHERE database_id = $1 AND ts <= $2 AND ${column} IS NOT NULL ORDER BY ts DESC LIMIT 1`,
      [databaseId, time],
    )
    return row ? { ts: num(row.ts), entries: parseArray<T>(row.payload) } : { ts: null, entries: [] }
  }
  return {
    /** The sessions of the kept snapshot at or before `time`, longest running first (as the latest snapshot's). */
    async activityAt(databaseId: string, time: number, limit: number) {
      const found = await at<ActiveQuery>(databaseId, 'activity', time)
      return { ts: found.ts, entries: found.entries.sort(byDurationDesc).slice(0, limit) }
    },
    /** The locks (those that wait or block) of the kept snapshot at or before `time`, waiting ones first, then the longest held. */
    async locksAt(databaseId: string, time: number, limit: number) {
      const found = await at<LockEntry>(databaseId, 'locks', time)
      const order = (a: LockEntry, b: LockEntry) => Number(a.granted) - Number(b.granted) || byDurationDesc(a, b) || a.pid - b.pid
      return { ts: found.ts, entries: found.entries.sort(order).slice(0, limit) }
    },

    /** The kept snapshots' times in [since, until], the latest `limit` of them, oldest first; `more` when some earlier ones were left out. */
    async times(databaseId: string, since: number, until: number, limit: number): Promise<{ times: SnapshotTime[]; more: boolean }> {
      const rows = await driver.all<{ ts: number; blocked: number; longest_wait_ms: number | null; longest_ms: number | null }>(
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
      const row = await driver.get<{ ts: number | null }>('SELECT MAX(ts) AS ts FROM session_snapshots WHERE database_id = $1', [databaseId])
      return row?.ts == null ? null : num(row.ts)
    },

    /**
     * Chains seen in [since, until] with their members: the latest begun first, or (`longest`) the
     * longest first (last seen less started), so that a long chain is never pushed out of the limit by
     * many short ones.
     */
    async chains(databaseId: string, since: number, until: number, limit: number, order: 'started' | 'longest' = 'started'): Promise<StoredChain[]> {
      const orderBy = order === 'longest' ? 'last_seen - started_at DESC, started_at DESC, root_pid' : 'started_at DESC, root_pid'
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

/** Tables of session history, for retention's list of per-database tables. */
export const SESSION_HISTORY_TABLES = ['session_snapshots', 'lock_chains', 'lock_chain_members'] as const

export interface SessionHistoryCutoffs {
  /** Everything older goes (the organization's retention). */
  before: number
  /** Older snapshots and chains are compacted (sessionHistoryLimits): only the long waits and long statements stay. */
  everyPollBefore: number
}

/**
 * Compacts and expires the database's session history; `deleteSome(table, where, params)` deletes the
 * matching rows in batches and answers how many went. Past everyPollBefore a snapshot stays only when a
 * session had waited for a lock longWaitMs or a statement or transaction had run longMs, and a chain only
 * when it lasted longWaitMs; past `before`, nothing stays. A chain's members go with it.
 */
export async function compactSessionHistory(
  databaseId: string,
  cutoffs: SessionHistoryCutoffs,
  deleteSome: (table: string, where: string, params: unknown[]) => Promise<number>,
): Promise<number> {
  const compactBefore = Math.max(cutoffs.before, cutoffs.everyPollBefore)
  const { longWaitMs, longMs } = sessionHistoryLimits
  let deleted = await deleteSome('session_snapshots', 'database_id = $1 AND ts < $2', [databaseId, cutoffs.before])
  deleted += await deleteSome(
    'session_snapshots',
    'database_id = $1 AND ts < $2 AND (longest_wait_ms IS NULL OR longest_wait_ms < $3) AND (longest_ms IS NULL OR longest_ms < $4)',
    [databaseId, compactBefore, longWaitMs, longMs],
  )
  deleted += await deleteSome('lock_chains', 'database_id = $1 AND last_seen < $2', [databaseId, cutoffs.before])
  deleted += await deleteSome('lock_chains', 'database_id = $1 AND last_seen < $2 AND last_seen - started_at < $3', [databaseId, compactBefore, longWaitMs])
  // A member goes with its chain (one that left a chain early is kept as long as the chain).
  deleted += await deleteSome(
    'lock_chain_members',
    `database_id = $1 AND last_seen < $2 AND NOT EXISTS (SELECT 1 FROM lock_chains c WHERE c.database_id = lock_chain_members.database_id
       AND c.root_pid = lock_chain_members.root_pid AND c.root_xact_start = lock_chain_members.root_xact_start)`,
    [databaseId, compactBefore],
  )
  return deleted
}
