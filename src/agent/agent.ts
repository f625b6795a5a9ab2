// `dbm agent`: one runner per configured database, the optional /healthz server, and hot reload.
// A reload that fails validation keeps the running configuration; a valid one starts, stops or
// restarts only the databases whose entry changed (all of them when `api` changed).
import { type StatWatcher, unwatchFile, watchFile } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../shared/log.ts'
import { type AgentConfig, ConfigError, type DatabaseConfig, loadAgentConfig } from './config.ts'
import { PostgresRunner } from './postgres-runner.ts'
import { type Runner, type RunnerStatus, type RunnerTimings, defaultTimings } from './runner.ts'
import { Shipper } from './shipper.ts'
import { stateFileName } from './state.ts'
import { VERSION } from '../version.ts'

export interface AgentTimings extends RunnerTimings {
  /** Buffer retry period (spec: 30 s). */
  retryIntervalMs: number
  /** How long a buffered batch is kept (spec: 1 h). */
  bufferMaxAgeMs: number
  requestTimeoutMs: number
  /** How often the config file is checked for changes. */
  watchIntervalMs: number
}

export const defaultAgentTimings: AgentTimings = {
  ...defaultTimings,
  retryIntervalMs: 30_000,
  bufferMaxAgeMs: 60 * 60_000,
  requestTimeoutMs: 15_000,
  watchIntervalMs: 1_000,
}

export interface AgentOptions {
  configPath: string
  /** Where service_buffer_{name}.db files live. */
  bufferDir: string
  log: Logger
  timings?: Partial<AgentTimings>
}

interface Running {
  config: DatabaseConfig
  runner: Runner<unknown>
}

const sameEntry = (a: DatabaseConfig, b: DatabaseConfig) => JSON.stringify(a) === JSON.stringify(b)

export class Agent {
  private config: AgentConfig | undefined
  private readonly running = new Map<string, Running>()
  private health: ReturnType<typeof Bun.serve> | undefined
  private watcher: StatWatcher | undefined
  private reloading: Promise<void> = Promise.resolve()
  readonly timings: AgentTimings

  constructor(private readonly options: AgentOptions) {
    this.timings = { ...defaultAgentTimings, ...options.timings }
  }

  /** Loads the config (throwing ConfigError when invalid), starts every database and the health server. */
  async start(): Promise<void> {
    this.config = loadAgentConfig(this.options.configPath)
    this.options.log.info('dbm agent starting', {
      version: VERSION,
      config: this.options.configPath,
      databases: this.config.databases.map((d) => d.name).join(','),
      api: this.config.api.endpoint,
    })
    // The databases' cycles are spread over the first 10 s (or the poll interval, when shorter), so that
    // they do not all query, allocate and post at the same moment.
    const count = this.config.databases.length
    for (const [i, db] of this.config.databases.entries()) await this.startDatabase(this.config, db, (i * Math.min(db.pollIntervalMs, 10_000)) / count)
    this.startHealth(this.config)
    this.watcher = watchFile(this.options.configPath, { interval: this.timings.watchIntervalMs }, (curr, prev) => {
      if (curr.mtimeMs !== prev.mtimeMs || curr.size !== prev.size || curr.ino !== prev.ino) void this.reload()
    })
  }

  /** The runner class of an engine; ClickHouse's (and its HTTP client) is loaded only when a ClickHouse database is configured. */
  private async runnerClass(db: DatabaseConfig) {
    if (db.engine === 'clickhouse') return (await import('./clickhouse-runner.ts')).ClickHouseRunner
    return PostgresRunner
  }

  private async startDatabase(config: AgentConfig, db: DatabaseConfig, delayMs = 0) {
    const Engine = await this.runnerClass(db)
    let runner: Runner<unknown> | undefined = undefined
    const shipper = new Shipper({
      endpoint: config.api.endpoint,
      apiKey: config.api.key,
      databaseName: db.name,
      bufferDir: this.options.bufferDir,
      retryIntervalMs: this.timings.retryIntervalMs,
      bufferMaxAgeMs: this.timings.bufferMaxAgeMs,
      requestTimeoutMs: this.timings.requestTimeoutMs,
      log: this.options.log,
      onAccepted: (response) => runner?.applySettings(response.settings),
    })
    runner = new Engine(db, shipper, this.options.log, this.timings, join(this.options.bufferDir, stateFileName(db.name))) as Runner<unknown>
    this.running.set(db.name, { config: db, runner })
    runner.start(delayMs)
  }

  private async stopDatabase(name: string) {
    const entry = this.running.get(name)
    this.running.delete(name)
    await entry?.runner.stop()
  }

  /** Re-reads the config file and applies the difference; keeps the running config when invalid. */
  reload(): Promise<void> {
    this.reloading = this.reloading.then(() => this.applyReload())
    return this.reloading
  }

  private async applyReload(): Promise<void> {
    const { log } = this.options
    let next: AgentConfig
    try {
      next = loadAgentConfig(this.options.configPath)
    } catch (e) {
      log.error('config reload failed; keeping the running configuration', {
        config: this.options.configPath,
        cause: e instanceof ConfigError ? e.message : (e as Error).message,
      })
      return
    }
    const previous = this.config!
    const apiChanged = JSON.stringify(previous.api) !== JSON.stringify(next.api)
    const wanted = new Map(next.databases.map((d) => [d.name, d]))
    const stopped: string[] = []
    const started: string[] = []
    const restarted: string[] = []
    for (const [name, entry] of [...this.running]) {
      const want = wanted.get(name)
      if (!want) {
        await this.stopDatabase(name)
        stopped.push(name)
      } else if (apiChanged || !sameEntry(entry.config, want)) {
        await this.stopDatabase(name)
        await this.startDatabase(next, want)
        restarted.push(name)
      }
    }
    for (const db of next.databases) {
      if (!this.running.has(db.name)) {
        await this.startDatabase(next, db)
        started.push(db.name)
      }
    }
    if (JSON.stringify(previous.health) !== JSON.stringify(next.health)) {
      this.health?.stop(true)
      this.health = undefined
      this.startHealth(next)
    }
    this.config = next
    log.info('config reloaded', { started: started.join(',') || 'none', stopped: stopped.join(',') || 'none', restarted: restarted.join(',') || 'none' })
  }

  status(): { status: 'ok' | 'degraded'; version: string; databases: RunnerStatus[] } {
    const entries = [...this.running.values()]
    const databases = entries.map((entry) => ({ ...entry.runner.status }))
    const degraded = databases.some((d) => d.state !== 'connected') || entries.some((e) => e.runner.apiRefused)
    return { status: degraded ? 'degraded' : 'ok', version: VERSION, databases }
  }

  private startHealth(config: AgentConfig) {
    const { hostname, port } = config.health
    if (port === undefined) return
    try {
      this.health = Bun.serve({
        hostname: hostname ?? '0.0.0.0',
        port,
        reusePort: false,
        fetch: (req) => {
          const path = new URL(req.url).pathname
          if (path === '/healthz') return Response.json(this.status())
          return Response.json({ error: 'not found' }, { status: 404 })
        },
      })
      this.options.log.info('health endpoint listening', { address: `${this.health.hostname}:${this.health.port}` })
    } catch (e) {
      // An optional part that fails is logged and left off; collection goes on.
      this.options.log.error('health endpoint not started', { address: `${hostname ?? '0.0.0.0'}:${port}`, cause: (e as Error).message })
    }
  }

  /** The health server's port (tests listen on port 0). */
  get healthPort(): number | undefined {
    return this.health?.port
  }

  async stop(): Promise<void> {
    if (this.watcher) unwatchFile(this.options.configPath)
    this.watcher = undefined
    await this.reloading
    await Promise.all([...this.running.keys()].map((name) => this.stopDatabase(name)))
    this.health?.stop(true)
    this.health = undefined
  }

  /** Runs one cycle of every database now (tests; --check uses its own path). */
  async cycleAll(): Promise<void> {
    await Promise.all([...this.running.values()].map((e) => e.runner.cycle()))
  }

  runner(name: string): Runner<unknown> | undefined {
    return this.running.get(name)?.runner
  }
}
