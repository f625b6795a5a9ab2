// The Active and Locks pages' session history in a real browser (Debian's Chromium through
// playwright-core), fed by the real agent watching a real PostgreSQL 17. A lock chain where one session
// waits for two pids (the root idle in its transaction, a row waiter, and an ALTER TABLE waiting for
// both): the live blocking tree draws the session blocked by two pids once, under the first pid
// PostgreSQL names, marked "also blocked by" the other. Once the chain has ended, the time slider steps
// back to a snapshot with a blocked session and the tree is drawn from it, again once; the Locks page
// lists the chain among the past lock chains with its root and members, and shows its last snapshot's
// locks. Screenshots go to test-artifacts/screenshots/ (git-ignored); any console or page error fails.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import postgres from 'postgres'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type BrowserPage, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

let pg: PostgresServer
let dsn: string
let setup: postgres.Sql
let dir: string
let rig: AgentRig
let browser: Browser
let b: BrowserPage | undefined

beforeAll(async () => {
  const [server, chromium] = await Promise.all([startPostgres(17), launchBrowser()])
  pg = server
  browser = chromium
  dsn = await pg.freshDatabase()
  setup = postgres(dsn, { max: 1, onnotice: () => {} })
  await setup`CREATE TABLE accounts (id int PRIMARY KEY, balance int)`
  await setup`INSERT INTO accounts VALUES (1, 100)`
  dir = mkdtempSync(join(tmpdir(), 'dbm-history-browser-'))
  rig = await startAgentRig(dsn, 'bank', dir)
}, 60_000)

afterAll(async () => {
  await b?.close().catch(() => {})
  await browser?.close()
  await rig?.stop()
  await setup?.end()
  await pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const signIn = (page: Page) => signInThroughForm(page, rig.account)

/** The pids drawn in the blocking tree, one entry per node drawn. */
const drawnPids = (page: Page) =>
  page.locator('.chain-tree li[data-pid]').evaluateAll((nodes) => nodes.map((n) => Number(n.getAttribute('data-pid'))))

describe('session history on the Active and Locks pages (PostgreSQL 17, Chromium)', () => {
  test('a session blocked by two pids is drawn once, live and in a past snapshot; the chain is listed after it ended', async () => {
    const connect = (application: string) =>
      postgres(dsn, { max: 1, onnotice: () => {}, connection: { application_name: application } })
    const root = connect('dbm-root')
    const waiter = connect('dbm-waiter')
    const locker = connect('dbm-locker')
    try {
      const pidOf = async (sql: postgres.Sql) => (await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
      const [rootPid, waiterPid, lockerPid] = [await pidOf(root), await pidOf(waiter), await pidOf(locker)]
      await root.unsafe('BEGIN')
      await root.unsafe('UPDATE accounts SET balance = balance - 10 WHERE id = 1')
      const waiting = waiter.unsafe('UPDATE accounts SET balance = balance + 10 WHERE id = 1').execute()
      waiting.catch(() => {})
      await until('the waiter to wait', async () =>
        (await setup`SELECT 1 FROM pg_locks WHERE pid = ${waiterPid} AND NOT granted`).length > 0 ? true : undefined,
      )
      const locking = locker.unsafe('ALTER TABLE accounts ADD COLUMN note text').execute()
      locking.catch(() => {})
      const blocking = await until('the locker to wait for both', async () => {
        const rows = await setup<{ blocking: number[] }[]>`SELECT pg_blocking_pids(${lockerPid}) AS blocking`
        return rows[0]!.blocking.length === 2 ? rows[0]!.blocking : undefined
      })
      expect([...blocking].sort((x, y) => x - y)).toEqual([rootPid, waiterPid].sort((x, y) => x - y))
      const [first, other] = blocking as [number, number]
      await until('the agent to sample the chain', async () =>
        (await rig.api('/active')).some((s: any) => s.pid === lockerPid && s.blocking_pids.length === 2)
          ? true
          : undefined,
      )

      b = await openPage(browser, { baseURL: rig.server.base })
      const { page } = b
      await signIn(page)
      await page.goto(`/#/databases/${rig.dbId}/active`)
      await page.locator('[data-stream-state="live"]').waitFor({ timeout: 20_000 })
      await page.locator(`.chain-tree li[data-pid="${lockerPid}"]`).waitFor()
      // Live: the locker once, under the first pid PostgreSQL names, "also blocked by" the other.
      const live = await drawnPids(page)
      expect(live.filter((p) => p === lockerPid)).toEqual([lockerPid])
      expect(live.sort((x, y) => x - y)).toEqual([rootPid, waiterPid, lockerPid].sort((x, y) => x - y))
      const node = page.locator(`.chain-tree li[data-pid="${first}"] li[data-pid="${lockerPid}"]`)
      expect(await node.locator('.also-blocked').first().textContent()).toBe(`also blocked by pid ${other}`)
      expect(await page.locator(`.chain-tree li[data-pid="${rootPid}"] > .chain-node`).textContent()).toContain(
        'blocks 2',
      )
      await b.screenshot('history-01-active-live-chain')

      // End the chain and wait for a snapshot without it.
      await root.unsafe('ROLLBACK')
      await waiting
      await locking
      await until('the chain to end in the history', async () => {
        const chains = await rig.api(`/locks/chains?since=${new Date(Date.now() - 600_000).toISOString()}`)
        return chains.some((c: any) => c.root.pid === rootPid && !c.ongoing) ? true : undefined
      })
      await page.locator('.chain-tree').waitFor({ state: 'detached', timeout: 20_000 })

      // The slider: back to the last snapshot with a blocked session, the tree drawn from it, once.
      const history = page.getByRole('region', { name: 'Session history' })
      await history.getByRole('button', { name: 'Previous with a blocked session' }).click()
      await page.waitForURL(/\/active\?at=\d+$/)
      await page.locator('[data-stream-state="history"]').waitFor()
      await page.locator(`.chain-tree li[data-pid="${lockerPid}"]`).waitFor()
      const past = await drawnPids(page)
      expect(past.sort((x, y) => x - y)).toEqual([rootPid, waiterPid, lockerPid].sort((x, y) => x - y))
      expect(
        await page
          .locator(`.chain-tree li[data-pid="${first}"] li[data-pid="${lockerPid}"] .also-blocked`)
          .first()
          .textContent(),
      ).toBe(`also blocked by pid ${other}`)
      expect(await history.textContent()).toContain('2 waiting for a lock')
      const at = Number(new URL(page.url().replace('#/', '')).searchParams.get('at'))
      const snapshot = await rig.api(`/active?at=${at}`)
      expect(snapshot.find((s: any) => s.pid === lockerPid).blocking_pids.length).toBe(2)
      await b.screenshot('history-02-active-past-snapshot')
      // "Later" steps forward; "Live" goes back to the stream.
      await history.getByRole('button', { name: 'Live' }).click()
      await page.locator('[data-stream-state="live"]').waitFor()
      expect(page.url()).not.toContain('at=')

      // Locks: the past chain with its root and members; its last snapshot's locks from the list.
      await page.goto(`/#/databases/${rig.dbId}/locks`)
      const item = page.locator('.chain-item', { hasText: `root pid ${rootPid}` })
      await item.waitFor()
      expect(await item.textContent()).toContain('ended')
      expect(await item.textContent()).toContain('blocked 2 sessions')
      await item.locator('summary').click()
      const members = await item.locator('details li').allTextContents()
      expect(members.length).toBe(2)
      expect(members.find((m) => m.includes(`pid ${lockerPid}`))).toContain('dbm-locker')
      expect(members.find((m) => m.includes(`pid ${waiterPid}`))).toContain(`blocked by pid ${rootPid}`)
      await b.screenshot('history-03-locks-past-chains')
      await item.getByRole('button', { name: 'Show its last snapshot' }).click()
      await page.waitForURL(/\/locks\?at=\d+$/)
      await page.getByRole('table').locator('tbody tr.blocked-row').first().waitFor()
      expect(await page.locator('main').textContent()).toContain('2 waiting for a lock')
      await b.screenshot('history-04-locks-past-snapshot')
      b.assertNoErrors()
    } finally {
      await root.end()
      await waiter.end()
      await locker.end()
    }
  }, 120_000)
})
