// Issue 14's dashboard fixes on real data, in Chromium: the real agent watches two fresh databases on
// the shared PostgreSQL 17 (polled every second), each pushing to a test server of its own (test/support/
// agent.ts). "shop" has two tables whose 20,000 deleted rows an old REPEATABLE READ snapshot keeps
// alive through a VACUUM (two critical dead-row findings while the database-wide dead share stays low:
// 400,000 live rows elsewhere)
// and track_io_timing on; "cold" reads from disk with track_io_timing off. The API checks: /overview
// follows since/until (top statements as /queries ranks them, the cache hit ratio of the window's
// counters), /queries sorts by I/O time, and a statement's I/O time equals pg_stat_statements'. The page
// checks: a signed-out visit makes no failing request; a page opened right after signing in is not
// replaced by the sign-in's late redirect to the list; the dead tuples card takes the doctor's critical;
// the overview follows ?range=; a new database's charts start where its data do; the doctor's last
// vacuum reads as a time equal to pg_stat_user_tables'; statements have a sortable I/O time column, a
// statement an I/O time chart, and "track_io_timing" is explained where every I/O time is 0; the header's
// "last seen" follows each batch; an agent that stopped leaves a red "data from HH:MM" banner and no
// live-looking figures: the overview's cards and the doctor's key figures of the moment read "—", the
// rest "as of HH:MM", and the Active page says its data are from HH:MM, not live, with a transaction's
// age frozen at the snapshot's (the browser's clock moved on as the server's did). Screenshots go to
// test-artifacts/screenshots/issue14-*.png.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import postgres from 'postgres'
import { ago, fmtMs } from '../../src/web/components/ui.tsx'
import { formatFigure } from '../../src/web/pages/db/figures.ts'
import { type AgentRig, startAgentRig, waitForBaseline } from '../support/agent.ts'
import { type BrowserPage, horizontalOverflow, launchBrowser, openPage, signInThroughForm } from '../support/browser.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

const DEAD_ROWS = 20_000
/** A test's deadline: a busy two-core machine runs a page test in 10 to 30 s. */
const TEST_MS = 120_000
const IO_MARK = 'dbm-io-scan'

let browser: Browser
let shop: AgentRig
let cold: AgentRig
let shopSql: postgres.Sql
let coldSql: postgres.Sql
let coldDsn: string
let holder: postgres.ReservedSql | undefined
let holderPool: postgres.Sql
const dirs: string[] = []
const open: BrowserPage[] = []

/** A big table written by CREATE TABLE AS (a bulk write: most of it is not left in shared buffers), so a scan reads from disk. */
async function bigTable(sql: postgres.Sql, rows: number) {
  await sql.unsafe(`CREATE TABLE big AS SELECT g AS id, repeat('x', 250) AS pad FROM generate_series(1, ${rows}) g`)
}

beforeAll(async () => {
  const pg = await sharedPostgres(17)
  const [shopDsn, coldUrl] = await Promise.all([pg.freshDatabase(), pg.freshDatabase()])
  coldDsn = coldUrl
  shopSql = postgres(shopDsn, { max: 2, onnotice: () => {} })
  coldSql = postgres(coldDsn, { max: 2, onnotice: () => {} })
  const { db } = (await shopSql<{ db: string }[]>`SELECT current_database() AS db`)[0]!
  await shopSql.unsafe(`
    CREATE EXTENSION pg_stat_statements;
    ALTER DATABASE "${db}" SET track_io_timing = on;
    CREATE TABLE ledger_a (id int PRIMARY KEY, note text);
    CREATE TABLE ledger_b (id int PRIMARY KEY, note text);
    INSERT INTO ledger_a SELECT g, 'row ' || g FROM generate_series(1, ${DEAD_ROWS}) g;
    INSERT INTO ledger_b SELECT g, 'row ' || g FROM generate_series(1, ${DEAD_ROWS}) g;
    CREATE TABLE keep (id int);
    INSERT INTO keep SELECT generate_series(1, 400000);
  `)
  await bigTable(shopSql, 300_000)
  await coldSql.unsafe('CREATE EXTENSION pg_stat_statements')
  await bigTable(coldSql, 150_000)
  // Sessions opened from here on time their I/O in "shop".
  await shopSql.end()
  shopSql = postgres(shopDsn, { max: 2, onnotice: () => {} })

  // An old snapshot keeps the deleted rows alive through VACUUM: 20,000 dead rows in each table, vacuumed seconds ago.
  holderPool = postgres(shopDsn, { max: 1, onnotice: () => {} })
  holder = await holderPool.reserve()
  await holder.unsafe('BEGIN ISOLATION LEVEL REPEATABLE READ')
  await holder`SELECT count(*) FROM ledger_a`
  await shopSql`DELETE FROM ledger_a`
  await shopSql`DELETE FROM ledger_b`
  await shopSql.unsafe('VACUUM ledger_a')
  await shopSql.unsafe('VACUUM ledger_b')

  for (const _ of [0, 1]) dirs.push(mkdtempSync(join(tmpdir(), 'dbm-issue14-')))
  ;[shop, cold, browser] = await Promise.all([
    startAgentRig(shopDsn, 'shop', dirs[0]!),
    startAgentRig(coldDsn, 'cold', dirs[1]!),
    launchBrowser(),
  ])
  await Promise.all([waitForBaseline(shop.agent, 'shop'), waitForBaseline(cold.agent, 'cold')])
  for (let i = 0; i < 3; i++) {
    await shopSql.unsafe(`SELECT count(*) FROM big WHERE pad <> 'y' /* ${IO_MARK} */`)
    await coldSql.unsafe(`SELECT count(*) FROM big WHERE pad <> 'y' /* ${IO_MARK} */`)
  }
}, 120_000)

afterAll(async () => {
  for (const p of open) await p.close().catch(() => {})
  await browser?.close()
  await holder?.unsafe('ROLLBACK').catch(() => {})
  holder?.release()
  await holderPool?.end({ timeout: 1 })
  await shop?.stop()
  await cold?.stop()
  await shopSql?.end({ timeout: 1 })
  await coldSql?.end({ timeout: 1 })
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

const iso = (ms: number) => new Date(ms).toISOString()
const windowOf = (since: number, until: number) =>
  `since=${encodeURIComponent(iso(since))}&until=${encodeURIComponent(iso(until))}`

/** The API's answer with the rig's token, whatever its status. */
async function call(rig: AgentRig, path: string) {
  return rig.server.call('GET', `/api/v1/databases/${rig.dbId}${path}`, { token: rig.account.token })
}

/** pg_stat_statements' I/O time of the marked scan in this database, in ms. */
async function pgIoTime(sql: postgres.Sql): Promise<{ hash: string; read: number; write: number }> {
  const [row] = await sql<{ hash: string; read: number; write: number }[]>`
    SELECT queryid::text AS hash, sum(shared_blk_read_time)::float8 AS read, sum(shared_blk_write_time)::float8 AS write
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE ${`%${IO_MARK}%`}
    GROUP BY queryid`
  if (!row) throw new Error('the marked scan is not in pg_stat_statements')
  return row
}

async function newPage(rig: AgentRig): Promise<BrowserPage> {
  const p = await openPage(browser, { baseURL: rig.server.base })
  // Two cores shared with other test runs: a page may take more than the usual 10 s to show something.
  p.context.setDefaultTimeout(30_000)
  open.push(p)
  return p
}

const signIn = (rig: AgentRig, page: Page) => signInThroughForm(page, rig.account)

/** HH:MM of `ms` as the page's fmtClock writes it today, in the browser's locale. */
const clockIn = (page: Page, ms: number) =>
  page.evaluate((at) => new Date(at).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' }), ms)

describe('issue 14: the API behind the dashboard (real PostgreSQL 17)', () => {
  test(
    '/overview follows since/until: top statements as /queries ranks them, the cache hit ratio of the window',
    async () => {
      const hash = (await pgIoTime(shopSql)).hash
      await until('the marked scan in /queries', async () =>
        ((await shop.api('/queries')) as any[]).find((q) => q.query_hash === hash),
      )
      // To the end of the current minute: the scan's minute bucket may have started a moment ago (a window
      // ending before it, as "now less 2 s" did at a minute's first seconds, would leave it out).
      const to = Math.ceil((Date.now() + 1) / 60_000) * 60_000
      const from = to - 3_600_000
      const overview = (await call(shop, `/overview?${windowOf(from, to)}`)).body
      const queries = (await call(shop, `/queries?${windowOf(from, to)}&limit=5`)).body as any[]
      expect(overview.since).toBe(iso(from))
      expect(overview.until).toBe(iso(to))
      expect(overview.top_queries.map((q: any) => q.query_hash)).toEqual(queries.map((q) => q.query_hash))
      expect(overview.top_queries.map((q: any) => q.query_hash)).toContain(hash)
      // The ratio is that of the window's blks_hit and blks_read deltas, as the internals' series sum them.
      const points = (await call(shop, `/database-stats/timeseries?${windowOf(from, to)}&bucket=3600`)).body as any[]
      const hit = points.reduce((s, p) => s + (p.blks_hit ?? 0), 0)
      const read = points.reduce((s, p) => s + (p.blks_read ?? 0), 0)
      expect(read).toBeGreaterThan(0)
      expect(overview.cache_hit_ratio).toBe(Number((hit / (hit + read)).toFixed(4)))

      // Hours before the database existed: nothing, and no ratio.
      const past = (await call(shop, `/overview?${windowOf(to - 3 * 3_600_000, to - 2 * 3_600_000)}`)).body
      expect(past.top_queries).toEqual([])
      expect(past.cache_hit_ratio).toBeNull()
      // Without a window: the last 24 hours' statements as before, and no window fields.
      const plain = (await call(shop, '/overview')).body
      expect(plain).not.toHaveProperty('since')
      expect(plain.top_queries.map((q: any) => q.query_hash)).toContain(hash)
      // Bad windows are refused with the telemetry routes' messages.
      expect(await call(shop, '/overview?since=yesterday')).toMatchObject({
        status: 400,
        body: { error: 'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z' },
      })
      expect(await call(shop, `/overview?${windowOf(to, to - 1000)}`)).toMatchObject({
        status: 400,
        body: { error: 'since must be before until' },
      })
    },
    TEST_MS,
  )

  test(
    "a statement's I/O time is pg_stat_statements' blk read and write time; /queries sorts by it",
    async () => {
      const truth = await pgIoTime(shopSql)
      expect(truth.read).toBeGreaterThan(0)
      const row = await until(
        "dbm's I/O time to reach pg_stat_statements'",
        async () => {
          const r = ((await shop.api('/queries')) as any[]).find((q) => q.query_hash === truth.hash)
          return r &&
            r.blk_read_time_ms === Number(truth.read.toFixed(3)) &&
            r.blk_write_time_ms === Number(truth.write.toFixed(3))
            ? r
            : undefined
        },
        { timeoutMs: 30_000 },
      )
      expect(row.blk_read_time_ms).toBeGreaterThan(0)
      const byIo = (await shop.api('/queries?sort_by=io_time')) as any[]
      expect(byIo[0].query_hash).toBe(truth.hash)
      const io = byIo.map((q) => q.blk_read_time_ms + q.blk_write_time_ms)
      expect(io).toEqual([...io].sort((a, b) => b - a))
    },
    TEST_MS,
  )
})

describe('issue 14: the dashboard (Chromium)', () => {
  test(
    'a signed-out visit makes no failing request; signing in and out sets and clears the session hint',
    async () => {
      const b = await newPage(shop)
      const failed: string[] = []
      b.page.on('response', (r) => {
        if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`)
      })
      await b.page.goto('/')
      await b.page.getByRole('heading', { name: 'Sign in to dbm' }).waitFor()
      await b.page.goto('/#/databases/x/overview')
      await b.page.getByRole('heading', { name: 'Sign in to dbm' }).waitFor()
      expect(failed).toEqual([])
      b.assertNoErrors()

      await signIn(shop, b.page)
      // The page sees the hint, never the tokens.
      expect(await b.page.evaluate(() => document.cookie)).toBe('dbm_session=1')
      const cookies = await b.context.cookies()
      expect(cookies.find((c) => c.name === 'dbm_session')).toMatchObject({ value: '1', httpOnly: false, path: '/' })
      expect(cookies.find((c) => c.name === 'dbm_access')).toMatchObject({ httpOnly: true })
      await b.page.getByRole('button', { name: 'Sign out' }).click()
      await b.page.getByRole('heading', { name: 'Sign in to dbm' }).waitFor()
      expect(await b.page.evaluate(() => document.cookie)).toBe('')
      // The next visit, signed out: again nothing that fails.
      await b.page.goto('/#/databases')
      await b.page.reload()
      await b.page.getByRole('heading', { name: 'Sign in to dbm' }).waitFor()
      expect(failed).toEqual([])
      b.assertNoErrors()
    },
    TEST_MS,
  )

  test(
    'a page opened right after signing in stays open: the sign-in’s late redirect to the list does not undo it',
    async () => {
      const b = await newPage(shop)
      const { page } = b
      await page.goto('/#/signin')
      await page.getByLabel('Email', { exact: true }).fill(shop.account.email)
      await page.getByLabel('Password', { exact: true }).fill(shop.account.password)
      // The page's timers held still: the effects Preact runs after paint wait, as on a busy machine, until
      // the next render runs them (flakes of history-browser.test.ts: the list came back over the page).
      await page.clock.install()
      await page.clock.pauseAt(Date.now() + 1000)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForURL(/#\/databases$/)
      await page.goto(`/#/databases/${shop.dbId}/tables`)
      await page.clock.resume()
      await page.locator('.db-head h1', { hasText: 'shop' }).waitFor()
      expect(new URL(page.url()).hash).toBe(`#/databases/${shop.dbId}/tables`)
      b.assertNoErrors()
    },
    TEST_MS,
  )

  test(
    'overview: the dead tuples card takes the doctor’s two criticals; figures and charts follow ?range=; a new database’s chart starts at its data',
    async () => {
      const b = await newPage(shop)
      const { page } = b
      await signIn(shop, page)
      await until('two critical dead-row findings', async () => {
        const doctor = (await shop.api('/doctor')) as any
        return doctor.top_issues.filter((f: any) => f.rule === 'pg_dead_tuples' && f.severity === 'critical').length ===
          2
          ? true
          : undefined
      })
      const overview = (await shop.api('/overview')) as any
      // The database-wide share stays under the card's own warning threshold (20 %): only the doctor makes it critical.
      expect(overview.dead_tuple_ratio).toBeLessThan(0.2)

      const firstOverview = page.waitForRequest((r) => r.url().includes('/overview?'))
      await page.goto(`/#/databases/${shop.dbId}/overview`)
      const asked = new URL((await firstOverview).url())
      expect(Date.parse(asked.searchParams.get('until')!) - Date.parse(asked.searchParams.get('since')!)).toBe(
        6 * 3_600_000,
      )
      const dead = page.locator('[data-card="dead"]')
      await dead.locator('.value.critical').waitFor()
      expect(await dead.locator('.sub').textContent()).toBe('of all rows · 2 critical findings')
      expect(await dead.locator('.label a').getAttribute('href')).toBe(`#/databases/${shop.dbId}/issues`)
      await page.getByText('The costliest over the last 6 hours by total time.').waitFor()
      // Data from a few minutes ago in a 6-hour range: the axis starts at the data, the caption says the range.
      const chart = page.locator('[data-chart="overview-transactions"]')
      await expect(chart.locator('.chart-since').textContent()).resolves.toMatch(
        /^ · collecting since .+ \(of a 6 h range\)$/,
      )
      const label = (await chart.locator('.chart').getAttribute('aria-label')) ?? ''
      const rangeStart = await page.evaluate(() =>
        new Date(Date.now() - 6 * 3_600_000).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' }),
      )
      expect(label).toStartWith('Transactions per second, ')
      expect(label).not.toContain(`${rangeStart} to`)
      await b.screenshot('issue14-overview-6h')

      // The range picker: the overview asks for the last hour and says so.
      const hourOverview = page.waitForRequest((r) => {
        const u = new URL(r.url())
        return (
          u.pathname.endsWith('/overview') &&
          Date.parse(u.searchParams.get('until') ?? '') - Date.parse(u.searchParams.get('since') ?? '') === 3_600_000
        )
      })
      await page.getByLabel('Time range').selectOption('1h')
      await page.waitForURL(/\/overview\?range=1h$/)
      await hourOverview
      await page.getByText('The costliest over the last hour by total time.').waitFor()
      await page.getByText('Over the last hour.').waitFor()
      await expect(page.locator('[data-card="hit"] .sub').textContent()).resolves.toStartWith('over the last hour')
      expect(await page.getByRole('link', { name: 'All statements' }).getAttribute('href')).toBe(
        `#/databases/${shop.dbId}/queries?range=1h`,
      )
      await b.screenshot('issue14-overview-1h')
      // At phone width the range picker and the cards' longer notes overflow nothing.
      await page.setViewportSize({ width: 390, height: 844 })
      await page.locator('[data-card="dead"]').waitFor()
      expect(await horizontalOverflow(page)).toBe(0)
      await b.screenshot('issue14-overview-phone')
      b.assertNoErrors()
    },
    TEST_MS,
  )

  test(
    "doctor: a dead-row finding's last vacuum reads as a time, the one pg_stat_user_tables gives",
    async () => {
      const { at } = (
        await shopSql<
          { at: number }[]
        >`SELECT (extract(epoch FROM last_vacuum) * 1000)::float8 AS at FROM pg_stat_user_tables WHERE relname = 'ledger_a'`
      )[0]!
      const b = await newPage(shop)
      const { page } = b
      await signIn(shop, page)
      // The finding on ledger_a, opened on the Issues page: it leads its cause's issue or is one of the
      // consequences folded under it (the innermost panel that names it).
      const doctor = (await shop.api('/doctor')) as { top_issues: { key: string; rule: string; objects: string[] }[] }
      const key = doctor.top_issues.find(
        (f) => f.rule === 'pg_dead_tuples' && f.objects.some((o) => o.includes('ledger_a')),
      )?.key
      expect(key).toBeDefined()
      await page.goto(`/#/databases/${shop.dbId}/issues?finding=${encodeURIComponent(key!)}`)
      const finding = page
        .locator('article.finding', { hasText: 'public.ledger_a' })
        .filter({ hasText: 'pg_dead_tuples' })
        .last()
      await finding.waitFor()
      const vacuum = finding.locator('dt[title="last_vacuum"] + dd')
      const expected = await page.evaluate((ms) => new Date(ms).toLocaleString(), at)
      await expect(vacuum.textContent()).resolves.toMatch(
        new RegExp(`^\\d+ (s|min) ago \\(${expected.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)$`),
      )
      // No epoch milliseconds printed as a count anywhere (1,795,644,671,436).
      expect(await page.locator('main').textContent()).not.toMatch(/\d{1,3}(,\d{3}){4}/)
      await expect(finding.locator('[data-as-of]').textContent()).resolves.toMatch(/^as of .+ \(\d+ (s|min) ago\)$/)
      await b.screenshot('issue14-doctor-dead-rows')
      b.assertNoErrors()
    },
    TEST_MS,
  )

  test(
    'statements: an I/O time column sorted by the server, a statement’s I/O time chart; "track_io_timing" explained where all are 0',
    async () => {
      const truth = await pgIoTime(shopSql)
      const b = await newPage(shop)
      const { page } = b
      await signIn(shop, page)
      await page.goto(`/#/databases/${shop.dbId}/queries`)
      // The statements' table (not the databases list the sign-in left on screen).
      await page.getByRole('columnheader', { name: 'I/O time' }).waitFor()
      // (No waitForRequest: playwright-core's request objects raced its protocol under load in CI, "Cannot
      // find parent object request@…", and closed the browser; the URL and the rows tell the same.)
      await page.getByRole('button', { name: 'I/O time' }).click()
      await page.waitForURL(/sort=io_time/)
      const first = page.locator('tbody tr').first()
      // The table re-renders with the server's order: wait for it rather than read it at once.
      await first.locator('.stmt-text', { hasText: IO_MARK }).waitFor()
      const api = ((await shop.api('/queries?sort_by=io_time')) as any[])[0]
      expect(api.query_hash).toBe(truth.hash)
      const ioCell = first.locator('td').nth(6)
      await expect(ioCell.textContent()).resolves.toBe(fmtMs(api.blk_read_time_ms + api.blk_write_time_ms))
      expect(await page.locator('[data-io-timing]').count()).toBe(0)
      await b.screenshot('issue14-statements-io')
      await first.locator('.stmt-text').click()
      await page.locator('[data-chart="statement-io-time"] figcaption').waitFor()
      expect(await page.locator('[data-chart="statement-io-time"] .legend-toggle').allTextContents()).toEqual([
        'read',
        'write',
      ])
      b.assertNoErrors()

      // "cold" reads from disk with track_io_timing off (the agent reports the setting): every I/O time is 0, and the page says why.
      const coldHash = (await pgIoTime(coldSql)).hash
      await until('the cold scan in /queries', async () =>
        ((await cold.api('/queries')) as any[]).find((q) => q.query_hash === coldHash && q.shared_blks_read > 0),
      )
      const c = await newPage(cold)
      await signIn(cold, c.page)
      await c.page.goto(`/#/databases/${cold.dbId}/queries`)
      await c.page.locator('[data-io-timing]', { hasText: 'track_io_timing is off on this server' }).waitFor()
      await c.screenshot('issue14-statements-io-timing-off')
      c.assertNoErrors()
    },
    TEST_MS,
  )

  test(
    'the header’s "last seen" moves with each batch, without a reload',
    async () => {
      const b = await newPage(shop)
      const { page } = b
      await signIn(shop, page)
      await page.goto(`/#/databases/${shop.dbId}/tables`)
      const lastSeen = page.locator('[data-last-seen]')
      await lastSeen.waitFor()
      const shown = new Set<string>()
      // Three different batches' times in the header's title within 15 s (the record alone reloads every minute).
      await until(
        'the header to show three successive batches',
        async () => {
          const title = (await lastSeen.getAttribute('title')) ?? ''
          const api = (
            await shop.server.call('GET', `/api/v1/databases/${shop.dbId}/health`, { token: shop.account.token })
          ).body
          const expected = await page.evaluate((t) => new Date(t).toLocaleString(), api.last_seen_at)
          if (title === expected) shown.add(title)
          return shown.size >= 3 ? true : undefined
        },
        { timeoutMs: 15_000, everyMs: 200 },
      )
      await expect(lastSeen.textContent()).resolves.toMatch(/^last seen [0-3] s ago$/)
      b.assertNoErrors()
    },
    TEST_MS,
  )

  test(
    'an agent that stopped: a red "data from HH:MM" banner, and no live-looking figures',
    async () => {
      // A session idle in a transaction, in the agent's snapshots when it stops.
      const txPool = postgres(coldDsn, { max: 1, onnotice: () => {} })
      const tx = await txPool.reserve()
      try {
        await tx.unsafe('BEGIN')
        const { pid } = (await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!
        await until('the open transaction in /active', async () =>
          ((await cold.api('/active')) as any[]).find(
            (s) => s.pid === pid && s.xact_start && s.state === 'idle in transaction',
          ),
        )
        await stoppedAgent(pid)
      } finally {
        await tx.unsafe('ROLLBACK').catch(() => {})
        tx.release()
        await txPool.end({ timeout: 1 })
      }
    },
    TEST_MS,
  )
})

/** The "agent that stopped" test's pages, with `pid` a session idle in a transaction in the agent's last snapshot. */
async function stoppedAgent(pid: number) {
  const b = await newPage(cold)
  const { page } = b
  await signIn(cold, page)
  await page.goto(`/#/databases/${cold.dbId}/overview`)
  await page.locator('[data-card="active"] .value').waitFor()
  expect(await page.locator('[data-stale]').count()).toBe(0)
  // The browser's clock, moved on below as the server's is (installed once the overview shows: the
  // sign-in and the first load need no fake time).
  await page.clock.install()

  await cold.agent.stop()
  const last = Date.parse((await call(cold, '/health')).body.last_seen_at)
  // Two minutes later by the server's clock (and the browser's): past max(3 × 1 s, 60 s) without a batch.
  cold.server.advance(120_000)
  await page.clock.fastForward(120_000)
  expect((await call(cold, '/health')).body.status).toBe('disconnected')
  const hhmm = await clockIn(page, last)
  const banner = page.locator('[data-stale]')
  await banner.waitFor({ timeout: 15_000 })
  expect(await banner.locator('strong').textContent()).toBe(`Data from ${hhmm}`)
  expect(await banner.getAttribute('class')).toBe('banner banner-critical')
  await expect(page.locator('.db-head .badge-critical').textContent()).resolves.toBe('disconnected')
  for (const card of ['active', 'blocked', 'longest', 'hit']) {
    await expect(page.locator(`[data-card="${card}"] .value`).textContent()).resolves.toBe('—')
    await expect(page.locator(`[data-card="${card}"] .sub`).textContent()).resolves.toStartWith(`no data since ${hhmm}`)
  }
  await expect(page.locator('[data-card="dead"] .sub').textContent()).resolves.toStartWith(`as of ${hhmm}`)
  await b.screenshot('issue14-stale-overview')
  // Every page of the database carries the banner.
  const tab = (name: string) =>
    page.getByRole('navigation', { name: /^Sections of/ }).getByRole('link', { name, exact: true })
  await tab('Tables').click()
  await page.locator('[data-stale]').waitFor()

  // The doctor's key figures: as of the last data, in red; those of the moment "—", the others as measured.
  const summary = (await call(cold, '/doctor')).body.metrics_summary
  const asOf = `as of ${await clockIn(page, Date.parse(summary.as_of))} (`
  await tab('Issues').click()
  const keyFigures = page.locator('[data-key-figures]')
  await keyFigures.waitFor()
  // The diagnosis the layout loaded may predate the stop by a batch: run it again and wait for the last data's.
  await page.getByRole('button', { name: 'Run again' }).click()
  await until('the key figures as of the last data', async () =>
    (await keyFigures.locator('[data-as-of]').textContent())?.startsWith(asOf) ? true : undefined,
  )
  await expect(keyFigures.locator('[data-as-of]').textContent()).resolves.toMatch(/\([2-9] min ago\)$/)
  expect(await keyFigures.locator('[data-as-of]').getAttribute('class')).toContain('sev-critical')
  for (const key of ['active_queries', 'blocked_queries', 'longest_query_ms']) {
    await expect(keyFigures.locator(`dt[title="${key}"] + dd`).textContent()).resolves.toBe('—')
  }
  expect(summary.cache_hit_ratio).toBeGreaterThan(0)
  await expect(keyFigures.locator('dt[title="cache_hit_ratio"] + dd').textContent()).resolves.toBe(
    formatFigure('cache_hit_ratio', summary.cache_hit_ratio),
  )
  await b.screenshot('issue14-stale-doctor')

  // The Active page: the last snapshot, said to be from its time and not live, in the stale colour.
  const sessions = (await cold.api('/active')) as any[]
  const session = sessions.find((s) => s.pid === pid)
  expect(session).toBeDefined()
  const snapshotClock = await clockIn(page, Date.parse(session.ts))
  await tab('Active').click()
  const badge = page.locator('[data-stream-state="stale"]')
  await badge.waitFor({ timeout: 20_000 })
  expect(await badge.textContent()).toBe(`Data from ${snapshotClock}, not live`)
  expect(await badge.getAttribute('class')).toBe('badge badge-critical')
  const slider = page.locator('[data-slider-state="stale"]')
  expect(await slider.textContent()).toBe(`Latest data, from ${hhmm}: not live`)
  expect(await slider.getAttribute('class')).toBe('sev-critical')
  expect(await page.locator('main').textContent()).not.toMatch(/\bLive\b/)
  // The transaction's age is the one it had at the snapshot (seconds), not counted on to now (2 minutes).
  const headers = await page.locator('thead th').allTextContents()
  const column = headers.findIndex((h) => h.startsWith('Transaction since')) + 1
  expect(column).toBeGreaterThan(0)
  const row = page
    .locator('tbody tr')
    .filter({ has: page.locator('td:first-child', { hasText: new RegExp(`^${pid}$`) }) })
  const since = row.locator(`td:nth-child(${column})`)
  const frozen = ago(session.xact_start, session.ts)
  // (Counted to now, two minutes on, it would read otherwise.)
  expect(ago(session.xact_start, Date.parse(session.ts) + 120_000)).not.toBe(frozen)
  await expect(since.textContent()).resolves.toBe(frozen)
  await b.screenshot('issue14-stale-active')
  // A minute more: the page re-renders with the stream's next message ("collected 2 min ago" becomes
  // "3 min ago"), the transaction's age stays.
  const collected = page.getByText(/^collected \d+ min ago$/)
  const before = await collected.textContent()
  await page.clock.fastForward(60_000)
  await until(
    "the page to count the snapshot's age a minute on",
    async () => ((await collected.textContent()) !== before ? true : undefined),
    { timeoutMs: 20_000 },
  )
  await expect(since.textContent()).resolves.toBe(frozen)
  await expect(badge.textContent()).resolves.toBe(`Data from ${snapshotClock}, not live`)
  b.assertNoErrors()
}
