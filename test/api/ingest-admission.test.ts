// Admission of ingests on a real server under small caps (ingest-admission.ts): batches held in flight by
// bodies that have not finished arriving fill the caps; backlog (X-Dbm-Batch-Age) is shed at the lower
// mark, current batches at the higher one, each with 503 and a Retry-After in its range, before the body
// is read; the refusals are counted in /metrics and logged once per episode. Then the real shipper, its
// backlog shed while the server is full, delivers every buffered batch exactly once once there is room.
// A body that stalls is answered 408 and one abandoned mid-body frees its place; on each store, callers
// without a valid ingest key are refused before taking a place, and one organization is held to its share
// of the places while another sends (alone, it has them all).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Socket } from 'bun'
import { Shipper } from '../../src/agent/shipper.ts'
import { IngestAdmission } from '../../src/server/ingest-admission.ts'
import { type IngestAdmissionLimits, ingestAdmissionLimits } from '../../src/server/limits.ts'
import { BATCH_AGE_HEADER, INGEST_PATH } from '../../src/shared/ingest-path.ts'
import { createLogger } from '../../src/shared/log.ts'
import { pgBatch } from '../support/batches.ts'
import { parseScrape, value } from '../support/prometheus.ts'
import { type TestServer, agentAccount, startTestServer, storeKinds } from '../support/server.ts'
import { until } from '../support/wait.ts'

const TOKEN = 'admission-metrics-token-0123456789'
const limits: IngestAdmissionLimits = {
  ...ingestAdmissionLimits,
  current: { inFlight: 2, bodyBytes: 64 * 1024 * 1024 },
  backlog: { inFlight: 1, bodyBytes: 64 * 1024 * 1024 },
  retryAfterSeconds: { current: [1, 2], backlog: [1, 1] },
}

let server: TestServer
let key = ''
let admission: IngestAdmission
const admissionLogs: string[] = []
const dirs: string[] = []
beforeAll(async () => {
  admission = new IngestAdmission(
    createLogger('info', (l) => admissionLogs.push(l)),
    limits,
  )
  server = await startTestServer('sqlite', { metricsToken: TOKEN, ingestAdmission: admission })
  key = (await agentAccount(server)).key
})
afterAll(async () => {
  await server?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** An ingest request over a raw connection: its head and the first `sent` characters of its body, the rest later (or never). */
interface RawIngest {
  /** The answer's status line, once an answer (or the connection's close) came. */
  answered: Promise<string>
  /** The whole answer as received so far. */
  text(): string
  /** Sends the rest of the body and waits for the answer's status line. */
  finish(): Promise<string>
  /** Closes the connection (the body unfinished, unless finish came first). */
  close(): void
}

async function rawIngest(
  to: TestServer,
  headers: Record<string, string>,
  body: string,
  options: { sent?: number; declared?: number } = {},
): Promise<RawIngest> {
  let answer = ''
  let answered: (line: string) => void = () => {}
  const done = new Promise<string>((resolve) => (answered = resolve))
  const statusLine = () => answer.split('\r\n')[0]!
  const socket: Socket = await Bun.connect({
    hostname: '127.0.0.1',
    port: Number(new URL(to.base).port),
    socket: {
      data(_s, chunk) {
        answer += chunk.toString()
        if (/\r\n\r\n[\s\S]*\}/.test(answer)) answered(statusLine())
      },
      close() {
        answered(statusLine())
      },
    },
  })
  const sent = options.sent ?? Math.floor(body.length / 2)
  const head = Object.entries({
    'Content-Type': 'application/json',
    ...headers,
    'Content-Length': String(options.declared ?? Buffer.byteLength(body)),
  })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')
  socket.write(`POST ${INGEST_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n${head}\r\n${body.slice(0, sent)}`)
  return {
    answered: done,
    text: () => answer,
    async finish() {
      socket.write(body.slice(sent))
      const line = await done
      socket.end()
      return line
    },
    close: () => socket.end(),
  }
}

/** A batch posted with the key whose body stops halfway: admitted and held in flight until finish(). */
function heldIngest(name: string, age?: number, to: TestServer = server, as: string = key): Promise<RawIngest> {
  return rawIngest(
    to,
    { 'X-API-Key': as, ...(age === undefined ? {} : { [BATCH_AGE_HEADER]: String(age) }) },
    JSON.stringify(pgBatch(name, Date.now())),
  )
}

const post = (name: string, age?: number, to: TestServer = server, as: string = key) =>
  fetch(to.base + INGEST_PATH, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': as,
      ...(age === undefined ? {} : { [BATCH_AGE_HEADER]: String(age) }),
    },
    body: JSON.stringify(pgBatch(name, Date.now())),
  })

async function scrape(from: TestServer = server) {
  const res = await fetch(`${from.base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
  return parseScrape(await res.text())
}

describe('ingest admission under small caps', () => {
  test('backlog is shed at the lower mark and current batches at the higher, with 503 and Retry-After; counted; logged once per episode', async () => {
    const before = await scrape()
    const shedBefore = {
      backlog: value(before, 'dbm_ingest_shed_total', { kind: 'backlog' }),
      current: value(before, 'dbm_ingest_shed_total', { kind: 'current' }),
    }
    const first = await heldIngest('held-1')
    await until('one ingest in flight', async () => (appAdmission().inFlight === 1 ? true : undefined), { everyMs: 10 })
    // One in flight: the backlog's mark (1) is reached, the current batches' (2) is not.
    const backlog = await post('shed-backlog', 600)
    expect(backlog.status).toBe(503)
    expect(backlog.headers.get('retry-after')).toBe('1')
    expect(await backlog.json()).toEqual({ error: 'the server is busy taking batches; try again in 1 s' })
    // Younger than backlogAgeSeconds: current.
    const second = await heldIngest('held-2')
    await until('two ingests in flight', async () => (appAdmission().inFlight === 2 ? true : undefined), {
      everyMs: 10,
    })
    const current = await post('shed-current', 5)
    expect(current.status).toBe(503)
    expect(['1', '2']).toContain(current.headers.get('retry-after')!)
    expect(await first.finish()).toBe('HTTP/1.1 200 OK')
    expect(await second.finish()).toBe('HTTP/1.1 200 OK')
    await until('no ingest in flight', async () => (appAdmission().inFlight === 0 ? true : undefined), { everyMs: 10 })
    expect((await post('admitted-again', 600)).status).toBe(200)
    const after = await scrape()
    expect(value(after, 'dbm_ingest_shed_total', { kind: 'backlog' }) - shedBefore.backlog).toBe(1)
    expect(value(after, 'dbm_ingest_shed_total', { kind: 'current' }) - shedBefore.current).toBe(1)
    expect(value(after, 'dbm_ingest_in_flight')).toBe(0)
    // The shed requests are counted as 503 answers of the ingest route too.
    expect(value(after, 'dbm_ingest_requests_total', { status: '503' })).toBeGreaterThanOrEqual(2)
    // Neither shed batch was applied.
    const names = (
      (await server.call<{ name: string }[]>('GET', '/api/v1/databases', { apiKey: key })).body as { name: string }[]
    ).map((d) => d.name)
    expect(names).not.toContain('shed-backlog')
    expect(names).not.toContain('shed-current')
    expect(names).toContain('admitted-again')
    expect(admissionLogs.filter((l) => l.includes('shedding with 503')).length).toBe(1)
  })

  test('a request refused as malformed after admission frees its place', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await fetch(server.base + INGEST_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: '{"batch_id":',
      })
      expect(res.status).toBe(400)
    }
    await until('no ingest in flight', async () => (appAdmission().inFlight === 0 ? true : undefined), { everyMs: 10 })
  })

  test("the real shipper's backlog, shed while the server is full, is delivered exactly once when there is room", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dbm-admission-'))
    dirs.push(dir)
    const options = {
      apiKey: key,
      databaseName: 'replayed',
      bufferDir: dir,
      retryIntervalMs: 3_600_000,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 5_000,
      drainGapMs: 0,
      random: () => 0,
      log: createLogger('error', () => {}),
    }
    // Buffered while the server was away, collected a minute ago (backlog by age).
    let now = Date.now() - 60_000
    const away = new Shipper({ ...options, endpoint: 'http://127.0.0.1:9', requestTimeoutMs: 300, clock: () => now })
    for (let n = 0; n < 6; n++) {
      const b = pgBatch('replayed', now + n * 10, {
        query_stats: [
          {
            query_hash: 'q1',
            query_text: 'SELECT 1',
            calls: 1,
            total_time_ms: 1,
            rows: 1,
            shared_blks_hit: 0,
            shared_blks_read: 0,
          },
        ],
      })
      expect(await away.send(b)).toBe('buffered')
    }
    await away.stop()
    const before = await scrape()
    const applied0 = value(before, 'dbm_ingest_batches_total', { result: 'applied' })
    const duplicate0 = value(before, 'dbm_ingest_batches_total', { result: 'duplicate' })
    const shed0 = value(before, 'dbm_ingest_shed_total', { kind: 'backlog' })
    // The server is full for backlog: one batch held in flight.
    const held = await heldIngest('held-3')
    await until('one ingest in flight', async () => (appAdmission().inFlight === 1 ? true : undefined), { everyMs: 10 })
    now = Date.now()
    const shipper = new Shipper({ ...options, endpoint: server.base, clock: () => Date.now() })
    try {
      shipper.start()
      // Shed: the round stops at the first batch and waits out the Retry-After (1 s).
      await until(
        'the backlog to be shed',
        async () => (value(await scrape(), 'dbm_ingest_shed_total', { kind: 'backlog' }) > shed0 ? true : undefined),
        { everyMs: 20 },
      )
      expect(shipper.buffered()).toBe(6)
      expect(shipper.retryNotBefore()).toBeGreaterThan(Date.now() - 100)
      expect(await held.finish()).toBe('HTTP/1.1 200 OK')
      await until('the buffer to drain', async () => (shipper.buffered() === 0 ? true : undefined), {
        timeoutMs: 15_000,
      })
    } finally {
      await shipper.stop()
    }
    const after = await scrape()
    // held-3 and the six batches, each applied once; none twice.
    expect(value(after, 'dbm_ingest_batches_total', { result: 'applied' }) - applied0).toBe(7)
    expect(value(after, 'dbm_ingest_batches_total', { result: 'duplicate' }) - duplicate0).toBe(0)
    const db = (
      (await server.call<{ id: string; name: string }[]>('GET', '/api/v1/databases', { apiKey: key })).body as {
        id: string
        name: string
      }[]
    ).find((d) => d.name === 'replayed')!
    const queries = await server.call<{ query_hash: string; total_calls: number }[]>(
      'GET',
      `/api/v1/databases/${db.id}/queries`,
      { apiKey: key },
    )
    expect(
      (queries.body as { query_hash: string; total_calls: number }[]).map((q) => [q.query_hash, q.total_calls]),
    ).toEqual([['q1', 6]])
  })
})

describe('ingest bodies that do not arrive', () => {
  const refusals = async (reason: string) => value(await scrape(), 'dbm_ingest_refusals_total', { reason })

  test('a body that stalls is answered 408 with an error once bodyReadMs has passed, and frees its place', async () => {
    const timeouts0 = await refusals('body_timeout')
    limits.bodyReadMs = 600
    try {
      const stalled = await heldIngest('stalled')
      await until('one ingest in flight', async () => (appAdmission().inFlight === 1 ? true : undefined), {
        everyMs: 10,
      })
      expect(await stalled.answered).toBe('HTTP/1.1 408 Request Timeout')
      expect(JSON.parse(stalled.text().slice(stalled.text().indexOf('\r\n\r\n') + 4))).toEqual({
        error: 'the request body did not arrive within 1 s',
      })
      stalled.close()
    } finally {
      limits.bodyReadMs = ingestAdmissionLimits.bodyReadMs
    }
    expect(appAdmission().inFlight).toBe(0)
    expect((await refusals('body_timeout')) - timeouts0).toBe(1)
    expect((await post('after-the-stall')).status).toBe(200)
  })

  test('a client that goes away mid-body frees its place at once', async () => {
    const aborted0 = await refusals('body_aborted')
    const gone = await heldIngest('gone')
    await until('one ingest in flight', async () => (appAdmission().inFlight === 1 ? true : undefined), { everyMs: 10 })
    gone.close()
    await until('no ingest in flight', async () => (appAdmission().inFlight === 0 ? true : undefined), {
      everyMs: 10,
      timeoutMs: 5_000,
    })
    expect((await refusals('body_aborted')) - aborted0).toBe(1)
    expect((await post('after-the-gone')).status).toBe(200)
  })
})

// Authentication before admission and the organizations' shares touch the store (the key's lookup):
// on each store, on a server of its own (4 places, 2 of backlog; a share of 2 while another organization sends).
for (const kind of storeKinds) {
  describe(`ingest admission by caller (${kind})`, () => {
    const shared: IngestAdmissionLimits = {
      ...ingestAdmissionLimits,
      current: { inFlight: 4, bodyBytes: 64 * 1024 * 1024 },
      backlog: { inFlight: 2, bodyBytes: 64 * 1024 * 1024 },
      retryAfterSeconds: { current: [1, 2], backlog: [1, 1] },
      orgShare: { min: 2, fraction: 0.5, activeMs: 600_000 },
    }
    let tenants: TestServer
    let keyA = ''
    const warnings: string[] = []
    beforeAll(async () => {
      tenants = await startTestServer(kind, {
        metricsToken: TOKEN,
        ingestAdmission: new IngestAdmission(
          createLogger('warn', (l) => warnings.push(l)),
          shared,
        ),
      })
      keyA = (await agentAccount(tenants)).key
    })
    afterAll(async () => {
      await tenants?.stop()
    })

    test('without a valid ingest key, slow bodies are refused at once and take no place; the key is looked up once', async () => {
      const before = await scrape(tenants)
      const { key: readKey } = await agentAccount(tenants, { scopes: ['read'] })
      let lookups = 0
      const store = tenants.deps.store
      const find = store.findApiKey.bind(store)
      store.findApiKey = (keyId: string) => {
        lookups++
        return find(keyId)
      }
      try {
        // More than the places, each declaring 16 MB and sending one byte of it.
        const callers: Record<string, string>[] = [
          {},
          { 'X-API-Key': 'not-a-key' },
          { 'X-API-Key': `dbm_ak_${'0'.repeat(16)}_${'A'.repeat(43)}` },
          { Authorization: 'Bearer not-a-token' },
          { 'X-API-Key': readKey },
        ]
        const flood = await Promise.all(
          callers.map((headers) => rawIngest(tenants, headers, '{', { sent: 1, declared: 16_000_000 })),
        )
        expect(await Promise.all(flood.map((f) => f.answered))).toEqual([
          'HTTP/1.1 401 Unauthorized',
          'HTTP/1.1 401 Unauthorized',
          'HTTP/1.1 401 Unauthorized',
          'HTTP/1.1 401 Unauthorized',
          'HTTP/1.1 403 Forbidden',
        ])
        expect(flood.every((f) => /x-dbm-wire-version:/i.test(f.text()))).toBe(true)
        expect(appAdmission(tenants).inFlight).toBe(0)
        // The well-formed unknown key and the read key, one lookup each (none for the malformed ones).
        expect(lookups).toBe(2)
        lookups = 0
        expect((await post('with-the-key', undefined, tenants, keyA)).status).toBe(200)
        // Authenticated once for the admission and the route.
        expect(lookups).toBe(1)
        for (const f of flood) f.close()
      } finally {
        store.findApiKey = find
      }
      const after = await scrape(tenants)
      const delta = (reason: string) =>
        value(after, 'dbm_ingest_refusals_total', { reason }) - value(before, 'dbm_ingest_refusals_total', { reason })
      expect(delta('unauthenticated')).toBe(4)
      expect(delta('forbidden')).toBe(1)
    })

    test('alone an organization takes every place; while another sends, it holds at most its share', async () => {
      // Alone: three places, past its share of two, as before shares.
      const alone = await Promise.all([1, 2, 3].map((n) => heldIngest(`alone-${n}`, undefined, tenants, keyA)))
      await until('three ingests in flight', async () => (appAdmission(tenants).inFlight === 3 ? true : undefined), {
        everyMs: 10,
      })
      for (const held of alone) expect(await held.finish()).toBe('HTTP/1.1 200 OK')
      // Another organization sends.
      const { key: keyB } = await agentAccount(tenants)
      expect((await post('b-1', undefined, tenants, keyB)).status).toBe(200)
      const before = await scrape(tenants)
      const mine = await Promise.all([1, 2].map((n) => heldIngest(`share-${n}`, undefined, tenants, keyA)))
      await until('two ingests in flight', async () => (appAdmission(tenants).inFlight === 2 ? true : undefined), {
        everyMs: 10,
      })
      const over = await post('over-the-share', undefined, tenants, keyA)
      expect(over.status).toBe(503)
      expect(['1', '2']).toContain(over.headers.get('retry-after')!)
      expect((await post('over-the-share-again', undefined, tenants, keyA)).status).toBe(503)
      // The other organization's current batch is still taken, with places to spare.
      expect((await post('b-2', undefined, tenants, keyB)).status).toBe(200)
      for (const held of mine) expect(await held.finish()).toBe('HTTP/1.1 200 OK')
      const after = await scrape(tenants)
      expect(
        value(after, 'dbm_ingest_refusals_total', { reason: 'org_share' }) -
          value(before, 'dbm_ingest_refusals_total', { reason: 'org_share' }),
      ).toBe(2)
      expect(
        value(after, 'dbm_ingest_shed_total', { kind: 'current' }) -
          value(before, 'dbm_ingest_shed_total', { kind: 'current' }),
      ).toBe(2)
      expect(appAdmission(tenants).inFlight).toBe(0)
      // One warning for the episode, whatever its refusals.
      expect(warnings.filter((l) => l.includes('ingest:')).length).toBe(1)
      expect(warnings[0]).toContain('holds its share')
    })
  })
}

/** The admission the app consults (the one passed in deps). */
function appAdmission(of: TestServer = server): IngestAdmission {
  return of.deps.ingestAdmission!
}
