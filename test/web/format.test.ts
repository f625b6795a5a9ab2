// The dashboard's formatters: sizes round below a kilobyte ("402 B", not "401.98333333333335 B"), counts
// and durations keep a sensible number of decimals, times of day say the date when it is not today, and
// byte axes tick at whole binary units.
import { describe, expect, test } from 'bun:test'
import { BYTE_INCRS, axisValue, formatValue } from '../../src/web/components/chart.tsx'
import { ago, fmtBytes, fmtClock, fmtMs, fmtNum, retryDelay } from '../../src/web/components/ui.tsx'

describe('fmtBytes', () => {
  test('below a kilobyte: whole bytes, one decimal under 10', () => {
    expect(fmtBytes(401.98333333333335)).toBe('402 B')
    expect(fmtBytes(9.5)).toBe('9.5 B')
    expect(fmtBytes(9.96)).toBe('10 B')
    expect(fmtBytes(0)).toBe('0 B')
    expect(fmtBytes(0.25)).toBe('0.3 B')
    expect(fmtBytes(1023.7)).toBe('1.0 KB')
  })

  test('from a kilobyte on: one decimal of the binary unit', () => {
    expect(fmtBytes(1024)).toBe('1.0 KB')
    expect(fmtBytes(5000)).toBe('4.9 KB')
    expect(fmtBytes(5 * 1024 * 1024)).toBe('5.0 MB')
    expect(fmtBytes(-2048)).toBe('-2.0 KB')
  })

  test('nothing to show', () => {
    expect(fmtBytes(null)).toBe('—')
    expect(fmtBytes(undefined)).toBe('—')
    expect(fmtBytes(Number.NaN)).toBe('—')
  })

  test('a byte rate under a kilobyte per second reads as whole bytes', () => {
    expect(formatValue('bytes/s', 401.98333333333335)).toBe('402 B/s')
  })
})

describe('other formatters', () => {
  test("ago: counted to now, or to a given moment (a stale snapshot's time) whatever the clock says", () => {
    const at = '2026-01-31T12:00:00.000Z'
    expect(ago(at, '2026-01-31T12:00:42.000Z')).toBe('42 s ago')
    expect(ago(at, Date.parse(at) + 9 * 60_000)).toBe('9 min ago')
    expect(ago(at, Date.parse(at) - 5000)).toBe('0 s ago')
    expect(ago(new Date(Date.now() - 3 * 3_600_000).toISOString())).toBe('3 h ago')
    // A moment that is no time falls back to now.
    expect(ago(new Date(Date.now() - 120_000).toISOString(), 'not a time')).toBe('2 min ago')
    expect(ago(null, at)).toBe('never')
  })

  test('fmtNum: counts as they are, averages with at most two decimals', () => {
    expect(fmtNum(12_345)).toBe((12_345).toLocaleString())
    expect(fmtNum(401.98333333333335)).toBe((402).toLocaleString())
    expect(fmtNum(42.345)).toBe((42.3).toLocaleString())
    expect(fmtNum(1.23456)).toBe((1.23).toLocaleString())
    expect(fmtNum(null)).toBe('—')
  })

  test('fmtMs', () => {
    expect(fmtMs(0.123456)).toBe('0.12 ms')
    expect(fmtMs(9.87654)).toBe('9.9 ms')
    expect(fmtMs(401.98333333333335)).toBe('402 ms')
    expect(fmtMs(2500)).toBe('2.50 s')
    expect(fmtMs(-5)).toBe('-5.0 ms')
  })

  test('per-second rates are compact', () => {
    expect(formatValue('per_s', 401.98333333333335)).toBe('402/s')
    expect(formatValue('per_s', 0.016666666666666666)).toBe('0.02/s')
    expect(formatValue('per_s', 12_345.678)).toBe('12.3k/s')
  })

  test('fmtClock: the time of day, with the date when it is another day', () => {
    const now = new Date(2026, 2, 10, 15, 0).getTime()
    const today = new Date(2026, 2, 10, 14, 2).getTime()
    expect(fmtClock(today, now)).toBe(
      new Date(today).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' }),
    )
    const earlier = new Date(2026, 2, 8, 9, 5).getTime()
    expect(fmtClock(earlier, now)).toContain(
      new Date(earlier).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' }),
    )
    expect(fmtClock(earlier, now)).not.toBe(fmtClock(today, now))
    expect(fmtClock(null)).toBe('—')
  })

  test('a call that cannot reach the server is retried after 5 s, 10 s, 20 s, then every 30 s', () => {
    expect([1, 2, 3, 4, 9].map(retryDelay)).toEqual([5000, 10_000, 20_000, 30_000, 30_000])
  })
})

describe('byte axes', () => {
  test('ticks fall on whole binary units: 5 KB, not 4.9 KB', () => {
    expect(BYTE_INCRS).toContain(5 * 1024)
    expect(BYTE_INCRS).toContain(10 * 1024)
    expect(BYTE_INCRS).toContain(2 * 1024 * 1024)
    expect(BYTE_INCRS).not.toContain(5000)
    // Ascending, so uPlot can pick the smallest that leaves room between ticks.
    expect(BYTE_INCRS.every((v, i) => i === 0 || v > BYTE_INCRS[i - 1]!)).toBe(true)
  })

  test('axis labels drop a ".0" of whole units', () => {
    expect(axisValue('bytes/s', 5 * 1024)).toBe('5 KB/s')
    expect(axisValue('bytes', 1536)).toBe('1.5 KB')
    expect(axisValue('bytes/s', 500)).toBe('500 B/s')
    expect(axisValue('count', 2000)).toBe('2k')
  })
})
