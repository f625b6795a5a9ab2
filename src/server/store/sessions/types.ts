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
// The latest snapshot of activity and locks is `snapshots`' (snapshots.ts), read here for the live pages.
// Records and interfaces here; reads.ts implements SessionReads, writes.ts SessionWrites; lock-chains.ts
// finds the chains in a snapshot.
import type { ActiveQuery, IngestBatch, LockEntry } from '../../../shared/wire.ts'
import type { Writes } from '../ingest/batch.ts'

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

/** The latest snapshot of a section (activity, locks): when the agent took it (null: no batch carried it yet), and its entries. */
export interface Snapshot<T> {
  ts: number | null
  entries: T[]
}

/** Reads of sessions and locks: the latest snapshot (the live pages), the kept ones at a time, their times, lock chains. */
export interface SessionReads {
  /** The latest active sessions, longest running first. */
  activeQueries(databaseId: string, limit: number): Promise<Snapshot<ActiveQuery>>
  /** The latest locks, the ones waited for first, then the longest held. */
  locks(databaseId: string, limit: number): Promise<Snapshot<LockEntry>>
  /** The sessions of the kept snapshot at or before `time`, longest running first (as the latest snapshot's). */
  activityAt(databaseId: string, time: number, limit: number): Promise<Snapshot<ActiveQuery>>
  /** The locks (those that wait or block) of the kept snapshot at or before `time`, waiting ones first, then the longest held. */
  locksAt(databaseId: string, time: number, limit: number): Promise<Snapshot<LockEntry>>
  /** The kept snapshots' times in [since, until], the latest `limit` of them, oldest first; `more` when some earlier ones were left out. */
  times(
    databaseId: string,
    since: number,
    until: number,
    limit: number,
  ): Promise<{ times: SnapshotTime[]; more: boolean }>
  /** The latest kept snapshot's time (null: none). */
  latestTime(databaseId: string): Promise<number | null>
  /**
   * Chains seen in [since, until] with their members: the latest begun first, or (`longest`) the
   * longest first (last seen less started), so that a long chain is never pushed out of the limit by
   * many short ones.
   */
  chains(
    databaseId: string,
    since: number,
    until: number,
    limit: number,
    order?: 'started' | 'longest',
  ): Promise<StoredChain[]>
}

/** Session and lock history at ingest. */
export interface SessionWrites {
  /** The batch's history rows: its snapshot, and the chains it shows with their members (nothing without activity or locks). */
  applySessionHistory(writes: Writes, databaseId: string, batch: IngestBatch): void
}
