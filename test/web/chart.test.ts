import { describe, expect, test } from 'bun:test'
import {
  chartSummary,
  collectingSince,
  completeBuckets,
  shownRange,
  spanWords,
  stack,
  withGaps,
  withoutPartialStarts,
} from '../../src/web/components/chart.tsx'

const MIN = 60_000

describe('chart time axis', () => {
  test('spans exactly the given range, with empty ends', () => {
    const since = 1_700_000_000_000
    const until = since + 6 * 3600_000
    const [xs, ys] = withGaps([since + 3600_000, since + 3600_000 + MIN], [{ label: 'a', values: [1, 2] }], MIN, [
      since,
      until,
    ])
    expect(xs[0]).toBe(since / 1000)
    expect(xs[xs.length - 1]).toBe(until / 1000)
    expect(ys[0]).toEqual([null, 1, 2, null])
  })

  test('without a range it pads to the left only and ends at now', () => {
    const now = 1_700_000_000_000
    const [xs, ys] = withGaps([now - 2 * MIN, now - MIN], [{ label: 'a', values: [1, 2] }], MIN, undefined, now)
    expect(xs[xs.length - 1]).toBe(now / 1000)
    expect(xs[0]).toBe(now / 1000 - 3600)
    expect(Math.max(...xs)).toBeLessThanOrEqual(now / 1000)
    expect(ys[0]).toEqual([null, 1, 2, null])
  })

  test('the bucket still running at the end is left out', () => {
    const end = 1_700_000_000_000
    const times = [end - 2 * MIN, end - MIN + 10_000]
    const [t, s] = completeBuckets(times, [{ label: 'a', values: [5, 1] }], MIN, end)
    expect(t).toEqual([end - 2 * MIN])
    expect(s[0]!.values).toEqual([5])
    expect(completeBuckets([end - 2 * MIN, end - MIN], [{ label: 'a', values: [5, 6] }], MIN, end)[0]).toHaveLength(2)
    // A single point, even unfinished, is kept: the chart would otherwise be empty beside non-zero totals.
    expect(completeBuckets([end - MIN / 2], [{ label: 'a', values: [7] }], MIN, end)[0]).toEqual([end - MIN / 2])
  })
})

describe('partial buckets at the start', () => {
  const t0 = 1_700_000_000_000
  const times = [t0, t0 + MIN, t0 + 2 * MIN, t0 + 6 * MIN, t0 + 7 * MIN, t0 + 8 * MIN]

  test("the first bucket of a series and the first after a gap are left out (the agent's first cycle is a baseline)", () => {
    // 20 s of a 60 s bucket, two full ones, the agent down four minutes, 30 s, then full ones again.
    const [s] = withoutPartialStarts(times, [{ label: 'commits', values: [4, 12, 12, 6, 12, 12] }], MIN, 'gaps')
    expect(s!.values).toEqual([null, 12, 12, null, 12, 12])
  })

  test('a null (a counter without a delta: the first sample, a reset) starts a new run too', () => {
    const [s] = withoutPartialStarts(times.slice(0, 4), [{ label: 'x', values: [null, 3, 9, 9] }], MIN, 'gaps')
    expect(s!.values).toEqual([null, null, 9, null])
  })

  test("'first' leaves out the chart's first bucket only: later gaps are quiet intervals (a statement not called)", () => {
    const series = [
      { label: 'calls', values: [2, 10, 10, 10, 10, 10] },
      { label: 'other', values: [null, null, 5, 5, null, 5] },
    ]
    const [calls, other] = withoutPartialStarts(times, series, MIN, 'first')
    expect(calls!.values).toEqual([null, 10, 10, 10, 10, 10])
    expect(other!.values).toEqual([null, null, 5, 5, null, 5])
    expect(withoutPartialStarts(times, series, MIN, 'none')).toBe(series)
  })

  test('a series with no complete bucket keeps its latest value rather than show nothing', () => {
    const [s] = withoutPartialStarts([t0, t0 + 5 * MIN], [{ label: 'x', values: [3, 4] }], MIN, 'gaps')
    expect(s!.values).toEqual([null, 4])
  })

  test('with the running last bucket also left out, the legend and the text alternative read only full buckets', () => {
    const end = t0 + 3 * MIN - 20_000
    const [kept, complete] = completeBuckets(times.slice(0, 3), [{ label: 'calls', values: [7, 60, 15] }], MIN, end)
    const shown = withoutPartialStarts(kept, complete, MIN, 'gaps')
    expect(shown[0]!.values).toEqual([null, 60])
    expect(chartSummary('Calls per minute', 'count', kept, shown)).toContain('calls: latest 60, max 60')
  })
})

describe('collecting since', () => {
  const until = 1_700_000_000_000
  const range: [number, number] = [until - 6 * 3600_000, until]

  test('data starting well inside the window: the chart says since when', () => {
    expect(collectingSince(until - 20 * MIN, range, MIN)).toBe(until - 20 * MIN)
  })

  test('data from the start of the window (give or take a bucket or 2 % of it): nothing to say', () => {
    expect(collectingSince(range[0] + MIN, range, MIN)).toBeUndefined()
    expect(collectingSince(range[0] + 5 * MIN, range, MIN)).toBeUndefined()
    expect(collectingSince(range[0] - 3600_000, range, MIN)).toBeUndefined()
    expect(collectingSince(undefined, range, MIN)).toBeUndefined()
    expect(collectingSince(until - MIN, undefined, MIN)).toBeUndefined()
  })

  test('the text alternative names it', () => {
    expect(
      chartSummary('Calls', 'count', [until - MIN], [{ label: 'calls', values: [3] }], range, 'collecting since 14:02'),
    ).toContain('(collecting since 14:02). calls: latest 3')
  })
})

test('a per-bucket chart names its bucket', async () => {
  const { perBucket } = await import('../../src/web/pages/db/common.tsx')
  expect([60, 300, 3600, 7200, 86_400].map(perBucket)).toEqual([
    'per minute',
    'per 5 minutes',
    'per hour',
    'per 2 hours',
    'per day',
  ])
})

describe('legend and text alternative', () => {
  test('a stacked chart restacks without its hidden series; the series above starts where the hidden one did', () => {
    const ys = [
      [1, 2, null],
      [10, 20, 30],
      [100, 200, 300],
    ]
    expect(stack(ys, [false, false, false])).toEqual([
      [1, 2, null],
      [11, 22, 30],
      [111, 222, 330],
    ])
    expect(stack(ys, [false, true, false])).toEqual([
      [1, 2, null],
      [1, 2, 0],
      [101, 202, 300],
    ])
  })

  test("the summary names the span and each series' latest and largest value with its unit", () => {
    const since = Date.UTC(2026, 0, 1, 10)
    const times = [since, since + MIN, since + 2 * MIN]
    const text = chartSummary(
      'Total time per minute',
      'ms',
      times,
      [
        { label: 'total time', values: [5, 2500, 40] },
        { label: 'empty', values: [null, null, null] },
      ],
      [since, since + 6 * 3600_000],
    )
    expect(text).toStartWith('Total time per minute, ')
    expect(text).toContain(' to ')
    expect(text).toContain('total time: latest 40 ms, max 2.50 s')
    expect(text).toContain('empty: no values')
    expect(chartSummary('Calls', 'count', [], [{ label: 'calls', values: [] }])).toBe(
      'Calls: no points in this time range.',
    )
  })
})

describe('a range longer than the data', () => {
  const until = 1_700_000_000_000
  const range: [number, number] = [until - 6 * 3600_000, until]

  test('the axis starts a step before the data when they start well inside the range, and ends with it', () => {
    const since = collectingSince(until - 20 * MIN, range, MIN)
    expect(shownRange(range, since, MIN)).toEqual([until - 21 * MIN, until])
    // Twenty minutes of a six-hour range fill the chart instead of its last 6 %.
    const [xs] = withGaps(
      [until - 20 * MIN, until - 19 * MIN],
      [{ label: 'a', values: [1, 2] }],
      MIN,
      shownRange(range, since, MIN),
    )
    expect(xs[0]).toBe((until - 21 * MIN) / 1000)
    expect(xs[xs.length - 1]).toBe(until / 1000)
  })

  test('at least ten steps are shown, never more than the range; data from the start keep the whole range', () => {
    expect(shownRange(range, until - 2 * MIN, MIN)).toEqual([until - 10 * MIN, until])
    expect(shownRange(range, undefined, MIN)).toEqual(range)
    expect(shownRange(undefined, until - MIN, MIN)).toBeUndefined()
  })

  test('the caption states the range asked for', () => {
    expect([spanWords(6 * 3600_000), spanWords(7 * 86_400_000), spanWords(90 * MIN)]).toEqual(['6 h', '7 d', '90 min'])
  })
})
