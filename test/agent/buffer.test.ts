// The agent's disk buffer and shipper without a database: batches wait in service_buffer_<name>.db in
// order, are deleted only once accepted, expire after the buffer lifetime with a logged count, survive
// an agent restart, and a batch the server calls malformed is dropped with a log line.
import { afterAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DiskBuffer, bufferFileName } from '../../src/agent/buffer.ts'
import { Shipper } from '../../src/agent/shipper.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'

const dirs: string[] = []
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'dbm-buffer-'))
  dirs.push(d)
  return d
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe('DiskBuffer', () => {
  test('file appears with the first batch, keeps order, and is removed once drained', () => {
    const dir = tempDir()
    const buffer = new DiskBuffer(dir, 'orders', 3_600_000)
    expect(existsSync(buffer.path)).toBe(false)
    for (const id of ['b1', 'b2', 'b3']) buffer.add({ id, createdAt: 1000, body: `{"id":"${id}"}` })
    expect(buffer.path).toBe(join(dir, 'service_buffer_orders.db'))
    expect(existsSync(buffer.path)).toBe(true)
    // The file holds query texts: readable by the agent's user alone, and so are its WAL files.
    for (const file of [buffer.path, `${buffer.path}-wal`]) if (existsSync(file)) expect((statSync(file).mode & 0o777).toString(8)).toBe('600')
    expect(buffer.oldest(10).map((b) => b.id)).toEqual(['b1', 'b2', 'b3'])
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
    let buffer = new DiskBuffer(dir, 'events', 60_000)
    buffer.add({ id: 'old', createdAt: 0, body: '{}' })
    buffer.add({ id: 'new', createdAt: 50_000, body: '{}' })
    buffer.close()
    buffer = new DiskBuffer(dir, 'events', 60_000)
    expect(buffer.size()).toBe(2)
    expect(buffer.dropExpired(70_000)).toBe(1)
    expect(buffer.oldest(10).map((b) => b.id)).toEqual(['new'])
  })

  test('names that are not file-safe are encoded', () => {
    expect(bufferFileName('prod/orders db')).toBe('service_buffer_prod_orders_db.db')
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
        return Response.json({ database_id: 'db1', duplicate: false, settings: { poll_interval_seconds: 10, collect_explain_plans: true, collect_replication: true, disabled_collectors: [] } })
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
      expect(logs.some((l) => l.includes('API reachable again; buffer drained') && l.includes('delivered=5'))).toBe(true)
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
      expect(logs.find((l) => l.includes('dropped buffered batches older than the buffer lifetime'))).toContain('dropped=1')
    } finally {
      await shipper.stop()
    }
  })
})
