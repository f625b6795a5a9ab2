// One PostgreSQL database's collection loop: connect, run every enabled collector under a deadline
// each poll interval, ship the batch, and watch the connection (ping every 10 s, reconnect after 3
// failures). A collector that fails is reported for itself; the cycle goes on. If the server behind
// the DSN changes identity (system identifier or start time), deltas restart from a new baseline.
import postgres from 'postgres'
import type { DatabaseSettings, IngestBatch } from '../shared/wire.ts'
import { postgresCollectors } from './collectors/postgres/index.ts'
import type { AgentLogger, PostgresCollector, PostgresContext } from './collectors/types.ts'
import type { DatabaseConfig } from './config.ts'
import type { Shipper } from './shipper.ts'
import { VERSION } from '../version.ts'

export interface RunnerTimings {
  /** Health ping period (spec: 10 s). */
  pingIntervalMs: number
  /** Consecutive failed pings before reconnecting (spec: 3). */
  reconnectAfterFailures: number
  /** Server-side deadline of each statement. */
  statementTimeoutMs: number
  /** Deadline of one collector's whole run. */
  collectorDeadlineMs: number
  connectTimeoutS: number
}

export const defaultTimings: RunnerTimings = {
  pingIntervalMs: 10_000,
  reconnectAfterFailures: 3,
  statementTimeoutMs: 5_000,
  collectorDeadlineMs: 10_000,
  connectTimeoutS: 10,
}

export type CollectorPlan = { collector: PostgresCollector; run: true } | { collector: PostgresCollector; run: false; reason: string }

/** Which collectors run against a server of `major`, and why the others do not. */
export function planCollectors(config: Pick<DatabaseConfig, 'enabledCollectors'>, major: number, settings?: DatabaseSettings): CollectorPlan[] {
  return postgresCollectors.map((collector): CollectorPlan => {
    if (collector.minVersion !== undefined && major < collector.minVersion) {
      return { collector, run: false, reason: `needs PostgreSQL ${collector.minVersion}+` }
    }
    if (config.enabledCollectors && !config.enabledCollectors.includes(collector.name)) {
      return { collector, run: false, reason: 'not in enabled_collectors' }
    }
    if (settings?.disabled_collectors.includes(collector.name)) return { collector, run: false, reason: 'disabled on the server' }
    if (collector.name === 'explain_plans' && settings && !settings.collect_explain_plans) {
      return { collector, run: false, reason: 'collect_explain_plans is off on the server' }
    }
    if (collector.name === 'replication' && settings && !settings.collect_replication) {
      return { collector, run: false, reason: 'collect_replication is off on the server' }
    }
    return { collector, run: true }
  })
}

export interface RunnerStatus {
  name: string
  engine: 'postgres'
  state: 'starting' | 'connected' | 'disconnected' | 'stopped'
  server_version: string | null
  last_cycle_at: string | null
  last_error: string | null
  buffered: number
  collectors: Record<string, string>
}

function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/** Host and port of a postgres:// DSN, for the batch's database description. */
export function dsnEndpoint(dsn: string): { host: string; port: number } {
  try {
    const url = new URL(dsn)
    return { host: decodeURIComponent(url.hostname) || 'localhost', port: Number(url.port) || 5432 }
  } catch {
    return { host: 'localhost', port: 5432 }
  }
}

export class PostgresRunner {
  private sql: postgres.Sql | undefined
  private ctxBase: Omit<PostgresContext, 'now' | 'settings'> | undefined
  private identity: string | undefined
  private settings: DatabaseSettings | undefined
  private stopSamplers: (() => void)[] = []
  private cycleTimer: ReturnType<typeof setTimeout> | undefined
  private pingTimer: ReturnType<typeof setInterval> | undefined
  private failedPings = 0
  private stopped = false
  private running: Promise<void> | undefined
  private readonly state = new Map<string, unknown>()
  readonly status: RunnerStatus

  constructor(
    readonly config: DatabaseConfig,
    private readonly shipper: Shipper,
    private readonly log: AgentLogger,
    private readonly timings: RunnerTimings = defaultTimings,
  ) {
    this.status = {
      name: config.name,
      engine: 'postgres',
      state: 'starting',
      server_version: null,
      last_cycle_at: null,
      last_error: null,
      buffered: 0,
      collectors: {},
    }
  }

  /** Applies the server-side settings of the latest accepted batch from the next cycle on. */
  applySettings(settings: DatabaseSettings): void {
    this.settings = settings
  }

  private get pollIntervalMs(): number {
    return this.settings ? this.settings.poll_interval_seconds * 1000 : this.config.pollIntervalMs
  }

  start(): void {
    this.shipper.start()
    this.pingTimer = setInterval(() => void this.ping(), this.timings.pingIntervalMs)
    this.schedule(0)
  }

  private schedule(delayMs: number) {
    if (this.stopped) return
    this.cycleTimer = setTimeout(() => {
      this.running = this.cycle().finally(() => {
        this.running = undefined
        this.schedule(this.pollIntervalMs)
      })
    }, delayMs)
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.cycleTimer)
    clearInterval(this.pingTimer)
    await this.running
    await this.disconnect()
    await this.shipper.stop()
    this.status.state = 'stopped'
  }

  private async connect(): Promise<void> {
    const sql = postgres(this.config.dsn, {
      max: 3,
      connect_timeout: this.timings.connectTimeoutS,
      idle_timeout: 120,
      max_lifetime: 60 * 60,
      onnotice: () => {},
      connection: {
        application_name: 'dbm-agent',
        statement_timeout: this.timings.statementTimeoutMs,
        lock_timeout: Math.min(1000, this.timings.statementTimeoutMs),
        idle_in_transaction_session_timeout: 10_000,
      },
    })
    try {
      const [info] = await withDeadline(
        sql`SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version,
                   current_database() AS database, pg_postmaster_start_time()::text AS started`,
        this.timings.connectTimeoutS * 1000,
        'connecting',
      )
      let systemId = '?'
      try {
        const [row] = await sql`SELECT system_identifier::text AS id FROM pg_control_system()`
        systemId = row?.id ?? '?'
      } catch {
        // pg_control_system() needs superuser or pg_monitor-like grants; the start time still tells restarts apart.
      }
      const identity = `${systemId}@${info!.started}`
      if (this.identity !== undefined && this.identity !== identity) {
        this.log.warn(
          'the server behind this DSN changed identity (another node, or a restart); statistics restart from a new baseline. Point the agent at one single node, not a cluster, load-balancer or proxy endpoint',
          { database: this.config.name, before: this.identity, now: identity },
        )
        this.state.clear()
      }
      this.identity = identity
      this.sql = sql
      this.status.server_version = info!.version
      this.ctxBase = {
        name: this.config.name,
        database: info!.database,
        sql,
        versionNum: info!.num,
        major: Math.floor(info!.num / 10_000),
        state: this.state,
        pgLogDir: this.config.pgLogDir,
        log: this.log,
      }
      this.failedPings = 0
      this.startSamplers()
      if (this.status.state !== 'connected') this.log.info('connected', { database: this.config.name, server_version: info!.version })
      this.status.state = 'connected'
    } catch (e) {
      await sql.end({ timeout: 1 }).catch(() => {})
      throw e
    }
  }

  private context(now: number): PostgresContext {
    return {
      ...this.ctxBase!,
      now,
      settings: {
        collectExplainPlans: this.settings?.collect_explain_plans ?? true,
        collectReplication: this.settings?.collect_replication ?? true,
      },
    }
  }

  private startSamplers() {
    for (const stop of this.stopSamplers) stop()
    this.stopSamplers = []
    for (const plan of planCollectors(this.config, this.ctxBase!.major, this.settings)) {
      if (plan.run && plan.collector.start) this.stopSamplers.push(plan.collector.start(this.context(Date.now())))
    }
  }

  private async disconnect(): Promise<void> {
    for (const stop of this.stopSamplers) stop()
    this.stopSamplers = []
    const sql = this.sql
    this.sql = undefined
    this.ctxBase = undefined
    await sql?.end({ timeout: 2 }).catch(() => {})
  }

  /** Health ping; after enough consecutive failures the connection is rebuilt at the next cycle. */
  private async ping(): Promise<void> {
    const sql = this.sql
    if (!sql) return
    try {
      await withDeadline(sql`SELECT 1`, this.timings.statementTimeoutMs, 'health ping')
      this.failedPings = 0
    } catch (e) {
      this.failedPings++
      this.log.warn('health ping failed', { database: this.config.name, failures: this.failedPings, cause: (e as Error).message })
      if (this.failedPings >= this.timings.reconnectAfterFailures) {
        this.log.warn('reconnecting after consecutive failed pings', { database: this.config.name, failures: this.failedPings })
        this.status.state = 'disconnected'
        await this.disconnect()
      }
    }
  }

  /** One collection cycle; public so tests can drive cycles directly. */
  async cycle(): Promise<void> {
    const now = Date.now()
    this.status.last_cycle_at = new Date(now).toISOString()
    if (!this.sql) {
      try {
        await this.connect()
      } catch (e) {
        const message = (e as Error).message
        if (this.status.state !== 'disconnected' || this.status.last_error !== message) {
          this.log.error('cannot connect', { database: this.config.name, cause: message })
        }
        this.status.state = 'disconnected'
        this.status.last_error = message
        return
      }
    } else {
      await this.checkIdentity()
    }
    const ctx = this.context(now)
    const batch: IngestBatch = {
      batch_id: crypto.randomUUID(),
      collected_at: now,
      interval_seconds: this.pollIntervalMs / 1000,
      agent_version: VERSION,
      database: { name: this.config.name, engine: 'postgres', engine_version: this.status.server_version ?? undefined, ...dsnEndpoint(this.config.dsn) },
    }
    const errors: { collector: string; message: string }[] = []
    for (const plan of planCollectors(this.config, ctx.major, this.settings)) {
      if (!plan.run) {
        this.status.collectors[plan.collector.name] = `skipped: ${plan.reason}`
        continue
      }
      const started = performance.now()
      try {
        const sections = await withDeadline(plan.collector.collect(ctx), this.timings.collectorDeadlineMs, plan.collector.name)
        Object.assign(batch, sections)
        this.status.collectors[plan.collector.name] = `ok in ${Math.round(performance.now() - started)} ms`
      } catch (e) {
        const message = (e as Error).message
        errors.push({ collector: plan.collector.name, message: message.slice(0, 2000) })
        this.status.collectors[plan.collector.name] = `failed: ${message}`
        this.log.warn('collector failed', { database: this.config.name, collector: plan.collector.name, cause: message })
      }
    }
    if (errors.length > 0) batch.collector_errors = errors
    this.status.last_error = errors.length > 0 ? `${errors.length} collector(s) failed` : null
    await this.shipper.send(batch)
    this.status.buffered = this.shipper.buffered()
  }

  /** Detects a restart or a different node behind the DSN between cycles. */
  private async checkIdentity(): Promise<void> {
    try {
      const [row] = await withDeadline(this.sql!`SELECT pg_postmaster_start_time()::text AS started`, this.timings.statementTimeoutMs, 'identity check')
      if (this.identity && !this.identity.endsWith(`@${row!.started}`)) {
        // Reconnect to read the full identity; connect() logs the change and clears the baselines.
        await this.disconnect()
        await this.connect()
      }
    } catch {
      // The ping loop deals with an unreachable server.
    }
  }
}
