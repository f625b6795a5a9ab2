// The per-database pages' pure helpers: blocking chains from session snapshots (chains, several
// blockers, blockers missing from the snapshot, cycles), plan roots and misestimates, buckets that
// keep a window's timeseries small, duration formatting, the one default window and the links that keep
// it, the statements filter and share of total time, a table's last vacuum and analyze, and the doctor's
// figures in human units with readable labels, plans grouped by plan, the statements notes' title and
// "counted since", the live stream's badge and the webhook test's outcome.
import { describe, expect, test } from 'bun:test'
import { TEST_NOT_DELIVERED } from '../../src/server/routes/alerts.ts'
import { fmtClock } from '../../src/web/components/ui.tsx'
import { describeTest } from '../../src/web/pages/account.tsx'
import { blockingChains, reconnectDelay, staleAfterMs, streamStatus } from '../../src/web/pages/db/active.tsx'
import type { Session } from '../../src/web/pages/db/types.ts'
import {
  DEFAULT_RANGE,
  RANGES,
  bucketFor,
  eventHref,
  fmtDuration,
  issuesHref,
  windowQuery,
  withWindow,
} from '../../src/web/pages/db/common.tsx'
import { figureLabel, formatFigure } from '../../src/web/pages/db/figures.ts'
import { spreadCheckpoints } from '../../src/web/pages/db/internals.tsx'
import type { FindingGroup } from '../../src/web/pages/db/types.ts'
import {
  CARD_RULES,
  availabilityCard,
  doctorVerdict,
  rangeWords,
  topCauses,
  watchedWords,
  worseTone,
} from '../../src/web/pages/db/overview.tsx'
import { GROUPS, MARKED } from '../../src/web/pages/db/events.tsx'
import { statusTone } from '../../src/web/pages/databases.tsx'
import { healthPollMs } from '../../src/web/pages/database.tsx'
import { latestRun } from '../../src/web/pages/db/objects.tsx'
import { groupPlans, spread } from '../../src/web/pages/db/plan-groups.ts'
import { misestimated, planRoot } from '../../src/web/pages/db/plan-tree.tsx'
import {
  countedSince,
  filterStatements,
  ioTime,
  ioTimingOff,
  listQuery,
  notesTitle,
  timeShare,
} from '../../src/web/pages/db/statements.tsx'

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
const shape = (nodes: ReturnType<typeof blockingChains>): Shape[] =>
  nodes.map((n) => [n.session.pid, shape(n.children)])

describe('blockingChains', () => {
  test('a chain of blocker → blocked → blocked, and sessions that block nothing stay out', () => {
    const chains = blockingChains([session(1), session(2, [1]), session(3, [2]), session(4, [2]), session(5)])
    expect(shape(chains)).toEqual([
      [
        1,
        [
          [
            2,
            [
              [3, []],
              [4, []],
            ],
          ],
        ],
      ],
    ])
  })

  test('a session blocked by two sessions appears once, under the first, "also blocked by" the other; both blockers count it', () => {
    const chains = blockingChains([session(1), session(2), session(3, [1, 2])])
    expect(shape(chains)).toEqual([
      [1, [[3, []]]],
      [2, []],
    ])
    expect(
      chains.map((c) => [c.session.pid, c.blocks, c.children.map((n) => [n.session.pid, n.alsoBlockedBy])]),
    ).toEqual([
      [1, 1, [[3, [2]]]],
      [2, 1, []],
    ])
    // blocked by the root and by a session the root blocks: once, under the first pid named
    const nested = blockingChains([session(1), session(2, [1]), session(3, [2, 1])])
    expect(shape(nested)).toEqual([[1, [[2, [[3, []]]]]]])
    expect(nested[0]!.children[0]!.children[0]!.alsoBlockedBy).toEqual([1])
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
    expect(planRoot({ Plan: node, 'Execution Time': 1.5, 'Planning Time': 0.1 })).toEqual({
      root: node,
      executionMs: 1.5,
      planningMs: 0.1,
    })
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

describe('one default window, kept from tab to tab', () => {
  test("the default is one of the picker's ranges: six hours", () => {
    expect(DEFAULT_RANGE).toBe('6h')
    expect(RANGES.map((r) => r.key)).toContain(DEFAULT_RANGE)
  })

  test('links keep range, since and until, and nothing else of the route', () => {
    const query = new URLSearchParams(
      'range=custom&since=2026-01-01T00:00:00.000Z&until=2026-01-02T00:00:00.000Z&sort=calls&plan=2',
    )
    expect(windowQuery(query)).toBe(
      'range=custom&since=2026-01-01T00%3A00%3A00.000Z&until=2026-01-02T00%3A00%3A00.000Z',
    )
    expect(withWindow('#/databases/1/waits', new URLSearchParams('range=24h&limit=50'))).toBe(
      '#/databases/1/waits?range=24h',
    )
    expect(withWindow('#/databases/1/waits', new URLSearchParams('sort=calls'))).toBe('#/databases/1/waits')
  })
})

describe('statements list', () => {
  const rows = [
    { query_hash: 'aa11', query_text: 'SELECT * FROM Orders WHERE id = $1', total_time_ms: 300 },
    { query_hash: 'bb22', query_text: 'UPDATE items SET price = $1', total_time_ms: 100 },
    { query_hash: 'cc33', query_text: '', total_time_ms: 0 },
  ]

  test('the filter matches statement text ignoring case, or the hash; blank shows all', () => {
    expect(filterStatements(rows, 'orders').map((r) => r.query_hash)).toEqual(['aa11'])
    expect(filterStatements(rows, '  SET PRICE ').map((r) => r.query_hash)).toEqual(['bb22'])
    expect(filterStatements(rows, 'cc3').map((r) => r.query_hash)).toEqual(['cc33'])
    expect(filterStatements(rows, 'delete')).toEqual([])
    expect(filterStatements(rows, '   ')).toBe(rows)
  })

  test("each statement's share is of the listed statements' total time", () => {
    const share = timeShare(rows)
    expect(share(300)).toBe(0.75)
    expect(share(100)).toBe(0.25)
    expect(share(null)).toBeNull()
    expect(timeShare([{ total_time_ms: 0 }])(0)).toBeNull()
  })
})

describe('tables: last vacuum and analyze', () => {
  test('the later of the manual and the automatic run, saying which; undefined when neither ran', () => {
    expect(latestRun('2026-01-02T00:00:00Z', '2026-01-01T00:00:00Z')).toEqual({
      at: '2026-01-02T00:00:00Z',
      kind: 'manual',
    })
    expect(latestRun('2026-01-01T00:00:00Z', '2026-01-03T00:00:00Z')).toEqual({
      at: '2026-01-03T00:00:00Z',
      kind: 'auto',
    })
    expect(latestRun(null, 1_700_000_000_000)).toEqual({ at: 1_700_000_000_000, kind: 'auto' })
    expect(latestRun(1_700_000_000_000, null)).toEqual({ at: 1_700_000_000_000, kind: 'manual' })
    expect(latestRun(null, null)).toBeUndefined()
  })
})

describe("the doctor's figures in human units", () => {
  test('bytes, durations, shares and percentages', () => {
    expect(formatFigure('table_size_bytes', 5 * 1024 * 1024)).toBe('5.0 MB')
    expect(formatFigure('total_size_bytes_compressed', 2048)).toBe('2.0 KB')
    expect(formatFigure('longest_query_ms', 950)).toBe('950 ms')
    expect(formatFigure('longest_query_ms', 7_260_000)).toBe('2 h 1 min')
    expect(formatFigure('elapsed_s', 95)).toBe('1 min 35 s')
    expect(formatFigure('replication_lag_seconds', 3)).toBe('3.00 s')
    expect(formatFigure('last_seen_s_ago', 600)).toBe('10 min 0 s ago')
    expect(formatFigure('cache_hit_ratio', 0.9912)).toBe('99.12 %')
    expect(formatFigure('requested_share', 0.5)).toBe('50 %')
    expect(formatFigure('merge_progress_pct', 42.5)).toBe('42.5 %')
    expect(formatFigure('fsync_on', 0)).toBe('no')
    expect(formatFigure('pg_stat_statements_installed', 1)).toBe('yes')
    expect(formatFigure('active_queries', 12_345)).toBe((12_345).toLocaleString())
    expect(formatFigure('wal_status', 'lost')).toBe('lost')
    expect(formatFigure('query_p99_ms', null)).toBe('—')
  })

  test('times read as "ago" with the date', () => {
    const at = new Date(Date.now() - 3 * 3_600_000).toISOString()
    expect(formatFigure('last_autovacuum', at)).toStartWith('3 h ago (')
  })

  test("the catalog's time columns sent as epoch milliseconds read as times, never as counts", () => {
    // The doctor's dead-row finding sends pg_stat_user_tables' last_vacuum and last_autovacuum so.
    const at = Date.now() - 11_000
    for (const key of [
      'last_vacuum',
      'last_autovacuum',
      'last_analyze',
      'last_autoanalyze',
      'stats_reset',
      'xact_start',
      'as_of',
      'opened_at',
      'holder_since',
    ]) {
      const text = formatFigure(key, at)
      expect(text).toBe(`11 s ago (${new Date(at).toLocaleString()})`)
      expect(text).not.toContain(at.toLocaleString())
    }
    // A sequence's last_value stays a count.
    expect(formatFigure('last_value', 1_795_644_671_436)).toBe((1_795_644_671_436).toLocaleString())
  })

  test('labels drop the unit their value now shows', () => {
    expect(figureLabel('longest_query_ms')).toBe('longest query')
    expect(figureLabel('table_size_bytes')).toBe('table size')
    expect(figureLabel('merge_progress_pct')).toBe('merge progress')
    expect(figureLabel('last_seen_s_ago')).toBe('last seen')
    expect(figureLabel('cache_hit_ratio')).toBe('cache hit ratio')
  })
})

describe('doctor figure labels', () => {
  test('catalog column names read as words', () => {
    expect(figureLabel('n_dead_tup')).toBe('dead rows')
    expect(figureLabel('n_live_tup')).toBe('live rows')
    expect(figureLabel('idx_scan')).toBe('index scans')
    expect(figureLabel('blks_read')).toBe('blocks read from disk')
    expect(figureLabel('xmin_age_xids')).toBe('xmin horizon age (transactions)')
    expect(figureLabel('table_size_bytes')).toBe('table size')
  })

  test("a merge's progress is a share of 1", () => {
    expect(formatFigure('progress', 0.4523)).toBe('45.23 %')
    expect(formatFigure('rows_estimated', 401.98333333333335)).toBe((402).toLocaleString())
  })
})

describe('plans grouped by plan', () => {
  const plan = (
    ts: string,
    hash: string,
    time: number | null,
    extra: Partial<{ cost: number; source: 'sampled' | 'auto_explain'; changed: boolean }> = {},
  ) => ({
    ts,
    plan_hash: hash,
    actual_time_ms: time,
    total_cost: extra.cost ?? 100,
    source: extra.source ?? 'auto_explain',
    plan_changed: extra.changed ?? false,
  })

  test('one row per plan with its count, first and last seen, spread and sources; the plan seen last first', () => {
    // Newest first, as the API sends them: plan A, then B took over, then A again.
    const plans = [
      plan('2026-01-01T10:05:00Z', 'A', 4),
      plan('2026-01-01T10:04:00Z', 'A', 2),
      plan('2026-01-01T10:03:00Z', 'B', 90, { source: 'sampled', cost: 900 }),
      plan('2026-01-01T10:02:00Z', 'B', 70, { cost: 700 }),
      plan('2026-01-01T10:01:00Z', 'A', 1),
      plan('2026-01-01T10:00:00Z', 'A', 3),
    ]
    const groups = groupPlans(plans)
    expect(groups.map((g) => [g.plan_hash, g.samples.length])).toEqual([
      ['A', 4],
      ['B', 2],
    ])
    const [a, b] = groups as [(typeof groups)[0], (typeof groups)[0]]
    expect(a.latest.ts).toBe('2026-01-01T10:05:00Z')
    expect(a.firstSeen).toBe(Date.parse('2026-01-01T10:00:00Z'))
    expect(a.lastSeen).toBe(Date.parse('2026-01-01T10:05:00Z'))
    expect(a.time).toEqual({ min: 1, median: 2.5, max: 4 })
    expect(b.time).toEqual({ min: 70, median: 80, max: 90 })
    expect(b.cost).toEqual({ min: 700, median: 800, max: 900 })
    expect(b.sources).toEqual(['auto_explain', 'sampled'])
    // B replaced A at 10:02, A came back at 10:04; the oldest sample has nothing before it to differ from.
    expect(b.changedAt).toEqual([Date.parse('2026-01-01T10:02:00Z')])
    expect(a.changedAt).toEqual([Date.parse('2026-01-01T10:04:00Z')])
  })

  test("the oldest sample keeps the server's mark (it compared it with the plan before the window)", () => {
    const [g] = groupPlans([
      plan('2026-01-01T10:01:00Z', 'A', 1),
      plan('2026-01-01T10:00:00Z', 'A', 1, { changed: true }),
    ])
    expect(g!.changedAt).toEqual([Date.parse('2026-01-01T10:00:00Z')])
    expect(groupPlans([plan('2026-01-01T10:00:00Z', 'A', 1)])[0]!.changedAt).toEqual([])
  })

  test('fifty samples of one plan are one row', () => {
    const many = Array.from({ length: 50 }, (_, i) =>
      plan(new Date(Date.UTC(2026, 0, 1, 10, 0, 50 - i)).toISOString(), 'e203c75e8cce', 300 + i),
    )
    const groups = groupPlans(many)
    expect(groups).toHaveLength(1)
    expect(groups[0]!.samples).toHaveLength(50)
    expect(groups[0]!.time).toEqual({ min: 300, median: 324.5, max: 349 })
  })

  test('spread: plans explained without running them have no times; then the cost tells them apart', () => {
    expect(spread([null, null])).toBeUndefined()
    expect(spread([5])).toEqual({ min: 5, median: 5, max: 5 })
    expect(spread([3, null, 1, 2])).toEqual({ min: 1, median: 2, max: 3 })
  })
})

describe('statements: notes, counting start, the filter in links', () => {
  test('the notes box is titled by what its notes are about', () => {
    expect(notesTitle(['explain_plans'], 0)).toBe('Notes on plans')
    expect(notesTitle(['query_stats'], 0)).toBe('Why statements may be missing')
    expect(notesTitle([], 1)).toBe('Why statements may be missing')
    expect(notesTitle(['query_stats', 'explain_plans'], 0)).toBe('Notes on statements and plans')
    expect(notesTitle(['explain_plans'], 1)).toBe('Notes on statements and plans')
  })

  test('"counted since" only when counting started inside the window', () => {
    const since = Date.UTC(2026, 0, 1, 8)
    expect(countedSince('2026-01-01T13:02:00Z', since)).toBe(Date.UTC(2026, 0, 1, 13, 2))
    expect(countedSince(Date.UTC(2026, 0, 1, 13, 2), since)).toBe(Date.UTC(2026, 0, 1, 13, 2))
    expect(countedSince('2026-01-01T08:00:30Z', since)).toBeUndefined()
    expect(countedSince('2025-12-01T00:00:00Z', since)).toBeUndefined()
    expect(countedSince(null, since)).toBeUndefined()
    expect(countedSince('not a time', since)).toBeUndefined()
  })

  test('"counted since" is never before the agent first sent: a 10-minute bucket reads from the registration', () => {
    // The window 04:50-05:50; the agent started at 05:18, its statements' first bucket is 05:10's.
    const since = Date.UTC(2026, 0, 1, 4, 50)
    const registered = '2026-01-01T05:18:07Z'
    expect(countedSince(Date.UTC(2026, 0, 1, 5, 10), since, registered)).toBe(Date.parse(registered))
    expect(countedSince('2026-01-01T05:00:00Z', since, registered)).toBe(Date.parse(registered))
    // A later first bucket (a statement first run at 05:30) keeps its own time.
    expect(countedSince(Date.UTC(2026, 0, 1, 5, 30), since, registered)).toBe(Date.UTC(2026, 0, 1, 5, 30))
    // Registered before the window: the bucket alone decides.
    expect(countedSince(Date.UTC(2026, 0, 1, 4, 0), since, '2025-12-01T00:00:00Z')).toBeUndefined()
    expect(countedSince(null, since, registered)).toBeUndefined()
  })

  test('links to Doctor, Recommendations and Alerts go to Issues, at the cause when one is named', () => {
    const db = { id: 'd 1' }
    expect(issuesHref(db)).toBe('#/databases/d%201/issues')
    expect(issuesHref(db, 'pg_dead_tuples:public.t')).toBe('#/databases/d%201/issues?finding=pg_dead_tuples%3Apublic.t')
    expect(eventHref('#/databases/abc/alerts', 'cause:pid:42')).toBe('#/databases/abc/issues?finding=cause%3Apid%3A42')
    expect(eventHref('#/databases/abc/alerts', null)).toBe('#/databases/abc/issues')
    expect(eventHref('#/databases/abc/doctor?finding=pg_x%3Ay', 'other')).toBe(
      '#/databases/abc/issues?finding=pg_x%3Ay',
    )
    expect(eventHref('#/databases/abc/recommendations')).toBe('#/databases/abc/issues')
    expect(eventHref('#/databases/abc/tables/public%2Ft', 'public.t')).toBe('#/databases/abc/tables/public%2Ft')
  })

  test("a statement's link and its way back keep the window and the filter, nothing else", () => {
    expect(listQuery(new URLSearchParams('range=24h&q=from items&sort=calls&plan=abc'))).toBe('range=24h&q=from+items')
    expect(listQuery(new URLSearchParams('sort=calls'))).toBe('')
  })
})

describe('the live stream', () => {
  test('a stream is taken for dead after twice its interval and 5 s; reconnects wait 2 s, 4 s … 30 s', () => {
    expect(staleAfterMs(5)).toBe(15_000)
    expect(staleAfterMs(60)).toBe(125_000)
    expect([1, 2, 3, 4, 5, 9].map(reconnectDelay)).toEqual([2000, 4000, 8000, 16_000, 30_000, 30_000])
  })

  test('the badge says how old the last data are while reconnecting', () => {
    const now = 1_700_000_000_000
    const base = { ts: null, active: [] }
    expect(streamStatus({ ...base, state: 'live', receivedAt: now }, 5, now)).toBe('Live, every 5 s')
    expect(streamStatus({ ...base, state: 'reconnecting', receivedAt: now - 40_000 }, 5, now)).toBe(
      'Reconnecting… (last data 40 s ago)',
    )
    expect(streamStatus({ ...base, state: 'reconnecting', receivedAt: now - 125_000 }, 5, now)).toBe(
      'Reconnecting… (last data 2 min 5 s ago)',
    )
    expect(streamStatus({ ...base, state: 'reconnecting', message: 'session expired' }, 5, now)).toBe(
      'Reconnecting… (session expired)',
    )
    expect(streamStatus({ ...base, state: 'paused' }, 5, now)).toBe('Paused')
  })

  test('once the agent stopped sending, the badge says from when the data are instead of "Live"', () => {
    const now = 1_700_000_000_000
    const from = new Date(now - 180_000).toISOString()
    const base = { ts: from, active: [] }
    const expected = `Data from ${fmtClock(from, now)}, not live`
    expect(streamStatus({ ...base, state: 'live', receivedAt: now }, 5, now, from)).toBe(expected)
    expect(streamStatus({ ...base, state: 'reconnecting', receivedAt: now - 40_000 }, 5, now, from)).toBe(expected)
    expect(streamStatus({ ...base, state: 'paused' }, 5, now, from)).toBe('Paused')
    expect(streamStatus({ ...base, state: 'connecting' }, 5, now, from)).toBe('Connecting…')
    expect(streamStatus({ ...base, state: 'live', receivedAt: now }, 5, now, null)).toBe('Live, every 5 s')
  })
})

describe('webhook test outcome', () => {
  test('delivered or not, with the generic reason of the API', () => {
    expect(describeTest({ delivered: true })).toBe('Delivered: the receiver answered 2xx.')
    expect(describeTest({ delivered: false, reason: TEST_NOT_DELIVERED })).toBe(
      `Not delivered: ${TEST_NOT_DELIVERED} (the server's log has the cause).`,
    )
    expect(describeTest({ delivered: false, reason: 'no route.' })).toBe(
      "Not delivered: no route (the server's log has the cause).",
    )
    expect(describeTest({ delivered: false })).toBe("Not delivered: no answer (the server's log has the cause).")
  })
})

describe('statement I/O time', () => {
  const row = (read: number, write: number, blocks: number) => ({
    blk_read_time_ms: read,
    blk_write_time_ms: write,
    shared_blks_read: blocks,
  })

  test('read plus write time', () => {
    expect(ioTime(row(1.5, 2.25, 0))).toBe(3.75)
  })

  test('"track_io_timing is off" only when every statement has 0 although blocks were read', () => {
    expect(ioTimingOff([row(0, 0, 10), row(0, 0, 0)], 0)).toBe('off')
    expect(ioTimingOff([row(0, 0, 10)], undefined)).toBe('probably off')
    expect(ioTimingOff([row(0, 0, 10)], 1)).toBeUndefined()
    expect(ioTimingOff([row(0, 0, 10), row(0.2, 0, 3)], 0)).toBeUndefined()
    expect(ioTimingOff([row(0, 0, 0)], 0)).toBeUndefined()
    expect(ioTimingOff([], 0)).toBeUndefined()
  })
})

describe('checkpoints spread over the minutes they ran', () => {
  const t0 = Date.UTC(2026, 0, 1, 10, 0)
  type Point = Parameters<typeof spreadCheckpoints>[0][number]
  const point = (minute: number, write: number, sync: number, buffers: number, timed = 0) =>
    ({
      ts: new Date(t0 + minute * 60_000).toISOString(),
      checkpoint_write_time_ms: write,
      checkpoint_sync_time_ms: sync,
      buffers_checkpoint: buffers,
      checkpoints_timed: timed,
    }) as unknown as Point

  test('a timed checkpoint written over 4.5 minutes (checkpoint_timeout 5 min × 0.9) is shared among them, totals kept', () => {
    // PostgreSQL counted it all in the minute it ended (10:05): 270 s of writes, 5,400 buffers.
    const points = [0, 1, 2, 3, 4].map((m) => point(m, 0, 0, 0)).concat([point(5, 270_000, 0, 5400, 1)])
    const spread = spreadCheckpoints(points, 60_000)
    expect(spread.map((p) => p.checkpoint_write_time_ms)).toEqual([0, 30_000, 60_000, 60_000, 60_000, 60_000])
    expect(spread.map((p) => p.buffers_checkpoint)).toEqual([0, 600, 1200, 1200, 1200, 1200])
    // The count stays where the checkpoint ended.
    expect(spread.map((p) => p.checkpoints_timed)).toEqual([0, 0, 0, 0, 0, 1])
  })

  test('the sync comes after the writes; buckets before the first point get points of their own', () => {
    const spread = spreadCheckpoints([point(0, 0, 0, 0), point(1, 90_000, 30_000, 300)], 60_000)
    // Ends 10:02: sync 10:01:30–10:02, writes 10:00:00–10:01:30.
    expect(
      spread.map((p) => [
        p.ts.slice(11, 16),
        p.checkpoint_write_time_ms,
        p.checkpoint_sync_time_ms,
        p.buffers_checkpoint,
      ]),
    ).toEqual([
      ['10:00', 60_000, 0, 200],
      ['10:01', 30_000, 30_000, 100],
    ])
    const earlier = spreadCheckpoints([point(1, 120_000, 0, 40)], 60_000)
    expect(earlier.map((p) => [p.ts.slice(11, 16), p.checkpoint_write_time_ms, p.buffers_checkpoint])).toEqual([
      ['10:00', 60_000, 20],
      ['10:01', 60_000, 20],
    ])
  })

  test('an immediate CHECKPOINT (no time counted) stays where it was', () => {
    expect(spreadCheckpoints([point(0, 0, 0, 70, 0)], 60_000)).toEqual([point(0, 0, 0, 70, 0)])
  })
})

describe('overview cards take the doctor’s word', () => {
  const f = (rule: string, severity: 'critical' | 'warning' | 'info') => ({ rule, severity })

  test('the worst finding on the card’s subject, counted; information leaves the card alone', () => {
    const findings = [
      f('pg_dead_tuples', 'critical'),
      f('pg_dead_tuples', 'critical'),
      f('pg_dead_tuples', 'warning'),
      f('pg_unused_indexes', 'critical'),
    ]
    expect(doctorVerdict(findings, CARD_RULES.dead!)).toEqual({ tone: 'critical', note: '2 critical findings' })
    expect(doctorVerdict([f('pg_blocked_sessions', 'warning')], CARD_RULES.blocked!)).toEqual({
      tone: 'warning',
      note: '1 warning finding',
    })
    expect(doctorVerdict([f('pg_cache_hit_ratio', 'info')], CARD_RULES.hit!)).toEqual({ tone: undefined })
    expect(doctorVerdict(undefined, CARD_RULES.dead!)).toEqual({ tone: undefined })
  })

  test('a card is as bad as the worse of its own thresholds and the doctor', () => {
    expect(worseTone(undefined, 'critical')).toBe('critical')
    expect(worseTone('warning', undefined)).toBe('warning')
    expect(worseTone('warning', 'critical')).toBe('critical')
    expect(worseTone(undefined, undefined)).toBeUndefined()
  })

  test('top issues: one line per cause, the doctor’s order (worst first), each with its count of findings', () => {
    const cause = (key: string, severity: FindingGroup['severity'], findings: string[]): FindingGroup => ({
      key,
      kind: 'finding',
      severity,
      title: `${key} title`,
      lead: findings[0]!,
      findings,
      objects: [],
      how_to_fix: [],
    })
    const groups = [
      cause('session:pid 7', 'critical', [
        'pg_idle_in_transaction:pid 7',
        'pg_dead_tuples:public.t',
        'pg_xmin_horizon:pid 7',
      ]),
      cause('index:public.o(c)', 'warning', ['pg_sequential_scans:public.o', 'pg_slow_statements:-4']),
      cause('pg_cache_hit_ratio', 'warning', ['pg_cache_hit_ratio']),
      cause('pg_checkpoints', 'info', ['pg_checkpoints']),
    ]
    // The findings as the doctor sends them (worst first, at most 100): the lead of the second cause left out.
    const findings = ['pg_dead_tuples:public.t', 'pg_idle_in_transaction:pid 7', 'pg_cache_hit_ratio'].map(
      (key) => ({ key, detail: `${key} detail` }) as any,
    )
    expect(topCauses(groups, findings).map((c) => [c.group.key, c.findings, c.lead?.key])).toEqual([
      ['session:pid 7', 3, 'pg_idle_in_transaction:pid 7'],
      ['index:public.o(c)', 2, undefined],
      ['pg_cache_hit_ratio', 1, 'pg_cache_hit_ratio'],
    ])
    expect(topCauses([], findings)).toEqual([])
  })

  test('the range in words', () => {
    expect(rangeWords({ range: '6h', bounds: [0, 1] })).toBe('the last 6 hours')
    expect(rangeWords({ range: '1h', bounds: [0, 1] })).toBe('the last hour')
  })
})

describe('the header follows the agent', () => {
  test('it asks for the status at the poll interval, from 1 s to 30 s', () => {
    expect([healthPollMs(1), healthPollMs(10), healthPollMs(300), healthPollMs(0)]).toEqual([
      1000, 10_000, 30_000, 10_000,
    ])
  })
})

describe("the overview's availability card", () => {
  test('30 days and 24 hours as percentages, toned by the 30-day share, a dash before any report', () => {
    expect(availabilityCard({ uptime_30d: 1, uptime_24h: 1 })).toMatchObject({
      value: '100 %',
      sub: 'over 30 days · 100 % in 24 h',
      tone: undefined,
    })
    expect(availabilityCard({ uptime_30d: 0.9995, uptime_24h: 0.98 })).toMatchObject({
      value: '99.95 %',
      sub: 'over 30 days · 98.00 % in 24 h',
      tone: undefined,
    })
    expect(availabilityCard({ uptime_30d: 0.995, uptime_24h: null }).tone).toBe('warning')
    expect(availabilityCard({ uptime_30d: 0.9, uptime_24h: 0.5 }).tone).toBe('critical')
    expect(availabilityCard({ uptime_30d: null, uptime_24h: null })).toMatchObject({
      value: '—',
      sub: 'over 30 days',
      tone: undefined,
    })
  })

  test('a ratio of two minutes says so: the time watched of the 30 days, on the card and the list', () => {
    expect(availabilityCard({ uptime_30d: 0.4024, uptime_24h: 0.4024, uptime_30d_watched_ms: 120_000 })).toMatchObject({
      value: '40.24 %',
      sub: 'over 2 min 0 s watched of 30 days · 40.24 % in 24 h',
    })
    expect(watchedWords(2 * 3_600_000 + 5 * 60_000, 30)).toBe('over 2 h 5 min watched of 30 days')
    // The whole period (up to an hour short of it): no coverage to say.
    expect(watchedWords(30 * 86_400_000 - 1_000, 30)).toBe('over 30 days')
  })
})

describe('outages on the Events page and the list', () => {
  test('an Outages filter, and marks for the database going down and coming back', () => {
    expect(GROUPS.find((g) => g.key === 'outages')).toEqual({
      key: 'outages',
      label: 'Outages',
      kinds: ['database_down', 'database_up'],
    })
    expect([MARKED.database_down, MARKED.database_up]).toEqual(['down', 'up'])
  })

  test("the list's badge: red while down or after its agent stopped, grey before any data, as the header", () => {
    const db = {
      status: 'disconnected' as const,
      reason: null,
      down_since: null,
      last_seen_at: '2026-01-01T00:00:00.000Z',
    }
    expect(statusTone({ ...db, status: 'connected' })).toBe('ok')
    expect(statusTone({ ...db, reason: 'database_down', down_since: '2026-01-01T00:00:00.000Z' })).toBe('critical')
    expect(
      statusTone({ ...db, reason: 'database_down', down_since: '2026-01-01T00:00:00.000Z', last_seen_at: null }),
    ).toBe('critical')
    expect(statusTone({ ...db, reason: 'agent_silent' })).toBe('critical')
    expect(statusTone({ ...db, reason: 'no_data', last_seen_at: null })).toBe('muted')
  })
})
