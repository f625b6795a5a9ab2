import { describe, expect, test } from 'bun:test'
import { completeBuckets, withGaps } from '../../src/web/components/chart.tsx'

const MIN = 60_000

describe('chart time axis', () => {
  test('spans exactly the given range, with empty ends', () => {
    const since = 1_700_000_000_000
    const until = since + 6 * 3600_000
    const [xs, ys] = withGaps([since + 3600_000, since + 3600_000 + MIN], [{ label: 'a', values: [1, 2] }], MIN, [since, until])
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

test('a per-bucket chart names its bucket', async () => {
  const { perBucket } = await import('../../src/web/pages/db/common.tsx')
  expect([60, 300, 3600, 7200, 86_400].map(perBucket)).toEqual(['per minute', 'per 5 minutes', 'per hour', 'per 2 hours', 'per day'])
})
