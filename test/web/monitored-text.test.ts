// Text from a monitored database never reaches the dashboard's DOM with its invisible or
// direction-changing characters raw (a statement with U+202E would read with its tail reversed). A
// PostgreSQL and a ClickHouse database are fed through ingest with batches whose every string field
// (built from the wire schema, as test/support/full-batch.ts does, so a field added later carries it too),
// every settings name and value, tag, disk name and the databases' own names, hosts and versions carry
// U+202E, U+2066, U+200B, U+0007 and a newline; the health monitor turns the doctor's findings into
// alerts and recommendations. Chromium then visits the databases list and every tab the dashboard offers
// each database (read from its tab strip, so a tab added later is visited too), a statement, a table and
// an index, and walks the whole DOM: no text node, no attribute a reader meets (title, aria-label, value,
// alt, href, placeholder…) and not document.title holds a character of INVISIBLE. Only id and data-*
// attributes are left out: they are hooks for scripts and tests, never shown or read out. There is no
// textarea or hidden copy source: Copy buttons copy from script, the raw text never sits in the DOM.
// Each page is read once it shows monitored text below its tabs (marked or raw), so a page that showed
// none of the data cannot pass by being empty. One server, one browser context.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import { ACCESS_COOKIE, SESSION_HINT_COOKIE } from '../../src/server/auth/principal.ts'
import { createMonitor } from '../../src/server/monitor/index.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { diskMetricKey } from '../../src/shared/metrics.ts'
import { INVISIBLE } from '../../src/web/components/invisible.tsx'
import { fullBatch } from '../support/full-batch.ts'
import { type BrowserPage, launchBrowser, openPage } from '../support/browser.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { until } from '../support/wait.ts'

/** What every monitored text carries: an override, an isolate, a zero-width space, a bell and a newline. */
const HOSTILE = '\u202e\u2066\u200b\u0007\n\u{e0044}\u3164'
const hostile = (s: string) => `${s}${HOSTILE}`

const MINUTE = 60_000
const now = Date.now()

/** Wire paths (`[]` for an array's entries) whose strings are machine values, not text from the database. */
const MACHINE = new Set([
  'batch_id',
  'agent_version',
  'database.engine',
  'explain_plans[].source',
  'bloat[].kind',
  'collector_errors[].level',
  'collector_notes[].level',
  // log events, host and backups: kinds, severities, codes and tools are dbm's (or PostgreSQL's) words with a pattern on the wire
  'log_events.source',
  'log_events.entries[].kind',
  'log_events.entries[].severity',
  'log_events.entries[].sqlstate',
  'log_events.entries[].query_id',
  'log_events.counts[].kind',
  'log_events.counts[].severity',
  'host.source',
  'backups.tool',
  'backups.backups[].type',
  'availability.state',
  'availability.cause',
  'progress[].blocker.via',
  'wal_dir.redo_lsn',
  // custom metrics: names and columns are the config's identifiers (a pattern on the wire); their label values, descriptions and errors stay hostile
  'custom_metrics.definitions[].name',
  'custom_metrics.definitions[].kind',
  'custom_metrics.definitions[].labels[]',
  'custom_metrics.definitions[].values[]',
  'custom_metrics.definitions[].alert.op',
  'custom_metrics.definitions[].alert.severity',
  'custom_metrics.samples[].name',
  'custom_metrics.samples[].column',
  'custom_metrics.errors[].name',
])
/** Maps whose keys are names from the database (the others' keys are dbm's metric names). */
const NAMED_KEYS = new Set(['server_state.settings', 'database.tags', 'server_state.stats_resets'])

/** `value` with HOSTILE appended to every string of the database's (and to the names of NAMED_KEYS maps). */
function poison(value: unknown, path = ''): unknown {
  if (typeof value === 'string') return MACHINE.has(path) ? value : hostile(value)
  if (Array.isArray(value)) return value.map((v) => poison(v, `${path}[]`))
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        NAMED_KEYS.has(path) ? hostile(k) : k,
        poison(v, path ? `${path}.${k}` : k),
      ]),
    )
  }
  return value
}

/** A batch of `engine` with every text hostile; `cycle` moves what makes events (objects, settings, plans). */
function hostileBatch(name: string, engine: 'postgres' | 'clickhouse', at: number, cycle: number): IngestBatch {
  const b = poison(fullBatch(name, at, engine)) as IngestBatch
  b.database.name = name
  b.database.port = engine === 'postgres' ? 5432 : 8123
  b.interval_seconds = 60
  // the same server and agent start in every batch: the first batch is the agent connecting, the third a restart
  b.server_state!.started_at = cycle < 2 ? now - 60 * MINUTE : now - 5 * MINUTE
  b.server_state!.agent_started_at = now - 60 * MINUTE
  const [settingName] = Object.keys(b.server_state!.settings!)
  b.server_state!.settings![settingName!] = hostile(`value ${cycle}`)
  b.server_state!.settings_hash = `settings-${cycle}`
  // archive_mode is at most 16 characters on the wire: a short value, still hostile
  if (b.archiver) b.archiver.archive_mode = hostile('on')
  // the doctor's findings that name objects: no primary key, autovacuum off, an invalid index, a sequence near its end, dead rows
  for (const t of b.tables!)
    Object.assign(t, {
      has_primary_key: false,
      autovacuum_enabled: false,
      n_live_tup: 1000,
      n_dead_tup: 900_000,
      table_size_bytes: 2 ** 30,
    })
  b.indexes![1]!.is_valid = false
  for (const s of b.sequences!)
    Object.assign(s, { used_ratio: 0.97, last_value: 2_080_000_000, max_value: 2_147_483_647 })
  // the agent's notes: one to act on (the overview), one about statements (the statements page)
  delete b.collector_notes![0]!.level
  b.collector_notes![1]!.collector = 'query_stats'
  if (cycle >= 1) {
    // a table and an index appear (events), a new plan for the statement (a plan change)
    b.tables!.push({ ...b.tables![0]!, table_name: hostile(`new_table_${cycle}`) })
    b.indexes!.push({ ...b.indexes![0]!, index_name: hostile(`new_index_${cycle}`) })
    for (const p of b.explain_plans!) p.plan_hash = hostile(`plan-${cycle}`)
  }
  // ClickHouse's agent reports its database unreachable at the last cycle, with a hostile driver message:
  // the header's down banner, the list and the doctor's finding show it
  if (engine === 'clickhouse' && cycle === 2)
    b.availability = { state: 'down', since: at - 30_000, cause: 'refused', message: hostile('connection refused') }
  else delete b.availability
  if (engine === 'postgres') {
    // a chain: the first session (idle in its transaction for two hours) blocks the second (running for an hour)
    const [first, second] = b.activity!
    Object.assign(first!, { pid: 4001, state: 'idle in transaction', duration_ms: 2 * 60 * MINUTE, blocking_pids: [] })
    Object.assign(second!, { pid: 4002, duration_ms: 60 * MINUTE, blocking_pids: [4001] })
    for (const l of b.locks!) Object.assign(l, { pid: 4002, blocked_by_pid: 4001, granted: false })
  } else {
    // ClickHouse sessions are named by their query id; disks by name
    b.activity!.forEach((a, i) => {
      Object.assign(a, { pid: hostile(`query-id-${i}`), blocking_pids: [] })
    })
    for (const key of ['free_bytes', 'total_bytes'] as const)
      b.server_metrics![diskMetricKey(hostile('disk'), key)] = key === 'free_bytes' ? 10 : 1000
    for (const m of b.mutations!) Object.assign(m, { create_time: now - 3 * 60 * MINUTE, is_done: false, stuck: true })
  }
  return b
}

let server: TestServer
let browser: Browser
let tab: BrowserPage | undefined
const ids: Record<'postgres' | 'clickhouse', string> = { postgres: '', clickhouse: '' }
/** Requests the page has under way: a page is read once they are done. */
let inFlight = 0

beforeAll(async () => {
  ;[server, browser] = await Promise.all([startTestServer('sqlite'), launchBrowser()])
  const { account, key } = await agentAccount(server)
  for (const engine of ['postgres', 'clickhouse'] as const) {
    const name = hostile(`${engine === 'postgres' ? 'shop' : 'warehouse'} db`)
    for (const [cycle, at] of [now - 20 * MINUTE, now - 10 * MINUTE, now - MINUTE].entries()) {
      const batch = hostileBatch(name, engine, at, cycle)
      batch.database.host = hostile(`${engine}.internal`)
      batch.database.engine_version = hostile('17.2')
      const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch })
      if (res.status !== 200) throw new Error(`ingest ${engine} ${cycle}: ${res.status} ${JSON.stringify(res.body)}`)
      ids[engine] = res.body.database_id
    }
  }
  // findings become alerts (and their events) and recommendations
  await createMonitor(server.deps, { retentionDays: 30 }).runOnce()
  tab = await openPage(browser, { baseURL: server.base })
  await tab.context.addCookies([
    { name: ACCESS_COOKIE, value: account.token, url: server.base },
    { name: SESSION_HINT_COOKIE, value: '1', url: server.base },
  ])
  tab.page.on('request', () => inFlight++)
  tab.page.on('requestfinished', () => inFlight--)
  tab.page.on('requestfailed', () => inFlight--)
}, 60_000)

afterAll(async () => {
  await tab?.close().catch(() => {})
  await browser?.close()
  await server?.stop()
})

/** Where the DOM holds a raw invisible character: each text node and attribute, and document.title. */
function rawInvisible(page: Page): Promise<string[]> {
  return page.evaluate((source) => {
    const invisible = new RegExp(source, 'u')
    const where = (el: Element | null) => {
      const parts: string[] = []
      for (let e = el; e && e !== document.documentElement && parts.length < 4; e = e.parentElement) {
        parts.unshift(`${e.tagName.toLowerCase()}${e.classList.length ? `.${[...e.classList].join('.')}` : ''}`)
      }
      return parts.join(' > ')
    }
    const found: string[] = []
    if (invisible.test(document.title)) found.push(`document.title ${JSON.stringify(document.title)}`)
    const walker = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT)
    for (let node: Node | null = walker.currentNode; node; node = walker.nextNode()) {
      if (node.nodeType === Node.TEXT_NODE) {
        const text = (node as Text).data
        if (invisible.test(text))
          found.push(`text in ${where(node.parentElement)}: ${JSON.stringify(text.slice(0, 60))}`)
        continue
      }
      const el = node as Element
      for (const attr of el.attributes) {
        if (attr.name === 'id' || attr.name.startsWith('data-')) continue
        if (invisible.test(attr.value))
          found.push(`${attr.name} of ${where(el)}: ${JSON.stringify(attr.value.slice(0, 60))}`)
      }
      // what a form control holds now, whether or not an attribute says it
      if (
        (el instanceof HTMLInputElement || el instanceof HTMLSelectElement || el instanceof HTMLTextAreaElement) &&
        invisible.test(el.value)
      ) {
        found.push(`value of ${where(el)}`)
      }
    }
    return found
  }, INVISIBLE.source)
}

/**
 * Opens `hash` and waits until it shows monitored text below the tabs (or in the list) and nothing is
 * loading any more, then reads where raw characters are.
 */
async function visit(hash: string): Promise<string[]> {
  const page = tab!.page
  await page.goto(`/${hash}`)
  await page.waitForFunction(
    (source) => {
      // monitored text below the tabs (or in the list): marked ⟨U+…⟩, or raw
      const invisible = new RegExp(source, 'u')
      const heading = document.querySelector('[data-main-heading]')
      const main = document.querySelector('main')
      if (!main) return false
      const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT)
      let shown = false
      for (let node = walker.nextNode(); node && !shown; node = walker.nextNode()) {
        if (heading && !(heading.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING)) continue
        const text = (node as Text).data
        shown = text.includes('⟨U+') || invisible.test(text)
      }
      const loading = document.querySelector(
        'main [role="status"][aria-live="polite"], [data-stream-state="connecting"]',
      )
      return shown && !loading
    },
    INVISIBLE.source,
    { timeout: 20_000 },
  )
  await until(`${hash}: requests done`, async () => (inFlight <= 0 ? true : undefined))
  return (await rawInvisible(page)).map((w) => `${hash}: ${w}`)
}

test('no raw invisible or direction-changing character anywhere the dashboard shows monitored text', async () => {
  const page = tab!.page
  const problems: string[] = []
  const visited: string[] = []
  const see = async (hash: string) => {
    visited.push(hash)
    problems.push(...(await visit(hash)))
  }
  await see('#/databases')
  for (const engine of ['postgres', 'clickhouse'] as const) {
    const base = `#/databases/${encodeURIComponent(ids[engine])}`
    await page.goto(`/${base}/overview`)
    await page.locator('nav.tabs a').first().waitFor()
    const tabs = await page.locator('nav.tabs a').evaluateAll((links) => links.map((a) => a.getAttribute('href')!))
    expect(tabs.length).toBeGreaterThan(8)
    for (const href of tabs) {
      // the lists of alerts and recommendations with the resolved ones too
      await see(/\/(alerts|recommendations)$/.test(href) ? `${href}?status=all` : href)
      // how marked names and statements look in a list, truncated as before
      if (engine === 'postgres' && /\/(queries|active)$/.test(href))
        await tab!.screenshot(`monitored-text-${href.split('/').pop()}`)
    }
    // one item of each list that has item pages: a statement, and for PostgreSQL a table and an index
    const items = engine === 'postgres' ? ['queries', 'tables', 'indexes'] : ['queries']
    for (const list of items) {
      await page.goto(`/${base}/${list}`)
      const link = page.locator(`main table a[href^="${base}/${list}/"]`).first()
      await link.waitFor()
      await see((await link.getAttribute('href'))!)
    }
  }
  expect(visited.length).toBeGreaterThan(25)
  expect(problems).toEqual([])
  tab!.assertNoErrors()
}, 180_000)
