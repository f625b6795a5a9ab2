// The dashboard's action channel in a real browser (Debian's Chromium through playwright-core), against
// the real agent (allow_actions: cancel and explain) watching a real PostgreSQL 17: an owner cancels a
// pg_sleep session from the Active page (the button, shown whole on a 1280 px screen, the confirmation
// naming the session, the outcome the agent reports) and that backend's statement ends; a member sees no
// Cancel or Terminate button; the statement page's Explain form, given its one parameter, shows the plan
// the agent made with it bound.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import postgres from 'postgres'
import { type AgentRig, startAgentRig, waitForBaseline } from '../support/agent.ts'
import { type BrowserPage, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type PostgresServer, sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { uniqueIp } from '../support/server.ts'
import { until } from '../support/wait.ts'

let pg: PostgresServer
let dsn: string
let dir: string
let rig: AgentRig
let browser: Browser
const pages: BrowserPage[] = []

beforeAll(async () => {
  const [server, chromium] = await Promise.all([sharedPostgres(17), launchBrowser()])
  pg = server
  browser = chromium
  dsn = await statementsDatabase(pg, 1000)
  dir = mkdtempSync(join(tmpdir(), 'dbm-actions-browser-'))
  rig = await startAgentRig(dsn, 'shop', dir, undefined, '    allow_actions: [cancel, explain]\n')
}, 60_000)

afterAll(async () => {
  for (const p of pages) await p.close().catch(() => {})
  await browser?.close()
  await rig?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

async function signedIn(account: { email: string; password: string }): Promise<BrowserPage> {
  const b = await openPage(browser, { baseURL: rig.server.base })
  pages.push(b)
  await signInThroughForm(b.page, account)
  return b
}

/** A session sleeping in pg_sleep under application `app`, once the agent reported it on /active. */
async function sleeper(app: string) {
  const conn = postgres(dsn, { max: 1, onnotice: () => {}, connection: { application_name: app } })
  const running = conn`SELECT pg_sleep(60)`.then(
    () => 'finished',
    (e) => (e as { code?: string }).code ?? 'error',
  )
  const session = await until(`the agent to report ${app}`, async () =>
    ((await rig.api('/active')) as any[]).find((s) => s.application_name === app && s.state === 'active'),
  )
  return { conn, running, pid: session.pid as number }
}

describe('actions in the dashboard (PostgreSQL 17, the real agent, Chromium)', () => {
  test('an owner cancels a statement from Active: confirmation, outcome, its statement ends', async () => {
    const s = await sleeper('victim-ui')
    try {
      const { page, assertNoErrors } = await signedIn(rig.account)
      await page.goto(`/#/databases/${rig.dbId}/active`)
      const row = page.locator('tbody tr', { hasText: 'victim-ui' })
      // At 1280 px both buttons show whole without scrolling sideways: inside the screen and the table's box.
      await row.getByRole('button', { name: 'Cancel' }).waitFor()
      expect(page.viewportSize()?.width).toBe(1280)
      const outside = await row.locator('[data-kill]').evaluateAll((buttons) => {
        const wrap = buttons[0]!.closest('.table-wrap')!.getBoundingClientRect()
        return buttons
          .map((b) => ({ kind: b.getAttribute('data-kill'), box: b.getBoundingClientRect() }))
          .filter(({ box }) => box.left < Math.max(0, wrap.left) || box.right > Math.min(innerWidth, wrap.right))
          .map(({ kind, box }) => `${kind} at ${Math.round(box.left)}-${Math.round(box.right)} px`)
      })
      expect([await row.locator('[data-kill]').count(), outside]).toEqual([2, []])
      await row.getByRole('button', { name: 'Cancel' }).click()
      const panel = page.locator('[data-kill-panel="cancel"]')
      expect(await panel.getByRole('heading').textContent()).toBe(`Cancel the statement of pid ${s.pid}?`)
      expect(await panel.locator('dd').allTextContents()).toEqual(['postgres', 'victim-ui', 'SELECT pg_sleep(60)'])
      await panel.getByRole('button', { name: 'Cancel the statement' }).click()
      await panel.locator('[data-kill-outcome="done"]').waitFor()
      expect(await panel.getByRole('status').textContent()).toBe('Done: the backend was signalled.')
      // The statement ended with "canceling statement due to user request".
      expect(await s.running).toBe('57014')
      assertNoErrors()
    } finally {
      await s.conn.end({ timeout: 0 })
    }
  }, 60_000)

  test('a member sees the sessions, and no Cancel or Terminate button', async () => {
    const email = `member-${Math.random().toString(36).slice(2, 9)}@example.com`
    const invite = await rig.server.call('POST', '/api/v1/organization/invites', {
      token: rig.account.token,
      body: { email, role: 'member' },
    })
    expect(invite.status).toBe(201)
    await rig.server.deps.mailer.idle()
    const token = new URL(rig.server.mailLink(email, /invited/)!).searchParams.get('token')
    const password = 'member password 1'
    const joined = await rig.server.call('POST', '/api/v1/auth/accept-invite', {
      ip: uniqueIp(),
      body: { token, name: 'member', password },
    })
    expect(joined.status).toBe(201)
    const s = await sleeper('seen-by-member')
    try {
      const { page, assertNoErrors } = await signedIn({ email, password })
      await page.goto(`/#/databases/${rig.dbId}/active`)
      await page.locator('tbody tr', { hasText: 'seen-by-member' }).waitFor()
      expect(await page.locator('main [data-kill]').count()).toBe(0)
      expect(await page.getByRole('columnheader', { name: 'Actions' }).count()).toBe(0)
      assertNoErrors()
    } finally {
      await s.conn.end({ timeout: 0 })
    }
  }, 60_000)

  test('Explain with one parameter shows the plan the agent made with the value bound', async () => {
    await waitForBaseline(rig.agent, 'shop')
    const app = postgres(dsn, { max: 1, onnotice: () => {} })
    try {
      await app`SELECT id FROM t WHERE id = ${42}`
    } finally {
      await app.end()
    }
    const statement = await until('the statement on the Statements page', async () =>
      ((await rig.api('/queries?limit=100')) as any[]).find((q) => q.query_text === 'SELECT id FROM t WHERE id = $1'),
    )
    const { page, assertNoErrors } = await signedIn(rig.account)
    await page.goto(`/#/databases/${rig.dbId}/queries/${encodeURIComponent(statement.query_hash)}`)
    const form = page.getByRole('region', { name: 'Explain with parameters' })
    await form.locator('[data-parameter="1"]').fill('7')
    expect(await form.locator('[data-parameter]').count()).toBe(1)
    await form.getByRole('button', { name: 'Explain' }).click()
    const plan = form.locator('[data-explain-outcome="done"]')
    await plan.waitFor()
    expect(await plan.textContent()).toContain('Index Only Scan')
    expect(await plan.textContent()).toContain('(id = 7)')
    assertNoErrors()
  }, 60_000)
})
