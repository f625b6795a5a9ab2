// The ingest writer (src/server/ingest-writer/): batches applied in its thread are seen at once by the
// main thread's reads (the SQLite store's caches keyed by its generation), and a writer thread that dies
// or hangs with a batch in flight answers it 503 with Retry-After, is replaced, and the batch sent again
// is applied exactly once. SQLite only: the store's write lock, held from the test, keeps a batch in
// flight (the main thread's caches are SQLite's alone too).
import { afterEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'

function batch(name: string, calls: number): IngestBatch {
  return pgBatch(name, Date.now(), {
    query_stats: [
      {
        query_hash: 'w1',
        query_text: 'SELECT 1',
        calls,
        total_time_ms: calls,
        rows: calls,
        shared_blks_hit: 0,
        shared_blks_read: 0,
      },
    ],
  })
}

describe('ingest writer (sqlite)', () => {
  let server: TestServer | undefined
  let dataDir = ''
  let lock: Database | undefined

  afterEach(async () => {
    lock?.close()
    lock = undefined
    await server?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  async function start(deadlineMs?: number) {
    dataDir = mkdtempSync(join(tmpdir(), 'dbm-writer-'))
    server = await startTestServer('sqlite', { dataDir, ingestWriter: { deadlineMs } })
    const { key } = await agentAccount(server)
    const ingest = (b: IngestBatch) => server!.call('POST', '/api/v1/ingest', { apiKey: key, body: b })
    const calls = async (id: string) =>
      (await server!.call('GET', `/api/v1/databases/${id}/queries`, { apiKey: key })).body.map(
        (q: { total_calls: number }) => q.total_calls,
      )
    return { key, ingest, calls, writer: server.deps.ingestWriter! }
  }

  /** Holds the store's write lock from another connection: the writer's transaction waits behind it. */
  function holdWriteLock() {
    lock = new Database(join(dataDir, 'dbm.sqlite'))
    lock.exec('BEGIN IMMEDIATE')
  }

  const until = async (done: () => boolean) => {
    while (!done()) await Bun.sleep(5)
  }

  test("the main thread's reads see what the writer committed at once", async () => {
    const { key, ingest } = await start()
    const list = async () => (await server!.call('GET', '/api/v1/databases', { apiKey: key })).body as any[]
    expect(await list()).toEqual([]) // read, and kept by the store's cache
    const res = await ingest(batch('seen-at-once', 3))
    expect(res.status).toBe(200)
    expect((await list()).map((d) => [d.name, d.last_seen_at !== null])).toEqual([['seen-at-once', true]])
    expect(server!.deps.ingestWriter!.running).toBe(true)
  })

  test('a writer that dies with a batch in flight answers it 503; sent again, it is applied once', async () => {
    const { ingest, calls, writer } = await start()
    const id = (await ingest(batch('killed', 1))).body.database_id
    holdWriteLock()
    const b = batch('killed', 5)
    const answer = ingest(b)
    await until(() => writer.inFlight === 1)
    writer.worker.terminate()
    const refused = await answer
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe('2')
    expect(refused.body.error).toContain('send it again')
    lock!.exec('ROLLBACK')
    const retried = await ingest(b)
    expect(retried.status).toBe(200)
    expect(writer.restarts).toBe(1)
    expect(await ingest(b).then((r) => r.body.duplicate)).toBe(true)
    expect(await calls(id)).toEqual([6])
  })

  test('a writer that answers nothing within its deadline is replaced; its batch answered 503', async () => {
    const { ingest, calls, writer } = await start(300)
    const id = (await ingest(batch('hung', 1))).body.database_id
    holdWriteLock()
    const b = batch('hung', 5)
    const refused = await ingest(b)
    expect(refused.status).toBe(503)
    expect(writer.restarts).toBe(1)
    lock!.exec('ROLLBACK')
    expect((await ingest(b)).status).toBe(200)
    expect(await calls(id)).toEqual([6])
    expect(server!.logs.some((l) => l.includes('ingest writer restarted'))).toBe(true)
  })
})
