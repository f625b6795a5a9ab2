// `dbm agent`: one runner per configured database, the optional /healthz and /metrics server (health.
// listen_addr; /metrics in the Prometheus text format, metrics.ts), and hot reload.
// A reload that fails validation keeps the running configuration; a valid one starts, stops or
// restarts only the databases whose entry changed (all of them when `api` changed).
import { type StatWatcher, unwatchFile, watchFile } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../shared/log.ts'
import { type AgentConfig, ConfigError, type DatabaseConfig, loadAgentConfig } from './config.ts'
import { ActionPoller } from './actions.ts'
import { PostgresRunner } from './postgres-runner.ts'
import { type Runner, type RunnerStatus, type RunnerTimings, defaultTimings } from './runner.ts'
import { redactSecrets } from '../shared/redact.ts'
import { ApiHealth, type ShippingCounters, type ShippingStatus, Shipper, newShippingCounters } from './shipper.ts'
import { AgentMetrics } from './metrics.ts'
import { othersMayWrite } from './own-file.ts'
import { EXPOSITION_CONTENT_TYPE } from '../shared/prometheus.ts'
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
  /** The long-poll's wait for the dashboard's actions, seconds (actions.ts). */
  actionWaitSeconds: number
}

export const defaultAgentTimings: AgentTimings = {
  ...defaultTimings,
  retryIntervalMs: 30_000,
  bufferMaxAgeMs: 60 * 60_000,
  requestTimeoutMs: 15_000,
  watchIntervalMs: 1_000,
  actionWaitSeconds: 20,
}

export interface AgentOptions {
  configPath: string
  /**
   * The config itself, built in memory (`dbm local`): used instead of reading configPath (which then
   * only names it in the log), and never reloaded.
   */
  config?: AgentConfig
  /** Where service_buffer_{name}.db files live. */
  bufferDir: string
  log: Logger
  timings?: Partial<AgentTimings>
}

interface Running {
  config: DatabaseConfig
  runner: Runner<unknown>
  shipper: Shipper
  /** PostgreSQL: the dashboard's actions (actions.ts). */
  actions?: ActionPoller
}

/** GET /healthz of the agent. */
export interface AgentStatus {
  status: 'ok' | 'degraded'
  /** Why the status is degraded; empty when ok. */
  reasons: string[]
  version: string
  api: {
    endpoint: string
    reachable: boolean | null
    last_success_at: string | null
    last_failure_at: string | null
    last_error: string | null
  }
  databases: (RunnerStatus & ShippingStatus)[]
}

/** How long a dropped batch keeps /healthz degraded. */
export const DROPS_DEGRADE_MS = 15 * 60_000

const sameEntry = (a: DatabaseConfig, b: DatabaseConfig) => JSON.stringify(a) === JSON.stringify(b)

export class Agent {
  private config: AgentConfig | undefined
  private readonly running = new Map<string, Running>()
  private health: ReturnType<typeof Bun.serve> | undefined
  private watcher: StatWatcher | undefined
  private reloading: Promise<void> = Promise.resolve()
  /** The API's reachability, shared by the shippers of one endpoint. */
  private apiHealth: ApiHealth | undefined
  /** Dropped and lost batches per database, kept across restarts of its runner. */
  private readonly shippingCounters = new Map<string, ShippingCounters>()
  readonly timings: AgentTimings
  /** GET /metrics: the series of every database this agent ran (counters kept across restarts of one). */
  readonly metrics = new AgentMetrics(() =>
    [...this.running].map(([database, { runner, shipper }]) => ({
      database,
      batches: () => shipper.buffered(),
      bytes: () => shipper.bufferBytes(),
      connected: () => runner.status.state === 'connected',
    })),
  )

  constructor(private readonly options: AgentOptions) {
    this.timings = { ...defaultAgentTimings, ...options.timings }
  }

  /** Loads the config (throwing ConfigError when invalid), starts every database and the health server. */
  async start(): Promise<void> {
    this.config = this.options.config ?? loadAgentConfig(this.options.configPath)
    this.options.log.info('dbm agent starting', {
      version: VERSION,
      config: this.options.configPath,
      databases: this.config.databases.map((d) => d.name).join(','),
      api: redactSecrets(this.config.api.endpoint),
    })
    if (othersMayWrite(this.options.bufferDir)) {
      this.options.log.warn(
        'other users may create files in the buffer directory: buffer or state files they plant there are refused, which stops buffering; give the agent a directory of its own (--buffer-dir)',
        { buffer_dir: this.options.bufferDir },
      )
    }
    // The databases' cycles are spread over the first 10 s (or the poll interval, when shorter), so that
    // they do not all query, allocate and post at the same moment.
    const count = this.config.databases.length
    for (const [i, db] of this.config.databases.entries())
      await this.startDatabase(this.config, db, (i * Math.min(db.pollIntervalMs, 10_000)) / count)
    this.startHealth(this.config)
    if (this.options.config) return
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
    let runner: Runner<unknown> | undefined
    let accepted = false
    const actions =
      db.engine === 'postgres'
        ? new ActionPoller({
            endpoint: config.api.endpoint,
            apiKey: config.api.key,
            database: db,
            log: this.options.log,
            waitSeconds: this.timings.actionWaitSeconds,
          })
        : undefined
    const shipper = new Shipper({
      endpoint: config.api.endpoint,
      apiKey: config.api.key,
      databaseName: db.name,
      bufferDir: this.options.bufferDir,
      retryIntervalMs: this.timings.retryIntervalMs,
      // Retry rounds start up to one poll interval late, at random: a fleet that lost the server together comes back spread out.
      jitterMs: Math.min(db.pollIntervalMs, this.timings.retryIntervalMs),
      bufferMaxAgeMs: this.timings.bufferMaxAgeMs,
      requestTimeoutMs: this.timings.requestTimeoutMs,
      log: this.options.log,
      onAccepted: (response) => {
        runner?.applySettings(response.settings)
        // The first accepted batch registered the database, which the poller's first asks may have missed.
        if ((response.actions_pending ?? 0) > 0 || !accepted) actions?.poke()
        accepted = true
      },
      bufferMaxBytes: () => (this.config ?? config).buffer.maxBytes,
      api: this.apiHealthFor(config.api.endpoint),
      counters: this.countersFor(db.name),
      metrics: this.metrics.shipper(db.name),
    })
    runner = new Engine(
      db,
      shipper,
      this.options.log,
      this.timings,
      join(this.options.bufferDir, stateFileName(db.name)),
    ) as Runner<unknown>
    runner.metrics = this.metrics.runner(db.name, db.exporter ? db.engine : undefined)
    this.running.set(db.name, { config: db, runner, shipper, actions })
    runner.start(delayMs)
    actions?.start()
  }

  private async stopDatabase(name: string) {
    const entry = this.running.get(name)
    this.running.delete(name)
    await Promise.all([entry?.runner.stop(), entry?.actions?.stop()])
  }

  /** Re-reads the config file and applies the difference; keeps the running config when invalid. */
  reload(): Promise<void> {
    if (this.options.config) return this.reloading
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
    // Databases stop and restart side by side: a hung one costs its own stop (about the cancel grace),
    // never another's.
    const changes: Promise<void>[] = []
    for (const [name, entry] of [...this.running]) {
      const want = wanted.get(name)
      if (!want) {
        changes.push(this.stopDatabase(name))
        stopped.push(name)
      } else if (apiChanged || !sameEntry(entry.config, want)) {
        changes.push(this.stopDatabase(name).then(() => this.startDatabase(next, want)))
        restarted.push(name)
      } else {
        // Unchanged: a login the database refused is tried again now (the role's password may be fixed).
        entry.runner.retryNow()
      }
    }
    for (const db of next.databases) {
      if (!this.running.has(db.name) && !restarted.includes(db.name)) {
        changes.push(this.startDatabase(next, db))
        started.push(db.name)
      }
    }
    await Promise.all(changes)
    if (JSON.stringify(previous.health) !== JSON.stringify(next.health)) {
      this.health?.stop(true)
      this.health = undefined
      this.startHealth(next)
    }
    this.config = next
    log.info('config reloaded', {
      started: started.join(',') || 'none',
      stopped: stopped.join(',') || 'none',
      restarted: restarted.join(',') || 'none',
    })
  }

  private apiHealthFor(endpoint: string): ApiHealth {
    if (this.apiHealth?.endpoint !== endpoint) this.apiHealth = new ApiHealth(endpoint)
    return this.apiHealth
  }

  private countersFor(name: string): ShippingCounters {
    let counters = this.shippingCounters.get(name)
    if (!counters) this.shippingCounters.set(name, (counters = newShippingCounters()))
    return counters
  }

  /**
   * The health status: degraded while a database is not connected, the API refuses the key, a buffer
   * is failing, a batch was dropped in the last DROPS_DEGRADE_MS, or the API has been unreachable (or a batch buffered) for longer than one retry interval.
   */
  status(): AgentStatus {
    const now = Date.now()
    const graceMs = this.timings.retryIntervalMs
    const reasons: string[] = []
    const api = this.apiHealth ?? new ApiHealth(this.config?.api.endpoint ?? '')
    if (api.failingSince !== null && now - api.failingSince > graceMs) {
      reasons.push(`every request to the API has failed for ${Math.round((now - api.failingSince) / 1000)} s`)
    }
    const databases = [...this.running.values()].map(({ runner, shipper }) => {
      const database = { ...runner.status, ...shipper.status() }
      if (database.state !== 'connected') reasons.push(`${database.name}: ${database.state}`)
      if (shipper.refusal() !== null) reasons.push(`${database.name}: the API refuses the key or the batches`)
      if (database.buffer_error !== null) reasons.push(`${database.name}: the buffer is failing`)
      // Dropping batches is never healthy: degraded while the latest drop is recent.
      const dropped = database.last_drop === null ? null : Date.parse(database.last_drop.at)
      if (dropped !== null && now - dropped < DROPS_DEGRADE_MS) {
        reasons.push(
          `${database.name}: the API refused batches as malformed and they were dropped (${database.dropped_batches} in all; last ${Math.round((now - dropped) / 1000)} s ago: ${database.last_drop!.reason})`,
        )
      }
      const oldest = database.oldest_buffered_at === null ? null : Date.parse(database.oldest_buffered_at)
      if (oldest !== null && now - oldest > graceMs)
        reasons.push(`${database.name}: batches buffered for ${Math.round((now - oldest) / 1000)} s`)
      return database
    })
    return {
      status: reasons.length > 0 ? 'degraded' : 'ok',
      reasons,
      version: VERSION,
      api: {
        endpoint: redactSecrets(api.endpoint),
        reachable: api.reachable,
        last_success_at: api.lastSuccessAt === null ? null : new Date(api.lastSuccessAt).toISOString(),
        last_failure_at: api.lastFailureAt === null ? null : new Date(api.lastFailureAt).toISOString(),
        last_error: api.lastError,
      },
      databases,
    }
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
          // Every text in it (errors of drivers and of the API among them) without a password.
          const text = (value: unknown) => (typeof value === 'string' ? redactSecrets(value) : value)
          if (path === '/healthz')
            return new Response(
              JSON.stringify(this.status(), (_, v) => text(v)),
              { headers: { 'content-type': 'application/json' } },
            )
          if (path === '/metrics')
            return new Response(this.metrics.registry.expose(), {
              headers: { 'content-type': EXPOSITION_CONTENT_TYPE },
            })
          return Response.json({ error: 'not found' }, { status: 404 })
        },
      })
      this.options.log.info('health endpoint listening', { address: `${this.health.hostname}:${this.health.port}` })
    } catch (e) {
      // An optional part that fails is logged and left off; collection goes on.
      this.options.log.error('health endpoint not started', {
        address: `${hostname ?? '0.0.0.0'}:${port}`,
        cause: (e as Error).message,
      })
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
