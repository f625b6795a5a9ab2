// A second person joins an organization, in Chromium: the owner invites an address from the settings
// page's Members section, the invitee opens the link (read from the server's log, as a self-hoster
// without SMTP would) in a browser of their own, chooses a name and password and lands on the
// organization's databases; as a member, their settings list the members read-only and show no webhook,
// API key or invitation controls, only the line that owners manage them; the used link then says so.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { type BrowserPage, launchBrowser, openPage } from '../support/browser.ts'
import { type Account, type TestServer, signup, startTestServer, verify } from '../support/server.ts'

let server: TestServer
let browser: Browser
let owner: Account
const pages: BrowserPage[] = []

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  owner = await signup(server, { org_name: 'Acme' })
  // Only verified organizations invite.
  await server.deps.mailer.idle()
  await verify(server, owner)
  const db = await server.call('POST', '/api/v1/databases', { token: owner.token, body: { name: 'orders', engine: 'postgres', host: 'db1.internal' } })
  expect(db.status).toBe(201)
})

afterAll(async () => {
  for (const p of pages) await p.close().catch(() => {})
  await browser?.close()
  await server?.stop()
})

test('an owner invites, the invitee joins from the link and sees the databases; a member manages nothing', async () => {
  const invitee = `ann-${Math.random().toString(36).slice(2, 7)}@example.com`

  // The owner, signed in, invites from the settings page.
  const ownerPage = await openPage(browser, { baseURL: server.base })
  pages.push(ownerPage)
  const o = ownerPage.page
  await o.goto('/#/signin')
  await o.getByLabel('Email', { exact: true }).fill(owner.email)
  await o.getByLabel('Password', { exact: true }).fill(owner.password)
  await o.getByRole('button', { name: 'Sign in' }).click()
  await o.waitForURL(/#\/databases$/, { timeout: 30_000 })
  await o.goto('/#/settings')
  await o.locator(`tr[data-member="${owner.email}"] [data-role]`).filter({ hasText: 'owner' }).waitFor({ timeout: 30_000 })
  await o.getByLabel('Email address').fill(invitee)
  await o.getByLabel('Role').selectOption('member')
  await o.getByRole('button', { name: 'Invite', exact: true }).click()
  await o.getByText(`Invitation sent to ${invitee} (by mail; without SMTP its link is in the server log); it works once, for 7 days.`).waitFor()
  await o.locator(`tr[data-invite="${invitee}"]`).waitFor()
  expect(await o.locator(`tr[data-invite="${invitee}"] td`).first().textContent()).toBe(invitee)
  ownerPage.assertNoErrors()

  await server.deps.mailer.idle()
  const link = server.mailLink(invitee, /^You are invited to join an organization on dbm$/)!
  expect(link).toMatch(/^http:\/\/dbm\.test:8080\/accept-invite\?token=[A-Za-z0-9_-]{43}$/)

  // The invitee, in a browser of their own, opens the link (on this server) and joins.
  const inviteePage = await openPage(browser, { baseURL: server.base })
  pages.push(inviteePage)
  const i = inviteePage.page
  await i.goto(new URL(link).pathname + new URL(link).search)
  await i.getByRole('heading', { name: 'Join your team on dbm' }).waitFor({ timeout: 30_000 })
  expect(new URL(i.url()).hash).toBe(`#/accept-invite${new URL(link).search}`)
  await i.getByLabel('Your name').fill('Ann Member')
  await i.getByLabel('Password', { exact: true }).fill('ann password 1')
  await i.getByRole('button', { name: 'Join' }).click()
  await i.waitForURL(/#\/databases$/, { timeout: 30_000 })
  await i.locator('tr[data-database="orders"]').waitFor({ timeout: 30_000 })
  expect(await i.locator('header .who').textContent()).toBe(invitee)

  // Their settings: the members read-only, no webhook, API key or invitation controls.
  await i.goto('/#/settings')
  await i.locator(`tr[data-member="${invitee}"] [data-role]`).filter({ hasText: 'member' }).waitFor({ timeout: 30_000 })
  expect(await i.locator('tr[data-member]').count()).toBe(2)
  expect(await i.getByRole('button', { name: /Remove|Make owner|Make member|Leave/ }).count()).toBe(0)
  expect(await i.getByLabel('Webhook URL').count()).toBe(0)
  expect(await i.getByRole('button', { name: 'Invite', exact: true }).count()).toBe(0)
  expect(await i.locator('[data-owners-only]').allTextContents()).toEqual([
    "Only the organization's owners manage the webhook. Ask one of them (see the members on the settings page).",
    "Only the organization's owners manage members and invitations. Ask one of them (see the members on the settings page).",
  ])
  await i.goto('/#/settings/api-keys')
  await i.locator('[data-owners-only]').filter({ hasText: 'manage API keys' }).waitFor()
  expect(await i.getByRole('button', { name: 'Create key' }).count()).toBe(0)
  expect(await i.locator('table').count()).toBe(0)
  await inviteePage.screenshot('members-member-api-keys')
  inviteePage.assertNoErrors()

  // The owner sees them joined, and the invitation gone.
  await o.reload()
  await o.locator(`tr[data-member="${invitee}"] [data-role]`).filter({ hasText: 'member' }).waitFor({ timeout: 30_000 })
  await o.getByText('No pending invitations.').waitFor()
  await ownerPage.screenshot('members-owner-settings')

  // The link a second time: used, and the page says so.
  await i.goto(new URL(link).pathname + new URL(link).search)
  await i.getByLabel('Your name').fill('Someone Else')
  await i.getByLabel('Password', { exact: true }).fill('another password')
  await i.getByRole('button', { name: 'Join' }).click()
  await i.locator('[data-invite-invalid]').waitFor()
  expect(await i.locator('[data-invite-invalid]').textContent()).toBe(
    'This invitation link is invalid, already used, revoked or expired (links work once, for 7 days). Ask the owner who invited you for a new one.',
  )
  // Its one console error is the refused POST itself.
  expect(inviteePage.problems).toHaveLength(1)
  expect(inviteePage.problems[0]).toContain('status of 400')
  expect(inviteePage.problems[0]).toContain('/api/v1/auth/accept-invite')
}, 120_000)
