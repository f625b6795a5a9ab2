// The dashboard end to end in a real browser (Debian's Chromium through playwright-core) against the
// compiled binary: `dist/dbm serve` with a real SMTP receiver, fed by `dist/dbm agent` watching a fresh
// database on the shared PostgreSQL 17 with pg_stat_statements and a running workload. A user signs up,
// verifies the email from the mailed link, creates an API key in the page, the agent runs with that key,
// the database shows up connected, its overview charts its activity, its statements filter by text with
// each one's share of the total time (the filter kept in the URL across a reload, and "counted since" said
// for a database watched for less than the range), its statement chart is drawn with a legend the keyboard
// toggles and a text alternative, its plans are grouped by plan with their sample counts, the chosen time
// range follows from tab to tab, the skip link lands past the tabs, tables show their last vacuum and
// analyze, the doctor's figures read in human units and words, Esc closes the add-database form, the menu
// and the confirmations, a server that cannot be reached keeps the page's data under a "retrying" banner,
// a session that ends leads to the sign-in page and back to the page afterwards, the theme follows the
// device until the user picks one, revoking the key in the page makes the API refuse it, the
// organization's alert webhook is set (its secret shown once), tested (the refused delivery said so),
// changed and removed in Settings, and the mailed password-reset link leads to a new password. A pass at
// phone width checks that nothing overflows and that the sections fold behind a button. Every page visited is saved as a full-page screenshot under test-artifacts/screenshots/
// (git-ignored), and any console or page error fails the test (but the failed requests a step causes
// on purpose).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import postgres from 'postgres'
import { binaryPath as binary, builtBinary } from '../support/binary.ts'
import { type BrowserPage, horizontalOverflow, launchBrowser, openPage } from '../support/browser.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { type ServeProcess, cleanEnv, request, startServe, stopAllServers } from '../support/process.ts'
import { startSmtpReceiver } from '../support/smtp.ts'
import { until } from '../support/wait.ts'
import { contentSecurityPolicy } from '../../src/server/web/security-headers.ts'

const tmpRoot = mkdtempSync(join(tmpdir(), 'dbm-dashboard-'))
/** The mails' links start with this; the test opens them on the server's real address. */
const publicUrl = 'http://dbm-dashboard.test'
const email = 'dash-owner@example.com'
const password = 'dashboard e2e passphrase'
const databaseName = 'shop'

let smtp: Awaited<ReturnType<typeof startSmtpReceiver>>
let server: ServeProcess
let browser: Browser
let sql: postgres.Sql
let dsn = ''
let agent: ReturnType<typeof Bun.spawn> | undefined
let agentLog = ''
let workload: ReturnType<typeof setInterval> | undefined
const open: BrowserPage[] = []

/** State carried from one step of the story to the next. */
let apiKey = ''
let databaseId = ''
let statementHash = ''

beforeAll(async () => {
  // dist/dbm is built once for the whole test run (test/support/binary.ts), whichever file asks first.
  const [, receiver, pg, chromium] = await Promise.all([
    builtBinary(),
    startSmtpReceiver(),
    sharedPostgres(17),
    launchBrowser(),
  ])
  smtp = receiver
  browser = chromium

  dsn = await pg.freshDatabase()
  sql = postgres(dsn, { max: 2, onnotice: () => {} })
  await sql.unsafe(`
    CREATE EXTENSION pg_stat_statements;
    CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric NOT NULL);
    INSERT INTO items SELECT g, 'item ' || g, g % 100 FROM generate_series(1, 5000) g;
    ANALYZE items;
  `)

  server = await startServe([binary], {
    dataDir: join(tmpRoot, 'data'),
    extraArgs: ['--public-url', publicUrl],
    env: { DBM_SMTP_URL: smtp.url, DBM_SMTP_FROM: 'dbm <dbm@dashboard.test>' },
  })
}, 60_000)

afterAll(async () => {
  if (workload) clearInterval(workload)
  for (const p of open) await p.close().catch(() => {})
  await browser?.close()
  if (agent) {
    agent.kill('SIGTERM')
    await agent.exited
  }
  await stopAllServers()
  await sql?.end({ timeout: 1 })
  await smtp?.close()
  rmSync(tmpRoot, { recursive: true, force: true })
})

async function newPage(options: { viewport?: { width: number; height: number } } = {}): Promise<BrowserPage> {
  const p = await openPage(browser, { baseURL: server.base, ...options })
  open.push(p)
  return p
}

/** Signs in through the form and waits for the databases page. */
async function signIn(page: Page): Promise<void> {
  await page.goto('/#/signin')
  await page.getByLabel('Email', { exact: true }).fill(email)
  await page.getByLabel('Password', { exact: true }).fill(password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(/#\/databases$/)
  await page.getByRole('heading', { name: 'Databases' }).waitFor()
}

/** Some statements against the watched database, so every agent cycle has statement deltas to send. */
async function runWorkload(): Promise<void> {
  const id = 1 + Math.floor(Math.random() * 5000)
  await sql`SELECT name, price FROM items WHERE id = ${id}`
  await sql`SELECT count(*) FROM items WHERE price > ${id % 100}`
  await sql`UPDATE items SET price = price + 1 WHERE id = ${id}`
}

describe('dashboard (dist/dbm in Chromium)', () => {
  test('sign up, verify the email from the mailed link, create an API key and see it in the agent setup', async () => {
    const b = await newPage()
    const { page } = b
    // The page is served under the strict policy (the browser reports any violation of it as a problem).
    const loaded = await page.goto('/')
    expect(loaded?.headers()['content-security-policy']).toBe(contentSecurityPolicy)
    await page.waitForURL(/#\/signin$/)
    await page.getByRole('heading', { name: 'Sign in to dbm' }).waitFor()
    // The first Tab reaches the skip link, visibly; it moves the focus to the page's content.
    await page.keyboard.press('Tab')
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content')
    expect(await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle)).toBe('solid')
    await page.keyboard.press('Enter')
    // It lands on the page's heading; the first visit writes no theme (System until one is picked).
    expect(await page.evaluate(() => [document.activeElement?.tagName, document.activeElement?.textContent])).toEqual([
      'H1',
      'Sign in to dbm',
    ])
    expect(
      await page.evaluate(() => [localStorage.getItem('dbm-theme-choice'), localStorage.getItem('dbm-theme')]),
    ).toEqual([null, null])
    await page.waitForURL(/#\/signin$/)
    await b.screenshot('01-sign-in')

    await page.getByRole('link', { name: 'Create one' }).click()
    await page.getByRole('heading', { name: 'Create your dbm account' }).waitFor()
    await page.getByLabel('Your name').fill('Dash Owner')
    await page.getByLabel('Email', { exact: true }).fill(email)
    await page.getByLabel('Password', { exact: true }).fill(password)
    await page.getByLabel('Organization name').fill('Dashboard Inc')
    await b.screenshot('02-sign-up')
    await page.getByRole('button', { name: 'Create account' }).click()

    await page.waitForURL(/#\/databases$/)
    await page.getByText('No databases yet: start the agent').waitFor()
    const banner = page.getByRole('region', { name: 'Email verification' })
    await banner.waitFor()
    expect(await page.getByRole('link', { name: 'Set up the agent' }).getAttribute('href')).toBe('#/settings/agent')
    await b.screenshot('03-databases-empty-unverified')

    const mail = await smtp.waitFor(email, /verify/i)
    const link = /http:\/\/\S+/.exec(mail.text)?.[0] ?? ''
    expect(link).toMatch(/^http:\/\/dbm-dashboard\.test\/#\/verify\?token=[A-Za-z0-9_-]{43}$/)
    // The same link on the server's real address (the public URL is a name this machine cannot resolve).
    await page.goto(server.base + link.slice(publicUrl.length))
    await page.getByText('Your email address is verified.').waitFor()
    await banner.waitFor({ state: 'detached' })
    await b.screenshot('04-email-verified')
    const me = await page.evaluate(() => fetch('/api/v1/auth/me').then((r) => r.json()))
    expect(me.organization.verified).toBe(true)

    // A database registered by hand shows up disconnected until an agent sends its data.
    await page.getByRole('link', { name: 'Go to your databases' }).click()
    // The form opens with the focus in its first field; Esc closes it, back to the button that opened it.
    const addButton = page.getByRole('button', { name: 'Add a database' })
    await addButton.click()
    await page.waitForFunction(() => document.activeElement?.id === 'db-name')
    await page.keyboard.press('Escape')
    await page.getByLabel('Name', { exact: true }).waitFor({ state: 'detached' })
    expect(await addButton.getAttribute('aria-expanded')).toBe('false')
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Add a database')
    await addButton.click()
    await page.getByLabel('Name', { exact: true }).fill('billing')
    await page.getByLabel('Engine').selectOption('clickhouse')
    await page.getByLabel('Host').fill('ch1.internal')
    expect(await page.getByLabel('Port').getAttribute('placeholder')).toBe('8123')
    await b.screenshot('05-add-database')
    await page.getByRole('button', { name: 'Add database' }).click()
    const billing = page.locator('tr[data-database="billing"]')
    await billing.getByText('disconnected', { exact: true }).waitFor()
    expect(await billing.textContent()).toContain('ch1.internal:8123')

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click()
    await page.getByRole('heading', { name: 'API keys' }).waitFor()
    await page.getByText('No API keys yet').waitFor()
    await page.getByLabel('Key name').fill('e2e agent')
    await page.getByRole('button', { name: 'Create key' }).click()
    apiKey = (await page.locator('#new-api-key').textContent()) ?? ''
    expect(apiKey).toMatch(/^dbm_ak_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/)
    await page.getByText('Copy it now: it will not be shown again.').waitFor()
    const row = page.locator('tr[data-key="e2e agent"]')
    await expect(row.textContent()).resolves.toContain(`dbm_ak_${apiKey.slice(7, 23)}_...`)
    await expect(row.textContent()).resolves.toContain('active')
    await page.getByRole('button', { name: 'Copy to the clipboard' }).first().click()
    await page.locator('button.copy', { hasText: 'Copied' }).first().waitFor()
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(apiKey)
    await b.screenshot('06-api-key-created')

    await page.getByRole('link', { name: 'Open the agent setup with this key' }).click()
    await page.getByRole('heading', { name: 'Agent setup' }).waitFor()
    const config = (await page.locator('section[aria-labelledby="step-config"] .code pre').first().textContent()) ?? ''
    expect(config).toContain(`endpoint: ${server.base}`)
    expect(config).toContain(`key: ${apiKey}`)
    expect(await page.locator('main').textContent()).toContain(
      `--set apiKey=${apiKey} --set apiEndpoint=${server.base}`,
    )
    await b.screenshot('07-agent-setup')
    b.assertNoErrors()
  }, 30_000)

  test("the agent's database shows up connected; its overview, a statement with its chart, and the doctor", async () => {
    expect(apiKey).not.toBe('')
    const configPath = join(tmpRoot, 'config.yaml')
    writeFileSync(
      configPath,
      `api:\n  endpoint: ${server.base}\n  key: ${apiKey}\ndatabases:\n  - name: ${databaseName}\n    dsn: ${dsn}\n    poll_interval: 1s\n`,
    )
    agent = Bun.spawn([binary, 'agent', '--config', configPath, '--buffer-dir', tmpRoot], {
      cwd: tmpRoot,
      env: cleanEnv(),
      stdin: 'ignore',
      stdout: 'ignore',
      stderr: 'pipe',
      timeout: 120_000,
      killSignal: 'SIGKILL',
    })
    void (async () => {
      for await (const chunk of agent.stderr as ReadableStream<Uint8Array>) agentLog += new TextDecoder().decode(chunk)
    })()
    await runWorkload()
    workload = setInterval(() => void runWorkload().catch(() => {}), 300)

    // The agent's first cycle is the statements' baseline; the next ones carry the workload's deltas.
    const list = await until(
      'the agent to register the database and send statements',
      async () => {
        const dbs = await request(server.base, 'GET', '/api/v1/databases', { apiKey })
        const db = dbs.body?.find?.((d: any) => d.name === databaseName && d.status === 'connected')
        if (!db) return undefined
        const queries = await request(server.base, 'GET', `/api/v1/databases/${db.id}/queries`, { apiKey })
        const stmt = queries.body?.find?.((q: any) => /FROM items WHERE id/.test(q.query_text))
        return stmt ? { db, stmt } : undefined
      },
      { timeoutMs: 15_000, everyMs: 250 },
    ).catch((e) => {
      throw new Error(`${e.message}\nagent log:\n${agentLog}`)
    })
    databaseId = list.db.id
    statementHash = list.stmt.query_hash

    const b = await newPage()
    const { page } = b
    await signIn(page)
    const row = page.locator(`tr[data-database="${databaseName}"]`)
    await row.getByText('connected', { exact: true }).waitFor()
    // The health score: /databases/health carries it once the health monitor has diagnosed the new
    // database, and the page polls for it; on a loaded machine that first pass can come after 10 s.
    await row.locator('td.num .badge').waitFor({ timeout: 25_000 })
    expect(await row.textContent()).toMatch(/PostgreSQL\s*17\./)
    await b.screenshot('08-databases')

    await row.getByRole('link', { name: databaseName }).click()
    await page.waitForURL(new RegExp(`#/databases/${databaseId}$`))
    await page.getByRole('heading', { name: databaseName, level: 1 }).waitFor()
    const tabs = page.getByRole('navigation', { name: `Sections of ${databaseName}` })
    await tabs.waitFor()
    // The overview charts the last 6 hours of transactions and connections, each with a text alternative.
    const transactions = page.locator('[data-chart="overview-transactions"]')
    await transactions.locator('[role="img"]').waitFor()
    expect(await transactions.locator('[role="img"]').getAttribute('aria-label')).toMatch(
      /^Transactions per second, .+ to .+\. commits: (latest .+, max .+|no values); rollbacks: /,
    )
    await page.locator('[data-chart="overview-connections"]').getByRole('button', { name: 'backends' }).waitFor()
    // A database watched for minutes of the 6 hours drawn: the chart says since when, over the whole range.
    expect(await page.locator('[data-chart="overview-connections"] figcaption').textContent()).toMatch(
      /^Connections · collecting since .*\d/,
    )
    // "Skip to content" lands past the header, the breadcrumb and the tabs, on the tab's heading.
    await page.locator('a.skip').focus()
    await page.keyboard.press('Enter')
    expect(
      await page.evaluate(() => [
        document.activeElement?.hasAttribute('data-main-heading'),
        document.activeElement?.textContent,
      ]),
    ).toEqual([true, 'Overview'])
    await page.waitForLoadState('networkidle')
    await b.screenshot('09-overview')

    await tabs.getByRole('link', { name: 'Statements' }).click()
    const statement = page.locator(`a[href*="/queries/${encodeURIComponent(statementHash)}"]`).first()
    await statement.waitFor()
    // Each statement's share of the listed statements' total time, the header saying of what.
    const share = page.getByRole('columnheader', { name: '% of total time' })
    expect(await share.getAttribute('title')).toMatch(/^Share of the total time of the \d+ statements listed/)
    expect(await page.locator('tbody tr').first().locator('td.num').nth(1).textContent()).toMatch(/^\d+(\.\d)? %$/)
    // The text filter narrows the list as one types, ignoring case; no match says so; Esc clears it.
    // dbm counts from the agent's first cycle: the list says since when, as the range reaches further back.
    expect(await page.locator('[data-counted-since]').textContent()).toMatch(
      /^Counted since .*\d.*: dbm counts statements from the agent's first cycle on/,
    )
    const listed = await page.locator('tbody tr').count()
    const filter = page.getByLabel('Filter by text')
    const historyLength = await page.evaluate(() => history.length)
    await filter.fill('from ITEMS where id')
    await page.getByText(/^\d+ of the \d+ statements listed match “from ITEMS where id”\.$/).waitFor()
    await statement.waitFor()
    // The filter is in the URL (no history entry per key) and survives a reload.
    await page.waitForURL(/\/queries\?q=from\+ITEMS\+where\+id$/)
    expect(await page.evaluate(() => history.length)).toBe(historyLength)
    await page.reload()
    await page.getByText(/^\d+ of the \d+ statements listed match “from ITEMS where id”\.$/).waitFor()
    expect(await filter.inputValue()).toBe('from ITEMS where id')
    await statement.waitFor()
    expect(await page.locator('tbody tr').count()).toBeLessThanOrEqual(listed)
    for (const text of await page.locator('tbody .stmt-text').allTextContents())
      expect(text.toLowerCase()).toContain('from items where id')
    await filter.fill('no such statement text')
    await page.getByText('No statement matches “no such statement text”').waitFor()
    await b.screenshot('10-statements-no-match')
    await filter.press('Escape')
    expect(await filter.inputValue()).toBe('')
    await page.waitForURL(/\/queries$/)
    await statement.waitFor()
    expect(await page.locator('tbody tr').count()).toBe(listed)
    await b.screenshot('10-statements')

    // Plans as auto_explain logs them, one per call: index scan A three times, sequential scan B twice, then
    // A four times again (the latest change makes it cheaper: the doctor sees no regression in it).
    const url = new URL(dsn)
    const now = Date.now()
    const node = (type: string) => ({
      Plan: {
        'Node Type': type,
        'Relation Name': 'items',
        'Startup Cost': 0,
        'Total Cost': type === 'Seq Scan' ? 90 : 8,
        'Plan Rows': 1,
      },
    })
    const order = [
      'e2e-plan-a',
      'e2e-plan-a',
      'e2e-plan-a',
      'e2e-plan-b',
      'e2e-plan-b',
      'e2e-plan-a',
      'e2e-plan-a',
      'e2e-plan-a',
      'e2e-plan-a',
    ]
    const samples = order.map((hash, i) => ({
      query_hash: statementHash,
      ts: now - (order.length - i) * 5000,
      plan_json: node(hash === 'e2e-plan-a' ? 'Index Scan' : 'Seq Scan'),
      plan_hash: hash,
      total_cost: hash === 'e2e-plan-a' ? 8 : 90,
      actual_time_ms: 1 + i,
      seq_scans: hash === 'e2e-plan-a' ? 0 : 1,
      index_scans: hash === 'e2e-plan-a' ? 1 : 0,
      rows_estimated: 1,
      rows_actual: 1,
      source: 'auto_explain',
    }))
    const batch = {
      batch_id: crypto.randomUUID(),
      collected_at: now,
      interval_seconds: 1,
      agent_version: 'e2e',
      database: { name: databaseName, engine: 'postgres', host: url.hostname, port: Number(url.port || 5432) },
      explain_plans: samples,
    }
    expect((await request(server.base, 'POST', '/api/v1/ingest', { apiKey, body: batch })).status).toBeLessThan(300)

    await statement.click()
    await page.waitForURL(new RegExp(`/queries/${statementHash}`))
    const canvas = page.locator('.uplot canvas').first()
    await canvas.waitFor()
    const box = await canvas.boundingBox()
    expect(box?.width).toBeGreaterThan(100)
    expect(box?.height).toBeGreaterThan(50)
    // The chart is an image with a text alternative; its legend's series are buttons the keyboard toggles.
    const calls = page.locator('[data-chart="statement-calls"]')
    expect(await calls.locator('[role="img"]').getAttribute('aria-label')).toMatch(
      /^Calls per minute, .+\. calls: latest \S+, max \S+\.( Marked: .+\.)?$/,
    )
    const callsSeries = calls.getByRole('button', { name: 'calls' })
    expect(await callsSeries.getAttribute('aria-pressed')).toBe('true')
    await callsSeries.focus()
    await page.keyboard.press('Space')
    expect(await callsSeries.getAttribute('aria-pressed')).toBe('false')
    await calls.getByText('hidden', { exact: true }).waitFor()
    await page.keyboard.press('Enter')
    expect(await callsSeries.getAttribute('aria-pressed')).toBe('true')
    // First counted minutes ago: the totals and the charts say so.
    expect(await page.locator('[data-counted-since]').textContent()).toContain('counted since')
    // The plans: one row per plan with its number of samples, the one that replaced another marked.
    const planA = page.locator('tr[data-plan="e2e-plan-a"]')
    const planB = page.locator('tr[data-plan="e2e-plan-b"]')
    await planA.waitFor()
    expect(await planA.locator('[data-plan-samples]').textContent()).toBe('7')
    expect(await planB.locator('[data-plan-samples]').textContent()).toBe('2')
    await planB.getByText('plan changed').waitFor()
    expect(await planB.locator('td').nth(3).textContent()).toBe('4.0 ms / 4.5 ms / 5.0 ms')
    // Its samples are listed on demand; choosing the plan shows its latest sample's tree.
    await planB.getByRole('button', { name: 'List samples' }).click()
    expect(await page.locator('tr.plan-sample').count()).toBe(2)
    await planB.getByRole('button', { name: 'e2e-plan-b' }).click()
    await page.waitForURL(/plan=e2e-plan-b/)
    await page.locator('.plan-tree').getByText('Seq Scan').waitFor()
    await page.waitForLoadState('networkidle')
    await b.screenshot('11-statement')

    // The chosen time range follows from tab to tab; every page starts from the same default (6 hours).
    expect(await page.getByLabel('Time range').inputValue()).toBe('6h')
    await page.getByLabel('Time range').selectOption('24h')
    await page.waitForURL(/[?&]range=24h$/)
    await tabs.getByRole('link', { name: 'Waits' }).click()
    await page.waitForURL(/\/waits\?range=24h$/)
    expect(await page.getByLabel('Time range').inputValue()).toBe('24h')
    await tabs.getByRole('link', { name: 'Internals' }).click()
    await page.waitForURL(/\/internals\?range=24h$/)
    expect(await page.getByLabel('Time range').inputValue()).toBe('24h')

    // Tables: the later of the manual and the automatic vacuum and analyze (the setup ran ANALYZE by hand).
    await tabs.getByRole('link', { name: 'Tables' }).click()
    await page.getByRole('columnheader', { name: 'Last vacuum' }).waitFor()
    await page.getByRole('columnheader', { name: 'Last analyze' }).waitFor()
    const items = page.locator('tbody tr', { has: page.getByRole('link', { name: 'public.items' }) })
    await items.waitFor()
    const headers = await page.locator('thead th').allTextContents()
    const analyzed = items.locator('td').nth(headers.findIndex((h) => h.startsWith('Last analyze')))
    expect(await analyzed.textContent()).toMatch(/ago (manual|auto)$/)
    expect(await analyzed.locator('span').first().getAttribute('title')).toMatch(
      /^manual analyze: .+; autoanalyze: .+$/,
    )
    await b.screenshot('12-tables')

    await tabs.getByRole('link', { name: 'Issues' }).click()
    await page.waitForURL(/\/issues\?range=24h$/)
    await page.waitForLoadState('networkidle')
    await expect(page.locator('main').textContent()).resolves.toMatch(
      /score|finding|healthy|degraded|unhealthy|no open issue/i,
    )
    // Key figures (folded at the page's end) in human units, labelled without the unit: no raw milliseconds or ratios of 1.
    await page.locator('[data-key-figures] summary').click()
    const figures = page.locator('[data-key-figures] dl')
    const figure = async (label: string) =>
      (await figures
        .locator('dt', { hasText: new RegExp(`^${label}$`) })
        .locator('xpath=following-sibling::dd[1]')
        .textContent()) ?? ''
    expect(await figure('cache hit ratio')).toMatch(/^(\d+(\.\d+)? %|—)$/)
    expect(await figure('dead tuple ratio')).toMatch(/^(\d+(\.\d+)? %|—)$/)
    expect(await figure('longest query')).toMatch(/^(—|[\d.]+ (ms|s)|\d+ min \d+ s|\d+ h \d+ min|\d+ d \d+ h)$/)
    expect(await figure('last autovacuum')).toMatch(/^(—|.+ ago \(.+\)|never)$/)
    expect(await figures.locator('dt').allTextContents()).not.toContain('longest query ms')
    // Catalog column names read as words wherever the doctor shows what it measured.
    for (const label of await page.locator('main dl dt').allTextContents())
      expect(label).not.toMatch(/\bn (dead|live) tup\b|\bidx scan\b|\bblks\b/)
    await b.screenshot('12-issues')

    // The active sessions arrive over the WebSocket, on the same origin: the policy's connect-src 'self' lets it through.
    await tabs.getByRole('link', { name: 'Active' }).click()
    await page.locator('[data-stream-state="live"]').waitFor()
    b.assertNoErrors()
  }, 60_000)

  test('at phone width (390 × 844) the list and the statement page fit the screen', async () => {
    expect(statementHash).not.toBe('')
    const b = await newPage({ viewport: { width: 390, height: 844 } })
    const { page } = b
    await signIn(page)
    await page.locator(`tr[data-database="${databaseName}"]`).getByText('connected', { exact: true }).waitFor()
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0)
    // The navigation folds behind the menu button.
    const nav = page.getByRole('navigation', { name: 'Main' })
    expect(await nav.isVisible()).toBe(false)
    await page.getByRole('button', { name: 'Menu' }).click()
    await nav.getByRole('link', { name: 'Agent setup' }).waitFor()
    await b.screenshot('13-phone-databases-menu')
    // Esc folds the menu away, back to its button.
    await page.keyboard.press('Escape')
    await nav.waitFor({ state: 'hidden' })
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Menu')
    await b.screenshot('13-phone-databases')

    // The sections fold behind a button naming where one is; it opens them grouped.
    await page.goto(`/#/databases/${databaseId}`)
    const sections = page.getByRole('navigation', { name: `Sections of ${databaseName}` })
    const toggle = page.getByRole('button', { name: /^Sections/ })
    expect(await toggle.textContent()).toBe('Sections Overview')
    expect(await sections.isVisible()).toBe(false)
    await toggle.click()
    await sections.getByRole('link', { name: 'Locks', exact: true }).waitFor()
    await page.keyboard.press('Escape')
    await sections.waitFor({ state: 'hidden' })
    await page.waitForLoadState('networkidle')
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0)
    await b.screenshot('13-phone-overview')
    await page.goto(`/#/databases/${databaseId}/queries`)
    await page.getByLabel('Filter by text').waitFor()
    await page.waitForLoadState('networkidle')
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0)

    await page.goto(`/#/databases/${databaseId}/queries/${encodeURIComponent(statementHash)}`)
    const canvas = page.locator('.uplot canvas').first()
    await canvas.waitFor()
    const box = await canvas.boundingBox()
    expect(box?.width).toBeGreaterThan(100)
    expect(box!.width).toBeLessThanOrEqual(390)
    await page.waitForLoadState('networkidle')
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0)
    await b.screenshot('14-phone-statement')
    b.assertNoErrors()
  }, 30_000)

  test('a server that cannot be reached keeps the page under a "retrying" banner; a session that ends leads to the sign-in page and back', async () => {
    expect(databaseId).not.toBe('')
    const b = await newPage()
    const { page } = b
    await signIn(page)
    await page.goto(`/#/databases/${databaseId}/queries?range=24h`)
    const rows = page.locator('tbody tr')
    await rows.first().waitFor()
    const listed = await rows.count()

    // The server goes away: a reload keeps the statements shown, one banner says so, and it comes back by itself.
    await page.route('**/api/v1/**', (route) => route.abort('connectionrefused'))
    await page.getByRole('button', { name: 'Refresh' }).click()
    const banner = page.locator('[data-unreachable]')
    await banner.waitFor()
    expect(await banner.textContent()).toStartWith('Cannot reach the dbm server — retrying.')
    expect(await rows.count()).toBe(listed)
    expect(await page.locator('main').textContent()).not.toContain('Failed to fetch')
    await b.screenshot('15-server-unreachable')
    await page.unroute('**/api/v1/**')
    await banner.waitFor({ state: 'detached', timeout: 15_000 })
    expect(await rows.count()).toBeGreaterThan(0)

    // The session ends (its cookies gone): the next call leads to the sign-in page, without the email in the header.
    await b.context.clearCookies()
    await page.getByLabel('Sort by').selectOption('calls')
    await page.waitForURL(/#\/signin\?/)
    const next = new URL(page.url().replace('#', '')).searchParams
    expect(next.get('next')).toBe(`/databases/${databaseId}/queries?range=24h&sort=calls`)
    await page.getByText('Your session has ended. Sign in again to go back to the page you were on.').waitFor()
    expect(await page.locator('header .who').count()).toBe(0)
    expect(await page.locator('main').textContent()).not.toContain('authentication required')
    await b.screenshot('15-session-ended')
    // Signing in again returns to the page.
    await page.getByLabel('Email', { exact: true }).fill(email)
    await page.getByLabel('Password', { exact: true }).fill(password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(new RegExp(`#/databases/${databaseId}/queries\\?range=24h&sort=calls$`))
    await rows.first().waitFor()
    expect(await page.getByLabel('Sort by').inputValue()).toBe('calls')
    // A "next" that is not a page of the app is ignored.
    await page.goto('/#/signin?next=%2F%2Fevil.example%2F')
    await page.waitForURL(/#\/databases$/)
    // The refused requests of the outage and of the ended session are the network errors this test expects.
    const unexpected = b.problems.filter(
      (p) =>
        !/ERR_CONNECTION_REFUSED|ERR_FAILED|status of 401 .*\/api\/v1\/|status of 400 .*\/api\/v1\/auth\/refresh\)$/.test(
          p,
        ),
    )
    expect(unexpected).toEqual([])
  }, 45_000)

  test('revoking the key in the page makes the API refuse it; the theme follows the device until one is picked', async () => {
    expect((await request(server.base, 'GET', '/api/v1/databases', { apiKey })).status).toBe(200)
    const b = await newPage()
    const { page } = b
    await signIn(page)
    const theme = page.getByLabel('Theme')
    const shown = () => page.evaluate(() => document.documentElement.dataset.theme)
    const stored = () => page.evaluate(() => localStorage.getItem('dbm-theme-choice'))
    // System: the device's light scheme, nothing stored; the device turning dark turns the page dark.
    expect(await theme.inputValue()).toBe('system')
    expect(await shown()).toBe('light')
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark', undefined, { timeout: 5000 })
    expect(await stored()).toBeNull()
    // A choice is stored and stays, whatever the device says.
    await theme.selectOption('light')
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'light', undefined, { timeout: 5000 })
    expect(await stored()).toBe('light')
    await page.reload()
    await page.getByRole('heading', { name: 'Databases' }).waitFor()
    expect(await shown()).toBe('light')
    // Back to System: the stored choice goes, and the device's dark scheme applies again.
    await theme.selectOption('system')
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark', undefined, { timeout: 5000 })
    expect(await stored()).toBeNull()
    await page.emulateMedia({ colorScheme: 'light' })
    await theme.selectOption('dark')
    // The theme lands on <html> from an effect after the re-render: wait for it rather than read it at once.
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark', undefined, { timeout: 5000 })
    await b.screenshot('15-databases-dark')

    await page.goto('/#/settings/api-keys')
    const row = page.locator('tr[data-key="e2e agent"]')
    await row.getByRole('button', { name: 'Revoke the key e2e agent' }).click()
    await row.getByText('Agents using it are refused from their next request.').waitFor()
    await b.screenshot('16-api-key-revoke-confirm-dark')
    await row.getByRole('button', { name: 'Revoke now' }).click()
    await row.getByText(/^revoked /).waitFor()
    await b.screenshot('17-api-key-revoked-dark')

    const refused = await request(server.base, 'GET', '/api/v1/databases', { apiKey })
    expect(refused).toEqual({ status: 401, body: { error: expect.any(String) } })
    b.assertNoErrors()
  }, 30_000)

  test('settings: the alert webhook is set (its secret shown once), changed and removed; Esc cancels the removal', async () => {
    const b = await newPage()
    const { page } = b
    await signIn(page)
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click()
    await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor()
    const account = page.getByRole('region', { name: 'Your account' })
    expect(await account.textContent()).toContain(`${email} verified`)
    await page.getByText('No webhook is set: alerts go by mail, and to the alert destinations below.').waitFor()

    // A URL the API refuses: its message shows under the form.
    const field = page.getByLabel('Webhook URL', { exact: true })
    await field.fill('ftp://hooks.example.com/dbm')
    await page.getByRole('button', { name: 'Set the webhook' }).click()
    await page.getByText('url must be an http:// or https:// URL').waitFor()

    // An internal address is refused too (the server does not set DBM_WEBHOOK_ALLOW_PRIVATE).
    await field.fill('http://127.0.0.1:9/dbm-alerts')
    await page.getByRole('button', { name: 'Set the webhook' }).click()
    await page
      .getByText(
        'url: address 127.0.0.1 is loopback; set DBM_WEBHOOK_ALLOW_PRIVATE=true on the server to allow internal receivers',
      )
      .waitFor()

    // A name that does not resolve is taken (it may resolve later); its deliveries fail.
    await field.fill('http://hooks.dbm.invalid/dbm-alerts')
    await page.getByRole('button', { name: 'Set the webhook' }).click()
    const secret = (await page.locator('#webhook-secret').textContent()) ?? ''
    expect(secret).toMatch(/^dbm_whsec_[A-Za-z0-9_-]{43}$/)
    await page.getByText('Copy it now: it will not be shown again.').waitFor()
    expect(await page.locator('[data-webhook-url]').textContent()).toBe('http://hooks.dbm.invalid/dbm-alerts')
    await b.screenshot('18-settings-webhook-set')
    // A test alert to a name that does not resolve: the page says it was not delivered, in the API's generic words.
    await page.getByRole('button', { name: 'Send a test alert' }).click()
    const outcome = page.locator('[data-webhook-test]')
    await outcome.waitFor()
    expect(await outcome.getAttribute('data-webhook-test')).toBe('failed')
    expect(await outcome.textContent()).toMatch(/^Not delivered: .+ \(the server's log has the cause\)\.$/)
    await b.screenshot('18-settings-webhook-test')
    const stored = await page.evaluate(() => fetch('/api/v1/organization/webhook').then((r) => r.json()))
    expect(stored.url).toBe('http://hooks.dbm.invalid/dbm-alerts')
    expect(stored.secret).toBeUndefined()

    // Once the page is left, the secret is gone from it; changing the URL keeps the same secret.
    await page.reload()
    await page.locator('[data-webhook-url]').waitFor()
    expect(await page.locator('#webhook-secret').count()).toBe(0)
    expect(await page.content()).not.toContain(secret)
    await field.fill('https://hooks.example.com/dbm')
    await page.getByRole('button', { name: 'Change the URL' }).click()
    await page.getByText('URL changed. The signing secret is the same as before.').waitFor()
    await page.locator('[data-webhook-url]', { hasText: 'https://hooks.example.com/dbm' }).waitFor()
    expect(await page.locator('#webhook-secret').count()).toBe(0)

    // Removing asks first; Esc cancels, back to the button.
    const remove = page.getByRole('button', { name: 'Remove the webhook' })
    await remove.click()
    await page.getByRole('group', { name: 'Remove the webhook?' }).waitFor()
    await page.keyboard.press('Escape')
    await page.getByRole('group', { name: 'Remove the webhook?' }).waitFor({ state: 'detached' })
    // The focus moves back from an effect after the re-render: wait for it rather than read it at once.
    await page.waitForFunction(() => document.activeElement?.textContent === 'Remove the webhook', undefined, {
      timeout: 5000,
    })
    await remove.click()
    await page.getByRole('button', { name: 'Remove now' }).click()
    await page.getByText('No webhook is set: alerts go by mail, and to the alert destinations below.').waitFor()
    // The page asks for no webhook now; this probe's own 404 is the test's, not the page's.
    const before = b.problems.length
    expect(await page.evaluate(() => fetch('/api/v1/organization/webhook').then((r) => r.status))).toBe(404)
    await until("the probe's 404 in the console", async () => (b.problems.length > before ? true : undefined))
    b.problems.splice(before)
    await b.screenshot('18-settings-webhook-removed')
    // The refused URLs' 400s are the network errors this test expects.
    expect(b.problems.filter((p) => !/status of 400 .*\/api\/v1\/organization\/webhook\)$/.test(p))).toEqual([])
  }, 30_000)

  test('forgot password: the mailed link opens the reset form, and the new password signs in', async () => {
    const b = await newPage()
    const { page } = b
    await page.goto('/#/signin')
    await page.getByRole('link', { name: 'Forgot your password?' }).click()
    await page.getByLabel('Email', { exact: true }).fill(email)
    await page.getByRole('button', { name: 'Mail me a reset link' }).click()
    await page.getByText(`If an account exists for ${email}`).waitFor()
    await b.screenshot('19-forgot-password')

    const mail = await smtp.waitFor(email, /reset/i)
    const link = /http:\/\/\S+/.exec(mail.text)?.[0] ?? ''
    expect(link).toMatch(/^http:\/\/dbm-dashboard\.test\/reset-password\?token=[A-Za-z0-9_-]{43}$/)
    // The mailed /reset-password link redirects into the dashboard, the token in the fragment.
    await page.goto(server.base + link.slice(publicUrl.length))
    await page.waitForURL(/\/#\/reset\?token=/)
    await page.getByLabel('New password').fill('a brand new passphrase')
    await page.getByLabel('Repeat it').fill('a different passphrase')
    await page.getByRole('button', { name: 'Set the new password' }).click()
    await page.getByText('the two passwords differ').waitFor()
    await page.getByLabel('Repeat it').fill('a brand new passphrase')
    await page.getByRole('button', { name: 'Set the new password' }).click()
    await page.getByText('Your password is changed').waitFor()
    await b.screenshot('20-password-reset')

    await page.getByRole('link', { name: 'Sign in with the new password' }).click()
    await page.getByLabel('Email', { exact: true }).fill(email)
    await page.getByLabel('Password', { exact: true }).fill(password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByText('invalid email or password').waitFor()
    await page.getByLabel('Password', { exact: true }).fill('a brand new passphrase')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(/#\/databases$/)
    // The wrong password's 401 is the one network error this test expects.
    const unexpected = b.problems.filter((p) => !/status of 401 .*\/api\/v1\/auth\/login\)$/.test(p))
    expect(unexpected).toEqual([])
  }, 30_000)

  test('DBM_SIGNUP=closed: the first account signs up; afterwards the pages say sign-up is closed instead of offering a form', async () => {
    const closed = await startServe([binary], { dataDir: join(tmpRoot, 'closed'), env: { DBM_SIGNUP: 'closed' } })
    const b = await openPage(browser, { baseURL: closed.base })
    open.push(b)
    const { page } = b
    // A fresh server still takes its first account, through the form.
    await page.goto('/#/signup')
    await page.getByLabel('Your name').fill('First Admin')
    await page.getByLabel('Email', { exact: true }).fill('first@example.com')
    await page.getByLabel('Password', { exact: true }).fill('first admin passphrase')
    await page.getByLabel('Organization name').fill('Closed Co')
    await page.getByRole('button', { name: 'Create account' }).click()
    await page.waitForURL(/#\/databases$/)

    const visitor = await openPage(browser, { baseURL: closed.base })
    open.push(visitor)
    await visitor.page.goto('/#/signin')
    await visitor.page.getByText('Sign-up is closed on this server: ask its administrator for an account.').waitFor()
    expect(await visitor.page.getByRole('link', { name: 'Create one' }).count()).toBe(0)
    await visitor.page.goto('/#/signup')
    await visitor.page.getByText('Sign-up is closed on this server: ask its administrator for an account.').waitFor()
    expect(await visitor.page.getByRole('button', { name: 'Create account' }).count()).toBe(0)
    await visitor.screenshot('21-signup-closed')
    expect([...b.problems, ...visitor.problems]).toEqual([])
  }, 30_000)
})
