// The Settings page's doctor thresholds in a real browser (Debian's Chromium): an owner sees the rules
// where operators disagree open with their defaults, sets a prepared transaction's warning age and a
// superuser allowlist, and saves (the API then holds them); Reset takes one back to its default. A
// 390 px screen holds it without sideways scrolling. (A member's read-only view: members.test.ts.)
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { pgBatch } from '../support/batches.ts'
import { horizontalOverflow, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

let server: TestServer
let account: Account
let browser: Browser
let dbId = ''

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  let key: string
  ;({ account, key } = await agentAccount(server))
  const res = await server.call('POST', '/api/v1/ingest', {
    apiKey: key,
    body: pgBatch('thresholds-page', Date.now() - 5_000),
  })
  if (res.status !== 200) throw new Error(`ingest: ${res.status} ${JSON.stringify(res.body)}`)
  dbId = res.body.database_id
}, 60_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
})

const stored = async () => {
  const res = await server.call('GET', `/api/v1/databases/${dbId}/thresholds`, { token: account.token })
  return new Map(
    (res.body.rules as any[]).flatMap((r) => (r.thresholds as any[]).map((t) => [`${r.rule}.${t.key}`, t])),
  )
}

test('an owner sets and resets thresholds from the Settings page; it fits 390 px', async () => {
  const p = await openPage(browser, { baseURL: server.base, viewport: { width: 390, height: 844 } })
  try {
    const { page } = p
    await signInThroughForm(page, account)
    await page.goto(`/#/databases/${dbId}/settings`)
    const prepared = page.locator('details[data-rule="pg_prepared_transactions"]')
    const warning = prepared.getByLabel('pg_prepared_transactions warning_s')
    await warning.waitFor()
    expect(await prepared.getAttribute('open')).not.toBeNull()
    expect(await page.locator('details[data-rule="pg_dead_tuples"]').getAttribute('open')).toBeNull()
    expect(await prepared.locator('tr[data-key="warning_s"] td').nth(1).textContent()).toBe('300')
    expect(await warning.inputValue()).toBe('300')

    await warning.fill('900')
    await prepared.getByRole('button', { name: 'Save pg_prepared_transactions' }).click()
    await prepared.getByRole('status').filter({ hasText: 'Saved' }).waitFor()
    const superusers = page.locator('details[data-rule="pg_superusers"]')
    await superusers.getByLabel('pg_superusers allowed_names').fill('dba\n"Ops" Admin\n')
    await superusers.getByRole('button', { name: 'Save pg_superusers' }).click()
    await superusers.locator('.badge').waitFor()
    let now = await stored()
    expect(now.get('pg_prepared_transactions.warning_s')).toMatchObject({ value: 900, overridden: true })
    expect(now.get('pg_superusers.allowed_names')).toMatchObject({ value: ['dba', '"Ops" Admin'], overridden: true })
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0)

    await prepared.getByRole('button', { name: 'Reset pg_prepared_transactions warning_s to its default' }).click()
    await prepared.locator('.badge').waitFor({ state: 'detached' })
    expect(await warning.inputValue()).toBe('300')
    now = await stored()
    expect(now.get('pg_prepared_transactions.warning_s')).toMatchObject({ value: 300, overridden: false })
    await p.screenshot('settings-thresholds')
  } finally {
    await p.close()
  }
})
