// GET /metrics of `dbm serve`: the Prometheus text format, read with a text-format parser package; only
// for a valid API key of any organization (X-API-Key or Authorization: Bearer); names, types and units
// by the conventions; values against what the test did (batches, rows, statuses, refusals, mails); and
// no series that names an organization or a database. Counts are compared as differences between two
// scrapes: the metrics are the process's, and other test files' servers may share the process.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { pgBatch } from '../support/batches.ts'
import type { ActiveQuery } from '../../src/shared/wire.ts'
import { type Scrape, checkConventions, histogram, histogramCount, parseScrape, value } from '../support/prometheus.ts'
import { type StoreKind, type TestServer, agentAccount, signup, startTestServer, storeKinds, uniqueIp } from '../support/server.ts'
import { until } from '../support/wait.ts'
import { startWebhookReceiver } from '../support/webhook.ts'
import { createHealthMonitor } from '../../src/server/health-monitor.ts'

async function scrape(server: TestServer, headers: Record<string, string>): Promise<Scrape> {
  const res = await fetch(`${server.base}/metrics`, { headers })
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
  return parseScrape(await res.text())
}

describe.each(storeKinds)('GET /metrics (%s store)', (kind: StoreKind) => {
  let server: TestServer
  let key = ''
  let otherKey = ''
  let userToken = ''
  beforeAll(async () => {
    server = await startTestServer(kind)
    const agent = await agentAccount(server)
    key = agent.key
    userToken = agent.account.token
    otherKey = (await agentAccount(server, { verified: false })).key
  })
  afterAll(async () => {
    await server?.stop()
  })

  test('401 without a key, with a wrong key, and with a user token; 200 with any organization key', async () => {
    const unauthorized = async (headers: Record<string, string>) => {
      const res = await fetch(`${server.base}/metrics`, { headers })
      return { status: res.status, body: await res.json() }
    }
    expect(await unauthorized({})).toEqual({
      status: 401,
      body: { error: 'authentication required: send "X-API-Key: <key>" or "Authorization: Bearer <token>"' },
    })
    const wrong = `${key.slice(0, -4)}${key.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`
    expect(await unauthorized({ 'x-api-key': wrong })).toEqual({ status: 401, body: { error: 'invalid API key' } })
    expect(await unauthorized({ authorization: `Bearer ${wrong}` })).toEqual({ status: 401, body: { error: 'invalid API key' } })
    expect(await unauthorized({ authorization: `Bearer ${userToken}` })).toEqual({
      status: 401,
      body: { error: 'GET /metrics takes an API key: send "X-API-Key: <key>" or "Authorization: Bearer <key>"' },
    })
    // Both organizations' keys, both ways of sending them.
    for (const k of [key, otherKey]) {
      checkConventions(await scrape(server, { 'x-api-key': k }))
      checkConventions(await scrape(server, { authorization: `Bearer ${k}` }))
    }
  })

  test('the families, their types, and no label naming a tenant', async () => {
    const s = await scrape(server, { authorization: `Bearer ${key}` })
    const types = Object.fromEntries([...s.values()].map((f) => [f.name, f.type]))
    expect(types).toEqual({
      process_resident_memory_bytes: 'GAUGE',
      process_cpu_seconds_total: 'COUNTER',
      process_start_time_seconds: 'GAUGE',
      nodejs_heap_size_used_bytes: 'GAUGE',
      nodejs_heap_size_total_bytes: 'GAUGE',
      dbm_ingest_requests_total: 'COUNTER',
      dbm_ingest_request_duration_seconds: 'HISTOGRAM',
      dbm_ingest_batches_total: 'COUNTER',
      dbm_ingest_rows_total: 'COUNTER',
      dbm_store_query_duration_seconds: 'HISTOGRAM',
      dbm_health_monitor_run_duration_seconds: 'HISTOGRAM',
      dbm_health_monitor_diagnoses_total: 'COUNTER',
      dbm_retention_deleted_rows_total: 'COUNTER',
      dbm_websocket_clients: 'GAUGE',
      dbm_rate_limit_refusals_total: 'COUNTER',
      dbm_response_schema_errors_total: 'COUNTER',
      dbm_mail_deliveries_total: 'COUNTER',
      dbm_webhook_deliveries_total: 'COUNTER',
    })
    const labelNames = new Set([...s.values()].flatMap((f) => f.metrics.flatMap((m) => Object.keys(m.labels ?? {}))))
    for (const name of labelNames) expect(['status', 'result', 'call', 'outcome', 'kind', 'le']).toContain(name)
    // Process figures of this process.
    expect(value(s, 'process_resident_memory_bytes')).toBeGreaterThan(10_000_000)
    expect(Math.abs(value(s, 'process_start_time_seconds') - (Date.now() / 1000 - process.uptime()))).toBeLessThan(5)
    expect(value(s, 'process_cpu_seconds_total')).toBeGreaterThan(0)
    expect(value(s, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0)
    // The store's calls are timed (the key check itself read the store).
    expect(histogramCount(s, 'dbm_store_query_duration_seconds', { call: 'get' })).toBeGreaterThan(0)
  })

  test('ingest: N batches move the batch and 200 counts by N, rows by their entries, a duplicate and a refused key their own', async () => {
    const before = await scrape(server, { 'x-api-key': key })
    const N = 5
    let rows = 0
    const first = pgBatch('metrics-db', Date.now() - 60_000, {
      tables: [],
      locks: [],
    })
    for (let i = 0; i < N; i++) {
      const activity: ActiveQuery[] = Array.from({ length: i + 1 }, (_, j) => ({
        pid: 1000 + j,
        query_text: `SELECT ${j}`,
        state: 'active',
        wait_event_type: null,
        wait_event: null,
        duration_ms: 5,
        blocking_pids: [],
      }))
      const b = i === 0 ? first : pgBatch('metrics-db', Date.now() - 60_000 + i * 1000, { activity })
      rows += i === 0 ? 0 : activity.length
      const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: b })
      expect({ i, status: res.status, body: res.status === 200 ? 'ok' : res.body }).toEqual({ i, status: 200, body: 'ok' })
    }
    const again = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: first })
    expect(again.body.duplicate).toBe(true)
    const refused = await server.call('POST', '/api/v1/ingest', { apiKey: 'dbm_ak_nope_nope', body: first })
    expect(refused.status).toBe(401)
    const after = await scrape(server, { 'x-api-key': otherKey })
    const diff = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels)
    expect(diff('dbm_ingest_batches_total', { result: 'applied' })).toBe(N)
    expect(diff('dbm_ingest_batches_total', { result: 'duplicate' })).toBe(1)
    expect(diff('dbm_ingest_requests_total', { status: '200' })).toBe(N + 1)
    expect(diff('dbm_ingest_requests_total', { status: '401' })).toBe(1)
    expect(diff('dbm_ingest_rows_total')).toBe(rows)
    expect(rows).toBe(2 + 3 + 4 + 5)
    const count = (s: Scrape) => histogramCount(s, 'dbm_ingest_request_duration_seconds')
    expect(count(after) - count(before)).toBe(N + 2)
    // The histogram's buckets are cumulative and end at the count.
    const h = histogram(after, 'dbm_ingest_request_duration_seconds')!
    for (let i = 1; i < h.buckets.length; i++) expect(h.buckets[i]![1]).toBeGreaterThanOrEqual(h.buckets[i - 1]![1])
    expect(h.buckets.at(-1)).toEqual([Number.POSITIVE_INFINITY, h.count])
    expect(h.buckets.length).toBe(16)
    expect(h.sum).toBeGreaterThan(0)
  })

  test('rate-limit refusals and logged mails are counted', async () => {
    const before = await scrape(server, { 'x-api-key': key })
    const ip = uniqueIp()
    let refusals = 0
    for (let i = 0; i < 7; i++) {
      const res = await server.call('POST', '/api/v1/auth/forgot-password', { ip, body: {} })
      if (res.status === 429) refusals++
    }
    expect(refusals).toBe(2)
    await signup(server)
    await server.deps.mailer.idle()
    const after = await scrape(server, { 'x-api-key': key })
    expect(value(after, 'dbm_rate_limit_refusals_total') - value(before, 'dbm_rate_limit_refusals_total')).toBe(2)
    expect(value(after, 'dbm_mail_deliveries_total', { outcome: 'logged' }) - value(before, 'dbm_mail_deliveries_total', { outcome: 'logged' })).toBe(1)
  })
})

describe('GET /metrics: the health monitor, retention, webhooks and streams', () => {
  let server: TestServer
  let key = ''
  let token = ''
  let receiver: ReturnType<typeof startWebhookReceiver>
  beforeAll(async () => {
    server = await startTestServer('sqlite', { webhooks: { allowPrivate: true } })
    const agent = await agentAccount(server)
    key = agent.key
    token = agent.account.token
    receiver = startWebhookReceiver({ statuses: [200, 500] })
  })
  afterAll(async () => {
    receiver?.stop()
    await server?.stop()
  })

  test('a monitor pass, a retention sweep, webhook deliveries and an open stream move their series', async () => {
    const id = (await server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch('watched', Date.now() - 60_000, { activity: [{ pid: 7, query_text: 'SELECT 1', state: 'active', wait_event_type: null, wait_event: null, duration_ms: 5, blocking_pids: [] }] }) })).body.database_id as string
    const before = await scrape(server, { 'x-api-key': key })
    const monitor = createHealthMonitor(server.deps, { retentionDays: 30 })
    const pass = await monitor.runOnce()
    expect(pass.databases).toBe(1)
    // 40 days on, the batch is past the verified organization's 30 days (and its batch id past a day).
    const sweep = await monitor.runRetention(Date.now() + 40 * 24 * 3_600_000)
    expect(sweep.rows_deleted).toBeGreaterThan(0)
    expect(sweep.batch_ids_deleted).toBe(1)
    expect((await server.call('PUT', '/api/v1/organization/webhook', { token, body: { url: `${receiver.url}/hook` } })).status).toBe(201)
    expect((await server.call('POST', '/api/v1/organization/webhook/test', { token })).body).toEqual({ delivered: true })
    server.advance(60_000)
    expect((await server.call('POST', '/api/v1/organization/webhook/test', { token })).body.delivered).toBe(false)
    expect(receiver.received.length).toBe(2)
    const ws = new WebSocket(`${server.base.replace('http', 'ws')}/api/v1/databases/${id}/active/ws?token=${token}`)
    await new Promise((resolve) => (ws.onmessage = resolve))
    const after = await scrape(server, { 'x-api-key': key })
    ws.close(1000)
    const diff = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels)
    expect(diff('dbm_health_monitor_diagnoses_total', { outcome: 'ok' })).toBe(1)
    expect(diff('dbm_health_monitor_diagnoses_total', { outcome: 'failed' })).toBe(0)
    expect(histogramCount(after, 'dbm_health_monitor_run_duration_seconds') - histogramCount(before, 'dbm_health_monitor_run_duration_seconds')).toBe(1)
    expect(diff('dbm_retention_deleted_rows_total', { kind: 'telemetry' })).toBe(sweep.rows_deleted)
    expect(diff('dbm_retention_deleted_rows_total', { kind: 'batch_ids' })).toBe(1)
    expect(diff('dbm_webhook_deliveries_total', { outcome: 'delivered' })).toBe(1)
    expect(diff('dbm_webhook_deliveries_total', { outcome: 'failed' })).toBe(1)
    expect(value(after, 'dbm_websocket_clients')).toBe(1)
    await until('the stream to close', async () => (server.deps.streams!.size === 0 ? true : undefined))
    expect(value(await scrape(server, { 'x-api-key': key }), 'dbm_websocket_clients')).toBe(0)
  })
})
