// The Custom metrics page in a real browser (Debian's Chromium) against a test server fed custom_metrics
// sections as the agent sends them: a gauge whose label value is hostile (quotes, a newline, `*/`, ü)
// reading 12,345, a counter read a minute apart (600 more each minute: 10/s) and a metric whose query
// fails with a hostile message. The page shows the exact number, the label and the error as text, the
// counter as a rate per second, a chart per metric; a database without custom metrics gets the config
// example. Nothing runs off a 390 px screen. Screenshots with DBM_TEST_SCREENSHOTS=1.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import type { CustomMetricsSection } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import { horizontalOverflow, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const MINUTE = 60_000
const HOSTILE = '"quote" \n */ ü'
const ERROR = 'relation "outbox" does not exist\n*/ <b>ü</b>'

let server: TestServer
let account: Account
let browser: Browser
let dbId = ''
let emptyId = ''

const section = (i: number): CustomMetricsSection => ({
  definitions: [
    {
      name: 'queue_depth',
      kind: 'gauge',
      labels: ['queue'],
      values: ['depth'],
      interval_seconds: 60,
      description: `Jobs waiting ${HOSTILE}`,
    },
    { name: 'jobs_done', kind: 'counter', labels: [], values: ['n'], interval_seconds: 60 },
    { name: 'outbox_rows', kind: 'gauge', labels: [], values: ['rows'], interval_seconds: 60 },
  ],
  samples: [
    { name: 'queue_depth', column: 'depth', labels: { queue: HOSTILE }, value: 12_345 },
    { name: 'queue_depth', column: 'depth', labels: { queue: 'mail' }, value: 7 },
    { name: 'jobs_done', column: 'n', labels: {}, value: 600 * (i + 1) },
  ],
  errors: [{ name: 'outbox_rows', message: ERROR }],
})

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  let key: string
  ;({ account, key } = await agentAccount(server))
  const t0 = Math.floor(Date.now() / MINUTE) * MINUTE - 3 * MINUTE
  for (let i = 0; i < 3; i++) {
    const res = await server.call('POST', '/api/v1/ingest', {
      apiKey: key,
      body: pgBatch('custom-page', t0 + i * MINUTE, { custom_metrics: section(i) }),
    })
    if (res.status !== 200) throw new Error(`ingest: ${res.status} ${JSON.stringify(res.body)}`)
    dbId = res.body.database_id
  }
  const plain = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch('no-custom', t0) })
  if (plain.status !== 200) throw new Error(`ingest: ${plain.status} ${JSON.stringify(plain.body)}`)
  emptyId = plain.body.database_id
}, 60_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
})

test('each metric with its exact latest value, hostile label and error as text, a counter per second, a chart; fits 390 px', async () => {
  const p = await openPage(browser, { baseURL: server.base })
  try {
    const { page } = p
    await signInThroughForm(page, account)
    await page.goto(`/#/databases/${dbId}/custom-metrics?range=1h`)
    const gauge = page.locator('[data-metric="queue_depth"]')
    await gauge.locator('[data-chart="custom-queue_depth"] .chart-legend').waitFor()
    // The largest value first: the hostile label set, its label exactly as stored, its value exactly.
    const first = gauge.locator('tbody tr').first()
    expect(await first.locator('[data-label="queue"]').textContent()).toBe(HOSTILE)
    expect(await first.locator('[data-value]').textContent()).toBe('12,345')
    expect(await gauge.locator('tbody tr').nth(1).locator('[data-value]').textContent()).toBe('7')
    expect(await gauge.locator('[data-description]').textContent()).toBe(`Jobs waiting ${HOSTILE}`)
    // Nothing of it became markup.
    expect(await page.locator('main b').count()).toBe(0)

    const counter = page.locator('[data-metric="jobs_done"]')
    expect(await counter.locator('th').allTextContents()).toContain('Rate per second')
    expect(await counter.locator('tbody [data-value]').textContent()).toBe('10/s')
    await counter.locator('[data-chart="custom-jobs_done"]').waitFor()
    expect(await counter.locator('[data-chart="custom-jobs_done"]').textContent()).toContain('rate per second')

    const failing = page.locator('[data-metric="outbox_rows"]')
    expect(await failing.locator('.custom-error').textContent()).toBe(ERROR)
    expect(await failing.locator('[data-error]').textContent()).toContain('3 errors since it was defined')
    await p.screenshot('custom-metrics-1280')

    await page.setViewportSize({ width: 390, height: 800 })
    await page.waitForFunction(() => document.documentElement.scrollWidth <= 390)
    expect(await horizontalOverflow(page)).toBe(0)
    await p.screenshot('custom-metrics-390')

    await page.goto(`/#/databases/${emptyId}/custom-metrics`)
    await page.getByText('No custom metric yet').waitFor()
    expect(await page.locator('main .code pre').textContent()).toContain('custom_metrics:')
    expect(await horizontalOverflow(page)).toBe(0)
    p.assertNoErrors()
  } finally {
    await p.close()
  }
}, 60_000)
