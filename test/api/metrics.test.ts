// GET /metrics of `dbm serve`, read with a Prometheus text-format parser package, in its two views. The
// server's own figures only for the operator's DBM_METRICS_TOKEN: names, types and units by the
// conventions; values against what the test did (batches, rows, statuses, refusals, mails). An
// organization's API key or session reads that organization's figures only: the review's repro (issue 23)
// shows that nothing another tenant or a password reset does moves them, and hostile database names
// still make a valid exposition. Server counts are compared as differences between two scrapes: the
// metrics are the process's, and other test files' servers may share the process.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chBatch, pgBatch } from '../support/batches.ts'
import type { ActiveQuery } from '../../src/shared/wire.ts'
import { type Scrape, checkConventions, histogram, histogramCount, parseScrape, value } from '../support/prometheus.ts'
import {
  type StoreKind,
  type TestServer,
  agentAccount,
  signup,
  startTestServer,
  storeKinds,
  uniqueIp,
} from '../support/server.ts'
import { until } from '../support/wait.ts'
import { startWebhookReceiver } from '../support/webhook.ts'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { UsageError, resolveServeConfig } from '../../src/server/config.ts'

/** The operator's DBM_METRICS_TOKEN of the test servers. */
const TOKEN = 'operator-metrics-token-0123456789abcdef'
const operator = { authorization: `Bearer ${TOKEN}` }

async function scrapeText(server: TestServer, headers: Record<string, string>): Promise<string> {
  const res = await fetch(`${server.base}/metrics`, { headers })
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
  return res.text()
}

async function scrape(server: TestServer, headers: Record<string, string>): Promise<Scrape> {
  return parseScrape(await scrapeText(server, headers))
}

async function refused(server: TestServer, headers: Record<string, string>) {
  const res = await fetch(`${server.base}/metrics`, { headers })
  return { status: res.status, body: await res.json() }
}

const SERVER_FAMILIES = {
  process_resident_memory_bytes: 'GAUGE',
  process_cpu_seconds_total: 'COUNTER',
  process_start_time_seconds: 'GAUGE',
  nodejs_heap_size_used_bytes: 'GAUGE',
  nodejs_heap_size_total_bytes: 'GAUGE',
  dbm_ingest_requests_total: 'COUNTER',
  dbm_ingest_request_duration_seconds: 'HISTOGRAM',
  dbm_ingest_batches_total: 'COUNTER',
  dbm_ingest_rows_total: 'COUNTER',
  dbm_ingest_shed_total: 'COUNTER',
  dbm_ingest_refusals_total: 'COUNTER',
  dbm_ingest_in_flight: 'GAUGE',
  dbm_store_query_duration_seconds: 'HISTOGRAM',
  dbm_health_monitor_run_duration_seconds: 'HISTOGRAM',
  dbm_health_monitor_diagnoses_total: 'COUNTER',
  dbm_retention_deleted_rows_total: 'COUNTER',
  dbm_websocket_clients: 'GAUGE',
  dbm_rate_limit_refusals_total: 'COUNTER',
  dbm_response_schema_errors_total: 'COUNTER',
  dbm_mail_deliveries_total: 'COUNTER',
  dbm_webhook_deliveries_total: 'COUNTER',
  dbm_alert_destination_deliveries_total: 'COUNTER',
}

const ORGANIZATION_FAMILIES = {
  dbm_databases: 'GAUGE',
  dbm_database_connected: 'GAUGE',
  dbm_database_up: 'GAUGE',
  dbm_database_down_cause: 'GAUGE',
  dbm_database_last_batch_timestamp_seconds: 'GAUGE',
  dbm_database_agent_last_heard_timestamp_seconds: 'GAUGE',
  dbm_database_health_score: 'GAUGE',
  dbm_database_findings: 'GAUGE',
  dbm_database_open_alerts: 'GAUGE',
}

const familyTypes = (s: Scrape): Record<string, string> =>
  Object.fromEntries([...s.values()].map((f) => [f.name, f.type]))

/** 50 % of block reads from shared buffers: a critical finding, and so an open alert, at the next diagnosis. */
const critical = (name: string) =>
  pgBatch(name, Date.now() - 30_000, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })

describe.each(storeKinds)('GET /metrics (%s store)', (kind: StoreKind) => {
  let server: TestServer
  let key = ''
  let otherKey = ''
  let userToken = ''
  beforeAll(async () => {
    server = await startTestServer(kind, { metricsToken: TOKEN })
    const agent = await agentAccount(server)
    key = agent.key
    userToken = agent.account.token
    otherKey = (await agentAccount(server, { verified: false })).key
  })
  afterAll(async () => {
    await server?.stop()
  })

  test('the token reads the server view; an organization key or session its own view; anything else 401', async () => {
    expect(await refused(server, {})).toEqual({
      status: 401,
      body: { error: 'authentication required: send "X-API-Key: <key>" or "Authorization: Bearer <token>"' },
    })
    const wrong = `${key.slice(0, -4)}${key.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`
    expect(await refused(server, { 'x-api-key': wrong })).toEqual({ status: 401, body: { error: 'invalid API key' } })
    expect(await refused(server, { authorization: `Bearer ${wrong}` })).toEqual({
      status: 401,
      body: { error: 'invalid API key' },
    })
    // A near miss of the token, the token in another scheme or header: not the operator.
    // Said so that an operator looks at the token: not only "access token".
    const invalidToken = {
      status: 401,
      body: {
        error:
          "invalid credentials: neither this server's DBM_METRICS_TOKEN (its own figures) nor a valid access token; an organization's figures take its API key",
      },
    }
    expect(await refused(server, { authorization: `Bearer ${TOKEN.slice(0, -1)}` })).toEqual(invalidToken)
    expect(await refused(server, { authorization: `Bearer ${TOKEN}x` })).toEqual(invalidToken)
    expect((await refused(server, { authorization: `Basic ${TOKEN}` })).status).toBe(401)
    expect(await refused(server, { 'x-api-key': TOKEN })).toEqual({ status: 401, body: { error: 'invalid API key' } })
    // An API key beside the token is the organization's credential, as on every route: its own view.
    expect(familyTypes(await scrape(server, { 'x-api-key': key, authorization: `Bearer ${TOKEN}` }))).toEqual(
      ORGANIZATION_FAMILIES,
    )

    const serverView = await scrape(server, { authorization: `bearer  ${TOKEN} ` })
    checkConventions(serverView)
    expect(familyTypes(serverView)).toEqual(SERVER_FAMILIES)
    // Both organizations' keys, both ways of sending them, and a user's session: the organization view.
    for (const headers of <Record<string, string>[]>[
      { 'x-api-key': key },
      { authorization: `Bearer ${key}` },
      { 'x-api-key': otherKey },
      { authorization: `Bearer ${userToken}` },
    ]) {
      const s = await scrape(server, headers)
      checkConventions(s)
      expect(familyTypes(s)).toEqual(ORGANIZATION_FAMILIES)
    }
  })

  test('the server view: its families, and no label naming a tenant', async () => {
    const s = await scrape(server, operator)
    expect(familyTypes(s)).toEqual(SERVER_FAMILIES)
    const labelNames = new Set([...s.values()].flatMap((f) => f.metrics.flatMap((m) => Object.keys(m.labels ?? {}))))
    for (const name of labelNames)
      expect(['status', 'result', 'call', 'outcome', 'kind', 'reason', 'le']).toContain(name)
    // Process figures of this process.
    expect(value(s, 'process_resident_memory_bytes')).toBeGreaterThan(10_000_000)
    expect(Math.abs(value(s, 'process_start_time_seconds') - (Date.now() / 1000 - process.uptime()))).toBeLessThan(5)
    expect(value(s, 'process_cpu_seconds_total')).toBeGreaterThan(0)
    expect(value(s, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0)
    // The store's calls are timed (the key check itself read the store).
    expect(histogramCount(s, 'dbm_store_query_duration_seconds', { call: 'get' })).toBeGreaterThan(0)
  })

  test('ingest: N batches move the batch and 200 counts by N, rows by their entries, a duplicate and a refused key their own', async () => {
    const before = await scrape(server, operator)
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
      expect({ i, status: res.status, body: res.status === 200 ? 'ok' : res.body }).toEqual({
        i,
        status: 200,
        body: 'ok',
      })
    }
    const again = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: first })
    expect(again.body.duplicate).toBe(true)
    const refused = await server.call('POST', '/api/v1/ingest', { apiKey: 'dbm_ak_nope_nope', body: first })
    expect(refused.status).toBe(401)
    const after = await scrape(server, operator)
    const diff = (name: string, labels: Record<string, string> = {}) =>
      value(after, name, labels) - value(before, name, labels)
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
    const before = await scrape(server, operator)
    const ip = uniqueIp()
    let refusals = 0
    for (let i = 0; i < 7; i++) {
      const res = await server.call('POST', '/api/v1/auth/forgot-password', { ip, body: {} })
      if (res.status === 429) refusals++
    }
    expect(refusals).toBe(2)
    await signup(server)
    await server.deps.mailer.idle()
    const after = await scrape(server, operator)
    expect(value(after, 'dbm_rate_limit_refusals_total') - value(before, 'dbm_rate_limit_refusals_total')).toBe(2)
    expect(
      value(after, 'dbm_mail_deliveries_total', { outcome: 'logged' }) -
        value(before, 'dbm_mail_deliveries_total', { outcome: 'logged' }),
    ).toBe(1)
  })

  test("the review's repro: a password reset, known address or not, and another tenant's activity move nothing in an organization's view", async () => {
    // A fresh, unverified signup with a key: what anyone could make where signup is open.
    const stranger = await agentAccount(server, { verified: false })
    const ingest = async (apiKey: string, name: string) =>
      expect(
        (await server.call('POST', '/api/v1/ingest', { apiKey, body: pgBatch(name, Date.now() - 5_000) })).status,
      ).toBe(200)
    await ingest(stranger.key, 'stranger-db')
    const victim = await agentAccount(server)
    await server.deps.mailer.idle()
    const strangerView = { 'x-api-key': stranger.key }
    const before = await scrapeText(server, strangerView)
    const operatorBefore = await scrape(server, operator)

    for (const email of [victim.account.email, `nobody-${crypto.randomUUID()}@example.com`]) {
      expect(
        (await server.call('POST', '/api/v1/auth/forgot-password', { ip: uniqueIp(), body: { email } })).status,
      ).toBe(200)
    }
    await server.deps.mailer.idle()
    // The other tenant's activity: a database registered by its agent, a refused login.
    await ingest(victim.key, 'victim-secret-db')
    await server.call('POST', '/api/v1/auth/login', {
      ip: uniqueIp(),
      body: { email: victim.account.email, password: 'wrong password' },
    })

    const after = await scrapeText(server, strangerView)
    expect(after).toBe(before)
    expect(after).toContain('name="stranger-db"')
    expect(after).not.toContain('victim')
    expect(after).not.toMatch(/mail|process_|nodejs_|ingest|rate_limit/)
    expect(await scrapeText(server, { authorization: `Bearer ${stranger.account.token}` })).toBe(before)
    // The victim's own view shows its database; the operator's view has the mail and ingest counters.
    expect(await scrapeText(server, { 'x-api-key': victim.key })).toContain('name="victim-secret-db"')
    const operatorAfter = await scrape(server, operator)
    const diff = (name: string, labels: Record<string, string>) =>
      value(operatorAfter, name, labels) - value(operatorBefore, name, labels)
    expect(diff('dbm_mail_deliveries_total', { outcome: 'logged' })).toBe(1)
    expect(diff('dbm_ingest_batches_total', { result: 'applied' })).toBe(1)
  })

  test("an organization's view: its databases by engine and status, their diagnosis and open alerts; hostile names make a valid exposition", async () => {
    const org = await agentAccount(server)
    const ingest = async (batch: ReturnType<typeof pgBatch>) => {
      const res = await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: batch })
      expect(res.status).toBe(200)
      return res.body.database_id as string
    }
    const orders = await ingest(critical('orders'))
    const events = await ingest(chBatch('events', Date.now() - 5_000))
    const idle = await server.call('POST', '/api/v1/databases', {
      apiKey: org.key,
      body: { name: 'idle', engine: 'postgres', host: 'idle.internal', port: 5432 },
    })
    expect(idle.status).toBe(201)
    // A database its agent reports unreachable: disconnected, and down with the cause.
    const down = await ingest({
      ...pgBatch('down', Date.now() - 5_000),
      availability: { state: 'down', since: Date.now() - 60_000, cause: 'refused', message: 'connection refused' },
    })
    await createMonitor(server.deps, { retentionDays: 30 }).runOnce()
    const hostile = [
      'q"uote',
      'back\\slash\\',
      'new\nline',
      'cr\rreturn',
      'tab\tx',
      'bidi \u202Eevil\u2066 text\u2069',
      'line\u2028separator',
      '*/ end /*',
      'ünïcødé 数据库 🐘',
      '\\"',
      'x"} 1\n# TYPE dbm_databases counter\ndbm_databases{engine="postgres",status="connected"} 999',
    ]
    const hostileIds = new Map<string, string>()
    for (const name of hostile) hostileIds.set(name, await ingest(pgBatch(name, Date.now() - 5_000)))

    const s = await scrape(server, { authorization: `Bearer ${org.key}` })
    checkConventions(s)
    expect(familyTypes(s)).toEqual(ORGANIZATION_FAMILIES)
    expect(value(s, 'dbm_databases', { engine: 'postgres', status: 'connected' })).toBe(1 + hostile.length)
    expect(value(s, 'dbm_databases', { engine: 'postgres', status: 'disconnected' })).toBe(2)
    expect(value(s, 'dbm_database_connected', { id: down, name: 'down', engine: 'postgres' })).toBe(0)
    // One up series per database, without the cause: the cause is its own series while down.
    expect(
      s
        .get('dbm_database_up')!
        .metrics.filter((m) => m.labels?.id === down)
        .map((m) => [m.labels, m.value]),
    ).toEqual([[{ id: down, name: 'down' }, '0']])
    expect(s.get('dbm_database_down_cause')!.metrics.map((m) => [m.labels, m.value])).toEqual([
      [{ id: down, name: 'down', cause: 'refused' }, '1'],
    ])
    expect(
      s
        .get('dbm_database_up')!
        .metrics.filter((m) => m.labels?.id === orders)
        .map((m) => [m.labels, m.value]),
    ).toEqual([[{ id: orders, name: 'orders' }, '1']])
    // never heard from: no up series at all
    expect(s.get('dbm_database_up')!.metrics.some((m) => m.labels?.id === idle.body.id)).toBe(false)
    expect(value(s, 'dbm_databases', { engine: 'clickhouse', status: 'connected' })).toBe(1)
    expect(value(s, 'dbm_databases', { engine: 'clickhouse', status: 'disconnected' })).toBe(0)
    expect(value(s, 'dbm_database_connected', { id: orders, name: 'orders', engine: 'postgres' })).toBe(1)
    expect(value(s, 'dbm_database_connected', { id: events, name: 'events', engine: 'clickhouse' })).toBe(1)
    expect(value(s, 'dbm_database_connected', { id: idle.body.id, name: 'idle', engine: 'postgres' })).toBe(0)
    // Every hostile name comes back as it was, as the label of its own database's series.
    const connected = s.get('dbm_database_connected')!.metrics
    expect(connected.length).toBe(4 + hostile.length)
    for (const [name, id] of hostileIds) {
      expect(connected.filter((m) => m.labels?.id === id).map((m) => [m.labels?.name, m.value])).toEqual([[name, '1']])
    }
    const lastBatch = value(s, 'dbm_database_last_batch_timestamp_seconds', { id: orders })
    expect(Math.abs(lastBatch - Date.now() / 1000)).toBeLessThan(60)
    expect(s.get('dbm_database_last_batch_timestamp_seconds')!.metrics.some((m) => m.labels?.id === idle.body.id)).toBe(
      false,
    )
    // The diagnosis: the critical cache-hit finding, its open alert, a score.
    expect(value(s, 'dbm_database_findings', { id: orders, severity: 'critical' })).toBeGreaterThanOrEqual(1)
    expect(value(s, 'dbm_database_open_alerts', { id: orders, severity: 'critical' })).toBe(1)
    expect(value(s, 'dbm_database_open_alerts', { id: events, severity: 'critical' })).toBe(0)
    const score = value(s, 'dbm_database_health_score', { id: orders })
    expect(score).toBeGreaterThanOrEqual(0)
    expect(score).toBeLessThan(100)
    // Not diagnosed yet: no score and no findings series, zero open alerts.
    const [someHostile] = hostileIds.values()
    expect(s.get('dbm_database_health_score')!.metrics.some((m) => m.labels?.id === someHostile)).toBe(false)
    expect(s.get('dbm_database_findings')!.metrics.some((m) => m.labels?.id === someHostile)).toBe(false)
    expect(value(s, 'dbm_database_open_alerts', { id: someHostile!, severity: 'critical' })).toBe(0)
    // Each sample is one line: a name's line break or quote never starts a line of its own.
    for (const line of s.text.split('\n')) expect(line === '' || /^(# (HELP|TYPE) )?dbm_/.test(line)).toBe(true)

    // The cause changes within the outage (refused, then timeout): the up series stays the same one (an
    // Alertmanager alert on it neither resolves nor opens again); only the cause series changes.
    const heardAt = Date.now()
    await ingest({
      ...pgBatch('down', heardAt),
      availability: { state: 'down', since: Date.now() - 60_000, cause: 'timeout', message: 'timed out' },
    })
    const t = await scrape(server, { authorization: `Bearer ${org.key}` })
    expect(
      t
        .get('dbm_database_up')!
        .metrics.filter((m) => m.labels?.id === down)
        .map((m) => [m.labels, m.value]),
    ).toEqual([[{ id: down, name: 'down' }, '0']])
    expect(t.get('dbm_database_down_cause')!.metrics.map((m) => [m.labels, m.value])).toEqual([
      [{ id: down, name: 'down', cause: 'timeout' }, '1'],
    ])
    // The agent was heard now (a report), though its last batch with data is older.
    expect(
      Math.abs(value(t, 'dbm_database_agent_last_heard_timestamp_seconds', { id: down }) - heardAt / 1000),
    ).toBeLessThan(5)
    expect(
      t.get('dbm_database_agent_last_heard_timestamp_seconds')!.metrics.some((m) => m.labels?.id === idle.body.id),
    ).toBe(false)
  })
})

test('without DBM_METRICS_TOKEN there is no server view: a Bearer value is a token like any other (401)', async () => {
  const server = await startTestServer('sqlite')
  try {
    expect(await refused(server, operator)).toEqual({
      status: 401,
      body: {
        error:
          "invalid credentials: not a valid access token, and this server has no DBM_METRICS_TOKEN (its own figures are off); an organization's figures take its API key",
      },
    })
    const { key } = await agentAccount(server)
    expect(familyTypes(await scrape(server, { 'x-api-key': key }))).toEqual(ORGANIZATION_FAMILIES)
  } finally {
    await server.stop()
  }
})

test('DBM_METRICS_TOKEN and DBM_METRICS_TOKEN_FILE: at least 32 printable characters, from one of them, checked at start-up', () => {
  const resolve = (env: Record<string, string>) => resolveServeConfig({}, env).metricsToken
  const error = (env: Record<string, string>) => {
    try {
      resolve(env)
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError)
      return (e as Error).message
    }
    throw new Error('accepted')
  }
  expect(resolve({})).toBeUndefined()
  expect(resolve({ DBM_METRICS_TOKEN: TOKEN })).toBe(TOKEN)
  expect(error({ DBM_METRICS_TOKEN: 'x'.repeat(31) })).toBe(
    'DBM_METRICS_TOKEN: the token must be at least 32 characters (for example: openssl rand -hex 32)',
  )
  expect(error({ DBM_METRICS_TOKEN: `${'x'.repeat(32)} y` })).toBe(
    'DBM_METRICS_TOKEN: the token must be printable ASCII without spaces or line breaks',
  )
  const dir = mkdtempSync(join(tmpdir(), 'dbm-metrics-token-'))
  try {
    const file = join(dir, 'token')
    writeFileSync(file, `${TOKEN}\n`, { mode: 0o600 })
    expect(resolve({ DBM_METRICS_TOKEN_FILE: file })).toBe(TOKEN)
    expect(error({ DBM_METRICS_TOKEN_FILE: file, DBM_METRICS_TOKEN: TOKEN })).toBe(
      'DBM_METRICS_TOKEN and DBM_METRICS_TOKEN_FILE: set one of them, not both',
    )
    expect(error({ DBM_METRICS_TOKEN_FILE: join(dir, 'missing') })).toBe(
      `DBM_METRICS_TOKEN_FILE: cannot read "${join(dir, 'missing')}" (ENOENT)`,
    )
    writeFileSync(file, 'short\n')
    expect(error({ DBM_METRICS_TOKEN_FILE: file })).toBe(
      'DBM_METRICS_TOKEN_FILE: the token must be at least 32 characters (for example: openssl rand -hex 32)',
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

describe('GET /metrics: the health monitor, retention, webhooks and streams', () => {
  let server: TestServer
  let key = ''
  let token = ''
  let receiver: ReturnType<typeof startWebhookReceiver>
  beforeAll(async () => {
    server = await startTestServer('sqlite', { webhooks: { allowPrivate: true }, metricsToken: TOKEN })
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
    const id = (
      await server.call('POST', '/api/v1/ingest', {
        apiKey: key,
        body: pgBatch('watched', Date.now() - 60_000, {
          activity: [
            {
              pid: 7,
              query_text: 'SELECT 1',
              state: 'active',
              wait_event_type: null,
              wait_event: null,
              duration_ms: 5,
              blocking_pids: [],
            },
          ],
        }),
      })
    ).body.database_id as string
    const before = await scrape(server, operator)
    const monitor = createMonitor(server.deps, { retentionDays: 30 })
    const pass = await monitor.runOnce()
    expect(pass.databases).toBe(1)
    // 40 days on, the batch is past the verified organization's 30 days (and its batch id past a day).
    const sweep = await monitor.runRetention(Date.now() + 40 * 24 * 3_600_000)
    expect(sweep.rows_deleted).toBeGreaterThan(0)
    expect(sweep.batch_ids_deleted).toBe(1)
    expect(
      (await server.call('PUT', '/api/v1/organization/webhook', { token, body: { url: `${receiver.url}/hook` } }))
        .status,
    ).toBe(201)
    expect((await server.call('POST', '/api/v1/organization/webhook/test', { token })).body).toEqual({
      delivered: true,
    })
    server.advance(60_000)
    expect((await server.call('POST', '/api/v1/organization/webhook/test', { token })).body.delivered).toBe(false)
    expect(receiver.received.length).toBe(2)
    const ws = new WebSocket(`${server.base.replace('http', 'ws')}/api/v1/databases/${id}/active/ws?token=${token}`)
    await new Promise((resolve) => (ws.onmessage = resolve))
    const after = await scrape(server, operator)
    ws.close(1000)
    const diff = (name: string, labels: Record<string, string> = {}) =>
      value(after, name, labels) - value(before, name, labels)
    expect(diff('dbm_health_monitor_diagnoses_total', { outcome: 'ok' })).toBe(1)
    expect(diff('dbm_health_monitor_diagnoses_total', { outcome: 'failed' })).toBe(0)
    expect(
      histogramCount(after, 'dbm_health_monitor_run_duration_seconds') -
        histogramCount(before, 'dbm_health_monitor_run_duration_seconds'),
    ).toBe(1)
    expect(diff('dbm_retention_deleted_rows_total', { kind: 'telemetry' })).toBe(sweep.rows_deleted)
    expect(diff('dbm_retention_deleted_rows_total', { kind: 'batch_ids' })).toBe(1)
    expect(diff('dbm_webhook_deliveries_total', { outcome: 'delivered' })).toBe(1)
    expect(diff('dbm_webhook_deliveries_total', { outcome: 'failed' })).toBe(1)
    expect(value(after, 'dbm_websocket_clients')).toBe(1)
    await until('the stream to close', async () => (server.deps.streams!.size === 0 ? true : undefined))
    expect(value(await scrape(server, operator), 'dbm_websocket_clients')).toBe(0)
  })
})
