// The Connections and Maintenance tabs in headless Chromium against the app from source: what a batch
// carrying connections, progress, bloat and NOT VALID constraints said is on the page as text (names
// with quotes, newlines, comment ends, markup and unicode shown as written, never as markup), bloat
// labelled an estimate, progress with its phase and percentage. Screenshots under
// test-artifacts/screenshots/; any console or page error fails the test.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { ACCESS_COOKIE, SESSION_HINT_COOKIE } from '../../src/server/auth/principal.ts'
import type { BloatEstimate, ConnectionGroup, InvalidConstraint, ProgressEntry } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import { type BrowserPage, launchBrowser, openPage } from '../support/browser.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const HOSTILE_APP = '<img src=x onerror=alert(1)> "app"\n*/ ü 🐘'
const SCHEMA = 'we"ird */ schéma'
const TABLE = "ta'ble <b>bold</b>"

let server: TestServer
let browser: Browser
let page: BrowserPage | undefined
let token = ''
let id = ''

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  const { account, key } = await agentAccount(server)
  token = account.token
  const connections: ConnectionGroup[] = [
    { database: 'shop', user: 'app_user', application_name: 'web', client_addr: '10.0.0.1', state: 'idle', count: 7 },
    {
      database: 'shop',
      user: 'app_user',
      application_name: HOSTILE_APP,
      client_addr: null,
      state: 'idle in transaction',
      count: 2,
    },
    { database: 'shop', user: 'report', application_name: 'web', client_addr: '10.0.0.2', state: 'active', count: 3 },
  ]
  const progress: ProgressEntry[] = [
    {
      pid: 4242,
      command: 'CREATE INDEX CONCURRENTLY',
      phase: 'building index: scanning table',
      schema_name: SCHEMA,
      table_name: TABLE,
      index_name: 'ix_new',
      unit: 'blocks',
      done: 250,
      total: 1000,
      percent: 25,
      started_at: Date.now() - 90_000,
    },
  ]
  const bloat: BloatEstimate[] = [
    {
      kind: 'table',
      schema_name: SCHEMA,
      table_name: TABLE,
      index_name: null,
      size_bytes: 400 * 1024 ** 2,
      expected_bytes: 100 * 1024 ** 2,
      bloat_bytes: 300 * 1024 ** 2,
      fillfactor: 100,
      live_rows: 1_000_000,
    },
  ]
  const constraints: InvalidConstraint[] = [
    {
      schema_name: SCHEMA,
      table_name: TABLE,
      constraint_name: 'ck "qty" */',
      constraint_type: 'check',
      definition: 'CHECK ((qty > 0)) NOT VALID',
    },
  ]
  const res = await server.call('POST', '/api/v1/ingest', {
    apiKey: key,
    body: pgBatch('shop', Date.now(), { connections, progress, bloat, invalid_constraints: constraints }),
  })
  expect(res.status).toBe(200)
  id = res.body.database_id
}, 60_000)

afterAll(async () => {
  await page?.close().catch(() => {})
  await browser?.close()
  await server?.stop()
})

test('Connections: counts by state, user, application and client, the hostile application name as text', async () => {
  page = await openPage(browser, { baseURL: server.base })
  // Signed in as the dashboard's sign-in leaves it: the access cookie and the hint that a session exists.
  await page.context.addCookies([
    { name: ACCESS_COOKIE, value: token, url: server.base },
    { name: SESSION_HINT_COOKIE, value: '1', url: server.base },
  ])
  const p = page.page
  await p.goto(`/#/databases/${id}/connections`)
  const byApp = p.getByRole('table', { name: 'Connections by application' })
  await byApp.waitFor()
  // The name's newline is white space in the cell, as HTML shows text.
  expect(await byApp.locator('tbody tr').allInnerTexts()).toEqual(['web\t10', `${HOSTILE_APP.replace('\n', ' ')}\t2`])
  // Shown as text: no element came from the name.
  expect(await p.locator('img').count()).toBe(0)
  const byState = p.getByRole('table', { name: 'Connections by state' })
  expect(await byState.locator('tbody tr').allInnerTexts()).toEqual(['idle\t7', 'active\t3', 'idle in transaction\t2'])
  const byClient = p.getByRole('table', { name: 'Connections by client address' })
  expect(await byClient.locator('tbody tr').allInnerTexts()).toEqual(['10.0.0.1\t7', '10.0.0.2\t3', 'local socket\t2'])
  expect(await p.getByText('client backends, every database').count()).toBe(1)
  await page.screenshot('parity-connections')
  page.assertNoErrors()
})

test('Maintenance: progress with phase and percentage, bloat labelled an estimate, the VALIDATE command to copy', async () => {
  const p = page!.page
  await p.goto(`/#/databases/${id}/maintenance`)
  const running = p.getByRole('table', { name: 'Maintenance running now' })
  await running.waitFor()
  const row = (await running.locator('tbody tr').allInnerTexts())[0]!
  expect(row).toContain('CREATE INDEX CONCURRENTLY')
  expect(row).toContain('building index: scanning table')
  expect(row).toContain(`${SCHEMA}.${TABLE}`)
  expect(row).toContain('250 of 1,000 blocks')
  expect(await running.getByRole('meter').getAttribute('aria-valuenow')).toBe('25')
  const bloat = p.getByRole('table', { name: 'Estimated bloat of tables and indexes' })
  expect((await bloat.locator('tbody tr').allInnerTexts())[0]).toContain('75 %')
  expect(await p.getByText('estimate', { exact: true }).count()).toBe(1)
  expect(await p.locator('text=Estimated from planner statistics').count()).toBe(1)
  expect(await p.locator('b').count()).toBe(0)
  expect(await p.locator('pre code').allInnerTexts()).toEqual([
    `ALTER TABLE "we""ird */ schéma"."ta'ble <b>bold</b>" VALIDATE CONSTRAINT "ck ""qty"" */";`,
  ])
  await page!.screenshot('parity-maintenance')
  page!.assertNoErrors()
})
