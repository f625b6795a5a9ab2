// Alert destinations (issue 28 deliverable 3) against a real server and a real HTTP receiver (Bun.serve
// on a loopback port): a critical finding opens one alert, and each enabled destination gets its kind's
// payload (Slack Block Kit, Teams Adaptive Card, PagerDuty Events API v2, Opsgenie Alert API,
// Alertmanager /api/v2/alerts, the signed webhook, a mail), every field checked; the cure resolves it on
// each. A receiver's 500 is logged (no secret in the line), counted and retried. The routes: validation
// 400s with {"error"}, members read only, another organization's destination 404, secrets only as hints,
// private addresses refused unless allowed, and the test route's alert and resolution. Deliveries and
// routes run on both stores (SQLite and PostgreSQL); the address checks, which store nothing, on SQLite.
// A real Alertmanager receives them in alertmanager-real.test.ts.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type Monitor, createMonitor } from '../../src/server/monitor/index.ts'
import { TEST_NOT_DELIVERED } from '../../src/server/routes/alerts.ts'
import { pgBatch } from '../support/batches.ts'
import {
  type Account,
  type TestServer,
  agentAccount,
  inviteMember,
  startTestServer,
  storeKinds,
} from '../support/server.ts'
import { startWebhookReceiver } from '../support/webhook.ts'

const RULE = 'pg_cache_hit_ratio'
const TITLE = 'Low buffer cache hit ratio'
const ROUTING_KEY = 'R0UT1NGKEY0000000000000000000abc'
const API_KEY = '00000000-1111-2222-3333-444455556666'
const PATH = '/api/v1/organization/alert-destinations'
const iso = (ms: number) => new Date(ms).toISOString()
const critical = (name: string) =>
  pgBatch(name, Date.now() - 30_000, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })
const cured = (name: string) =>
  pgBatch(name, Date.now() - 10_000, { database_stats: { blks_hit: 100_000_000, blks_read: 0 } })

let server: TestServer
let monitor: Monitor
let receiver: ReturnType<typeof startWebhookReceiver>

// One server and receiver per store, in turn (describes run one after another): the tests use the current ones.
describe.each(storeKinds)('on the %s store', (kind) => {
  beforeAll(async () => {
    receiver = startWebhookReceiver()
    // The receiver listens on loopback: internal addresses are allowed here (refused on the strict server below).
    server = await startTestServer(kind, { webhooks: { allowPrivate: true } })
    // Evaluations (and Alertmanager's refresh) every 30 s: within the minute an agent stays connected.
    monitor = createMonitor(server.deps, { retentionDays: 30, evaluateEveryMs: 30_000 })
  })
  afterAll(async () => {
    receiver?.stop()
    await server?.stop()
  })
  describe('alerts on every destination kind', deliveries)
  describe('the alert-destinations routes', routes)
})

const as = (account: Account) => ({
  call: (method: string, path: string, body?: unknown) => server.call(method, path, { token: account.token, body }),
})

async function owner(verified = true) {
  const { account, key } = await agentAccount(server, { verified })
  return { account, key, ...as(account) }
}

const member = (account: Account) => inviteMember(server, account)

function deliveries() {
  test('an alert opens and resolves on each enabled destination, in its receiver format', async () => {
    const org = await owner()
    const made: Record<string, any> = {}
    for (const [kind, settings] of [
      ['webhook', { url: `${receiver.url}/wh` }],
      ['slack', { url: `${receiver.url}/slack/T0/B0/xoxsecret` }],
      ['teams', { url: `${receiver.url}/teams/workflow?sig=teamsSIGNATURE` }],
      ['pagerduty', { url: `${receiver.url}/pd/v2/enqueue`, routing_key: ROUTING_KEY }],
      ['opsgenie', { url: `${receiver.url}/og/`, api_key: API_KEY }],
      ['alertmanager', { url: `${receiver.url}/am` }],
      ['email', { to: ['Oncall@Example.com'] }],
    ] as const) {
      const res = await org.call('POST', PATH, { kind, name: `${kind} destination`, ...settings })
      expect({ kind, status: res.status }).toEqual({ kind, status: 201 })
      made[kind] = res.body
    }
    // A disabled one gets nothing.
    const off = await org.call('POST', PATH, {
      kind: 'alertmanager',
      name: 'off',
      url: `${receiver.url}/off`,
      enabled: false,
    })
    expect(off.body.enabled).toBe(false)

    const db = (await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: critical('billing') })).body
      .database_id as string
    const opened = server.deps.clock()
    const first = await monitor.runOnce(opened)
    expect(first.notifications).toEqual({ sent: 8, failed: 0, given_up: 0 }) // the users' mail and 7 destinations
    const [alert] = (await org.call('GET', `/api/v1/databases/${db}/alerts`)).body.filter((a: any) => a.rule === RULE)
    const link = `http://dbm.test:8080/#/databases/${db}/issues`
    const at = (prefix: string) => receiver.received.filter((h) => h.path.startsWith(prefix))
    const database = { id: db, name: 'billing', engine: 'postgres', host: 'db.internal', port: 5432 }
    const consequences = [{ key: RULE, rule: RULE, severity: 'critical', title: TITLE }]

    // The signed webhook: the organization webhook's body, signed with this destination's secret.
    const [wh] = at('/wh')
    expect(receiver.signed(wh!, made.webhook.secret)).toBe(true)
    expect(wh!.headers).toMatchObject({
      'content-type': 'application/json',
      'x-dbm-event': 'alert.opened',
      'x-dbm-delivery': wh!.body.delivery_id,
    })
    expect(wh!.body).toEqual({
      event: 'alert.opened',
      delivery_id: expect.any(String),
      sent_at: iso(opened),
      organization_id: org.account.orgId,
      database,
      alert: {
        id: alert.id,
        key: RULE,
        rule: RULE,
        severity: 'critical',
        title: TITLE,
        detail: alert.detail,
        opened_at: iso(opened),
        resolved_at: null,
        consequences,
      },
      link,
    })

    const facts = `Database: billing (postgres, db.internal:5432) · Severity: critical · Rule: ${RULE} · Opened: ${iso(opened)}`
    expect(at('/slack/T0/B0/xoxsecret').map((h) => h.body)).toEqual([
      {
        text: `Alert: ${TITLE} on billing`,
        blocks: [
          { type: 'header', text: { type: 'plain_text', text: `Alert: ${TITLE}`, emoji: false } },
          { type: 'section', text: { type: 'plain_text', text: alert.detail, emoji: false } },
          { type: 'context', elements: [{ type: 'plain_text', text: facts, emoji: false }] },
          {
            type: 'actions',
            elements: [{ type: 'button', text: { type: 'plain_text', text: 'Open in dbm', emoji: false }, url: link }],
          },
        ],
      },
    ])
    const escaped = (s: string) => s.replace(/[\\`*_{}[\]()#+\-.!<>~|]/g, (c) => `\\${c}`)
    const [teams] = at('/teams/workflow')
    expect(teams!.path).toBe('/teams/workflow?sig=teamsSIGNATURE')
    expect(teams!.body).toEqual({
      type: 'message',
      attachments: [
        {
          contentType: 'application/vnd.microsoft.card.adaptive',
          contentUrl: null,
          content: {
            $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
            type: 'AdaptiveCard',
            version: '1.4',
            body: [
              {
                type: 'TextBlock',
                text: escaped(`Alert: ${TITLE}`),
                weight: 'Bolder',
                size: 'Medium',
                wrap: true,
                color: 'Attention',
              },
              { type: 'TextBlock', text: escaped(alert.detail), wrap: true },
              {
                type: 'FactSet',
                facts: [
                  { title: 'Database', value: escaped('billing (postgres, db.internal:5432)') },
                  { title: 'Severity', value: 'critical' },
                  { title: 'Rule', value: escaped(RULE) },
                  { title: 'Opened', value: iso(opened) },
                ],
              },
            ],
            actions: [{ type: 'Action.OpenUrl', title: 'Open in dbm', url: link }],
          },
        },
      ],
    })
    expect(at('/pd/v2/enqueue').map((h) => h.body)).toEqual([
      {
        routing_key: ROUTING_KEY,
        event_action: 'trigger',
        dedup_key: `dbm-${alert.id}`,
        payload: {
          summary: `Alert: ${TITLE} on billing`,
          source: 'db.internal:5432',
          severity: 'critical',
          timestamp: iso(opened),
          component: 'billing',
          group: 'postgres',
          class: RULE,
          custom_details: {
            detail: alert.detail,
            cause: RULE,
            database_id: db,
            consequences: [`critical: ${TITLE}`],
            test: false,
          },
        },
        links: [{ href: link, text: 'Open in dbm' }],
        client: 'dbm',
        client_url: link,
      },
    ])
    const [og] = at('/og/')
    expect(og!.path).toBe('/og/v2/alerts')
    expect(og!.headers.authorization).toBe(`GenieKey ${API_KEY}`)
    expect(og!.body).toEqual({
      message: `Alert: ${TITLE} on billing`,
      alias: `dbm-${alert.id}`,
      description: alert.detail,
      entity: 'billing',
      source: 'dbm',
      priority: 'P1',
      tags: ['dbm', 'postgres', 'critical'],
      details: { database: 'billing (postgres, db.internal:5432)', database_id: db, rule: RULE, cause: RULE, link },
    })
    const amAlert = {
      labels: {
        alertname: `dbm_${RULE}`,
        source: 'dbm',
        database: 'billing',
        database_id: db,
        engine: 'postgres',
        rule: RULE,
        severity: 'critical',
        cause: RULE,
      },
      annotations: { summary: TITLE, description: alert.detail, link },
      startsAt: iso(opened),
      generatorURL: link,
    }
    expect(at('/am').map((h) => [h.path, h.body])).toEqual([['/am/api/v2/alerts', [amAlert]]])
    expect(at('/off')).toEqual([])
    await server.deps.mailer.idle()
    const mails = server.logs.filter((l) => l.includes(' INFO mail ') && l.includes('to=oncall@example.com '))
    expect(mails).toHaveLength(1)
    expect(mails[0]).toContain(`subject="dbm alert: ${TITLE} on billing" link=${link}`)

    // An evaluation period on, Alertmanager is told again that it fires (else its resolve_timeout resolves it).
    await monitor.runOnce(opened + 31_000)
    expect(at('/am').map((h) => h.body)).toEqual([[amAlert], [amAlert]])

    // The cure resolves it on each.
    await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: cured('billing') })
    const resolved = server.deps.clock() + 35_000
    expect((await monitor.runOnce(resolved)).notifications).toEqual({ sent: 8, failed: 0, given_up: 0 })
    expect(at('/wh')[1]!.body).toMatchObject({
      event: 'alert.resolved',
      alert: { id: alert.id, resolved_at: iso(resolved) },
    })
    expect(receiver.signed(at('/wh')[1]!, made.webhook.secret)).toBe(true)
    const slackResolved = at('/slack/')[1]!.body
    expect(slackResolved.text).toBe(`Resolved: ${TITLE} on billing`)
    expect(slackResolved.blocks[1]).toEqual({
      type: 'section',
      text: { type: 'plain_text', text: `No longer found: ${TITLE}`, emoji: false },
    })
    expect(slackResolved.blocks[2].elements[0].text).toBe(`${facts} · Resolved: ${iso(resolved)}`)
    const card = at('/teams/')[1]!.body.attachments[0].content
    expect(card.body[0]).toMatchObject({ text: escaped(`Resolved: ${TITLE}`), color: 'Good' })
    expect(card.body[2].facts.at(-1)).toEqual({ title: 'Resolved', value: iso(resolved) })
    expect(at('/pd/')[1]!.body).toEqual({
      routing_key: ROUTING_KEY,
      event_action: 'resolve',
      dedup_key: `dbm-${alert.id}`,
    })
    const ogClose = at('/og/')[1]!
    expect(ogClose.path).toBe(`/og/v2/alerts/${encodeURIComponent(`dbm-${alert.id}`)}/close?identifierType=alias`)
    expect(ogClose.headers.authorization).toBe(`GenieKey ${API_KEY}`)
    expect(ogClose.body).toEqual({ source: 'dbm', note: `Resolved: ${TITLE}` })
    expect(at('/am')[2]!.body).toEqual([{ ...amAlert, endsAt: iso(resolved) }])
    await server.deps.mailer.idle()
    expect(
      server.logs.filter(
        (l) =>
          l.includes(' INFO mail ') && l.includes('to=oncall@example.com ') && l.includes('subject="dbm resolved: '),
      ),
    ).toHaveLength(1)

    // Each destination counted two deliveries.
    const listed = (await org.call('GET', PATH)).body
    expect(listed.map((d: any) => [d.kind, d.sent, d.failed, d.last_success_at])).toEqual([
      ...['webhook', 'slack', 'teams', 'pagerduty', 'opsgenie', 'alertmanager', 'email'].map((k) => [
        k,
        2,
        0,
        iso(resolved),
      ]),
      ['alertmanager', 0, 0, null],
    ])
  })

  test('an Alertmanager added while an alert is open hears of it by the refresh, and of its resolution', async () => {
    const org = await owner()
    const db = (await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: critical('ledger') })).body
      .database_id as string
    const opened = server.deps.clock()
    await monitor.runOnce(opened) // opened: no destination yet (the users' mail only)
    const late = await org.call('POST', PATH, { kind: 'alertmanager', name: 'late', url: `${receiver.url}/late-am` })
    expect(late.status).toBe(201)
    // This rule's alert (the database may have others open) as each POST carried it.
    const at = () =>
      receiver.received
        .filter((h) => h.path === '/late-am/api/v2/alerts')
        .map((h) =>
          (h.body as { labels: { database: string; rule: string }; endsAt?: string }[]).filter(
            (a) => a.labels.rule === RULE,
          ),
        )
        .filter((alerts) => alerts.length > 0)
    // The first refresh of this organization is a period after it is first seen; then it is told the alert fires.
    await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: critical('ledger') })
    await monitor.runOnce(opened + 31_000)
    await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: critical('ledger') })
    await monitor.runOnce(opened + 62_000)
    const told = at()
    expect(told.length).toBeGreaterThanOrEqual(1)
    expect(told.at(-1)!.map((a) => [a.labels.database, a.endsAt])).toEqual([['ledger', undefined]])
    // The cure: its resolution goes there too (endsAt now), not left to expire after resolve_timeout.
    await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: cured('ledger') })
    const resolved = opened + 93_000
    await monitor.runOnce(resolved)
    expect(
      at()
        .at(-1)!
        .map((a) => [a.labels.database, a.endsAt]),
    ).toEqual([['ledger', iso(resolved)]])
    const [alert] = (await org.call('GET', `/api/v1/databases/${db}/alerts?status=resolved`)).body.filter(
      (a: any) => a.rule === RULE,
    )
    expect(alert.notified.resolved.destinations).toEqual([
      { id: late.body.id, kind: 'alertmanager', name: 'late', sent_at: iso(resolved) },
    ])
  })

  test('a failed delivery is logged without its secret, counted, and retried at the next evaluation', async () => {
    const failing = startWebhookReceiver({ statuses: [500] })
    try {
      const org = await owner()
      const made = await org.call('POST', PATH, {
        kind: 'pagerduty',
        name: 'pd',
        url: `${failing.url}/v2/enqueue?token=querysecret`,
        routing_key: ROUTING_KEY,
      })
      expect(made.status).toBe(201)
      await server.call('POST', '/api/v1/ingest', { apiKey: org.key, body: critical('ledger') })
      const now = server.deps.clock()
      const first = await monitor.runOnce(now)
      expect(first.notifications.failed).toBe(1)
      const line = server.logs.find((l) => l.includes('alert destination delivery failed') && l.includes(made.body.id))!
      expect(line).toContain('cause="HTTP 500"')
      expect(line).toContain(`target=${failing.url}`)
      expect(line).not.toContain(ROUTING_KEY)
      expect(line).not.toContain('querysecret')
      expect((await org.call('GET', `${PATH}/${made.body.id}`)).body).toMatchObject({
        sent: 0,
        failed: 1,
        last_error: 'HTTP 500',
        last_failure_at: iso(now),
      })
      await monitor.runOnce(now + 20_000)
      expect(failing.received.map((h) => h.body.event_action)).toEqual(['trigger', 'trigger'])
      expect(failing.received[0]!.body).toEqual(failing.received[1]!.body)
      expect((await org.call('GET', `${PATH}/${made.body.id}`)).body).toMatchObject({
        sent: 1,
        failed: 1,
        last_success_at: iso(now + 20_000),
      })
    } finally {
      failing.stop()
    }
  })
}

function routes() {
  test('secrets are answered as hints only; a webhook shows its signing secret once', async () => {
    const org = await owner()
    const pd = await org.call('POST', PATH, { kind: 'pagerduty', name: 'pager', routing_key: ROUTING_KEY })
    expect(pd.status).toBe(201)
    expect(pd.body).toEqual({
      id: expect.any(String),
      kind: 'pagerduty',
      name: 'pager',
      enabled: true,
      url: 'https://events.pagerduty.com/v2/enqueue',
      to: null,
      secret_hint: '…0abc',
      created_at: expect.any(String),
      updated_at: expect.any(String),
      last_success_at: null,
      last_failure_at: null,
      last_error: null,
      sent: 0,
      failed: 0,
    })
    const og = await org.call('POST', PATH, { kind: 'opsgenie', name: 'genie', api_key: API_KEY })
    expect(og.body).toMatchObject({ url: 'https://api.opsgenie.com', secret_hint: '…6666' })
    const slack = await org.call('POST', PATH, {
      kind: 'slack',
      name: 'chat',
      url: `${receiver.url}/services/T0/B0/xoxsecretWXYZ`,
    })
    expect(slack.body).toMatchObject({ url: null, secret_hint: `${receiver.url}/…WXYZ` })
    const hook = await org.call('POST', PATH, { kind: 'webhook', name: 'hook', url: `${receiver.url}/h` })
    expect(hook.body.secret).toMatch(/^dbm_whsec_/)
    expect(hook.body.secret_hint).toBe(`…${hook.body.secret.slice(-4)}`)
    const text =
      JSON.stringify((await org.call('GET', PATH)).body) +
      JSON.stringify((await org.call('GET', `${PATH}/${hook.body.id}`)).body)
    for (const secret of [ROUTING_KEY, API_KEY, 'xoxsecretWXYZ', hook.body.secret]) expect(text).not.toContain(secret)
    // A new key replaces the old; the hint follows.
    const changed = await org.call('PATCH', `${PATH}/${pd.body.id}`, {
      routing_key: 'another-routing-key-1234',
      name: 'pager 2',
    })
    expect(changed.status).toBe(200)
    expect(changed.body).toMatchObject({
      name: 'pager 2',
      secret_hint: '…1234',
      url: 'https://events.pagerduty.com/v2/enqueue',
    })
  })

  test('bad input is a 400 naming what is wrong; a taken name is a 409', async () => {
    const org = await owner()
    const cases: [unknown, string][] = [
      [
        { kind: 'carrier-pigeon', name: 'x', url: 'https://a.example' },
        'kind must be one of: email, webhook, slack, teams, pagerduty, opsgenie, alertmanager',
      ],
      [{ kind: 'slack', name: 'x' }, 'url is required for slack destinations'],
      [
        { kind: 'slack', name: 'x', url: 'https://a.example/', routing_key: 'k' },
        'routing_key is not a setting of slack destinations (they take url)',
      ],
      [{ kind: 'pagerduty', name: 'x' }, 'routing_key is required for pagerduty destinations'],
      [{ kind: 'email', name: 'x', to: ['not an address'] }, 'to must be a valid email address'],
      [{ kind: 'email', name: 'x', to: [] }, 'to must be a list of 1 to 20 email addresses'],
      [{ kind: 'webhook', name: 'x', url: 'ftp://a.example/' }, 'url must be an http:// or https:// URL'],
      [
        { kind: 'webhook', name: '', url: 'https://a.example/' },
        'name is required and must be a non-empty string of at most 200 characters',
      ],
    ]
    for (const [body, error] of cases) {
      const res = await org.call('POST', PATH, body)
      expect({ body, status: res.status, res: res.body }).toEqual({ body, status: 400, res: { error } })
    }
    const unknown = await org.call('POST', PATH, {
      kind: 'webhook',
      name: 'x',
      url: 'https://a.example/',
      secret: 'mine',
    })
    expect(unknown.status).toBe(400)
    expect(unknown.body.error).toContain('secret')
    expect(
      (await org.call('POST', PATH, { kind: 'alertmanager', name: 'same', url: `${receiver.url}/am` })).status,
    ).toBe(201)
    const taken = await org.call('POST', PATH, { kind: 'alertmanager', name: 'same', url: `${receiver.url}/am` })
    expect(taken).toMatchObject({ status: 409, body: { error: 'a destination named "same" exists already' } })
    const made = (await org.call('GET', PATH)).body[0]
    expect((await org.call('PATCH', `${PATH}/${made.id}`, { kind: 'slack' })).status).toBe(400)
    expect((await org.call('PATCH', `${PATH}/${made.id}`, { to: ['a@example.com'] })).body).toEqual({
      error: 'to is not a setting of alertmanager destinations (they take url)',
    })
    expect((await org.call('GET', `${PATH}/not-a-uuid`)).body).toEqual({
      error: 'id must be an alert destination id (a UUID)',
    })
    // Email destinations mail whom they name: verified organizations only.
    const unverified = await owner(false)
    expect(await unverified.call('POST', PATH, { kind: 'email', name: 'm', to: ['a@example.com'] })).toMatchObject({
      status: 403,
    })
  })

  test("another organization's destination is a 404; a member reads them and gets 403 on a change", async () => {
    const a = await owner()
    const b = await owner()
    const made = (await a.call('POST', PATH, { kind: 'alertmanager', name: 'mine', url: `${receiver.url}/am` })).body
    for (const [method, path, body] of [
      ['GET', `${PATH}/${made.id}`],
      ['PATCH', `${PATH}/${made.id}`, { enabled: false }],
      ['POST', `${PATH}/${made.id}/test`],
      ['DELETE', `${PATH}/${made.id}`],
    ] as const) {
      const res = await b.call(method, path, body)
      expect({ method, status: res.status, body: res.body }).toEqual({
        method,
        status: 404,
        body: { error: 'alert destination not found' },
      })
    }
    expect((await b.call('GET', PATH)).body).toEqual([])
    const m = as(await member(a.account))
    // A member reads them (the dashboard's read-only list), a URL only to its origin (a path or query may
    // carry a token), and changes nothing.
    const asMember = { ...made, url: `${new URL(made.url).origin}/…` }
    expect((await m.call('GET', PATH)).body).toEqual([asMember])
    expect((await m.call('GET', `${PATH}/${made.id}`)).body).toEqual(asMember)
    for (const [method, path] of [
      ['POST', PATH],
      ['PATCH', `${PATH}/${made.id}`],
      ['POST', `${PATH}/${made.id}/test`],
      ['DELETE', `${PATH}/${made.id}`],
    ] as const) {
      const res = await m.call(
        method,
        path,
        method === 'POST' && path === PATH
          ? { kind: 'alertmanager', name: 'm', url: `${receiver.url}/am` }
          : method === 'PATCH'
            ? { enabled: false }
            : undefined,
      )
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 403 })
      expect(res.body.error).toContain('only an owner can manage alert destinations')
    }
    expect((await a.call('GET', `${PATH}/${made.id}`)).body.enabled).toBe(true)
    expect((await a.call('DELETE', `${PATH}/${made.id}`)).status).toBe(204)
    expect((await a.call('GET', `${PATH}/${made.id}`)).status).toBe(404)
  })

  test('the test route sends a test alert and then its resolution', async () => {
    const org = await owner()
    const made = (
      await org.call('POST', PATH, {
        kind: 'pagerduty',
        name: 'pd test',
        url: `${receiver.url}/test-pd`,
        routing_key: ROUTING_KEY,
      })
    ).body
    const res = await org.call('POST', `${PATH}/${made.id}/test`)
    expect(res).toMatchObject({ status: 200, body: { delivered: true } })
    const got = receiver.received.filter((h) => h.path === '/test-pd').map((h) => h.body)
    expect(got.map((b) => [b.event_action, b.dedup_key])).toEqual([
      ['trigger', got[0].dedup_key],
      ['resolve', got[0].dedup_key],
    ])
    expect(got[0].payload).toMatchObject({
      summary: '[test] Alert: Test alert from dbm on dbm-test',
      severity: 'info',
      custom_details: { test: true },
    })
    // Within the cooldown: 429; the test is not an alert delivery (no counts).
    expect((await org.call('POST', `${PATH}/${made.id}/test`)).status).toBe(429)
    expect((await org.call('GET', `${PATH}/${made.id}`)).body).toMatchObject({ sent: 0, failed: 0 })
    const dead = startWebhookReceiver({ statuses: [503] })
    const down = (await org.call('POST', PATH, { kind: 'slack', name: 'down', url: `${dead.url}/x` })).body
    expect((await org.call('POST', `${PATH}/${down.id}/test`)).body).toEqual({
      delivered: false,
      reason: TEST_NOT_DELIVERED,
    })
    expect(dead.received).toHaveLength(1) // the resolution is not sent after a failed opening
    dead.stop()
  })

  test('tests and email lists are counted per organization: deleting and making again sends no more mail', async () => {
    const org = await owner()
    const to = `outside-${Math.random().toString(36).slice(2, 9)}@example.com`
    const mailsTo = () => server.logs.filter((l) => l.includes(' INFO mail ') && l.includes(`to=${to} `)).length
    // Ten lists of addresses and ten tests an hour, each destination made again after its test.
    for (let i = 0; i < 10; i++) {
      const made = await org.call('POST', PATH, { kind: 'email', name: `BUY CHEAP ${i}`, to: [to] })
      expect(made.status).toBe(201)
      expect((await org.call('POST', `${PATH}/${made.body.id}/test`)).body).toEqual({ delivered: true })
      expect((await org.call('DELETE', `${PATH}/${made.body.id}`)).status).toBe(204)
    }
    await server.deps.mailer.idle()
    expect(mailsTo()).toBe(20) // each test: its opening and its resolution
    const eleventh = await org.call('POST', PATH, { kind: 'email', name: 'BUY CHEAP 10', to: [to] })
    expect(eleventh).toMatchObject({ status: 429, body: { error: expect.any(String) } })
    // A destination of another kind: its own cooldown is fresh, the organization's tests are spent.
    const slack = await org.call('POST', PATH, { kind: 'slack', name: 'slack', url: `${receiver.url}/slack-limit` })
    expect((await org.call('POST', `${PATH}/${slack.body.id}/test`)).status).toBe(429)
    expect(receiver.received.filter((h) => h.path === '/slack-limit')).toHaveLength(0)
    await server.deps.mailer.idle()
    expect(mailsTo()).toBe(20)
  })
}

describe('address checks', () => {
  test('without DBM_WEBHOOK_ALLOW_PRIVATE, internal addresses are refused for every posting kind', async () => {
    const strict = await startTestServer('sqlite')
    try {
      const { account } = await agentAccount(strict)
      for (const [kind, extra] of [
        ['webhook', {}],
        ['slack', {}],
        ['teams', {}],
        ['pagerduty', { routing_key: ROUTING_KEY }],
        ['opsgenie', { api_key: API_KEY }],
        ['alertmanager', {}],
      ] as const) {
        const res = await strict.call('POST', PATH, {
          token: account.token,
          body: { kind, name: kind, url: 'http://127.0.0.1:9093/', ...extra },
        })
        expect({ kind, status: res.status }).toEqual({ kind, status: 400 })
        expect(res.body.error).toContain('set DBM_WEBHOOK_ALLOW_PRIVATE=true on the server to allow internal receivers')
      }
      expect((await strict.call('GET', PATH, { token: account.token })).body).toEqual([])
    } finally {
      await strict.stop()
    }
  })
})
