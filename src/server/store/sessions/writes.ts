// Session and lock history at ingest (every write an upsert: nothing is read), and its compaction and
// expiry for retention (compactSessionHistory, called by retention/retention.ts). What is kept and why:
// types.ts's header.
import type { ActiveQuery, IngestBatch } from '../../../shared/wire.ts'
import { sessionHistoryLimits } from '../../limits.ts'
import { type ChainSample, clip, compactLocks, lockChains } from './lock-chains.ts'
import type { Writes } from '../ingest/batch.ts'
import { pack } from './packed.ts'
import type { SessionWrites } from './types.ts'

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
    activity:
      batch.activity === undefined
        ? null
        : pack(batch.activity.map((s) => ({ ...s, query_text: clip(s.query_text) ?? '' }))),
    locks: batch.locks === undefined ? null : pack(compactLocks(activity, locks)),
  }
  const { greatest, least } = writes.sqlDialect
  // A batch split into parts carries activity and locks in the same part or in two of one collected_at.
  const columns = ['database_id', 'ts', 'blocked', 'longest_wait_ms', 'longest_ms', 'activity', 'locks']
  writes.upsert(
    'session_snapshots',
    columns,
    [[databaseId, ts, blocked, longestWait, longest(ts, activity), kept.activity, kept.locks]],
    {
      key: ['database_id', 'ts'],
      update: {
        blocked: greatest('session_snapshots.blocked', 'excluded.blocked'),
        longest_wait_ms: greatest('session_snapshots.longest_wait_ms', 'excluded.longest_wait_ms'),
        longest_ms: greatest('session_snapshots.longest_ms', 'excluded.longest_ms'),
        activity: 'COALESCE(excluded.activity, session_snapshots.activity)',
        locks: 'COALESCE(excluded.locks, session_snapshots.locks)',
      },
    },
  )
  if (chains.length === 0) return
  const newer = (table: string) => `excluded.last_seen >= ${table}.last_seen`
  const latest = (table: string, column: string) =>
    `CASE WHEN ${newer(table)} THEN excluded.${column} ELSE ${table}.${column} END`
  writes.upsert(
    'lock_chains',
    [
      'database_id',
      'root_pid',
      'root_xact_start',
      'first_seen',
      'last_seen',
      'started_at',
      'samples',
      'max_blocked',
      'root_user',
      'root_application',
      'root_state',
      'root_statement',
    ],
    chains.map((c) => [
      databaseId,
      c.root_pid,
      c.root_xact_start,
      ts,
      ts,
      c.started_at,
      1,
      c.members.length,
      c.root_user,
      c.root_application,
      c.root_state,
      c.root_statement,
    ]),
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
    [
      'database_id',
      'root_pid',
      'root_xact_start',
      'pid',
      'first_seen',
      'last_seen',
      'wait_started',
      'blocked_by',
      'user_name',
      'application',
      'statement',
    ],
    chains.flatMap((c: ChainSample) =>
      c.members.map((m) => [
        databaseId,
        c.root_pid,
        c.root_xact_start,
        m.pid,
        ts,
        ts,
        m.wait_started,
        JSON.stringify(m.blocked_by),
        m.user,
        m.application,
        m.statement,
      ]),
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
  deleted += await deleteSome('lock_chains', 'database_id = $1 AND last_seen < $2 AND last_seen - started_at < $3', [
    databaseId,
    compactBefore,
    longWaitMs,
  ])
  // A member goes with its chain (one that left a chain early is kept as long as the chain).
  deleted += await deleteSome(
    'lock_chain_members',
    `database_id = $1 AND last_seen < $2 AND NOT EXISTS (SELECT 1 FROM lock_chains c WHERE c.database_id = lock_chain_members.database_id
       AND c.root_pid = lock_chain_members.root_pid AND c.root_xact_start = lock_chain_members.root_xact_start)`,
    [databaseId, compactBefore],
  )
  return deleted
}

export const sessionWrites = { applySessionHistory } satisfies SessionWrites
