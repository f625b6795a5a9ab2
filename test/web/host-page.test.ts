// The Host page's forecast line: from the latest free-space sample straight to zero at the fill time,
// appended after the series; none when the filesystem does not fill.
import { expect, test } from 'bun:test'
import { forecastLine } from '../../src/web/pages/db/host.tsx'

const series = [
  { ts: '2026-01-01T00:00:00.000Z', available_bytes: 300, total_bytes: 1000 },
  { ts: '2026-01-01T00:01:00.000Z', available_bytes: 200, total_bytes: 1000 },
  { ts: '2026-01-01T00:02:00.000Z', available_bytes: null, total_bytes: null },
]

test('a filling filesystem: the forecast runs from the last sample to zero at the fill time', () => {
  const line = forecastLine({ series, forecast: { trend: null, fills_at: '2026-01-01T00:03:00.000Z' } })
  expect(line.times).toEqual([0, 1, 3].map((m) => Date.parse('2026-01-01T00:00:00.000Z') + m * 60_000))
  expect(line.series).toEqual([
    { label: 'free', values: [300, 200, null] },
    { label: 'forecast', values: [null, 200, 0] },
  ])
})

test('no fill time, or one before the last sample: free space only', () => {
  expect(forecastLine({ series, forecast: { trend: null, fills_at: null } }).series).toEqual([{ label: 'free', values: [300, 200, null] }])
  expect(forecastLine({ series, forecast: { trend: null, fills_at: '2025-12-31T00:00:00.000Z' } }).series.length).toBe(1)
})
