// A second person joins an organization, in Chromium: the owner invites an address from the settings
// page's Members section, the invitee opens the link (read from the server's log, as a self-hoster
// without SMTP would) in a browser of their own, chooses a name and password and lands on the
// organization's databases; as a member, their settings list the members read-only and show no webhook,
// API key or invitation controls, only the line that owners manage them, and a database's collection
// settings and doctor thresholds read-only with a note; the used link then says so. An owner creates keys with chosen scopes
// and sees each key's scopes and creator; demoting or removing another owner lists that owner's keys
// (name, prefix, scopes, last use) and says they will be revoked first, and afterwards they are.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { type BrowserPage, launchBrowser, openPage } from '../support/browser.ts'
import { type Account, type TestServer, signup, startTestServer, uniqueIp, verify } from '../support/server.ts'

let server: TestServer
let browser: Browser
let owner: Account
let databaseId: string
const pages: BrowserPage[] = []

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  owner = await signup(server, { org_name: 'Acme' })
  // Only verified organizations invite.
  await server.deps.mailer.idle()
  await verify(server, owner)
  const db = await server.call('POST', '/api/v1/databases', {
    token: owner.token,
    body: { name: 'orders', engine: 'postgres', host: 'db1.internal' },
  })
  expect(db.status).toBe(201)
  databaseId = db.body.id
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
  await o
    .locator(`tr[data-member="${owner.email}"] [data-role]`)
    .filter({ hasText: 'owner' })
    .waitFor({ timeout: 30_000 })
  await o.getByLabel('Email address').fill(invitee)
  await o.getByLabel('Role').selectOption('member')
  await o.getByRole('button', { name: 'Invite', exact: true }).click()
  await o
    .getByText(
      `Invitation sent to ${invitee} (by mail; without SMTP its link is in the server log); it works once, for 7 days.`,
    )
    .waitFor()
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
  // A database's collection settings: shown, read-only, with the note that owners change them.
  await i.goto(`/#/databases/${databaseId}/settings`)
  await i.locator('[data-owners-only]').filter({ hasText: 'change what is collected' }).waitFor({ timeout: 30_000 })
  expect(await i.locator('#poll-interval').isDisabled()).toBe(true)
  expect(await i.getByRole('button', { name: 'Save settings' }).count()).toBe(0)
  // The doctor's thresholds too: shown, read-only, without a save or reset.
  expect(await i.getByLabel('pg_prepared_transactions warning_s').isDisabled()).toBe(true)
  expect(await i.getByRole('button', { name: /^(Save|Reset) pg_/ }).count()).toBe(0)
  // Deleting it is an owner's too: a line says so, where an owner has the button.
  await i
    .locator('[data-owners-only-delete]')
    .filter({ hasText: "Only the organization's owners delete a database" })
    .waitFor()
  expect(await i.getByRole('button', { name: /Delete database/ }).count()).toBe(0)
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

/** A second owner of `owner`'s organization, joined through an invite (over the API), with API keys of their own. */
async function ownerWithKeys(
  name: string,
): Promise<{ account: { userId: string; token: string }; keys: { name: string; prefix: string; key: string }[] }> {
  const email = `${name.toLowerCase()}-${Math.random().toString(36).slice(2, 7)}@example.com`
  expect(
    (await server.call('POST', '/api/v1/organization/invites', { token: owner.token, body: { email, role: 'owner' } }))
      .status,
  ).toBe(201)
  await server.deps.mailer.idle()
  const token = new URL(server.mailLink(email, /invited/)!).searchParams.get('token')
  const joined = await server.call('POST', '/api/v1/auth/accept-invite', {
    ip: uniqueIp(),
    body: { token, name, password: 'owner password 1' },
  })
  expect(joined.status).toBe(201)
  const account = { userId: joined.body.user.id as string, token: joined.body.access_token as string }
  const agent = await server.call('POST', '/api/v1/api-keys', {
    token: account.token,
    body: { name: `${name} agent`, scopes: ['ingest', 'admin'] },
  })
  // a key made with their key: revoked with it
  const child = await server.call('POST', '/api/v1/api-keys', {
    apiKey: agent.body.key,
    body: { name: `${name} script`, scopes: ['admin'] },
  })
  expect([agent.status, child.status]).toEqual([201, 201])
  return { account, keys: [agent.body, child.body] }
}

test('keys have scopes and creators; demoting or removing an owner lists their keys first, then revokes them', async () => {
  const ownerPage = await openPage(browser, { baseURL: server.base })
  pages.push(ownerPage)
  const o = ownerPage.page
  await o.goto('/#/signin')
  await o.getByLabel('Email', { exact: true }).fill(owner.email)
  await o.getByLabel('Password', { exact: true }).fill(owner.password)
  await o.getByRole('button', { name: 'Sign in' }).click()
  await o.waitForURL(/#\/databases$/, { timeout: 30_000 })

  // A key with the default scopes but admin too: the list shows its scopes and creator.
  await o.goto('/#/settings/api-keys')
  await o.getByLabel('Key name').fill('deploy script')
  expect(
    await o
      .locator('input[name="scope"]:checked')
      .evaluateAll((inputs) => inputs.map((i) => (i as HTMLInputElement).value)),
  ).toEqual(['ingest', 'read'])
  await o.locator('input[name="scope"][value="admin"]').check()
  await o.locator('input[name="scope"][value="ingest"]').uncheck()
  await o.getByRole('button', { name: 'Create key' }).click()
  await o.locator('#new-api-key').waitFor()
  const row = o.locator('tr[data-key="deploy script"]')
  await row.waitFor()
  expect(await row.locator('[data-scopes]').textContent()).toBe('read, admin')
  expect(await row.locator('[data-created-by]').textContent()).toBe(`Test User (${owner.email})`)

  const bea = await ownerWithKeys('Bea')
  const cy = await ownerWithKeys('Cy')
  await o.goto('/#/settings')
  await o.locator('tr[data-member] [data-role]').filter({ hasText: 'owner' }).nth(2).waitFor({ timeout: 30_000 })

  // Demoting Bea: her two keys are listed, and said to be revoked, before anything happens.
  await o.getByRole('button', { name: 'Make Bea a member' }).click()
  const demotion = o.getByRole('group', { name: 'Make Bea a member?' })
  await demotion.locator('[data-keys-to-revoke]').waitFor()
  expect(await demotion.locator('[data-keys-to-revoke] > span').first().textContent()).toBe(
    'These 2 API keys they created will be revoked with it (agents using them are refused from their next request):',
  )
  // (the agent key was used to make the script's key: its last use shows)
  expect(await demotion.locator('[data-revoked-key]').allTextContents()).toEqual([
    expect.stringMatching(
      new RegExp(
        `^Bea agent ${bea.keys[0]!.prefix.replaceAll('.', '\\.')} — scopes ingest, admin, last used \\d+ s ago$`,
      ),
    ),
    `Bea script ${bea.keys[1]!.prefix} — scopes admin, last used never`,
  ])
  for (const key of bea.keys)
    expect((await server.call('GET', '/api/v1/api-keys', { apiKey: key.key })).status).toBe(200)
  await ownerPage.screenshot('members-demote-lists-keys')
  await demotion.getByRole('button', { name: 'Make member now' }).click()
  await o.locator('tr[data-member] [data-role]').filter({ hasText: 'member' }).nth(1).waitFor()
  for (const key of bea.keys)
    expect((await server.call('GET', '/api/v1/api-keys', { apiKey: key.key })).status).toBe(401)

  // Removing Cy: the same, and their keys are gone after it.
  await o.getByRole('button', { name: 'Remove Cy' }).click()
  const removal = o.getByRole('group', { name: 'Remove Cy?' })
  expect(await removal.locator('[data-revoked-key]').allTextContents()).toEqual([
    expect.stringMatching(
      new RegExp(
        `^Cy agent ${cy.keys[0]!.prefix.replaceAll('.', '\\.')} — scopes ingest, admin, last used \\d+ s ago$`,
      ),
    ),
    `Cy script ${cy.keys[1]!.prefix} — scopes admin, last used never`,
  ])
  await removal.getByRole('button', { name: 'Remove now' }).click()
  await removal.waitFor({ state: 'detached' })
  for (const key of cy.keys)
    expect((await server.call('GET', '/api/v1/databases', { apiKey: key.key })).status).toBe(401)
  // The keys page: theirs revoked, with no creator left for Cy's; the owner's own key untouched.
  await o.goto('/#/settings/api-keys')
  await o.locator('tr[data-key="Cy agent"]').filter({ hasText: 'revoked' }).waitFor()
  expect(await o.locator('tr[data-key="Cy agent"] [data-created-by]').textContent()).toBe('unknown or removed')
  expect(await o.locator('tr[data-key="deploy script"]').filter({ hasText: 'active' }).count()).toBe(1)
  ownerPage.assertNoErrors()
}, 120_000)
