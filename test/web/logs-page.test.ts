// The Logs page in a real browser (Debian's Chromium through playwright-core) against a test server fed
// log_events sections as the agent sends them: the kinds table counts every entry (those the agent
// counted but did not send whole included), the list shows entries newest first with hostile texts as
// text (markup, quotes, a newline, a bidi override: no element made from them, no script run), an entry
// opens to its fields with the links where it leads (a lock wait to the lock chains at that moment, an
// autovacuum run to its table), and a kind in the table filters the list. No console or page error.
// Issue 25's new user: the lock link opens the first session snapshot at or after the wait's entry (the
// one showing it) and names the relation the log gives as an OID; the kinds table and histogram take the
// page's filters and say so; an archive failure logged at LOG counts as an error; at 390 px the entries
// collapse (time and kind over the message) and nothing runs off the screen.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import type { ActiveQuery, LockEntry, LogEvent, LogEventsSection } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import { type BrowserPage, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const HOSTILE = `relation "<img src=x onerror=\\"window.__xss=1\\">" does not exist\n\u202Egnp.exe`
const MINUTE = 60_000

let server: TestServer
let account: Account
let key: string
let browser: Browser
let dbId = ''
const now = Date.now()
const t0 = Math.floor((now - 20 * MINUTE) / MINUTE) * MINUTE

const entry = (
  ts: number,
  kind: string,
  severity: string,
  message: string,
  more: Partial<LogEvent> = {},
): LogEvent => ({
  ts,
  kind,
  severity,
  sqlstate: null,
  message,
  fingerprint: message,
  pid: 4242,
  user: 'app',
  database: 'shop',
  application: null,
  client: '10.0.0.7',
  detail: null,
  statement: null,
  query_id: null,
  fields: {},
  ...more,
})

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  ;({ account, key } = await agentAccount(server))
  const section = (entries: LogEvent[], dropped: number): LogEventsSection => {
    const counts = new Map<string, { minute: number; kind: string; severity: string; count: number }>()
    for (const e of entries) {
      const minute = Math.floor(e.ts / MINUTE) * MINUTE
      const k = `${minute}/${e.kind}/${e.severity}`
      const c = counts.get(k) ?? { minute, kind: e.kind, severity: e.severity, count: 0 }
      c.count++
      counts.set(k, c)
    }
    // the entries the agent counted but did not send: three more errors in the first minute
    if (dropped) {
      const minute = Math.floor(entries[0]!.ts / MINUTE) * MINUTE
      counts.get(`${minute}/error/error`)!.count += dropped
    }
    return { source: 'files', entries, counts: [...counts.values()], dropped, bytes_read: 1000, backlog_bytes: 0 }
  }
  const waiting: ActiveQuery = {
    pid: 5151,
    query_text: 'LOCK TABLE av IN SHARE UPDATE EXCLUSIVE MODE',
    state: 'active',
    wait_event_type: 'Lock',
    wait_event: 'relation',
    duration_ms: 3000,
    blocking_pids: [5150],
    user: 'app',
    application_name: 'psql',
    client_addr: null,
    database: 'shop',
    backend_type: 'client backend',
    xact_start: null,
  }
  const waitLock: LockEntry = {
    pid: 5151,
    lock_type: 'relation',
    mode: 'ShareUpdateExclusiveLock',
    relation_name: 'public.av',
    granted: false,
    blocked_by_pid: 5150,
    duration_ms: 3000,
    query_text: waiting.query_text,
  }
  const batches = [
    // a session snapshot 8 s before the wait's entry, with nobody waiting
    pgBatch('logs-page', t0 + 7 * MINUTE - 8_000, {
      activity: [{ ...waiting, wait_event_type: null, wait_event: null, blocking_pids: [] }],
      locks: [],
    }),
    pgBatch('logs-page', t0 + MINUTE, {
      log_events: section(
        [
          entry(t0 + 10_000, 'error', 'error', HOSTILE, { sqlstate: '42P01', statement: 'SELECT * FROM "<b>x</b>"' }),
          entry(t0 + 20_000, 'auth_failed', 'fatal', 'password authentication failed for user "app"', {
            sqlstate: '28P01',
            fields: { method: 'password' },
          }),
        ],
        3,
      ),
    }),
    pgBatch('logs-page', t0 + 6 * MINUTE, {
      log_events: section(
        [
          entry(
            t0 + 5 * MINUTE,
            'lock_wait',
            'log',
            'process 4242 still waiting for ShareLock on transaction 771 after 1000.070 ms',
            {
              fields: { mode: 'ShareLock', lock: 'transaction 771', wait_ms: 1000.07, holders: [4243] },
            },
          ),
          entry(
            t0 + 5 * MINUTE + 30_000,
            'autovacuum',
            'log',
            'automatic vacuum of table "shop.public.orders": index scans: 1',
            {
              fields: { table: 'shop.public.orders', elapsed_ms: 1520, tuples_removed: 300000 },
            },
          ),
        ],
        0,
      ),
    }),
    // the wait's entry, logged after deadlock_timeout, and the snapshot 5 s later that shows it
    pgBatch('logs-page', t0 + 7 * MINUTE + 5_000, {
      activity: [waiting],
      locks: [waitLock],
      log_events: section(
        [
          entry(
            t0 + 7 * MINUTE,
            'lock_wait',
            'log',
            'process 5151 still waiting for ShareUpdateExclusiveLock on relation 16456 of database 16384 after 1000.1 ms',
            {
              pid: 5151,
              fields: {
                mode: 'ShareUpdateExclusiveLock',
                lock: 'relation 16456 of database 16384',
                relation: 16456,
                wait_ms: 1000.1,
                holders: [5150],
              },
            },
          ),
          entry(t0 + 7 * MINUTE + 1_000, 'archive_failed', 'log', 'archive command failed with exit code 7', {
            pid: 77,
            fields: { exit_code: 7 },
          }),
        ],
        0,
      ),
    }),
  ]
  for (const b of batches) {
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: b })
    if (res.status !== 200) throw new Error(`ingest: ${res.status} ${JSON.stringify(res.body)}`)
    dbId = res.body.database_id
  }
}, 60_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
})

async function signedIn(): Promise<BrowserPage> {
  const p = await openPage(browser, { baseURL: server.base })
  await signInThroughForm(p.page, account)
  return p
}

describe('logs page', () => {
  test('counts every entry, lists them as text, opens one to its fields and links, filters by kind', async () => {
    const p = await signedIn()
    try {
      const { page } = p
      await page.goto(`/#/databases/${dbId}/logs?range=1h`)
      await page.locator('table.log-table tr[data-kind="autovacuum"]').waitFor({ timeout: 30_000 })
      expect(await page.locator('[data-filtered-counts]').count()).toBe(0)
      // the kinds table: the error's count includes the three the agent did not send whole
      const kinds = await page
        .locator('table.log-kinds tbody tr')
        .evaluateAll((trs) => trs.map((tr) => [tr.getAttribute('data-kind'), tr.querySelector('td.num')?.textContent]))
      expect(kinds).toEqual([
        ['error', '4'],
        ['lock_wait', '2'],
        ['archive_failed', '1'],
        ['auth_failed', '1'],
        ['autovacuum', '1'],
      ])
      expect(await page.getByText('3 entries of this range were counted by the agent but not sent whole').count()).toBe(
        1,
      )
      // newest first; the hostile message is text
      const order = await page
        .locator('table.log-table tbody tr')
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-kind')))
      expect(order).toEqual(['archive_failed', 'lock_wait', 'autovacuum', 'lock_wait', 'auth_failed', 'error'])
      expect(await page.locator('table.log-table img, table.log-table b').count()).toBe(0)
      expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined()
      const message = await page.locator('table.log-table tr[data-kind="error"] .log-message').textContent()
      expect(message).toContain('42P01')
      expect(message).toContain('<img src=x onerror=')
      // the bidi override is shown, not applied
      expect(message).not.toContain('\u202E')

      // the lock wait naming a relation by OID: the link opens the snapshot after it, which names the table
      const relationWait = page.locator('table.log-table tr[data-kind="lock_wait"]').first()
      await relationWait.locator('.log-message').click()
      await relationWait.locator('[data-relation-name]').waitFor()
      expect(await relationWait.getByRole('link', { name: 'Locks at that moment' }).getAttribute('href')).toBe(
        `#/databases/${dbId}/locks?at=${t0 + 7 * MINUTE + 5_000}`,
      )
      expect(await relationWait.locator('[data-relation-name]').textContent()).toContain('relation 16456 is public.av')
      await relationWait.locator('.log-message').click()

      // the lock wait opens to its fields and links to the lock chains at that moment
      await page.locator('table.log-table tr[data-kind="lock_wait"]').nth(1).locator('.log-message').click()
      const lockRow = page.locator('table.log-table tr[data-kind="lock_wait"]').nth(1)
      expect(await lockRow.locator('dl.log-fields dt').allTextContents()).toEqual([
        'mode',
        'lock',
        'wait ms',
        'holders',
      ])
      // the first snapshot at or after it
      expect(await lockRow.getByRole('link', { name: 'Locks at that moment' }).getAttribute('href')).toBe(
        `#/databases/${dbId}/locks?at=${t0 + 7 * MINUTE - 8_000}`,
      )
      await page.locator('tr[data-kind="autovacuum"] .log-message').click()
      expect(
        await page.locator('tr[data-kind="autovacuum"]').getByRole('link', { name: 'Table' }).getAttribute('href'),
      ).toMatch(new RegExp(`^#/databases/${dbId}/tables/${encodeURIComponent('public/orders').replace(/%/g, '%')}`))
      await p.screenshot('logs-page')

      // a kind in the table filters the list
      await page.locator('table.log-kinds tr[data-kind="auth_failed"] a').click()
      await page.waitForURL(/kind=auth_failed/)
      await page.waitForFunction(() => document.querySelectorAll('table.log-table tbody tr').length === 1)
      expect(await page.locator('table.log-table tbody tr').getAttribute('data-kind')).toBe('auth_failed')

      // errors and worse: the archive failure logged at LOG is among them, in the list and in the counts, which say they are filtered
      await page.goto(`/#/databases/${dbId}/logs?range=1h&severity=error`)
      await page.locator('[data-filtered-counts]').waitFor()
      await page.waitForFunction(() => document.querySelectorAll('table.log-kinds tbody tr').length === 3)
      const filtered = await page
        .locator('table.log-kinds tbody tr')
        .evaluateAll((trs) => trs.map((tr) => [tr.getAttribute('data-kind'), tr.querySelector('td.num')?.textContent]))
      expect(filtered).toEqual([
        ['error', '4'],
        ['archive_failed', '1'],
        ['auth_failed', '1'],
      ])
      expect(await page.locator('[data-filtered-counts]').textContent()).toBe(
        'Counts of the filtered view (errors and worse).',
      )
      const archive = page.locator('table.log-table tr[data-kind="archive_failed"]')
      expect((await archive.locator('td').nth(1).textContent())?.replace(/\s+/g, ' ').trim()).toBe(
        'error (logged as log) Archive command failed',
      )

      // a phone: time and kind above the message, nothing wider than the screen
      await page.setViewportSize({ width: 390, height: 800 })
      await page.goto(`/#/databases/${dbId}/logs?range=1h`)
      await page.locator('table.log-table tr[data-kind="autovacuum"]').waitFor()
      const layout = await page
        .locator('table.log-table tr[data-kind="lock_wait"]')
        .first()
        .evaluate((tr) => {
          const [time, , message] = [...tr.querySelectorAll('td')].map((td) => td.getBoundingClientRect())
          return {
            messageBelow: message!.top >= time!.bottom - 1,
            messageRight: message!.right,
            rowHeight: tr.getBoundingClientRect().height,
          }
        })
      expect(layout.messageBelow).toBe(true)
      expect(layout.messageRight).toBeLessThanOrEqual(390)
      expect(layout.rowHeight).toBeLessThan(200)
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
      await p.screenshot('logs-page-390')
      await page.setViewportSize({ width: 1280, height: 900 })

      // a week's window, counted in whole hours past 48 hours: the server picks the bucket
      await page.goto(`/#/databases/${dbId}/logs?range=7d`)
      await page.locator('table.log-kinds tr[data-kind="error"]').waitFor()
      expect(await page.locator('table.log-kinds tr[data-kind="error"] td.num').textContent()).toBe('4')
      p.assertNoErrors()
    } finally {
      await p.close()
    }
  })
})
