// The event-loop lag sampler (src/server/loop-lag.ts) that /healthz reports: a loop held for 300 ms shows
// as a lag of at least 300 ms less one sampling period (the sample was due up to 20 ms after the hold began),
// and the median stays below it.
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
  } finally {
    lag.stop()
  }
})
