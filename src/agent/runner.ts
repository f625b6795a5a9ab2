// One database's collection loop, whatever the engine: connect, run every enabled collector under a
// deadline each poll interval, ship the batch, and watch the connection (ping every 10 s, reconnect
// after 3 failures). A collector that fails is reported for itself; the cycle goes on. When a
// reconnect finds another server behind the DSN (a different lineage), the runner logs the
// single-node warning and the collectors restart their deltas from a new baseline; a restart of the
// same server keeps the baselines (the collectors tell resets from the counters themselves).
// The collectors' state is staged per run and committed only when the run finished within its
// deadline, and saved next to the buffer after each cycle (src/agent/state.ts).
// The engine parts (how to connect, what identifies the server, the collectors' context) are a
// Session opened by the engine's runner: postgres-runner.ts and clickhouse-runner.ts.
import type { EngineName } from '../shared/collectors.ts'
import type { DatabaseSettings, IngestBatch } from '../shared/wire.ts'
import type { AgentLogger, Collector, CollectorState } from './collectors/types.ts'
import type { DatabaseConfig } from './config.ts'
import type { Shipper } from './shipper.ts'
import { batchParts } from './split.ts'
import { type StateOwner, StagedState, loadState, saveState } from './state.ts'
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

export type CollectorPlan<Ctx> = { collector: Collector<Ctx>; run: true } | { collector: Collector<Ctx>; run: false; reason: string }

const ENGINE_LABEL: Record<EngineName, string> = { postgres: 'PostgreSQL', clickhouse: 'ClickHouse' }

/** Which of `collectors` run against a server of `major`, and why the others do not. */
export function planFor<Ctx>(
  collectors: Collector<Ctx>[],
  config: Pick<DatabaseConfig, 'enabledCollectors'>,
  major: number,
  settings?: DatabaseSettings,
): CollectorPlan<Ctx>[] {
  return collectors.map((collector): CollectorPlan<Ctx> => {
    if (collector.minVersion !== undefined && major < collector.minVersion) {
      return { collector, run: false, reason: `needs ${ENGINE_LABEL[collector.engine]} ${collector.minVersion}+` }
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
  engine: EngineName
  state: 'starting' | 'connected' | 'disconnected' | 'stopped'
  server_version: string | null
  last_cycle_at: string | null
  last_error: string | null
  buffered: number
  collectors: Record<string, string>
}

/** Rejects when `promise` takes longer than `ms`: with "<what> took longer than <ms> ms", or `what` itself when `whole`. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string, whole = false): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(whole ? what : `${what} took longer than ${ms} ms`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/** What the collectors of every engine get from the runner. */
export interface SessionBase {
  name: string
  state: CollectorState
  notes: Map<string, string>
  log: AgentLogger
}

/** An open connection to one server, as the runner sees it. */
export interface Session<Ctx> {
  /** The server's version text, for the batch and the health status. */
  version: string
  /** Major version, for the collectors' minimum versions. */
  major: number
  /** What tells this server apart from another one behind the same DSN, and from its own restart. */
  identity: string
  /** What survives a restart of the same server (PostgreSQL's system identifier); null when it cannot be read. */
  lineage: string | null
  context(now: number, settings: DatabaseSettings | undefined): Ctx
  /** Throws when the server does not answer. */
  ping(): Promise<void>
  /** False when the server behind the connection is no longer the one opened (a restart, a failover). */
  sameServer(): Promise<boolean>
  close(): Promise<void>
}

export abstract class Runner<Ctx> {
  private session: Session<Ctx> | undefined
  private identity: string | undefined
  private lineage: string | null | undefined
  private settings: DatabaseSettings | undefined
  private stopSamplers: (() => void)[] = []
  private cycleTimer: ReturnType<typeof setTimeout> | undefined
  private pingTimer: ReturnType<typeof setInterval> | undefined
  private failedPings = 0
  private stopped = false
  private running: Promise<void> | undefined
  /** The collectors' memory across cycles (previous samples, watermarks). */
  protected readonly state = new Map<string, unknown>()
  /** The collectors' notes for the health status (SessionBase.notes). */
  private readonly notes = new Map<string, string>()
  readonly status: RunnerStatus

  protected abstract readonly collectors: Collector<Ctx>[]
  /** Connects; the session's context carries `base`. */
  protected abstract open(base: SessionBase): Promise<Session<Ctx>>
  /** Host and port for the batch's database description. */
  protected abstract endpoint(): { host: string; port: number }
  /** What the DSN points at, without its password: a saved state is used only for the same target. */
  protected abstract target(): string

  /** The saved state read at construction, applied at the first connection if it belongs to that server. */
  private saved: ReturnType<typeof loadState> = { kind: 'none' }
  /** The saved-state file failed to write: logged once until it works again. */
  private saveFailing = false

  constructor(
    readonly config: DatabaseConfig,
    private readonly shipper: Shipper,
    protected readonly log: AgentLogger,
    protected readonly timings: RunnerTimings = defaultTimings,
    /** Where the collectors' state is saved between runs (src/agent/state.ts); none: kept in memory only. */
    private readonly stateFile?: string,
  ) {
    this.status = {
      name: config.name,
      engine: config.engine,
      state: 'starting',
      server_version: null,
      last_cycle_at: null,
      last_error: null,
      buffered: 0,
      collectors: {},
    }
    if (stateFile) {
      this.saved = loadState(stateFile)
      if (this.saved.kind === 'unusable') {
        this.log.warn('the saved collector state cannot be used; statistics start from a new baseline', {
          database: config.name,
          file: stateFile,
          cause: this.saved.reason,
        })
      }
    }
  }

  /** True while the API refuses this database's batches (a revoked or wrong key): the agent is degraded. */
  get apiRefused(): boolean {
    return this.shipper.refusal() !== null
  }

  /** Applies the server-side settings of the latest accepted batch from the next cycle on. */
  applySettings(settings: DatabaseSettings): void {
    this.settings = settings
  }

  private get pollIntervalMs(): number {
    return this.settings ? this.settings.poll_interval_seconds * 1000 : this.config.pollIntervalMs
  }

  /** Starts the loop; the first cycle runs after `delayMs` (the agent spreads its databases' cycles). */
  start(delayMs = 0): void {
    this.shipper.start()
    this.pingTimer = setInterval(() => void this.ping(), this.timings.pingIntervalMs)
    this.schedule(delayMs)
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
    this.saveState()
    await this.disconnect()
    await this.shipper.stop()
    this.status.state = 'stopped'
  }

  /** The owner of the state: the DSN's target and the server's lineage, once connected. */
  private owner(): StateOwner | undefined {
    if (this.lineage === undefined) return undefined
    return { target: this.target(), lineage: this.lineage }
  }

  /** Saves the committed state next to the buffer; a failure (a full disk) is logged once per episode. */
  private saveState(): void {
    const owner = this.owner()
    if (!this.stateFile || !owner) return
    try {
      saveState(this.stateFile, owner, this.state, Date.now())
      if (this.saveFailing) this.log.info('the collector state is saved again', { database: this.config.name, file: this.stateFile })
      this.saveFailing = false
    } catch (e) {
      if (!this.saveFailing) {
        this.log.error('cannot save the collector state; an agent restart will start from a new baseline', {
          database: this.config.name,
          file: this.stateFile,
          cause: (e as Error).message,
        })
      }
      this.saveFailing = true
    }
  }

  /** Takes over the state saved by an earlier run when it belongs to this target and this server. */
  private adoptSaved(session: Session<Ctx>): void {
    const saved = this.saved
    this.saved = { kind: 'none' }
    if (saved.kind !== 'loaded') return
    const sameTarget = saved.owner.target === this.target()
    const sameServer = saved.owner.lineage !== null && saved.owner.lineage === session.lineage
    if (!sameTarget || !sameServer) {
      this.log.info('the saved collector state belongs to another server or DSN target; statistics start from a new baseline', {
        database: this.config.name,
      })
      return
    }
    for (const [key, value] of saved.entries) this.state.set(key, value)
    this.log.info('statistics go on from the saved baseline', {
      database: this.config.name,
      saved_at: new Date(saved.savedAt).toISOString(),
    })
  }

  private async connect(): Promise<void> {
    const session = await this.open({ name: this.config.name, state: this.state, notes: this.notes, log: this.log })
    if (this.identity === undefined) {
      this.adoptSaved(session)
    } else if (this.identity !== session.identity) {
      if (this.lineage !== null && this.lineage === session.lineage) {
        // The same server restarted: its counters either survived (a clean shutdown) or start from zero,
        // which the collectors tell from the counters and their reset times.
        this.log.info('the server restarted; statistics go on from the last baseline', { database: this.config.name })
      } else {
        this.log.warn(
          'the server behind this DSN changed identity (another node, or a restart that cannot be told apart from one); statistics restart from a new baseline. Point the agent at one single node, not a cluster, load-balancer or proxy endpoint',
          { database: this.config.name, before: this.identity, now: session.identity },
        )
        this.state.clear()
        this.notes.clear()
      }
    }
    this.identity = session.identity
    this.lineage = session.lineage
    this.session = session
    this.status.server_version = session.version
    this.failedPings = 0
    this.startSamplers(session)
    if (this.status.state !== 'connected') this.log.info('connected', { database: this.config.name, server_version: session.version })
    this.status.state = 'connected'
  }

  private plans(session: Session<Ctx>): CollectorPlan<Ctx>[] {
    return planFor(this.collectors, this.config, session.major, this.settings)
  }

  private startSamplers(session: Session<Ctx>) {
    for (const stop of this.stopSamplers) stop()
    this.stopSamplers = []
    for (const plan of this.plans(session)) {
      if (plan.run && plan.collector.start) this.stopSamplers.push(plan.collector.start(session.context(Date.now(), this.settings)))
    }
  }

  private async disconnect(): Promise<void> {
    for (const stop of this.stopSamplers) stop()
    this.stopSamplers = []
    const session = this.session
    this.session = undefined
    await session?.close().catch(() => {})
  }

  /** Health ping; after enough consecutive failures the connection is rebuilt at the next cycle. */
  private async ping(): Promise<void> {
    const session = this.session
    if (!session) return
    try {
      await withDeadline(session.ping(), this.timings.statementTimeoutMs, 'health ping')
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
    if (!this.session) {
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
      await this.checkIdentity(this.session)
    }
    const session = this.session
    if (!session) {
      this.status.state = 'disconnected'
      return
    }
    const ctx = session.context(now, this.settings)
    const batch: IngestBatch = {
      batch_id: crypto.randomUUID(),
      collected_at: now,
      interval_seconds: this.pollIntervalMs / 1000,
      agent_version: VERSION,
      database: {
        name: this.config.name,
        engine: this.config.engine,
        engine_version: session.version,
        ...this.endpoint(),
        ...(Object.keys(this.config.tags).length > 0 ? { tags: this.config.tags } : {}),
      },
    }
    const errors: { collector: string; message: string }[] = []
    for (const plan of this.plans(session)) {
      if (!plan.run) {
        this.status.collectors[plan.collector.name] = `skipped: ${plan.reason}`
        continue
      }
      const started = performance.now()
      // The run's state reaches the runner's only if it finishes within the deadline.
      const staged = new StagedState(this.state)
      try {
        const sections = await withDeadline(plan.collector.collect({ ...ctx, state: staged }), this.timings.collectorDeadlineMs, plan.collector.name)
        staged.commit()
        Object.assign(batch, sections)
        const note = this.notes.get(plan.collector.name)
        this.status.collectors[plan.collector.name] = `ok in ${Math.round(performance.now() - started)} ms${note ? `; ${note}` : ''}`
      } catch (e) {
        const message = (e as Error).message
        errors.push({ collector: plan.collector.name, message: message.slice(0, 2000) })
        this.status.collectors[plan.collector.name] = `failed: ${message}`
        this.log.warn('collector failed', { database: this.config.name, collector: plan.collector.name, cause: message })
      }
    }
    if (errors.length > 0) batch.collector_errors = errors
    batch.collector_notes = [...this.notes].map(([collector, message]) => ({ collector, message: message.slice(0, 2000) }))
    for (const part of batchParts(batch, this.log)) await this.shipper.send(part)
    // Saved once the batch is delivered or buffered: a restart goes on from the deltas it holds.
    this.saveState()
    this.status.buffered = this.shipper.buffered()
    const refusal = this.shipper.refusal()
    const failed = errors.length > 0 ? `${errors.length} collector(s) failed` : null
    this.status.last_error = refusal && failed ? `${refusal}; ${failed}` : (refusal ?? failed)
    // A full collection after each cycle (about 10 ms) keeps the agent's memory flat: what a cycle
    // allocates (result sets, the batch's JSON) is freed before the next database's cycle starts
    // instead of piling up until the collector runs on its own (bench/RESULTS.md, Agent).
    Bun.gc(true)
  }

  /** Detects a restart or a different node behind the DSN between cycles. */
  private async checkIdentity(session: Session<Ctx>): Promise<void> {
    try {
      if (!(await withDeadline(session.sameServer(), this.timings.statementTimeoutMs, 'identity check'))) {
        // Reconnect to read the full identity; connect() logs a change and clears the baselines.
        await this.disconnect()
        await this.connect()
      }
    } catch {
      // The ping loop deals with an unreachable server.
    }
  }
}
