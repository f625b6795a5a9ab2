// Polling for a condition that arrives asynchronously (an agent cycle, a flushed statistic), with a
// deadline: resolves with the probe's first defined value, or fails naming what it waited for.

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  options: { timeoutMs?: number; everyMs?: number; ignoreErrors?: boolean } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000)
  for (;;) {
    const value = options.ignoreErrors ? await probe().catch(() => undefined) : await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(options.everyMs ?? 100)
  }
}
