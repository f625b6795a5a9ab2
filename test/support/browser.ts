// A real browser for the dashboard tests: Debian's Chromium driven by playwright-core (no browser
// download), one fresh context per test, every console error, page error and Content-Security-Policy
// violation collected, and full-page screenshots under test-artifacts/screenshots/ (git-ignored) when
// asked for with DBM_TEST_SCREENSHOTS=1 (nothing compares them, and they cost a run seconds).
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { type Browser, type BrowserContext, type ConsoleMessage, type Page, chromium } from 'playwright-core'
import { repoRoot } from './process.ts'

export const chromiumPath = '/usr/bin/chromium'
export const screenshotDir = join(repoRoot, 'test-artifacts', 'screenshots')
const screenshots = process.env.DBM_TEST_SCREENSHOTS === '1'

/** Starts headless Chromium; fails saying how to install it when it is missing. */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(chromiumPath)) {
    throw new Error(
      `${chromiumPath} is missing: the dashboard tests need Debian's chromium (apt-get install -y --no-install-recommends chromium)`,
    )
  }
  return chromium.launch({
    executablePath: chromiumPath,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-quic',
      '--no-first-run',
      '--disable-component-update',
      '--disable-sync',
    ],
    timeout: 20_000,
  })
}

/**
 * A failed request the browser reports as a console error that is part of normal use: the session check
 * (GET /auth/me) answers 401 to a signed-out visitor and the silent renewal it tries (POST /auth/refresh)
 * 401, or 400 without a refresh cookie at all. (The Settings page asks for the webhook only when
 * /auth/me says one is set, so a 404 there is an error too.)
 */
function expectedNetworkError(message: ConsoleMessage): boolean {
  const text = message.text()
  const path = new URL(message.location().url || 'http://x/').pathname
  if (text.startsWith('Failed to load resource: the server responded with a status of 401'))
    return path === '/api/v1/auth/me' || path === '/api/v1/auth/refresh'
  if (text.startsWith('Failed to load resource: the server responded with a status of 400'))
    return path === '/api/v1/auth/refresh'
  return false
}

export interface BrowserPage {
  context: BrowserContext
  page: Page
  /** Console errors and uncaught page errors so far, each with the page URL it happened on. */
  problems: string[]
  /** Saves a full-page screenshot as `<name>.png` (with DBM_TEST_SCREENSHOTS=1 only) and returns its path. */
  screenshot(name: string): Promise<string>
  /** Fails with the collected console and page errors, if any. */
  assertNoErrors(): void
  close(): Promise<void>
}

export async function openPage(
  browser: Browser,
  options: { baseURL: string; viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark' },
): Promise<BrowserPage> {
  const context = await browser.newContext({
    baseURL: options.baseURL,
    viewport: options.viewport ?? { width: 1280, height: 900 },
    colorScheme: options.colorScheme ?? 'light',
    // The copy buttons use the clipboard.
    permissions: ['clipboard-read', 'clipboard-write'],
  })
  // How long a wait for the page may take: 20 s, as test files run in parallel (scripts/test.ts) and a
  // page's data (a health score, a past snapshot) arrives later on a busy machine than on an idle one.
  context.setDefaultTimeout(20_000)
  // Every CSP violation (a blocked script, style, image, connection or frame) is reported as a problem,
  // whatever the console says about it.
  const problems: string[] = []
  await context.exposeBinding('__dbmCspViolation', ({ page: from }, text: string) => {
    problems.push(`CSP violation on ${from.url()}: ${text}`)
  })
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      const report = (window as unknown as { __dbmCspViolation(text: string): void }).__dbmCspViolation
      report(`${e.effectiveDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`)
    })
  })
  const page = await context.newPage()
  page.on('console', (message) => {
    if (message.type() === 'error' && !expectedNetworkError(message)) {
      problems.push(`console error on ${page.url()}: ${message.text()} (${message.location().url})`)
    }
  })
  page.on('pageerror', (error) => problems.push(`page error on ${page.url()}: ${error.message}`))
  if (screenshots) mkdirSync(screenshotDir, { recursive: true })
  return {
    context,
    page,
    problems,
    async screenshot(name) {
      const path = join(screenshotDir, `${name}.png`)
      if (screenshots) await page.screenshot({ path, fullPage: true, animations: 'disabled' })
      return path
    },
    assertNoErrors() {
      if (problems.length > 0) throw new Error(`the dashboard logged errors:\n${problems.join('\n')}`)
    },
    close: () => context.close(),
  }
}

/** How far the page is wider than the viewport (0 when nothing overflows horizontally). */
export async function horizontalOverflow(page: Page): Promise<number> {
  return page.evaluate(
    () => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) - window.innerWidth,
  )
}

/** Signs in through the dashboard's form as `account` and waits for the databases page. */
export async function signInThroughForm(
  page: Page,
  account: { email: string; password: string },
  options: { timeoutMs?: number } = {},
): Promise<void> {
  await page.goto('/#/signin')
  await page.getByLabel('Email', { exact: true }).fill(account.email)
  await page.getByLabel('Password', { exact: true }).fill(account.password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(/#\/databases$/, options.timeoutMs === undefined ? undefined : { timeout: options.timeoutMs })
}
