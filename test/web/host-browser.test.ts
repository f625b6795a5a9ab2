// The Host page in a real browser (Debian's Chromium) against a test server fed host sections as the
// agent sends them: a data filesystem shrinking by 1 MB a minute with 30 MB left (fills in 30 minutes,
// within two windows of a 1-hour range) and a steady one. At 1280 px each filesystem card is wide enough
// for its chart, the forecast line is drawn (the axis reaches the fill time) and named with it in the
// legend, the trend reads as words; at 390 px nothing runs off the screen. Screenshots with
// DBM_TEST_SCREENSHOTS=1.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import type { HostStatus } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import { launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const MINUTE = 60_000
const MB = 1024 * 1024
const GB = 1024 * MB

let server: TestServer
let account: Account
let browser: Browser
let dbId = ''

const host = (i: number): HostStatus =>
  ({
    source: 'proc',
    on_host: true,
    evidence: "the server address 127.0.0.1 is one of this host's",
    cpu_count: 2,
    cpu: null,
    load: null,
    memory: { total_bytes: 24 * GB, available_bytes: 20 * GB, swap_total_bytes: 0, swap_used_bytes: 0 },
    filesystems: [
      {
        roles: ['data', 'wal', 'log'],
        path: '/var/lib/postgresql',
        mount: '/',
        device: 'vda',
        total_bytes: 252 * GB,
        available_bytes: 77 * GB,
        inodes_total: 1000,
        inodes_available: 900,
      },
      {
        roles: ['tablespace:small'],
        path: '/mnt/small',
        mount: '/mnt/small',
        device: 'tmpfs',
        total_bytes: 64 * MB,
        available_bytes: (50 - i) * MB,
        inodes_total: null,
        inodes_available: null,
      },
    ],
    devices: [],
  }) as HostStatus

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  let key: string
  ;({ account, key } = await agentAccount(server))
  // 21 minutes of samples, one a minute, the last a minute ago: 30 MB left, 1 MB less each minute
  const t0 = Math.floor(Date.now() / MINUTE) * MINUTE - 21 * MINUTE
  for (let i = 0; i <= 20; i++) {
    const res = await server.call('POST', '/api/v1/ingest', {
      apiKey: key,
      body: pgBatch('host-page', t0 + i * MINUTE, { host: host(i) }),
    })
    if (res.status !== 200) throw new Error(`ingest: ${res.status} ${JSON.stringify(res.body)}`)
    dbId = res.body.database_id
  }
}, 60_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
})

test('filesystem cards are wide, the forecast line reaches the fill time, the trend is words; nothing overflows at 390 px', async () => {
  const p = await openPage(browser, { baseURL: server.base })
  try {
    const { page } = p
    await page.setViewportSize({ width: 1280, height: 900 })
    await signInThroughForm(page, account)
    await page.goto(`/#/databases/${dbId}/host?range=1h`)
    const small = page.locator('.host-fs[data-path="/mnt/small"]')
    await small.locator('.chart-legend').waitFor({ timeout: 15_000 })
    const widths = await page
      .locator('.host-fs')
      .evaluateAll((cards) => cards.map((c) => c.getBoundingClientRect().width))
    expect(widths).toHaveLength(2)
    for (const w of widths) expect(w).toBeGreaterThan(400)
    // 1 MB a minute: 17.1 KB/s
    expect(await small.locator('.host-fs-trend').textContent()).toMatch(
      /^Fills .+: free space shrinks by 17\.1 KB\/s \(fitted over 20 min 0 s\)\.$/,
    )
    expect(await small.locator('.chart-legend').textContent()).toContain('forecast: fills ')
    // the axis reaches the fill time: the chart's text names it as the range's end
    const fills = (await small.locator('.host-fs-trend').textContent())!.replace(/^Fills (.+?): .*$/, '$1')
    expect(await small.locator('[data-chart="host-filesystem"] .chart').getAttribute('aria-label')).toContain(
      `forecast: fills ${fills}: latest 0, max 30.0 MB`,
    )
    expect(await page.locator('.host-fs[data-path="/var/lib/postgresql"] .host-fs-trend').textContent()).toStartWith(
      'Free space is steady',
    )
    await p.screenshot('host-page-1280')

    await page.setViewportSize({ width: 390, height: 800 })
    await page.waitForFunction(() => document.documentElement.scrollWidth <= 390)
    await p.screenshot('host-page-390')
    p.assertNoErrors()
  } finally {
    await p.close()
  }
})
