// Helpers shared by the benchmarks (bench/api.ts, ingest.ts, queries.ts, agent.ts, clickhouse.ts): the real app (createApp) on
// 127.0.0.1 over a store opened with openStore, an account with a verified organization and an API key,
// the machine description for the Markdown sections, small statistics, and the agent in a process of its
// own with what is measured of it (/proc, /healthz).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../src/server/app.ts'
import { TokenService } from '../src/server/auth/tokens.ts'
import type { Deps } from '../src/server/context.ts'
import { createMailer } from '../src/server/mail.ts'
import { openStore } from '../src/server/store/open.ts'
import type { SqlStore } from '../src/server/store/sql-store.ts'
import { createLogger } from '../src/shared/log.ts'
import { freePort } from '../test/support/postgres.ts'

/** What the app and the health monitor need, as `dbm serve` builds it, over `store` (warnings logged only, mail to the log). */
export function benchDeps(store: SqlStore): Deps {
  const log = createLogger('warn')
  return {
    store,
    tokens: new TokenService(Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url')),
    mailer: createMailer({ from: 'dbm <dbm@bench.invalid>', log }),
    log,
    clock: Date.now,
    publicUrl: 'http://127.0.0.1',
    trustProxy: false,
  }
}

export interface BenchServer {
  base: string
  port: number
  store: SqlStore
  stop(): Promise<void>
}

/**
 * The app as `dbm serve` builds it, over `openStore({ dataDir, databaseUrl })`, listening on 127.0.0.1.
 * `onRequest` sees every request first (the benchmarks count ingest bytes with it).
 */
export async function startServer(options: {
  dataDir: string
  databaseUrl?: string
  onRequest?: (request: Request) => void
  /** Extra routes added before the app listens (bench:api's bare /bench/hello). */
  routes?: (app: ReturnType<typeof createApp>) => void
}): Promise<BenchServer> {
  const { store } = await openStore({ dataDir: options.dataDir, databaseUrl: options.databaseUrl })
  const deps = benchDeps(store)
  const app = createApp(deps)
  const { onRequest } = options
  if (onRequest) app.onRequest(({ request }) => onRequest(request))
  options.routes?.(app)
  app.listen({ hostname: '127.0.0.1', port: 0 })
  const port = app.server!.port!
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    store,
    async stop() {
      await app.stop(true)
      await deps.mailer.idle()
      deps.mailer.close()
      await store.close()
    },
  }
}

export async function call(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
) {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, text, json: () => JSON.parse(text) }
}

/**
 * Signs up through the API, marks the organization verified in the store (what following the
 * verification mail does; unverified organizations may register one database only) and creates an
 * API key through the API.
 */
export async function createAccount(server: BenchServer): Promise<{ apiKey: string; orgId: string }> {
  const signup = await call(
    server.base,
    'POST',
    '/api/v1/auth/signup',
    {},
    {
      email: 'bench@example.com',
      password: 'bench password 0123',
      name: 'Bench',
      org_name: 'Bench Org',
    },
  )
  if (signup.status !== 201) throw new Error(`signup: ${signup.status} ${signup.text}`)
  const body = signup.json()
  await server.store.markEmailVerified(body.user.id, Date.now())
  const key = await call(
    server.base,
    'POST',
    '/api/v1/api-keys',
    { authorization: `Bearer ${body.access_token}` },
    { name: 'bench' },
  )
  if (key.status !== 201) throw new Error(`api key: ${key.status} ${key.text}`)
  return { apiKey: key.json().key as string, orgId: body.organization.id as string }
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/** Nearest-rank percentile (q in 0..1) of the values. */
export function percentile(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b)
  if (s.length === 0) return Number.NaN
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!
}

export const fmt = (n: number | undefined | null, digits = 0) =>
  n === undefined || n === null || Number.isNaN(n)
    ? 'n/a'
    : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

export const loadLine = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ')

export async function machine() {
  const cpu = cpus()[0]?.model?.trim() ?? 'unknown cpu'
  const nproc = (await Bun.$`nproc`.nothrow().quiet().text()).trim() || String(cpus().length)
  const head = (await Bun.$`git rev-parse --short HEAD`.nothrow().quiet().text()).trim()
  const dirty = (await Bun.$`git status --porcelain --untracked-files=no`.nothrow().quiet().text()).trim() !== ''
  const commit = head ? `${head}${dirty ? ' (with uncommitted changes)' : ''}` : 'unknown'
  return {
    commit,
    line: `${nproc} CPUs (nproc), ${cpu}, ${process.platform}-${process.arch}, bun ${Bun.version}`,
  }
}

/** `--flag value` options (kebab-case flags for camelCase keys) checked against a table of ranges or choices. */
export function parseArgs<T extends object>(
  argv: string[],
  defaults: T,
  ranges: Partial<Record<keyof T, [number, number] | readonly string[]>>,
): T {
  const o: Record<string, number | string> = { ...(defaults as Record<string, number | string>) }
  const table = ranges as Record<string, [number, number] | readonly string[] | undefined>
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!
    const name = flag.replace(/^--/, '').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())
    const value = argv[++i]
    if (!flag.startsWith('--') || !(name in o) || value === undefined)
      throw new Error(`unknown option or missing value: ${flag}`)
    const range = table[name]
    if (typeof o[name] === 'number') {
      const n = Number(value)
      const [min, max] = (range as [number, number] | undefined) ?? [0, Number.MAX_SAFE_INTEGER]
      if (!Number.isInteger(n) || n < min || n > max)
        throw new Error(`${flag} must be an integer from ${min} to ${max}`)
      o[name] = n
    } else {
      const choices = range as readonly string[] | undefined
      if (choices && !choices.includes(value)) throw new Error(`${flag} must be one of ${choices.join(', ')}`)
      o[name] = value
    }
  }
  return o as T
}

// ---- the agent in a process of its own (bench/agent.ts, clickhouse.ts) ----

const repoRoot = join(import.meta.dir, '..')
/** Clock ticks per second of the times in /proc/<pid>/stat (USER_HZ). */
const CLK_TCK = 100

/** CPU time used so far, resident and peak resident memory of a process, from /proc. */
export function procStat(pid: number): { cpuMs: number; rssKb: number; hwmKb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // Fields after the command: state is index 0, so utime (14th overall) is index 11, stime index 12.
  const cpuMs = ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0)
  return { cpuMs, rssKb: kb('VmRSS'), hwmKb: kb('VmHWM') }
}

/** What the agent's /healthz says of each database. */
export interface HealthDatabase {
  name: string
  collectors: Record<string, string>
  last_cycle_at: string | null
}

/** The agent's /healthz databases, or undefined while it does not answer. */
export async function healthz(port: number): Promise<HealthDatabase[] | undefined> {
  try {
    return ((await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as { databases: HealthDatabase[] })
      .databases
  } catch {
    return undefined
  }
}

/** Collector → wall ms of the collectors /healthz reports as `ok in N ms`. */
export function collectorWallMs(collectors: Record<string, string>): Record<string, number> {
  const wall: Record<string, number> = {}
  for (const [name, text] of Object.entries(collectors)) {
    const ms = /^ok in (\d+) ms$/.exec(text)?.[1]
    if (ms !== undefined) wall[name] = Number(ms)
  }
  return wall
}

export interface AgentProcess {
  pid: number
  healthPort: number
  /** Its stderr lines logged at WARN or ERROR so far. */
  warnings(): string[]
  /** Resolves once `count()` reaches `cycle`; fails when the agent exits first or `timeoutS` passes. */
  waitForCycle(cycle: number, count: () => Promise<number>, timeoutS: number, everyMs: number): Promise<void>
  /** SIGTERM (SIGKILL after 10 s), then its config and buffer directory removed. */
  stop(): Promise<void>
}

/**
 * `agentCmd agent` (or this checkout's `bun src/cli.ts agent`; a leading `bun` is this bun) in a process
 * of its own, at log level warn, with a /healthz port, shipping `databases` to `endpoint` every `interval` seconds.
 */
export async function startAgentProcess(o: {
  agentCmd: string
  endpoint: string
  apiKey: string
  interval: number
  databases: { name: string; dsn: string }[]
  tmpPrefix: string
  /** More lines of each database's entry (without their indentation). */
  entry?: string[]
}): Promise<AgentProcess> {
  const dir = mkdtempSync(join(tmpdir(), o.tmpPrefix))
  const healthPort = await freePort()
  const configPath = join(dir, 'config.yaml')
  writeFileSync(
    configPath,
    [
      'api:',
      `  endpoint: ${o.endpoint}`,
      `  key: ${o.apiKey}`,
      'health:',
      `  listen_addr: 127.0.0.1:${healthPort}`,
      'databases:',
      ...o.databases.flatMap((d) => [
        `  - name: ${d.name}`,
        `    dsn: ${d.dsn}`,
        `    poll_interval: ${o.interval}s`,
        ...(o.entry ?? []).map((line) => `    ${line}`),
      ]),
      '',
    ].join('\n'),
  )
  const parts = o.agentCmd.split(/\s+/).filter(Boolean)
  const command = !o.agentCmd
    ? [process.execPath, 'src/cli.ts']
    : parts[0] === 'bun'
      ? [process.execPath, ...parts.slice(1)]
      : parts
  const stderr: string[] = []
  const proc = Bun.spawn([...command, 'agent', '--config', configPath, '--buffer-dir', dir, '--log-level', 'warn'], {
    cwd: repoRoot,
    stdout: 'ignore',
    stderr: 'pipe',
    env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DBM_'))) as Record<
      string,
      string
    >,
  })
  void (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of proc.stderr) stderr.push(decoder.decode(chunk))
  })()
  return {
    pid: proc.pid,
    healthPort,
    warnings: () =>
      stderr
        .join('')
        .split('\n')
        .filter((l) => / (WARN|ERROR) /.test(l)),
    async waitForCycle(cycle, count, timeoutS, everyMs) {
      const deadline = Date.now() + timeoutS * 1000
      while ((await count()) < cycle) {
        if (proc.exitCode !== null)
          throw new Error(`the agent exited with ${proc.exitCode}:\n${stderr.join('').slice(-2000)}`)
        if (Date.now() > deadline)
          throw new Error(`cycle ${cycle}: no batch within ${timeoutS} s:\n${stderr.join('').slice(-2000)}`)
        await Bun.sleep(everyMs)
      }
    },
    async stop() {
      proc.kill('SIGTERM')
      const killer = setTimeout(() => proc.kill('SIGKILL'), 10_000)
      await proc.exited
      clearTimeout(killer)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
