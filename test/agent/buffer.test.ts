// The agent's disk buffer and shipper without a database: batches wait in service_buffer_<name>.db in
// order, are deleted only once accepted, expire after the buffer lifetime with a logged count, survive
// an agent restart and are drained at start; buffer.max_bytes drops the oldest first, counted; a
// corrupt file is moved aside; no buffer operation throws. Against the real server, a batch it calls
// malformed (400, 413) is dropped, logged as an error and counted; a stub endpoint answers the statuses
// the real server cannot be made to give on demand (404, 408, 409, 422, 429, 5xx).
import { afterAll, describe, expect, test } from 'bun:test'
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BufferOperation, DiskBuffer, type DiskBufferOptions, bufferFileName } from '../../src/agent/buffer.ts'
import { Shipper, type ShipperOptions } from '../../src/agent/shipper.ts'
import { redactSecrets } from '../../src/shared/redact.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

const dirs: string[] = []
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'dbm-buffer-'))
  dirs.push(d)
  return d
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function bufferOptions(overrides: Partial<DiskBufferOptions> = {}): DiskBufferOptions {
  return { maxAgeMs: 3_600_000, maxBytes: () => 256_000_000, log: createLogger('error', () => {}), ...overrides }
}

describe('DiskBuffer', () => {
  test('file appears with the first batch, keeps order, and is removed once drained', () => {
    const dir = tempDir()
    const buffer = new DiskBuffer(dir, 'orders', bufferOptions())
    expect(existsSync(buffer.path)).toBe(false)
    for (const id of ['b1', 'b2', 'b3']) buffer.add({ id, createdAt: 1000, body: `{"id":"${id}"}` })
    expect(buffer.path).toBe(join(dir, 'service_buffer_orders.db'))
    expect(existsSync(buffer.path)).toBe(true)
    // The file holds query texts: readable by the agent's user alone, and so are its WAL files.
    for (const file of [buffer.path, `${buffer.path}-wal`])
      if (existsSync(file)) expect((statSync(file).mode & 0o777).toString(8)).toBe('600')
    expect(buffer.oldest(10)!.map((b) => b.id)).toEqual(['b1', 'b2', 'b3'])
    buffer.accept('b1')
    buffer.accept('b2')
    expect(buffer.size()).toBe(1)
    expect(existsSync(buffer.path)).toBe(true)
    buffer.accept('b3')
    expect(existsSync(buffer.path)).toBe(false)
    expect(existsSync(`${buffer.path}-wal`)).toBe(false)
  })

  test('expired batches are dropped and counted; a restart resumes what was left', () => {
    const dir = tempDir()
    let buffer = new DiskBuffer(dir, 'events', bufferOptions({ maxAgeMs: 60_000 }))
    buffer.add({ id: 'old', createdAt: 0, body: '{}' })
    buffer.add({ id: 'new', createdAt: 50_000, body: '{}' })
    buffer.close()
    buffer = new DiskBuffer(dir, 'events', bufferOptions({ maxAgeMs: 60_000 }))
    expect(buffer.size()).toBe(2)
    expect(buffer.dropExpired(70_000)).toBe(1)
    expect(buffer.oldest(10)!.map((b) => b.id)).toEqual(['new'])
  })

  test('names that are not file-safe are encoded', () => {
    expect(bufferFileName('prod/orders db')).toBe('service_buffer_prod_orders_db.db')
  })

  test('past max_bytes the oldest batches make room, counted; a batch larger than max_bytes alone is not kept', () => {
    const dir = tempDir()
    const buffer = new DiskBuffer(dir, 'capped', bufferOptions({ maxBytes: () => 200_000 }))
    const body = `{"filler":"${'x'.repeat(30_000)}"}`
    let evicted = 0
    for (let n = 1; n <= 20; n++) {
      const result = buffer.add({ id: `b${n}`, createdAt: n, body })
      expect(result.kept).toBe(true)
      if (result.kept) evicted += result.evicted
    }
    const left = buffer.oldest(100)!.map((b) => b.id)
    // What is left is the newest batches, in order, and every batch is either left or counted.
    expect(left.length + evicted).toBe(20)
    expect(left).toEqual(Array.from({ length: left.length }, (_, i) => `b${20 - left.length + i + 1}`))
    expect(left.length * body.length).toBeLessThanOrEqual(200_000)
    expect(left.length).toBeGreaterThanOrEqual(4)
    const huge = buffer.add({ id: 'huge', createdAt: 21, body: 'x'.repeat(200_001) })
    expect(huge).toEqual({ kept: false, reason: 'the batch (200001 bytes) is larger than buffer.max_bytes (200000)' })
    expect(buffer.size()).toBe(left.length)
    buffer.close()
  })

  test('a corrupt file at start is moved aside with an error log, and a fresh buffer takes its place', () => {
    const dir = tempDir()
    const logs: string[] = []
    const path = join(dir, bufferFileName('damaged'))
    writeFileSync(path, 'this is not an SQLite database, and certainly not a buffer'.repeat(100))
    const faults: string[] = []
    const buffer = new DiskBuffer(
      dir,
      'damaged',
      bufferOptions({
        log: createLogger('debug', (l) => logs.push(l)),
        clock: () => Date.parse('2026-11-02T10:20:30.456Z'),
        events: { fault: (operation) => faults.push(operation), working: () => {} },
      }),
    )
    const aside = `${path}.corrupt-2026-11-02T10-20-30-456Z`
    expect(readdirSync(dir).sort()).toEqual([`${bufferFileName('damaged')}.corrupt-2026-11-02T10-20-30-456Z`])
    expect(readFileSync(aside, 'utf8')).toStartWith('this is not an SQLite database')
    expect(logs).toHaveLength(1)
    expect(logs[0]).toContain(
      'ERROR the buffer file is corrupt or unreadable; moved aside, its batches will not be sent',
    )
    expect(logs[0]).toContain(`moved_to=${aside}`)
    expect(logs[0]).toContain('SQLITE_NOTADB')
    expect(faults).toEqual([])
    expect(buffer.size()).toBe(0)
    expect(buffer.add({ id: 'b1', createdAt: 1, body: '{}' })).toEqual({ kept: true, evicted: 0 })
    expect(buffer.oldest(10)!.map((b) => b.id)).toEqual(['b1'])
    buffer.close()
  })

  test('a directory in place of the file at start is moved aside too', () => {
    const dir = tempDir()
    const logs: string[] = []
    mkdirSync(join(dir, bufferFileName('shadowed')))
    const buffer = new DiskBuffer(dir, 'shadowed', bufferOptions({ log: createLogger('debug', (l) => logs.push(l)) }))
    expect(logs.filter((l) => l.includes('moved aside'))).toHaveLength(1)
    expect(readdirSync(dir).filter((f) => f.startsWith(`${bufferFileName('shadowed')}.corrupt-`))).toHaveLength(1)
    expect(buffer.add({ id: 'b1', createdAt: 1, body: '{}' }).kept).toBe(true)
    buffer.close()
  })

  test('no operation throws when the folder cannot hold a file; each failure is reported', () => {
    const dir = tempDir()
    const notAFolder = join(dir, 'plain-file')
    writeFileSync(notAFolder, '')
    const faults: BufferOperation[] = []
    let working = 0
    const buffer = new DiskBuffer(
      notAFolder,
      'nowhere',
      bufferOptions({ events: { fault: (operation) => faults.push(operation), working: () => working++ } }),
    )
    const result = buffer.add({ id: 'b1', createdAt: 1, body: '{}' })
    expect(result.kept).toBe(false)
    if (!result.kept) expect(result.reason).toStartWith('the buffer cannot keep it (EEXIST: file already exists, mkdir')
    expect(buffer.size()).toBe(0)
    expect(buffer.oldest(10)).toEqual([])
    expect(buffer.oldestCreatedAt()).toBeNull()
    expect(buffer.accept('b1')).toBe(true)
    expect(buffer.dropExpired(Date.now())).toBe(0)
    expect(buffer.probe()).toBe(false)
    buffer.close()
    expect(faults).toEqual(['add', 'probe'])
    expect(working).toBe(0)
  })
})

function batch(n: number): IngestBatch {
  return {
    batch_id: `batch-${n}-${crypto.randomUUID()}`,
    collected_at: 1_700_000_000_000 + n,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name: 'shipped', engine: 'postgres', host: 'h', port: 5432 },
  }
}

describe('DiskBuffer: files another user planted', () => {
  test('a symbolic link at the buffer path is refused, not followed: nothing is written where it points', () => {
    const dir = tempDir()
    const target = join(dir, 'elsewhere.db')
    symlinkSync(target, join(dir, bufferFileName('planted')))
    const faults: string[] = []
    const buffer = new DiskBuffer(
      dir,
      'planted',
      bufferOptions({ events: { fault: (operation) => faults.push(operation), working: () => {} } }),
    )
    const result = buffer.add({ id: 'b1', createdAt: 1, body: '{}' })
    expect(result.kept).toBe(false)
    if (!result.kept) expect(result.reason).toContain('it is a symbolic link')
    expect(existsSync(target)).toBe(false)
    expect(faults).toContain('add')
    buffer.close()
  })

  test('a file of another user, or one others may write, is refused', () => {
    for (const plant of [(path: string) => chownSync(path, 4242, 4242), (path: string) => chmodSync(path, 0o666)]) {
      const dir = tempDir()
      const path = join(dir, bufferFileName('planted'))
      writeFileSync(path, '')
      plant(path)
      const buffer = new DiskBuffer(dir, 'planted', bufferOptions())
      const result = buffer.add({ id: 'b1', createdAt: 1, body: '{}' })
      expect(result.kept).toBe(false)
      if (!result.kept)
        expect(result.reason).toMatch(/it belongs to another user \(uid 4242\)|other users may write to it/)
      buffer.close()
    }
  })
})

describe('Shipper', () => {
  test('an outage buffers in order; recovery delivers each batch once, in order; malformed ones are dropped with a log line', async () => {
    const received: number[] = []
    let up = false
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      async fetch(req) {
        if (!up) return Response.json({ error: 'maintenance' }, { status: 503 })
        const body = (await req.json()) as IngestBatch
        const n = body.collected_at - 1_700_000_000_000
        if (n === 3) return Response.json({ error: 'invalid query_stats.0.calls' }, { status: 400 })
        received.push(n)
        return Response.json({
          database_id: 'db1',
          duplicate: false,
          settings: {
            poll_interval_seconds: 10,
            collect_explain_plans: true,
            collect_replication: true,
            disabled_collectors: [],
          },
        })
      },
    })
    const logs: string[] = []
    const dir = tempDir()
    const shipper = new Shipper({
      endpoint: `http://127.0.0.1:${server.port}`,
      apiKey: 'dbm_ak_0123456789abcdef_x',
      databaseName: 'shipped',
      bufferDir: dir,
      retryIntervalMs: 60_000,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 2_000,
      log: createLogger('debug', (l) => logs.push(l)),
    })
    try {
      for (let n = 1; n <= 5; n++) await shipper.send(batch(n))
      expect(shipper.buffered()).toBe(5)
      expect(logs.filter((l) => l.includes('API unreachable; buffering batches'))).toHaveLength(1)
      up = true
      // New batches queue behind the buffer until it drains.
      await shipper.send(batch(6))
      expect(received).toEqual([])
      await shipper.retry()
      expect(received).toEqual([1, 2, 4, 5, 6])
      expect(existsSync(join(dir, 'service_buffer_shipped.db'))).toBe(false)
      const dropped = logs.find((l) => l.includes('the API refused a batch as malformed; dropped'))!
      expect(dropped).toContain('status=400')
      expect(dropped).toContain('dropped=1')
      expect(logs.some((l) => l.includes('API reachable again; buffer drained') && l.includes('delivered=5'))).toBe(
        true,
      )
      await shipper.send(batch(7))
      expect(received.at(-1)).toBe(7)
      expect(logs.join('\n')).not.toContain('dbm_ak_0123456789abcdef_x')
    } finally {
      await shipper.stop()
      server.stop(true)
    }
  })

  test('batches older than the buffer lifetime are dropped with a logged count', async () => {
    const logs: string[] = []
    let now = 0
    const shipper = new Shipper({
      endpoint: 'http://127.0.0.1:9', // discard port: nothing answers
      apiKey: 'k',
      databaseName: 'expiring',
      bufferDir: tempDir(),
      retryIntervalMs: 60_000,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 500,
      log: createLogger('debug', (l) => logs.push(l)),
      clock: () => now,
    })
    try {
      await shipper.send(batch(1))
      now = 1_800_000
      await shipper.send(batch(2))
      now = 3_700_000
      await shipper.retry()
      expect(shipper.buffered()).toBe(1)
      expect(logs.find((l) => l.includes('dropped buffered batches older than the buffer lifetime'))).toContain(
        'dropped=1',
      )
      expect(shipper.status()).toMatchObject({
        buffered: 1,
        lost_batches: 1,
        last_loss: { reason: 'older than the buffer lifetime (3600 s)' },
      })
      expect(logs.filter((l) => l.includes(' ERROR '))).toEqual([])
    } finally {
      await shipper.stop()
    }
  })
})

const acceptedAnswer = () =>
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

function shipperWith(endpoint: string, logs: string[], overrides: Partial<ShipperOptions> = {}): Shipper {
  return new Shipper({
    endpoint,
    apiKey: 'dbm_ak_0123456789abcdef_x',
    databaseName: 'shipped',
    bufferDir: tempDir(),
    retryIntervalMs: 60_000,
    bufferMaxAgeMs: 3_600_000,
    requestTimeoutMs: 2_000,
    log: createLogger('debug', (l) => logs.push(l)),
    ...overrides,
  })
}

describe('Shipper: what each answer of the API does to a batch', () => {
  test('400, 413 and 422 drop the batch (an error log each, counted); 401/403 keep it (refused); 404, 408, 409, 429 and 5xx keep it for a retry', async () => {
    // The stub answers each batch with the status its collected_at names.
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      async fetch(req) {
        const status = ((await req.json()) as IngestBatch).collected_at - 1_700_000_000_000
        return status === 200 ? acceptedAnswer() : Response.json({ error: `answered ${status}` }, { status })
      },
    })
    const logs: string[] = []
    const shipper = shipperWith(`http://127.0.0.1:${server.port}`, logs)
    try {
      for (const status of [400, 413, 422]) await shipper.send(batch(status))
      expect(shipper.buffered()).toBe(0)
      const drops = logs.filter((l) => l.includes('the API refused a batch as malformed; dropped'))
      expect(drops.map((l) => /status=(\d+)/.exec(l)?.[1])).toEqual(['400', '413', '422'])
      for (const line of drops) expect(line).toContain(' ERROR ')
      expect(drops[2]).toContain('error="answered 422"')
      expect(drops[2]).toContain('dropped_total=3')
      const afterDrops = shipper.status()
      expect(afterDrops).toEqual({
        buffered: 0,
        oldest_buffered_at: null,
        dropped_batches: 3,
        last_drop: { at: expect.any(String), reason: 'HTTP 422: answered 422' },
        lost_batches: 0,
        last_loss: null,
        buffer_error: null,
        // the test server announces no wire version: a batch it took would make it the first release's
        server_wire_version: null,
        left_out: { values: 0, fields: [] },
        unknown_field_retries: 0,
      })

      const retried = [404, 408, 409, 429, 500, 502, 503, 504]
      for (const status of retried) {
        // Each one alone, so that it reaches the API rather than queueing behind the one before.
        const before = shipper.buffered()
        await shipper.send(batch(status))
        expect(shipper.buffered()).toBe(before + 1)
      }
      expect(shipper.status().dropped_batches).toBe(3)
      expect(shipper.refusal()).toBeNull()
    } finally {
      await shipper.stop()
      server.stop(true)
    }
    const refusing = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: () => Response.json({ error: 'API key has been revoked' }, { status: 401 }),
    })
    const refused = shipperWith(`http://127.0.0.1:${refusing.port}`, logs)
    try {
      await refused.send(batch(1))
      expect(refused.buffered()).toBe(1)
      expect(refused.refusal()).toStartWith('the API refused the API key (HTTP 401: API key has been revoked)')
      expect(refused.status().dropped_batches).toBe(0)
    } finally {
      await refused.stop()
      refusing.stop(true)
    }
  })

  test('against the real server: a malformed batch (400) and one over the body limit (413) are dropped, logged with the server message and counted', async () => {
    const server = await startTestServer('sqlite')
    const { key } = await agentAccount(server)
    const logs: string[] = []
    const shipper = shipperWith(server.base, logs, { apiKey: key, databaseName: 'malformed' })
    try {
      const good = { ...batch(1), database: { name: 'malformed', engine: 'postgres' as const, host: 'h', port: 5432 } }
      await shipper.send(good)
      await shipper.send({ ...good, batch_id: crypto.randomUUID(), interval_seconds: 'ten' as unknown as number })
      const huge = {
        ...good,
        batch_id: crypto.randomUUID(),
        collector_notes: [{ collector: 'query_stats', message: 'x'.repeat(17 * 1024 * 1024) }],
      }
      await shipper.send(huge)
      const drops = logs.filter((l) => l.includes('the API refused a batch as malformed; dropped'))
      expect(drops).toHaveLength(2)
      expect(drops[0]).toContain('status=400')
      expect(drops[0]).toContain('interval_seconds')
      expect(drops[1]).toContain('status=413')
      expect(drops[1]).toContain('error="request body is larger than the 16384 KiB limit"')
      const status = shipper.status()
      expect(status.dropped_batches).toBe(2)
      expect(status.last_drop).toEqual({
        at: expect.any(String),
        reason: 'HTTP 413: request body is larger than the 16384 KiB limit',
      })
      expect(status.buffered).toBe(0)
      expect(status.lost_batches).toBe(0)
      const stored = await server.store.driver.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_batches')
      expect(Number(stored!.n)).toBe(1)
      expect(logs.join('\n')).not.toContain(key)
    } finally {
      await shipper.stop()
      await server.stop()
    }
  })
})

describe('Shipper: the buffer', () => {
  test('a buffer left by an earlier run is drained at start, not after the first retry interval', async () => {
    const received: number[] = []
    let up = false
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      async fetch(req) {
        if (!up) return Response.json({ error: 'maintenance' }, { status: 503 })
        received.push(((await req.json()) as IngestBatch).collected_at - 1_700_000_000_000)
        return acceptedAnswer()
      },
    })
    const logs: string[] = []
    const dir = tempDir()
    const first = shipperWith(`http://127.0.0.1:${server.port}`, logs, { bufferDir: dir })
    try {
      for (let n = 1; n <= 3; n++) await first.send(batch(n))
      expect(first.buffered()).toBe(3)
    } finally {
      await first.stop()
    }
    up = true
    const second = shipperWith(`http://127.0.0.1:${server.port}`, logs, { bufferDir: dir, retryIntervalMs: 3_600_000 })
    try {
      expect(second.buffered()).toBe(3)
      second.start()
      await until('the buffer to drain', async () => (second.buffered() === 0 ? true : undefined), { timeoutMs: 5_000 })
      expect(received).toEqual([1, 2, 3])
      expect(existsSync(second.bufferPath)).toBe(false)
    } finally {
      await second.stop()
      server.stop(true)
    }
  })

  test('buffer.max_bytes: the oldest batches make room, logged with a count and counted as lost', async () => {
    const logs: string[] = []
    const shipper = shipperWith('http://127.0.0.1:9', logs, { bufferMaxBytes: () => 150_000, requestTimeoutMs: 500 })
    try {
      const big = (n: number): IngestBatch => ({
        ...batch(n),
        collector_notes: [{ collector: 'query_stats', message: 'y'.repeat(40_000) }],
      })
      for (let n = 1; n <= 8; n++) await shipper.send(big(n))
      const status = shipper.status()
      expect(status.buffered + status.lost_batches).toBe(8)
      expect(status.lost_batches).toBeGreaterThanOrEqual(4)
      expect(status.last_loss).toEqual({
        at: expect.any(String),
        reason: 'buffer.max_bytes reached: the oldest buffered batches made room',
      })
      const warnings = logs.filter((l) => l.includes('the buffer reached buffer.max_bytes; dropped the oldest batches'))
      expect(warnings.map((l) => Number(/dropped=(\d+)/.exec(l)?.[1])).reduce((a, b) => a + b, 0)).toBe(
        status.lost_batches,
      )
      for (const line of warnings) expect(line).toContain('max_bytes=150000')
      expect(status.dropped_batches).toBe(0)
      // A batch larger than max_bytes by itself cannot be kept at all: an error line, counted.
      await shipper.send({ ...batch(9), collector_notes: [{ collector: 'query_stats', message: 'z'.repeat(150_000) }] })
      expect(shipper.status().lost_batches).toBe(status.lost_batches + 1)
      const tooLarge = logs.filter((l) => l.includes('a batch could not be buffered; lost'))
      expect(tooLarge).toHaveLength(1)
      expect(tooLarge[0]).toContain(' ERROR ')
      expect(tooLarge[0]).toContain('is larger than buffer.max_bytes (150000)')
    } finally {
      await shipper.stop()
    }
  })

  test('a failing buffer: the batches the API does not take are lost and counted, one error for the episode, an info line with the count when it works again', async () => {
    const dir = tempDir()
    const blocked = join(dir, 'buffers')
    writeFileSync(blocked, '') // a file where the buffer folder should be: nothing can be created in it
    let up = false
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: () => (up ? acceptedAnswer() : Response.json({ error: 'maintenance' }, { status: 503 })),
    })
    const logs: string[] = []
    const shipper = shipperWith(`http://127.0.0.1:${server.port}`, logs, { bufferDir: blocked })
    try {
      for (let n = 1; n <= 3; n++) await shipper.send(batch(n))
      let status = shipper.status()
      expect(status.lost_batches).toBe(3)
      expect(status.buffered).toBe(0)
      expect(status.buffer_error).toStartWith('add: EEXIST')
      expect(status.last_loss?.reason).toStartWith('the buffer cannot keep it (EEXIST')
      const failing = logs.filter((l) => l.includes('the buffer is failing'))
      expect(failing).toHaveLength(1)
      expect(failing[0]).toContain(' ERROR ')
      expect(failing[0]).toContain('operation=add')
      // The API is back while the buffer still fails: batches go straight through, nothing more is lost.
      up = true
      await shipper.send(batch(4))
      expect(shipper.status().lost_batches).toBe(3)
      await shipper.retry()
      expect(shipper.status().buffer_error).not.toBeNull()
      // The folder can be created again: the next retry round's test write ends the episode.
      rmSync(blocked)
      await shipper.retry()
      status = shipper.status()
      expect(status.buffer_error).toBeNull()
      const recovered = logs.filter((l) => l.includes('the buffer works again'))
      expect(recovered).toHaveLength(1)
      expect(recovered[0]).toContain(' INFO ')
      expect(recovered[0]).toContain('lost=3')
      expect(logs.filter((l) => l.includes('the buffer is failing'))).toHaveLength(1)
      expect(existsSync(shipper.bufferPath)).toBe(false)
    } finally {
      await shipper.stop()
      server.stop(true)
    }
  })

  test('the endpoint is shown without user info', () => {
    expect(redactSecrets('https://agent:s3cret@dbm.example.com:8443/base')).toBe(
      'https://***@dbm.example.com:8443/base',
    )
    expect(redactSecrets('http://dbm.internal:8080')).toBe('http://dbm.internal:8080')
  })
})
