// How late the server's event loop runs: a timer asks to run every SAMPLE_MS and records by how much it
// was late each time, over the last WINDOW_MS. The percentiles count a late run as the runs the hold
// prevented too (each late by what a request arriving then waited), so they weigh a stall by its length. Work that holds the loop (a long synchronous SQLite read,
// a big JSON.stringify) delays every request the same way, so this is the figure to watch under load.
// `dbm serve` starts one; /healthz reports it as `event_loop`.

/** How often the loop is sampled. */
const SAMPLE_MS = 20
/** The span the figures cover. */
export const LOOP_LAG_WINDOW_MS = 60_000

export interface LoopLagFigures {
  window_s: number
  /** Timer runs in the window: about 3,000 in 60 s; fewer when the loop was held. */
  samples: number
  lag_p50_ms: number
  lag_p99_ms: number
  lag_max_ms: number
}

export interface LoopLag {
  figures(): LoopLagFigures
  stop(): void
}

/**
 * Starts sampling. `now` is a monotonic clock in ms (performance.now by default). The timer is unref'd:
 * it never keeps a process alive by itself.
 */
export function startLoopLag(now: () => number = () => performance.now()): LoopLag {
  const capacity = Math.ceil(LOOP_LAG_WINDOW_MS / SAMPLE_MS) + 1
  const at = new Float64Array(capacity)
  const lag = new Float64Array(capacity)
  let next = 0
  let count = 0
  let expected = now() + SAMPLE_MS
  const timer = setInterval(() => {
    const t = now()
    at[next] = t
    lag[next] = Math.max(0, t - expected)
    next = (next + 1) % capacity
    count = Math.min(count + 1, capacity)
    expected = t + SAMPLE_MS
  }, SAMPLE_MS)
  ;(timer as { unref?: () => void }).unref?.()
  return {
    figures() {
      const since = now() - LOOP_LAG_WINDOW_MS
      const values: number[] = []
      let runs = 0
      for (let i = 0; i < count; i++) {
        if (at[i]! < since) continue
        runs++
        // A run late by L stands for the L / SAMPLE_MS runs that could not happen meanwhile, late by L − 20,
        // L − 40, … ms: a request arriving during the hold waited that long. Counting them keeps a stall of a
        // second from being one sample among 3,000 (and the percentiles from hiding it).
        for (let late = lag[i]!; late > 0; late -= SAMPLE_MS) values.push(late)
        if (lag[i]! <= 0) values.push(0)
      }
      values.sort((a, b) => a - b)
      const pick = (q: number) =>
        values.length === 0 ? 0 : values[Math.min(values.length - 1, Math.floor(q * values.length))]!
      const round = (n: number) => Math.round(n * 10) / 10
      return {
        window_s: LOOP_LAG_WINDOW_MS / 1000,
        samples: runs,
        lag_p50_ms: round(pick(0.5)),
        lag_p99_ms: round(pick(0.99)),
        lag_max_ms: round(values.at(-1) ?? 0),
      }
    },
    stop() {
      clearInterval(timer)
    },
  }
}
