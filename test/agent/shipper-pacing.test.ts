// The shipper after an outage, against a stub endpoint: Retry-After (seconds or an HTTP date, bounded)
// delays the next send and the next retry round; retry rounds are jittered within their bounds; batches
// sent from the buffer carry their age (X-Dbm-Batch-Age), current ones do not; the drain goes oldest first
// and stops at the first refusal. Shedding by the real server is in test/api/ingest-admission.test.ts.
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  MAX_RETRY_AFTER_MS,
  Shipper,
  type ShipperOptions,
  parseRetryAfter,
  retryDelayMs,
} from '../../src/agent/shipper.ts'
import { BATCH_AGE_HEADER } from '../../src/shared/ingest-path.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { until } from '../support/wait.ts'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

const T0 = 1_700_000_000_000

function batch(n: number): IngestBatch {
  return {
    batch_id: `pace-${n}-${crypto.randomUUID()}`,
    collected_at: T0 + n,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name: 'paced', engine: 'postgres', host: 'h', port: 5432 },
  }
}

const accepted = () =>
  Response.json({
    database_id: 'db1',
    duplicate: false,
    settings: {
      poll_interval_seconds: 10,
      collect_explain_plans: true,
      collect_replication: true,
      disabled_collectors: [],
    },
  })

function shipperWith(endpoint: string, overrides: Partial<ShipperOptions> = {}): Shipper {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-pacing-'))
  dirs.push(dir)
  return new Shipper({
    endpoint,
    apiKey: 'dbm_ak_0123456789abcdef_x',
    databaseName: 'paced',
    bufferDir: dir,
    retryIntervalMs: 3_600_000,
    bufferMaxAgeMs: 3_600_000,
    requestTimeoutMs: 2_000,
    drainGapMs: 0,
    log: createLogger('error', () => {}),
    ...overrides,
  })
}

/** A stub that answers by a queue of responses (then 200), recording each request's batch and age header. */
function stub(answers: (() => Response)[]) {
  const seen: { n: number; age: string | null; at: number }[] = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const body = (await req.json()) as IngestBatch
      seen.push({ n: body.collected_at - T0, age: req.headers.get(BATCH_AGE_HEADER), at: performance.now() })
      return (answers.shift() ?? accepted)()
    },
  })
  return { seen, server, endpoint: `http://127.0.0.1:${server.port}` }
}

describe('Retry-After and jitter, as numbers', () => {
  test('Retry-After: delay-seconds or an HTTP date, at most 5 minutes; anything else is no answer', () => {
    const now = Date.parse('2026-11-02T10:00:00Z')
    expect(parseRetryAfter('7', now)).toBe(7_000)
    expect(parseRetryAfter(' 0 ', now)).toBe(0)
    expect(parseRetryAfter('86400', now)).toBe(MAX_RETRY_AFTER_MS)
    expect(parseRetryAfter('Mon, 02 Nov 2026 10:00:30 GMT', now)).toBe(30_000)
    expect(parseRetryAfter('Mon, 02 Nov 2026 09:59:00 GMT', now)).toBe(0)
    expect(parseRetryAfter('Tue, 03 Nov 2026 10:00:00 GMT', now)).toBe(MAX_RETRY_AFTER_MS)
    for (const bad of [null, '', '-5', '1.5', 'soon', '2026'])
      expect(parseRetryAfter(bad, now)).toBe(bad === '2026' ? MAX_RETRY_AFTER_MS : null)
  })

  test('a round comes after the retry interval plus up to the jitter, or after Retry-After plus up to as much again (at most the jitter)', () => {
    for (const r of [0, 0.25, 0.999999]) {
      const plain = retryDelayMs(null, 30_000, 10_000, r)
      expect(plain).toBeGreaterThanOrEqual(30_000)
      expect(plain).toBeLessThan(40_000)
      const short = retryDelayMs(2_000, 30_000, 10_000, r)
      expect(short).toBeGreaterThanOrEqual(2_000)
      expect(short).toBeLessThan(4_000)
      const long = retryDelayMs(120_000, 30_000, 10_000, r)
      expect(long).toBeGreaterThanOrEqual(120_000)
      expect(long).toBeLessThan(130_000)
    }
    // Spread: a fleet's draws cover the window rather than one second of it.
    const draws = Array.from({ length: 1000 }, () => retryDelayMs(null, 30_000, 10_000, Math.random()))
    expect(Math.max(...draws) - Math.min(...draws)).toBeGreaterThan(8_000)
  })
})

describe('Shipper: Retry-After', () => {
  test('a 503 with Retry-After: later batches queue, no round sends before it; then the backlog goes oldest first with its age', async () => {
    const { seen, server, endpoint } = stub([
      () => Response.json({ error: 'busy' }, { status: 503, headers: { 'retry-after': '20' } }),
    ])
    let now = T0
    const shipper = shipperWith(endpoint, { clock: () => now })
    try {
      expect(await shipper.send(batch(1))).toBe('buffered')
      expect(shipper.retryNotBefore()).toBe(T0 + 20_000)
      now += 5_000
      // Within the wait: queued behind the first without a request.
      expect(await shipper.send(batch(2))).toBe('buffered')
      await shipper.retry()
      expect(seen.map((s) => s.n)).toEqual([1])
      now += 16_000
      await shipper.retry()
      expect(seen.map((s) => s.n)).toEqual([1, 1, 2])
      // Sent directly: no age. From the buffer: seconds since it was kept.
      expect(seen.map((s) => s.age)).toEqual([null, '21', '16'])
      expect(shipper.buffered()).toBe(0)
      expect(await shipper.send(batch(3))).toBe('delivered')
      expect(seen.at(-1)).toEqual(expect.objectContaining({ n: 3, age: null }))
    } finally {
      await shipper.stop()
      server.stop(true)
    }
  })

  test('429 with an HTTP date is honoured; a Retry-After on another status (500) is not', async () => {
    let now = Date.parse('2026-11-02T10:00:00Z')
    const { seen, server, endpoint } = stub([
      () =>
        Response.json(
          { error: 'slow down' },
          { status: 429, headers: { 'retry-after': 'Mon, 02 Nov 2026 10:01:00 GMT' } },
        ),
      () => Response.json({ error: 'boom' }, { status: 500, headers: { 'retry-after': '60' } }),
    ])
    const shipper = shipperWith(endpoint, { clock: () => now })
    try {
      await shipper.send(batch(1))
      expect(shipper.retryNotBefore()).toBe(now + 60_000)
      now += 60_000
      await shipper.retry()
      // The 500's Retry-After is not a request to wait: the next round may send at once.
      expect(shipper.retryNotBefore()).toBeLessThanOrEqual(now)
      await shipper.retry()
      expect(seen.map((s) => s.n)).toEqual([1, 1, 1])
      expect(shipper.buffered()).toBe(0)
    } finally {
      await shipper.stop()
      server.stop(true)
    }
  })

  test('the drain stops at the first refusal and the scheduled round waits out its Retry-After before resuming', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dbm-pacing-'))
    dirs.push(dir)
    // Five batches kept while the API was down.
    const down = shipperWith('http://127.0.0.1:9', { bufferDir: dir, requestTimeoutMs: 300 })
    for (let n = 1; n <= 5; n++) await down.send(batch(n))
    expect(down.buffered()).toBe(5)
    await down.stop()
    // Back: it takes one batch and sheds the next with Retry-After: 1.
    const { seen, server, endpoint } = stub([
      accepted,
      () => Response.json({ error: 'shed' }, { status: 503, headers: { 'retry-after': '1' } }),
    ])
    const shipper = shipperWith(endpoint, { bufferDir: dir, random: () => 0 })
    try {
      shipper.start()
      await until('the buffer to drain', async () => (shipper.buffered() === 0 ? true : undefined), {
        timeoutMs: 10_000,
      })
      expect(seen.map((s) => s.n)).toEqual([1, 2, 2, 3, 4, 5])
      // The refused batch came again no sooner than its Retry-After (1 s) after the refusal.
      expect(seen[2]!.at - seen[1]!.at).toBeGreaterThanOrEqual(950)
      expect(seen.every((s) => s.age !== null)).toBe(true)
    } finally {
      await shipper.stop()
      server.stop(true)
    }
  })
})
