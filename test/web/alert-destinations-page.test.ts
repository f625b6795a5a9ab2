// The settings page's alert destinations in Chromium, at 1280 and 390 px: an owner adds a Slack
// destination pointed at a local receiver (Bun.serve on loopback, so the server allows internal
// addresses), sees it listed with its secret as a hint only and its name shown as text (markup in it is
// not markup), clicks "Send test" and the receiver gets the test alert and its resolution in Slack's
// format; then disables it and deletes it after the confirmation. Nothing overflows sideways and no
// console error is logged at either width. A member sees the list read-only: no form, no buttons.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { horizontalOverflow, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type Account, type TestServer, inviteMember, signup, startTestServer, verify } from '../support/server.ts'
import { startWebhookReceiver } from '../support/webhook.ts'

let server: TestServer
let browser: Browser
let receiver: ReturnType<typeof startWebhookReceiver>
let owner: Account

beforeAll(async () => {
  ;[server, browser] = await Promise.all([
    startTestServer('sqlite', { webhooks: { allowPrivate: true } }),
    launchBrowser(),
  ])
  receiver = startWebhookReceiver()
  owner = await signup(server)
})
afterAll(async () => {
  receiver?.stop()
  await browser?.close()
  await server?.stop()
})

for (const viewport of [
  { width: 1280, height: 900 },
  { width: 390, height: 844 },
]) {
  test(`an owner adds a Slack destination and sends it a test (${viewport.width} px)`, async () => {
    const tab = await openPage(browser, { baseURL: server.base, viewport })
    try {
      const page = tab.page
      await signInThroughForm(page, owner)
      await page.goto('/#/settings')
      await page.getByRole('heading', { name: 'Alert destinations' }).waitFor()
      const name = `<b>on-call</b> ${viewport.width}`
      const path = `/slack/T0/B${viewport.width}/xoxsecretWXYZ`
      await page.getByLabel('Kind').selectOption('slack')
      await page.getByLabel('Name').fill(name)
      await page.getByLabel('Incoming webhook URL').fill(`${receiver.url}${path}`)
      await page.getByRole('button', { name: 'Add destination' }).click()

      const item = page.locator('li[data-destination]').filter({ hasText: name })
      await item.waitFor()
      expect(await item.locator('[data-destination-name]').textContent()).toBe(name)
      expect(await item.locator('[data-destination-name] b').count()).toBe(0)
      expect(await item.locator('[data-destination-enabled]').textContent()).toBe('enabled')
      // The URL is Slack's credential: only its origin and last four characters are shown.
      const shown = (await item.locator('dd.mono').textContent()) ?? ''
      expect(shown).toBe(`secret ${receiver.url}/…WXYZ`)
      expect(await page.locator('body').textContent()).not.toContain('xoxsecret')
      expect(await item.locator('[data-destination-sent]').textContent()).toBe('0, last never')

      await item.getByRole('button', { name: 'Send test' }).click()
      await item.locator('[data-destination-test="delivered"]').waitFor()
      const got = receiver.received.filter((h) => h.path === path).map((h) => h.body.text)
      expect(got).toEqual([
        '[test] Alert: Test alert from dbm on dbm-test',
        '[test] Resolved: Test alert from dbm on dbm-test',
      ])
      expect(await horizontalOverflow(page)).toBe(0)
      await tab.screenshot(`alert-destinations-${viewport.width}`)

      // Off, then gone after the confirmation.
      await item.getByRole('button', { name: 'Disable' }).click()
      await item.locator('[data-destination-enabled="false"]').waitFor()
      await item.getByRole('button', { name: 'Delete', exact: true }).click()
      await item.getByRole('group', { name: 'Delete this destination?' }).waitFor()
      expect(await horizontalOverflow(page)).toBe(0)
      await item.getByRole('button', { name: 'Delete now' }).click()
      await item.waitFor({ state: 'detached' })
      await page.locator('[data-destinations-none]').waitFor()
      const listed = await server.call('GET', '/api/v1/organization/alert-destinations', { token: owner.token })
      expect(listed.body).toEqual([])
      tab.assertNoErrors()
    } finally {
      await tab.close()
    }
  })
}

test('a member sees the destinations read-only', async () => {
  const org = await signup(server)
  await server.deps.mailer.idle()
  await verify(server, org)
  const made = await server.call('POST', '/api/v1/organization/alert-destinations', {
    token: org.token,
    body: { kind: 'alertmanager', name: 'team alertmanager', url: `${receiver.url}/am` },
  })
  expect(made.status).toBe(201)
  const { email, password } = await inviteMember(server, org)

  const tab = await openPage(browser, { baseURL: server.base })
  try {
    const page = tab.page
    await signInThroughForm(page, { email, password })
    await page.goto('/#/settings')
    const item = page.locator(`li[data-destination="${made.body.id}"]`)
    await item.waitFor()
    expect(await item.locator('[data-destination-name]').textContent()).toBe('team alertmanager')
    expect(await item.locator('dd.mono').textContent()).toBe(`${receiver.url}/…`) // a member sees only the origin: a path may carry a token
    expect(await item.getByRole('button').count()).toBe(0)
    expect(await page.getByRole('button', { name: 'Add destination' }).count()).toBe(0)
    await page.locator('[data-destinations-owners-only]').waitFor()
    tab.assertNoErrors()
  } finally {
    await tab.close()
  }
})
