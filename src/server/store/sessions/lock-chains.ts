// Lock chains in one activity and lock snapshot, and the compact form of its locks that session
// history keeps. A chain is a root blocker (a session that holds up others and waits for nobody) with
// every session it holds up, directly or through others. Who waits for whom comes from the sessions'
// blocking_pids (pg_blocking_pids: every blocker) and the waiting locks' blocked_by_pid (the first
// blocker), both as the agent sent them. Sessions that wait for each other in a cycle (a deadlock the
// server is about to break) have no such root: the smallest pid of the cycle stands for it.
// Only whole numbers in PostgreSQL's pid range count as pids (ClickHouse query ids and a hostile
// agent's numbers are left out), so every pid fits the store's INTEGER columns.
// What one snapshot can make is bounded, so that what history stores grows with the batch, never with
// its square (a hostile review: one waiter naming 20,000 blocking pids made 20,000 chains, each member
// row repeating the 20,000 pids and the 10,000-character statement: 3 GB from a 140 KB batch): a
// waiter's first 32 blockers count, a snapshot keeps its 100 largest chains, a chain its first 100
// members by pid, and a member's statement its first 2,000 characters (the root's keeps 10,000).
import type { ActiveQuery, LockEntry } from '../../../shared/wire.ts'

/** Longest statement text kept in history: what the agent's activity and locks collectors send at most. */
export const HISTORY_TEXT_MAX = 10_000
/** A chain member's statement is cut shorter: a chain repeats a statement for each member. */
export const MEMBER_TEXT_MAX = 2_000
/** Blockers counted per waiting session (pg_blocking_pids names one per lock holder ahead of it). */
export const MAX_BLOCKERS = 32
/** Chains kept per snapshot, the most members first. */
export const MAX_CHAINS = 100
/** Members kept per chain, by pid. */
export const MAX_MEMBERS = 100

const isPid = (pid: unknown): pid is number =>
  typeof pid === 'number' && Number.isInteger(pid) && pid > 0 && pid <= 2_147_483_647

/**
 * When something that has lasted `duration` ms by `ts` began: never before the epoch nor after `ts`
 * (the wire bounds a duration to 1e15 ms, more than the years since 1970; a stored wait start before
 * the epoch would stay the smallest, so the answer's times would be out of range for good).
 */
export const startedBefore = (ts: number, duration: number): number =>
  Math.min(ts, Math.max(0, Math.round(ts - Math.max(0, duration))))

export const clip = (text: string | null | undefined, max = HISTORY_TEXT_MAX): string | null =>
  text == null ? null : text.length > max ? text.slice(0, max) : text

/** Each waiting pid with the pids it waits for, in the order the agent named them. */
export function waitsFor(activity: readonly ActiveQuery[], locks: readonly LockEntry[]): Map<number, number[]> {
  const edges = new Map<number, number[]>()
  const add = (waiter: unknown, blocker: unknown) => {
    if (!isPid(waiter) || !isPid(blocker) || waiter === blocker) return
    const list = edges.get(waiter) ?? []
    if (list.length < MAX_BLOCKERS && !list.includes(blocker)) list.push(blocker)
    edges.set(waiter, list)
  }
  for (const s of activity) for (const b of Array.isArray(s.blocking_pids) ? s.blocking_pids : []) add(s.pid, b)
  for (const l of locks) if (!l.granted) add(l.pid, l.blocked_by_pid)
  return edges
}

/**
 * The locks history keeps: every waiting lock, and each lock a blocker of a waiting session holds on what
 * that session waits for (the same lock type and relation; for a transaction id or virtual transaction id
 * the same type whatever the relation, since a row waiter names the row's table and the holder's
 * transaction lock names none). The other granted locks (every running statement's AccessShareLock, a
 * blocker's locks on other tables) tell nothing about contention.
 */
export function compactLocks(activity: readonly ActiveQuery[], locks: readonly LockEntry[]): LockEntry[] {
  const edges = waitsFor(activity, locks)
  const isXid = (type: string) => type === 'transactionid' || type === 'virtualxid'
  const target = (pid: number, l: LockEntry) =>
    isXid(l.lock_type) ? `${pid}\u0000${l.lock_type}` : `${pid}\u0000${l.lock_type}\u0000${l.relation_name ?? ''}`
  const wanted = new Set<string>()
  for (const l of locks) if (!l.granted) for (const blocker of edges.get(l.pid) ?? []) wanted.add(target(blocker, l))
  return locks
    .filter((l) => !l.granted || wanted.has(target(l.pid, l)))
    .map((l) => ({ ...l, query_text: clip(l.query_text) }))
}

export interface ChainMember {
  pid: number
  /** The pids it waits for (blocking_pids, else the waiting lock's blocker). */
  blocked_by: number[]
  user: string | null
  application: string | null
  statement: string | null
  /** When its wait began, as far as the snapshot tells: its waiting lock's age, else its statement's. */
  wait_started: number
}

export interface ChainSample {
  root_pid: number
  /** The root's transaction start (epoch ms), 0 when the snapshot does not have it. */
  root_xact_start: number
  root_user: string | null
  root_application: string | null
  root_state: string | null
  root_statement: string | null
  /** The earliest wait start of its members, not before the root's transaction began. */
  started_at: number
  members: ChainMember[]
}

/** The lock chains of a snapshot taken at `ts`, each with its members ordered by pid. */
export function lockChains(ts: number, activity: readonly ActiveQuery[], locks: readonly LockEntry[]): ChainSample[] {
  const edges = waitsFor(activity, locks)
  if (edges.size === 0) return []
  const sessions = new Map<number, ActiveQuery>()
  for (const s of activity) if (isPid(s.pid)) sessions.set(s.pid, s)
  const lockText = new Map<number, string | null>()
  const waitStart = new Map<number, number>()
  for (const l of locks) {
    if (!lockText.has(l.pid) && l.query_text) lockText.set(l.pid, l.query_text)
    if (!l.granted && typeof l.duration_ms === 'number' && Number.isFinite(l.duration_ms)) {
      const at = startedBefore(ts, l.duration_ms)
      waitStart.set(l.pid, Math.min(waitStart.get(l.pid) ?? at, at))
    }
  }
  const holdsUp = new Map<number, number[]>()
  for (const [waiter, list] of edges) {
    for (const blocker of list) {
      const held = holdsUp.get(blocker) ?? []
      held.push(waiter)
      holdsUp.set(blocker, held)
    }
  }
  const reach = (root: number): number[] => {
    const seen = new Set<number>([root])
    const queue = [root]
    while (queue.length > 0)
      for (const next of holdsUp.get(queue.shift()!) ?? []) if (!seen.has(next)) seen.add(next), queue.push(next)
    seen.delete(root)
    return [...seen].sort((a, b) => a - b)
  }
  const roots = [...holdsUp.keys()].filter((pid) => !edges.has(pid)).sort((a, b) => a - b)
  const covered = new Set<number>()
  const chains: [number, number[]][] = roots.map((root) => {
    const members = reach(root)
    for (const m of members) covered.add(m)
    return [root, members]
  })
  // Waiters in a cycle that no root reaches: the smallest pid of each stands for the root.
  for (const waiter of [...edges.keys()].sort((a, b) => a - b)) {
    if (covered.has(waiter)) continue
    const members = reach(waiter)
    covered.add(waiter)
    for (const m of members) covered.add(m)
    chains.push([waiter, members])
  }
  // The largest chains first (then by root pid), at most MAX_CHAINS, each with its first MAX_MEMBERS members.
  chains.sort((a, b) => b[1].length - a[1].length || a[0] - b[0])
  return chains.slice(0, MAX_CHAINS).map(([root, all]) => {
    const members = all.slice(0, MAX_MEMBERS)
    const s = sessions.get(root)
    const xact = typeof s?.xact_start === 'number' ? s.xact_start : 0
    const memberList = members.map((pid): ChainMember => {
      const m = sessions.get(pid)
      const statementStart =
        typeof m?.duration_ms === 'number' && Number.isFinite(m.duration_ms) ? startedBefore(ts, m.duration_ms) : ts
      return {
        pid,
        blocked_by: edges.get(pid) ?? [],
        user: m?.user ?? null,
        application: m?.application_name ?? null,
        statement: clip(m?.query_text ?? lockText.get(pid) ?? null, MEMBER_TEXT_MAX),
        wait_started: Math.min(ts, waitStart.get(pid) ?? statementStart),
      }
    })
    const earliest = Math.min(ts, ...memberList.map((m) => m.wait_started))
    return {
      root_pid: root,
      root_xact_start: xact,
      root_user: s?.user ?? null,
      root_application: s?.application_name ?? null,
      root_state: s?.state ?? null,
      root_statement: clip(s?.query_text ?? lockText.get(root) ?? null),
      started_at: Math.max(earliest, Math.min(xact, ts)),
      members: memberList,
    }
  })
}
