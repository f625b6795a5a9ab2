// Alert destinations against a real Prometheus Alertmanager (Debian's 0.25, scripts/ensure-packages.ts):
// a critical finding opens an alert, dbm posts it to Alertmanager's /api/v2/alerts, and Alertmanager's own
// GET /api/v2/alerts lists it active with dbm's labels and annotations; the cure resolves it, dbm posts its
// endsAt, and Alertmanager counts a resolved alert received and lists the alert no more (its API leaves out
// alerts whose endsAt has passed). The database's name carries a quote, a backslash and non-ASCII text,
// which Alertmanager must get back unchanged. Every wait polls Alertmanager's state.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type Monitor, createMonitor } from '../../src/server/monitor/index.ts'
import { type TestAlertmanager, startAlertmanager } from '../support/alertmanager.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const RULE = 'pg_cache_hit_ratio'
const NAME = 'bill"ing\\ çà ✓'

let server: TestServer
let monitor: Monitor
let am: TestAlertmanager

beforeAll(async () => {
  ;[server, am] = await Promise.all([
    startTestServer('sqlite', { webhooks: { allowPrivate: true } }),
    startAlertmanager(),
  ])
  monitor = createMonitor(server.deps, { retentionDays: 30, evaluateEveryMs: 30_000 })
})
afterAll(async () => {
  await am?.stop()
  await server?.stop()
})

/** Alertmanager's answer to GET path, polled until `done` holds of it (at most 5 s). */
async function until<T>(path: string, done: (body: T) => boolean): Promise<T> {
  const deadline = Date.now() + 5000
  while (true) {
    const body = (await (await fetch(`${am.url}${path}`)).json()) as T
    if (done(body)) return body
    if (Date.now() > deadline)
      throw new Error(`Alertmanager's ${path} still answers ${JSON.stringify(body)}\n${am.output()}`)
    await Bun.sleep(50)
  }
}

/** Alertmanager's own count of alerts received in that status through its v2 API, from its /metrics. */
async function received(status: 'firing' | 'resolved'): Promise<number> {
  const text = await (await fetch(`${am.url}/metrics`)).text()
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('alertmanager_alerts_received_total{') &&
        l.includes(`status="${status}"`) &&
        l.includes('version="v2"'),
    )
  return line ? Number(line.split(' ').at(-1)) : 0
}

test('an alert opens and resolves on a real Alertmanager, with the labels dbm sent', async () => {
  const { account, key } = await agentAccount(server)
  const made = await server.call('POST', '/api/v1/organization/alert-destinations', {
    token: account.token,
    body: { kind: 'alertmanager', name: 'real alertmanager', url: am.url },
  })
  expect(made.status).toBe(201)

  // A critical finding: half the buffer reads miss the cache.
  const ingest = await server.call('POST', '/api/v1/ingest', {
    apiKey: key,
    body: pgBatch(NAME, Date.now() - 30_000, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } }),
  })
  expect(ingest.status).toBe(200)
  const db = ingest.body.database_id as string
  const opened = await monitor.runOnce()
  expect(opened.alerts.opened).toBe(1)
  expect(opened.notifications.failed).toBe(0)
  const [alert] = (await server.call('GET', `/api/v1/databases/${db}/alerts`, { token: account.token })).body.filter(
    (a: any) => a.rule === RULE,
  )
  expect(alert.resolved_at).toBeNull()

  const [active] = await until<any[]>(
    '/api/v2/alerts',
    (alerts) => alerts.length === 1 && alerts[0].status.state === 'active',
  )
  const link = `http://dbm.test:8080/#/databases/${db}/issues`
  expect(active.labels).toEqual({
    alertname: `dbm_${RULE}`,
    source: 'dbm',
    database: NAME,
    database_id: db,
    engine: 'postgres',
    rule: RULE,
    severity: 'critical',
    cause: RULE,
  })
  expect(active.annotations).toEqual({ summary: alert.title, description: alert.detail, link })
  expect(active.generatorURL).toBe(link)
  expect(Date.parse(active.startsAt)).toBe(Date.parse(alert.opened_at))
  expect(active.receivers).toEqual([{ name: 'nobody' }])
  expect(active.status).toEqual({ state: 'active', silencedBy: [], inhibitedBy: [] })
  // No endsAt was sent: Alertmanager sets its own, resolve_timeout (5 min) on.
  expect(Date.parse(active.endsAt) - Date.parse(active.updatedAt)).toBe(5 * 60_000)
  expect(await received('firing')).toBe(1)

  // The cure: the same database reads from its cache again.
  await server.call('POST', '/api/v1/ingest', {
    apiKey: key,
    body: pgBatch(NAME, Date.now() - 10_000, { database_stats: { blks_hit: 100_000_000, blks_read: 0 } }),
  })
  const cured = await monitor.runOnce()
  expect(cured.alerts.resolved).toBe(1)
  expect(cured.notifications.failed).toBe(0)
  await until<any[]>('/api/v2/alerts', (alerts) => alerts.length === 0)
  expect(await (await fetch(`${am.url}/api/v2/alerts?active=false`)).json()).toEqual([])
  expect(await received('resolved')).toBe(1)
  expect(
    (await server.call('GET', `/api/v1/organization/alert-destinations/${made.body.id}`, { token: account.token }))
      .body,
  ).toMatchObject({ sent: 2, failed: 0, last_error: null })
})
