// Every page of a database fits a laptop and a phone (issue 26): the compiled binary (dist/dbm serve)
// holds a PostgreSQL and a ClickHouse database fed with batches that set every field of the wire
// (test/support/full-batch.ts), and one Chromium page visits every tab of TABS (src/web/pages/database.tsx,
// so a tab added to a group is covered without editing this file) and an item page of each list, at
// 1280 and 390 px, light and dark. On each: no horizontal overflow of the document, no box that clips
// its content sideways (a table scrolls in its own box, or wraps), no console error and no failed request.
// One navigation per page: the width and the colour scheme change on the loaded page. At 390 px the
// sections are behind the "Sections" button (Esc closes the menu, back to the button). The page, its
// script and its stylesheet go out in brotli or gzip as asked, with Vary and an ETag per encoding.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { brotliDecompressSync } from 'node:zlib'
import type { Browser, Page } from 'playwright-core'
import { TABS, tabsOf } from '../../src/web/pages/database.tsx'
import type { Engine } from '../../src/web/pages/db/types.ts'
import { builtBinary } from '../support/binary.ts'
import { type BrowserPage, horizontalOverflow, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { fullBatch } from '../support/full-batch.ts'
import { type ServeProcess, request, startServe, stopAllServers } from '../support/process.ts'
import { until } from '../support/wait.ts'

const WIDE = { width: 1280, height: 900 }
const PHONE = { width: 390, height: 844 }
const account = { email: 'fit@example.com', password: 'fit test passphrase' }

const dir = mkdtempSync(join(tmpdir(), 'dbm-fit-'))
let server: ServeProcess
let browser: Browser
let tab: BrowserPage
const ids: Record<Engine, string> = { postgres: '', clickhouse: '' }
/** When the two batches of each database were collected. */
let collectedAt: number[] = []
let accessToken = ''
/** Requests that failed or answered 4xx/5xx, with the page they were made from. */
const failed: string[] = []
let inFlight = 0

beforeAll(async () => {
  const [binary, chromium] = await Promise.all([builtBinary(), launchBrowser()])
  browser = chromium
  server = await startServe([binary], { dataDir: join(dir, 'data') })
  const signup = await request(server.base, 'POST', '/api/v1/auth/signup', {
    body: { ...account, name: 'Fit', org_name: 'Fit' },
  })
  expect(signup.status).toBe(201)
  // No SMTP: the verification mail is the server's log line, its link carries the token.
  const token = await until(
    'the verification mail in the log',
    async () => /verify\?token=([A-Za-z0-9_-]+)/.exec(server.stderr())?.[1],
  )
  expect((await request(server.base, 'GET', `/api/v1/auth/verify-email?token=${token}`)).status).toBe(200)
  accessToken = signup.body.access_token
  const key = await request(server.base, 'POST', '/api/v1/api-keys', {
    token: signup.body.access_token,
    body: { name: 'fit', scopes: ['ingest', 'read'] },
  })
  collectedAt = [Date.now() - 120_000, Date.now() - 60_000]
  for (const engine of ['postgres', 'clickhouse'] as const) {
    // Two cycles a minute apart: charts have two points, deltas a previous sample.
    for (const at of collectedAt) {
      const res = await request(server.base, 'POST', '/api/v1/ingest', {
        apiKey: key.body.key,
        body: fullBatch(`fit-${engine}`, at, engine),
      })
      expect(res.status).toBe(200)
      ids[engine] = res.body.database_id
    }
  }
  tab = await openPage(browser, { baseURL: server.base, viewport: WIDE })
  const { page } = tab
  page.on('request', (r) => {
    if (r.resourceType() === 'fetch' || r.resourceType() === 'xhr') inFlight++
  })
  const settled = (r: { resourceType(): string }) => {
    if (r.resourceType() === 'fetch' || r.resourceType() === 'xhr') inFlight--
  }
  page.on('requestfinished', settled)
  page.on('requestfailed', (r) => {
    settled(r)
    failed.push(`${r.method()} ${r.url()} failed (${r.failure()?.errorText}) on ${page.url()}`)
  })
  page.on('response', (r) => {
    if (r.status() >= 400) failed.push(`${r.request().method()} ${r.url()} answered ${r.status()} on ${page.url()}`)
  })
  await signInThroughForm(page, account)
}, 60_000)

afterAll(async () => {
  await tab?.close().catch(() => {})
  await browser?.close()
  await stopAllServers()
  rmSync(dir, { recursive: true, force: true })
})

/** Resolves once the page asked for everything it shows: no call in flight and no "Loading…" left. */
async function settled(page: Page): Promise<void> {
  await until('the page to settle', async () => {
    if (inFlight > 0) return undefined
    const loading = await page.evaluate(() =>
      [...document.querySelectorAll('main [role="status"]')].some((e) => /…$/.test(e.textContent ?? '')),
    )
    return loading ? undefined : true
  })
}

/** Boxes inside <main> that cut their content sideways (overflow hidden or clip) without an ellipsis saying so. */
async function clippedBoxes(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const found: string[] = []
    for (const el of document.querySelectorAll<HTMLElement>('main *')) {
      if (el.scrollWidth <= el.clientWidth + 1 || el.clientWidth === 0) continue
      const style = getComputedStyle(el)
      if (style.overflowX !== 'hidden' && style.overflowX !== 'clip') continue
      if (style.textOverflow === 'ellipsis' || el.closest('.sr-only, .content-heading, .uplot, .chart')) continue
      found.push(
        `<${el.tagName.toLowerCase()} class="${el.className}"> ${el.clientWidth} of ${el.scrollWidth} px: ${(el.textContent ?? '').slice(0, 60)}`,
      )
    }
    return found
  })
}

/** Checks the loaded page at both widths and in both schemes; returns what does not fit. */
async function checkEveryWay(page: Page, where: string): Promise<string[]> {
  const problems: string[] = []
  for (const [viewport, scheme] of [
    [WIDE, 'light'],
    [PHONE, 'light'],
    [PHONE, 'dark'],
    [WIDE, 'dark'],
  ] as const) {
    await page.setViewportSize(viewport)
    await page.emulateMedia({ colorScheme: scheme })
    await page.waitForFunction((s) => document.documentElement.dataset.theme === s, scheme)
    await tab.screenshot(`fit-${where.replace(/\W+/g, '-')}-${viewport.width}-${scheme}`)
    const overflow = await horizontalOverflow(page)
    if (overflow > 0)
      problems.push(`${where} at ${viewport.width} px, ${scheme}: the document is ${overflow} px wider than the screen`)
    for (const box of await clippedBoxes(page))
      problems.push(`${where} at ${viewport.width} px, ${scheme}: clipped ${box}`)
  }
  return problems
}

for (const engine of ['postgres', 'clickhouse'] as const) {
  describe(`every page of a ${engine} database fits 1280 and 390 px, light and dark`, () => {
    test('the sections list every tab of TABS, grouped, and each page fits with no error', async () => {
      const { page } = tab
      const base = `/#/databases/${ids[engine]}`
      await page.setViewportSize(WIDE)
      await page.goto(`${base}/overview`)
      const nav = page.getByRole('navigation', { name: `Sections of fit-${engine}` })
      await nav.waitFor()
      // The navigation is TABS: every tab once, in its group's order.
      expect(
        await nav
          .locator('a')
          .evaluateAll((links) => links.map((a) => a.getAttribute('href')!.split('?')[0]!.split('/').pop())),
      ).toEqual(tabsOf(engine).map((t) => t.slug))
      expect(await nav.locator('.sections-label').allTextContents()).toEqual(
        TABS[engine].filter((g) => g.tabs.length > 1 || g.tabs[0]!.label !== g.label).map((g) => g.label),
      )
      const problems: string[] = []
      for (const t of tabsOf(engine)) {
        const where = `${engine}-${t.slug}`
        await page.setViewportSize(WIDE)
        await nav.getByRole('link', { name: t.label, exact: true }).click()
        await page.waitForURL(new RegExp(`/${t.slug}$`))
        // The address changes first, the navigation's mark follows when the page renders: wait for it.
        await nav
          .locator('[aria-current="page"]')
          .filter({ hasText: new RegExp(`^${t.label}$`) })
          .waitFor()
        expect(await nav.locator('[aria-current="page"]').textContent()).toBe(t.label)
        await settled(page)
        problems.push(...(await checkEveryWay(page, where)))
      }
      // An item of each list that has item pages.
      for (const list of tabsOf(engine).filter((t) => t.itemPage)) {
        await page.setViewportSize(WIDE)
        await page.goto(`${base}/${list.slug}`)
        const link = page.locator(`main table a[href*="/${list.slug}/"]`).first()
        await link.click()
        await settled(page)
        problems.push(...(await checkEveryWay(page, `${engine}-${list.slug}-item`)))
      }
      // A past snapshot of Active (?at=, the time slider's view): the first batch's sessions.
      await page.setViewportSize(WIDE)
      await page.goto(`${base}/active?at=${collectedAt[0]}`)
      await page.locator('[data-stream-state="history"]').waitFor()
      await settled(page)
      problems.push(...(await checkEveryWay(page, `${engine}-active-at`)))
      expect(problems).toEqual([])
      expect(failed).toEqual([])
      tab.assertNoErrors()
    }, 120_000)
  })
}

test('Overview: Top issues is one line per cause, worst first, each with its count of findings; "Open the issues" opens Issues', async () => {
  const { page } = tab
  const doctor = await request(server.base, 'GET', `/api/v1/databases/${ids.postgres}/doctor`, { token: accessToken })
  const groups = doctor.body.groups as { key: string; title: string; lead: string; findings: string[] }[]
  expect(groups.length).toBeGreaterThanOrEqual(3)
  await page.setViewportSize(WIDE)
  await page.goto(`/#/databases/${ids.postgres}/overview`)
  const section = page.locator('section', { has: page.getByRole('heading', { name: 'Top issues', level: 2 }) })
  const lines = section.locator('ul.issue-list > li')
  await lines.first().waitFor()
  const shown = await lines.evaluateAll((list) =>
    list.map((li) => [
      li.querySelector('.row a')!.textContent,
      li.querySelector('.row .small.muted')!.textContent,
      li.querySelector('.row a')!.getAttribute('href'),
    ]),
  )
  expect(shown).toEqual(
    groups
      .slice(0, 3)
      .map((g) => [
        g.title,
        `${g.findings.length} finding${g.findings.length === 1 ? '' : 's'}`,
        `#/databases/${ids.postgres}/issues?finding=${encodeURIComponent(g.lead)}`,
      ]),
  )
  const open = section.getByRole('link', { name: 'Open the issues', exact: true })
  expect(await open.getAttribute('href')).toBe(`#/databases/${ids.postgres}/issues`)
  // (Issues then asks for its alerts: read to their end before the next test leaves the page.)
  const alerts = ['open', 'resolved'].map((status) =>
    page.waitForResponse((r) => r.url().includes(`/alerts?status=${status}`)).then((r) => r.finished()),
  )
  await open.click()
  await page.waitForURL(/\/issues$/)
  await Promise.all(alerts)
  tab.assertNoErrors()
})

test('Issues stays short at 390 px: the worst critical cause open, the others folded to their heading', async () => {
  const { page } = tab
  const doctor = await request(server.base, 'GET', `/api/v1/databases/${ids.postgres}/doctor`, { token: accessToken })
  const findings = doctor.body.top_issues.length as number
  const causes = doctor.body.groups as { severity: string }[]
  const critical = causes.filter((g) => g.severity === 'critical').length
  expect(findings).toBeGreaterThanOrEqual(12)
  expect(critical).toBeGreaterThanOrEqual(2)
  const visit = async (viewport: { width: number; height: number }) => {
    await page.setViewportSize(viewport)
    await page.emulateMedia({ colorScheme: 'light' })
    // The page decides what opens when it renders: each width is its own load.
    // (a change of the address's hash alone is no load: leave the page first, whatever an earlier test left
    // open, then load Issues afresh; a reload would abort the requests Issues had started)
    await page.goto('about:blank')
    // Issues asks for the open and the resolved alerts: wait until both answers are read to their end, so
    // that no request of this page is still running when it is left (it would count as failed).
    const alerts = ['open', 'resolved'].map((status) =>
      page.waitForResponse((r) => r.url().includes(`/alerts?status=${status}`)).then((r) => r.finished()),
    )
    await page.goto(`/#/databases/${ids.postgres}/issues`)
    await page.locator('[data-history]').waitFor()
    await Promise.all(alerts)
    await settled(page)
    const panels = page.locator('article.finding')
    expect(await panels.count()).toBe(causes.length)
    const open = await panels.evaluateAll((list) =>
      list.map((a) => a.querySelector('.collapsible')?.getAttribute('data-open') === 'true'),
    )
    const heights = await panels.evaluateAll((list) => list.map((a) => a.getBoundingClientRect().height))
    const height = await page.evaluate(() => document.documentElement.scrollHeight)
    return { open, heights, height }
  }
  // Wide: every critical cause open, the others folded.
  expect((await visit(WIDE)).open).toEqual(causes.map((g) => g.severity === 'critical'))
  const phone = await visit(PHONE)
  expect(phone.open).toEqual(causes.map((_, i) => i === 0))
  const folded = phone.heights.filter((_, i) => !phone.open[i])
  console.log(
    `issues at 390 px: ${findings} findings in ${causes.length} causes (${critical} critical): page ${Math.round(phone.height)} px; ` +
      `open cause ${Math.round(phone.heights[0]!)} px, folded ${Math.round(Math.min(...folded))}-${Math.round(Math.max(...folded))} px`,
  )
  // A folded cause is its heading: the title in at most three lines and its summary.
  expect(Math.max(...folded)).toBeLessThan(150)
  // The page grows with the causes only by their folded headings (the full batch raises every rule).
  expect(phone.height).toBeLessThan(1500 + 120 * causes.length)
  expect(await horizontalOverflow(page)).toBe(0)
  tab.assertNoErrors()
})

test("the organization's pages fit too, and Settings asks for no webhook that is not set", async () => {
  const { page } = tab
  const problems: string[] = []
  for (const [hash, heading] of [
    ['#/databases', 'Databases'],
    ['#/settings', 'Settings'],
  ] as const) {
    await page.setViewportSize(WIDE)
    await page.goto(`/${hash}`)
    await page.getByRole('heading', { name: heading, level: 1 }).waitFor()
    await settled(page)
    problems.push(...(await checkEveryWay(page, hash.slice(2))))
  }
  // Without SMTP the page says where alert mails go.
  await page.getByText("No webhook is set: alert mails are only written to this server's log").waitFor()
  expect(problems).toEqual([])
  expect(failed).toEqual([])
  tab.assertNoErrors()
})

test('every file of the dashboard goes out compressed as the client accepts, with Vary and its own ETag', async () => {
  const html = await (await fetch(`${server.base}/`)).text()
  const paths = ['/', ...[...html.matchAll(/(?:src|href)="\.?\/?([^"]+\.(?:js|css))"/g)].map((m) => `/${m[1]}`)]
  expect(paths.length).toBeGreaterThanOrEqual(3)
  const sizes: string[] = []
  for (const path of paths) {
    const plain = await fetch(server.base + path, { headers: { 'accept-encoding': 'identity' } })
    const original = new Uint8Array(await plain.arrayBuffer())
    expect([plain.headers.get('content-encoding'), plain.headers.get('vary')]).toEqual([null, 'Accept-Encoding'])
    const decode = {
      br: (b: Uint8Array<ArrayBuffer>) => brotliDecompressSync(b),
      gzip: (b: Uint8Array<ArrayBuffer>) => Bun.gunzipSync(b),
    }
    for (const encoding of ['br', 'gzip'] as const) {
      const accept = encoding === 'br' ? 'gzip, deflate, br' : 'gzip, deflate, br;q=0'
      const res = await fetch(server.base + path, { headers: { 'accept-encoding': accept }, decompress: false })
      const body = new Uint8Array(await res.arrayBuffer())
      expect([
        path,
        res.headers.get('content-encoding'),
        res.headers.get('vary'),
        Number(res.headers.get('content-length')),
      ]).toEqual([path, encoding, 'Accept-Encoding', body.byteLength])
      expect(new Uint8Array(decode[encoding](body))).toEqual(original)
      if (original.byteLength > 4096) expect(body.byteLength).toBeLessThan(original.byteLength / 2)
      const etag = res.headers.get('etag')!
      expect(etag).not.toBe(plain.headers.get('etag'))
      const again = await fetch(server.base + path, {
        headers: { 'accept-encoding': accept, 'if-none-match': etag },
        decompress: false,
      })
      expect([again.status, again.headers.get('content-encoding')]).toEqual([304, null])
      sizes.push(`${path} ${encoding} ${original.byteLength} -> ${body.byteLength}`)
    }
  }
  console.log(`compressed: ${sizes.join('; ')}`)
})

test('at 390 px the sections are a menu: the button names where one is, Esc closes it back to the button', async () => {
  const { page } = tab
  await page.setViewportSize(PHONE)
  await page.goto(`/#/databases/${ids.postgres}/locks`)
  const nav = page.getByRole('navigation', { name: 'Sections of fit-postgres' })
  const button = page.getByRole('button', { name: /^Sections/ })
  expect(await button.textContent()).toBe('Sections Activity › Locks')
  expect(await nav.isVisible()).toBe(false)
  await button.click()
  expect(await button.getAttribute('aria-expanded')).toBe('true')
  // Every link shows whole: no label is cut.
  for (const link of await nav.locator('a').all())
    expect(
      await link.evaluate((a) => a.scrollWidth <= a.clientWidth + 1 && a.getBoundingClientRect().right <= innerWidth),
    ).toBe(true)
  await page.keyboard.press('Escape')
  await nav.waitFor({ state: 'hidden' })
  expect(await page.evaluate(() => document.activeElement?.classList.contains('sections-toggle'))).toBe(true)
  // A choice closes the menu and opens the page.
  await button.click()
  await nav.getByRole('link', { name: 'Tables', exact: true }).click()
  await page.waitForURL(/\/tables$/)
  await nav.waitFor({ state: 'hidden' })
  expect(await button.textContent()).toBe('Sections Storage › Tables')
  tab.assertNoErrors()
})
