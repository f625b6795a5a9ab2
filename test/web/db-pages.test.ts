// The per-database pages' pure helpers: blocking chains from session snapshots (chains, several
// blockers, blockers missing from the snapshot, cycles), plan roots and misestimates, buckets that
// keep a window's timeseries small, and duration formatting.
import { describe, expect, test } from 'bun:test'
import { type Session, blockingChains } from '../../src/web/pages/db/active.tsx'
import { bucketFor, fmtDuration } from '../../src/web/pages/db/common.tsx'
import { misestimated, planRoot } from '../../src/web/pages/db/plan-tree.tsx'

const session = (pid: number, blocking: number[] = []): Session => ({
  pid,
  query_text: `q${pid}`,
  state: 'active',
  wait_event_type: null,
  wait_event: null,
  duration_ms: 1000,
  blocking_pids: blocking,
  ts: '2026-01-01T00:00:00.000Z',
})

/** A chain as nested [pid, children] pairs. */
type Shape = [number | string, Shape[]]
const shape = (nodes: ReturnType<typeof blockingChains>): Shape[] => nodes.map((n) => [n.session.pid, shape(n.children)])

describe('blockingChains', () => {
  test('a chain of blocker → blocked → blocked, and sessions that block nothing stay out', () => {
    const chains = blockingChains([session(1), session(2, [1]), session(3, [2]), session(4, [2]), session(5)])
    expect(shape(chains)).toEqual([[1, [[2, [[3, []], [4, []]]]]]])
  })

  test('a session blocked by two sessions appears under each', () => {
    expect(shape(blockingChains([session(1), session(2), session(3, [1, 2])]))).toEqual([
      [1, [[3, []]]],
      [2, [[3, []]]],
    ])
  })

  test('a blocker missing from the snapshot is still a root', () => {
    const [root] = blockingChains([session(7, [99])])
    expect(root?.session.pid).toBe(99)
    expect(root?.session.state).toBe('not in the snapshot')
    expect(shape(root ? [root] : [])).toEqual([[99, [[7, []]]]])
  })

  test('a cycle is shown once from one of its sessions, without looping', () => {
    expect(shape(blockingChains([session(1, [2]), session(2, [1])]))).toEqual([[2, [[1, []]]]])
  })

  test('no blocking, no chains', () => {
    expect(blockingChains([session(1), session(2)])).toEqual([])
  })
})

describe('plans', () => {
  test('planRoot reads EXPLAIN JSON as the agent sends it, as EXPLAIN prints it, and a bare node', () => {
    const node = { 'Node Type': 'Seq Scan', 'Plan Rows': 10 }
    expect(planRoot({ Plan: node, 'Execution Time': 1.5, 'Planning Time': 0.1 })).toEqual({ root: node, executionMs: 1.5, planningMs: 0.1 })
    expect(planRoot([{ Plan: node }])).toEqual({ root: node, executionMs: undefined, planningMs: undefined })
    expect(planRoot(node)).toEqual({ root: node })
    expect(planRoot('not a plan')).toBeUndefined()
    expect(planRoot([])).toBeUndefined()
  })

  test('misestimated: estimated and actual rows 10 times apart or more, either way', () => {
    expect(misestimated({ 'Plan Rows': 100, 'Actual Rows': 1000 })).toBe(true)
    expect(misestimated({ 'Plan Rows': 1000, 'Actual Rows': 100 })).toBe(true)
    expect(misestimated({ 'Plan Rows': 1000, 'Actual Rows': 101 })).toBe(false)
    expect(misestimated({ 'Plan Rows': 40, 'Actual Rows': 0 })).toBe(true)
    expect(misestimated({ 'Plan Rows': 1, 'Actual Rows': 0 })).toBe(false)
    expect(misestimated({ 'Plan Rows': 1000 })).toBe(false)
  })
})

describe('windows and durations', () => {
  test('bucketFor keeps a window at 360 intervals or fewer, and at 60 s or more', () => {
    expect(bucketFor(3_600_000)).toBe(60)
    expect(bucketFor(6 * 3_600_000)).toBe(60)
    expect(bucketFor(24 * 3_600_000)).toBe(300)
    expect(bucketFor(7 * 24 * 3_600_000)).toBe(1800)
    expect(bucketFor(3650 * 24 * 3_600_000)).toBe(86_400)
  })

  test('fmtDuration', () => {
    expect(fmtDuration(null)).toBe('—')
    expect(fmtDuration(950)).toBe('950 ms')
    expect(fmtDuration(95_000)).toBe('1 min 35 s')
    expect(fmtDuration(7_260_000)).toBe('2 h 1 min')
    expect(fmtDuration(90_000_000)).toBe('1 d 1 h')
  })
})
