// The Host page's forecast line: from the latest free-space sample straight to zero at the fill time
// when that comes within two windows of the window's end (the axis then reaches it), else along the
// same line to the window's end, the fill time in the label; none when the filesystem does not fill.
// And the trend in words.
import { expect, test } from 'bun:test'
import { forecastLine, trendWords } from '../../src/web/pages/db/host.tsx'

const T0 = Date.parse('2026-01-01T00:00:00.000Z')
const series = [
  { ts: '2026-01-01T00:00:00.000Z', available_bytes: 300, total_bytes: 1000 },
  { ts: '2026-01-01T00:01:00.000Z', available_bytes: 200, total_bytes: 1000 },
  { ts: '2026-01-01T00:02:00.000Z', available_bytes: null, total_bytes: null },
]
const trend = {
  rate_bytes_per_s: -100 / 60,
  samples: 2,
  since: '2026-01-01T00:00:00.000Z',
  until: '2026-01-01T00:01:00.000Z',
  basis_seconds: 60,
}

test('a fill time within reach: the forecast runs from the last sample to zero there, and the axis reaches it', () => {
  const window: [number, number] = [T0, T0 + 2 * 60_000]
  const line = forecastLine({ series, forecast: { trend, fills_at: '2026-01-01T00:03:00.000Z' } }, window)
  expect(line.times).toEqual([0, 1, 3].map((m) => T0 + m * 60_000))
  expect(line.series.map((s) => s.values)).toEqual([
    [300, 200, null],
    [null, 200, 0],
  ])
  expect(line.series[1]!.label).toStartWith('forecast: fills ')
  expect(line.range).toEqual([T0, T0 + 3 * 60_000])
})

test('a fill time beyond two windows: the line goes to the window end, on the way to zero', () => {
  // fills 10 minutes after the last sample, the window ends 1 minute after it (2-minute window: reach 4 minutes)
  const window: [number, number] = [T0, T0 + 2 * 60_000]
  const line = forecastLine({ series, forecast: { trend, fills_at: '2026-01-01T00:11:00.000Z' } }, window)
  expect(line.times).toEqual([0, 1, 2].map((m) => T0 + m * 60_000))
  expect(line.series[1]!.values).toEqual([null, 200, 180])
  expect(line.range).toEqual(window)
})

test('no fill time, or one before the last sample: free space only; the trend in words', () => {
  expect(forecastLine({ series, forecast: { trend: null, fills_at: null } }).series).toEqual([
    { label: 'free', values: [300, 200, null] },
  ])
  expect(forecastLine({ series, forecast: { trend: null, fills_at: '2025-12-31T00:00:00.000Z' } }).series.length).toBe(
    1,
  )
  expect(trendWords({ forecast: { trend: { ...trend, rate_bytes_per_s: 549_376 }, fills_at: null } })).toBe(
    'Free space grows by 536.5 KB/s (fitted over 1 min 0 s): no fill date.',
  )
  expect(trendWords({ forecast: { trend: null, fills_at: null } })).toBe(
    'Too little history for a forecast (it needs 10 minutes).',
  )
})
