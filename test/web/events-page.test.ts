// The Events page and the chart marks in a real browser (Debian's Chromium through playwright-core)
// against a test server: a database whose batches made a restart, a setting change and tables and
// indexes with hostile names (markup, quotes, a newline, non-ASCII) lists each event with its names as
// text (no element made from them, no script run), filters by kind, and the overview's connections
// chart marks the restart and the setting change, in its text alternative and in a tooltip under the
// pointer. At 390 px the widest kind cell (a warning badge beside "cancel / terminate") keeps each label
// on one line inside its row, and nothing scrolls sideways. No console or page error. Screenshots under test-artifacts/screenshots/.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { INDEX_COUNTERS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_GAUGES } from '../../src/shared/families.ts'
import type { IndexStat, IngestBatch, TableStat } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import { type BrowserPage, horizontalOverflow, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const HOSTILE_TABLE = `<img src=x onerror="window.__xss=1">`
const HOSTILE_INDEX = `idx "q"\n<b>bold</b> ü`

const MINUTE = 60_000
const unknown = (keys: readonly string[]) => Object.fromEntries(keys.map((k) => [k, null]))

const table = (name: string): TableStat =>
  ({
    ...unknown([...TABLE_COUNTERS, ...TABLE_GAUGES]),
    schema_name: 'public',
    table_name: name,
    last_vacuum: null,
    last_autovacuum: null,
    last_analyze: null,
    last_autoanalyze: null,
    delta: null,
  }) as TableStat

const index = (name: string, tableName: string): IndexStat =>
  ({
    ...unknown([...INDEX_COUNTERS, ...INDEX_GAUGES]),
    schema_name: 'public',
    table_name: tableName,
    index_name: name,
    index_def: '',
    is_unique: false,
    is_primary: false,
    is_valid: true,
    delta: null,
  }) as IndexStat

let server: TestServer
let account: Account
let key: string
let browser: Browser
let dbId = ''
const now = Date.now()
const restartAt = Math.floor((now - 30 * MINUTE) / 1000) * 1000
const settingAt = now - 20 * MINUTE

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  ;({ account, key } = await agentAccount(server))
  const batch = (at: number, sections: Partial<IngestBatch>) =>
    pgBatch('events-page', at, {
      database_stats: { numbackends: 3, xact_commit: 10 },
      tables: [table('orders')],
      indexes: [],
      ...sections,
    })
  const send = async (b: IngestBatch) => {
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: b })
    if (res.status !== 200) throw new Error(`ingest: ${res.status} ${JSON.stringify(res.body)}`)
    dbId = res.body.database_id
  }
  // a batch a minute for 40 minutes: a restart at 30 minutes ago, a setting change at 20, new objects at 10
  for (let at = now - 40 * MINUTE; at <= now - MINUTE; at += MINUTE) {
    const started = at >= restartAt ? restartAt : now - 50 * MINUTE
    const settings = at >= settingAt ? { work_mem: '16MB' } : { work_mem: '4MB' }
    const objects =
      at >= now - 10 * MINUTE
        ? { tables: [table('orders'), table(HOSTILE_TABLE)], indexes: [index(HOSTILE_INDEX, HOSTILE_TABLE)] }
        : {}
    await send(
      batch(at, {
        interval_seconds: 60,
        server_state: {
          started_at: started,
          agent_started_at: now - 50 * MINUTE,
          settings_hash: settings.work_mem,
          settings,
        },
        ...objects,
      }),
    )
  }
  // The widest kind cell: a warning badge beside "cancel / terminate" (a refused action's audit event).
  await server.deps.store.actions.auditAction(dbId, {
    ts: now - 5 * MINUTE,
    kind: 'session_action',
    severity: 'warning',
    title: 'Terminate of pid 4242 refused (asked by owner)',
    detail: null,
    object: 'a1:refused',
    link: null,
  })
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

describe('events page', () => {
  test('lists each change newest first, hostile names as text, filtered by kind', async () => {
    const p = await signedIn()
    try {
      const { page } = p
      await page.goto(`/#/databases/${dbId}/events?range=1h`)
      await page.locator('tr[data-kind="session_action"]').waitFor({ timeout: 30_000 }) // the first page load of the file, on a loaded machine
      const rows = await page
        .locator('tbody tr')
        .evaluateAll((trs) =>
          trs.map((tr) => [tr.getAttribute('data-kind'), tr.querySelector('.event-title')?.textContent]),
        )
      expect(rows).toEqual([
        ['session_action', 'Terminate of pid 4242 refused (asked by owner)'],
        ['index_created', `Index created: public.${HOSTILE_INDEX}`],
        ['table_created', `Table created: public.${HOSTILE_TABLE}`],
        ['setting_change', 'work_mem changed'],
        ['restart', 'PostgreSQL restarted'],
        ['agent_connected', 'Agent connected'],
      ])
      // the names are text: no element made from them, no script run
      expect(await page.locator('tbody img, tbody b').count()).toBe(0)
      expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined()
      expect(await page.locator('tr[data-kind="setting_change"] .event-detail').textContent()).toBe('4MB → 16MB')
      // the link to the index's page keeps the name (encoded)
      expect(await page.locator('tr[data-kind="index_created"] a').getAttribute('href')).toBe(
        `#/databases/${dbId}/indexes/${encodeURIComponent(`public/${HOSTILE_INDEX}`)}`,
      )
      await p.screenshot('events-page')

      await page.getByLabel('Show').selectOption('settings')
      await page.waitForURL(/kind=settings/)
      expect(
        await page.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-kind'))),
      ).toEqual(['setting_change'])
      p.assertNoErrors()
    } finally {
      await p.close()
    }
  })

  test('on a phone (390 px) each kind label stays on one line, inside its row, and nothing scrolls sideways', async () => {
    const p = await signedIn()
    try {
      const { page } = p
      await page.setViewportSize({ width: 390, height: 844 })
      await page.goto(`/#/databases/${dbId}/events?range=1h`)
      await page.locator('tr[data-kind="session_action"]').waitFor({ timeout: 30_000 })
      expect(await horizontalOverflow(page)).toBe(0)
      const boxes = await page.evaluate(() => {
        const wrap = document.querySelector('.table-wrap.flow')!
        const badges = [...document.querySelectorAll<HTMLElement>('td.event-kind .badge')].map((b) => {
          const box = b.getBoundingClientRect()
          const row = b.closest('tr')!.getBoundingClientRect()
          return {
            label: b.textContent,
            inRow: box.left >= row.left && box.right <= row.right,
            whole: b.scrollWidth <= b.clientWidth,
            height: Math.round(box.height),
          }
        })
        return { wrapScrolls: wrap.scrollWidth > wrap.clientWidth, badges }
      })
      expect(boxes.wrapScrolls).toBe(false)
      expect(boxes.badges.filter((b) => !b.inRow || !b.whole)).toEqual([])
      // One line each: every badge as tall as the shortest one.
      const heights = new Set(boxes.badges.map((b) => b.height))
      expect([boxes.badges.length > 0, heights.size]).toEqual([true, 1])
      expect(boxes.badges.map((b) => b.label)).toContain('cancel / terminate')
      await p.screenshot('events-page-390')
      p.assertNoErrors()
    } finally {
      await p.close()
    }
  })

  test("the overview's charts mark the restart and the setting change, with a tooltip under the pointer", async () => {
    const p = await signedIn()
    try {
      const { page } = p
      await page.goto(`/#/databases/${dbId}/overview`)
      const chart = page.locator('[data-chart="overview-connections"] .chart[role="img"]')
      await chart.waitFor({ timeout: 30_000 })
      await page.waitForFunction(() =>
        document
          .querySelector('[data-chart="overview-connections"] .chart')
          ?.getAttribute('aria-label')
          ?.includes('Marked:'),
      )
      const label = (await chart.getAttribute('aria-label'))!
      expect(label).toContain('Marked: ')
      expect(label).toContain('restart at ')
      expect(label).toContain('setting at ')
      // sweep the pointer across the plot until a mark's tooltip shows
      const box = (await chart.boundingBox())!
      let tip = ''
      for (let x = box.x + 2; x < box.x + box.width && !tip; x += 2) {
        await page.mouse.move(x, box.y + box.height / 2)
        const shown = page.locator('[data-chart="overview-connections"] .chart-mark-tip')
        if ((await shown.count()) > 0) tip = (await shown.textContent()) ?? ''
      }
      expect(tip).toMatch(/^restart.*PostgreSQL restarted/)
      await p.screenshot('events-marks-tooltip')
      p.assertNoErrors()
    } finally {
      await p.close()
    }
  })
})
