// The event-loop lag sampler (src/server/loop-lag.ts) that /healthz reports: a loop held for 300 ms shows
// as a lag of at least 300 ms less one sampling period (the sample was due up to 20 ms after the hold began),
// the median stays below it, and the p99 counts the runs the hold prevented.
import { expect, test } from 'bun:test'
import { startLoopLag } from '../src/server/loop-lag.ts'
import { until } from './support/wait.ts'

test('a loop held for 300 ms shows as a lag of at least 280 ms; the median stays below', async () => {
  const lag = startLoopLag()
  try {
    // Enough samples of an idle loop that one late sample cannot be the median.
    await until('20 samples', async () => (lag.figures().samples >= 20 ? true : undefined))
    const held = performance.now()
    while (performance.now() - held < 300) {
      // holding the loop, as a long synchronous store read would
    }
    // The first sample after the hold records it.
    await until('the hold to be sampled', async () => (lag.figures().lag_max_ms >= 280 ? true : undefined))
    const figures = lag.figures()
    expect(figures.window_s).toBe(60)
    expect(figures.lag_max_ms).toBeGreaterThanOrEqual(280)
    expect(figures.lag_p50_ms).toBeLessThan(280)
    // The hold weighs by its length: the runs it prevented count, so the p99 of a minute with a 300 ms
    // hold among a few dozen quick runs is well above the quick ones.
    expect(figures.lag_p99_ms).toBeGreaterThanOrEqual(200)
  } finally {
    lag.stop()
  }
})
