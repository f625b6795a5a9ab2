// The health monitor on both stores, from crafted batches (a buffer cache hit ratio of 50 % is a critical
// pg_cache_hit_ratio finding; 100 million hits on top cure it): recommendations open once, stay one row
// across evaluations and resolve when the finding goes; alerts open and resolve with exactly one mail and
// one signed webhook POST per state change (a real HTTP receiver checks the HMAC), failed POSTs are
// retried at the next evaluation; unverified organizations get a 403 for recommendations; deleting a
// database removes its rows; the organization webhook endpoints; and the monitor on its own schedule.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type Monitor, alertMail, createMonitor } from '../../src/server/monitor/index.ts'
import { TEST_NOT_DELIVERED } from '../../src/server/routes/alerts.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import {
  type Account,
  type TestServer,
  agentAccount,
  createApiKey,
  signup,
  startTestServer,
  storeKinds,
} from '../support/server.ts'
import { startSmtpReceiver } from '../support/smtp.ts'
import { until } from '../support/wait.ts'
import { startWebhookReceiver } from '../support/webhook.ts'

const RULE = 'pg_cache_hit_ratio'
const TITLE = 'Low buffer cache hit ratio'
/** A finding that is its own cause: the alert lists it alone. */
const CONSEQUENCE = { key: RULE, rule: RULE, severity: 'critical', title: TITLE }
const iso = (ms: number) => new Date(ms).toISOString()
/** 50 % of block reads from shared buffers over the last hour: critical (below 90 %). */
const critical = (name: string) =>
  pgBatch(name, Date.now() - 30_000, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })
/** Enough hits on top that the hour's ratio is above 99 %: no finding. */
const cured = (name: string) =>
  pgBatch(name, Date.now() - 10_000, { database_stats: { blks_hit: 100_000_000, blks_read: 0 } })

/** An organization on the server: its account (verified or not), an API key, and calls as that key. */
async function organization(server: TestServer, verified: boolean) {
  const { account, key } = await agentAccount(server, { verified })
  return {
    account,
    key,
    async ingest(batch: IngestBatch): Promise<string> {
      const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch })
      if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body.database_id
    },
    call: (method: string, path: string, body?: unknown) => server.call(method, path, { apiKey: key, body }),
    async list(id: string, what: 'recommendations' | 'alerts', status = 'open'): Promise<any[]> {
      const res = await server.call('GET', `/api/v1/databases/${id}/${what}?status=${status}`, { apiKey: key })
      expect({ what, status: res.status }).toEqual({ what, status: 200 })
      return res.body.filter((r: any) => r.rule === RULE)
    },
  }
}

async function rowCount(server: TestServer, sql: string, params: unknown[]): Promise<number> {
  return Number((await server.store.driver.get<{ n: number }>(sql, params))!.n)
}

/** The log lines of mails (the log mailer) to `to` whose subject starts with `prefix`. */
const mailLines = (server: TestServer, to: string, prefix: string) =>
  server.logs.filter((l) => l.includes(' INFO mail ') && l.includes(`to=${to} `) && l.includes(`subject="${prefix}`))

for (const kind of storeKinds) {
  describe(`recommendations and alerts (${kind})`, () => {
    let server: TestServer
    let monitor: Monitor
    beforeAll(async () => {
      // The webhook receivers here listen on loopback: internal addresses are allowed (webhook-ssrf.test.ts
      // tests them refused).
      server = await startTestServer(kind, { webhooks: { allowPrivate: true } })
      monitor = createMonitor(server.deps, { retentionDays: 30 })
    })
    afterAll(async () => {
      await server?.stop()
    })

    test('a finding opens one recommendation with its remediation SQL, kept as one row, resolved when the finding goes', async () => {
      const org = await organization(server, true)
      const id = await org.ingest(critical('orders'))
      const first = server.deps.clock()
      await monitor.runOnce(first)
      const fix = (await org.call('GET', `/api/v1/databases/${id}/doctor`)).body.top_issues.find(
        (f: any) => f.rule === RULE,
      ).how_to_fix
      const [open] = await org.list(id, 'recommendations')
      expect(open).toEqual({
        id: expect.any(String),
        key: RULE,
        rule: RULE,
        severity: 'critical',
        category: 'performance',
        title: TITLE,
        detail: expect.stringContaining('50.00 %'),
        recommendation: expect.stringContaining('shared_buffers'),
        remediation_sql: fix.join('\n'),
        cause: RULE,
        first_seen_at: iso(first),
        last_seen_at: iso(first),
        resolved_at: null,
      })
      expect(open.remediation_sql).toContain('ALTER SYSTEM SET shared_buffers')

      // A second evaluation updates the same row.
      await monitor.runOnce(first + 20_000)
      const again = await org.list(id, 'recommendations')
      expect(again).toEqual([{ ...open, last_seen_at: iso(first + 20_000) }])
      expect(
        await rowCount(server, 'SELECT COUNT(*) AS n FROM recommendations WHERE database_id = $1 AND rule = $2', [
          id,
          RULE,
        ]),
      ).toBe(1)

      await org.ingest(cured('orders'))
      const later = server.deps.clock() + 25_000
      await monitor.runOnce(later)
      expect(await org.list(id, 'recommendations')).toEqual([])
      const resolved = await org.list(id, 'recommendations', 'resolved')
      expect(resolved).toEqual([{ ...open, last_seen_at: iso(first + 20_000), resolved_at: iso(later) }])
      expect(await org.list(id, 'recommendations', 'all')).toEqual(resolved)
      expect(await rowCount(server, 'SELECT COUNT(*) AS n FROM recommendations WHERE database_id = $1', [id])).toBe(1)
    })

    test('an alert opens with one mail and one signed webhook POST, and resolves with one more of each', async () => {
      const receiver = startWebhookReceiver()
      try {
        const org = await organization(server, true)
        const put = await org.call('PUT', '/api/v1/organization/webhook', { url: `${receiver.url}/hooks/dbm` })
        expect(put.status).toBe(201)
        const secret = put.body.secret as string
        const id = await org.ingest(critical('billing'))
        const opened = server.deps.clock()
        const summary = await monitor.runOnce(opened)
        expect(summary.failed).toBe(0)

        const hooks = () => receiver.received.filter((h) => h.body.alert.rule === RULE)
        expect(hooks()).toHaveLength(1)
        const [hook] = hooks()
        expect(receiver.signed(hook!, secret)).toBe(true)
        expect(receiver.signed(hook!, `${secret}x`)).toBe(false)
        expect(hook!.path).toBe('/hooks/dbm')
        expect(hook!.headers).toMatchObject({
          'content-type': 'application/json',
          'x-dbm-event': 'alert.opened',
          'x-dbm-delivery': hook!.body.delivery_id,
        })
        const [alert] = await org.list(id, 'alerts')
        expect(hook!.body).toEqual({
          event: 'alert.opened',
          delivery_id: expect.any(String),
          sent_at: iso(opened),
          organization_id: org.account.orgId,
          database: { id, name: 'billing', engine: 'postgres', host: 'db.internal', port: 5432 },
          alert: {
            id: alert.id,
            key: RULE,
            rule: RULE,
            severity: 'critical',
            title: TITLE,
            detail: alert.detail,
            opened_at: iso(opened),
            resolved_at: null,
            consequences: [CONSEQUENCE],
          },
          link: `http://dbm.test:8080/#/databases/${id}/issues`,
        })
        expect(alert).toEqual({
          id: expect.any(String),
          key: RULE,
          rule: RULE,
          severity: 'critical',
          title: TITLE,
          detail: expect.stringContaining('50.00 %'),
          opened_at: iso(opened),
          last_seen_at: iso(opened),
          resolved_at: null,
          notified: {
            opened: { email: iso(opened), webhook: iso(opened), destinations: [] },
            resolved: { email: null, webhook: null, destinations: [] },
          },
          consequences: [CONSEQUENCE],
          silenced: null,
        })
        await server.deps.mailer.idle()
        expect(mailLines(server, org.account.email, `dbm alert: ${TITLE} on billing`)).toHaveLength(1)
        expect(mailLines(server, org.account.email, 'dbm alert: ')[0]).toContain(
          `link=http://dbm.test:8080/#/databases/${id}/issues`,
        )

        // Still critical: the alert stays open, nothing is sent again.
        await monitor.runOnce(opened + 20_000)
        expect(hooks()).toHaveLength(1)
        await server.deps.mailer.idle()
        expect(mailLines(server, org.account.email, `dbm alert: ${TITLE}`)).toHaveLength(1)
        expect(mailLines(server, org.account.email, `dbm resolved: ${TITLE}`)).toHaveLength(0)
        expect(await org.list(id, 'alerts')).toEqual([{ ...alert, last_seen_at: iso(opened + 20_000) }])

        await org.ingest(cured('billing'))
        const resolvedAt = server.deps.clock() + 25_000
        await monitor.runOnce(resolvedAt)
        await monitor.runOnce(resolvedAt + 10_000)
        expect(hooks()).toHaveLength(2)
        const resolvedHook = hooks()[1]!
        expect(receiver.signed(resolvedHook, secret)).toBe(true)
        expect(resolvedHook.headers['x-dbm-event']).toBe('alert.resolved')
        expect(resolvedHook.body).toMatchObject({
          event: 'alert.resolved',
          alert: { id: alert.id, opened_at: iso(opened), resolved_at: iso(resolvedAt) },
        })
        expect(resolvedHook.body.delivery_id).not.toBe(hook!.body.delivery_id)
        await server.deps.mailer.idle()
        expect(mailLines(server, org.account.email, `dbm resolved: ${TITLE} on billing`)).toHaveLength(1)
        expect(mailLines(server, org.account.email, `dbm alert: ${TITLE} on billing`)).toHaveLength(1)

        expect(await org.list(id, 'alerts')).toEqual([])
        expect(await org.list(id, 'alerts', 'resolved')).toEqual([
          {
            ...alert,
            last_seen_at: iso(opened + 20_000),
            resolved_at: iso(resolvedAt),
            notified: {
              opened: { email: iso(opened), webhook: iso(opened), destinations: [] },
              resolved: { email: iso(resolvedAt), webhook: iso(resolvedAt), destinations: [] },
            },
            consequences: [CONSEQUENCE],
          },
        ])
        const webhook = await org.call('GET', '/api/v1/organization/webhook')
        expect(webhook.body).toMatchObject({
          last_success_at: iso(resolvedAt),
          last_failure_at: null,
          last_error: null,
        })
      } finally {
        receiver.stop()
      }
    })

    test('a failed webhook POST is retried at the next evaluation until delivered; logs hold no secret or query string', async () => {
      const receiver = startWebhookReceiver({ statuses: [500] })
      try {
        const org = await organization(server, true)
        const put = await org.call('PUT', '/api/v1/organization/webhook', {
          url: `${receiver.url}/hook?token=query-secret-123`,
        })
        const secret = put.body.secret as string
        const id = await org.ingest(critical('retry'))
        const first = server.deps.clock()
        await monitor.runOnce(first)
        const hooks = () => receiver.received.filter((h) => h.body.alert.rule === RULE)
        expect(hooks()).toHaveLength(1)
        expect(hooks()[0]!.path).toBe('/hook?token=query-secret-123')
        const [alert] = await org.list(id, 'alerts')
        expect(alert.notified.opened).toEqual({ email: iso(first), webhook: null, destinations: [] })
        expect((await org.call('GET', '/api/v1/organization/webhook')).body).toMatchObject({
          last_success_at: null,
          last_failure_at: iso(first),
          last_error: 'HTTP 500',
        })
        const failed = server.logs.filter((l) => l.includes(' WARN webhook delivery failed '))
        expect(
          failed.some(
            (l) => l.includes(`target=${receiver.url} `) && l.includes('cause="HTTP 500"') && l.includes('attempt=1'),
          ),
        ).toBe(true)

        await monitor.runOnce(first + 20_000)
        expect(hooks()).toHaveLength(2)
        expect(hooks()[1]!.body.delivery_id).toBe(hooks()[0]!.body.delivery_id)
        expect(receiver.signed(hooks()[1]!, secret)).toBe(true)
        expect((await org.list(id, 'alerts'))[0].notified.opened).toEqual({
          email: iso(first),
          webhook: iso(first + 20_000),
          destinations: [],
        })
        await monitor.runOnce(first + 30_000)
        expect(hooks()).toHaveLength(2)

        const log = server.logs.join('\n')
        expect(log).not.toContain('query-secret-123')
        expect(log).not.toContain(secret)
      } finally {
        receiver.stop()
      }
    })

    test('an unverified organization: recommendations are a 403 that says to verify, alerts are served (webhook only)', async () => {
      const receiver = startWebhookReceiver()
      try {
        const org = await organization(server, false)
        await org.call('PUT', '/api/v1/organization/webhook', { url: receiver.url })
        const id = await org.ingest(critical('unverified'))
        const now = server.deps.clock()
        await monitor.runOnce(now)
        const res = await org.call('GET', `/api/v1/databases/${id}/recommendations`)
        expect({ status: res.status, body: res.body }).toEqual({
          status: 403,
          body: {
            error: 'recommendations are available to verified organizations; verify your email address to see them',
          },
        })
        expect(await rowCount(server, 'SELECT COUNT(*) AS n FROM recommendations WHERE database_id = $1', [id])).toBe(0)
        const [alert] = await org.list(id, 'alerts')
        expect(alert).toMatchObject({ severity: 'critical', notified: { opened: { email: null, webhook: iso(now) } } })
        expect(receiver.received.filter((h) => h.body.alert.rule === RULE)).toHaveLength(1)
        await server.deps.mailer.idle()
        expect(mailLines(server, org.account.email, 'dbm ')).toEqual([])
      } finally {
        receiver.stop()
      }
    })

    test('deleting a database removes its recommendations, alerts and their notifications', async () => {
      const org = await organization(server, true)
      const id = await org.ingest(critical('doomed'))
      await monitor.runOnce(server.deps.clock())
      const alerts = 'SELECT COUNT(*) AS n FROM alerts WHERE database_id = $1'
      const notes =
        'SELECT COUNT(*) AS n FROM alert_notifications n JOIN alerts a ON a.id = n.alert_id WHERE a.database_id = $1'
      expect(await rowCount(server, alerts, [id])).toBeGreaterThan(0)
      expect(await rowCount(server, notes, [id])).toBeGreaterThan(0)
      expect(
        await rowCount(server, 'SELECT COUNT(*) AS n FROM recommendations WHERE database_id = $1', [id]),
      ).toBeGreaterThan(0)
      expect((await org.call('DELETE', `/api/v1/databases/${id}`)).status).toBe(204)
      expect(await rowCount(server, alerts, [id])).toBe(0)
      expect(await rowCount(server, 'SELECT COUNT(*) AS n FROM recommendations WHERE database_id = $1', [id])).toBe(0)
      expect(
        await rowCount(
          server,
          'SELECT COUNT(*) AS n FROM alert_notifications WHERE alert_id NOT IN (SELECT id FROM alerts)',
          [],
        ),
      ).toBe(0)
    })

    test('a rule that failed keeps its recommendation and alert open; other organizations get 404; status is validated', async () => {
      const org = await organization(server, true)
      const id = await org.ingest(critical('flaky'))
      const now = server.deps.clock()
      await monitor.runOnce(now)
      // A diagnosis in which the rule failed says nothing about its findings.
      await server.store.monitor.syncRecommendations(id, [], [RULE], now + 1000)
      await server.store.monitor.syncAlerts(id, [], [RULE], ['email'], now + 1000)
      expect(await org.list(id, 'recommendations')).toHaveLength(1)
      expect(await org.list(id, 'alerts')).toHaveLength(1)

      const stranger = await organization(server, true)
      for (const what of ['recommendations', 'alerts']) {
        const res = await stranger.call('GET', `/api/v1/databases/${id}/${what}`)
        expect({ what, status: res.status, body: res.body }).toEqual({
          what,
          status: 404,
          body: { error: 'database not found' },
        })
        const bad = await org.call('GET', `/api/v1/databases/${id}/${what}?status=closed`)
        expect({ what, status: bad.status, body: bad.body }).toEqual({
          what,
          status: 400,
          body: { error: 'status must be one of: open, resolved, all' },
        })
        const unauthenticated = await server.call('GET', `/api/v1/databases/${id}/${what}`)
        expect(unauthenticated.status).toBe(401)
      }
    })

    test('organization webhook: validated URL, secret shown once on creation, update keeps it, delete', async () => {
      const org = await organization(server, true)
      const path = '/api/v1/organization/webhook'
      expect(await org.call('GET', path)).toMatchObject({ status: 404, body: { error: 'webhook not found' } })
      const refusals: [unknown, string][] = [
        [{ url: 'ftp://hooks.example.com/x' }, 'url must be an http:// or https:// URL'],
        [{ url: 'not a url' }, 'url must be an http:// or https:// URL'],
        [{ url: 'https://user:pw@hooks.example.com/x' }, 'url must not contain a user name or password'],
        [
          { url: `https://hooks.example.com/${'x'.repeat(2048)}` },
          'url is required and must be a non-empty string of at most 2048 characters',
        ],
        [{ url: '' }, 'url is required and must be a non-empty string of at most 2048 characters'],
        [{ url: 'https://hooks.example.com/x', secret: 'mine' }, 'unknown field: secret'],
      ]
      for (const [body, error] of refusals) {
        const res = await org.call('PUT', path, body)
        expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { error } })
      }
      const created = await org.call('PUT', path, { url: 'https://hooks.example.com/dbm?channel=ops' })
      expect({ status: created.status, body: created.body }).toEqual({
        status: 201,
        body: {
          url: 'https://hooks.example.com/dbm?channel=ops',
          created_at: expect.any(String),
          updated_at: created.body.created_at,
          last_success_at: null,
          last_failure_at: null,
          last_error: null,
          secret: expect.stringMatching(/^dbm_whsec_[A-Za-z0-9_-]{43}$/),
        },
      })
      const { secret, ...view } = created.body
      expect(await org.call('GET', path)).toMatchObject({ status: 200, body: view })
      const updated = await org.call('PUT', path, { url: 'http://10.0.0.9:8000/hook' })
      expect(updated.status).toBe(200)
      expect(updated.body).toEqual({ ...view, url: 'http://10.0.0.9:8000/hook', updated_at: expect.any(String) })
      expect((await server.store.monitor.getWebhook(org.account.orgId))?.secret).toBe(secret)

      const stranger = await organization(server, true)
      expect((await stranger.call('GET', path)).status).toBe(404)
      expect((await stranger.call('DELETE', path)).status).toBe(404)
      expect((await org.call('DELETE', path)).status).toBe(204)
      expect(await org.call('GET', path)).toMatchObject({ status: 404, body: { error: 'webhook not found' } })
      expect(await org.call('DELETE', path)).toMatchObject({ status: 404, body: { error: 'webhook not found' } })
      expect((await server.call('PUT', path, { body: { url: 'https://hooks.example.com/x' } })).status).toBe(401)
    })

    test('a test delivery: signed like an alert, its outcome answered at once, at most one per 10 s, not counted as an alert delivery', async () => {
      const org = await organization(server, true)
      const path = '/api/v1/organization/webhook/test'
      expect(await org.call('POST', path)).toMatchObject({ status: 404, body: { error: 'webhook not found' } })
      const receiver = startWebhookReceiver({ statuses: [204, 500] })
      try {
        const { secret } = (
          await org.call('PUT', '/api/v1/organization/webhook', { url: `${receiver.url}/hooks/dbm?token=t0k` })
        ).body
        const ok = await org.call('POST', path)
        expect({ status: ok.status, body: ok.body }).toEqual({ status: 200, body: { delivered: true } })
        expect(receiver.received).toHaveLength(1)
        const hook = receiver.received[0]!
        expect(receiver.signed(hook, secret)).toBe(true)
        expect(hook.path).toBe('/hooks/dbm?token=t0k')
        expect(hook.headers).toMatchObject({ 'x-dbm-event': 'test', 'x-dbm-delivery': hook.body.delivery_id })
        expect(hook.body).toEqual({
          event: 'test',
          delivery_id: expect.any(String),
          sent_at: expect.any(String),
          organization_id: org.account.orgId,
          message: 'A test delivery from dbm: the webhook is reachable.',
        })
        // Once per 10 s per organization (the cooldown outlives a restart: it is in the store).
        const again = await org.call('POST', path)
        expect({ status: again.status, body: again.body, retry: again.headers.get('retry-after') }).toEqual({
          status: 429,
          body: { error: expect.stringMatching(/^too many requests; try again in (9|10) s$/) },
          retry: expect.stringMatching(/^(9|10)$/),
        })
        server.advance(10_000)
        // Not delivered: the same answer for a 500 and a refused connection (nothing about the network
        // behind the receiver); the cause is in the server's log, with the origin only.
        const failed = await org.call('POST', path)
        expect({ status: failed.status, body: failed.body }).toEqual({
          status: 200,
          body: { delivered: false, reason: TEST_NOT_DELIVERED },
        })
        await org.call('PUT', '/api/v1/organization/webhook', { url: 'http://127.0.0.1:9/hooks/secret-path' })
        server.advance(10_000)
        const refused = await org.call('POST', path)
        expect({ status: refused.status, body: refused.body }).toEqual({
          status: 200,
          body: { delivered: false, reason: TEST_NOT_DELIVERED },
        })
        const causes = server.logs.filter(
          (l) => l.includes(' INFO webhook test not delivered ') && l.includes(`org=${org.account.orgId} `),
        )
        expect(causes).toHaveLength(2)
        expect(causes[0]).toEndWith(`target=${receiver.url} cause="HTTP 500"`)
        expect(causes[1]).toContain('target=http://127.0.0.1:9 cause=')
        expect(causes.join('\n')).not.toContain('secret-path')
        // Tests are not alert deliveries: the webhook's own record is untouched.
        expect((await org.call('GET', '/api/v1/organization/webhook')).body).toMatchObject({
          last_success_at: null,
          last_failure_at: null,
          last_error: null,
        })
        expect((await server.call('POST', path)).status).toBe(401)
      } finally {
        receiver.stop()
      }
    })
  })
}

describe('alert mail text', () => {
  test("monitored text (a statement's text in a finding) cannot add lines of its own to a mail", () => {
    const hostile = "SELECT 1 /*\r\nThe database's alerts:\nhttps://evil.example/\u2028\u0085\u202e*/"
    const mail = alertMail(
      {
        id: 'n1',
        event: 'opened',
        channel: 'email',
        attempts: 0,
        created_at: 0,
        org_id: 'o1',
        alert: {
          id: 'a1',
          key: 'k',
          rule: 'pg_long_running_queries',
          severity: 'critical',
          title: `Slow: ${hostile}`,
          detail: `Running: ${hostile}`,
          opened_at: 0,
          resolved_at: null,
          consequences: [
            { key: 'k', rule: 'pg_long_running_queries', severity: 'critical', title: `Slow: ${hostile}` },
            { key: 'k2', rule: 'pg_dead_tuples', severity: 'critical', title: `Dead: ${hostile}` },
          ],
        },
        database: { id: 'd1', name: 'shop\nBcc: x', engine: 'postgres', host: 'db', port: 5432 },
      },
      'https://dbm.example.org',
    )
    expect(mail.text.split('\n')).toEqual([
      'A critical alert opened on "shop Bcc: x" (postgres, db:5432):',
      '',
      "Slow: SELECT 1 /* The database's alerts: https://evil.example/ */",
      "Running: SELECT 1 /* The database's alerts: https://evil.example/ */",
      '',
      'What it causes (1):',
      "- critical: Dead: SELECT 1 /* The database's alerts: https://evil.example/ */",
      '',
      'Opened: 1970-01-01T00:00:00.000Z',
      '',
      "The database's issues:",
      'https://dbm.example.org/#/databases/d1/issues',
      '',
    ])
    expect(mail.subject).toBe(
      "dbm alert: Slow: SELECT 1 /* The database's alerts: https://evil.example/ */ on shop Bcc: x",
    )
  })
})

describe('alert mail through an SMTP relay, and the monitor on its schedule', () => {
  let smtp: Awaited<ReturnType<typeof startSmtpReceiver>>
  let server: TestServer
  let account: Account
  beforeAll(async () => {
    smtp = await startSmtpReceiver()
    server = await startTestServer('sqlite', {
      smtpUrl: smtp.url,
      publicUrl: 'https://dbm.example.org',
      webhooks: { allowPrivate: true },
    })
    account = await signup(server)
    await server.store.markEmailVerified(account.userId, Date.now())
  })
  afterAll(async () => {
    await server?.stop()
    await smtp?.close()
  })

  test('one mail when the alert opens and one when it resolves, to each verified user, with the link', async () => {
    const key = (await createApiKey(server, account)).key
    const ingest = async (b: IngestBatch) =>
      (await server.call('POST', '/api/v1/ingest', { apiKey: key, body: b })).body.database_id as string
    const id = await ingest(critical('mailed'))
    const monitor = createMonitor(server.deps, { retentionDays: 30 })
    await monitor.runOnce()
    const mail = await smtp.waitFor(account.email, new RegExp(`^dbm alert: ${TITLE}`))
    expect(mail.headers.subject).toBe(`dbm alert: ${TITLE} on mailed`)
    expect(mail.text).toContain('A critical alert opened on "mailed" (postgres, db.internal:5432):')
    expect(mail.text).toContain('50.00 %')
    expect(mail.text).toContain(`https://dbm.example.org/#/databases/${id}/issues`)
    await monitor.runOnce()
    await ingest(cured('mailed'))
    await monitor.runOnce(server.deps.clock() + 1000)
    const resolved = await smtp.waitFor(account.email, new RegExp(`^dbm resolved: ${TITLE}`))
    expect(resolved.headers.subject).toBe(`dbm resolved: ${TITLE} on mailed`)
    await server.deps.mailer.idle()
    const mails = smtp.received.filter(
      (m) => m.envelopeTo.includes(account.email) && (m.headers.subject ?? '').includes(TITLE),
    )
    expect(mails.map((m) => m.headers.subject)).toEqual([
      `dbm alert: ${TITLE} on mailed`,
      `dbm resolved: ${TITLE} on mailed`,
    ])
  })

  test('a webhook that does not answer in time, or cannot be reached, fails with a cause that leaves out its URL', async () => {
    const hanging = startWebhookReceiver({ hang: true })
    const org = await signup(server)
    const key = (await createApiKey(server, org)).key
    const call = (method: string, path: string, body?: unknown) => server.call(method, path, { apiKey: key, body })
    try {
      await call('PUT', '/api/v1/organization/webhook', { url: `${hanging.url}/slow/path-token?k=v` })
      await server.call('POST', '/api/v1/ingest', { apiKey: key, body: critical('slow') })
      const monitor = createMonitor(server.deps, { retentionDays: 30, webhookTimeoutMs: 200 })
      const now = server.deps.clock()
      const started = Date.now()
      expect((await monitor.runOnce(now)).notifications).toMatchObject({ failed: 1 })
      expect(Date.now() - started).toBeLessThan(1500)
      expect((await call('GET', '/api/v1/organization/webhook')).body.last_error).toBe('no answer within 0.2 s')

      hanging.stop()
      await monitor.runOnce(now + 1000)
      const { last_error } = (await call('GET', '/api/v1/organization/webhook')).body
      expect(last_error).not.toBe('no answer within 0.2 s')
      expect(last_error).not.toContain('path-token')
      const log = server.logs.filter((l) => l.includes('webhook delivery failed')).join('\n')
      expect(log).toContain(`target=${hanging.url} `)
      expect(log).not.toContain('path-token')
    } finally {
      hanging.stop()
    }
  })

  test('start() evaluates every interval until stop()', async () => {
    const key = (await createApiKey(server, account)).key
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: critical('scheduled') })
    const id = res.body.database_id as string
    const monitor = createMonitor(server.deps, { retentionDays: 30, evaluateEveryMs: 50 })
    monitor.start()
    try {
      await until(
        'the scheduled evaluation to open the alert',
        async () => ((await server.store.monitor.listAlerts(id, 'open', 10)).length > 0 ? true : undefined),
        {
          timeoutMs: 5000,
          everyMs: 25,
        },
      )
    } finally {
      await monitor.stop()
    }
    const after = await server.store.monitor.listAlerts(id, 'open', 10)
    await Bun.sleep(150)
    expect((await server.store.monitor.listAlerts(id, 'open', 10))[0]!.last_seen_at).toBe(after[0]!.last_seen_at)
  })
})
