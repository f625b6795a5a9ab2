// One database's collection loop, whatever the engine: connect, run every enabled collector under a
// deadline each poll interval, ship the batch, and watch the connection (ping every 10 s, reconnect
// after 3 failures). A collector that fails is reported for itself; the cycle goes on. When a
// reconnect finds another server behind the DSN (a different lineage), the runner logs the
// single-node warning and the collectors restart their deltas from a new baseline; a restart of the
// same server keeps the baselines (the collectors tell resets from the counters themselves).
// The collectors' state is staged per run and committed only when the run finished within its
// deadline, and saved next to the buffer after each cycle (src/agent/state.ts).
// Deadlines cancel: each collector run, ping and identity check gets an AbortSignal that aborts at its
// deadline (or when the runner stops); the session then stops the run's queries on the server and
// closes what stays stuck after a short grace, and the runner goes on without waiting for them. So a
// hung database costs one deadline per call, never a stalled reload or stop.
// The engine parts (how to connect, what identifies the server, the collectors' context) are a
// Session opened by the engine's runner: postgres-runner.ts and clickhouse-runner.ts.
// Availability: every ping (and every connection attempt) decides whether the database is up or down,
// with the failure's class (reachability.ts). Normal batches carry the state; while the database is down
// the runner sends, at every ping, a batch of the header and the availability section only (buffered like
// any batch when the API is down), and one more at once when the database answers again. While down and
// not connected, each ping is a connection attempt, so the database is seen back within one ping.
// A failed connection attempt is definite, whoever meets it (the ping, a collector, the waits sampler):
// the database is down with that class at once, the session is closed (the samplers stop) and the
// cycle ends; a vague timeout of the runner's own deadline keeps the class of such a failure seen just
// before. A refused login (authentication) pauses every connection attempt: retried after one ping
// interval, then twice as long each time up to 5 minutes, or at once on a config reload (retryNow()).
// A cycle in which no collector finished while the database is down sends no data batch: only the
// availability report goes, so the server's "last seen" stays at the last data.
import type { EngineName } from '../shared/collectors.ts'
import type { Availability, AvailabilityCause, DatabaseSettings, IngestBatch } from '../shared/wire.ts'
import { connectionFailure, dsnPassword, failureClass, failureMessage, isVagueTimeout } from './reachability.ts'
import type { AgentLogger, Collector, CollectorState } from './collectors/types.ts'
import { type DatabaseConfig, serverPollIntervalMs } from './config.ts'
import type { RunnerMetrics } from './metrics.ts'
import type { SendOutcome, Shipper } from './shipper.ts'
import { type ServerFacts, SettingsTracker } from './server-state.ts'
import { batchParts } from './split.ts'
import { SAVED_STATE_MAX_AGE_MS, type StateOwner, StagedState, loadState, saveState } from './state.ts'
import { MAX_POLL_INTERVAL_SECONDS } from '../shared/database-limits.ts'
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
  /** How long cancelled queries get to stop before their connections are closed (a stopped backend never answers); default 1 s. */
  cancelGraceMs?: number
}

const DEFAULT_CANCEL_GRACE_MS = 1_000
/** Longest pause between login attempts after the database refused the agent's login. */
export const AUTH_RETRY_MAX_MS = 5 * 60_000

export const defaultTimings: RunnerTimings = {
  pingIntervalMs: 10_000,
  reconnectAfterFailures: 3,
  statementTimeoutMs: 5_000,
  collectorDeadlineMs: 10_000,
  connectTimeoutS: 10,
  cancelGraceMs: DEFAULT_CANCEL_GRACE_MS,
}

export type CollectorPlan<Ctx> =
  | { collector: Collector<Ctx>; run: true }
  | { collector: Collector<Ctx>; run: false; reason: string }

const ENGINE_LABEL: Record<EngineName, string> = { postgres: 'PostgreSQL', clickhouse: 'ClickHouse' }

/** Which of `collectors` run against a server of `major`, and why the others do not. */
export function planFor<Ctx>(
  collectors: Collector<Ctx>[],
  config: Pick<DatabaseConfig, 'enabledCollectors'> & Partial<DatabaseConfig>,
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
    const unconfigured = collector.unconfigured?.(config)
    if (unconfigured !== undefined) return { collector, run: false, reason: unconfigured }
    if (settings?.disabled_collectors.includes(collector.name))
      return { collector, run: false, reason: 'disabled on the server' }
    if (collector.serverSwitch && settings && !settings[collector.serverSwitch]) {
      return { collector, run: false, reason: `${collector.serverSwitch} is off on the server` }
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
  /** Whether the database answers, since when, and why not (what the server is told); null before the first attempt. */
  availability: Availability | null
}

/**
 * Whether a collector on the object-statistics cadence (Collector.cadence) runs in the cycle at `now`,
 * its last finished run having been the cycle at `lastAt` (undefined: none yet in this runner, so the
 * first cycle after a start reads everything). Every cycle when the interval is at most the poll
 * interval. Otherwise once per window of the interval on the wall clock (minutes, for a minute): in
 * the first cycle of a new window at least half an interval after the last run, or any cycle a whole
 * interval after it (or before it: the clock went back). A read every `intervalMs` from the last one
 * would drift by a cycle's length each time and leave a minute without a sample now and then (the
 * server's minute series of tables and indexes show an unsampled minute as a gap); by the windows,
 * every minute gets one with a one-minute interval, its delta covering about the minute before.
 */
export function cadenceDue(now: number, lastAt: number | undefined, intervalMs: number, pollMs: number): boolean {
  if (lastAt === undefined || intervalMs <= pollMs || now < lastAt) return true
  const since = now - lastAt
  if (since >= intervalMs) return true
  return Math.floor(now / intervalMs) !== Math.floor(lastAt / intervalMs) && since >= intervalMs / 2
}

/** Rejects when `promise` takes longer than `ms`: with "<what> took longer than <ms> ms", or `what` itself when `whole`. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string, whole = false): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(whole ? what : `${what} took longer than ${ms} ms`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/**
 * Settles as `promise` does, or rejects with the signal's reason as soon as it aborts. `promise` is always
 * handled: when the signal had aborted already, its own later rejection (a query whose connection the
 * aborted session destroys) would otherwise be an unhandled rejection.
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {})
    return Promise.reject(signal.reason)
  }
  let onAbort: (() => void) | undefined
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
  })
  return Promise.race([promise, aborted]).finally(() => signal.removeEventListener('abort', onAbort!))
}

/**
 * Runs `work` under a deadline that cancels: after `ms` (rejecting with "<what> took longer than <ms> ms"),
 * or when `parent` aborts (with its reason), the signal handed to `work` aborts and the promise rejects at
 * once. What `work` returns late is dropped; the engine session stops its queries on the server.
 */
export function cancelAfter<T>(
  work: (signal: AbortSignal) => Promise<T>,
  ms: number,
  what: string,
  parent: AbortSignal,
): Promise<T> {
  const run = new AbortController()
  const timer = setTimeout(() => run.abort(new Error(`${what} took longer than ${ms} ms`)), ms)
  const onParent = () => run.abort(parent.reason)
  if (parent.aborted) onParent()
  else parent.addEventListener('abort', onParent, { once: true })
  let result: Promise<T>
  try {
    result = run.signal.aborted ? Promise.reject(run.signal.reason) : work(run.signal)
  } catch (e) {
    result = Promise.reject(e)
  }
  return abortable(result, run.signal).finally(() => {
    clearTimeout(timer)
    parent.removeEventListener('abort', onParent)
  })
}

/** What the collectors of every engine get from the runner. */
export interface SessionBase {
  name: string
  state: CollectorState
  notes: Map<string, string>
  infos: Map<string, string>
  log: AgentLogger
  /**
   * A background sample (the waits sampler) failed: a failed connection attempt marks the database
   * down and stops the samplers, so that they do not log in again and again (a refused login locks
   * accounts under LDAP or PAM).
   */
  sampleFailed?(error: unknown): void
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
  /**
   * The collectors' context; with a signal, its queries are the run's: once the signal aborts, the
   * session cancels them on the server, refuses new ones, and closes connections they leave stuck
   * after the cancel grace, so that later queries never wait behind them.
   */
  context(now: number, settings: DatabaseSettings | undefined, signal?: AbortSignal): Ctx
  /** Throws when the server does not answer; cancelled like a run when the signal aborts. */
  ping(signal: AbortSignal): Promise<void>
  /** False when the server behind the connection is no longer the one opened (a restart, a failover). */
  sameServer(signal: AbortSignal): Promise<boolean>
  /** The server's start, settings and reset times for the batch's server_state (server-state.ts). */
  facts?(signal: AbortSignal): Promise<ServerFacts>
  /** Closes the connections, waiting for none longer than the cancel grace. */
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
  /** The failure of the last ping while it failed: the database shows disconnected with it until a ping or a cycle succeeds. */
  private pingError: string | null = null
  /** A ping is under way: the next one waits for it (a ping's deadline may be longer than its period). */
  private pinging = false
  /** A connection attempt under way, shared by the cycle and the ping loop. */
  private connecting: Promise<void> | undefined
  /** Availability reports are sent one after the other; one waiting to go makes a later one unnecessary. */
  private reporting: Promise<unknown> = Promise.resolve()
  private reportQueued = false
  private stopped = false
  /** Sessions being closed (a failed connection attempt closes one without waiting): stop() waits for them. */
  private closing: Promise<void> = Promise.resolve()
  /** The latest failed connection attempt since the database last answered: a vague timeout after it keeps its class. */
  private lastConnectionFailure: { error: unknown; at: number } | undefined
  /** Set while the database refuses the agent's login: no connection attempt before `at`; `delayMs` doubles per refusal. */
  private authRetry: { at: number; delayMs: number } | undefined
  /** Aborted by stop(): cancels the call in progress (a collector, a ping, connecting). */
  private readonly lifetime = new AbortController()
  private running: Promise<void> | undefined
  /** The collectors' memory across cycles (previous samples, watermarks). */
  protected readonly state = new Map<string, unknown>()
  /** The collectors' notes for the health status (SessionBase.notes). */
  private readonly notes = new Map<string, string>()
  /** The collectors' info notes (SessionBase.infos): sent with level 'info', not in the health status. */
  private readonly infos = new Map<string, string>()
  /** When this run for the database started: the server tells an agent (re)start by a new value. */
  private readonly startedAt = Date.now()
  /** Which settings digest went out last (the settings travel only when it changes). */
  private readonly settingsSent = new SettingsTracker()
  readonly status: RunnerStatus
  /** The agent's /metrics series of this database's collectors (metrics.ts); none: not recorded. */
  metrics: RunnerMetrics | undefined

  protected abstract readonly collectors: Collector<Ctx>[]
  /** Connects; the session's context carries `base`. Gives up, closing what it opened, when `signal` aborts. */
  protected abstract open(base: SessionBase, signal: AbortSignal): Promise<Session<Ctx>>
  /** Host and port for the batch's database description. */
  protected abstract endpoint(): { host: string; port: number }
  /** What the DSN points at, without its password: a saved state is used only for the same target. */
  protected abstract target(): string

  /** The saved state read at construction, applied at the first connection if it belongs to that server. */
  private saved: ReturnType<typeof loadState> = { kind: 'none' }
  /** Batches of the saved state's last cycle, resent before the first new one (see state.ts). */
  private resend: IngestBatch[] = []
  /**
   * When the cycle whose counters are the baseline ran (the saved state's time after a restart): a
   * batch's deltas cover the time since, which its covered_seconds says (the server spreads a delta
   * over the minutes it covers, so a gap's counts do not stand as a spike in its first minute back).
   */
  private baselineAt: number | undefined
  /** The saved-state file failed to write: logged once until it works again. */
  private saveFailing = false
  /**
   * By collector name, the cycle (its `now`) of the last run of each collector on the object-statistics
   * cadence whose state was committed, and the health status it left: cadenceDue decides from it. In
   * memory only, so a new runner (an agent start, a config reload) reads everything in its first cycle;
   * its baselines, saved with the state, still make that cycle's deltas exact.
   */
  private readonly cadenceRunAt = new Map<string, { at: number; status: string }>()

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
      availability: null,
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

  /** Applies the server-side settings of the latest accepted batch from the next cycle on. */
  applySettings(settings: DatabaseSettings): void {
    const serverMs = settings.poll_interval_seconds * 1000
    if (serverMs !== this.config.pollIntervalMs && serverMs !== (this.settings?.poll_interval_seconds ?? 0) * 1000) {
      // The config's poll_interval registers a database; from then on the server's setting is the one.
      this.log.info(
        'the poll interval set on the server applies, not poll_interval in the config; change it on the server (PATCH /databases/{id}, or the dashboard)',
        {
          database: this.config.name,
          server_s: settings.poll_interval_seconds,
          config_s: this.config.pollIntervalMs / 1000,
        },
      )
    }
    this.settings = settings
  }

  /** RunnerTimings.cancelGraceMs, or its default. */
  protected get cancelGraceMs(): number {
    return this.timings.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS
  }

  private get pollIntervalMs(): number {
    return this.settings
      ? serverPollIntervalMs(this.settings.poll_interval_seconds, this.config.pollIntervalMs)
      : this.config.pollIntervalMs
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

  /**
   * Stops the loop. A cycle stuck in a query or in connecting is cancelled, not waited for: the stop takes
   * about the cancel grace on a hung database. What the cycle collected before is still shipped (its
   * collectors' state is committed), and the state is saved.
   */
  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.cycleTimer)
    clearInterval(this.pingTimer)
    this.lifetime.abort(new Error('the agent is stopping this database'))
    await this.running
    await this.reporting
    this.saveState()
    await this.disconnect()
    await this.closing
    await this.shipper.stop()
    this.status.state = 'stopped'
  }

  /** The owner of the state: the DSN's target and the server's lineage, once connected. */
  private owner(): StateOwner | undefined {
    if (this.lineage === undefined) return undefined
    return { target: this.target(), lineage: this.lineage }
  }

  /**
   * Saves `state` (and the batches that carry it) next to the buffer; a failure (a full disk) is logged
   * once per episode. `at`: when the cycle whose counters `state` holds ran (the runner's own state: its
   * baseline's cycle), so that after a restart the first batch covers the time since then.
   */
  private saveState(
    state: Map<string, unknown> = this.state,
    pending: string[] = [],
    at: number = this.baselineAt ?? Date.now(),
  ): void {
    const owner = this.owner()
    if (!this.stateFile || !owner) return
    try {
      saveState(this.stateFile, owner, state, at, pending)
      if (this.saveFailing)
        this.log.info('the collector state is saved again', { database: this.config.name, file: this.stateFile })
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
      this.log.info(
        'the saved collector state belongs to another server or DSN target; statistics start from a new baseline',
        {
          database: this.config.name,
        },
      )
      return
    }
    const age = Date.now() - saved.savedAt
    if (age > SAVED_STATE_MAX_AGE_MS || age < 0) {
      // Hours of activity sent as one cycle's deltas would stand as a spike in one minute of the charts.
      this.log.warn(
        'the saved collector state is older than an hour; statistics start from a new baseline and the gap is not counted',
        {
          database: this.config.name,
          saved_at: new Date(saved.savedAt).toISOString(),
        },
      )
      return
    }
    for (const [key, value] of saved.entries) this.state.set(key, value)
    this.resend = saved.pending
    this.baselineAt = saved.savedAt
    this.log.info('statistics go on from the saved baseline', {
      database: this.config.name,
      saved_at: new Date(saved.savedAt).toISOString(),
    })
  }

  private async connect(): Promise<void> {
    let opened: Session<Ctx> | undefined
    const base: SessionBase = {
      name: this.config.name,
      state: this.state,
      notes: this.notes,
      infos: this.infos,
      log: this.log,
      sampleFailed: (error) => {
        if (opened) this.connectionFailed(error, opened)
      },
    }
    const session = await this.open(base, this.lifetime.signal)
    opened = session
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
        this.infos.clear()
        this.cadenceRunAt.clear()
      }
    }
    this.identity = session.identity
    this.lineage = session.lineage
    this.session = session
    this.status.server_version = session.version
    this.failedPings = 0
    this.pingError = null
    this.lastConnectionFailure = undefined
    this.authRetry = undefined
    this.startSamplers(session)
    if (this.status.state !== 'connected')
      this.log.info('connected', { database: this.config.name, server_version: session.version })
    this.status.state = 'connected'
    this.wentUp()
  }

  private plans(session: Session<Ctx>): CollectorPlan<Ctx>[] {
    return planFor(this.collectors, this.config, session.major, this.settings)
  }

  private startSamplers(session: Session<Ctx>) {
    for (const stop of this.stopSamplers) stop()
    this.stopSamplers = []
    for (const plan of this.plans(session)) {
      if (plan.run && plan.collector.start)
        this.stopSamplers.push(plan.collector.start(session.context(Date.now(), this.settings)))
    }
  }

  private async disconnect(): Promise<void> {
    for (const stop of this.stopSamplers) stop()
    this.stopSamplers = []
    const session = this.session
    this.session = undefined
    const closing = session?.close().catch(() => {})
    this.closing = Promise.all([this.closing, closing]).then(() => {})
    await closing
  }

  /**
   * A failed connection attempt met on `session` by the ping, a collector or a sampler (reachability.ts,
   * connectionFailure): the database is down with its class at once (reported at once the first time),
   * and the session is closed, so that neither the samplers nor the rest of the cycle try again; the
   * ping loop reconnects (after a refused login, when its pause is over). False when `error` is a query's
   * own failure, or the session was closed already.
   */
  private connectionFailed(error: unknown, session: Session<Ctx>): boolean {
    if (this.stopped || this.session !== session || connectionFailure(error) === undefined) return false
    const wasDown = this.status.availability?.state === 'down'
    this.status.state = 'disconnected'
    this.status.last_error = (error as Error)?.message ?? String(error)
    this.attemptFailed(error)
    void this.disconnect()
    if (!wasDown) this.report()
    return true
  }

  /** A connection attempt failed: down with its class; a refused login pauses the attempts. */
  private attemptFailed(error: unknown): void {
    if (connectionFailure(error) !== undefined) this.lastConnectionFailure = { error, at: Date.now() }
    this.wentDown(error)
    if (failureClass(error) === 'authentication') this.loginRefused(error)
    else this.authRetry = undefined
  }

  /**
   * The database refused the agent's login: no connection attempt for one ping interval, then twice as
   * long after each refused retry, up to AUTH_RETRY_MAX_MS. Logged once; refusals met during the pause
   * (a query that was under way) neither log nor lengthen it.
   */
  private loginRefused(error: unknown): void {
    const before = this.authRetry
    if (before && this.loginPaused()) return
    const delayMs = before ? Math.min(before.delayMs * 2, AUTH_RETRY_MAX_MS) : this.timings.pingIntervalMs
    this.authRetry = { at: Date.now() + delayMs, delayMs }
    const fields = {
      database: this.config.name,
      retry_in_s: delayMs / 1000,
      cause: failureMessage(error, dsnPassword(this.config.dsn)),
    }
    if (!before) {
      this.log.error(
        "the database refused the agent's login; no collector connects until it is accepted (retried after a ping interval, then twice as long each time up to 5 min, or at once on a config reload or SIGHUP)",
        fields,
      )
    } else {
      this.log.debug('login still refused', fields)
    }
  }

  /** True while a refused login keeps the agent from connecting (half a ping interval early counts: the ping timer's jitter). */
  private loginPaused(): boolean {
    return this.authRetry !== undefined && Date.now() + this.timings.pingIntervalMs / 2 < this.authRetry.at
  }

  /** A config reload or SIGHUP: a login refused before is tried again at once (the password may be fixed). */
  retryNow(): void {
    if (!this.authRetry || this.stopped) return
    this.authRetry.at = 0
    void this.ping()
  }

  /**
   * Health ping. The first failure marks the database disconnected (with the failure as its last error)
   * and down (its class and message reported to the server at once, then at every ping while it stays
   * down); a successful ping or cycle marks it connected and up again. After enough consecutive failures
   * the connection is closed; while down without a connection, each ping tries to connect.
   */
  private async ping(): Promise<void> {
    if (this.pinging || this.stopped) return
    const session = this.session
    if (!session) {
      // Never connected yet: the first cycle's attempt decides. Down: this ping is a connection attempt.
      if (this.status.availability?.state !== 'down') return
      this.pinging = true
      try {
        // A refused login: no attempt before its retry time; the report below still goes.
        if (!this.loginPaused()) await this.ensureConnected()
      } catch (e) {
        if (!this.stopped) this.attemptFailed(e)
      } finally {
        this.pinging = false
      }
      if (this.status.availability?.state === 'down' && !this.stopped) this.report()
      return
    }
    this.pinging = true
    try {
      await cancelAfter(
        (signal) => session.ping(signal),
        this.timings.statementTimeoutMs,
        'health ping',
        this.lifetime.signal,
      )
      this.failedPings = 0
      this.lastConnectionFailure = undefined
      if (this.session === session) {
        if (this.pingError !== null) this.markConnected()
        this.wentUp()
      }
    } catch (e) {
      if (this.stopped) return
      this.failedPings++
      this.pingError = `health ping failed: ${(e as Error).message}`
      this.status.state = 'disconnected'
      this.status.last_error = this.pingError
      this.log.warn('health ping failed', {
        database: this.config.name,
        failures: this.failedPings,
        cause: (e as Error).message,
      })
      if (this.connectionFailed(e, session)) {
        // Down, and the session closed: the next ping is a connection attempt.
      } else if (this.session !== session) {
        // Closed under the ping (a collector or a sampler met a failed connection attempt): that said why.
      } else {
        this.wentDown(e)
      }
      if (this.session === session && this.failedPings >= this.timings.reconnectAfterFailures) {
        this.log.warn('reconnecting after consecutive failed pings', {
          database: this.config.name,
          failures: this.failedPings,
        })
        await this.disconnect()
      }
    } finally {
      this.pinging = false
    }
    if (this.status.availability?.state === 'down' && !this.stopped) this.report()
  }

  /** Connects, or joins the attempt under way (the cycle's or the ping loop's). */
  private ensureConnected(): Promise<void> {
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined
    })
    return this.connecting
  }

  /**
   * The database failed a ping or a connection attempt: down since the first such failure, with the
   * latest definite cause. A vague timeout (the runner's own deadline) says less than a failed connection
   * attempt met just before it (postgres.js retrying a refused connection until the deadline): that
   * attempt's class and message are taken; while down, the known cause stays.
   */
  private wentDown(error: unknown): void {
    const before = this.status.availability
    let telling = error
    if (isVagueTimeout(error)) {
      const seen = this.lastConnectionFailure
      if (seen && Date.now() - seen.at <= 3 * this.timings.pingIntervalMs) telling = seen.error
      else if (before?.state === 'down') return
    }
    const cause: AvailabilityCause = failureClass(telling)
    const message = failureMessage(telling, dsnPassword(this.config.dsn))
    const since = before?.state === 'down' ? before.since : Date.now()
    this.status.availability = { state: 'down', since, cause, message }
    if (before?.state !== 'down') {
      this.log.warn('the database is unreachable; reporting it down to the server', {
        database: this.config.name,
        cause,
        message,
      })
    }
  }

  /** The database answered: up again (reported to the server once, at once) or for the first time. */
  private wentUp(): void {
    const before = this.status.availability
    if (before?.state === 'up') return
    this.status.availability = { state: 'up', since: Date.now() }
    if (before?.state === 'down') {
      this.log.info('the database is reachable again', {
        database: this.config.name,
        down_for_s: Math.round((Date.now() - before.since) / 1000),
      })
      this.report()
    }
  }

  /**
   * Sends the current availability alone with the batch header (never blocking the ping loop): one at a
   * time; while one is on its way, at most one more waits, and it carries the state as it is when it goes.
   */
  private report(): void {
    if (this.reportQueued) return
    this.reportQueued = true
    this.reporting = this.reporting.then(async () => {
      this.reportQueued = false
      const availability = this.status.availability
      if (!availability || this.stopped) return
      const batch: IngestBatch = {
        batch_id: crypto.randomUUID(),
        collected_at: Date.now(),
        // Reports come once a ping: the server's gap rule (3 intervals) must not read them as a silent agent.
        interval_seconds: Math.max(this.pollIntervalMs, this.timings.pingIntervalMs) / 1000,
        agent_version: VERSION,
        database: {
          name: this.config.name,
          engine: this.config.engine,
          ...this.endpoint(),
          ...(Object.keys(this.config.tags).length > 0 ? { tags: this.config.tags } : {}),
        },
        availability,
      }
      await this.shipper.send(batch)
      this.status.buffered = this.shipper.buffered()
    })
  }

  /** The database answered again after a failed ping. */
  private markConnected(): void {
    if (this.status.last_error === this.pingError) this.status.last_error = null
    this.pingError = null
    if (this.status.state === 'disconnected') {
      this.status.state = 'connected'
      this.log.info('the database answers again', { database: this.config.name })
    }
  }

  /**
   * The seconds a cycle at `now` covers: the time since the baseline's cycle, whether longer than the poll
   * interval (a gap: the agent stopped, the database did not answer) or shorter (a cycle run early: a
   * test's, an action's, the first ones of a long poll interval); the poll interval while there is no
   * baseline.
   */
  private coveredSeconds(now: number): number {
    if (this.baselineAt === undefined || now < this.baselineAt) return this.pollIntervalMs / 1000
    return Math.min(MAX_POLL_INTERVAL_SECONDS, Math.round((now - this.baselineAt) / 1000))
  }

  /** One collection cycle; public so tests can drive cycles directly. */
  async cycle(): Promise<void> {
    const now = Date.now()
    this.status.last_cycle_at = new Date(now).toISOString()
    if (!this.session) {
      if (this.loginPaused()) {
        // The database refused the login: no attempt until the pause is over (the ping loop reports it down).
        this.status.state = 'disconnected'
        return
      }
      try {
        await this.ensureConnected()
      } catch (e) {
        if (this.lifetime.signal.aborted) return
        const message = (e as Error).message
        if (this.status.state !== 'disconnected' || this.status.last_error !== message) {
          this.log.error('cannot connect', { database: this.config.name, cause: message })
        }
        this.status.state = 'disconnected'
        this.status.last_error = message
        const wasDown = this.status.availability?.state === 'down'
        this.attemptFailed(e)
        // The first failure is reported at once; the ping loop reports it again at every ping.
        if (!wasDown) this.report()
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
    if (this.resend.length > 0) {
      // The saved state's last cycle may have been cut short while sending: its batches go again first.
      const resend = this.resend
      this.resend = []
      this.log.info('sending again the batches of the cycle before the restart (the server applies each once)', {
        database: this.config.name,
        batches: resend.length,
      })
      for (const part of resend) await this.shipper.send(part)
    }
    const batch: IngestBatch = {
      batch_id: crypto.randomUUID(),
      collected_at: now,
      interval_seconds: this.pollIntervalMs / 1000,
      covered_seconds: this.coveredSeconds(now),
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
    /** The state of the runs that finished in time, committed once their batch is delivered or buffered. */
    const stages: StagedState[] = []
    /** The collectors on the object-statistics cadence that finished, recorded as run once their state is committed. */
    const onCadence: string[] = []
    let finished = 0
    for (const plan of this.plans(session)) {
      if (!plan.run) {
        this.status.collectors[plan.collector.name] = `skipped: ${plan.reason}`
        continue
      }
      // Per-object statistics not due this cycle: not run, and their section left out of the batch (the
      // server keeps the latest tables and indexes; a batch without them is no sample of them). Their
      // baselines stay, so the next run's deltas cover the cycles skipped.
      const ran = plan.collector.cadence ? this.cadenceRunAt.get(plan.collector.name) : undefined
      if (ran && !cadenceDue(now, ran.at, this.config.objectStatsIntervalMs, this.pollIntervalMs)) {
        this.status.collectors[plan.collector.name] =
          `${ran.status}, ${Math.round((now - ran.at) / 1000)} s ago (object_stats_interval ${this.config.objectStatsIntervalMs / 1000}s)`
        continue
      }
      // Stopping, or the ping loop closed the session (the next cycle reconnects): the cycle ends here.
      if (this.lifetime.signal.aborted || this.session !== session) break
      const started = performance.now()
      // The run's state reaches the runner's only if it finishes within the deadline; past it, the run's
      // queries are cancelled and whatever it returns later is dropped.
      const staged = new StagedState(this.state)
      try {
        const sections = await cancelAfter(
          (signal) => plan.collector.collect({ ...session.context(now, this.settings, signal), state: staged }),
          Math.max(this.timings.collectorDeadlineMs, plan.collector.deadlineMs?.(this.config) ?? 0),
          plan.collector.name,
          this.lifetime.signal,
        )
        stages.push(staged)
        Object.assign(batch, sections)
        finished++
        if (plan.collector.cadence) onCadence.push(plan.collector.name)
        this.metrics?.collector(plan.collector.name).duration.since(started)
        const note = this.notes.get(plan.collector.name)
        this.status.collectors[plan.collector.name] =
          `ok in ${Math.round(performance.now() - started)} ms${note ? `; ${note}` : ''}`
      } catch (e) {
        // Stopping is not the collector's failure: the run is dropped and the cycle ends. Nor is a session
        // closed under the run (the ping or a sampler met a failed connection attempt and said so).
        if (this.lifetime.signal.aborted || this.session !== session) break
        const message = (e as Error).message
        const observed = this.metrics?.collector(plan.collector.name)
        observed?.duration.since(started)
        observed?.failures.inc()
        errors.push({ collector: plan.collector.name, message: message.slice(0, 2000) })
        this.status.collectors[plan.collector.name] = `failed: ${message}`
        this.log.warn('collector failed', {
          database: this.config.name,
          collector: plan.collector.name,
          cause: message,
        })
        // A failed connection attempt: the database is down and the session closed; the other
        // collectors would only try again (a refused login each).
        if (this.connectionFailed(e, session)) break
      }
    }
    // Stopped before any collector finished: nothing was committed, so there is nothing to ship.
    if (this.lifetime.signal.aborted && finished === 0 && errors.length === 0) return
    // Down, and no collector finished: no data batch (it would tell the server the data is newer than
    // the outage); the availability report goes instead, at once the first time, then at every ping.
    if (finished === 0 && this.status.availability?.state === 'down') return
    batch.server_state = await this.serverState(session)
    if (errors.length > 0) batch.collector_errors = errors
    if (this.status.availability) batch.availability = this.status.availability
    this.metrics?.exported?.(batch)
    batch.collector_notes = [
      ...[...this.notes].map(([collector, message]) => ({ collector, message: message.slice(0, 2000) })),
      ...[...this.infos].map(([collector, message]) => ({
        collector,
        message: message.slice(0, 2000),
        level: 'info' as const,
      })),
    ]
    const parts = batchParts(batch, this.log)
    const bodies = parts.map((part) => JSON.stringify(part))
    // The baselines this cycle moved to are saved with the parts that carry the deltas, before any part
    // is sent: an agent killed while sending resends them all at start (the server applies each once),
    // instead of computing those deltas again from the older baselines.
    const after = new Map(this.state)
    for (const staged of stages) staged.applyTo(after)
    this.saveState(after, bodies, stages.length > 0 ? now : undefined)
    const outcomes: SendOutcome[] = []
    for (const [i, part] of parts.entries()) outcomes.push(await this.shipper.send(part, bodies[i]))
    if (outcomes.every((outcome) => outcome === 'lost')) {
      // Neither delivered nor kept (an outage with a failing buffer): the baselines stay, so the counter
      // deltas go with the next batch; this cycle's lists and gauges are lost, as the shipper counted.
      this.saveState()
      this.settingsSent.lost()
    } else {
      for (const staged of stages) staged.commit()
      for (const name of onCadence) this.cadenceRunAt.set(name, { at: now, status: this.status.collectors[name] ?? '' })
      // A cycle where no collector finished (the database did not answer) moved no baseline: the next
      // batch's deltas cover this cycle's time too.
      if (stages.length > 0) this.baselineAt = now
    }
    this.status.buffered = this.shipper.buffered()
    const refusal = this.shipper.refusal()
    const failed = errors.length > 0 ? `${errors.length} collector(s) failed` : null
    this.status.last_error = refusal && failed ? `${refusal}; ${failed}` : (refusal ?? failed)
    if (errors.length === 0 && !this.lifetime.signal.aborted && this.session === session) {
      this.pingError = null
      this.status.state = 'connected'
    }
    // A full collection after each cycle (about 10 ms) keeps the agent's memory flat: what a cycle
    // allocates (result sets, the batch's JSON) is freed before the next database's cycle starts
    // instead of piling up until the collector runs on its own (bench/RESULTS.md, Agent).
    Bun.gc(true)
  }

  /**
   * The batch's server_state: the agent's start always, the server's facts when they could be read within
   * a collector's deadline (a failure leaves them out for this cycle, logged at debug level).
   */
  private async serverState(session: Session<Ctx>): Promise<IngestBatch['server_state']> {
    const facts = session.facts
    if (!facts || this.lifetime.signal.aborted || this.session !== session) return { agent_started_at: this.startedAt }
    try {
      const read = await cancelAfter(
        (signal) => facts.call(session, signal),
        this.timings.collectorDeadlineMs,
        'server state',
        this.lifetime.signal,
      )
      return this.settingsSent.section(read, this.startedAt)
    } catch (e) {
      this.log.debug('server state not read this cycle', { database: this.config.name, cause: (e as Error).message })
      return { agent_started_at: this.startedAt }
    }
  }

  /** Detects a restart or a different node behind the DSN between cycles. */
  private async checkIdentity(session: Session<Ctx>): Promise<void> {
    let same: boolean
    try {
      same = await cancelAfter(
        (signal) => session.sameServer(signal),
        this.timings.statementTimeoutMs,
        'identity check',
        this.lifetime.signal,
      )
    } catch (e) {
      // A failed connection attempt marks the database down; the ping loop deals with anything else.
      this.connectionFailed(e, session)
      return
    }
    if (same) return
    // Reconnect to read the full identity; connect() logs a change and clears the baselines.
    await this.disconnect()
    try {
      await this.ensureConnected()
    } catch (e) {
      if (this.lifetime.signal.aborted) return
      const wasDown = this.status.availability?.state === 'down'
      this.attemptFailed(e)
      if (!wasDown) this.report()
    }
  }
}
